//! File-system providers: a directory on disk, an in-memory tree, or an object written in
//! JavaScript, and `normalizeWorkspacePath`.

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use corral_core::fs::{local::LocalFs, memory::MemoryFs, Caps, DirEntry, FsProvider, Stat};

use crate::{IntoNapi, JsCallback, JsFn, Result};

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
    pub write_bytes: bool,
    pub mode: bool,
    pub real_path: bool,
}

pub(crate) fn stat_js(s: Option<Stat>) -> Option<JsStat> {
    s.map(|s| JsStat { kind: s.kind.as_str().to_string(), size: s.size as f64 })
}

pub(crate) fn dirents_js(v: Vec<DirEntry>) -> Vec<JsDirent> {
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

    /// An `FsProvider` written in JavaScript: the core's `RemoteFs` over `dispatch`.
    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn, caps: JsCaps) -> NativeFs {
        let caps = Caps {
            read_bytes: caps.read_bytes,
            write_bytes: caps.write_bytes,
            mode: caps.mode,
            real_path: caps.real_path,
        };
        let inner = Arc::new(corral_core::remote::RemoteFs::new(JsCallback::dispatch(dispatch), caps));
        NativeFs { inner, memory: None, root: None }
    }

    /// A provider of the core's own that is not a directory of this machine (a pod's workdir),
    /// with the root it shows.
    pub(crate) fn remote_root(inner: Arc<dyn FsProvider>, root: String) -> NativeFs {
        NativeFs { inner, memory: None, root: Some(root) }
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

    /// `writeFileBytes`: the bytes as they are, for content that is not UTF-8.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn write_file_bytes<'e>(&self, env: &'e Env, path: String, content: Buffer) -> Result<PromiseRaw<'e, ()>> {
        let (fs, content) = (self.inner.clone(), content.to_vec());
        crate::spawn(env, async move {
            if !fs.caps().write_bytes {
                return Err(corral_core::Error::new(corral_core::Code::Io, "This provider has no writeFileBytes."));
            }
            fs.write_file_bytes(&path, &content).await
        })
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

/// The media type of an image recognised by its bytes (PNG, JPEG, GIF, WebP), else null.
#[napi(catch_unwind)]
pub fn image_media_type(bytes: Buffer) -> Option<String> {
    corral_core::tools::image::sniff(&bytes).map(|k| k.media_type().to_string())
}

/// An SDK sandbox session's path as a workspace path (`root`: the workspace's name there).
#[napi(catch_unwind)]
pub fn sandbox_path(root: String, path: String, host_root: Option<String>) -> Result<String> {
    corral_core::path::from_sandbox_or_host(&root, host_root.as_deref(), &path).napi()
}

/// How the SDKs' sandbox sessions stream a command (the core's `session_streams`).
#[napi(object)]
pub struct SessionStreams {
    pub keep_bytes: u32,
    pub read_wait_ms: u32,
    pub queue_bytes: u32,
}

/// The bounds of an SDK session's command streams, as the core sets them.
#[napi(catch_unwind)]
pub fn session_streams() -> SessionStreams {
    use corral_core::shell::process::session_streams as s;
    SessionStreams {
        keep_bytes: s::KEEP_BYTES as u32,
        read_wait_ms: s::READ_WAIT_MS,
        queue_bytes: s::QUEUE_BYTES as u32,
    }
}

/// An SDK session's `root` option, checked (`/workspace` when it names none).
#[napi(catch_unwind)]
pub fn sandbox_root(root: Option<String>) -> Result<String> {
    corral_core::path::sandbox_root(root.as_deref()).napi()
}

/// `normalizeWorkspacePath(path, flavor?)`.
#[napi(catch_unwind)]
pub fn normalize_workspace_path(path: String, flavor: Option<String>) -> Result<String> {
    let f = corral_core::path::Flavor::from_option(flavor.as_deref()).napi()?;
    corral_core::path::normalize(&path, f).napi()
}
