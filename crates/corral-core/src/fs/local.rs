//! A directory on disk.
pub struct LocalFs;
