//! The file operations agents use besides the six: `move_file`, `delete_file`, `make_dir`,
//! `file_info` and `read_files`. Every path goes through the same rules as the six (`deny`,
//! `protect`, `readOnly`), and every change through the same writes (checkpoints, `onEdit`), so a
//! rewind undoes a move or a deletion. A provider has no rename: a move copies each file, mode
//! included, then removes the old one.

use serde_json::{json, Value};

use super::args::{path_prop, str_arg};
use super::guard::{check_protected, check_read_size, checked_path, lock_path};
use super::options::{Ctx, FsToolOptions};
use super::write_path::{
    bytes_to_change, check_read_to_remove, file_bytes_within, hooked_delete, hooked_write, kind_of,
};
use super::{read, MAX_READ_BYTES};
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;
use crate::text::plural;

/// The most files `read_files` reads in one call.
pub const MAX_READ_FILES: usize = 20;

pub(super) fn parameters(name: &str) -> Value {
    match name {
        "move_file" => json!({
            "type": "object",
            "properties": {
                "from": path_prop("Workspace-relative path of the file or directory to move."),
                "to": path_prop("Its new workspace-relative path; missing parent directories are created."),
                "overwrite": { "type": "boolean", "description": "Replace an existing file at `to` (default false)." }
            },
            "required": ["from", "to"],
            "additionalProperties": false
        }),
        "delete_file" => json!({
            "type": "object",
            "properties": {
                "path": path_prop("Workspace-relative path of the file or directory to delete."),
                "recursive": { "type": "boolean", "description": "Delete a directory and everything in it (default false)." }
            },
            "required": ["path"],
            "additionalProperties": false
        }),
        "make_dir" => json!({
            "type": "object",
            "properties": { "path": path_prop("Workspace-relative directory to create, with its missing parents.") },
            "required": ["path"],
            "additionalProperties": false
        }),
        "file_info" => json!({
            "type": "object",
            "properties": { "path": path_prop("Workspace-relative path of a file or directory.") },
            "required": ["path"],
            "additionalProperties": false
        }),
        "read_files" => json!({
            "type": "object",
            "properties": {
                "paths": {
                    "type": "array",
                    "items": { "type": "string" },
                    "minItems": 1,
                    "maxItems": MAX_READ_FILES,
                    "description": "Workspace-relative paths of the files to read."
                },
                "offset": { "type": "integer", "description": "1-based line to start from in each file; negative: that many last lines." },
                "limit": { "type": "integer", "minimum": 1, "description": "Most lines of each file." }
            },
            "required": ["paths"],
            "additionalProperties": false
        }),
        _ => json!({}),
    }
}

pub(super) fn description(name: &str, o: &FsToolOptions) -> String {
    match name {
        "move_file" => "Move or rename a file or directory. Missing parent directories of `to` are created; an existing `to` is refused unless overwrite is true.".into(),
        "delete_file" => "Delete a file, or a directory with recursive: true. The workspace root cannot be deleted.".into(),
        "make_dir" => "Create a directory and its missing parents.".into(),
        "file_info" => "Describe a file or directory: type, size in bytes, number of lines (text files), last modification time and permission bits where known.".into(),
        "read_files" => format!(
            "Read up to {MAX_READ_FILES} files in one call; each file's numbered lines come under '==> path <==', as read_file gives them (at most {} lines each). A file that cannot be read shows its error and the others still come.",
            o.max_read_lines
        ),
        _ => String::new(),
    }
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: &Value, ctx: &Ctx) -> Result<String> {
    match name {
        "move_file" => move_file(fs, o, args, ctx).await,
        "delete_file" => delete_file(fs, o, args, ctx).await,
        "make_dir" => make_dir(fs, o, args).await,
        "file_info" => file_info(fs, o, args).await,
        "read_files" => read_files(fs, o, args, ctx).await,
        _ => Err(Error::new(Code::InvalidArguments, format!("Unknown tool: {name}"))),
    }
}

fn exists(message: String) -> Error {
    Error::new(Code::Exists, message)
}

/// The files and directories under `dir` (workspace paths, directories before what they hold);
/// a denied name anywhere in it refuses the whole operation.
async fn tree(fs: &dyn FsProvider, o: &FsToolOptions, dir: &str, what: &str) -> Result<(Vec<String>, Vec<String>)> {
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![dir.to_string()];
    while let Some(d) = stack.pop() {
        for e in fs.readdir(&d).await? {
            if !super::walk::is_entry_name(&e.name) {
                continue;
            }
            let path = if d == "." { e.name.clone() } else { format!("{d}/{}", e.name) };
            if name_is_denied(&e.name, &o.deny) {
                return Err(Error::new(
                    Code::Denied,
                    format!("Access denied: {dir} holds {path}, a denied name; it cannot be {what}, and nothing was changed."),
                ));
            }
            match e.kind {
                EntryType::Directory => {
                    dirs.push(path.clone());
                    stack.push(path);
                }
                // A link is moved as what it leads to by no copy: refused, so nothing is changed.
                EntryType::Symlink if what == "moved" => {
                    return Err(Error::new(
                        Code::NotAFile,
                        format!("{dir} holds {path}, a symbolic link; it cannot be moved, and nothing was changed."),
                    ));
                }
                // Deleted as itself, never what it leads to.
                _ => files.push(path),
            }
        }
    }
    files.sort();
    dirs.sort();
    Ok((files, dirs))
}

/// With checkpoints, a file removed from its place must fit in a backup, or it could not be undone.
async fn check_undoable(fs: &dyn FsProvider, o: &FsToolOptions, path: &str, what: &str) -> Result<()> {
    let Some(c) = &o.checkpoints else { return Ok(()) };
    let size = fs.stat(path).await?.map_or(0, |s| s.size);
    if size > c.max_file_bytes() {
        return Err(Error::new(
            Code::TooLarge,
            format!(
                "{path} is {}, more than checkpoints keep ({}): {what} it could not be undone, so nothing was changed.",
                plural(size as usize, "byte"),
                plural(c.max_file_bytes() as usize, "byte")
            ),
        ));
    }
    Ok(())
}

/// What `path` itself is, a link not followed (from its parent's listing); `None` when absent.
pub(crate) async fn own_kind(fs: &dyn FsProvider, path: &str) -> Result<Option<EntryType>> {
    let (parent, name) = path.rsplit_once('/').unwrap_or((".", path));
    match fs.readdir(parent).await {
        Ok(entries) => match entries.into_iter().find(|e| e.name == name) {
            Some(e) => Ok(Some(e.kind)),
            None => kind_of(fs, path).await,
        },
        Err(e) if e.code == Code::Foreign => Err(e),
        Err(_) => kind_of(fs, path).await,
    }
}

/// Refuses a path that really is the workspace root (a link to `.`, say).
pub(crate) async fn not_the_root(fs: &dyn FsProvider, path: &str, what: &str) -> Result<()> {
    if path == "." || (fs.caps().real_path && fs.real_path(path).await? == ".") {
        return Err(Error::new(
            Code::InvalidArguments,
            format!("The workspace root cannot be {what} ({path} leads to it)."),
        ));
    }
    Ok(())
}

/// Removes the directories a tree operation emptied, deepest first, each only if it is empty:
/// anything that appeared meanwhile stays, and the operation says so.
async fn remove_emptied(fs: &dyn FsProvider, top: &str, dirs: &[String]) -> Result<()> {
    let mut all: Vec<&str> = dirs.iter().map(String::as_str).collect();
    all.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    all.push(top);
    for d in all {
        if let Err(e) = fs.rm(d, false).await {
            // A provider whose rm takes a directory only with `recursive` (as node's fs.rm does):
            // removed so when it is still empty.
            if !fs.readdir(d).await?.is_empty() {
                return Err(Error::new(
                    e.code,
                    format!("{d} was not removed: something appeared in it meanwhile ({})", e.message),
                ));
            }
            fs.rm(d, true).await?;
        }
    }
    Ok(())
}

fn under(path: &str, dir: &str) -> bool {
    dir == "." || path == dir || path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// Where `path` really leads, links followed, also when it does not exist yet: its nearest
/// existing ancestor's real path and the rest as given.
async fn real_destination(fs: &dyn FsProvider, path: &str) -> Result<String> {
    let mut head = path;
    let mut rest: Vec<&str> = Vec::new();
    loop {
        if fs.stat(head).await?.is_some() {
            if let Ok(real) = fs.real_path(head).await {
                rest.reverse();
                let mut out = real;
                for r in rest {
                    out = if out == "." { r.to_string() } else { format!("{out}/{r}") };
                }
                return Ok(out);
            }
        }
        match head.rsplit_once('/') {
            Some((parent, name)) => {
                rest.push(name);
                head = parent;
            }
            None if head != "." => {
                rest.push(head);
                head = ".";
            }
            None => return Ok(path.to_string()),
        }
    }
}

async fn move_file(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let from = checked_path(fs, o, str_arg(args, "from").unwrap_or_default()).await?;
    let to = checked_path(fs, o, str_arg(args, "to").unwrap_or_default()).await?;
    let overwrite = args.get("overwrite").and_then(Value::as_bool).unwrap_or(false);
    not_the_root(fs, &from, "moved").await?;
    not_the_root(fs, &to, "replaced").await?;
    if from == to {
        return Ok(format!("{from} is already at {to}; nothing was moved."));
    }
    if under(&to, &from) {
        return Err(Error::new(Code::InvalidArguments, format!("Cannot move {from} into itself ({to}).")));
    }
    // The same through links: onto a link that leads to the source, or into the source through
    // a link to it, nothing moves.
    if fs.caps().real_path {
        let (real_from, real_to) = (fs.real_path(&from).await?, real_destination(fs, &to).await?);
        if real_to == real_from {
            return Err(Error::new(
                Code::InvalidArguments,
                format!("Cannot move {from} onto itself ({to} leads to {real_from})."),
            ));
        }
        if under(&real_to, &real_from) {
            return Err(Error::new(
                Code::InvalidArguments,
                format!("Cannot move {from} into itself ({to} leads to {real_to})."),
            ));
        }
    }
    let kind = own_kind(fs, &from).await?.ok_or_else(|| Error::not_found(&from))?;
    if kind == EntryType::Symlink {
        return Err(Error::new(
            Code::NotAFile,
            format!("{from} is a symbolic link; move_file moves files and directories."),
        ));
    }
    match own_kind(fs, &to).await? {
        Some(EntryType::Directory) => {
            return Err(exists(format!(
                "{to} already exists and is a directory; delete it first or choose another path."
            )))
        }
        Some(_) if kind == EntryType::Directory => {
            return Err(exists(format!("{to} already exists; a directory cannot replace a file.")))
        }
        Some(_) if !overwrite => {
            return Err(exists(format!("{to} already exists; pass overwrite: true to replace it.")))
        }
        _ => {}
    }
    // What moves where, every path checked before anything changes.
    let (files, dirs) = match kind {
        EntryType::Directory => tree(fs, o, &from, "moved").await?,
        _ => (vec![from.clone()], Vec::new()),
    };
    let dest = |p: &str| if p == from { to.clone() } else { format!("{to}{}", &p[from.len()..]) };
    let mut pairs = Vec::with_capacity(files.len());
    for f in &files {
        let t = dest(f);
        let t = checked_path(fs, o, &t).await?;
        check_protected(fs, o, f).await?;
        check_protected(fs, o, &t).await?;
        check_undoable(fs, o, f, "moving").await?;
        // Moved by copying: a file too large to hold is refused before anything changes.
        let size = fs.stat(f).await?.map_or(0, |s| s.size);
        check_read_size(f, size, "move", " Move it with a command instead.")?;
        pairs.push((f.clone(), t));
    }
    let mut paths: Vec<&String> = pairs.iter().flat_map(|(a, b)| [a, b]).collect();
    paths.sort();
    let mut _locks = Vec::with_capacity(paths.len());
    for p in paths {
        _locks.push(lock_path(fs, p).await);
    }

    // Copy, then remove: a failure on the way leaves the source whole and takes back the copies.
    let replaced = match kind {
        EntryType::Directory => None,
        _ => match kind_of(fs, &to).await? {
            Some(_) => {
                // Replacing a file is an overwrite: the stale-file guard holds as for write_file.
                let bytes = bytes_to_change(fs, &to, "replace").await?;
                o.check_read(ctx, &to, &[&bytes])?;
                Some(bytes)
            }
            None => None,
        },
    };
    let mut written: Vec<&str> = Vec::new();
    for (f, t) in &pairs {
        ctx.check_cancel()?;
        let copied = async {
            let bytes = bytes_to_change(fs, f, "move").await?;
            // requireRead: a file moved away must have been read, as it is now.
            o.check_read(ctx, f, &[&bytes])?;
            hooked_write(fs, o, ctx, t, &bytes).await?;
            // Written, so taken back if anything after fails.
            written.push(t);
            if fs.caps().mode {
                fs.chmod(t, fs.get_mode(f).await? & 0o777).await?;
            }
            Ok::<_, Error>(())
        };
        if let Err(e) = copied.await {
            for w in written.iter().rev() {
                let _ = match &replaced {
                    Some(bytes) if *w == to && fs.caps().write_bytes => fs.write_file_bytes(w, bytes).await,
                    Some(bytes) if *w == to => fs.write_file(w, &String::from_utf8_lossy(bytes)).await,
                    _ => fs.rm(w, false).await,
                };
            }
            return Err(e);
        }
    }
    for d in &dirs {
        fs.mkdir(&dest(d)).await?;
    }
    for (f, _) in &pairs {
        hooked_delete(fs, o, ctx, f).await?;
    }
    if kind == EntryType::Directory {
        remove_emptied(fs, &from, &dirs).await?;
    }
    Ok(format!("Moved {from} to {to}."))
}

async fn delete_file(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    let recursive = args.get("recursive").and_then(Value::as_bool).unwrap_or(false);
    not_the_root(fs, &path, "deleted").await?;
    match own_kind(fs, &path).await?.ok_or_else(|| Error::not_found(&path))? {
        EntryType::Directory => {
            if !recursive {
                return Err(Error::new(
                    Code::IsADirectory,
                    format!("{path} is a directory; pass recursive: true to delete it and everything in it."),
                ));
            }
            let (files, dirs) = tree(fs, o, &path, "deleted").await?;
            for f in &files {
                check_protected(fs, o, f).await?;
                check_undoable(fs, o, f, "deleting").await?;
                check_read_to_remove(fs, o, ctx, f).await?;
            }
            for f in &files {
                ctx.check_cancel()?;
                let _lock = lock_path(fs, f).await;
                hooked_delete(fs, o, ctx, f).await?;
            }
            remove_emptied(fs, &path, &dirs).await?;
        }
        _ => delete_one(fs, o, ctx, &path).await?,
    }
    Ok(format!("Deleted {path}."))
}

/// Deletes one file or link (`path` already checked, not a directory) on the file tools' path:
/// `protect`, checkpoints' size limit, the path's lock, `requireRead`, then the recorded delete.
pub(crate) async fn delete_one(fs: &dyn FsProvider, o: &FsToolOptions, ctx: &Ctx, path: &str) -> Result<()> {
    check_protected(fs, o, path).await?;
    check_undoable(fs, o, path, "deleting").await?;
    let _lock = lock_path(fs, path).await;
    check_read_to_remove(fs, o, ctx, path).await?;
    hooked_delete(fs, o, ctx, path).await
}

async fn make_dir(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    let shown = if path == "." { ".".to_string() } else { path.clone() };
    match kind_of(fs, &path).await? {
        Some(EntryType::Directory) => Ok(format!("{shown}/ already exists.")),
        Some(_) => Err(exists(format!("{path} already exists and is not a directory."))),
        None => {
            fs.mkdir(&path).await?;
            Ok(format!("Created {shown}/."))
        }
    }
}

async fn file_info(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or(".")).await?;
    let stat = fs.stat(&path).await?;
    let kind = match &stat {
        Some(s) => s.kind,
        None => kind_of(fs, &path).await?.ok_or_else(|| Error::not_found(&path))?,
    };
    let mut lines = vec![format!("path: {path}")];
    lines.push(format!(
        "type: {}",
        match kind {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
            EntryType::Other => "other",
        }
    ));
    if let (Some(s), EntryType::File) = (&stat, kind) {
        lines.push(format!("size: {} bytes", s.size));
        if s.size <= MAX_READ_BYTES {
            let bytes = file_bytes_within(fs, &path, "read", "").await?;
            if !super::image::is_binary(&bytes) && super::image::sniff(&bytes).is_none() {
                if let Ok(text) = std::str::from_utf8(&bytes) {
                    lines.push(format!("lines: {}", text.lines().count()));
                }
            }
        }
    }
    if let Some(ms) = stat.as_ref().and_then(|s| s.modified_ms) {
        lines.push(format!("modified: {}", iso8601(ms)));
    }
    if fs.caps().mode && kind != EntryType::Other {
        if let Ok(mode) = fs.get_mode(&path).await {
            lines.push(format!("mode: {:04o}", mode & 0o7777));
        }
    }
    Ok(lines.join("\n"))
}

/// Milliseconds since the Unix epoch as ISO 8601 in UTC (`2026-12-01T18:40:05.123Z`).
pub(crate) fn iso8601(ms: i64) -> String {
    let (secs, millis) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

async fn read_files(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let paths: Vec<&str> = args
        .get("paths")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Each file as read_file gives it, images as a note (a list of texts cannot carry one).
    let each = FsToolOptions { read_images: false, ..o.clone() };
    let mut parts = Vec::with_capacity(paths.len());
    for p in paths {
        let mut one = json!({ "path": p });
        for key in ["offset", "limit"] {
            if let Some(v) = args.get(key) {
                one[key] = v.clone();
            }
        }
        let text = match read::run(fs, &each, &one, ctx).await {
            Ok(Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(e) if e.code == Code::Foreign => return Err(e),
            Err(e) => format!("({})", e.message),
        };
        parts.push(format!("==> {p} <==\n{text}"));
    }
    Ok(parts.join("\n\n"))
}

#[cfg(test)]
mod tests;
