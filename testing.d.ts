export { MemoryWorkspace } from './index';
