//! corral's core: every behaviour of the package, with no napi dependency.

pub mod broker;
pub mod cancel;
pub mod checkpoints;
pub mod error;
pub mod facade_options;
pub mod fs;
pub mod options;
pub mod path;
pub mod prompt;
pub mod redact;
pub mod registry;
pub mod remote;
pub mod sandbox;
pub mod search;
pub mod shell;
pub mod templates;
pub mod text;
pub mod tools;

pub use error::{Code, Error, Result};

/// How many threads a job spread over the cores uses (a walk, a scan, a batch of checks): one a
/// core, at most 8 (2 when the count is unknown).
pub(crate) fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).min(8)
}
