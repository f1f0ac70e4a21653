//! The file tools, the read-only command table and the workspace prompt.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::fs::FsProvider;
use corral_core::tools::{self, Ctx, FsToolOptions};

use crate::{ckpt, CancelToken, IntoNapi, JsFn, NativeFs, Result};

/// The file tools' options as `read` takes them from JS (`createFsTools`' options, or an
/// adapter's `files`), with the checkpoints they record to.
pub(crate) fn file_tool_options(
    read: fn(&Value, corral_core::options::Functions<'_>) -> corral_core::error::Result<FsToolOptions>,
    v: &Value,
    checkpoints: Option<&ckpt::NativeCheckpoints>,
    functions: Option<JsFn>,
) -> Result<FsToolOptions> {
    let mut opts = read(v, &crate::functions(functions)).napi()?;
    opts.checkpoints = checkpoints.map(|c| c.inner.clone());
    Ok(opts)
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
        redactor: Option<&crate::redact::NativeRedactor>,
    ) -> Result<Self> {
        let redactor = redactor.map(|r| r.inner.clone());
        let mut opts = FsToolOptions::from_options_with(&options, &crate::functions(functions), redactor).napi()?;
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
        let in_place = tools::starts_in_place(fs.as_ref(), &name);
        let fut = async move { tools::call(fs.as_ref(), &opts, &name, &args, &ctx).await };
        if in_place {
            crate::spawn_in_place(env, fut)
        } else {
            crate::spawn(env, fut)
        }
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

    /// Whether `command` needs approval; anything but a string does.
    #[napi(catch_unwind)]
    pub fn needs_approval(&self, command: Value) -> bool {
        command.as_str().is_none_or(|c| self.inner.needs_approval(c))
    }
}

/// The session a tool context names (`'default'` when it names none), for audit events.
#[napi(catch_unwind)]
pub fn session_of(ctx: Value) -> String {
    Ctx::from_json(&ctx, None).map_or_else(|_| tools::DEFAULT_SESSION.to_string(), |c| c.session_id)
}

/// `corral mcp`'s tools for its flags: `{ include, sandbox: 'none' | 'linux' | 'docker' | null,
/// background }`; a bad flag is an error with the message to show.
#[napi(
    catch_unwind,
    ts_return_type = "{ include: string[]; sandbox: 'none' | 'linux' | 'docker' | null; background: boolean }"
)]
pub fn mcp_plan(
    tools: Option<String>,
    sandbox: Option<String>,
    image: Option<String>,
    read_only: bool,
) -> napi::Result<Value> {
    let plan = corral_core::shell::approval::McpPlan::from_flags(
        tools.as_deref(),
        sandbox.as_deref(),
        image.as_deref(),
        read_only,
    )
    .map_err(napi::Error::from_reason)?;
    Ok(json!({ "include": plan.include, "sandbox": plan.sandbox, "background": plan.background }))
}

/// `corral mcp`'s start-up warning about `--allow` entries that run workspace code, if any.
#[napi(catch_unwind)]
pub fn mcp_allow_warning(allow: Vec<String>, sandbox: Option<String>) -> Option<String> {
    corral_core::shell::approval::allow_warning(&allow, sandbox.as_deref())
}

/// The MCP `annotations` of a tool, by its name.
#[napi(catch_unwind)]
pub fn tool_annotations(name: String) -> Value {
    tools::mcp_annotations(&name)
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
