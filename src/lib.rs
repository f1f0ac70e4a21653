//! The napi binding: converts JS values to core types and back. No behaviour lives here.
//!
//! Errors cross as JavaScript `Error`s whose `code` is the core's code and whose `message` is the
//! core's message (an error the caller's JavaScript threw goes back as the very value it was);
//! the facade (index.js) gives them the class the code calls for. Every call from Rust into JS
//! goes through one `JsCallback` type, the channel of the core's `remote` interfaces: a weak
//! threadsafe function whose (async) result is `{ ok: value }` or `{ err: { code, message } }`.

#![deny(clippy::all)]
// napi-derive leaves the registration of exported functions out of test builds, so there they
// look unused.
#![cfg_attr(test, allow(dead_code))]

mod broker;
mod callbacks;
mod ckpt;
mod errors;
mod fs;
mod ops;
mod redact;
mod sandbox;
#[cfg(target_os = "linux")]
mod session;
mod shell;
mod tools;
mod workspace_tools;

pub(crate) use callbacks::{functions, CancelToken, JsCallback, JsFn};
pub(crate) use errors::{spawn, spawn_in_place, CoreResult, IntoNapi, Result};
pub(crate) use fs::NativeFs;
