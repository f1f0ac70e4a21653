//! Errors across the boundary: a core error becomes a JavaScript `Error` with the core's `code`
//! (or the caller's own error, as it was thrown).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use corral_core::error::{Code, Error as CoreError};

/// The `code` of an error thrown into JavaScript: the core's code (`Code::as_str`), or napi's
/// own status for a value napi could not convert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrCode(String);

impl AsRef<str> for ErrCode {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// What every exported function returns: its error carries the code.
pub(crate) type Result<T, E = napi::Error<ErrCode>> = std::result::Result<T, E>;

/// A core error as the error a synchronous call throws.
pub(crate) fn to_napi(e: CoreError) -> napi::Error<ErrCode> {
    napi::Error::new(ErrCode(e.code.as_str().to_string()), e.message)
}

/// A core error as the value a promise rejects with, made on the JavaScript thread: an `Error`
/// with the code, or the caller's own error as it was thrown.
fn rejection(env: &Env, e: CoreError) -> napi::Error {
    if let Some(original) = e.foreign.as_ref().and_then(|f| f.0.downcast_ref::<napi::Error>()) {
        if let Ok(clone) = original.try_clone() {
            return clone;
        }
    }
    // SAFETY: `env` is this thread's environment, and the value is made in it just now.
    unsafe {
        let value = JsError::from(to_napi(e)).into_value(env.raw());
        match Unknown::from_napi_value(env.raw(), value) {
            Ok(v) => napi::Error::from(v),
            Err(e) => e,
        }
    }
}

/// Runs a core future on the async runtime; the promise resolves with its value or rejects as
/// `rejection` says.
pub(crate) fn spawn<'e, T, F>(env: &'e Env, fut: F) -> Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: std::future::Future<Output = CoreResult<T>> + Send + 'static,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, r: CoreResult<T>| {
        r.map_err(|e| rejection(env, e))
    })
    .map_err(from_status)
}

/// As `spawn`, for a future the core says may start on this thread (`starts_in_place`): it is
/// polled here once, inside the runtime's context, and the promise is settled at once if it is
/// done; if it must wait (a hop to the blocking pool, a callback), it goes on to the runtime,
/// which polls it again with its own waker. A panic while polling rejects the promise.
pub(crate) fn spawn_in_place<'e, T, F>(env: &'e Env, fut: F) -> Result<PromiseRaw<'e, T>>
where
    T: ToNapiValue + Send + 'static,
    F: std::future::Future<Output = CoreResult<T>> + Send + 'static,
{
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::{Context, Poll, Waker};
    let mut fut = Box::pin(fut);
    let mut polled = false;
    let first = catch_unwind(AssertUnwindSafe(|| {
        napi::bindgen_prelude::within_runtime_if_available(|| {
            polled = true;
            fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        })
    }));
    let settled = match first {
        Ok(Poll::Ready(r)) => r,
        Ok(Poll::Pending) => return spawn(env, fut),
        // No runtime to enter: the future was not touched, and the usual path says why.
        Err(_) if !polled => return spawn(env, fut),
        Err(_) => Err(CoreError::new(Code::Io, "internal error: a file tool panicked")),
    };
    match settled {
        Ok(v) => PromiseRaw::resolve(env, v).map_err(from_status),
        Err(e) => PromiseRaw::reject(env, rejection(env, e)).map_err(from_status),
    }
}

/// napi's own error (a value it could not convert) with its status as the code.
pub(crate) fn from_status(e: napi::Error) -> napi::Error<ErrCode> {
    napi::Error::new(ErrCode(e.status.as_ref().to_string()), e.reason.clone())
}

/// `[code, kind]` for every code the core gives an error (`Code::kind`): the facade's table of
/// which class each code becomes.
#[napi(catch_unwind, ts_return_type = "Array<[string, 'workspace' | 'configuration' | 'egress' | 'foreign']>")]
pub fn error_codes() -> Vec<Vec<&'static str>> {
    Code::ALL.iter().map(|c| vec![c.as_str(), c.kind()]).collect()
}

pub(crate) type CoreResult<T> = corral_core::Result<T>;

pub(crate) trait IntoNapi<T> {
    fn napi(self) -> Result<T>;
}
impl<T> IntoNapi<T> for CoreResult<T> {
    fn napi(self) -> Result<T> {
        self.map_err(to_napi)
    }
}
