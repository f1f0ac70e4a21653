export { MemoryWorkspace } from '../index';
