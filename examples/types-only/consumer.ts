// A project that imports only corral, with no Node types of its own (TypeScript 7 includes no
// @types package a tsconfig does not name): corral's declarations bring what they need.
import { NodeWorkspace, createFsTools, createWorkspaceToolsHandler, WorkspaceToolRegistry } from 'corral';

const workspace = new NodeWorkspace({ root: '.' });
export const tools = createFsTools(workspace);
export const handler = createWorkspaceToolsHandler({ registry: new WorkspaceToolRegistry(), authenticate: (token) => (token ? 'w' : null) });

// Every subpath's types too, each bringing Node's types itself.
import { ToolRegistry } from 'corral/executor';
import { MemoryWorkspace } from 'corral/testing';
import { toAiSdkSandbox } from 'corral/ai-sdk';
import { createEditor } from 'corral/openai-agents';
import { runConformance } from 'corral/conformance';

export const registry = new ToolRegistry().registerMany(tools);
export const sandbox = toAiSdkSandbox(workspace);
export const editor = createEditor(workspace);
export const subpaths = [new MemoryWorkspace(), runConformance];
