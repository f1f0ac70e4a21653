//! The wire forms of a sandbox's values: the request a JavaScript `SandboxAdapter` receives (and
//! a caller's `adapter.run(request)` gives), and the network policy as `sandbox.network` shows it.

use serde_json::{json, Value};

use super::{Network, SandboxRequest};
use crate::error::{Code, Error, Result};
use crate::options::Reader;

impl SandboxRequest {
    /// `{ command, cwd, env?, timeoutMs?, stdin? }`.
    pub fn from_json(v: &Value) -> Result<SandboxRequest> {
        let r = Reader::new("Sandbox request", v, &["command", "cwd", "env", "timeoutMs", "stdin"])
            .map_err(|e| Error::new(Code::InvalidArguments, e.message))?;
        let bad = |f: &str| {
            Error::new(Code::InvalidArguments, format!("Sandbox request: {f} is missing or has the wrong type."))
        };
        let text = |f: &str| r.get(f).and_then(Value::as_str).map(str::to_string);
        Ok(SandboxRequest {
            command: text("command").ok_or_else(|| bad("command"))?,
            cwd: text("cwd").ok_or_else(|| bad("cwd"))?,
            env: r.string_map("env").map_err(|_| bad("env"))?,
            timeout_ms: match r.get("timeoutMs") {
                None => 0,
                Some(t) => t.as_f64().filter(|f| *f >= 0.0).ok_or_else(|| bad("timeoutMs"))? as u64,
            },
            stdin: match r.get("stdin") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return Err(bad("stdin")),
            },
            on_output: None,
            mount: None,
            capture_bytes: None,
            input: None,
            record: None,
            changes_dir: None,
            pending: None,
        })
    }

    /// As a JavaScript adapter receives it (the mount, the output sink and the capture cap stay
    /// on this side).
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "command": self.command, "cwd": self.cwd, "env": self.env, "timeoutMs": self.timeout_ms });
        if let Some(s) = &self.stdin {
            v["stdin"] = json!(s);
        }
        v
    }
}

impl Network {
    /// `'none'`, `'default'` or `{ allow: [hosts] }`, as it was given.
    pub fn to_json(&self) -> Value {
        match self {
            Network::None => json!("none"),
            Network::Default => json!("default"),
            Network::Allow(hosts) => json!({ "allow": hosts }),
        }
    }
}
