import corral from './index.js';
export const { WorkspaceError, ConfigurationError, NodeWorkspace, MemoryWorkspace, createFsTools, createShellTool, createCredentialBroker, SandboxShell, NoopSandbox, SubprocessSandbox, WorkspaceCheckpoints, FileWorkspaceCheckpointStore, defineTool, normalizeWorkspacePath, readOnlyCommands } = corral;
export default corral;
