'use strict';
// The tool registry and executor: a thrown WorkspaceError becomes a result the model reads.

const { WorkspaceError, ConfigurationError } = require('./index.js');

const isWorkspaceError = (e) => e instanceof WorkspaceError || (e !== null && typeof e === 'object' && e.name === 'WorkspaceError');

async function executeTool(tool, args, ctx) {
  try {
    return await tool.execute(args, ctx);
  } catch (e) {
    if (isWorkspaceError(e)) return { error: 'WorkspaceError', toolName: tool.name, message: e.message };
    throw e;
  }
}

class ToolRegistry {
  #tools = new Map();
  register(tool) {
    if (!tool || typeof tool.name !== 'string' || typeof tool.execute !== 'function') {
      throw new ConfigurationError('ToolRegistry.register: a tool needs a string name and an execute function.');
    }
    this.#tools.set(tool.name, tool);
    return this;
  }
  registerMany(tools) {
    for (const t of tools) this.register(t);
    return this;
  }
  get(name) { return this.#tools.get(name); }
  has(name) { return this.#tools.has(name); }
  list() { return [...this.#tools.values()]; }
  async execute(name, args, ctx) {
    const tool = this.#tools.get(name);
    if (!tool) return { error: 'WorkspaceError', toolName: name, message: `Unknown tool: ${name}. Available: ${[...this.#tools.keys()].join(', ')}.` };
    return executeTool(tool, args, ctx);
  }
}

module.exports = { ToolRegistry, executeTool };
