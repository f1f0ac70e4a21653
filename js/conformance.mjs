import m from './conformance.js';
export const { runConformance, ConformanceError } = m;
export default m;
