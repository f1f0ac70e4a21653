// A project that imports only corral, with no Node types of its own (TypeScript 7 includes no
// @types package a tsconfig does not name): corral's declarations bring what they need.
import { NodeWorkspace, createFsTools, createWorkspaceToolsHandler, WorkspaceToolRegistry } from 'corral';

const workspace = new NodeWorkspace({ root: '.' });
export const tools = createFsTools(workspace);
export const handler = createWorkspaceToolsHandler({ registry: new WorkspaceToolRegistry(), authenticate: (token) => (token ? 'w' : null) });
