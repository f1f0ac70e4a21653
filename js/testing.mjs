import testing from './testing.js';
export const { MemoryWorkspace } = testing;
export default testing;
