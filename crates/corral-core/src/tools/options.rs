//! The file tools' options (`createFsTools`, an adapter's `files`) and what the agent loop
//! knows about a call (`Ctx`).

use std::sync::Arc;

use serde_json::Value;

use super::{
    glob, session, ALL_TOOLS, EXTRA_TOOLS, GREP_TIMEOUT_MS, MAX_FILES_SCANNED, MAX_GREP_FILE_BYTES,
    MAX_GREP_FILE_BYTES_LIMIT, MAX_OUTPUT_CHARS, MAX_READ_LINES, MAX_RESULTS,
};
use crate::cancel::Cancel;
use crate::checkpoints::Checkpoints;
use crate::error::{Code, Error, Result};

/// Every tool name `createFsTools` knows.
fn known_tool(name: &str) -> bool {
    ALL_TOOLS.contains(&name) || EXTRA_TOOLS.contains(&name)
}

#[derive(Clone)]
pub struct FsToolOptions {
    pub read_only: bool,
    pub max_read_lines: usize,
    pub max_output_chars: usize,
    pub max_results: usize,
    pub max_files_scanned: usize,
    pub grep_timeout_ms: u64,
    /// Files larger than this are skipped by grep, and named.
    pub max_grep_file_bytes: u64,
    pub ignore: Vec<String>,
    pub deny: Vec<String>,
    /// Backs up every file `write_file` and `edit_file` change, so the changes can be rewound.
    pub checkpoints: Option<Arc<Checkpoints>>,
    /// `read_file` returns PNG, JPEG, GIF and WebP files as images.
    pub read_images: bool,
    /// Globs `write_file` and `edit_file` refuse (`Protected`), checked where a path really leads.
    pub protect: Vec<String>,
    pub(super) protect_set: Option<Arc<globset::GlobSet>>,
    /// `edit_file` tries a normalised match when the exact text is not found.
    pub fuzzy_edit: bool,
    /// Told of every change `write_file` and `edit_file` make: `{ path, diff, sessionId, turn,
    /// toolCallId }`.
    pub on_edit: Option<Arc<dyn crate::options::Callable>>,
    /// The tools of `EXTRA_TOOLS` to create after the six, in this order.
    pub include: Vec<String>,
    /// `requireRead`: what each session read, shared by the tool set's tools.
    pub reads: Option<Arc<session::ReadLog>>,
    /// `redact`: what the tools give the model passes through it, and markers the model writes
    /// back are restored through it (`None`: `redact: false`, the reference's exact outputs).
    pub redactor: Option<Arc<crate::redact::Redactor>>,
}

impl Default for FsToolOptions {
    fn default() -> Self {
        FsToolOptions {
            read_only: false,
            max_read_lines: MAX_READ_LINES,
            max_output_chars: MAX_OUTPUT_CHARS,
            max_results: MAX_RESULTS,
            max_files_scanned: MAX_FILES_SCANNED,
            grep_timeout_ms: GREP_TIMEOUT_MS,
            max_grep_file_bytes: MAX_GREP_FILE_BYTES,
            ignore: vec![".git".into(), "node_modules".into()],
            deny: crate::path::default_deny(),
            checkpoints: None,
            read_images: false,
            protect: Vec::new(),
            protect_set: None,
            fuzzy_edit: false,
            on_edit: None,
            include: Vec::new(),
            reads: None,
            redactor: None,
        }
    }
}

impl FsToolOptions {
    /// With `requireRead`: the session read `path` holding `content` (or wrote it).
    pub(crate) fn note_read(&self, ctx: &Ctx, path: &str, content: &[&[u8]]) {
        if let Some(r) = &self.reads {
            r.note(&ctx.session_id, path, session::fingerprint(content));
        }
    }

    /// With `requireRead`: whether the session may change `path`, which holds `content` now.
    pub(crate) fn check_read(&self, ctx: &Ctx, path: &str, content: &[&[u8]]) -> Result<()> {
        match &self.reads {
            Some(r) => r.check(&ctx.session_id, path, session::fingerprint(content)),
            None => Ok(()),
        }
    }

    /// These options with `protect` globs (same syntax as `glob`).
    pub fn with_protect(mut self, globs: Vec<String>) -> Result<FsToolOptions> {
        let mut set = globset::GlobSetBuilder::new();
        for g in &globs {
            set.add(glob::compile_glob_pattern(g)?);
        }
        self.protect_set = if globs.is_empty() {
            None
        } else {
            Some(Arc::new(set.build().map_err(|e| Error::new(Code::InvalidPattern, e.to_string()))?))
        };
        self.protect = globs;
        Ok(self)
    }

    /// `createFsTools`'s options (checkpoints are attached by the binding); `fns` gives the
    /// functions their tags name.
    pub fn from_options(v: &Value, fns: crate::options::Functions<'_>) -> Result<FsToolOptions> {
        Self::from_options_with(v, fns, None)
    }

    /// `from_options`, with the `Redactor` a `redact` option names (its handle, from the binding).
    pub fn from_options_with(
        v: &Value,
        fns: crate::options::Functions<'_>,
        redactor: Option<Arc<crate::redact::Redactor>>,
    ) -> Result<FsToolOptions> {
        Self::read_options("createFsTools", &FS_TOOLS_KEYS, v, fns, redactor)
    }

    /// `text` (what the model wrote for `path`, which holds `current`) with the markers of the
    /// call's session restored where `current` holds their values.
    pub(crate) fn restore<'t>(&self, text: &'t str, ctx: &Ctx, current: &str) -> std::borrow::Cow<'t, str> {
        match &self.redactor {
            Some(r) => r.restore(text, &ctx.session_id, current),
            None => std::borrow::Cow::Borrowed(text),
        }
    }

    /// An adapter's `files: { … }` (`FILES_KEYS`): the file tools' options for the SDK
    /// sandboxes and the editor (checkpoints are attached by the binding).
    pub fn from_files_options(v: &Value, fns: crate::options::Functions<'_>) -> Result<FsToolOptions> {
        Self::read_options("files", &FILES_KEYS, v, fns, None)
    }

    fn read_options(
        what: &'static str,
        keys: &[&str],
        v: &Value,
        fns: crate::options::Functions<'_>,
        redactor: Option<Arc<crate::redact::Redactor>>,
    ) -> Result<FsToolOptions> {
        use crate::options::{is_function, is_js_object, Reader};
        let r = Reader::new(what, v, keys)?;
        let include = r.strings("include")?.unwrap_or_default();
        for (i, name) in include.iter().enumerate() {
            if !EXTRA_TOOLS.contains(&name.as_str()) {
                let near = crate::options::did_you_mean(name, &EXTRA_TOOLS)
                    .map(|n| format!("; did you mean {n}?"))
                    .unwrap_or_else(|| format!(" (the tools it can add are {})", EXTRA_TOOLS.join(", ")));
                return Err(r.err(format!("include names no tool '{name}'{near}")));
            }
            if include[..i].contains(name) {
                return Err(r.err(format!("include names {name} twice.")));
            }
        }
        if let Some(na) = r.get("needsApproval") {
            let Some(map) = na.as_object().filter(|_| !is_function(na) && !is_js_object(na)) else {
                return Err(r.err("needsApproval must be an object keyed by tool name."));
            };
            for (name, gate) in map {
                if !known_tool(name) {
                    let names: Vec<&str> = ALL_TOOLS.iter().chain(&EXTRA_TOOLS).copied().collect();
                    let near = crate::options::did_you_mean(name, &names)
                        .map(|n| format!("; did you mean {n}?"))
                        .unwrap_or_else(|| format!(" (the tools are {})", ALL_TOOLS.join(", ")));
                    return Err(r.err(format!("needsApproval names no tool '{name}'{near}")));
                }
                if !(gate.is_boolean() || gate.is_null() || is_function(gate)) {
                    return Err(r.err(format!("needsApproval.{name} must be a boolean or a function.")));
                }
            }
        }
        if r.get("checkpoints").is_some_and(|c| !is_js_object(c)) {
            return Err(r.err("checkpoints must be a WorkspaceCheckpoints."));
        }
        let d = FsToolOptions::default()
            .with_protect(r.strings("protect")?.unwrap_or_default())
            .map_err(|e| r.err(format!("protect: {}", e.message)))?;
        Ok(FsToolOptions {
            read_only: r.bool("readOnly", d.read_only)?,
            max_read_lines: r.int("maxReadLines", d.max_read_lines as u64, 1..=1_000_000)? as usize,
            max_output_chars: r.int("maxOutputChars", d.max_output_chars as u64, 1..=100_000_000)? as usize,
            max_results: r.int("maxResults", d.max_results as u64, 1..=1_000_000)? as usize,
            max_files_scanned: r.int("maxFilesScanned", d.max_files_scanned as u64, 1..=100_000_000)? as usize,
            grep_timeout_ms: r.int("grepTimeoutMs", d.grep_timeout_ms, 1..=3_600_000)?,
            max_grep_file_bytes: r.int("maxGrepFileBytes", d.max_grep_file_bytes, 1..=MAX_GREP_FILE_BYTES_LIMIT)?,
            ignore: r.names("ignore", d.ignore)?,
            deny: r.names("deny", d.deny)?,
            checkpoints: None,
            read_images: r.bool("readImages", d.read_images)?,
            fuzzy_edit: r.bool("fuzzyEdit", d.fuzzy_edit)?,
            include,
            reads: r.bool("requireRead", false)?.then(Default::default),
            // An adapter's `files` gives programs their files (never redacted); the tools redact.
            redactor: if keys.contains(&"redact") { crate::redact::from_option(&r, redactor)? } else { None },
            on_edit: match r.get("onEdit") {
                None => None,
                Some(f) => {
                    Some(crate::options::function_of(f, fns).ok_or_else(|| r.err("onEdit must be a function."))?)
                }
            },
            ..d
        })
    }
}

/// The keys an adapter's `files` option takes: the file tools' options that apply to reading and
/// writing whole files.
pub const FILES_KEYS: [&str; 9] = [
    "deny",
    "protect",
    "readOnly",
    "requireRead",
    "checkpoints",
    "onEdit",
    "maxReadLines",
    "maxOutputChars",
    "maxGrepFileBytes",
];

/// The keys `createFsTools` takes.
const FS_TOOLS_KEYS: [&str; 18] = [
    "readOnly",
    "needsApproval",
    "maxReadLines",
    "maxOutputChars",
    "maxResults",
    "maxFilesScanned",
    "grepTimeoutMs",
    "maxGrepFileBytes",
    "ignore",
    "deny",
    "checkpoints",
    "readImages",
    "protect",
    "fuzzyEdit",
    "onEdit",
    "include",
    "requireRead",
    "redact",
];

/// What the agent loop knows about the call.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub session_id: String,
    pub turn: u32,
    pub tool_call_id: Option<String>,
    pub cancel: Option<Cancel>,
}

/// The session of a call that names none.
pub const DEFAULT_SESSION: &str = "default";

impl Default for Ctx {
    fn default() -> Self {
        Ctx { session_id: DEFAULT_SESSION.into(), turn: 0, tool_call_id: None, cancel: None }
    }
}

impl Ctx {
    /// The tool context as JSON (`{ sessionId?, turn? }`): a wrong type is refused, never
    /// misfiled under another session or turn.
    pub fn from_json(v: &Value, cancel: Option<Cancel>) -> Result<Ctx> {
        let bad = |m: &str| Error::new(Code::InvalidArguments, format!("Invalid tool context: {m}"));
        let session_id = match v.get("sessionId") {
            None | Some(Value::Null) => DEFAULT_SESSION.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(bad("sessionId must be a string.")),
        };
        let turn = match v.get("turn") {
            None | Some(Value::Null) => 0,
            Some(t) => {
                t.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u32::MAX as f64).ok_or_else(|| {
                    bad("turn must be a non-negative integer (the 0-based index of the user message).")
                })? as u32
            }
        };
        let tool_call_id = match v.get("toolCallId") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("toolCallId must be a string.")),
        };
        Ok(Ctx { session_id, turn, tool_call_id, cancel })
    }

    pub fn check_cancel(&self) -> Result<()> {
        match &self.cancel {
            Some(c) if c.is_cancelled() => Err(Error::aborted()),
            _ => Ok(()),
        }
    }
}
