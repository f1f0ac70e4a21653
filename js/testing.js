'use strict';
// Test helpers. MemoryWorkspace also lives in the main entry.
const { MemoryWorkspace } = require('./index.js');
module.exports = { MemoryWorkspace };
