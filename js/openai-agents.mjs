import m from './openai-agents.js';
export const { toOpenAIAgentsTools } = m;
export default m;
