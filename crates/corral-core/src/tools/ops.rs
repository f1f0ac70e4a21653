//! The file tools' path for the surfaces that are not tools: the SDK sandboxes (`toAiSdkSandbox`,
//! `corralSandboxClient`'s sessions and manifests) and the OpenAI editor (`createEditor`). Each
//! operation takes the same steps as the tool that does the same thing — `deny` on where a path
//! really leads, `readOnly`, `protect`, the size limits (checked before any byte is read), the
//! path's lock, `requireRead`, checkpoints and `onEdit` — so no adapter decides a file rule of
//! its own, and an attack refused through `createFsTools` is refused through every adapter.

use std::sync::Arc;

use super::files::{delete_one, not_the_root, own_kind};
use super::guard::{check_read_size, checked_path};
use super::options::{Ctx, FsToolOptions};
use super::patch::v4a;
use super::write::{write_bytes, Written};
use super::write_path::{check_read_to_remove, file_bytes_within};
use crate::error::{Code, Error, Result};
use crate::fs::{DirEntry, EntryType, FsProvider, Stat};
use crate::path::name_is_denied;

/// A provider and the file tools' options (`files: { … }` of an adapter).
#[derive(Clone)]
pub struct FileOps {
    pub fs: Arc<dyn FsProvider>,
    pub opts: FsToolOptions,
}

impl FileOps {
    /// Over `fs` with `opts`. On disk the provider is a view that checks `deny` on where each
    /// operation really goes as it runs (a directory swapped for a link to `.git` after the
    /// check is refused), as `tools::call` does for the file tools.
    pub fn new(fs: Arc<dyn FsProvider>, opts: FsToolOptions) -> FileOps {
        let fs = match fs.as_local() {
            Some(local) if !opts.deny.is_empty() => Arc::new(local.denying(&opts.deny)) as Arc<dyn FsProvider>,
            _ => fs,
        };
        FileOps { fs, opts }
    }

    fn writable(&self, path: &str) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::new(
                Code::ReadOnly,
                format!("{path} was not changed: this sandbox's files are read-only (files.readOnly)."),
            ));
        }
        Ok(())
    }

    /// A file's bytes, `None` when there is none. A directory is `IsADirectory`, a pipe or
    /// device `NotAFile`, a file over the read limit `TooLarge` (never read). Counts as the
    /// session's read (`requireRead`).
    pub async fn read(&self, path: &str, ctx: &Ctx) -> Result<Option<Vec<u8>>> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        match fs.stat(&path).await? {
            None => return Ok(None),
            Some(s) if s.kind == EntryType::Directory => {
                return Err(Error::new(Code::IsADirectory, format!("Is a directory: {path}")))
            }
            Some(s) if s.kind == EntryType::Other => {
                return Err(Error::new(Code::NotAFile, format!("{path} is not a regular file.")))
            }
            Some(s) => check_read_size(&path, s.size, "read", "")?,
        }
        let bytes = match file_bytes_within(fs, &path, "read", "").await {
            Ok(b) => b,
            Err(e) if e.code == Code::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        check_read_size(&path, bytes.len() as u64, "read", "")?;
        self.opts.note_read(ctx, &path, &[&bytes]);
        Ok(Some(bytes))
    }

    /// Writes a whole file: `write_file`'s path (see `write::write_bytes`).
    pub async fn write(&self, path: &str, bytes: &[u8], ctx: &Ctx) -> Result<()> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        self.writable(&path)?;
        write_bytes(fs, &self.opts, ctx, &path, bytes).await.map(|_| ())
    }

    /// The directory a command of an SDK session starts in: it must be one, under `deny`.
    /// `given` is the path as the caller wrote it, for the message.
    pub async fn working_dir(&self, path: &str, given: &str) -> Result<String> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        match fs.stat(&path).await? {
            None => Err(Error::new(Code::NotFound, format!("Working directory not found: {given}"))),
            Some(s) if s.kind != EntryType::Directory => {
                Err(Error::new(Code::NotAFile, format!("Working directory is not a directory: {given}")))
            }
            Some(_) => Ok(path),
        }
    }

    /// What `path` leads to (`None`: nothing), under `deny`.
    pub async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        fs.stat(&path).await
    }

    /// A directory's entries (`None`: no such directory), less the names `deny` holds, each with
    /// its workspace path.
    pub async fn list(&self, path: &str) -> Result<Option<Vec<(String, DirEntry)>>> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        match fs.readdir(&path).await {
            Ok(entries) => Ok(Some(
                entries
                    .into_iter()
                    .filter(|e| !name_is_denied(&e.name, &self.opts.deny))
                    .map(|e| (super::walk::join(&path, &e.name), e))
                    .collect(),
            )),
            Err(e) if e.code == Code::NotFound => match fs.stat(&path).await? {
                None => Ok(None),
                Some(_) => Err(Error::new(Code::NotAFile, format!("Not a directory: {path}"))),
            },
            Err(e) => Err(e),
        }
    }

    /// Deletes a file or a link (never what it leads to); false when there is none. A directory
    /// is `IsADirectory`.
    pub async fn delete(&self, path: &str, ctx: &Ctx) -> Result<bool> {
        let fs = self.fs.as_ref();
        // `a.txt/` and `a.txt/.` name a directory, as the system reads them.
        let names_directory = ["/", "\\", "/.", "\\."].iter().any(|end| path.ends_with(end));
        let given = path;
        let path = checked_path(fs, &self.opts, path).await?;
        if path == "." {
            return Err(Error::new(Code::IsADirectory, "Is a directory: . (the workspace root)"));
        }
        match own_kind(fs, &path).await? {
            None => return Ok(false),
            Some(EntryType::Directory) => {
                return Err(Error::new(Code::IsADirectory, format!("Is a directory: {path}")))
            }
            Some(_) if names_directory => return Err(Error::new(Code::NotAFile, format!("Not a directory: {given}"))),
            Some(_) => {}
        }
        self.writable(&path)?;
        not_the_root(fs, &path, "deleted").await?;
        match delete_one(fs, &self.opts, ctx, &path).await {
            Ok(()) => Ok(true),
            Err(e) if e.code == Code::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Makes a directory and its parents (none of them a denied or protected name).
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        self.writable(&path)?;
        super::guard::check_protected(fs, &self.opts, &path).await?;
        fs.mkdir(&path).await
    }

    /// The OpenAI editor's `createFile`: the V4A diff in create mode, to a path that must not
    /// exist yet.
    pub async fn create_file(&self, path: &str, diff: &str, ctx: &Ctx) -> Result<()> {
        let fs = self.fs.as_ref();
        let path = checked_path(fs, &self.opts, path).await?;
        self.writable(&path)?;
        let content = v4a::apply("", diff, v4a::Mode::Create)?;
        if fs.stat(&path).await?.is_some() || own_kind(fs, &path).await?.is_some() {
            return Err(Error::new(Code::Exists, format!("File already exists: {path}")));
        }
        write_bytes(fs, &self.opts, ctx, &path, content.as_bytes()).await.map(|_| ())
    }

    /// The OpenAI editor's `updateFile`: the V4A diff applied to the file's text as the SDK's
    /// `applyDiff` does, written where it is or to `move_to` (which must not exist); all or
    /// nothing. True when the file moved (`move_to` names another path).
    pub async fn update_file(&self, path: &str, diff: &str, move_to: Option<&str>, ctx: &Ctx) -> Result<bool> {
        let fs = self.fs.as_ref();
        let from = checked_path(fs, &self.opts, path).await?;
        self.writable(&from)?;
        let to = match move_to {
            Some(t) => checked_path(fs, &self.opts, t).await?,
            None => from.clone(),
        };
        let text = match fs.stat(&from).await? {
            None => return Err(Error::not_found(&from)),
            Some(s) if s.kind == EntryType::Directory => {
                return Err(Error::new(Code::IsADirectory, format!("Is a directory: {from}")))
            }
            Some(s) => {
                check_read_size(&from, s.size, "patch", " Change it with a command instead.")?;
                String::from_utf8(file_bytes_within(fs, &from, "patch", " Change it with a command instead.").await?)
                    .map_err(|_| Error::new(Code::NotUtf8, format!("Cannot patch {from}: it is not UTF-8 text.")))?
            }
        };
        // The editor's diffs are the model's: markers the process's shared redactor showed this
        // session are restored where this file holds their values (API.md "Secrets stay out of the
        // model"), and an error that quotes a restored line is redacted again.
        let redactor = crate::redact::shared();
        let diff = redactor.restore(diff, &ctx.session_id, &text);
        let next =
            v4a::apply(&text, &diff, v4a::Mode::Update).map_err(|e| redactor.redact_error(e, &ctx.session_id))?;
        if to == from {
            return write_bytes(fs, &self.opts, ctx, &from, next.as_bytes()).await.map(|_| false);
        }
        if fs.stat(&to).await?.is_some() || own_kind(fs, &to).await?.is_some() {
            return Err(Error::new(Code::Exists, format!("File already exists: {to}")));
        }
        // The source must be removable (protect, requireRead) before anything is written.
        super::guard::check_protected(fs, &self.opts, &from).await?;
        check_read_to_remove(fs, &self.opts, ctx, &from).await?;
        let written = write_bytes(fs, &self.opts, ctx, &to, next.as_bytes()).await?;
        if let Err(e) = delete_one(fs, &self.opts, ctx, &from).await {
            // All or nothing: the new file goes when the old one cannot.
            if !matches!(written, Written::Same) {
                let _ = fs.rm(&to, false).await;
            }
            return Err(e);
        }
        Ok(true)
    }

    /// The OpenAI editor's `deleteFile`: a file or a link; a directory is `IsADirectory`,
    /// nothing there `NotFound`.
    pub async fn delete_file(&self, path: &str, ctx: &Ctx) -> Result<()> {
        if self.delete(path, ctx).await? {
            Ok(())
        } else {
            Err(Error::not_found(path))
        }
    }
}

/// The SDK's `applyDiff(input, diff, create ? 'create' : 'default')`.
pub fn v4a_apply(input: &str, diff: &str, create: bool) -> Result<String> {
    v4a::apply(input, diff, if create { v4a::Mode::Create } else { v4a::Mode::Update })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::memory::MemoryFs;

    fn ops(files: &[(&str, &str)], opts: FsToolOptions) -> (Arc<MemoryFs>, FileOps) {
        let fs = Arc::new(MemoryFs::new(files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))).unwrap());
        (fs.clone(), FileOps::new(fs, opts))
    }

    #[tokio::test]
    async fn every_operation_refuses_git_as_the_file_tools_do() {
        let (fs, o) = ops(&[(".git/config", "[core]\n"), ("a.txt", "a\n")], FsToolOptions::default());
        let ctx = Ctx::default();
        for e in [
            o.write(".git/config", b"[core]\n\tfsmonitor = touch x\n", &ctx).await.unwrap_err(),
            o.write(".git/hooks/post-checkout", b"#!/bin/sh\n", &ctx).await.unwrap_err(),
            o.read(".git/config", &ctx).await.unwrap_err(),
            o.mkdir(".git/hooks").await.unwrap_err(),
            o.create_file(".git/hooks/post-checkout", "+x\n", &ctx).await.unwrap_err(),
            o.update_file("a.txt", "@@\n-a\n+b\n", Some(".git/a.txt"), &ctx).await.unwrap_err(),
            o.delete(".git/config", &ctx).await.unwrap_err(),
        ] {
            assert_eq!(e.code, Code::Denied, "{}", e.message);
        }
        assert!(o.list(".").await.unwrap().unwrap().iter().all(|(_, e)| e.name != ".git"));
        assert_eq!(fs.snapshot().get(".git/config").map(String::as_str), Some("[core]\n"));
        assert_eq!(fs.snapshot().get("a.txt").map(String::as_str), Some("a\n"));
    }

    #[tokio::test]
    async fn read_only_protect_and_require_read_hold() {
        let ctx = Ctx::default();
        let ro = FsToolOptions { read_only: true, ..Default::default() };
        let (_, o) = ops(&[("a.txt", "a\n")], ro);
        assert_eq!(o.write("a.txt", b"b", &ctx).await.unwrap_err().code, Code::ReadOnly);
        assert_eq!(o.delete("a.txt", &ctx).await.unwrap_err().code, Code::ReadOnly);
        let protect = FsToolOptions::default().with_protect(vec!["*.lock".into()]).unwrap();
        let (_, o) = ops(&[("x.lock", "l\n")], protect);
        assert_eq!(o.write("x.lock", b"b", &ctx).await.unwrap_err().code, Code::Protected);
        let guarded = FsToolOptions { reads: Some(Default::default()), ..Default::default() };
        let (_, o) = ops(&[("a.txt", "a\n")], guarded);
        assert_eq!(o.write("a.txt", b"b", &ctx).await.unwrap_err().code, Code::NotRead);
        assert_eq!(o.delete("a.txt", &ctx).await.unwrap_err().code, Code::NotRead);
        o.read("a.txt", &ctx).await.unwrap();
        o.update_file("a.txt", "@@\n-a\n+b\n", None, &ctx).await.unwrap();
        assert_eq!(o.read("a.txt", &ctx).await.unwrap().unwrap(), b"b\n");
    }
}
