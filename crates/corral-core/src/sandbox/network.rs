//! What network a sandbox's command gets, as both sandboxes read it: none, Docker's default (a
//! container only), or an allowlist of hosts reached through the credential broker. A session's
//! policy is `broker::NetworkPolicy`, which its broker applies to every connection.

use serde_json::Value;

use crate::error::Result;
use crate::options::Reader;

/// What network a container gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Network {
    /// No network at all (`NetworkMode: none`).
    #[default]
    None,
    /// Docker's default network: unrestricted egress.
    Default,
    /// Only these hosts, through the broker; with no broker, no network (fails closed).
    Allow(Vec<String>),
}

impl Network {
    /// A sandbox's `network`: `'none'` (the default), `'default'` where `with_default`, or
    /// `{ allow: [hosts] }` (the hosts as given; the sandbox checks them).
    pub fn read(r: &Reader<'_>, with_default: bool) -> Result<Network> {
        let shape = || {
            r.err(if with_default {
                "network must be 'none', 'default' or { allow: [hosts] }."
            } else {
                "network must be 'none' or { allow: [hosts] }."
            })
        };
        Ok(match r.get("network") {
            None => Network::None,
            Some(Value::String(s)) if s == "none" => Network::None,
            Some(Value::String(s)) if s == "default" && with_default => Network::Default,
            Some(Value::Object(o)) if o.keys().all(|k| k == "allow") => match o.get("allow") {
                Some(Value::Array(hosts)) => Network::Allow(
                    hosts
                        .iter()
                        .map(|h| h.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| r.err("network.allow must be an array of host names."))?,
                ),
                _ => return Err(shape()),
            },
            Some(_) => return Err(shape()),
        })
    }
}
