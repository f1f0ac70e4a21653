//! `createCredentialBroker`: the core's proxy, with header values from strings or JS functions.

use std::sync::Arc;

use async_trait::async_trait;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{json, Value};

use corral_core::broker::{Broker, BrokerConfig, FixedHeader, HeaderSource};
use corral_core::error::{Code, Error as CoreError};

use crate::{CoreResult, IntoNapi, JsCallback, JsFn};

/// A header value computed by a JS function per request.
struct JsHeader {
    cb: JsCallback,
    index: u64,
}

#[async_trait]
impl HeaderSource for JsHeader {
    async fn value(&self) -> CoreResult<String> {
        match self.cb.call(json!({ "index": self.index })).await? {
            Value::String(s) => Ok(s),
            _ => Err(CoreError::new(Code::Io, "A header function must return a string.")),
        }
    }
}

fn names(v: Option<&Value>, what: &str) -> CoreResult<Vec<String>> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str().map(str::to_string).ok_or_else(|| {
                    CoreError::config(format!("createCredentialBroker: {what} must be an array of strings."))
                })
            })
            .collect(),
        Some(Value::String(s)) if what == "ca" => Ok(vec![s.clone()]),
        Some(_) => Err(CoreError::config(format!("createCredentialBroker: {what} must be an array of strings."))),
    }
}

/// `config.rules` as the facade sends it: `[{ host, headers: [{ name, value } | { name, index }] }]`.
fn config(c: &Value, cb: Option<JsCallback>) -> CoreResult<BrokerConfig> {
    let mut rules = Vec::new();
    for r in c.get("rules").and_then(Value::as_array).into_iter().flatten() {
        let host = r.get("host").and_then(Value::as_str).unwrap_or_default().to_string();
        let mut headers: Vec<(String, Arc<dyn HeaderSource>)> = Vec::new();
        for h in r.get("headers").and_then(Value::as_array).into_iter().flatten() {
            let name = h.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let source: Arc<dyn HeaderSource> =
                match (h.get("value").and_then(Value::as_str), h.get("index").and_then(Value::as_u64), &cb) {
                    (Some(v), _, _) => FixedHeader::arc(v),
                    (None, Some(i), Some(cb)) => Arc::new(JsHeader { cb: cb.clone(), index: i }),
                    _ => {
                        return Err(CoreError::config(format!(
                            "createCredentialBroker: rule '{host}' header '{name}' must be a string or a function."
                        )))
                    }
                };
            headers.push((name, source));
        }
        rules.push((host, headers));
    }
    let port = match c.get("port") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|p| *p <= 65535)
                .ok_or_else(|| CoreError::config("createCredentialBroker: port must be 0-65535."))? as u16,
        ),
    };
    Ok(BrokerConfig {
        rules,
        allow: names(c.get("allow"), "allow")?,
        allow_private: names(c.get("allowPrivate"), "allowPrivate")?,
        host: c.get("host").and_then(Value::as_str).map(str::to_string),
        port,
        extra_ca_pem: names(c.get("ca"), "ca")?,
    })
}

#[napi]
pub struct NativeBroker {
    pub(crate) inner: Arc<Broker>,
}

#[napi]
impl NativeBroker {
    #[napi(ts_return_type = "Promise<NativeBroker>")]
    pub fn start<'e>(env: &'e Env, options: Value, headers: Option<JsFn>) -> Result<PromiseRaw<'e, NativeBroker>> {
        let cfg = config(&options, headers.map(|f| JsCallback(Arc::new(f)))).napi()?;
        env.spawn_future(async move { Ok(NativeBroker { inner: Broker::start(cfg).await.napi()? }) })
    }

    #[napi(getter)]
    pub fn url(&self) -> String {
        self.inner.url()
    }

    #[napi(getter)]
    pub fn env(&self) -> Value {
        json!(self.inner.env())
    }

    #[napi]
    pub fn base_url(&self, host: String) -> String {
        self.inner.base_url(&host)
    }

    #[napi(ts_return_type = "Promise<string>")]
    pub fn listen<'e>(
        &self,
        env: &'e Env,
        host: String,
        clients: String,
        allow: Vec<String>,
    ) -> Result<PromiseRaw<'e, String>> {
        let b = self.inner.clone();
        env.spawn_future(async move { b.listen(&host, &clients, allow).await.napi() })
    }

    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'e>(&self, env: &'e Env) -> Result<PromiseRaw<'e, ()>> {
        let b = self.inner.clone();
        env.spawn_future(async move {
            b.close().await;
            Ok(())
        })
    }
}
