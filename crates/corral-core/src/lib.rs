//! corral's core: every behaviour of the package, with no napi dependency.

pub mod broker;
pub mod cgroup;
pub mod checkpoints;
pub mod error;
pub mod exec;
pub mod fs;
pub mod options;
pub mod path;
pub mod rules;
pub mod sandbox;
pub mod search;
pub mod shell;
pub mod shell_tool;
pub mod tools;

pub use error::{Code, Error, Result};
