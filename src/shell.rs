//! Shell providers and the shell tool, as JS classes.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::error::{Code, Error as CoreError};
use corral_core::exec::{InheritEnv, LocalShell};
use corral_core::rules::{ArgsPredicate, CommandPattern};
use corral_core::search::jsregex::JsRegex;
use corral_core::shell::{exec_result_from_json, Cancel, ExecOptions, ExecResult, ExecStub, ShellProvider, StubShell};
use corral_core::shell_tool::{self, ShellToolOptions};

use crate::{CancelToken, CoreResult, IntoNapi, JsCallback, JsFn};

pub(crate) fn inherit_from(v: &Value, who: &str) -> CoreResult<InheritEnv> {
    match v {
        Value::Null | Value::Bool(false) => Ok(InheritEnv::None),
        Value::Bool(true) => Ok(InheritEnv::All),
        Value::Array(a) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    CoreError::config(format!("{who}: inheritEnv must be true or an array of variable names."))
                })
            })
            .collect::<CoreResult<Vec<_>>>()
            .map(InheritEnv::List),
        _ => Err(CoreError::config(format!("{who}: inheritEnv must be true or an array of variable names."))),
    }
}

pub(crate) fn env_from(v: &Value, who: &str) -> CoreResult<BTreeMap<String, String>> {
    match v {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(CoreError::config(format!("{who}: env.{k} must be a string."))),
            })
            .collect(),
        _ => Err(CoreError::config(format!("{who}: env must be an object of strings."))),
    }
}

pub(crate) fn exec_options(o: &Value, cancel: Option<Cancel>) -> CoreResult<ExecOptions> {
    let bad = |f: &str| CoreError::new(Code::InvalidArguments, format!("exec options: {f} has the wrong type."));
    Ok(ExecOptions {
        cwd: match o.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            _ => return Err(bad("cwd")),
        },
        timeout_ms: match o.get("timeoutMs") {
            None | Some(Value::Null) => None,
            Some(n) => Some(n.as_f64().filter(|f| *f >= 0.0).ok_or_else(|| bad("timeoutMs"))? as u64),
        },
        env: env_from(o.get("env").unwrap_or(&Value::Null), "exec options").map_err(|_| bad("env"))?,
        stdin: match o.get("stdin") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            _ => return Err(bad("stdin")),
        },
        cancel,
    })
}

/// Exec options as a JS provider or stub receives them: unset options are absent, not null.
fn exec_options_js(o: &ExecOptions) -> Value {
    let mut v = json!({ "env": o.env });
    if let Some(cwd) = &o.cwd {
        v["cwd"] = json!(cwd);
    }
    if let Some(t) = o.timeout_ms {
        v["timeoutMs"] = json!(t);
    }
    if let Some(s) = &o.stdin {
        v["stdin"] = json!(s);
    }
    v
}

pub(crate) fn exec_result_js(r: ExecResult) -> Value {
    let mut v = json!({ "stdout": r.stdout, "stderr": r.stderr, "exitCode": r.exit_code, "timedOut": r.timed_out });
    if r.aborted {
        v["aborted"] = json!(true);
    }
    if let Some(s) = r.signal {
        v["signal"] = json!(s);
    }
    v
}

struct JsStub(JsCallback);

#[async_trait]
impl ExecStub for JsStub {
    async fn answer(&self, command: &str, o: &ExecOptions) -> CoreResult<Value> {
        self.0.call(json!({ "command": command, "options": exec_options_js(o) })).await
    }
}

/// A `ShellProvider` written in JavaScript. A cancel is passed on as `{ op: 'abort', id }`.
struct JsShell {
    cb: JsCallback,
    shell: Option<String>,
    next: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl ShellProvider for JsShell {
    fn shell(&self) -> Option<String> {
        self.shell.clone()
    }
    async fn exec(&self, command: &str, o: ExecOptions) -> CoreResult<ExecResult> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let v = self
            .cb
            .call_cancellable(
                json!({ "op": "exec", "id": id, "command": command, "options": exec_options_js(&o) }),
                id,
                o.cancel.as_ref(),
            )
            .await?;
        exec_result_from_json(&v)
    }
}

#[napi]
pub struct NativeShell {
    pub(crate) inner: Arc<dyn ShellProvider>,
    stub: Option<Arc<StubShell>>,
}

#[napi]
impl NativeShell {
    #[napi(factory)]
    pub fn local(root: String, env: Value, inherit_env: Value) -> Result<NativeShell> {
        let env = env_from(&env, "NodeWorkspace").napi()?;
        let inherit = inherit_from(&inherit_env, "NodeWorkspace").napi()?;
        let fs = corral_core::fs::local::LocalFs::new(&root).napi()?;
        Ok(NativeShell { inner: Arc::new(LocalShell::new(fs.root().to_path_buf(), env, inherit)), stub: None })
    }

    /// `stub(call)` resolves to `{ ok: Partial<ExecResult> }` or `{ err }`.
    #[napi(factory)]
    pub fn memory(stub: Option<JsFn>) -> NativeShell {
        let s = Arc::new(StubShell::new(stub.map(|f| Arc::new(JsStub(JsCallback(Arc::new(f)))) as Arc<dyn ExecStub>)));
        NativeShell { inner: s.clone(), stub: Some(s) }
    }

    /// `new SandboxShell(adapter, { cwd, env?, inheritEnv? })`.
    #[napi(factory)]
    pub fn sandbox(
        adapter: &crate::sandbox::NativeSandbox,
        cwd: String,
        env: Value,
        inherit_env: Value,
    ) -> Result<NativeShell> {
        let env = env_from(&env, "SandboxShell").napi()?;
        let inherit = inherit_from(&inherit_env, "SandboxShell").napi()?;
        let shell = corral_core::sandbox::SandboxShell::new(adapter.inner.clone(), cwd, env, inherit).napi()?;
        Ok(NativeShell { inner: Arc::new(shell), stub: None })
    }

    #[napi(factory)]
    pub fn from_js(dispatch: JsFn, shell: Option<String>) -> NativeShell {
        NativeShell {
            inner: Arc::new(JsShell { cb: JsCallback(Arc::new(dispatch)), shell, next: Default::default() }),
            stub: None,
        }
    }

    #[napi(getter)]
    pub fn shell(&self) -> Option<String> {
        self.inner.shell()
    }

    #[napi]
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
        let opts = exec_options(&options, cancel.map(|c| c.inner.clone())).napi()?;
        env.spawn_future(async move { shell.exec(&command, opts).await.map(exec_result_js).napi() })
    }
}

struct JsArgs {
    cb: JsCallback,
    index: usize,
}

#[async_trait]
impl ArgsPredicate for JsArgs {
    async fn test(&self, rest: &str) -> CoreResult<bool> {
        Ok(self.cb.call(json!({ "index": self.index, "rest": rest })).await?.as_bool().unwrap_or(false))
    }
}

/// Patterns as the facade sends them: `{ kind: 'str', value }`, `{ kind: 'rule', command, index? }`,
/// `{ kind: 'regex', source, flags }`.
fn patterns(list: &Value, args_cb: &Option<JsCallback>, which: &str) -> CoreResult<Vec<CommandPattern>> {
    let Value::Array(items) = list else {
        return Err(CoreError::config(format!("createShellTool: {which} must be an array.")));
    };
    items
        .iter()
        .map(|p| match p.get("kind").and_then(Value::as_str) {
            Some("str") => Ok(CommandPattern::Str(p["value"].as_str().unwrap_or_default().to_string())),
            Some("rule") => {
                let command = p.get("command").and_then(Value::as_str).ok_or_else(|| {
                    CoreError::config(format!("createShellTool: a {which} rule needs a command string."))
                })?;
                let args = match (p.get("index").and_then(Value::as_u64), args_cb) {
                    (Some(i), Some(cb)) => {
                        Some(Arc::new(JsArgs { cb: cb.clone(), index: i as usize }) as Arc<dyn ArgsPredicate>)
                    }
                    _ => None,
                };
                Ok(CommandPattern::Rule { command: command.to_string(), args })
            }
            Some("regex") => {
                let re =
                    JsRegex::new(p["source"].as_str().unwrap_or_default(), p["flags"].as_str().unwrap_or_default())
                        .map_err(|e| CoreError::config(format!("createShellTool: {which}: {}", e.message)))?;
                Ok(CommandPattern::Regex(Arc::new(re)))
            }
            _ => Err(CoreError::config(format!(
                "createShellTool: {which} entries must be strings, {{ command, args? }} rules or RegExps."
            ))),
        })
        .collect()
}

fn shell_tool_options(o: &Value, args_cb: Option<JsCallback>) -> CoreResult<ShellToolOptions> {
    let d = ShellToolOptions::default();
    let num = |k: &str, dflt: u64| -> CoreResult<u64> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(dflt),
            Some(v) => v
                .as_f64()
                .filter(|f| *f >= 1.0)
                .map(|f| f as u64)
                .ok_or_else(|| CoreError::config(format!("createShellTool: {k} must be a positive number."))),
        }
    };
    Ok(ShellToolOptions {
        allow: match o.get("allow") {
            None | Some(Value::Null) => None,
            Some(v) => Some(patterns(v, &args_cb, "allow")?),
        },
        deny: match o.get("deny") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => patterns(v, &args_cb, "deny")?,
        },
        default_timeout_ms: num("defaultTimeoutMs", d.default_timeout_ms)?,
        max_timeout_ms: num("maxTimeoutMs", d.max_timeout_ms)?,
        max_output_chars: num("maxOutputChars", d.max_output_chars as u64)? as usize,
        cwd: o.get("cwd").and_then(Value::as_str).map(str::to_string),
        env: env_from(o.get("env").unwrap_or(&Value::Null), "createShellTool")?,
        name: match o.get("name") {
            None | Some(Value::Null) => d.name,
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(CoreError::config("createShellTool: name must be a non-empty string.")),
        },
    })
}

#[napi]
pub struct NativeShellTool {
    shell: Arc<dyn ShellProvider>,
    opts: Arc<ShellToolOptions>,
}

#[napi]
impl NativeShellTool {
    #[napi(constructor)]
    pub fn new(shell: &NativeShell, options: Value, args: Option<JsFn>) -> Result<Self> {
        let opts = shell_tool_options(&options, args.map(|f| JsCallback(Arc::new(f)))).napi()?;
        Ok(NativeShellTool { shell: shell.inner.clone(), opts: Arc::new(opts) })
    }

    #[napi]
    pub fn spec(&self) -> Value {
        json!({
            "name": self.opts.name,
            "description": shell_tool::description(&self.opts, self.shell.shell().as_deref()),
            "parameters": shell_tool::parameters_schema(),
        })
    }

    /// Whether allow/deny refuse the command (then it is never offered for approval).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_refused<'e>(&self, env: &'e Env, command: String) -> Result<PromiseRaw<'e, bool>> {
        let (shell, opts) = (self.shell.clone(), self.opts.clone());
        env.spawn_future(async move { Ok(shell_tool::is_refused(shell.as_ref(), &opts, &command).await) })
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn call<'e>(&self, env: &'e Env, args: Value, cancel: Option<&CancelToken>) -> Result<PromiseRaw<'e, Value>> {
        let (shell, opts) = (self.shell.clone(), self.opts.clone());
        let cancel = cancel.map(|c| c.inner.clone());
        env.spawn_future(async move { shell_tool::call(shell.as_ref(), &opts, &args, cancel).await.napi() })
    }
}
