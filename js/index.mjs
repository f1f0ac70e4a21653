import corral from './index.js';
export const { WorkspaceError, ConfigurationError, NodeWorkspace, MemoryWorkspace, createFsTools, createShellTool, createCredentialBroker, createRedactor, SandboxShell, NoopSandbox, SubprocessSandbox, LinuxSandbox, KubernetesSandbox, KubernetesWorkspace, WorkspaceCheckpoints, FileWorkspaceCheckpointStore, defineTool, normalizeWorkspacePath, readOnlyCommands, workspacePrompt, createTemplateTool, MemoryToolStore, SqliteToolStore, PostgresToolStore, WorkspaceToolRegistry, createWorkspaceToolsHandler } = corral;
export default corral;
