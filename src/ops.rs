//! The file tools' path for the SDK sandboxes and the OpenAI editor (`corral_core::tools::ops`):
//! the adapters in `js/` convert the SDKs' shapes and call these, and decide no file rule.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use corral_core::tools::ops::FileOps;
use corral_core::tools::{Ctx, FsToolOptions};

use crate::fs::{stat_js, JsStat};
use crate::{ckpt, IntoNapi, JsFn, NativeFs, Result};

/// An entry of `list`.
#[napi(object)]
pub struct JsListed {
    pub name: String,
    #[napi(js_name = "type")]
    pub kind: String,
    pub path: String,
}

/// One provider with an adapter's `files` options.
#[napi]
pub struct NativeFileOps {
    inner: Arc<FileOps>,
}

fn ctx(v: &Value) -> Result<Ctx> {
    Ctx::from_json(v, None).napi()
}

#[napi]
impl NativeFileOps {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        fs: &NativeFs,
        files: Value,
        checkpoints: Option<&ckpt::NativeCheckpoints>,
        functions: Option<JsFn>,
    ) -> Result<Self> {
        let opts = crate::tools::file_tool_options(FsToolOptions::from_files_options, &files, checkpoints, functions)?;
        Ok(NativeFileOps { inner: Arc::new(FileOps::new(fs.inner.clone(), opts)) })
    }

    /// A file's bytes, or null when there is none.
    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn read<'e>(&self, env: &'e Env, path: String, context: Value) -> Result<PromiseRaw<'e, Option<Buffer>>> {
        let (ops, ctx) = (self.inner.clone(), ctx(&context)?);
        crate::spawn(env, async move { ops.read(&path, &ctx).await.map(|b| b.map(Buffer::from)) })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn write<'e>(&self, env: &'e Env, path: String, bytes: Buffer, context: Value) -> Result<PromiseRaw<'e, ()>> {
        let (ops, ctx) = (self.inner.clone(), ctx(&context)?);
        let bytes = bytes.to_vec();
        crate::spawn(env, async move { ops.write(&path, &bytes, &ctx).await })
    }

    #[napi(ts_return_type = "Promise<{ type: string; size: number } | null>")]
    pub fn stat<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, Option<JsStat>>> {
        let ops = self.inner.clone();
        crate::spawn(env, async move { ops.stat(&path).await.map(stat_js) })
    }

    /// A directory's entries with their workspace paths, or null when there is none.
    #[napi(ts_return_type = "Promise<Array<{ name: string; type: string; path: string }> | null>")]
    pub fn list<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, Option<Vec<JsListed>>>> {
        let ops = self.inner.clone();
        crate::spawn(env, async move {
            ops.list(&path).await.map(|l| {
                l.map(|entries| {
                    entries
                        .into_iter()
                        .map(|(path, e)| JsListed { name: e.name, kind: e.kind.as_str().to_string(), path })
                        .collect()
                })
            })
        })
    }

    /// The workspace path of a command's working directory, which must be a directory.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn working_dir<'e>(&self, env: &'e Env, path: String, given: String) -> Result<PromiseRaw<'e, String>> {
        let ops = self.inner.clone();
        crate::spawn(env, async move { ops.working_dir(&path, &given).await })
    }

    /// Deletes a file or a link; false when there is none.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn delete<'e>(&self, env: &'e Env, path: String, context: Value) -> Result<PromiseRaw<'e, bool>> {
        let (ops, ctx) = (self.inner.clone(), ctx(&context)?);
        crate::spawn(env, async move { ops.delete(&path, &ctx).await })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn mkdir<'e>(&self, env: &'e Env, path: String) -> Result<PromiseRaw<'e, ()>> {
        let ops = self.inner.clone();
        crate::spawn(env, async move { ops.mkdir(&path).await })
    }

    /// The editor's operations: `create` (a V4A diff in create mode), `update` (with `moveTo`)
    /// and `delete`; true when an update moved the file.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn edit<'e>(
        &self,
        env: &'e Env,
        op: String,
        path: String,
        diff: Option<String>,
        move_to: Option<String>,
        context: Value,
    ) -> Result<PromiseRaw<'e, bool>> {
        let (ops, ctx) = (self.inner.clone(), ctx(&context)?);
        crate::spawn(env, async move {
            let diff = diff.unwrap_or_default();
            match op.as_str() {
                "create" => ops.create_file(&path, &diff, &ctx).await.map(|_| false),
                "update" => ops.update_file(&path, &diff, move_to.as_deref(), &ctx).await,
                "delete" => ops.delete_file(&path, &ctx).await.map(|_| false),
                other => Err(corral_core::Error::new(
                    corral_core::error::Code::InvalidArguments,
                    format!("Unknown editor operation: {other}"),
                )),
            }
        })
    }
}

/// The SDK's `applyDiff(input, diff, mode)` as the core does it (for the differential test).
#[napi(js_name = "applyV4aDiff", catch_unwind)]
pub fn apply_v4a_diff(input: String, diff: String, create: bool) -> Result<String> {
    use corral_core::tools::ops::v4a_apply;
    v4a_apply(&input, &diff, create).napi()
}
