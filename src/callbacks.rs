//! Calls from Rust into JavaScript: the channel of the core's `remote` interfaces (one callback
//! type, answers `{ ok } | { err }` with bytes carried as a Buffer), and the cancel token an
//! `AbortSignal` flips.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use napi::threadsafe_function::ThreadsafeFunction;

use corral_core::error::Error as CoreError;
use corral_core::remote::{Dispatch, Reply};

use crate::CoreResult;

/// What a facade callback resolved to: `{ ok } | { err }`, or the bytes of an `ok` that is a
/// Buffer.
pub struct JsAnswer(Reply);

impl FromNapiValue for JsAnswer {
    unsafe fn from_napi_value(env: napi::sys::napi_env, v: napi::sys::napi_value) -> napi::Result<Self> {
        if let Ok(obj) = Object::from_napi_value(env, v) {
            if let Some(ok) = obj.get::<Unknown>("ok")? {
                if ok.is_buffer()? {
                    return Ok(JsAnswer(Reply::Bytes(Buffer::from_napi_value(env, ok.raw())?.to_vec())));
                }
            }
        }
        Ok(JsAnswer(Reply::Value(Value::from_napi_value(env, v)?)))
    }
}

/// One type for every call from Rust into JavaScript.
pub(crate) type JsFn = ThreadsafeFunction<Value, Promise<JsAnswer>, Value, Status, false, true>;

/// A facade callback as the core's dispatch.
pub(crate) struct JsCallback(JsFn);

impl JsCallback {
    pub fn dispatch(f: JsFn) -> Arc<dyn Dispatch> {
        Arc::new(JsCallback(f))
    }
}

#[async_trait::async_trait]
impl Dispatch for JsCallback {
    async fn call(&self, request: Value) -> CoreResult<Reply> {
        // The facade's callbacks answer { err } for a WorkspaceError and reject with anything else:
        // that rejection holds the original JS error, which travels inside the core error.
        let foreign = |e: napi::Error| CoreError::foreign(e.reason.clone(), Arc::new(e));
        let promise = self.0.call_async_catch(request).await.map_err(foreign)?;
        Ok(promise.await.map_err(foreign)?.0)
    }
}

/// The functions of an options object, as the core asks for them.
pub(crate) fn functions(cb: Option<JsFn>) -> impl Fn(usize) -> Option<Arc<dyn corral_core::options::Callable>> {
    corral_core::remote::functions(cb.map(JsCallback::dispatch))
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
