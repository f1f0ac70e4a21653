import m from './openai-agents.js';
export const { toOpenAIAgentsTools, corralSandboxClient, createEditor } = m;
export default m;
