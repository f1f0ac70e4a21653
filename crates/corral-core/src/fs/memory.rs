//! An in-memory tree.
pub struct MemoryFs;
