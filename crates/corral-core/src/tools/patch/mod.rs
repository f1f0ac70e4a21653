//! `apply_patch`: codex's patch envelope applied all or nothing. Every file is parsed, checked
//! (path rules, `deny`, `protect`, sizes) and matched before the first write; the writes then go
//! through the file tools' own path (checkpoints, `onEdit`), and if one of them fails, the files
//! already written are put back as they were.

mod apply;
mod parse;
mod seek;
pub(crate) mod v4a;

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::args::str_arg;
use super::guard::{check_protected, check_read_size, check_write_size, checked_path, lock_path};
use super::options::{Ctx, FsToolOptions};
use super::write_path::{file_bytes_within, hooked_delete, hooked_write, kind_of, notify_edit};
use super::MAX_READ_BYTES;
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use parse::{Chunk, Hunk};

pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": "The whole patch, from '*** Begin Patch' to '*** End Patch'."
            }
        },
        "required": ["input"],
        "additionalProperties": false
    })
}

pub(super) fn description(_o: &FsToolOptions) -> String {
    "Edit files with a patch: add, delete, update and move files in one call. The input is an envelope:\n\
*** Begin Patch\n\
*** Add File: path/new.txt\n\
+each line of the new file, prefixed with +\n\
*** Delete File: path/old.txt\n\
*** Update File: path/file.py\n\
*** Move to: path/renamed.py   (optional)\n\
@@ def some_function():   (a line just above the change, to find the place)\n\
 context line (space prefix)\n\
-removed line\n\
+added line\n\
*** End Patch\n\
Give about three lines of context around each change; add '*** End of File' after a chunk that ends the file. \
Paths are workspace-relative. The patch is applied all or nothing: if any part does not apply, no file changes."
        .to_string()
}

/// What a path holds at this point of the patch: the files the patch already changed, else the
/// provider's.
struct Overlay {
    state: BTreeMap<String, Option<String>>,
    /// What each touched path held before the patch (`None`: nothing), for rollback and `onEdit`.
    before: BTreeMap<String, Option<Vec<u8>>>,
    /// Files the patch deletes that are too large to hold: never read, deleted last.
    unread: BTreeMap<String, u64>,
}

impl Overlay {
    /// The file's text; `None` when there is no file. A directory or another kind of entry is
    /// refused with `NotAFile`.
    async fn text(&mut self, fs: &dyn FsProvider, path: &str) -> Result<Option<String>> {
        if let Some(s) = self.state.get(path) {
            return Ok(s.clone());
        }
        let bytes = self.original(fs, path, Code::NotAFile).await?;
        let text = match bytes {
            None => None,
            Some(b) => Some(String::from_utf8(b).map_err(|_| {
                Error::new(Code::NotUtf8, format!("{path} is not UTF-8 text; a patch cannot change it."))
            })?),
        };
        self.state.insert(path.to_string(), text.clone());
        Ok(text)
    }

    /// What the provider holds at `path` before the patch, remembered. A file over
    /// `MAX_READ_BYTES` is `TooLarge`, its size checked before any byte is read.
    async fn original(&mut self, fs: &dyn FsProvider, path: &str, dir_code: Code) -> Result<Option<Vec<u8>>> {
        if let Some(b) = self.before.get(path) {
            return Ok(b.clone());
        }
        let bytes = match fs.stat(path).await? {
            None => None,
            Some(s) if s.kind == EntryType::Directory => {
                return Err(Error::new(dir_code, format!("{path} is a directory; a patch changes files.")))
            }
            Some(s) if s.kind != EntryType::File => {
                return Err(Error::new(Code::NotAFile, format!("{path} is not a regular file.")))
            }
            Some(s) => {
                check_read_size(path, s.size, "patch", " Change it with a command instead.")?;
                Some(file_bytes_within(fs, path, "patch", " Change it with a command instead.").await?)
            }
        };
        self.before.insert(path.to_string(), bytes.clone());
        Ok(bytes)
    }

    /// The size of a file the patch deletes (`None`: no file). One too large to hold is not read:
    /// it is deleted last, after every other change has been made.
    async fn size_to_delete(&mut self, fs: &dyn FsProvider, path: &str) -> Result<Option<u64>> {
        if let Some(s) = self.state.get(path) {
            return Ok(s.as_ref().map(|t| t.len() as u64));
        }
        if !self.before.contains_key(path) {
            if let Some(s) = fs.stat(path).await?.filter(|s| s.kind == EntryType::File && s.size > MAX_READ_BYTES) {
                self.unread.insert(path.to_string(), s.size);
                return Ok(Some(s.size));
            }
        }
        Ok(self.original(fs, path, Code::NotAFile).await?.map(|b| b.len() as u64))
    }
}

/// With checkpoints, a file removed by the patch must fit in a backup, or it could not be undone.
fn check_undoable(o: &FsToolOptions, path: &str, size: usize) -> Result<()> {
    match &o.checkpoints {
        Some(c) if size as u64 > c.max_file_bytes() => Err(Error::new(
            Code::TooLarge,
            format!(
                "{path} is {} bytes, more than checkpoints keep ({} bytes): removing it could not be undone, so the patch was not applied.",
                size,
                c.max_file_bytes()
            ),
        )),
        _ => Ok(()),
    }
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let hunks = parse::parse(str_arg(args, "input").unwrap_or_default())?;

    // Every path checked, then every touched path locked (in path order, so two patches cannot
    // wait on each other), before anything is read.
    let mut steps = Vec::with_capacity(hunks.len());
    for h in &hunks {
        let path = checked_path(fs, o, h.path()).await?;
        check_protected(fs, o, &path).await?;
        let to = match h {
            Hunk::Update { move_to: Some(t), .. } => {
                let t = checked_path(fs, o, t).await?;
                check_protected(fs, o, &t).await?;
                Some(t).filter(|t| *t != path)
            }
            _ => None,
        };
        steps.push((h, path, to));
    }
    let mut touched: Vec<&String> = steps.iter().flat_map(|(_, p, t)| std::iter::once(p).chain(t)).collect();
    touched.sort();
    touched.dedup();
    let mut _locks = Vec::with_capacity(touched.len());
    for p in touched {
        _locks.push(lock_path(fs, p).await);
    }

    // The whole patch, worked out before the first write.
    let mut overlay = Overlay { state: BTreeMap::new(), before: BTreeMap::new(), unread: BTreeMap::new() };
    let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
    let mut guarded = std::collections::BTreeSet::new();
    for (h, path, to) in &steps {
        ctx.check_cancel()?;
        match h {
            Hunk::Add { contents, .. } => {
                check_write_size(path, contents.len() as u64, "the new file")?;
                overlay.original(fs, path, Code::IsADirectory).await?;
                overlay.state.insert(path.clone(), Some(contents.clone()));
                guarded.insert(path.clone());
                added.push(path.clone());
            }
            Hunk::Delete { .. } => {
                // Any file can be deleted, text or not.
                let Some(size) = overlay.size_to_delete(fs, path).await? else {
                    return Err(Error::new(Code::NotFound, format!("File not found: {path} (the patch deletes it)")));
                };
                check_undoable(o, path, size as usize)?;
                overlay.state.insert(path.clone(), None);
                guarded.insert(path.clone());
                deleted.push(path.clone());
            }
            Hunk::Update { chunks, .. } => {
                let Some(text) = overlay.text(fs, path).await? else {
                    return Err(Error::new(Code::NotFound, format!("File not found: {path} (the patch updates it)")));
                };
                let stop = || ctx.check_cancel();
                // Markers the model was shown are restored where this file holds their values.
                let restored: Vec<Chunk>;
                let chunks = match &o.redactor {
                    Some(_) => {
                        let r = |l: &String| o.restore(l, ctx, &text).into_owned();
                        restored = chunks
                            .iter()
                            .map(|c| Chunk {
                                context: c.context.as_ref().map(r),
                                old_lines: c.old_lines.iter().map(r).collect(),
                                new_lines: c.new_lines.iter().map(r).collect(),
                                end_of_file: c.end_of_file,
                            })
                            .collect();
                        &restored
                    }
                    None => chunks,
                };
                let new = apply::updated(path, &text, chunks, &stop)?;
                guarded.insert(path.clone());
                check_write_size(path, new.len() as u64, "the patched file")?;
                match to {
                    Some(t) => {
                        check_undoable(o, path, text.len())?;
                        overlay.original(fs, t, Code::IsADirectory).await?;
                        guarded.insert(t.clone());
                        overlay.state.insert(t.clone(), Some(new));
                        overlay.state.insert(path.clone(), None);
                        modified.push(t.clone());
                    }
                    None => {
                        overlay.state.insert(path.clone(), Some(new));
                        modified.push(path.clone());
                    }
                }
            }
        }
    }

    // requireRead: a file the patch updates, deletes, moves away, or replaces by an Add or a Move,
    // that existed before it must have been read by this session, as it is now (one too large to
    // read cannot have been).
    for path in &guarded {
        if let Some(Some(bytes)) = overlay.before.get(path) {
            o.check_read(ctx, path, &[bytes])?;
        }
        if o.reads.is_some() && overlay.unread.contains_key(path) {
            return Err(Error::new(Code::NotRead, format!("Read {path} first: it has not been read in this session.")));
        }
    }
    // Modes of the files the patch removes, to put back exactly on a rollback; and the
    // directories its new files will make, to take away again.
    let mut modes = BTreeMap::new();
    if fs.caps().mode {
        for (path, state) in &overlay.state {
            if state.is_none() && matches!(overlay.before.get(path), Some(Some(_))) {
                modes.insert(path.clone(), fs.get_mode(path).await?);
            }
        }
    }
    let made_dirs = new_dirs(
        fs,
        overlay
            .state
            .iter()
            .filter(|(p, s)| s.is_some() && overlay.before.get(*p) == Some(&None))
            .map(|(p, _)| p.as_str()),
    )
    .await?;

    // The writes, then the deletions (a moved file exists at its new path before the old goes).
    let changes: Vec<(&String, &Option<String>)> = overlay
        .state
        .iter()
        .filter(|(p, s)| overlay.before.get(*p).map(|b| b.as_deref()) != Some(s.as_deref().map(str::as_bytes)))
        .collect();
    let large = |p: &String| overlay.unread.contains_key(p);
    let order = changes
        .iter()
        .filter(|(_, s)| s.is_some())
        .chain(changes.iter().filter(|(p, s)| s.is_none() && !large(p)))
        .chain(changes.iter().filter(|(p, s)| s.is_none() && large(p)));
    let mut done: Vec<&String> = Vec::new();
    for (path, state) in order {
        let result = match state {
            Some(text) => hooked_write(fs, o, ctx, path, text.as_bytes()).await,
            None => hooked_delete(fs, o, ctx, path).await,
        };
        if let Err(e) = result {
            undo(fs, &overlay, &done, &modes, &made_dirs).await;
            return Err(e);
        }
        if let Some(text) = state {
            o.note_read(ctx, path, &[text.as_bytes()]);
        }
        done.push(path);
    }
    for (path, state) in &changes {
        let before = overlay.before.get(*path).cloned().flatten().unwrap_or_default();
        notify_edit(o, ctx, path, &String::from_utf8_lossy(&before), state.as_deref().unwrap_or("")).await;
    }

    let mut out = String::from("Success. Updated the following files:");
    for (mark, paths) in [('A', &added), ('M', &modified), ('D', &deleted)] {
        for p in paths {
            out.push_str(&format!("\n{mark} {p}"));
        }
    }
    Ok(out)
}

/// Puts back what the patch already changed when a later write failed (best effort: the error
/// the caller sees is the write's): contents, the modes of files it removed, and no directory it
/// made.
async fn undo(
    fs: &dyn FsProvider,
    overlay: &Overlay,
    done: &[&String],
    modes: &BTreeMap<String, u32>,
    made_dirs: &[String],
) {
    for path in done.iter().rev() {
        let _ = match overlay.before.get(*path).cloned().flatten() {
            Some(bytes) if fs.caps().write_bytes => fs.write_file_bytes(path, &bytes).await,
            Some(bytes) => fs.write_file(path, &String::from_utf8_lossy(&bytes)).await,
            None => fs.rm(path, false).await,
        };
        if let Some(mode) = modes.get(*path) {
            let _ = fs.chmod(path, *mode).await;
        }
    }
    // Deepest first, each only while empty.
    for d in made_dirs.iter().rev() {
        if fs.readdir(d).await.is_ok_and(|e| e.is_empty()) {
            let _ = fs.rm(d, false).await;
        }
    }
}

/// The directories that do not exist yet above `paths`, outer ones first.
async fn new_dirs(fs: &dyn FsProvider, paths: impl Iterator<Item = &str>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for p in paths {
        let mut dir = p;
        let mut missing = Vec::new();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if out.iter().any(|d| d == parent) || kind_of(fs, parent).await?.is_some() {
                break;
            }
            missing.push(parent.to_string());
            dir = parent;
        }
        out.extend(missing.into_iter().rev());
    }
    out.sort_by_key(|d| d.matches('/').count());
    Ok(out)
}

#[cfg(test)]
mod tests;
