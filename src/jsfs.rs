//! An `FsProvider` written in JavaScript, driven through one dispatch callback.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Value};

use corral_core::error::{Code, Error};
use corral_core::fs::{Caps, DirEntry, EntryType, FsProvider, Stat};

use crate::{CoreResult, JsCallback};

pub(crate) struct JsFs {
    pub cb: JsCallback,
    pub caps: Caps,
    pub guarded: corral_core::fs::GuardedDirs,
}

fn bad(what: &str, got: &Value) -> Error {
    let kind = match got {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Error::new(Code::Io, format!("The provider's {what} returned {kind}, which is not what FsProvider promises."))
}

fn kind(v: &Value, what: &str) -> CoreResult<EntryType> {
    v.get("type").and_then(Value::as_str).and_then(EntryType::parse).ok_or_else(|| bad(what, v))
}

impl JsFs {
    async fn op(&self, op: &str, path: &str, extra: Value) -> CoreResult<Value> {
        let mut arg = json!({ "op": op, "path": path });
        if let (Value::Object(a), Value::Object(b)) = (&mut arg, extra) {
            a.extend(b);
        }
        self.cb.call(arg).await
    }
}

#[async_trait]
impl FsProvider for JsFs {
    fn guarded_dirs(&self) -> Option<&corral_core::fs::GuardedDirs> {
        Some(&self.guarded)
    }
    async fn read_file(&self, path: &str) -> CoreResult<String> {
        match self.op("readFile", path, json!({})).await? {
            Value::String(s) => Ok(s),
            other => Err(bad("readFile", &other)),
        }
    }
    async fn write_file(&self, path: &str, content: &str) -> CoreResult<()> {
        self.op("writeFile", path, json!({ "content": content })).await.map(|_| ())
    }
    async fn stat(&self, path: &str) -> CoreResult<Option<Stat>> {
        let v = self.op("stat", path, json!({})).await?;
        if v.is_null() {
            return Ok(None);
        }
        let size = v.get("size").and_then(Value::as_f64).unwrap_or(0.0).max(0.0) as u64;
        Ok(Some(Stat { kind: kind(&v, "stat")?, size }))
    }
    async fn readdir(&self, path: &str) -> CoreResult<Vec<DirEntry>> {
        match self.op("readdir", path, json!({})).await? {
            Value::Array(items) => items
                .iter()
                .map(|e| {
                    let name = e.get("name").and_then(Value::as_str).ok_or_else(|| bad("readdir", e))?;
                    Ok(DirEntry { name: name.to_string(), kind: kind(e, "readdir")? })
                })
                .collect(),
            other => Err(bad("readdir", &other)),
        }
    }
    async fn mkdir(&self, path: &str) -> CoreResult<()> {
        self.op("mkdir", path, json!({})).await.map(|_| ())
    }
    async fn rm(&self, path: &str, recursive: bool) -> CoreResult<()> {
        self.op("rm", path, json!({ "recursive": recursive })).await.map(|_| ())
    }
    fn caps(&self) -> Caps {
        self.caps
    }
    async fn read_file_bytes(&self, path: &str) -> CoreResult<Vec<u8>> {
        match self.op("readFileBytes", path, json!({})).await? {
            Value::String(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| Error::new(Code::Io, "readFileBytes: bad bytes from the provider.")),
            other => Err(bad("readFileBytes", &other)),
        }
    }
    async fn get_mode(&self, path: &str) -> CoreResult<u32> {
        let v = self.op("getMode", path, json!({})).await?;
        v.as_f64().map(|m| m as u32).ok_or_else(|| bad("getMode", &v))
    }
    async fn chmod(&self, path: &str, mode: u32) -> CoreResult<()> {
        self.op("chmod", path, json!({ "mode": mode })).await.map(|_| ())
    }
    async fn real_path(&self, path: &str) -> CoreResult<String> {
        match self.op("realPath", path, json!({})).await? {
            // The provider's answer is checked like any path, but a refusal names the path asked
            // about: the answer may be a host path that must not reach the model.
            Value::String(s) => corral_core::path::normalize(&s, corral_core::path::Flavor::Both).map_err(|e| {
                Error::new(
                    e.code,
                    format!("Path is outside the workspace: {path} (the provider's realPath leads out of the root)"),
                )
            }),
            other => Err(bad("realPath", &other)),
        }
    }
}
