//! Searching file contents, along ripgrep's lines: the matcher (`jsregex`, the JavaScript-regex
//! engine `grep` and the shell allow list use), the searcher (`searcher`: lines, context, the
//! time budget, threads) and the printer (`printer`: what `grep` returns in each mode).

pub mod jsregex;
pub mod printer;
pub mod searcher;

pub use jsregex::{JsRegex, Slow};
