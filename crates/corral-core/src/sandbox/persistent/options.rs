//! `createCorralHarnessSandbox(options)` read and checked (API.md "Agents inside corral"): what
//! every session of a provider is made with.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{SessionKind, SessionOptions, WORKSPACE};
use crate::broker::transform::{self, Transformation};
use crate::broker::NetworkPolicy;
use crate::error::{Error, Result};
use crate::options::{Functions, Reader};
use crate::sandbox::docker::{Reuse, SubprocessSandbox, SubprocessSandboxOptions};
use crate::sandbox::linux::LinuxSandboxOptions;

const WHAT: &str = "createCorralHarnessSandbox";

/// The provider's options: where sessions live, how each is made, and its first transformations.
pub struct HarnessOptions {
    /// `<root>/<sessionId>` is a session's directory.
    pub root: PathBuf,
    pub session: SessionOptions,
    pub transformations: Vec<Transformation>,
}

/// Reads the options (`allow`, `deny` and `files` are the shell tool's and the file tools' and
/// checked where those are made).
pub fn from_options(v: &Value, fns: Functions<'_>) -> Result<HarnessOptions> {
    let r = Reader::new(
        WHAT,
        v,
        &[
            "root",
            "sandbox",
            "ports",
            "network",
            "requestTransformations",
            "env",
            "allow",
            "deny",
            "upstreamCa",
            "files",
        ],
    )?;
    let root = r.required_string("root")?;
    if !std::path::Path::new(&root).is_absolute() || root.contains('\0') {
        return Err(r.err(format!("root must be an absolute path, not {root:?}.")));
    }
    let sandbox = sandbox_options(r.get("sandbox"))?;
    let ports = match r.get("ports") {
        None => vec![4000],
        Some(v) => ports(v, WHAT)?,
    };
    let policy = match r.get("network") {
        None => NetworkPolicy::DenyAll,
        Some(v) => NetworkPolicy::from_value(v, &format!("{WHAT} network"))?,
    };
    let transformations = match r.get("requestTransformations") {
        None => Vec::new(),
        Some(v) => transform::from_list(v, fns, &format!("{WHAT} requestTransformations"))?,
    };
    let upstream_ca = match r.get("upstreamCa") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(_) => r.strings("upstreamCa")?.unwrap_or_default(),
    };
    let env = r.string_map("env")?;
    Ok(HarnessOptions {
        root: PathBuf::from(root),
        session: SessionOptions { sandbox, policy, ports, upstream_ca, env },
        transformations,
    })
}

/// `sandbox: { kind: 'linux', …LinuxSandboxOptions less network and broker } | { kind:
/// 'docker', …SubprocessSandboxOptions less network, broker and networkName }` (the session has
/// its own network and broker).
fn sandbox_options(v: Option<&Value>) -> Result<SessionKind> {
    let Some(v) = v else { return Ok(SessionKind::Linux(LinuxSandboxOptions::from_options(&Value::Null)?)) };
    let Some(o) = v.as_object() else {
        return Err(Error::config(format!("{WHAT}: sandbox must be an object such as {{ kind: 'linux' }}.")));
    };
    let docker = match o.get("kind").and_then(Value::as_str) {
        Some("linux") => false,
        Some("docker") => true,
        _ => return Err(Error::config(format!("{WHAT}: sandbox.kind must be 'linux' or 'docker'."))),
    };
    let own: &[&str] = if docker { &["network", "broker", "networkName"] } else { &["network", "broker"] };
    if let Some(key) = own.iter().find(|k| o.contains_key(**k)) {
        return Err(Error::config(format!(
            "{WHAT}: sandbox.{key} is not an option here: a session's network is its network policy (network, setNetworkPolicy) and its broker is its own."
        )));
    }
    let rest: Map<String, Value> =
        o.iter().filter(|(k, _)| *k != "kind").map(|(k, v)| (k.clone(), v.clone())).collect();
    if !docker {
        return Ok(SessionKind::Linux(LinuxSandboxOptions::from_options(&Value::Object(rest))?));
    }
    let o = SubprocessSandboxOptions::from_options(&Value::Object(rest))?;
    if o.reuse != Reuse::Session && v.get("reuse").is_some() {
        return Err(Error::config(format!(
            "{WHAT}: sandbox.reuse: a session is one kept container, so reuse can only be 'session'."
        )));
    }
    // Where the engine is (a daemon on TCP cannot mount the session's directories), checked now.
    SubprocessSandbox::new(o.clone())?.in_session(vec![(WORKSPACE.into(), WORKSPACE.into())], Vec::new())?;
    Ok(SessionKind::Docker(o))
}

/// A list of ports to expose: whole numbers 1 to 65535.
pub fn ports(v: &Value, what: &str) -> Result<Vec<u16>> {
    let bad = || Error::config(format!("{what}: ports must be an array of port numbers (1 to 65535)."));
    let list = v.as_array().ok_or_else(bad)?;
    let mut out = Vec::new();
    for p in list {
        let n = p.as_u64().filter(|n| (1..=65535).contains(n)).ok_or_else(bad)? as u16;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}
