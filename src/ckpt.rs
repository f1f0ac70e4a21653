//! `WorkspaceCheckpoints` and its stores.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use corral_core::checkpoints::{
    CallOptions, CheckpointOptions, CheckpointStore, Checkpoints, FileCheckpointStore, MemoryCheckpointStore,
};
use corral_core::fs::FsProvider;

use crate::{IntoNapi, JsCallback, JsFn, NativeFs};

#[napi]
pub struct NativeStore {
    inner: Arc<dyn CheckpointStore>,
}

#[napi]
impl NativeStore {
    #[napi(factory, catch_unwind)]
    pub fn memory() -> NativeStore {
        NativeStore { inner: Arc::new(MemoryCheckpointStore::new()) }
    }
    #[napi(factory, catch_unwind)]
    pub fn file(dir: Value) -> Result<NativeStore> {
        Ok(NativeStore { inner: Arc::new(FileCheckpointStore::from_option(&dir).napi()?) })
    }
    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn) -> NativeStore {
        NativeStore { inner: Arc::new(corral_core::remote::RemoteCheckpointStore::new(JsCallback::dispatch(dispatch))) }
    }
    #[napi(ts_return_type = "Promise<any>")]
    pub fn load<'e>(&self, env: &'e Env, session_id: String) -> Result<PromiseRaw<'e, Value>> {
        let s = self.inner.clone();
        crate::spawn(env, async move { s.load(&session_id).await.map(|v| v.unwrap_or(Value::Null)) })
    }
    #[napi(ts_return_type = "Promise<void>")]
    pub fn save<'e>(&self, env: &'e Env, session_id: String, data: Value) -> Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        crate::spawn(env, async move { s.save(&session_id, data).await })
    }
    #[napi(ts_return_type = "Promise<void>")]
    pub fn delete<'e>(&self, env: &'e Env, session_id: String) -> Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        crate::spawn(env, async move { s.delete(&session_id).await })
    }
}

#[napi]
pub struct NativeCheckpoints {
    pub(crate) inner: Arc<Checkpoints>,
    fs: Arc<dyn FsProvider>,
}

impl NativeCheckpoints {
    /// The workspace the checkpoints were made over.
    pub(crate) fn fs(&self) -> Arc<dyn FsProvider> {
        self.fs.clone()
    }
}

#[napi]
impl NativeCheckpoints {
    #[napi(constructor, catch_unwind)]
    pub fn new(fs: &NativeFs, options: Value, store: Option<&NativeStore>) -> Result<Self> {
        let o = CheckpointOptions::from_options(&options).napi()?;
        let store = store.map(|s| s.inner.clone()).unwrap_or_else(|| Arc::new(MemoryCheckpointStore::new()));
        Ok(NativeCheckpoints { inner: Arc::new(Checkpoints::new(store, o).napi()?), fs: fs.inner.clone() })
    }

    #[napi(ts_return_type = "Promise<Array<{ turn: number; paths: string[] }>>")]
    pub fn list<'e>(&self, env: &'e Env, options: Value) -> Result<PromiseRaw<'e, Value>> {
        let c = self.inner.clone();
        let session = CallOptions::from_options("list", &options).napi()?.session;
        crate::spawn(env, async move {
            let turns = c.list(&session).await?;
            Ok(serde_json::to_value(turns).unwrap_or(Value::Null))
        })
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn rewind<'e>(&self, env: &'e Env, to_turn: Value, options: Value) -> Result<PromiseRaw<'e, Value>> {
        let (c, fs) = (self.inner.clone(), self.fs.clone());
        let turn = CallOptions::turn(&to_turn).napi()?;
        let CallOptions { session, dry_run: dry, force } = CallOptions::from_options("rewind", &options).napi()?;
        crate::spawn(env, async move {
            let report = c.rewind(fs.as_ref(), &session, turn, dry, force).await?;
            Ok(serde_json::to_value(report).unwrap_or(Value::Null))
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn clear<'e>(&self, env: &'e Env, options: Value) -> Result<PromiseRaw<'e, ()>> {
        let c = self.inner.clone();
        let session = CallOptions::from_options("clear", &options).napi()?.session;
        crate::spawn(env, async move { c.clear(&session).await })
    }
}
