//! The napi binding: converts JS values to core types and back. No behaviour lives here.
//!
//! Errors cross as JavaScript `Error`s whose `code` is the core's code and whose `message` is the
//! core's message (an error the caller's JavaScript threw goes back as the very value it was);
//! the facade (index.js) gives them the class the code calls for. Every call from Rust into JS
//! goes through one `JsCallback` type: a weak threadsafe function whose (async) result is
//! `{ ok: value }` or `{ err: { code, message } }`.

#![deny(clippy::all)]
// napi-derive leaves the registration of exported functions out of test builds, so there they
// look unused.
#![cfg_attr(test, allow(dead_code))]

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::error::{Code, Error as CoreError};
use corral_core::fs::{local::LocalFs, memory::MemoryFs, Caps, DirEntry, FsProvider, Stat};
use corral_core::tools::{self, Ctx, FsToolOptions};

mod broker;
mod ckpt;
mod jsfs;
mod sandbox;
mod shell;
mod workspace_tools;

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

pub(crate) fn code_from(s: &str) -> Code {
    Code::parse(s).unwrap_or(Code::Io)
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

#[napi(object)]
pub struct JsStat {
    #[napi(js_name = "type")]
    pub kind: String,
    pub size: f64,
}

#[napi(object)]
pub struct JsDirent {
    pub name: String,
    #[napi(js_name = "type")]
    pub kind: String,
}

#[napi(object)]
pub struct JsCaps {
    pub read_bytes: bool,
    pub mode: bool,
    pub real_path: bool,
}

fn stat_js(s: Option<Stat>) -> Option<JsStat> {
    s.map(|s| JsStat { kind: s.kind.as_str().to_string(), size: s.size as f64 })
}

fn dirents_js(v: Vec<DirEntry>) -> Vec<JsDirent> {
    v.into_iter().map(|e| JsDirent { name: e.name, kind: e.kind.as_str().to_string() }).collect()
}

/// A file-system provider the core can drive: a directory on disk, an in-memory tree, or an
/// object written in JavaScript.
#[napi]
pub struct NativeFs {
    pub(crate) inner: Arc<dyn FsProvider>,
    memory: Option<Arc<MemoryFs>>,
    root: Option<String>,
}

#[napi]
impl NativeFs {
    #[napi(factory, catch_unwind)]
    pub fn local(options: Value) -> Result<NativeFs> {
        let o = corral_core::shell::exec::DirOptions::node_workspace(&options).napi()?;
        let fs = LocalFs::new(&o.dir).napi()?;
        let root = fs.root().to_string_lossy().into_owned();
        Ok(NativeFs { inner: Arc::new(fs), memory: None, root: Some(root) })
    }

    #[napi(factory, catch_unwind)]
    pub fn memory(options: Value) -> Result<NativeFs> {
        let o = corral_core::fs::memory::MemoryWorkspaceOptions::from_options(&options).napi()?;
        let fs = Arc::new(MemoryFs::new(o.files.into_iter().map(|(k, v)| (k, v.into_bytes()))).napi()?);
        Ok(NativeFs { inner: fs.clone(), memory: Some(fs), root: None })
    }

    /// `dispatch({ op, path, ... })` resolves to `{ ok }` or `{ err: { code, message } }`.
    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn, caps: JsCaps) -> NativeFs {
        let caps = Caps { read_bytes: caps.read_bytes, write_bytes: false, mode: caps.mode, real_path: caps.real_path };
        NativeFs { inner: Arc::new(jsfs::JsFs { cb: JsCallback(Arc::new(dispatch)), caps }), memory: None, root: None }
    }

    #[napi(getter)]
    pub fn root(&self) -> Option<String> {
        self.root.clone()
    }

    /// `[path, content]` pairs: the facade builds the record with `Object.fromEntries`, so a file
    /// named `__proto__` is an own property like any other.
    #[napi(ts_return_type = "Array<[string, string]>")]
    pub fn snapshot(&self) -> Vec<Vec<String>> {
        self.memory.as_ref().map(|m| m.snapshot().into_iter().map(|(p, c)| vec![p, c]).collect()).unwrap_or_default()
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn read_file<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, String>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.read_file(&path).await })
    }

    #[napi(ts_return_type = "Promise<Buffer>")]
    pub fn read_file_bytes<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, Buffer>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.read_file_bytes(&path).await.map(Buffer::from) })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_file<'e>(&self, env: &'e Env, path: String, content: String) -> Result<PromiseRaw<'e, ()>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.write_file(&path, &content).await })
    }

    #[napi(ts_return_type = "Promise<{ type: string; size: number } | undefined>")]
    pub fn stat<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, Option<JsStat>>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.stat(&path).await.map(stat_js) })
    }

    #[napi(ts_return_type = "Promise<Array<{ name: string; type: string }>>")]
    pub fn readdir<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, Vec<JsDirent>>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.readdir(&path).await.map(dirents_js) })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn mkdir<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, ()>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.mkdir(&path).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn rm<'e>(&self, env: &'e Env, path: String, recursive: bool) -> Result<PromiseRaw<'e, ()>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.rm(&path, recursive).await })
    }

    #[napi(ts_return_type = "Promise<number>")]
    pub fn get_mode<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, u32>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.get_mode(&path).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn chmod<'e>(&self, env: &'e Env, path: String, mode: u32) -> Result<PromiseRaw<'e, ()>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.chmod(&path, mode).await })
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn real_path<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, String>> {
        let fs = self.inner.clone();
        crate::spawn(env, async move { fs.real_path(&path).await })
    }
}

/// `normalizeWorkspacePath(path, flavor?)`.
#[napi(catch_unwind)]
pub fn normalize_workspace_path(path: String, flavor: Option<String>) -> Result<String> {
    let f = corral_core::path::Flavor::from_option(flavor.as_deref()).napi()?;
    corral_core::path::normalize(&path, f).napi()
}

/// The file tools over one provider with one set of options.
#[napi]
pub struct NativeFsTools {
    fs: Arc<dyn FsProvider>,
    opts: FsToolOptions,
}

#[napi]
impl NativeFsTools {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        fs: &NativeFs,
        options: Value,
        checkpoints: Option<&ckpt::NativeCheckpoints>,
        functions: Option<JsFn>,
    ) -> Result<Self> {
        let mut opts = FsToolOptions::from_options(&options, &crate::functions(functions)).napi()?;
        opts.checkpoints = checkpoints.map(|c| c.inner.clone());
        Ok(NativeFsTools { fs: fs.inner.clone(), opts })
    }

    /// What `workspacePrompt` says of these tools.
    #[napi(catch_unwind)]
    pub fn info(&self) -> Value {
        let root = self.fs.as_local().and_then(|l| l.root().file_name().map(|n| n.to_string_lossy().into_owned()));
        tools::info(&self.opts, root.as_deref())
    }

    /// `[{ name, description, parameters }]` in the documented order.
    #[napi(catch_unwind)]
    pub fn specs(&self) -> Vec<Value> {
        tools::specs(&self.opts)
            .into_iter()
            .map(|s| {
                // `read_file` with `readImages` gets a `toModelOutput` for SDKs that send images.
                let images = s.name == "read_file" && self.opts.read_images;
                json!({ "name": s.name, "description": s.description, "parameters": s.parameters, "imageOutput": images })
            })
            .collect()
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn call<'e>(
        &self,
        env: &'e Env,
        name: String,
        args: Value,
        ctx: Value,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let fs = self.fs.clone();
        let opts = self.opts.clone();
        let ctx = Ctx::from_json(&ctx, cancel.map(|c| c.inner.clone())).napi()?;
        crate::spawn(env, async move { tools::call(fs.as_ref(), &opts, &name, &args, &ctx).await })
    }
}

/// `readOnlyCommands(commands)`: the core's predicate over a command line.
#[napi]
pub struct NativeReadOnlyCommands {
    inner: corral_core::shell::rules::ReadOnlyCommands,
}

#[napi]
impl NativeReadOnlyCommands {
    #[napi(constructor, catch_unwind)]
    pub fn new(commands: Vec<String>) -> Result<Self> {
        Ok(NativeReadOnlyCommands { inner: corral_core::shell::rules::ReadOnlyCommands::new(commands).napi()? })
    }

    #[napi(catch_unwind)]
    pub fn needs_approval(&self, command: String) -> bool {
        self.inner.needs_approval(&command)
    }
}

/// What an SDK that sends images gives the model for a `read_file` result.
#[napi(catch_unwind)]
pub fn read_file_model_output(output: Value) -> Value {
    corral_core::tools::read::model_output(&output)
}

/// `workspacePrompt(tools, options?)`: `tools` as `[{ name, description, info }]`.
#[napi(catch_unwind)]
pub fn workspace_prompt(tools: Vec<Value>, options: Value) -> Result<String> {
    corral_core::prompt::workspace_prompt_for(&tools, &options).napi()
}
