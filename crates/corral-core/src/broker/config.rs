//! `createCredentialBroker`'s options.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{BrokerConfig, FixedHeader, HeaderSource};
use crate::error::{Code, Error, Result};
use crate::options::{function_of, Callable, Functions, Reader};

/// `createCredentialBroker({ rules, allow?, allowPrivate?, host?, port?, ca? })`: a rule's header
/// value is a string or a function (sync or async) called per request.
impl BrokerConfig {
    pub fn from_options(v: &Value, fns: Functions<'_>) -> Result<BrokerConfig> {
        let r = Reader::new("createCredentialBroker", v, &["rules", "allow", "allowPrivate", "host", "port", "ca"])?;
        let mut rules = Vec::new();
        match r.get("rules") {
            None => {}
            Some(Value::Object(hosts)) => {
                for (host, headers) in hosts {
                    let Value::Object(headers) = headers else {
                        return Err(r.err(format!("rules['{host}'] must be an object of header name to value.")));
                    };
                    let mut list: Vec<(String, Arc<dyn HeaderSource>)> = Vec::new();
                    for (name, value) in headers {
                        let source: Arc<dyn HeaderSource> = match value {
                            Value::String(s) => FixedHeader::arc(s),
                            f => Arc::new(CallableHeader(function_of(f, fns).ok_or_else(|| {
                                r.err(format!("rule '{host}' header '{name}' must be a string or a function."))
                            })?)),
                        };
                        list.push((name.clone(), source));
                    }
                    rules.push((host.clone(), list));
                }
            }
            Some(_) => return Err(r.err("rules must be an object of host to headers.")),
        }
        let ca = match r.get("ca") {
            Some(Value::String(pem)) => vec![pem.clone()],
            _ => r.strings("ca")?.unwrap_or_default(),
        };
        Ok(BrokerConfig {
            rules,
            allow: r.strings("allow")?.unwrap_or_default(),
            allow_private: r.strings("allowPrivate")?.unwrap_or_default(),
            host: r.string("host")?,
            port: match r.get("port") {
                None => None,
                Some(_) => Some(r.int("port", 0, 0..=65535)? as u16),
            },
            extra_ca_pem: ca,
        })
    }
}

/// A header whose value a function gives, per request.
struct CallableHeader(Arc<dyn Callable>);

#[async_trait]
impl HeaderSource for CallableHeader {
    async fn value(&self) -> Result<String> {
        match self.0.call(Vec::new()).await? {
            Value::String(s) => Ok(s),
            _ => Err(Error::new(Code::Io, "A header function must return a string.")),
        }
    }
}

/// `broker.listen({ host, clients, allow? })`: the address to listen on, the subnet whose clients
/// may connect, and the hosts they may reach beyond the rules'.
pub struct ListenOptions {
    pub host: String,
    pub clients: String,
    pub allow: Vec<String>,
}

impl ListenOptions {
    pub fn from_options(v: &Value) -> Result<ListenOptions> {
        let r = Reader::new("listen", v, &["host", "clients", "allow"])?;
        Ok(ListenOptions {
            host: r.required_string("host")?,
            clients: r.required_string("clients")?,
            allow: r.strings("allow")?.unwrap_or_default(),
        })
    }
}
