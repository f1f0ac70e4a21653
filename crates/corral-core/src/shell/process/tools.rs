//! The tools over background processes: `process_output`, `process_input`, `process_stop` and
//! `process_list`, and the `run_in_background` argument of the shell tool.

use serde_json::{json, Value};

use super::{Processes, MAX_RUNNING_PER_SESSION, MAX_WAIT_MS};
use crate::error::{Code, Error, Result};
use crate::shell::Cancel;

/// The tools `background: true` adds after the shell tool, in this order.
pub const PROCESS_TOOLS: [&str; 4] = ["process_output", "process_input", "process_stop", "process_list"];

fn id_prop() -> Value {
    json!({ "type": "string", "description": "The process id run_in_background gave (p1, p2, …)." })
}

pub fn parameters(name: &str) -> Value {
    match name {
        "process_output" => json!({
            "type": "object",
            "properties": {
                "id": id_prop(),
                "wait_ms": { "type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "description": "Wait up to this long for new output or the exit when there is none yet (default 0)." }
            },
            "required": ["id"],
            "additionalProperties": false
        }),
        "process_input" => json!({
            "type": "object",
            "properties": {
                "id": id_prop(),
                "text": { "type": "string", "description": "Text written to the process's standard input (add \\n to end a line)." },
                "close": { "type": "boolean", "description": "Close its standard input after the text (default false)." }
            },
            "required": ["id", "text"],
            "additionalProperties": false
        }),
        "process_stop" => json!({
            "type": "object",
            "properties": { "id": id_prop() },
            "required": ["id"],
            "additionalProperties": false
        }),
        _ => json!({ "type": "object", "properties": {}, "additionalProperties": false }),
    }
}

pub fn description(name: &str) -> String {
    match name {
        "process_output" => "Read what a background process wrote since the last read: { id, running, stdout, stderr, exitCode? }. With wait_ms, waits for new output or the exit when there is none yet.".into(),
        "process_input" => "Write text to a background process's standard input; close: true ends its input.".into(),
        "process_stop" => "Stop a background process (it and every process it started) and return its last output.".into(),
        "process_list" => format!("List this session's background processes: id, command, running, exitCode. At most {MAX_RUNNING_PER_SESSION} run at once."),
        _ => String::new(),
    }
}

fn validator(name: &str) -> Option<&'static jsonschema::Validator> {
    static CELLS: std::sync::OnceLock<Vec<(&'static str, jsonschema::Validator)>> = std::sync::OnceLock::new();
    let all = CELLS.get_or_init(|| {
        PROCESS_TOOLS.iter().map(|n| (*n, jsonschema::validator_for(&parameters(n)).expect("valid schemas"))).collect()
    });
    all.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
}

/// One call of a process tool.
pub async fn call(
    procs: &Processes,
    name: &str,
    args: &Value,
    session: &str,
    cancel: Option<&Cancel>,
    redactor: Option<&std::sync::Arc<crate::redact::Redactor>>,
) -> Result<Value> {
    let result = async {
        let v = validator(name).ok_or_else(|| Error::new(Code::InvalidArguments, format!("Unknown tool: {name}")))?;
        crate::tools::check_args(name, v, args)?;
        let id = args.get("id").and_then(Value::as_str).unwrap_or_default();
        match name {
            "process_output" => {
                let wait = args.get("wait_ms").and_then(Value::as_u64).unwrap_or(0);
                match redactor {
                    Some(r) => procs.output_redacted(session, id, wait, cancel, r).await,
                    None => procs.output(session, id, wait, cancel).await,
                }
            }
            "process_input" => procs.input(
                session,
                id,
                args.get("text").and_then(Value::as_str).unwrap_or_default().as_bytes(),
                args.get("close").and_then(Value::as_bool).unwrap_or(false),
            ),
            "process_stop" => match redactor {
                Some(r) => procs.stop_redacted(session, id, r).await,
                None => procs.stop(session, id).await,
            },
            _ => Ok(match redactor {
                Some(r) => r.redact_json(procs.list(session), session),
                None => procs.list(session),
            }),
        }
    }
    .await;
    match redactor {
        Some(r) => result.map_err(|e| r.redact_error(e, session)),
        None => result,
    }
}

/// The shell tool's call with `run_in_background: true`: the same checks as any command (the
/// caller asked for approval the same way), then started in the background.
pub async fn start_background(
    shell: std::sync::Arc<dyn crate::shell::ShellProvider>,
    opts: &crate::shell::tool::ShellToolOptions,
    procs: &Processes,
    args: &Value,
    session: &str,
) -> Result<Value> {
    crate::shell::tool::check_call_args(opts, args)?;
    let command = args.get("command").and_then(Value::as_str).unwrap_or_default();
    let stdin = args.get("stdin").and_then(Value::as_str);
    if stdin.is_some() && !shell.takes_input() {
        return Err(Error::new(
            Code::InvalidArguments,
            "This shell cannot pass input to a background command: start it without stdin.",
        ));
    }
    // The model may write to it later (process_input) wherever the shell can pass input.
    let request = Request { input: shell.takes_input(), ..Request::default() };
    // Approval covers input: text for a command that needed approval needs it too (marked as
    // it is made, before any call can name it).
    let asked = crate::shell::tool::needs_approval(shell.as_ref(), opts, args).await?;
    let request = Request { asked, ..request };
    let id = spawn(shell, opts, procs, command, &request, session).await?;
    // `stdin` is the process's first input.
    if let Some(text) = stdin {
        procs.input(session, &id, text.as_bytes(), false)?;
    }
    Ok(json!({ "id": id, "running": true, "stdout": "", "stderr": "" }))
}

/// What a caller other than the model's shell tool asks of one background command (the SDKs'
/// sandbox sessions): its own working directory and variables, and whether it writes input.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Workspace-relative; the tool's `cwd` when `None`.
    pub cwd: Option<String>,
    /// Over the tool's `env`.
    pub env: std::collections::BTreeMap<String, String>,
    /// The caller will write to its input: refused before it starts when the shell cannot pass
    /// it. Without, the process's input is closed (it reads end of file).
    pub input: bool,
    /// The most unread bytes kept a stream (`STREAM_BYTES` when `None`).
    pub keep_bytes: Option<usize>,
    /// Its start needed approval: text for its input needs it too.
    pub asked: bool,
}

/// The largest `keepBytes` a request may ask for a stream.
pub const MAX_KEEP_BYTES: usize = 64 * 1024 * 1024;

impl Request {
    /// `{ cwd?, env?, input? }`.
    pub fn from_json(v: &Value) -> Result<Request> {
        let r = crate::options::Reader::new("spawn", v, &["cwd", "env", "input", "keepBytes"])?;
        let keep = r.int("keepBytes", super::buffer::STREAM_BYTES as u64, 2..=MAX_KEEP_BYTES as u64)? as usize;
        Ok(Request {
            cwd: r.string("cwd")?,
            env: r.string_map("env")?,
            input: r.bool("input", false)?,
            keep_bytes: Some(keep),
            // A program's own spawn: no person was asked.
            asked: false,
        })
    }
}

/// Starts `command` in the background after the tool's checks (allow/deny, judged in the
/// working directory it runs in): its id. Every face of background processes starts here.
pub async fn spawn(
    shell: std::sync::Arc<dyn crate::shell::ShellProvider>,
    opts: &crate::shell::tool::ShellToolOptions,
    procs: &Processes,
    command: &str,
    request: &Request,
    session: &str,
) -> Result<String> {
    if command.trim().is_empty() {
        return Err(Error::new(Code::InvalidArguments, "command must be a non-empty string."));
    }
    let cwd = request.cwd.clone().or_else(|| opts.cwd.clone());
    crate::shell::tool::check_in(shell.as_ref(), opts, command, cwd.as_deref()).await?;
    if request.input && !shell.takes_input() {
        return Err(Error::new(
            Code::InvalidArguments,
            "This shell cannot pass input to a background command: start it without stdin.",
        ));
    }
    let mut env = opts.env.clone();
    env.extend(request.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let base = crate::shell::ExecOptions { cwd, env, ..Default::default() };
    let how = super::Start {
        asked: request.asked,
        input: request.input,
        keep_bytes: request.keep_bytes.unwrap_or(super::buffer::STREAM_BYTES).clamp(2, MAX_KEEP_BYTES),
    };
    procs.start(shell, command, base, session, how)
}
