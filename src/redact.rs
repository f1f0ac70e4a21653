//! `createRedactor` and the resolution of a surface's `redact` option.

use std::sync::Arc;

use napi_derive::napi;
use serde_json::Value;

use corral_core::redact::{Redactor, RedactorOptions};

use crate::{IntoNapi, Result};

/// A `Redactor`: one set of secrets and one numbering of markers per session, to pass to every
/// surface of one agent.
#[napi]
pub struct NativeRedactor {
    pub(crate) inner: Arc<Redactor>,
}

#[napi]
impl NativeRedactor {
    /// `createRedactor({ values, rules, allow })`.
    #[napi(constructor, catch_unwind)]
    pub fn new(options: Value) -> Result<Self> {
        let o = RedactorOptions::from_options("createRedactor", &options).napi()?;
        Ok(NativeRedactor { inner: Arc::new(Redactor::new(o)) })
    }

    /// `text` with each secret replaced by its marker in `sessionId` (default `'default'`).
    #[napi(catch_unwind)]
    pub fn redact(&self, text: String, session_id: Option<String>) -> String {
        let session = session_id.unwrap_or_else(|| corral_core::tools::DEFAULT_SESSION.to_string());
        self.inner.redact(&text, &session).into_owned()
    }

    /// Every string in `value` redacted (audit events' arguments).
    #[napi(catch_unwind)]
    pub fn redact_json(&self, value: Value, session_id: String) -> Value {
        self.inner.redact_json(value, &session_id)
    }
}

/// The redactor a surface's `{ redact }` option names (`null` for `redact: false`); `given` is
/// the Redactor it holds, if it holds one.
#[napi(catch_unwind)]
pub fn redactor_for(options: Value, given: Option<&NativeRedactor>) -> Result<Option<NativeRedactor>> {
    let r = corral_core::options::Reader::new("toolsFor", &options, &["redact"]).napi()?;
    let inner = corral_core::redact::from_option(&r, given.map(|g| g.inner.clone())).napi()?;
    Ok(inner.map(|inner| NativeRedactor { inner }))
}
