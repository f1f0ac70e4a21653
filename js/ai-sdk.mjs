import m from './ai-sdk.js';
export const { toAiSdkTools, toAiSdkSandbox, createCorralHarnessSandbox } = m;
export default m;
