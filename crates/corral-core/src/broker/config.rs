//! `createCredentialBroker`'s options.

use serde_json::Value;

use super::header::header_source;
use super::{BrokerConfig, HeaderSource};
use crate::error::Result;
use crate::options::{Functions, Reader};
use std::sync::Arc;

/// `createCredentialBroker({ rules, allow?, allowPrivate?, host?, port?, ca? })`: a rule's header
/// value is a string or a function (sync or async) called per request.
impl BrokerConfig {
    pub fn from_options(v: &Value, fns: Functions<'_>) -> Result<BrokerConfig> {
        let r = Reader::new(
            "createCredentialBroker",
            v,
            &["rules", "allow", "allowPrivate", "host", "port", "ca", "transformations", "tls", "scrub"],
        )?;
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
                        let what = format!("createCredentialBroker: rule '{host}' header '{name}'");
                        list.push((name.clone(), header_source(value, fns, &what)?));
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
            terminate_tls: match r.get("tls") {
                None | Some(Value::Null) => false,
                Some(Value::String(s)) if s == "terminate" => true,
                Some(_) => return Err(r.err("tls must be 'terminate' (or left out).")),
            },
            no_scrub: !r.bool("scrub", true)?,
            transformations: match r.get("transformations") {
                None | Some(Value::Null) => Vec::new(),
                Some(list) => super::transform::from_list(list, fns, "createCredentialBroker: transformations")?,
            },
        })
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
