//! corral's core: every behaviour of the package, with no napi dependency.

pub mod broker;
pub mod error;
pub mod fs;
pub mod path;
pub mod shell;

pub use error::{Code, Error, Result};
