//! The options of the sandboxes that run in a container: `SubprocessSandbox`, and the `network`
//! shape it shares with `LinuxSandbox`.

use serde_json::Value;

use super::limits::Limits;
use super::{DockerTls, Network, Reuse, SubprocessSandboxOptions};
use crate::error::Result;
use crate::options::Reader;

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

impl SubprocessSandboxOptions {
    /// `SubprocessSandbox({ image, network?, broker?, networkName?, dockerHost?, limits?, reuse?,
    /// tls?, protect? })` (the broker is attached by the binding).
    pub fn from_options(v: &Value) -> Result<SubprocessSandboxOptions> {
        let r = Reader::new(
            "SubprocessSandbox",
            v,
            &["image", "network", "broker", "networkName", "dockerHost", "limits", "reuse", "tls", "protect"],
        )?;
        let network = Network::read(&r, true)?;
        Ok(SubprocessSandboxOptions {
            image: r.required_string("image")?,
            network,
            broker: None,
            network_name: r.string("networkName")?,
            docker_host: r.string("dockerHost")?,
            limits: Limits::from_option(r.get("limits"), "SubprocessSandbox limits")?,
            reuse: match r.get("reuse") {
                None => Reuse::Command,
                Some(Value::String(s)) if s == "command" => Reuse::Command,
                Some(Value::String(s)) if s == "session" => Reuse::Session,
                Some(_) => return Err(r.err("reuse must be 'command' or 'session'.")),
            },
            tls: match r.get("tls") {
                None => None,
                Some(t) => {
                    let t = Reader::new("SubprocessSandbox tls", t, &["ca", "cert", "key"])?;
                    Some(DockerTls { ca: t.string("ca")?, cert: t.string("cert")?, key: t.string("key")? })
                }
            },
            protect: {
                let list = r.strings("protect")?.unwrap_or_else(|| vec![".git".into()]);
                if list.iter().any(|p| p.is_empty() || p.contains('\0')) {
                    return Err(r.err("protect entries must be non-empty paths."));
                }
                list
            },
        })
    }
}

/// A sandbox's `broker` option: the binding says whether it was a broker `createCredentialBroker`
/// made (only JavaScript can tell); anything else given there is refused.
pub fn check_broker(what: &str, options: &Value, is_broker: bool) -> Result<()> {
    let given = options.get("broker").is_some_and(|b| !b.is_null());
    if given && !is_broker {
        return Err(crate::error::Error::config(format!("{what}: broker must come from createCredentialBroker().")));
    }
    Ok(())
}
