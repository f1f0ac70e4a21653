import corral from './index.js';
export const { WorkspaceError, ConfigurationError, NodeWorkspace, MemoryWorkspace, createFsTools, defineTool, normalizeWorkspacePath } = corral;
export default corral;
