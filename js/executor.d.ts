import type { Tool, ToolContext } from '../index';

export interface ToolErrorResult {
  error: 'WorkspaceError';
  toolName: string;
  message: string;
}

/** Runs a tool; a thrown WorkspaceError becomes a ToolErrorResult, anything else is rethrown. */
export declare function executeTool<A, R>(tool: Tool<A, R>, args: A, ctx?: ToolContext): Promise<R | ToolErrorResult>;

export declare class ToolRegistry {
  register(tool: Tool): this;
  registerMany(tools: Iterable<Tool>): this;
  get(name: string): Tool | undefined;
  has(name: string): boolean;
  list(): Tool[];
  execute(name: string, args: unknown, ctx?: ToolContext): Promise<unknown>;
}
