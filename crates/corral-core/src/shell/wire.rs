//! The wire forms of the shell's values: what a JavaScript provider, stub or adapter receives and
//! returns, and what a caller's `exec(command, options)` gives. One place for both directions.

use serde_json::{json, Value};

use super::{Cancel, ExecOptions, ExecResult};
use crate::error::{Code, Error, Result};
use crate::options::Reader;

/// A call's argument that is an options object: its mistakes are the caller's bad arguments
/// (`InvalidArguments`), not a configuration error.
fn call_options<'a>(what: &'static str, v: &'a Value, known: &[&str]) -> Result<Reader<'a>> {
    Reader::new(what, v, known).map_err(|e| Error::new(Code::InvalidArguments, e.message))
}

impl ExecOptions {
    /// `exec(command, { cwd?, timeoutMs?, env?, stdin?, onOutput? })` (the facade takes `signal`
    /// off and gives it as `cancel`; `onOutput` is for a JavaScript provider and ignored here).
    pub fn from_json(v: &Value, cancel: Option<Cancel>) -> Result<ExecOptions> {
        let r = call_options(
            "exec options",
            v,
            &["cwd", "timeoutMs", "env", "stdin", "onOutput", "sessionId", "turn", "toolCallId"],
        )?;
        let bad = |f: &str| Error::new(Code::InvalidArguments, format!("exec options: {f} has the wrong type."));
        let text = |f: &str| match r.get(f) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(f)),
        };
        Ok(ExecOptions {
            cwd: text("cwd")?,
            timeout_ms: match r.get("timeoutMs") {
                None => None,
                Some(n) => Some(n.as_f64().filter(|f| *f >= 0.0).ok_or_else(|| bad("timeoutMs"))? as u64),
            },
            env: r.string_map("env").map_err(|_| bad("env"))?,
            stdin: text("stdin")?,
            cancel,
            session_id: text("sessionId")?,
            turn: match r.get("turn") {
                None => None,
                Some(n) => Some(
                    n.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u32::MAX as f64)
                        .ok_or_else(|| bad("turn"))? as u32,
                ),
            },
            tool_call_id: text("toolCallId")?,
            ..ExecOptions::default()
        })
    }

    /// As a JavaScript provider or stub receives them: unset options are absent, not null.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "env": self.env });
        if let Some(cwd) = &self.cwd {
            v["cwd"] = json!(cwd);
        }
        if let Some(t) = self.timeout_ms {
            v["timeoutMs"] = json!(t);
        }
        if let Some(s) = &self.stdin {
            v["stdin"] = json!(s);
        }
        if let Some(s) = &self.session_id {
            v["sessionId"] = json!(s);
        }
        if let Some(t) = self.turn {
            v["turn"] = json!(t);
        }
        if let Some(s) = &self.tool_call_id {
            v["toolCallId"] = json!(s);
        }
        v
    }
}

impl ExecResult {
    /// `{ stdout, stderr, exitCode, timedOut, aborted?, signal?, note? }`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({ "stdout": self.stdout, "stderr": self.stderr, "exitCode": self.exit_code, "timedOut": self.timed_out });
        if self.aborted {
            v["aborted"] = json!(true);
        }
        if let Some(s) = &self.signal {
            v["signal"] = json!(s);
        }
        // A sandbox's word on the run (a limit that stopped it); never set on the host.
        if let Some(n) = &self.note {
            v["note"] = json!(n);
        }
        if let Some(c) = &self.changes {
            v["changes"] = c.to_json();
        }
        v
    }

    /// An exec result from loosely typed data (a provider's, a stub's or an adapter's answer): missing fields default, a wrong type is an error.
    pub fn from_json(v: &serde_json::Value) -> Result<ExecResult> {
        let bad = |f: &str| Error::new(Code::InvalidArguments, format!("The exec result's {f} has the wrong type."));
        let text = |f: &str| match v.get(f) {
            None | Some(serde_json::Value::Null) => Ok(String::new()),
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(bad(f)),
        };
        let flag = |f: &str| match v.get(f) {
            None | Some(serde_json::Value::Null) => Ok(false),
            Some(serde_json::Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(f)),
        };
        if !(v.is_object() || v.is_null()) {
            return Err(Error::new(Code::InvalidArguments, "An exec result must be an object."));
        }
        let exit_code = match v.get("exitCode") {
            None => Some(0),
            Some(serde_json::Value::Null) => None,
            Some(n) => Some(n.as_f64().ok_or_else(|| bad("exitCode"))? as i32),
        };
        Ok(ExecResult {
            stdout: text("stdout")?,
            stderr: text("stderr")?,
            exit_code,
            timed_out: flag("timedOut")?,
            aborted: flag("aborted")?,
            signal: v.get("signal").and_then(|s| s.as_str()).map(str::to_string),
            every_process_killed: false,
            note: v.get("note").and_then(|s| s.as_str()).map(str::to_string),
            changes: v.get("changes").and_then(crate::shell::changes::Changes::from_json),
        })
    }
}
