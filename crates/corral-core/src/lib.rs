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
pub mod registry;
pub mod remote;
pub mod sandbox;
pub mod search;
pub mod shell;
pub mod templates;
pub mod tools;

pub use error::{Code, Error, Result};
