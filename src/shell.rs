//! Shell providers and the shell tool, as JS classes.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::remote::{RemoteShell, RemoteStub};
use corral_core::shell::exec::LocalShell;
use corral_core::shell::process::tools::{self as process_tools, PROCESS_TOOLS};
use corral_core::shell::process::Processes;
use corral_core::shell::tool::{self, ShellToolOptions};
use corral_core::shell::{ExecOptions, ExecStub, ShellProvider, StubShell};

use crate::{CancelToken, IntoNapi, JsCallback, JsFn};

#[napi]
pub struct NativeShell {
    pub(crate) inner: Arc<dyn ShellProvider>,
    stub: Option<Arc<StubShell>>,
    remote: Option<Arc<RemoteShell>>,
    /// A SandboxShell: its pending changesets.
    sandbox: Option<Arc<corral_core::sandbox::SandboxShell>>,
}

impl NativeShell {
    /// A shell the core provides (a harness session's commands).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn of(inner: Arc<dyn ShellProvider>) -> NativeShell {
        NativeShell { inner, stub: None, remote: None, sandbox: None }
    }
}

#[napi]
impl NativeShell {
    #[napi(factory, catch_unwind)]
    pub fn local(options: Value) -> Result<NativeShell> {
        let o = corral_core::shell::exec::DirOptions::node_workspace(&options).napi()?;
        let fs = corral_core::fs::local::LocalFs::new(&o.dir).napi()?;
        Ok(NativeShell {
            inner: Arc::new(LocalShell::new(fs.root().to_path_buf(), o.env, o.inherit)),
            stub: None,
            remote: None,
            sandbox: None,
        })
    }

    /// `stub(call)` resolves to `{ ok: Partial<ExecResult> }` or `{ err }`.
    #[napi(factory, catch_unwind)]
    pub fn memory(stub: Option<JsFn>) -> NativeShell {
        let stub = stub.map(|f| Arc::new(RemoteStub::new(JsCallback::dispatch(f))) as Arc<dyn ExecStub>);
        let s = Arc::new(StubShell::new(stub));
        NativeShell { inner: s.clone(), stub: Some(s), remote: None, sandbox: None }
    }

    /// `new SandboxShell(adapter, { cwd, env?, inheritEnv?, checkpoints?, changesDir? })`.
    #[napi(factory, catch_unwind)]
    pub fn sandbox(
        adapter: &crate::sandbox::NativeSandbox,
        options: Value,
        checkpoints: Option<&crate::ckpt::NativeCheckpoints>,
    ) -> Result<NativeShell> {
        let (o, changes) = corral_core::shell::exec::DirOptions::sandbox_shell(&options).napi()?;
        let mut shell =
            corral_core::sandbox::SandboxShell::new(adapter.inner.clone(), o.dir, o.env, o.inherit).napi()?;
        if let Some(c) = checkpoints {
            shell = shell.with_checkpoints(c.inner.clone(), c.fs()).napi()?;
        }
        if let Some(dir) = changes.dir {
            shell = shell.with_changes_dir(std::path::Path::new(&dir)).napi()?;
        }
        if changes.manual {
            shell = shell.with_manual_changes().napi()?;
        }
        let shell = Arc::new(shell);
        Ok(NativeShell { inner: shell.clone(), stub: None, remote: None, sandbox: Some(shell) })
    }

    /// A SandboxShell's `pendingChanges()`.
    #[napi(ts_return_type = "Promise<any>")]
    pub fn pending_changes<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, Value>> {
        let shell = self.sandbox.clone();
        crate::spawn(env, async move {
            match shell {
                Some(s) => s.pending_changes().await,
                None => Ok(Value::Array(Vec::new())),
            }
        })
    }

    /// A SandboxShell's `applyChanges(id?)`, or with `discard` its `discardChanges(id?)`.
    #[napi(ts_return_type = "Promise<any>")]
    pub fn settle_changes<'e>(&self, env: &'e Env, discard: bool, id: Option<String>) -> Result<PromiseRaw<'e, Value>> {
        let shell = self.sandbox.clone();
        crate::spawn(env, async move {
            match (shell, discard) {
                (Some(s), false) => s.apply_changes(id.as_deref()).await,
                (Some(s), true) => s.discard_changes(id.as_deref()).await,
                (None, _) => Ok(Value::Array(Vec::new())),
            }
        })
    }

    /// A `ShellProvider` written in JavaScript: the core's `RemoteShell` over `dispatch`.
    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn, shell: Option<String>, can_spawn: Option<bool>) -> NativeShell {
        let remote =
            Arc::new(RemoteShell::new(JsCallback::dispatch(dispatch), shell).with_spawn(can_spawn == Some(true)));
        NativeShell { inner: remote.clone(), stub: None, remote: Some(remote), sandbox: None }
    }

    /// Output a JS shell's run `id` reports while it runs (its `options.onOutput`).
    #[napi(catch_unwind)]
    pub fn output(&self, id: f64, stream: String, text: String) {
        if let Some(r) = &self.remote {
            r.output(id as u64, &stream, text.as_bytes());
        }
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

/// One read of a background process (`readProcess`).
#[napi(object)]
pub struct ProcessRead {
    pub running: bool,
    pub stdout: Buffer,
    pub stderr: Buffer,
    /// Bytes that came past the process's bound between two reads and were left out.
    pub cut: f64,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub note: Option<String>,
    pub timed_out: bool,
    pub aborted: bool,
}

impl ProcessRead {
    /// What a read gives back: the bytes, what was cut, and the end (`None` while it runs).
    fn new(
        stdout: Vec<u8>,
        stderr: Vec<u8>,
        cut: u64,
        ended: Option<corral_core::shell::ExecResult>,
        note: Option<String>,
    ) -> ProcessRead {
        let running = ended.is_none();
        let ended = ended.unwrap_or_default();
        ProcessRead {
            running,
            stdout: stdout.into(),
            stderr: stderr.into(),
            cut: cut as f64,
            exit_code: ended.exit_code,
            signal: ended.signal,
            note,
            timed_out: ended.timed_out,
            aborted: ended.aborted,
        }
    }
}

#[napi]
pub struct NativeShellTool {
    shell: Arc<dyn ShellProvider>,
    opts: Arc<ShellToolOptions>,
    /// With `background: true`: the tool set's background processes.
    processes: Option<Arc<Processes>>,
}

#[napi]
impl NativeShellTool {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        shell: &NativeShell,
        options: Value,
        functions: Option<JsFn>,
        spill_fs: Option<&crate::NativeFs>,
        redactor: Option<&crate::redact::NativeRedactor>,
    ) -> Result<Self> {
        let spill_fs = spill_fs.map(|f| f.inner.clone());
        let redactor = redactor.map(|r| r.inner.clone());
        let opts = ShellToolOptions::from_options(&options, &crate::functions(functions), spill_fs, redactor).napi()?;
        let processes = opts.background.then(|| Arc::new(Processes::new(opts.background_timeout_ms)));
        Ok(NativeShellTool { shell: shell.inner.clone(), opts: Arc::new(opts), processes })
    }

    #[napi(catch_unwind)]
    pub fn spec(&self) -> Value {
        json!({
            "name": self.opts.name,
            "description": tool::description(&self.opts, self.shell.shell().as_deref()),
            "parameters": tool::parameters_for(&self.opts),
        })
    }

    /// With `background: true`, the process tools after the shell tool.
    #[napi(catch_unwind)]
    pub fn process_specs(&self) -> Vec<Value> {
        if self.processes.is_none() {
            return Vec::new();
        }
        PROCESS_TOOLS
            .iter()
            .map(|n| json!({ "name": n, "description": process_tools::description(n), "parameters": process_tools::parameters(n) }))
            .collect()
    }

    /// A call of one of the process tools.
    #[napi(ts_return_type = "Promise<any>")]
    pub fn call_process_tool<'e>(
        &self,
        env: &'e Env,
        name: String,
        args: Value,
        ctx: Value,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let (procs, opts) = (self.processes.clone(), self.opts.clone());
        let cancel = cancel.map(|c| c.inner.clone());
        let ctx = corral_core::tools::Ctx::from_json(&ctx, None).napi()?;
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("The process tools need background: true."))?;
            process_tools::call(&procs, &name, &args, &ctx.session_id, cancel.as_ref(), opts.redactor.as_ref()).await
        })
    }

    /// The SDKs' sandbox sessions: starts `command` in the background (the tool's rules first)
    /// with `{ cwd?, env?, input? }`; its id.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn spawn_process<'e>(
        &self,
        env: &'e Env,
        command: String,
        request: Value,
        session: String,
    ) -> Result<PromiseRaw<'e, String>> {
        let (shell, opts, procs) = (self.shell.clone(), self.opts.clone(), self.processes.clone());
        let request = process_tools::Request::from_json(&request).napi()?;
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("spawnProcess needs background: true."))?;
            process_tools::spawn(shell, &opts, &procs, &command, &request, &session).await
        })
    }

    /// The SDKs' `run`: starts `command` as `spawnProcess` does and reads it to its end, each
    /// stream whole up to the core's bound (`Processes::run_to_end`).
    /// Its result is a `ProcessRead` of the ended command (`running: false`, nothing cut).
    #[napi(ts_return_type = "Promise<ProcessRead>")]
    pub fn run_process<'e>(
        &self,
        env: &'e Env,
        command: String,
        request: Value,
        session: String,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, ProcessRead>> {
        let (shell, opts, procs) = (self.shell.clone(), self.opts.clone(), self.processes.clone());
        let request = process_tools::Request::from_json(&request).napi()?;
        let cancel = cancel.map(|c| c.inner.clone());
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("runProcess needs background: true."))?;
            let id = process_tools::spawn(shell, &opts, &procs, &command, &request, &session).await?;
            let r = procs.run_to_end(&session, &id, cancel.as_ref()).await?;
            Ok(ProcessRead::new(r.stdout, r.stderr, 0, Some(r.ended), r.note))
        })
    }

    /// A background process's output not read before, as bytes, waiting up to `waitMs` for
    /// something new: `{ running, stdout, stderr, cut, exitCode?, signal?, note?, timedOut,
    /// aborted }`.
    #[napi(ts_return_type = "Promise<ProcessRead>")]
    pub fn read_process<'e>(
        &self,
        env: &'e Env,
        id: String,
        wait_ms: u32,
        session: String,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, ProcessRead>> {
        let procs = self.processes.clone();
        let cancel = cancel.map(|c| c.inner.clone());
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("readProcess needs background: true."))?;
            // Bytes for a stream: a cut is counted (`cut`), never text spliced into them.
            let r = procs.read(&session, &id, u64::from(wait_ms), cancel.as_ref(), false).await?;
            let note = r.note();
            Ok(ProcessRead::new(r.stdout, r.stderr, r.cut, r.ended, note))
        })
    }

    /// Kills a background process (its group, or all its sandbox holds) and waits for its end;
    /// what it wrote stays for the next `readProcess`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn kill_process<'e>(&self, env: &'e Env, id: String, session: String) -> Result<PromiseRaw<'e, ()>> {
        let procs = self.processes.clone();
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("killProcess needs background: true."))?;
            procs.stop_only(&session, &id).await
        })
    }

    /// Writes bytes to a background process's input (resolves once they are queued: a stream's
    /// backpressure); `close` ends its input after them.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_process<'e>(
        &self,
        env: &'e Env,
        id: String,
        bytes: Buffer,
        close: bool,
        session: String,
    ) -> Result<PromiseRaw<'e, ()>> {
        let (procs, bytes) = (self.processes.clone(), bytes.to_vec());
        crate::spawn(env, async move {
            let procs = procs.ok_or_else(|| corral_core::Error::config("writeProcess needs background: true."))?;
            procs.feed(&session, &id, bytes, close).await
        })
    }

    /// Whether a background process's input can be written while it runs.
    #[napi(getter)]
    pub fn takes_input(&self) -> bool {
        self.shell.runs_in_background() && self.shell.takes_input()
    }

    /// Stops every background process of the tool set.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let procs = self.processes.clone();
        crate::spawn(env, async move {
            if let Some(p) = procs {
                p.close().await;
            }
            Ok(())
        })
    }

    /// What `workspacePrompt` says of this tool.
    #[napi(catch_unwind)]
    pub fn info(&self) -> Value {
        tool::info(&self.opts, self.shell.shell().as_deref())
    }

    /// A process tool's `needsApproval(args)`: text for the input of a command that needed
    /// approval needs it too.
    #[napi(catch_unwind)]
    pub fn process_needs_approval(&self, name: String, args: Value) -> bool {
        name == "process_input" && self.processes.as_ref().is_some_and(|p| p.input_needs_approval(&args))
    }

    /// The question a person is asked before the call `name(args)` runs in the workspace named
    /// `rootName` (the shell tool's or `process_input`'s).
    #[napi(catch_unwind)]
    pub fn approval_prompt(&self, name: String, args: Value, root_name: String) -> Option<String> {
        let tool = if name == self.opts.name { "shell" } else { name.as_str() };
        corral_core::shell::approval::prompt(tool, &args, &root_name, self.processes.as_deref())
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
        let (shell, opts, procs) = (self.shell.clone(), self.opts.clone(), self.processes.clone());
        let cancel = cancel.map(|c| c.inner.clone());
        let ctx = corral_core::tools::Ctx::from_json(&ctx, None).napi()?;
        crate::spawn(env, async move {
            match procs {
                Some(p) if args.get("run_in_background").and_then(Value::as_bool) == Some(true) => {
                    let started = process_tools::start_background(shell, &opts, &p, &args, &ctx.session_id).await;
                    match &opts.redactor {
                        Some(r) => started.map_err(|e| r.redact_error(e, &ctx.session_id)),
                        None => started,
                    }
                }
                _ => tool::call(shell.as_ref(), &opts, &args, &ctx, cancel).await,
            }
        })
    }
}

/// `corral mcp`'s approval policy over one shell (`corral_core::shell::approval::McpPolicy`).
#[napi]
pub struct NativeMcpPolicy {
    shell: Arc<dyn ShellProvider>,
    inner: Arc<corral_core::shell::approval::McpPolicy>,
}

#[napi]
impl NativeMcpPolicy {
    #[napi(constructor, catch_unwind)]
    pub fn new(shell: &NativeShell, allow: Vec<String>, deny: Vec<String>, client_approves: bool) -> Self {
        let inner = corral_core::shell::approval::McpPolicy::new(allow, deny, client_approves);
        NativeMcpPolicy { shell: shell.inner.clone(), inner: Arc::new(inner) }
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn needs_approval<'e>(&self, env: &'e Env, command: String) -> Result<PromiseRaw<'e, bool>> {
        let (shell, inner) = (self.shell.clone(), self.inner.clone());
        crate::spawn(env, async move { Ok(inner.needs_approval(shell.as_ref(), &command).await) })
    }

    #[napi(catch_unwind)]
    pub fn note(&self, can_ask: bool) -> String {
        self.inner.note(can_ask)
    }
}

/// Whether a shell named `shell` (or none) runs its commands with cmd.exe, as the core reads its
/// command lines (`corral_core::shell::rules::is_cmd_shell`).
#[napi(catch_unwind)]
pub fn is_cmd_shell(shell: Option<String>) -> bool {
    corral_core::shell::rules::is_cmd_shell(shell.as_deref())
}

/// `corral mcp`: `{ action: 'run' | 'ask' | 'refuse', text? }` for a call whose tool said it
/// `needed` approval (any tool, with or without a shell).
#[napi(catch_unwind, ts_return_type = "{ action: 'run' | 'ask' | 'refuse'; text?: string }")]
pub fn mcp_decide(needed: bool, can_ask: bool, tool: String, args: Value) -> Value {
    use corral_core::shell::approval::{Decision, McpPolicy};
    match McpPolicy::decide(needed, can_ask, &tool, &args) {
        Decision::Run => serde_json::json!({ "action": "run" }),
        Decision::Ask => serde_json::json!({ "action": "ask" }),
        Decision::Refuse(text) => serde_json::json!({ "action": "refuse", "text": text }),
    }
}

/// `corral mcp`, after the user was asked: null when the call runs, else the text it is answered
/// with (`error`: why the question got no answer).
#[napi(catch_unwind)]
pub fn mcp_answered(accepted: bool, error: Option<String>) -> Option<String> {
    corral_core::shell::approval::McpPolicy::answered(accepted, error.as_deref())
}
