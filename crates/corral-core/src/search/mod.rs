//! Searching file contents: the JavaScript-regex engine that `grep` and the shell allow list use.

pub mod jsregex;

pub use jsregex::{JsRegex, Slow};
