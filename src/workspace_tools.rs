//! Workspace-defined tools as JS classes: template tools, the registry and its stores.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::registry::{
    self, MemoryToolStore, Merged, PostgresOptions, PostgresToolStore, Registry, SqliteToolStore, ToolStore,
};
use corral_core::shell::tool::{self, Approval, Call, ShellToolOptions};
use corral_core::shell::ShellProvider;
use corral_core::templates::{TemplateTool, WorkspaceToolSpec};

use crate::shell::NativeShell;
use crate::{CancelToken, IntoNapi, JsCallback, JsFn};

/// A template tool over a shell provider.
#[napi]
pub struct NativeTemplateTool {
    tool: Arc<TemplateTool>,
    shell: Arc<dyn ShellProvider>,
    opts: Arc<ShellToolOptions>,
}

#[napi]
impl NativeTemplateTool {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        spec: Value,
        shell: &NativeShell,
        options: Value,
        redactor: Option<&crate::redact::NativeRedactor>,
    ) -> Result<Self> {
        let spec = WorkspaceToolSpec::from_json(&spec).napi()?;
        let redactor = redactor.map(|r| r.inner.clone());
        let opts = corral_core::templates::tool_options_for(&spec, &options, &|_| None, redactor).napi()?;
        Ok(NativeTemplateTool {
            tool: Arc::new(TemplateTool::new(spec).napi()?),
            shell: shell.inner.clone(),
            opts: Arc::new(opts),
        })
    }

    /// `{ name, description, parameters, needsApproval }` (a boolean; a predicate stays in JS).
    #[napi(catch_unwind)]
    pub fn spec(&self) -> Value {
        let s = &self.tool.spec;
        let approval = matches!(self.opts.approval, Approval::Always(true));
        json!({ "name": s.name, "description": s.description, "parameters": s.parameters, "needsApproval": approval })
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn call<'e>(
        &self,
        env: &'e Env,
        args: Value,
        ctx: Value,
        cancel: Option<&CancelToken>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let (t, shell, opts) = (self.tool.clone(), self.shell.clone(), self.opts.clone());
        let cancel = cancel.map(|c| c.inner.clone());
        let ctx = corral_core::tools::Ctx::from_json(&ctx, None).napi()?;
        crate::spawn(env, async move {
            let command = t.command_for(&args, shell.shell().as_deref())?;
            let call = Call {
                command: &command,
                timeout_ms: None,
                stdin: None,
                tool_call_id: ctx.tool_call_id,
                session: &ctx.session_id,
                turn: ctx.turn,
            };
            tool::run_call(shell.as_ref(), &opts, &call, cancel).await
        })
    }
}

#[napi]
pub struct NativeToolStore {
    inner: Arc<dyn ToolStore>,
    /// A PostgresToolStore's own handle, for `close()`.
    postgres: Option<Arc<PostgresToolStore>>,
}

#[napi]
impl NativeToolStore {
    #[napi(factory, catch_unwind)]
    pub fn memory() -> NativeToolStore {
        NativeToolStore { inner: Arc::new(MemoryToolStore::default()), postgres: None }
    }

    #[napi(factory, catch_unwind)]
    pub fn sqlite(path: String) -> Result<NativeToolStore> {
        Ok(NativeToolStore { inner: Arc::new(SqliteToolStore::open(path).napi()?), postgres: None })
    }

    /// `new PostgresToolStore({ connectionString, schema?, poolSize? })`: options checked now,
    /// the server reached on the first call.
    #[napi(factory, catch_unwind)]
    pub fn postgres(options: Value) -> Result<NativeToolStore> {
        let store = Arc::new(PostgresToolStore::new(PostgresOptions::from_json(&options).napi()?).napi()?);
        Ok(NativeToolStore { inner: store.clone(), postgres: Some(store) })
    }

    /// A PostgresToolStore's schema (null for other stores).
    #[napi(getter, catch_unwind)]
    pub fn schema(&self) -> Option<String> {
        self.postgres.as_ref().map(|p| p.schema().to_string())
    }

    /// Ends a PostgresToolStore's connections; later calls fail.
    #[napi(catch_unwind)]
    pub fn close(&self) {
        if let Some(p) = &self.postgres {
            p.close();
        }
    }

    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn) -> NativeToolStore {
        NativeToolStore {
            inner: Arc::new(corral_core::remote::RemoteToolStore::new(JsCallback::dispatch(dispatch))),
            postgres: None,
        }
    }
}

#[napi]
pub struct NativeToolRegistry {
    inner: Arc<Registry>,
}

fn specs_json(specs: Vec<WorkspaceToolSpec>) -> Value {
    Value::Array(specs.into_iter().map(|s| s.to_json()).collect())
}

#[napi]
impl NativeToolRegistry {
    #[napi(constructor, catch_unwind)]
    pub fn new(store: Option<&NativeToolStore>) -> Self {
        NativeToolRegistry { inner: Arc::new(Registry::with_store(store.map(|s| s.inner.clone()))) }
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn upsert<'e>(
        &self,
        env: &'e Env,
        workspace: String,
        spec: Value,
        name: Option<String>,
    ) -> Result<PromiseRaw<'e, Value>> {
        let r = self.inner.clone();
        crate::spawn(env, async move { r.upsert(&workspace, &spec, name.as_deref()).await.map(|s| s.to_json()) })
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn get<'e>(&self, env: &'e Env, workspace: String, name: String) -> Result<PromiseRaw<'e, Value>> {
        let r = self.inner.clone();
        crate::spawn(env, async move { r.get(&workspace, &name).await.map(|s| s.map_or(Value::Null, |s| s.to_json())) })
    }

    #[napi(ts_return_type = "Promise<any[]>")]
    pub fn list<'e>(&self, env: &'e Env, workspace: String) -> Result<PromiseRaw<'e, Value>> {
        let r = self.inner.clone();
        crate::spawn(env, async move { r.list(&workspace).await.map(specs_json) })
    }

    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'e>(&self, env: &'e Env, workspace: String, name: String) -> Result<PromiseRaw<'e, bool>> {
        let r = self.inner.clone();
        crate::spawn(env, async move { r.delete(&workspace, &name).await })
    }

    /// The admin API's answer to an authenticated request (`workspace`: what `authenticate`
    /// said; `body`: what was read, `tooLarge` when it passed the limit):
    /// `{ status, body, allow, close }`.
    #[napi(ts_return_type = "Promise<{ status: number; body?: any; allow?: string; close: boolean }>")]
    pub fn admin<'e>(
        &self,
        env: &'e Env,
        workspace: Option<String>,
        method: String,
        url: String,
        body: Option<Buffer>,
        too_large: bool,
    ) -> Result<PromiseRaw<'e, Value>> {
        use registry::admin::Body;
        let r = self.inner.clone();
        let body = match (too_large, body) {
            (true, _) => Body::TooLarge,
            (false, Some(b)) => Body::Bytes(b.to_vec()),
            (false, None) => Body::None,
        };
        crate::spawn(env, async move {
            registry::admin::answer(&r, workspace.as_deref(), &method, &url, body).await.map(answer_js)
        })
    }
}

/// `new WorkspaceToolRegistry(options)`: the options checked (a `ConfigurationError` names the key).
#[napi(catch_unwind)]
pub fn check_tool_registry_options(options: Value) -> Result<()> {
    corral_core::registry::options::tool_registry(&options).napi()
}

/// `defineTool(spec)`: `{ name, description, parametersFrom, parameters }` with the defaults.
#[napi(catch_unwind)]
pub fn define_tool_data(spec: Value) -> Result<Value> {
    corral_core::registry::options::define_tool(&spec).napi()
}

/// The merged order of a workspace's tools: `[{ builtin: index } | { workspace: name }]`.
#[napi(catch_unwind)]
pub fn merge_tools(builtins: Vec<String>, workspace: Vec<String>) -> Vec<Value> {
    registry::merge(&builtins, &workspace)
        .into_iter()
        .map(|m| match m {
            Merged::Builtin(i) => json!({ "builtin": i }),
            Merged::Workspace(name) => json!({ "workspace": name }),
        })
        .collect()
}

fn answer_js(a: registry::admin::Answer) -> Value {
    json!({ "status": a.status, "body": a.body, "allow": a.allow, "close": a.close })
}

/// The admin API's answer to a body over its limit, given at once (the client may still be
/// sending; the connection is closed after it).
#[napi(catch_unwind)]
pub fn admin_too_large() -> Value {
    answer_js(registry::admin::too_large())
}

/// The admin API's first look at a request: `{ answer }` (no registry, no bearer token), or
/// `{ token, readBody }` (authenticate the token, read at most that many body bytes).
#[napi(catch_unwind)]
pub fn admin_start(configured: bool, method: String, url: String, authorization: Option<String>) -> Value {
    match registry::admin::start(configured, &method, &url, authorization.as_deref()) {
        registry::admin::Start::Answer(a) => json!({ "answer": answer_js(a) }),
        registry::admin::Start::Authenticate { token, read_body } => json!({ "token": token, "readBody": read_body }),
    }
}

/// Checks the options of a facade function (`toAiSdkTools`, `toolsFor`, …) by their shape,
/// `{ key: kind }`: the core's `facade_options`.
#[napi(catch_unwind)]
pub fn check_options(what: String, shape: Value) -> Result<()> {
    corral_core::facade_options::check(&what, &shape).napi()
}
