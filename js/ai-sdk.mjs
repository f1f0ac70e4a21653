import m from './ai-sdk.js';
export const { toAiSdkTools } = m;
export default m;
