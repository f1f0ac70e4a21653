//! The `shell` tool (spec: `createShellTool`) over any `ShellProvider`: rules first, then the
//! command with a clamped timeout, then `{ exitCode, stdout, stderr }` with each stream capped.
//! `needs_approval` answers the tool's `needsApproval`: false for a command the rules refuse
//! (it is never offered to a human), else the option (true by default, or a predicate).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::error::{Code, Error, Result};
use crate::shell::rules::{check_command, is_cmd_shell, CommandPattern};
use crate::shell::{Cancel, ExecOptions, ExecResult, ShellProvider};

pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
pub const MAX_OUTPUT_CHARS: usize = 30_000;

/// How long past its timeout (or a cancel) a provider that ignores them is still waited on.
const PROVIDER_GRACE_AFTER_TIMEOUT: Duration = Duration::from_secs(10);
const PROVIDER_GRACE_AFTER_CANCEL: Duration = Duration::from_secs(5);

/// `backgroundTimeoutMs`: how long a background process may run (30 minutes).
pub const BACKGROUND_TIMEOUT_MS: u64 = 30 * 60 * 1000;

#[derive(Debug, Clone)]
pub struct ShellToolOptions {
    /// When set, only matching commands may run.
    pub allow: Option<Vec<CommandPattern>>,
    pub deny: Vec<CommandPattern>,
    pub default_timeout_ms: u64,
    pub max_timeout_ms: u64,
    /// Per stream.
    pub max_output_chars: usize,
    /// Working directory relative to the workspace, for every command.
    pub cwd: Option<String>,
    /// Extra variables for every command.
    pub env: BTreeMap<String, String>,
    pub name: String,
    /// `needsApproval`: true by default.
    pub approval: Approval,
    /// Where whole outputs go when a stream is cut (`spillDir`).
    pub spill: Option<std::sync::Arc<super::spill::Spill>>,
    /// Told of the output while a command runs (`onProgress`).
    pub on_progress: Option<std::sync::Arc<dyn crate::options::Callable>>,
    pub progress_ms: u64,
    /// `background`: `run_in_background` and the process tools.
    pub background: bool,
    /// `backgroundTimeoutMs`: a background process's lifetime.
    pub background_timeout_ms: u64,
    /// `redact`: output, notes, progress and errors pass through it (`None`: `redact: false`).
    pub redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
}

/// The shell tool's `needsApproval` option.
#[derive(Clone)]
pub enum Approval {
    Always(bool),
    /// A predicate over the command string.
    Predicate(std::sync::Arc<dyn crate::options::Callable>),
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Approval::Always(b) => write!(f, "Always({b})"),
            Approval::Predicate(_) => f.write_str("Predicate"),
        }
    }
}

impl Default for ShellToolOptions {
    fn default() -> Self {
        ShellToolOptions {
            allow: None,
            deny: Vec::new(),
            default_timeout_ms: DEFAULT_TIMEOUT_MS,
            max_timeout_ms: MAX_TIMEOUT_MS,
            max_output_chars: MAX_OUTPUT_CHARS,
            cwd: None,
            env: BTreeMap::new(),
            name: "shell".to_string(),
            approval: Approval::Always(true),
            spill: None,
            on_progress: None,
            progress_ms: super::progress::PROGRESS_MS,
            background: false,
            background_timeout_ms: BACKGROUND_TIMEOUT_MS,
            redactor: None,
        }
    }
}

impl ShellToolOptions {
    /// `createShellTool`'s options; `fns` gives the functions their tags name.
    /// `createShellTool`'s options; `fns` gives the functions their tags name, `spill_fs` is where
    /// `spillDir` files are written (the shell provider when it is also a file provider, or the
    /// `spillFs` option).
    /// `redactor` is the `Redactor` a `redact` option names (its handle, from the binding).
    pub fn from_options(
        v: &Value,
        fns: crate::options::Functions<'_>,
        spill_fs: Option<std::sync::Arc<dyn crate::fs::FsProvider>>,
        redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
    ) -> Result<ShellToolOptions> {
        use crate::options::{function_of, Reader};
        let r = Reader::new(
            "createShellTool",
            v,
            &[
                "needsApproval",
                "allow",
                "deny",
                "defaultTimeoutMs",
                "maxTimeoutMs",
                "maxOutputChars",
                "cwd",
                "env",
                "name",
                "spillDir",
                "spillFs",
                "onProgress",
                "progressMs",
                "background",
                "backgroundTimeoutMs",
                "redact",
            ],
        )?;
        let spill = match r.string("spillDir")? {
            None => None,
            Some(dir) => {
                let dir = crate::path::normalize(&dir, crate::path::Flavor::Posix)
                    .map_err(|e| r.err(format!("spillDir: {}", e.message)))?;
                crate::path::check_denied(&dir, &crate::path::default_deny())
                    .map_err(|e| r.err(format!("spillDir: {}", e.message)))?;
                if dir == "." {
                    return Err(r.err("spillDir must be a directory below the root, such as '.corral/output'."));
                }
                let fs = spill_fs.ok_or_else(|| {
                    r.err("spillDir needs a place to write: this shell is not a file provider (NodeWorkspace, MemoryWorkspace), so pass spillFs too.")
                })?;
                // On disk it is made now: one that cannot be made fails here, not on a later call.
                if let Some(local) = fs.as_local() {
                    local.mkdir_sync(&dir).map_err(|e| r.err(format!("spillDir cannot be made: {}", e.message)))?;
                }
                Some(std::sync::Arc::new(super::spill::Spill::new(dir, fs)))
            }
        };
        let on_progress = match r.get("onProgress") {
            None => None,
            Some(f) => Some(function_of(f, fns).ok_or_else(|| r.err("onProgress must be a function."))?),
        };
        let patterns = |which: &str| -> Result<Option<Vec<CommandPattern>>> {
            match r.get(which) {
                None => Ok(None),
                Some(Value::Array(items)) => {
                    items.iter().map(|p| CommandPattern::from_option(p, which, fns)).collect::<Result<_>>().map(Some)
                }
                Some(_) => Err(r.err(format!("{which} must be an array."))),
            }
        };
        let approval = match r.get("needsApproval") {
            None => Approval::Always(true),
            Some(Value::Bool(b)) => Approval::Always(*b),
            Some(f) => Approval::Predicate(
                function_of(f, fns)
                    .ok_or_else(|| r.err("needsApproval must be true, false or a predicate over the command."))?,
            ),
        };
        let d = ShellToolOptions::default();
        let name = match r.string("name")? {
            None => d.name,
            Some(n) if !n.is_empty() => n,
            Some(_) => return Err(r.err("name must be a non-empty string.")),
        };
        Ok(ShellToolOptions {
            allow: patterns("allow")?,
            deny: patterns("deny")?.unwrap_or_default(),
            default_timeout_ms: r.int("defaultTimeoutMs", d.default_timeout_ms, 1..=86_400_000)?,
            max_timeout_ms: r.int("maxTimeoutMs", d.max_timeout_ms, 1..=86_400_000)?,
            max_output_chars: r.int("maxOutputChars", d.max_output_chars as u64, 1..=100_000_000)? as usize,
            // A cwd outside the workspace fails here, not on every call.
            cwd: match r.string("cwd")? {
                None => None,
                Some(c) => Some(
                    crate::path::normalize(&c, crate::path::Flavor::Posix)
                        .map_err(|e| r.err(format!("cwd: {}", e.message)))?,
                ),
            },
            env: r.string_map("env")?,
            name,
            approval,
            spill,
            on_progress,
            progress_ms: r.int("progressMs", super::progress::PROGRESS_MS, 1..=600_000)?,
            background: r.bool("background", false)?,
            background_timeout_ms: r.int("backgroundTimeoutMs", d.background_timeout_ms, 1..=7 * 86_400_000)?,
            redactor: crate::redact::from_option(&r, redactor)?,
        })
    }

    /// The timeout a call runs with: `timeout_ms` or the default, lowered to the maximum.
    pub fn effective_timeout(&self, timeout_ms: Option<u64>) -> u64 {
        timeout_ms.unwrap_or(self.default_timeout_ms).min(self.max_timeout_ms)
    }
}

/// The tool's description, built from the real limits, naming the shell.
pub fn description(opts: &ShellToolOptions, shell: Option<&str>) -> String {
    let mut d = String::from("Run a shell command in the workspace and get back { exitCode, stdout, stderr }.");
    let place = match &opts.cwd {
        Some(cwd) if !matches!(cwd.as_str(), "" | "." | "./") => format!("in `{cwd}` of the workspace"),
        _ => "in the workspace root".to_string(),
    };
    match shell {
        Some(s) if is_cmd_shell(Some(s)) => d.push_str(&format!(
            " Commands run with cmd.exe (Windows) {place}: quote arguments with double quotes (\"like this\"), not single quotes, and write environment variables as %NAME%."
        )),
        Some("sh") => d.push_str(&format!(
            " Commands run with `sh -c` (a POSIX shell) {place}: quote with single or double quotes and write environment variables as $NAME."
        )),
        Some(s) => d.push_str(&format!(" Commands run with {s} {place}.")),
        None => d.push_str(&format!(" Commands run {place}.")),
    }
    d.push_str(
        " A command's standard input is empty unless you pass stdin (text), so interactive programs do not work: pass the flags that make them non-interactive.",
    );
    d.push_str(&format!(
        " Timeout: {} ms unless you pass timeout_ms (at most {} ms); a command that runs longer is stopped together with every process it started, and the result has timedOut: true.",
        opts.effective_timeout(None),
        opts.max_timeout_ms
    ));
    d.push_str(&format!(
        " stdout and stderr are each limited to {} characters; beyond that the start and the end are kept and the middle is left out.",
        opts.max_output_chars
    ));
    if let Some(allow) = &opts.allow {
        let list: Vec<String> = allow.iter().take(20).map(CommandPattern::describe).collect();
        let more = if allow.len() > 20 { format!(" and {} more", allow.len() - 20) } else { String::new() };
        d.push_str(&format!(
            " Only these commands may run: {}{more}; any other command is refused. A plain pattern allows extra arguments only when they stay inside the workspace, with no $, {{ or }} and no shell operator outside quotes.",
            list.join(", ")
        ));
    }
    d
}

/// The JSON Schema of the arguments.
/// The shell tool's arguments with these options (`run_in_background` with `background`).
pub fn parameters_for(opts: &ShellToolOptions) -> Value {
    let mut schema = parameters_schema();
    if opts.background {
        schema["properties"]["run_in_background"] = json!({
            "type": "boolean",
            "description": "Start the command and return at once with its id (for servers and watchers); read its output with process_output, stop it with process_stop."
        });
    }
    schema
}

pub fn parameters_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": { "type": "string", "description": "The command line to run." },
            "timeout_ms": {
                "type": "integer",
                "minimum": 1,
                "description": "Milliseconds before the command is stopped (lowered to the tool's maximum)."
            },
            "stdin": { "type": "string", "description": "Text given to the command on its standard input." }
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

/// Keeps the start and the end of `s` within `max` characters, replacing the middle with a
/// marker that says exactly how many characters were left out.
/// The margin held past what can be returned, per stream.
pub const CAPTURE_MARGIN_BYTES: usize = 1024 * 1024;

/// How many bytes of a stream a run must hold to return `max_output_chars` of it (its head and
/// tail; a character is at most 4 bytes) plus a margin, or the whole of what `spillDir` saves.
pub fn capture_for(max_output_chars: usize, spill: bool) -> usize {
    let returned = max_output_chars.saturating_mul(4).saturating_add(CAPTURE_MARGIN_BYTES);
    if spill {
        returned.max(super::spill::SPILL_MAX_BYTES)
    } else {
        returned
    }
}

pub fn truncate_middle(s: &str, max: usize) -> String {
    let total = s.chars().count();
    if total <= max {
        return s.to_string();
    }
    let head = max - max / 2;
    let tail = max / 2;
    let omitted = total - head - tail;
    let head_end = s.char_indices().nth(head).map_or(s.len(), |(i, _)| i);
    let tail_start = s.char_indices().nth(total - tail).map_or(s.len(), |(i, _)| i);
    let unit = if omitted == 1 { "character" } else { "characters" };
    format!("{}\n... [{omitted} {unit} omitted] ...\n{}", &s[..head_end], &s[tail_start..])
}

/// Checks `command` against the tool's allow and deny rules, for the provider's shell.
pub async fn check(shell: &dyn ShellProvider, opts: &ShellToolOptions, command: &str) -> Result<()> {
    check_in(shell, opts, command, opts.cwd.as_deref()).await
}

/// `check` for a command that runs in `cwd` (workspace-relative) instead of the tool's own.
pub async fn check_in(
    shell: &dyn ShellProvider,
    opts: &ShellToolOptions,
    command: &str,
    cwd: Option<&str>,
) -> Result<()> {
    let name = shell.shell();
    let dir = shell.host_dir(cwd);
    check_command(command, opts.allow.as_deref(), &opts.deny, name.as_deref(), dir.as_deref()).await
}

/// The tool's `needsApproval(args)`: false for arguments without a command string (the call
/// then fails on its schema) and for a command the rules refuse (never offered to a human; `run`
/// fails with `CommandRefused`); else the option. An error from a predicate is the caller's.
pub async fn needs_approval(shell: &dyn ShellProvider, opts: &ShellToolOptions, args: &Value) -> Result<bool> {
    let Some(command) = args.get("command").and_then(Value::as_str) else { return Ok(false) };
    match check(shell, opts, command).await {
        Ok(()) => {}
        // A bug in the caller's own args check is the caller's, not a refusal.
        Err(e) if e.code == Code::Foreign => return Err(e),
        Err(_) => return Ok(false),
    }
    match &opts.approval {
        Approval::Always(b) => Ok(*b),
        Approval::Predicate(f) => Ok(crate::options::truthy(&f.call(vec![Value::from(command)]).await?)),
    }
}

/// Whether the rules refuse `command` (so it is never offered for approval; `run` then fails
/// with `CommandRefused`). A failing `args` check counts as a refusal.
pub async fn is_refused(shell: &dyn ShellProvider, opts: &ShellToolOptions, command: &str) -> bool {
    check(shell, opts, command).await.is_err()
}

/// The result the model reads.
pub fn result_json(r: &ExecResult, timeout_ms: u64, max_output_chars: usize) -> Value {
    let mut m = Map::new();
    m.insert("exitCode".into(), r.exit_code.map_or(Value::Null, Value::from));
    m.insert("stdout".into(), Value::from(truncate_middle(&r.stdout, max_output_chars)));
    m.insert("stderr".into(), Value::from(truncate_middle(&r.stderr, max_output_chars)));
    // Say only what was done: a process group is all a plain process runner can reach.
    let killed = if r.every_process_killed {
        "it and every process it started were killed"
    } else {
        "it and its process group were killed (a process that left the group may still run)"
    };
    if r.timed_out {
        m.insert("timedOut".into(), Value::Bool(true));
        m.insert(
            "note".into(),
            Value::from(format!("The command was stopped after {timeout_ms} ms (timeout); {killed}.")),
        );
    } else if r.aborted {
        m.insert("aborted".into(), Value::Bool(true));
        m.insert("note".into(), Value::from(format!("The command was aborted (the run was cancelled); {killed}.")));
    } else if let (None, Some(sig), None) = (r.exit_code, &r.signal, &r.note) {
        m.insert("note".into(), Value::from(format!("The command was killed by {sig}.")));
    }
    // An adapter's own note (a limit that stopped the command) comes after.
    if let Some(extra) = &r.note {
        let note = match m.get("note").and_then(Value::as_str) {
            Some(n) => format!("{n} {extra}"),
            None => extra.clone(),
        };
        m.insert("note".into(), Value::from(note));
    }
    // Overlay mode: what the command changed in the tree, always the note's last line.
    if let Some(line) = r.changes.as_ref().and_then(|c| c.note()) {
        let note = match m.get("note").and_then(Value::as_str) {
            Some(n) => format!("{n}\n{line}"),
            None => line,
        };
        m.insert("note".into(), Value::from(note));
    }
    Value::Object(m)
}

enum Stalled {
    Timeout,
    Cancel,
}

/// Runs one call of the tool.
pub async fn run(
    shell: &dyn ShellProvider,
    opts: &ShellToolOptions,
    command: &str,
    timeout_ms: Option<u64>,
    cancel: Option<Cancel>,
) -> Result<Value> {
    let call =
        Call { command, timeout_ms, stdin: None, tool_call_id: None, session: crate::tools::DEFAULT_SESSION, turn: 0 };
    run_with_grace(shell, opts, &call, cancel, PROVIDER_GRACE_AFTER_TIMEOUT, PROVIDER_GRACE_AFTER_CANCEL).await
}

/// Runs a command line the caller built (a template tool's), with these options' timeout, caps,
/// progress and spill, and no allow/deny rules of its own.
pub async fn run_call(
    shell: &dyn ShellProvider,
    opts: &ShellToolOptions,
    call: &Call<'_>,
    cancel: Option<Cancel>,
) -> Result<Value> {
    run_with_grace(shell, opts, call, cancel, PROVIDER_GRACE_AFTER_TIMEOUT, PROVIDER_GRACE_AFTER_CANCEL).await
}

/// One call of the tool: what the model asked for, and the call's id.
pub struct Call<'a> {
    pub command: &'a str,
    pub timeout_ms: Option<u64>,
    pub stdin: Option<String>,
    pub tool_call_id: Option<String>,
    /// The call's session (`ctx.sessionId`): where its output's markers are numbered.
    pub session: &'a str,
    /// The call's turn (`ctx.turn`): a SandboxShell with checkpoints records the command's
    /// changes under it.
    pub turn: u32,
}

async fn run_with_grace(
    shell: &dyn ShellProvider,
    opts: &ShellToolOptions,
    call: &Call<'_>,
    cancel: Option<Cancel>,
    grace_after_timeout: Duration,
    grace_after_cancel: Duration,
) -> Result<Value> {
    let result = async {
        let (command, timeout_ms) = (call.command, call.timeout_ms);
        if command.trim().is_empty() {
            return Err(Error::new(Code::InvalidArguments, "command must be a non-empty string."));
        }
        if timeout_ms == Some(0) {
            return Err(Error::new(Code::InvalidArguments, "timeout_ms must be at least 1."));
        }
        check(shell, opts, command).await?;
        let timeout = opts.effective_timeout(timeout_ms);
        if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            let r = ExecResult { aborted: true, ..Default::default() };
            return Ok(result_json(&r, timeout, opts.max_output_chars));
        }
        let progress = opts.on_progress.as_ref().map(|l| {
            let redact = opts.redactor.clone().map(|r| (r, call.session.to_string()));
            super::progress::Progress::start(
                l.clone(),
                call.tool_call_id.clone(),
                Duration::from_millis(opts.progress_ms),
                redact,
            )
        });
        let exec = shell.exec(
            command,
            ExecOptions {
                cwd: opts.cwd.clone(),
                timeout_ms: Some(timeout),
                env: opts.env.clone(),
                stdin: call.stdin.clone(),
                cancel: cancel.clone(),
                on_output: progress.as_ref().and_then(|p| p.sink()),
                capture_bytes: Some(capture_for(opts.max_output_chars, opts.spill.is_some())),
                session_id: Some(call.session.to_string()),
                turn: Some(call.turn),
                tool_call_id: call.tool_call_id.clone(),
                ..ExecOptions::default()
            },
        );
        // A provider that ignores its timeout or the cancel is not waited on forever.
        let backstop = async {
            let after_cancel = async {
                match &cancel {
                    Some(c) => {
                        c.cancelled().await;
                        tokio::time::sleep(grace_after_cancel).await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(timeout) + grace_after_timeout) => Stalled::Timeout,
                _ = after_cancel => Stalled::Cancel,
            }
        };
        let mut r = tokio::select! {
            r = exec => r?,
            stalled = backstop => {
                let (key, note) = match stalled {
                    Stalled::Timeout => ("timedOut", format!("The command did not finish within {timeout} ms and the shell provider did not stop it; it may still be running.")),
                    Stalled::Cancel => ("aborted", "The run was cancelled and the shell provider did not stop the command; it may still be running.".to_string()),
                };
                let mut m = Map::new();
                m.insert("exitCode".into(), Value::Null);
                m.insert("stdout".into(), Value::from(""));
                m.insert("stderr".into(), Value::from(""));
                m.insert(key.into(), Value::Bool(true));
                m.insert("note".into(), Value::from(note));
                return Ok(Value::Object(m));
            }
        };
        // Redacted whole, before the cut and before the whole output is saved for the model.
        if let Some(red) = &opts.redactor {
            for text in [&mut r.stdout, &mut r.stderr] {
                if let std::borrow::Cow::Owned(t) = red.redact(text, call.session) {
                    *text = t;
                }
            }
        }
        if let Some(p) = progress {
            p.finish(&r.stdout, &r.stderr).await;
        }
        let mut result = result_json(&r, timeout, opts.max_output_chars);
        if let Some(spill) = &opts.spill {
            save_whole_output(spill, &r, opts.max_output_chars, call.tool_call_id.as_deref(), &mut result).await?;
        }
        Ok(result)
    }
    .await;
    // The output was redacted whole before its cut; notes, paths and errors are redacted here.
    match &opts.redactor {
        Some(r) => result.map(|v| r.redact_json(v, call.session)).map_err(|e| r.redact_error(e, call.session)),
        None => result,
    }
}

/// Saves each stream that was cut for the model, and says where.
async fn save_whole_output(
    spill: &super::spill::Spill,
    r: &ExecResult,
    max_chars: usize,
    tool_call_id: Option<&str>,
    result: &mut Value,
) -> Result<()> {
    let mut said = Vec::new();
    for (stream, text, key) in
        [(super::Stream::Stdout, &r.stdout, "outputFile"), (super::Stream::Stderr, &r.stderr, "errorFile")]
    {
        if text.chars().count() <= max_chars {
            continue;
        }
        let path = spill.save(tool_call_id, stream, text).await?;
        said.push(format!(
            "The whole {} ({} bytes) is saved in {path}: read it with read_file or search it with grep.",
            stream.as_str(),
            text.len()
        ));
        result[key] = Value::from(path);
    }
    if !said.is_empty() {
        let note = match result.get("note").and_then(Value::as_str) {
            Some(n) => format!("{n} {}", said.join(" ")),
            None => said.join(" "),
        };
        result["note"] = Value::from(note);
    }
    Ok(())
}

/// What `workspacePrompt` says of this tool.
pub fn info(opts: &ShellToolOptions, shell: Option<&str>) -> Value {
    json!({
        "kind": "shell",
        "name": opts.name,
        "shell": shell,
        "cwd": opts.cwd,
        "allow": opts.allow.as_ref().map(|a| a.iter().map(CommandPattern::describe).collect::<Vec<_>>()),
        "deny": opts.deny.iter().map(CommandPattern::describe).collect::<Vec<_>>(),
        "defaultTimeoutMs": opts.effective_timeout(None),
        "maxTimeoutMs": opts.max_timeout_ms,
        "spillDir": opts.spill.as_ref().map(|s| s.dir.clone()),
    })
}

/// The model's arguments against the tool's JSON Schema (`parameters_for`).
pub fn check_call_args(opts: &ShellToolOptions, args: &Value) -> Result<()> {
    static SCHEMA: std::sync::OnceLock<[jsonschema::Validator; 2]> = std::sync::OnceLock::new();
    let [plain, background] = SCHEMA.get_or_init(|| {
        let with = ShellToolOptions { background: true, ..ShellToolOptions::default() };
        [parameters_schema(), parameters_for(&with)].map(|s| jsonschema::validator_for(&s).expect("valid schemas"))
    });
    crate::tools::check_args(&opts.name, if opts.background { background } else { plain }, args)
}

/// Runs one call from the model's arguments: checked against the tool's JSON Schema first.
pub async fn call(
    shell: &dyn ShellProvider,
    opts: &ShellToolOptions,
    args: &Value,
    ctx: &crate::tools::Ctx,
    cancel: Option<Cancel>,
) -> Result<Value> {
    let session = ctx.session_id.as_str();
    if let Err(e) = check_call_args(opts, args) {
        return Err(match &opts.redactor {
            Some(r) => r.redact_error(e, session),
            None => e,
        });
    }
    let call = Call {
        command: args.get("command").and_then(Value::as_str).unwrap_or_default(),
        timeout_ms: args.get("timeout_ms").and_then(Value::as_f64).map(|t| t as u64),
        stdin: args.get("stdin").and_then(Value::as_str).map(str::to_string),
        tool_call_id: ctx.tool_call_id.clone(),
        session,
        turn: ctx.turn,
    };
    run_with_grace(shell, opts, &call, cancel, PROVIDER_GRACE_AFTER_TIMEOUT, PROVIDER_GRACE_AFTER_CANCEL).await
}

#[cfg(test)]
#[path = "tool_tests.rs"]
mod tests;
