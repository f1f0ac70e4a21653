//! `createCredentialBroker`: the core's proxy, with header values from strings or JS functions.

use std::sync::Arc;

use crate::Result;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::broker::Broker;

use crate::{IntoNapi, JsFn};

#[napi]
pub struct NativeBroker {
    pub(crate) inner: Arc<Broker>,
}

#[napi]
impl NativeBroker {
    #[napi(ts_return_type = "Promise<NativeBroker>")]
    pub fn start<'e>(env: &'e Env, options: Value, functions: Option<JsFn>) -> Result<PromiseRaw<'e, NativeBroker>> {
        let cfg = corral_core::broker::BrokerConfig::from_options(&options, &crate::functions(functions)).napi()?;
        crate::spawn(env, async move { Ok(NativeBroker { inner: Broker::start(cfg).await? }) })
    }

    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url()
    }

    /// With `tls: 'terminate'`: the broker's CA certificate (PEM).
    #[napi(getter)]
    pub fn ca(&self) -> Option<String> {
        self.inner.ca()
    }

    #[napi(getter)]
    pub fn env(&self) -> Value {
        json!(self.inner.env())
    }

    #[napi(catch_unwind)]
    pub fn base_url(&self, host: String) -> String {
        self.inner.base_url(&host)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn listen<'e>(&self, env: &'e Env, options: Value) -> Result<PromiseRaw<'e, String>> {
        let b = self.inner.clone();
        let o = corral_core::broker::ListenOptions::from_options(&options).napi()?;
        crate::spawn(env, async move { b.listen(&o.host, &o.clients, o.allow).await })
    }

    #[napi(catch_unwind)]
    pub fn set_transformations(&self, list: Value, functions: Option<JsFn>) -> Result<()> {
        let list = corral_core::broker::transform::from_list(&list, &crate::functions(functions), "setTransformations")
            .napi()?;
        self.inner.set_transformations(list);
        Ok(())
    }

    #[napi(catch_unwind)]
    pub fn add_transformations(&self, list: Value, functions: Option<JsFn>) -> Result<()> {
        let list = corral_core::broker::transform::from_list(&list, &crate::functions(functions), "addTransformations")
            .napi()?;
        self.inner.add_transformations(list);
        Ok(())
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let b = self.inner.clone();
        crate::spawn(env, async move {
            b.close().await;
            Ok(())
        })
    }
}
