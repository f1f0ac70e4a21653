//! The write path: every change a tool makes goes through here, recorded by checkpoints
//! (so a rewind undoes it) and told to `onEdit`; and the reads a change starts from, size first.

use serde_json::json;

use super::guard::check_read_size;
use super::options::{Ctx, FsToolOptions};
use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;

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

/// A whole file's bytes, at most `MAX_READ_BYTES` of them however the file changes while it is
/// read: on disk the limit is checked on the opened file and nothing past it is read (a command
/// that grows a file between a check and the read never makes this process hold it); another
/// provider's bytes are checked once read. Over the limit: `TooLarge` with the size seen.
pub(crate) async fn file_bytes_within(fs: &dyn FsProvider, path: &str, what: &str, hint: &str) -> Result<Vec<u8>> {
    let limit = super::MAX_READ_BYTES;
    match crate::fs::read_within(fs, path, limit).await? {
        Some(bytes) => Ok(bytes),
        None => {
            let size = fs.stat(path).await?.map_or(limit + 1, |s| s.size.max(limit + 1));
            check_read_size(path, size, what, hint)?;
            Err(Error::new(Code::TooLarge, format!("{path} grew past the limit while it was read.")))
        }
    }
}

/// The bytes of a file a tool is about to change (overwrite, move, patch), its size checked
/// first: a file over `MAX_READ_BYTES` is `TooLarge` and never read (a sparse 1 TiB file must not
/// make this process allocate its size). `what` ends the sentence "too large to …".
pub(crate) async fn bytes_to_change(fs: &dyn FsProvider, path: &str, what: &str) -> Result<Vec<u8>> {
    let size = fs.stat(path).await?.map_or(0, |s| s.size);
    check_read_size(path, size, what, " Change it with a command instead.")?;
    file_bytes_within(fs, path, what, " Change it with a command instead.").await
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

/// With `requireRead`: whether the session may delete or move away `path` (as it is now). A
/// file too large to read cannot have been read.
pub(crate) async fn check_read_to_remove(fs: &dyn FsProvider, o: &FsToolOptions, ctx: &Ctx, path: &str) -> Result<()> {
    if o.reads.is_none() {
        return Ok(());
    }
    let size = fs.stat(path).await?.map_or(0, |s| s.size);
    if size > super::MAX_READ_BYTES {
        return Err(Error::new(Code::NotRead, format!("Read {path} first: it has not been read in this session.")));
    }
    let bytes = match file_bytes_within(fs, path, "read", "").await {
        Ok(b) => b,
        Err(e) if e.code == Code::TooLarge => {
            return Err(Error::new(Code::NotRead, format!("Read {path} first: it has not been read in this session.")))
        }
        Err(e) => return Err(e),
    };
    o.check_read(ctx, path, &[&bytes])
}
