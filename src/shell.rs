//! Shell providers and the shell tool, as JS classes.

use std::sync::Arc;

use crate::Result;
use async_trait::async_trait;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::shell::exec::LocalShell;
use corral_core::shell::tool::{self, ShellToolOptions};
use corral_core::shell::{ExecOptions, ExecResult, ExecStub, ShellProvider, StubShell};

use crate::{CancelToken, CoreResult, IntoNapi, JsCallback, JsFn};

struct JsStub(JsCallback);

#[async_trait]
impl ExecStub for JsStub {
    async fn answer(&self, command: &str, o: &ExecOptions) -> CoreResult<Value> {
        self.0.call(json!({ "command": command, "options": o.to_json() })).await
    }
}

/// A `ShellProvider` written in JavaScript. A cancel is passed on as `{ op: 'abort', id }`; while a
/// run wants its output (`stream: true`), the provider's `options.onOutput(stream, text)` reaches
/// `shellOutput(id, stream, text)`, which hands it to the run's sink.
struct JsShell {
    cb: JsCallback,
    shell: Option<String>,
}

/// Run ids of JS shells, unique in the process (`shellOutput` finds a run by its id alone).
static NEXT_RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The sinks of JS shell runs that stream, by run id.
fn sinks() -> &'static std::sync::Mutex<std::collections::HashMap<u64, corral_core::shell::Sink>> {
    static SINKS: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, corral_core::shell::Sink>>> =
        std::sync::OnceLock::new();
    SINKS.get_or_init(Default::default)
}

/// Removes a run's sink when the run ends, however it ends.
struct SinkGuard(u64);

impl Drop for SinkGuard {
    fn drop(&mut self) {
        sinks().lock().unwrap().remove(&self.0);
    }
}

/// Output a JS shell provider reports while a run goes on (`options.onOutput`).
#[napi(catch_unwind)]
pub fn shell_output(id: f64, stream: String, text: String) {
    let sink = sinks().lock().unwrap().get(&(id as u64)).cloned();
    if let (Some(sink), Some(stream)) = (sink, corral_core::shell::Stream::parse(&stream)) {
        sink.0.output(stream, text.as_bytes());
    }
}

#[async_trait]
impl ShellProvider for JsShell {
    fn shell(&self) -> Option<String> {
        self.shell.clone()
    }
    async fn exec(&self, command: &str, o: ExecOptions) -> CoreResult<ExecResult> {
        let id = NEXT_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stream = o.on_output.is_some();
        let _guard = o.on_output.clone().map(|sink| {
            sinks().lock().unwrap().insert(id, sink);
            SinkGuard(id)
        });
        let v = self
            .cb
            .call_cancellable(
                json!({ "op": "exec", "id": id, "command": command, "options": o.to_json(), "stream": stream }),
                id,
                o.cancel.as_ref(),
            )
            .await?;
        ExecResult::from_json(&v)
    }
}

#[napi]
pub struct NativeShell {
    pub(crate) inner: Arc<dyn ShellProvider>,
    stub: Option<Arc<StubShell>>,
}

#[napi]
impl NativeShell {
    #[napi(factory, catch_unwind)]
    pub fn local(options: Value) -> Result<NativeShell> {
        let o = corral_core::shell::exec::DirOptions::node_workspace(&options).napi()?;
        let fs = corral_core::fs::local::LocalFs::new(&o.dir).napi()?;
        Ok(NativeShell { inner: Arc::new(LocalShell::new(fs.root().to_path_buf(), o.env, o.inherit)), stub: None })
    }

    /// `stub(call)` resolves to `{ ok: Partial<ExecResult> }` or `{ err }`.
    #[napi(factory, catch_unwind)]
    pub fn memory(stub: Option<JsFn>) -> NativeShell {
        let s = Arc::new(StubShell::new(stub.map(|f| Arc::new(JsStub(JsCallback(Arc::new(f)))) as Arc<dyn ExecStub>)));
        NativeShell { inner: s.clone(), stub: Some(s) }
    }

    /// `new SandboxShell(adapter, { cwd, env?, inheritEnv? })`.
    #[napi(factory, catch_unwind)]
    pub fn sandbox(adapter: &crate::sandbox::NativeSandbox, options: Value) -> Result<NativeShell> {
        let o = corral_core::shell::exec::DirOptions::sandbox_shell(&options).napi()?;
        let shell = corral_core::sandbox::SandboxShell::new(adapter.inner.clone(), o.dir, o.env, o.inherit).napi()?;
        Ok(NativeShell { inner: Arc::new(shell), stub: None })
    }

    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn, shell: Option<String>) -> NativeShell {
        NativeShell { inner: Arc::new(JsShell { cb: JsCallback(Arc::new(dispatch)), shell }), stub: None }
    }

    #[napi(getter)]
    pub fn shell(&self) -> Option<String> {
        self.inner.shell()
    }

    #[napi(catch_unwind)]
    pub fn commands(&self) -> Vec<Value> {
        self.stub
            .as_ref()
            .map(|s| {
                s.commands()
                    .into_iter()
                    .map(|c| {
                        let mut v = json!({ "command": c.command, "env": c.env });
                        if let Some(cwd) = c.cwd {
                            v["cwd"] = json!(cwd);
                        }
                        if let Some(t) = c.timeout_ms {
                            v["timeoutMs"] = json!(t);
                        }
                        v
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn exec<'e>(
        &self,
        env: &'e Env,
        command: String,
        options: Value,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let shell = self.inner.clone();
        let opts = ExecOptions::from_json(&options, cancel.map(|c| c.inner.clone())).napi()?;
        crate::spawn(env, async move { shell.exec(&command, opts).await.map(|r| r.to_json()) })
    }
}

#[napi]
pub struct NativeShellTool {
    shell: Arc<dyn ShellProvider>,
    opts: Arc<ShellToolOptions>,
}

#[napi]
impl NativeShellTool {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        shell: &NativeShell,
        options: Value,
        functions: Option<JsFn>,
        spill_fs: Option<&crate::NativeFs>,
    ) -> Result<Self> {
        let spill_fs = spill_fs.map(|f| f.inner.clone());
        let opts = ShellToolOptions::from_options(&options, &crate::functions(functions), spill_fs).napi()?;
        Ok(NativeShellTool { shell: shell.inner.clone(), opts: Arc::new(opts) })
    }

    #[napi(catch_unwind)]
    pub fn spec(&self) -> Value {
        json!({
            "name": self.opts.name,
            "description": tool::description(&self.opts, self.shell.shell().as_deref()),
            "parameters": tool::parameters_schema(),
        })
    }

    /// What `workspacePrompt` says of this tool.
    #[napi(catch_unwind)]
    pub fn info(&self) -> Value {
        tool::info(&self.opts, self.shell.shell().as_deref())
    }

    /// The tool's `needsApproval(args)`.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn needs_approval<'e>(&self, env: &'e Env, args: Value) -> Result<PromiseRaw<'e, bool>> {
        let (shell, opts) = (self.shell.clone(), self.opts.clone());
        crate::spawn(env, async move { tool::needs_approval(shell.as_ref(), &opts, &args).await })
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn call<'e>(
        &self,
        env: &'e Env,
        args: Value,
        ctx: Value,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let (shell, opts) = (self.shell.clone(), self.opts.clone());
        let cancel = cancel.map(|c| c.inner.clone());
        let ctx = corral_core::tools::Ctx::from_json(&ctx, None).napi()?;
        crate::spawn(env, async move { tool::call(shell.as_ref(), &opts, &args, ctx.tool_call_id, cancel).await })
    }
}
