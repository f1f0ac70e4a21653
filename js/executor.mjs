import executor from './executor.js';
export const { ToolRegistry, executeTool } = executor;
export default executor;
