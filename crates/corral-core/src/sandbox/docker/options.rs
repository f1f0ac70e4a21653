//! The options of the sandbox that runs in a container: `SubprocessSandbox`.

use serde_json::Value;

use super::super::limits::Limits;
use super::super::Network;
use super::tls::DockerTls;
use super::{Reuse, SubprocessSandboxOptions};
use crate::error::Result;
use crate::options::Reader;

impl SubprocessSandboxOptions {
    /// `SubprocessSandbox({ image, network?, broker?, networkName?, dockerHost?, limits?, reuse?,
    /// tls?, protect? })` (the broker is attached by the binding).
    pub fn from_options(v: &Value) -> Result<SubprocessSandboxOptions> {
        let r = Reader::new(
            "SubprocessSandbox",
            v,
            &[
                "image",
                "network",
                "broker",
                "networkName",
                "dockerHost",
                "limits",
                "reuse",
                "tls",
                "protect",
                "changes",
            ],
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
            overlay: match r.get("changes") {
                None => false,
                Some(Value::String(s)) if s == "direct" => false,
                Some(Value::String(s)) if s == "overlay" => true,
                Some(_) => return Err(r.err("changes must be 'direct' or 'overlay'.")),
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
