//! `write_file`: creates or overwrites a file, creating missing parent directories.

use super::args::{path_prop, str_arg};
use super::guard::{check_protected, check_write_size, checked_path, lock_path};
use super::options::{Ctx, FsToolOptions};
use super::write_path::{bytes_to_change, hooked_write, notify_edit};
use super::MAX_READ_BYTES;
use crate::text::plural;
use serde_json::{json, Value};

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};

/// The arguments of `write_file`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative path of the file to create or overwrite."),
            "content": { "type": "string", "description": "The whole new content of the file." }
        },
        "required": ["path", "content"],
        "additionalProperties": false
    })
}

/// What the model is told about `write_file`, with the limits these options set.
pub(super) fn description(_o: &FsToolOptions) -> String {
    "Create or overwrite a file with the given content. Missing parent directories are created. Prefer edit_file to change part of an existing file.".to_string()
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    let given = str_arg(args, "content").unwrap_or_default();
    // Markers the model was shown are restored where the file it replaces holds their values.
    let current = match o.redactor.is_some() && given.contains("[secret:") {
        true => current_text(fs, &path).await,
        false => String::new(),
    };
    if let Some(m) = o.redactor.as_ref().and_then(|r| r.unwritable(given, &ctx.session_id, &current)) {
        return Err(Error::new(
            Code::InvalidArguments,
            format!("{path} holds the value {m} stands for, a secret of the environment or the credential broker that corral never writes into the workspace: writing the whole file would replace it by the marker's text. Change the other lines with edit_file."),
        ));
    }
    let content = o.restore(given, ctx, &current);
    let content = content.as_ref();
    let size = format!("{}, {}", plural(content.len(), "byte"), plural(content.lines().count(), "line"));
    Ok(match write_bytes(fs, o, ctx, &path, content.as_bytes()).await? {
        Written::Same => format!("{path} already has this content; nothing was written."),
        Written::Replaced => format!("Overwrote {path} ({size})."),
        Written::Created => format!("Created {path} ({size})."),
    })
}

/// The text of the file at `path` now, for restoring markers into it: empty when there is none
/// (or it cannot be read as a file the tools could show).
pub(super) async fn current_text(fs: &dyn FsProvider, path: &str) -> String {
    match fs.stat(path).await {
        Ok(Some(s)) if s.kind == EntryType::File && s.size <= MAX_READ_BYTES => {
            fs.read_file(path).await.unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// What `write_bytes` did.
pub(crate) enum Written {
    Created,
    Replaced,
    /// The file already held these bytes: nothing was written.
    Same,
}

/// The write path of `write_file` and of every surface that writes a whole file (the SDK
/// sandboxes, the editor): `path` (already `checked_path`) gets `content`, under the size limit,
/// `protect`, the path's lock, `requireRead`, checkpoints and `onEdit`.
pub(crate) async fn write_bytes(
    fs: &dyn FsProvider,
    o: &FsToolOptions,
    ctx: &Ctx,
    path: &str,
    content: &[u8],
) -> Result<Written> {
    check_write_size(path, content.len() as u64, "the content")?;
    check_protected(fs, o, path).await?;
    let _writer = lock_path(fs, path).await;
    let stat = fs.stat(path).await?;
    let old_size = stat.as_ref().map_or(0, |s| s.size);
    let existed = match stat {
        Some(s) if s.kind == EntryType::Directory => {
            return Err(Error::new(Code::IsADirectory, format!("{path} is a directory; give a file path.")))
        }
        Some(s) if s.kind != EntryType::File => {
            return Err(Error::new(Code::NotAFile, format!("{path} is not a regular file.")))
        }
        Some(_) => true,
        None => false,
    };
    let mut before = String::new();
    // A file too large to read is replaced without reading it when nothing needs what it held
    // (no read guard, no onEdit; checkpoints keep only what fits their own limit).
    let unread = existed && old_size > MAX_READ_BYTES && o.reads.is_none() && o.on_edit.is_none();
    if existed && !unread {
        let old = bytes_to_change(fs, path, "overwrite").await?;
        if old == content {
            return Ok(Written::Same);
        }
        o.check_read(ctx, path, &[&old])?;
        if o.on_edit.is_some() {
            before = String::from_utf8_lossy(&old).into_owned();
        }
    }
    hooked_write(fs, o, ctx, path, content).await?;
    o.note_read(ctx, path, &[content]);
    notify_edit(o, ctx, path, &before, &String::from_utf8_lossy(content)).await;
    Ok(if existed { Written::Replaced } else { Written::Created })
}
