//! The six file tools: `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`.
//!
//! Each tool checks its arguments against its JSON Schema, confines and deny-checks its path, and
//! returns the text the model reads. The defaults live here, next to the tools, and the
//! descriptions are built from them, so the model is told the real limits.

use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use crate::cancel::Cancel;
use crate::checkpoints::Checkpoints;
use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;
use crate::path::{check_denied, normalize, Flavor};

mod edit;
mod files;
mod fuzzy;
mod glob;
mod grep;
pub mod image;
mod list;
pub mod ops;
mod patch;
pub mod read;
pub mod session;
mod walk;
mod write;

pub const MAX_READ_LINES: usize = 2000;
pub const MAX_OUTPUT_CHARS: usize = 50_000;
pub const MAX_RESULTS: usize = 200;
pub const MAX_FILES_SCANNED: usize = 20_000;
pub const GREP_TIMEOUT_MS: u64 = 10_000;
/// Files over this size are refused by `read_file`.
pub const MAX_READ_BYTES: u64 = 10 * 1024 * 1024;
/// The largest file `write_file` and `edit_file` produce: what the tools could not read back is
/// never written, and an edit's result size is computed before anything is allocated.
pub const MAX_WRITE_BYTES: u64 = MAX_READ_BYTES;
/// Files over this size are skipped by `grep`.
pub const MAX_GREP_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// The largest `maxGrepFileBytes` (each walker thread holds one such file at a time).
pub const MAX_GREP_FILE_BYTES_LIMIT: u64 = 256 * 1024 * 1024;
/// `grep` tests each line on its first this-many characters.
pub const GREP_LINE_CHARS: usize = 2000;

pub const READ_TOOLS: [&str; 4] = ["read_file", "list_dir", "glob", "grep"];
pub const ALL_TOOLS: [&str; 6] = ["read_file", "write_file", "edit_file", "list_dir", "glob", "grep"];
/// The tools `include` adds after the six, in the order given.
pub const EXTRA_TOOLS: [&str; 6] = ["apply_patch", "move_file", "delete_file", "make_dir", "file_info", "read_files"];
/// Of those, the ones that write (not created with `readOnly`).
const EXTRA_WRITING_TOOLS: [&str; 4] = ["apply_patch", "move_file", "delete_file", "make_dir"];

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
    protect_set: Option<Arc<globset::GlobSet>>,
    /// `edit_file` tries a normalised match when the exact text is not found.
    pub fuzzy_edit: bool,
    /// Told of every change `write_file` and `edit_file` make: `{ path, diff, sessionId, turn,
    /// toolCallId }`.
    pub on_edit: Option<Arc<dyn crate::options::Callable>>,
    /// The tools of `EXTRA_TOOLS` to create after the six, in this order.
    pub include: Vec<String>,
    /// `requireRead`: what each session read, shared by the tool set's tools.
    pub reads: Option<Arc<session::ReadLog>>,
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

    /// With `requireRead`: whether the session may delete or move away `path` (as it is now). A
    /// file too large to read cannot have been read.
    pub(crate) async fn check_read_to_remove(&self, fs: &dyn FsProvider, ctx: &Ctx, path: &str) -> Result<()> {
        if self.reads.is_none() {
            return Ok(());
        }
        let size = fs.stat(path).await?.map_or(0, |s| s.size);
        if size > MAX_READ_BYTES {
            return Err(Error::new(Code::NotRead, format!("Read {path} first: it has not been read in this session.")));
        }
        let bytes = file_bytes(fs, path).await?;
        self.check_read(ctx, path, &[&bytes])
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
        Self::read_options("createFsTools", &FS_TOOLS_KEYS, v, fns)
    }

    /// An adapter's `files: { … }` (`ops::FILES_KEYS`): the file tools' options for the SDK
    /// sandboxes and the editor (checkpoints are attached by the binding).
    pub fn from_files_options(v: &Value, fns: crate::options::Functions<'_>) -> Result<FsToolOptions> {
        Self::read_options("files", &ops::FILES_KEYS, v, fns)
    }

    fn read_options(
        what: &'static str,
        keys: &[&str],
        v: &Value,
        fns: crate::options::Functions<'_>,
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

/// The keys `createFsTools` takes.
const FS_TOOLS_KEYS: [&str; 17] = [
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
];

/// What the agent loop knows about the call.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub session_id: String,
    pub turn: u32,
    pub tool_call_id: Option<String>,
    pub cancel: Option<Cancel>,
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx { session_id: "default".into(), turn: 0, tool_call_id: None, cancel: None }
    }
}

impl Ctx {
    /// The tool context as JSON (`{ sessionId?, turn? }`): a wrong type is refused, never
    /// misfiled under another session or turn.
    pub fn from_json(v: &Value, cancel: Option<Cancel>) -> Result<Ctx> {
        let bad = |m: &str| Error::new(Code::InvalidArguments, format!("Invalid tool context: {m}"));
        let session_id = match v.get("sessionId") {
            None | Some(Value::Null) => "default".to_string(),
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

pub struct ToolSpec {
    pub name: &'static str,
    pub description: String,
    pub parameters: Value,
}

pub(super) fn fmt_num(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn format_bytes(n: u64) -> String {
    if n >= 1024 * 1024 {
        format!("{} MB", n / (1024 * 1024))
    } else if n >= 1024 {
        format!("{} KB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

pub(super) fn path_prop(what: &str) -> Value {
    json!({ "type": "string", "description": what })
}

pub fn parameters(name: &str) -> Value {
    match name {
        "read_file" => read::parameters(),
        "write_file" => write::parameters(),
        "edit_file" => edit::parameters(),
        "list_dir" => list::parameters(),
        "glob" => glob::parameters(),
        "grep" => grep::parameters(),
        "apply_patch" => patch::parameters(),
        "move_file" | "delete_file" | "make_dir" | "file_info" | "read_files" => files::parameters(name),
        _ => json!({}),
    }
}

/// What the walks skip, as the descriptions say it.
pub(super) fn skipped_names(o: &FsToolOptions) -> String {
    if o.ignore.is_empty() {
        String::from("nothing")
    } else {
        o.ignore.join(", ")
    }
}

pub fn description(name: &str, o: &FsToolOptions) -> String {
    match name {
        "read_file" => read::description(o),
        "write_file" => write::description(o),
        "edit_file" => edit::description(o),
        "list_dir" => list::description(o),
        "glob" => glob::description(o),
        "grep" => grep::description(o),
        "apply_patch" => patch::description(o),
        "move_file" | "delete_file" | "make_dir" | "file_info" | "read_files" => files::description(name, o),
        _ => String::new(),
    }
}

/// What `workspacePrompt` says of the file tools (`root`: the workspace's name, never a path).
pub fn info(o: &FsToolOptions, root: Option<&str>) -> Value {
    json!({
        "kind": "files",
        "root": root,
        "readOnly": o.read_only,
        "maxReadLines": o.max_read_lines,
        "maxResults": o.max_results,
        "maxOutputChars": o.max_output_chars,
        "deny": o.deny,
        "protect": o.protect,
    })
}

/// The tools `createFsTools` creates with these options, in their documented order.
/// What an MCP client is told of a tool (`annotations`): the reading tools only read; every other
/// tool (the writing file tools, the shell, a workspace's own) may change or destroy.
pub fn mcp_annotations(name: &str) -> Value {
    // Reading a background process's output or listing them changes nothing either.
    let reads = ["process_output", "process_list"].contains(&name);
    if reads || READ_TOOLS.contains(&name) || (EXTRA_TOOLS.contains(&name) && !EXTRA_WRITING_TOOLS.contains(&name)) {
        serde_json::json!({ "readOnlyHint": true })
    } else {
        serde_json::json!({ "readOnlyHint": false, "destructiveHint": true })
    }
}

pub fn specs(o: &FsToolOptions) -> Vec<ToolSpec> {
    let six: &[&'static str] = if o.read_only { &READ_TOOLS } else { &ALL_TOOLS };
    let extra = EXTRA_TOOLS
        .iter()
        .filter(|n| !(o.read_only && EXTRA_WRITING_TOOLS.contains(n)))
        .filter_map(|n| o.include.iter().position(|i| i == n).map(|at| (at, *n)));
    let mut extra: Vec<(usize, &'static str)> = extra.collect();
    extra.sort();
    six.iter()
        .copied()
        .chain(extra.into_iter().map(|(_, n)| n))
        .map(|n| ToolSpec { name: n, description: description(n, o), parameters: parameters(n) })
        .collect()
}

fn validator(name: &str) -> Option<&'static jsonschema::Validator> {
    static CELLS: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    let all = CELLS.get_or_init(|| {
        ALL_TOOLS
            .iter()
            .chain(&EXTRA_TOOLS)
            .map(|n| (*n, jsonschema::validator_for(&parameters(n)).expect("tool schemas are valid")))
            .collect()
    });
    all.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
}

/// Checks arguments against a schema; the error names the argument and what is wrong.
pub fn check_args(tool: &str, schema: &jsonschema::Validator, args: &Value) -> Result<()> {
    if let Some(err) = schema.iter_errors(args).next() {
        let at = err.instance_path().to_string();
        let arg = at.trim_start_matches('/');
        let msg = if arg.is_empty() {
            format!("Invalid arguments for {tool}: {err}")
        } else {
            format!("Invalid arguments for {tool}: '{arg}' {err}")
        };
        return Err(Error::new(Code::InvalidArguments, msg));
    }
    Ok(())
}

pub fn validate(name: &str, args: &Value) -> Result<()> {
    let v = validator(name).ok_or_else(|| Error::new(Code::InvalidArguments, format!("Unknown tool: {name}")))?;
    check_args(name, v, args)
}

pub(crate) fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Normalizes a path argument and refuses denied names, also where a link really leads.
pub(crate) async fn checked_path(fs: &dyn FsProvider, o: &FsToolOptions, raw: &str) -> Result<String> {
    let p = normalize(raw, Flavor::native())?;
    check_denied(&p, &o.deny)?;
    if fs.caps().real_path && !o.deny.is_empty() {
        let real = fs.real_path(&p).await?;
        if real != p {
            check_denied(&real, &o.deny).map_err(|_| {
                Error::new(Code::Denied, format!("Access denied: {p} (it leads to {real}, which holds a denied name)"))
            })?;
        }
    }
    Ok(p)
}

/// Runs one tool. `args` must be a JSON object.
/// The result is a string, except an image `read_file` returns with `readImages`.
pub async fn call(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: &Value, ctx: &Ctx) -> Result<Value> {
    match fs.as_local() {
        // On disk the deny list is also checked where each operation really goes, at the moment
        // it runs: a directory swapped for a link to `.git` after the path was checked is refused.
        Some(local) if !o.deny.is_empty() => call_on(&local.denying(&o.deny), o, name, args, ctx).await,
        _ => call_on(fs, o, name, args, ctx).await,
    }
}

async fn call_on(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: &Value, ctx: &Ctx) -> Result<Value> {
    validate(name, args)?;
    ctx.check_cancel()?;
    let writes = matches!(name, "write_file" | "edit_file") || EXTRA_WRITING_TOOLS.contains(&name);
    if writes && o.read_only {
        return Err(Error::new(Code::ReadOnly, format!("{name} is not available: the file tools are read-only.")));
    }
    match name {
        "read_file" => read::run(fs, o, args, ctx).await,
        "write_file" => write::run(fs, o, args, ctx).await.map(Value::String),
        "edit_file" => edit::run(fs, o, args, ctx).await.map(Value::String),
        "list_dir" => list::run(fs, o, args).await.map(Value::String),
        "glob" => glob::glob(fs, o, args, ctx).await.map(Value::String),
        "grep" => grep::grep(fs, o, args, ctx).await.map(Value::String),
        "apply_patch" => patch::run(fs, o, args, ctx).await.map(Value::String),
        "move_file" | "delete_file" | "make_dir" | "file_info" | "read_files" => {
            files::run(fs, o, name, args, ctx).await.map(Value::String)
        }
        _ => Err(Error::new(Code::InvalidArguments, format!("Unknown tool: {name}"))),
    }
}

/// Serializes `write_file` and `edit_file` calls on the same path of the same provider: parallel
/// tool calls would otherwise each read the old content and the last write would drop the others'
/// edits. The guard is held from the read to the write.
pub(crate) async fn lock_path(fs: &dyn FsProvider, path: &str) -> tokio::sync::OwnedMutexGuard<()> {
    use std::collections::HashMap;
    use std::sync::{Mutex, Weak};
    type Locks = Mutex<HashMap<(usize, String), Weak<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let key = (provider_identity(fs), path.to_string());
    let lock = {
        let mut map = LOCKS.get_or_init(Default::default).lock().unwrap();
        map.retain(|_, w| w.strong_count() > 0);
        match map.get(&key).and_then(Weak::upgrade) {
            Some(l) => l,
            None => {
                let l = Arc::new(tokio::sync::Mutex::new(()));
                map.insert(key, Arc::downgrade(&l));
                l
            }
        }
    };
    lock.lock_owned().await
}

/// Writes through the provider; with checkpoints, the old content is stored first (crash safety)
/// and the written content's hash after.
pub(crate) async fn hooked_write(
    fs: &dyn FsProvider,
    o: &FsToolOptions,
    ctx: &Ctx,
    path: &str,
    bytes: &[u8],
) -> Result<()> {
    if let Some(c) = &o.checkpoints {
        c.before_write(fs, &ctx.session_id, ctx.turn, path, bytes).await?;
    }
    let written = if fs.caps().write_bytes {
        fs.write_file_bytes(path, bytes).await
    } else {
        match std::str::from_utf8(bytes) {
            Ok(text) => fs.write_file(path, text).await,
            Err(_) => Err(Error::new(Code::NotUtf8, format!("Content for {path} is not UTF-8."))),
        }
    };
    if let Err(e) = written {
        if let Some(c) = &o.checkpoints {
            c.write_failed(&ctx.session_id, ctx.turn, path).await?;
        }
        return Err(e);
    }
    if let Some(c) = &o.checkpoints {
        c.after_write(&ctx.session_id, ctx.turn, path, bytes).await?;
    }
    Ok(())
}

/// A file's bytes: as they are where the provider reads bytes, else its text's.
pub(crate) async fn file_bytes(fs: &dyn FsProvider, path: &str) -> Result<Vec<u8>> {
    if fs.caps().read_bytes {
        fs.read_file_bytes(path).await
    } else {
        fs.read_file(path).await.map(String::into_bytes)
    }
}

/// The bytes of a file a tool is about to change (overwrite, move, patch), its size checked
/// first: a file over `MAX_READ_BYTES` is `TooLarge` and never read (a sparse 1 TiB file must not
/// make this process allocate its size). `what` ends the sentence "too large to …".
pub(crate) async fn bytes_to_change(fs: &dyn FsProvider, path: &str, what: &str) -> Result<Vec<u8>> {
    let size = fs.stat(path).await?.map_or(0, |s| s.size);
    check_read_size(path, size, what, " Change it with a command instead.")?;
    file_bytes(fs, path).await
}

/// Deletes a file through the provider; with checkpoints, its content is stored first, so a
/// rewind puts it back.
pub(crate) async fn hooked_delete(fs: &dyn FsProvider, o: &FsToolOptions, ctx: &Ctx, path: &str) -> Result<()> {
    if let Some(c) = &o.checkpoints {
        c.before_delete(fs, &ctx.session_id, ctx.turn, path).await?;
    }
    if let Err(e) = fs.rm(path, false).await {
        if let Some(c) = &o.checkpoints {
            c.write_failed(&ctx.session_id, ctx.turn, path).await?;
        }
        return Err(e);
    }
    if let Some(c) = &o.checkpoints {
        c.after_delete(&ctx.session_id, ctx.turn, path).await?;
    }
    Ok(())
}

/// What a path is, for the tools: `stat`, except that a directory a provider's `stat` does not
/// report (a remote provider that only knows files) is found by listing it; the root always is one.
pub(crate) async fn kind_of(fs: &dyn FsProvider, path: &str) -> Result<Option<crate::fs::EntryType>> {
    use crate::fs::EntryType;
    match fs.stat(path).await? {
        Some(s) => Ok(Some(s.kind)),
        None if path == "." => Ok(Some(EntryType::Directory)),
        None => match fs.readdir(path).await {
            Ok(_) => Ok(Some(EntryType::Directory)),
            // The caller's own bug travels; any other failure means: not a directory.
            Err(e) if e.code == Code::Foreign => Err(e),
            Err(_) => Ok(None),
        },
    }
}

/// Appends `line` and a newline when it fits in `max_chars` characters (counted so far in
/// `chars`); false when it does not.
pub(crate) fn push_line(out: &mut String, chars: &mut usize, line: &str, max_chars: usize) -> bool {
    let len = line.chars().count() + 1;
    if *chars + len > max_chars {
        return false;
    }
    *chars += len;
    out.push_str(line);
    out.push('\n');
    true
}

/// Appends the first `max_lines` of `lines` while they fit in `max_chars` characters (a line and
/// its newline); returns how many were shown.
pub(crate) fn push_lines<'a>(
    out: &mut String,
    lines: impl IntoIterator<Item = &'a str>,
    max_lines: usize,
    max_chars: usize,
) -> usize {
    let (mut shown, mut chars) = (0, 0);
    for line in lines.into_iter().take(max_lines) {
        if !push_line(out, &mut chars, line, max_chars) {
            break;
        }
        shown += 1;
    }
    shown
}

/// One value per provider: a directory on disk and every view of it share theirs.
fn provider_identity(fs: &dyn FsProvider) -> usize {
    match fs.as_local() {
        Some(local) => local.identity(),
        None => fs as *const dyn FsProvider as *const () as usize,
    }
}

/// Marks `dir` of this provider as the shell tool's spill directory.
pub fn protect_spill_dir(fs: &dyn FsProvider, dir: &str) {
    if let Some(g) = fs.guarded_dirs() {
        g.add(dir);
    }
}

/// Refuses a write to a path a `protect` glob or a spill directory covers, by its name and by
/// where it really leads.
pub(crate) async fn check_protected(fs: &dyn FsProvider, o: &FsToolOptions, path: &str) -> Result<()> {
    let spill = fs.guarded_dirs().map(|g| g.list()).unwrap_or_default();
    if o.protect_set.is_none() && spill.is_empty() {
        return Ok(());
    }
    let real = if fs.caps().real_path { fs.real_path(path).await? } else { path.to_string() };
    for p in [path, real.as_str()] {
        if let Some(set) = &o.protect_set {
            if let Some(i) = set.matches(p).first() {
                return Err(Error::new(
                    Code::Protected,
                    format!(
                        "{path} is protected (it matches '{}'): write_file and edit_file leave it alone.",
                        o.protect[*i]
                    ),
                ));
            }
        }
        if let Some(dir) = spill.iter().find(|d| p == d.as_str() || p.starts_with(&format!("{d}/"))) {
            return Err(Error::new(
                Code::Protected,
                format!("{path} is protected: {dir} holds the shell's saved outputs; read them, do not change them."),
            ));
        }
    }
    Ok(())
}

/// Tells `onEdit` of a change, with a unified diff; what the listener does is its own business.
pub(crate) async fn notify_edit(o: &FsToolOptions, ctx: &Ctx, path: &str, before: &str, after: &str) {
    let Some(f) = &o.on_edit else { return };
    let diff = similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let event = json!({
        "path": path,
        "diff": diff,
        "sessionId": ctx.session_id,
        "turn": ctx.turn,
        "toolCallId": ctx.tool_call_id,
    });
    let _ = f.call(vec![event]).await;
}

/// A size and its limit as a message shows them: rounded, or in exact bytes where rounding would
/// make them read as equal (`10,485,761 bytes` against `10,485,760`).
pub(crate) fn size_against(size: u64, limit: u64) -> (String, String) {
    let (s, l) = (format_bytes(size), format_bytes(limit));
    if s == l {
        (format!("{} bytes", fmt_num(size)), fmt_num(limit))
    } else {
        (s, l)
    }
}

/// Refuses a file over `MAX_READ_BYTES` for `what` ("read", "edit").
pub(crate) fn check_read_size(path: &str, size: u64, what: &str, hint: &str) -> Result<()> {
    if size > MAX_READ_BYTES {
        let (s, l) = size_against(size, MAX_READ_BYTES);
        return Err(Error::new(
            Code::TooLarge,
            format!("{path} is too large to {what} ({s}; the limit is {l}).{hint}"),
        ));
    }
    Ok(())
}

/// Refuses a file (to edit) or a result (to write) over `MAX_WRITE_BYTES`.
pub(crate) fn check_write_size(path: &str, size: u64, what: &str) -> Result<()> {
    if size > MAX_WRITE_BYTES {
        let (s, l) = size_against(size, MAX_WRITE_BYTES);
        return Err(Error::new(
            Code::TooLarge,
            format!(
                "{path}: {what} would be {s} (the limit is {l}); nothing was written. Write smaller files, or change this one with a command."
            ),
        ));
    }
    Ok(())
}

/// `1 line`, `2 lines`, `1,000 lines`.
pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", fmt_num(n as u64))
    }
}

pub fn fmt_count(n: usize) -> String {
    fmt_num(n as u64)
}

#[cfg(test)]
mod tests;
