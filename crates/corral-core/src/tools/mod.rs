//! The six file tools: `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`.
//!
//! Each tool checks its arguments against its JSON Schema, confines and deny-checks its path, and
//! returns the text the model reads. The defaults live here, next to the tools, and the
//! descriptions are built from them, so the model is told the real limits.

use serde_json::Value;

use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;

mod args;
mod edit;
mod files;

mod fuzzy;
mod glob;
mod grep;
mod guard;
pub mod image;
mod list;
pub mod ops;
mod options;
mod patch;
pub mod read;
pub mod session;
mod spec;
mod walk;
mod write;
mod write_path;

pub use crate::text::{fmt_count, format_bytes};
pub use guard::protect_spill_dir;
pub use options::{Ctx, FsToolOptions, DEFAULT_SESSION};
pub use spec::{check_args, description, info, mcp_annotations, parameters, specs, validate, ToolSpec};

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
pub const GREP_LINE_CHARS: usize = crate::search::searcher::LINE_CHARS;

pub const READ_TOOLS: [&str; 4] = ["read_file", "list_dir", "glob", "grep"];

pub const ALL_TOOLS: [&str; 6] = ["read_file", "write_file", "edit_file", "list_dir", "glob", "grep"];

/// The tools `include` adds after the six, in the order given.
pub const EXTRA_TOOLS: [&str; 6] = ["apply_patch", "move_file", "delete_file", "make_dir", "file_info", "read_files"];

/// Of those, the ones that write (not created with `readOnly`).
pub(super) const EXTRA_WRITING_TOOLS: [&str; 4] = ["apply_patch", "move_file", "delete_file", "make_dir"];

/// Whether a call of the tool `name` on `fs` may be started on the caller's own thread, and
/// handed to the runtime only if it must wait. Its work is then a few system calls answered from
/// a local disk's cache, or memory: `read_file` (a file up to 64 KiB is read in place, a larger
/// one on the blocking pool) and `list_dir` (a directory of a few hundred entries in place, a
/// larger one on the pool). A hop to a runtime thread and back costs more than that work (two
/// thread wake-ups). A file system that may take any time to answer (network, FUSE) is never
/// asked in place, and no tool that walks, writes or syncs is.
pub fn starts_in_place(fs: &dyn FsProvider, name: &str) -> bool {
    matches!(name, "read_file" | "list_dir")
        && (fs.as_memory().is_some() || fs.as_local().is_some_and(crate::fs::local::LocalFs::on_local_disk))
}

/// Runs one tool. `args` must be a JSON object.
/// The result is a string, except an image `read_file` returns with `readImages`.
pub async fn call(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: &Value, ctx: &Ctx) -> Result<Value> {
    let result = match fs.as_local() {
        // On disk the deny list is also checked where each operation really goes, at the moment
        // it runs: a directory swapped for a link to `.git` after the path was checked is refused.
        Some(local) if !o.deny.is_empty() => call_on(&local.denying(&o.deny), o, name, args, ctx).await,
        _ => call_on(fs, o, name, args, ctx).await,
    };
    // Everything the model reads passes the redactor once more as a whole (file text and grep
    // lines were redacted before their cuts; paths and notes are here), errors too.
    match &o.redactor {
        // read_file redacted the lines it shows; the rest of its result is fixed text and the
        // path, so a path without a secret needs no second pass.
        Some(r) if name == "read_file" && result.is_ok() => {
            let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
            match r.redact(path, &ctx.session_id) {
                std::borrow::Cow::Borrowed(_) => result,
                std::borrow::Cow::Owned(_) => result.map(|v| r.redact_json(v, &ctx.session_id)),
            }
        }
        Some(r) => result.map(|v| r.redact_json(v, &ctx.session_id)).map_err(|e| r.redact_error(e, &ctx.session_id)),
        None => result,
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

#[cfg(test)]
mod tests;
