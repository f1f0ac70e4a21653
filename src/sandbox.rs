//! Sandbox adapters (NoopSandbox, SubprocessSandbox, adapters written in JS) and SandboxShell.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use corral_core::error::Error as CoreError;
use corral_core::sandbox::kubernetes::{KubernetesSandbox, KubernetesSandboxOptions};
use corral_core::sandbox::{EgressBroker, NoopSandbox, SandboxAdapter, SandboxRequest, SubprocessSandbox};

use crate::broker::NativeBroker;
use crate::{CancelToken, IntoNapi, JsCallback, JsFn};

#[napi]
pub struct NativeSandbox {
    pub(crate) inner: Arc<dyn SandboxAdapter>,
    subprocess: Option<Arc<SubprocessSandbox>>,
    kubernetes: Option<Arc<KubernetesSandbox>>,
}

#[napi]
impl NativeSandbox {
    #[napi(factory, catch_unwind)]
    pub fn noop() -> NativeSandbox {
        NativeSandbox { inner: Arc::new(NoopSandbox::new()), subprocess: None, kubernetes: None }
    }

    #[napi(factory, catch_unwind)]
    pub fn subprocess(options: Value, broker: Option<&NativeBroker>) -> Result<NativeSandbox> {
        corral_core::sandbox::check_broker("SubprocessSandbox", &options, broker.is_some()).napi()?;
        let mut o = corral_core::sandbox::SubprocessSandboxOptions::from_options(&options).napi()?;
        o.broker = broker.map(|b| b.inner.clone() as Arc<dyn EgressBroker>);
        let s = Arc::new(SubprocessSandbox::new(o).napi()?);
        Ok(NativeSandbox { inner: s.clone(), subprocess: Some(s), kubernetes: None })
    }

    /// `new LinuxSandbox(options)`: the kernel's own isolation (Linux only).
    #[napi(factory, catch_unwind)]
    pub fn linux(options: Value, broker: Option<&NativeBroker>) -> Result<NativeSandbox> {
        #[cfg(target_os = "linux")]
        {
            use corral_core::sandbox::linux::{LinuxSandbox, LinuxSandboxOptions};
            corral_core::sandbox::check_broker("LinuxSandbox", &options, broker.is_some()).napi()?;
            let o = LinuxSandboxOptions::from_options(&options).napi()?;
            let broker = broker.map(|b| b.inner.clone() as Arc<dyn EgressBroker>);
            Ok(NativeSandbox {
                inner: Arc::new(LinuxSandbox::new(o).napi()?.with_broker(broker)),
                subprocess: None,
                kubernetes: None,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (options, broker);
            Err(CoreError::config("LinuxSandbox: this machine does not run Linux; use SubprocessSandbox.")).napi()
        }
    }

    /// `new KubernetesSandbox(options)`: nothing reaches the cluster before the first use.
    #[napi(factory, catch_unwind)]
    pub fn kubernetes(options: Value) -> Result<NativeSandbox> {
        let k = Arc::new(KubernetesSandbox::new(KubernetesSandboxOptions::from_options(&options).napi()?));
        Ok(NativeSandbox { inner: k.clone(), subprocess: None, kubernetes: Some(k) })
    }

    /// KubernetesSandbox's `workspace()`: the pod's workdir as a file-system provider.
    #[napi(catch_unwind)]
    pub fn workspace(&self) -> Result<crate::fs::NativeFs> {
        match &self.kubernetes {
            Some(k) => {
                let ws = k.workspace();
                let root = ws.workdir().to_string();
                Ok(crate::fs::NativeFs::remote_root(Arc::new(ws), root))
            }
            None => Err(CoreError::config("workspace() belongs to KubernetesSandbox.")).napi(),
        }
    }

    /// `LinuxSandbox.probe()`: what the machine offers.
    #[napi(catch_unwind)]
    pub fn linux_probe() -> Value {
        #[cfg(target_os = "linux")]
        {
            corral_core::sandbox::linux::probe().to_json()
        }
        #[cfg(not(target_os = "linux"))]
        {
            serde_json::json!({ "userNamespaces": false, "mountNamespaces": false, "pidNamespaces": false, "netNamespaces": false, "seccomp": false, "landlock": false, "cgroups": null })
        }
    }

    #[napi(factory, catch_unwind)]
    pub fn from_js(dispatch: JsFn) -> NativeSandbox {
        NativeSandbox {
            inner: Arc::new(corral_core::remote::RemoteSandbox::new(JsCallback::dispatch(dispatch))),
            subprocess: None,
            kubernetes: None,
        }
    }

    /// `sandbox.network`: the validated policy.
    #[napi(getter)]
    pub fn network(&self) -> Value {
        self.subprocess.as_ref().map(|s| s.network().to_json()).unwrap_or(Value::Null)
    }

    #[napi(getter)]
    pub fn network_name(&self) -> Option<String> {
        self.subprocess.as_ref().map(|s| s.network_name().to_string())
    }

    #[napi(ts_return_type = "Promise<any>")]
    pub fn run<'e>(&self, env: &'e Env, request: Value, cancel: Option<&CancelToken>) -> Result<PromiseRaw<'e, Value>> {
        let a = self.inner.clone();
        let req = SandboxRequest::from_json(&request).napi()?;
        let cancel = cancel.map(|c| c.inner.clone());
        crate::spawn(env, async move { a.run(req, cancel).await.map(|r| r.to_json()) })
    }

    /// SubprocessSandbox's `prune()`: how many containers a crashed process left were removed.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn prune<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, u32>> {
        let (s, k) = (self.subprocess.clone(), self.kubernetes.clone());
        crate::spawn(env, async move {
            match (s, k) {
                (Some(s), _) => s.prune().await.map(|n| n as u32),
                (None, Some(k)) => k.prune().await.map(|n| n as u32),
                (None, None) => Err(CoreError::config("prune() belongs to SubprocessSandbox and KubernetesSandbox.")),
            }
        })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let a = self.inner.clone();
        crate::spawn(env, async move { a.close().await })
    }
}
