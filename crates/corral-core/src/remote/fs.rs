//! A caller's `FsProvider`: `{ op, path, ... }` for each method.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{bad_answer, Dispatch, Remote};
use crate::error::{Error, Result};
use crate::fs::{Caps, DirEntry, EntryType, FsProvider, GuardedDirs, Stat};
use crate::path::{normalize, Flavor};

const IFACE: &str = "FsProvider";

/// The requests: `readFile`, `writeFile { content }`, `stat`, `readdir`, `mkdir`,
/// `rm { recursive }`, and, where `caps` says the provider has them, `readFileBytes` (answered
/// with bytes), `writeFileBytes { base64 }` (the bytes in base64: requests are JSON), `getMode`,
/// `chmod { mode }`, `realPath`.
pub struct RemoteFs {
    remote: Remote,
    caps: Caps,
    guarded: GuardedDirs,
}

impl RemoteFs {
    pub fn new(dispatch: std::sync::Arc<dyn Dispatch>, caps: Caps) -> Self {
        RemoteFs { remote: Remote::new(dispatch), caps, guarded: GuardedDirs::default() }
    }

    async fn op(&self, op: &str, path: &str, extra: Value) -> Result<Value> {
        let mut fields = json!({ "path": path });
        if let Value::Object(e) = extra {
            fields.as_object_mut().expect("an object").extend(e);
        }
        self.remote.op(op, fields).await
    }
}

fn kind(v: &Value, op: &str) -> Result<EntryType> {
    v.get("type").and_then(Value::as_str).and_then(EntryType::parse).ok_or_else(|| bad_answer(IFACE, op, v))
}

#[async_trait]
impl FsProvider for RemoteFs {
    fn guarded_dirs(&self) -> Option<&GuardedDirs> {
        Some(&self.guarded)
    }
    fn caps(&self) -> Caps {
        self.caps
    }
    async fn read_file(&self, path: &str) -> Result<String> {
        match self.op("readFile", path, json!({})).await? {
            Value::String(s) => Ok(s),
            other => Err(bad_answer(IFACE, "readFile", &other)),
        }
    }
    async fn write_file(&self, path: &str, content: &str) -> Result<()> {
        self.op("writeFile", path, json!({ "content": content })).await.map(|_| ())
    }
    async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let v = self.op("stat", path, json!({})).await?;
        if v.is_null() {
            return Ok(None);
        }
        let size = v.get("size").and_then(Value::as_f64).unwrap_or(0.0).max(0.0) as u64;
        // A provider that passes on node's fs.Stats gives `mtimeMs`.
        let modified_ms = v.get("mtimeMs").and_then(Value::as_f64).filter(|t| t.is_finite()).map(|t| t as i64);
        Ok(Some(Stat { kind: kind(&v, "stat")?, size, modified_ms }))
    }
    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        match self.op("readdir", path, json!({})).await? {
            Value::Array(items) => items
                .iter()
                .map(|e| {
                    let name = e.get("name").and_then(Value::as_str).ok_or_else(|| bad_answer(IFACE, "readdir", e))?;
                    Ok(DirEntry { name: name.to_string(), kind: kind(e, "readdir")? })
                })
                .collect(),
            other => Err(bad_answer(IFACE, "readdir", &other)),
        }
    }
    async fn mkdir(&self, path: &str) -> Result<()> {
        self.op("mkdir", path, json!({})).await.map(|_| ())
    }
    async fn rm(&self, path: &str, recursive: bool) -> Result<()> {
        self.op("rm", path, json!({ "recursive": recursive })).await.map(|_| ())
    }
    async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>> {
        self.remote.op_bytes(IFACE, "readFileBytes", json!({ "path": path })).await
    }
    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD.encode(content);
        self.op("writeFileBytes", path, json!({ "base64": base64 })).await.map(|_| ())
    }
    async fn get_mode(&self, path: &str) -> Result<u32> {
        let v = self.op("getMode", path, json!({})).await?;
        v.as_f64()
            .filter(|m| m.is_finite() && *m >= 0.0)
            .map(|m| m as u32)
            .ok_or_else(|| bad_answer(IFACE, "getMode", &v))
    }
    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        self.op("chmod", path, json!({ "mode": mode })).await.map(|_| ())
    }
    async fn real_path(&self, path: &str) -> Result<String> {
        match self.op("realPath", path, json!({})).await? {
            // The answer is checked like any path, but a refusal names the path asked about: the
            // answer may be a host path that must not reach the model.
            Value::String(s) => normalize(&s, Flavor::Both).map_err(|e| {
                Error::new(
                    e.code,
                    format!("Path is outside the workspace: {path} (the provider's realPath leads out of the root)"),
                )
            }),
            other => Err(bad_answer(IFACE, "realPath", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::Reply;
    use super::*;
    use crate::error::Code;

    fn fs(answer: impl Fn(&Value) -> Result<Reply> + Send + Sync + 'static) -> RemoteFs {
        RemoteFs::new(Scripted::new(answer), Caps { read_bytes: true, write_bytes: true, mode: true, real_path: true })
    }

    #[tokio::test]
    async fn a_stat_answer_becomes_a_stat_and_nothing_means_missing() {
        let f = fs(|r| if r["path"] == "a" { ok(json!({ "type": "file", "size": 3 })) } else { ok(Value::Null) });
        let s = f.stat("a").await.unwrap().unwrap();
        assert_eq!((s.kind, s.size), (EntryType::File, 3));
        assert!(f.stat("b").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn an_answer_of_the_wrong_shape_is_an_io_error_naming_the_method() {
        let f = fs(|_| ok(json!(42)));
        let e = f.read_file("a").await.unwrap_err();
        assert_eq!(e.code, Code::Io);
        assert!(e.message.contains("readFile returned a number"), "{}", e.message);
        let e = fs(|_| ok(json!([{ "name": "x", "type": "socket" }]))).readdir("").await.unwrap_err();
        assert!(e.message.contains("readdir returned an object"), "{}", e.message);
    }

    #[tokio::test]
    async fn bytes_arrive_unchanged() {
        let f = fs(|_| Ok(Reply::Bytes(vec![0xff, 0, 0xfe])));
        assert_eq!(f.read_file_bytes("bin").await.unwrap(), vec![0xff, 0, 0xfe]);
    }

    #[tokio::test]
    async fn a_real_path_leading_out_is_refused_naming_the_asked_path_not_the_answer() {
        let f = fs(|_| ok(json!("/home/someone/secret")));
        let e = f.real_path("link").await.unwrap_err();
        assert_eq!(e.code, Code::OutsideWorkspace);
        assert!(e.message.contains("link") && !e.message.contains("someone"), "{}", e.message);
        let f = fs(|_| ok(json!("src/./a.ts")));
        assert_eq!(f.real_path("x").await.unwrap(), "src/a.ts");
    }

    #[tokio::test]
    async fn writes_send_the_content_and_rm_the_recursive_flag() {
        let d = Scripted::new(|_| ok(Value::Null));
        let f = RemoteFs::new(d.clone(), Caps::default());
        f.write_file("a.txt", "hi").await.unwrap();
        f.rm("dir", true).await.unwrap();
        f.write_file_bytes("b.bin", &[0xff, 0x00, 0xfe]).await.unwrap();
        assert_eq!(
            d.requests(),
            vec![
                json!({ "op": "writeFile", "path": "a.txt", "content": "hi" }),
                json!({ "op": "rm", "path": "dir", "recursive": true }),
                // Bytes travel as base64: the requests are JSON.
                json!({ "op": "writeFileBytes", "path": "b.bin", "base64": "/wD+" }),
            ]
        );
    }
}
