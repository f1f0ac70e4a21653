//! A harness session (`createCorralHarnessSandbox`'s sessions, in corral/ai-sdk): the core's
//! `SessionSandbox`, as a JS class. Linux only: elsewhere the class is absent.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use corral_core::broker::transform;
use corral_core::broker::NetworkPolicy;
use corral_core::sandbox::persistent::{self, SessionSandbox};

use crate::{IntoNapi, JsFn};

#[napi]
pub struct NativeSession {
    inner: Arc<SessionSandbox>,
    /// Whether the session was made from its identity's saved state (`onFirstCreate` then
    /// does not run).
    from_identity: bool,
}

/// What `createSession` is asked: the session's id (a random one when absent) and identity.
#[napi(object)]
pub struct SessionRequest {
    pub session_id: Option<String>,
    pub identity: Option<String>,
}

#[napi]
impl NativeSession {
    /// Checks the provider's options (construction: no I/O) and returns its root.
    #[napi(catch_unwind)]
    pub fn check_options(options: Value, functions: Option<JsFn>) -> Result<String> {
        let o = persistent::from_options(&options, &crate::functions(functions)).napi()?;
        Ok(o.root.to_string_lossy().into_owned())
    }

    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn create<'e>(
        env: &'e Env,
        options: Value,
        functions: Option<JsFn>,
        request: SessionRequest,
    ) -> Result<PromiseRaw<'e, NativeSession>> {
        let o = persistent::from_options(&options, &crate::functions(functions)).napi()?;
        let id = request.session_id.unwrap_or_else(persistent::new_id);
        persistent::check_id(&id).napi()?;
        crate::spawn(env, async move {
            let (session, from_identity) = match &request.identity {
                Some(identity) => SessionSandbox::create_for(&o.root, &id, identity, o.session).await?,
                None => (SessionSandbox::create(&o.root, &id, o.session).await?, false),
            };
            session.broker().set_transformations(o.transformations);
            Ok(NativeSession { inner: Arc::new(session), from_identity })
        })
    }

    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn resume<'e>(
        env: &'e Env,
        options: Value,
        functions: Option<JsFn>,
        session_id: String,
    ) -> Result<PromiseRaw<'e, NativeSession>> {
        let o = persistent::from_options(&options, &crate::functions(functions)).napi()?;
        crate::spawn(env, async move {
            let session = SessionSandbox::resume(&o.root, &session_id, o.session).await?;
            session.broker().set_transformations(o.transformations);
            Ok(NativeSession { inner: Arc::new(session), from_identity: false })
        })
    }

    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_string()
    }

    #[napi(getter)]
    pub fn started_from_identity(&self) -> bool {
        self.from_identity
    }

    #[napi(getter)]
    pub fn default_working_directory(&self) -> String {
        persistent::WORKSPACE.to_string()
    }

    #[napi(getter)]
    pub fn home(&self) -> String {
        persistent::HOME.to_string()
    }

    /// The session's commands as a shell provider (for the process tools).
    #[napi]
    pub fn shell(&self) -> crate::shell::NativeShell {
        crate::shell::NativeShell::of(self.inner.clone())
    }

    /// A path inside as the path of its file under the session's directory (for a NodeWorkspace
    /// there); any other path throws `OutsideWorkspace`.
    #[napi(catch_unwind)]
    pub fn file_path(&self, path: String) -> Result<String> {
        self.inner.file_path(&path).napi()
    }

    /// A command's working directory as commands see it (`null`: `/workspace`), checked to be a
    /// directory of the session.
    #[napi(catch_unwind)]
    pub fn working_dir(&self, cwd: Option<String>) -> Result<String> {
        let dir = self.inner.inside_dir(cwd.as_deref()).napi()?;
        self.inner.check_dir(&dir).napi()?;
        Ok(dir)
    }

    /// The session's directory on the host, `<root>/<id>`.
    #[napi(getter)]
    pub fn dir(&self) -> String {
        self.inner.dir().to_string_lossy().into_owned()
    }

    #[napi(getter)]
    pub fn ports(&self) -> Vec<u32> {
        self.inner.ports().into_iter().map(u32::from).collect()
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_ports<'e>(&self, env: &'e Env, ports: Value) -> Result<PromiseRaw<'e, ()>> {
        let ports = persistent::ports(&ports, "setPorts").napi()?;
        let s = self.inner.clone();
        crate::spawn(env, async move { s.set_ports(&ports).await })
    }

    /// The URL reaching `port` inside, or null when it is not exposed.
    #[napi(catch_unwind)]
    pub fn port_url(&self, port: u32, protocol: Option<String>) -> Option<String> {
        let port = u16::try_from(port).ok()?;
        self.inner.port_url(port, protocol.as_deref().unwrap_or("http"))
    }

    #[napi(catch_unwind)]
    pub fn set_network_policy(&self, policy: Value) -> Result<()> {
        self.inner.set_policy(NetworkPolicy::from_value(&policy, "setNetworkPolicy").napi()?).napi()
    }

    #[napi(catch_unwind)]
    pub fn set_transformations(&self, list: Value, functions: Option<JsFn>) -> Result<()> {
        let list = transform::from_list(&list, &crate::functions(functions), "setRequestTransformations").napi()?;
        self.inner.broker().set_transformations(list);
        Ok(())
    }

    #[napi(catch_unwind)]
    pub fn add_transformations(&self, list: Value, functions: Option<JsFn>) -> Result<()> {
        let list = transform::from_list(&list, &crate::functions(functions), "addRequestTransformations").napi()?;
        self.inner.broker().add_transformations(list);
        Ok(())
    }

    /// Keeps what is now in `/tmp` and the home for later sessions of `identity`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn save_identity<'e>(&self, env: &'e Env, identity: String) -> Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        crate::spawn(env, async move {
            tokio::task::spawn_blocking(move || s.save_identity(&identity)).await.map_err(|e| {
                corral_core::Error::new(corral_core::Code::Io, format!("Saving the identity failed: {e}"))
            })?
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn stop<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        crate::spawn(env, async move {
            s.stop().await;
            Ok(())
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn destroy<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let s = self.inner.clone();
        crate::spawn(env, async move { s.destroy().await })
    }
}
