import m from './ai-sdk.js';
export const { toAiSdkTools, toAiSdkSandbox } = m;
export default m;
