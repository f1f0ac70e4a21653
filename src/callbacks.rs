//! Calls from Rust into JavaScript (one callback type, `{ ok } | { err }` answers), the
//! functions of an options object, and the cancel token an `AbortSignal` flips.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use napi::threadsafe_function::ThreadsafeFunction;

use corral_core::error::{Code, Error as CoreError};

use crate::{code_from, CoreResult};

/// One type for every call from Rust into JavaScript.
pub(crate) type JsFn = ThreadsafeFunction<Value, Promise<Value>, Value, Status, false, true>;

#[derive(Clone)]
pub(crate) struct JsCallback(pub Arc<JsFn>);

impl JsCallback {
    pub async fn call(&self, arg: Value) -> CoreResult<Value> {
        // The facade's callbacks answer { err } for a WorkspaceError and reject with anything else:
        // that rejection holds the original JS error, which travels inside the core error.
        let foreign = |e: napi::Error| CoreError::foreign(e.reason.clone(), Arc::new(e));
        let promise = self.0.call_async_catch(arg).await.map_err(foreign)?;
        let v = promise.await.map_err(foreign)?;
        match v {
            Value::Object(mut m) => {
                if let Some(err) = m.remove("err") {
                    let code = err.get("code").and_then(Value::as_str).map(code_from).unwrap_or(Code::Io);
                    let message = err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("A JavaScript callback failed.")
                        .to_string();
                    return Err(CoreError::new(code, message));
                }
                Ok(m.remove("ok").unwrap_or(Value::Null))
            }
            _ => Ok(Value::Null),
        }
    }
}

/// One function of an options object, by the index its tag carries; the facade's callback calls
/// `fns[index](...args)`.
struct JsFunction {
    cb: JsCallback,
    index: usize,
}

#[async_trait::async_trait]
impl corral_core::options::Callable for JsFunction {
    async fn call(&self, args: Vec<Value>) -> CoreResult<Value> {
        self.cb.call(json!({ "index": self.index, "args": args })).await
    }
}

/// The functions of an options object, as the core asks for them.
pub(crate) fn functions(cb: Option<JsFn>) -> impl Fn(usize) -> Option<Arc<dyn corral_core::options::Callable>> {
    let cb = cb.map(|f| JsCallback(Arc::new(f)));
    move |index| cb.clone().map(|cb| Arc::new(JsFunction { cb, index }) as Arc<dyn corral_core::options::Callable>)
}

impl JsCallback {
    /// Calls with `arg`; when `cancel` fires first, sends `{ op: 'abort', id }` so the JS side can
    /// abort its own work, then waits for the call to settle.
    pub async fn call_cancellable(
        &self,
        arg: Value,
        id: u64,
        cancel: Option<&tokio_util::sync::CancellationToken>,
    ) -> CoreResult<Value> {
        let call = self.call(arg);
        let Some(c) = cancel else { return call.await };
        tokio::pin!(call);
        tokio::select! {
            v = &mut call => v,
            _ = c.cancelled() => {
                let _ = self.call(json!({ "op": "abort", "id": id })).await;
                call.await
            }
        }
    }
}

/// A cancel flag JS flips when an `AbortSignal` fires.
#[napi]
pub struct CancelToken {
    pub(crate) inner: tokio_util::sync::CancellationToken,
}

#[napi]
impl CancelToken {
    #[napi(constructor, catch_unwind)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        CancelToken { inner: tokio_util::sync::CancellationToken::new() }
    }
    #[napi(catch_unwind)]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
    #[napi(getter)]
    pub fn cancelled(&self) -> bool {
        self.inner.is_cancelled()
    }
}
