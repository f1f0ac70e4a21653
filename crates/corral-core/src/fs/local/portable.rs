//! The path-based implementation, for platforms without `openat` (Windows): every path is
//! resolved with realpath and must stay inside the root's real path; writes go to a temp file in
//! the same directory and are renamed over the target. Unlike the unix implementation, a
//! directory swapped for a link between the check and the operation is not detected. The deny
//! list is checked on the path as given and on where it really leads.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{dangling, entry_type, escape, is_read_only, LocalFs};
use crate::error::{Code, Error, Result};
use crate::fs::{DirEntry, EntryType, Stat};
use crate::path::{check_denied, normalize};

impl LocalFs {
    fn host(&self, rel: &str) -> PathBuf {
        if rel == "." {
            self.inner.path.clone()
        } else {
            self.inner.path.join(rel)
        }
    }

    /// Workspace-relative form of a host path inside the root.
    fn relative(&self, host: &Path) -> Option<String> {
        let rest = host.strip_prefix(&self.inner.path).ok()?;
        let parts: Vec<String> = rest.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        Some(if parts.is_empty() { ".".to_string() } else { parts.join("/") })
    }

    /// Resolves where a normalized path really leads: the realpath of its deepest existing part,
    /// plus the parts that do not exist yet. Refuses an escape or a dangling link.
    fn real_host(&self, rel: &str) -> Result<PathBuf> {
        let full = self.host(rel);
        let mut missing: Vec<std::ffi::OsString> = Vec::new();
        let mut cur = full.as_path();
        loop {
            match std::fs::symlink_metadata(cur) {
                Ok(_) => {
                    // A link whose target is missing is refused as such; any other failure (access
                    // denied, a path too long) says what it was.
                    let real = std::fs::canonicalize(cur).map_err(|e| match e.kind() {
                        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => dangling(rel),
                        _ => Error::io(rel, &e),
                    })?;
                    if !real.starts_with(&self.inner.path) {
                        return Err(escape(rel));
                    }
                    let mut out = real;
                    for m in missing.iter().rev() {
                        out.push(m);
                    }
                    return Ok(out);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                    let name = cur.file_name().ok_or_else(|| escape(rel))?;
                    missing.push(name.to_os_string());
                    cur = cur.parent().ok_or_else(|| escape(rel))?;
                }
                Err(e) => return Err(Error::io(rel, &e)),
            }
        }
    }

    /// Normalizes and confines a path; returns the normalized workspace path and its real host path.
    pub(super) fn resolve(&self, path: &str) -> Result<(String, PathBuf)> {
        let rel = normalize(path, self.flavor)?;
        check_denied(&rel, &self.deny)?;
        let real = self.real_host(&rel)?;
        self.check_real_denied(&rel, &real)?;
        Ok((rel, real))
    }

    /// Refuses a path that really leads through a denied name, however it was spelled.
    fn check_real_denied(&self, rel: &str, real: &Path) -> Result<()> {
        let real_rel = self.relative(real).ok_or_else(|| escape(rel))?;
        if check_denied(&real_rel, &self.deny).is_err() {
            return Err(Error::new(
                Code::Denied,
                format!("Access denied: {rel} (it leads to {real_rel}, which holds a denied name)"),
            ));
        }
        Ok(())
    }

    /// Like `resolve`, but the last part is not followed (for `rm` and `stat` of a link itself).
    fn resolve_nofollow(&self, path: &str) -> Result<(String, PathBuf)> {
        let rel = normalize(path, self.flavor)?;
        check_denied(&rel, &self.deny)?;
        if rel == "." {
            return Ok((rel, self.inner.path.clone()));
        }
        let (parent, name) = match rel.rfind('/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (".", rel.as_str()),
        };
        let real_parent = self.real_host(parent)?;
        let own = real_parent.join(name);
        self.check_real_denied(&rel, &own)?;
        Ok((rel.clone(), own))
    }

    /// Workspace-relative real path of a host path (for links: where they lead).
    pub(super) fn real_relative_sync(&self, path: &str) -> Result<String> {
        let (rel, real) = self.resolve(path)?;
        self.relative(&real).ok_or_else(|| escape(&rel))
    }

    pub(super) fn read_bytes_sync(&self, path: &str) -> Result<Vec<u8>> {
        Ok(self.read_bytes_within_sync(path, u64::MAX)?.unwrap_or_default())
    }

    /// The file's bytes, or `None` when it holds more than `limit`: its size is taken from the
    /// file once open, and no more than `limit` + 1 bytes are read, so a file that grows after the
    /// check is never read whole.
    pub(super) fn read_bytes_within_sync(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        use std::io::Read;
        let (rel, host) = self.resolve(path)?;
        let file = std::fs::File::open(&host).map_err(|e| Error::io(&rel, &e))?;
        let meta = file.metadata().map_err(|e| Error::io(&rel, &e))?;
        if meta.is_dir() {
            return Err(Error::new(Code::IsADirectory, format!("Is a directory: {rel}")));
        }
        if meta.len() > limit {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(meta.len() as usize);
        file.take(limit.saturating_add(1)).read_to_end(&mut out).map_err(|e| Error::io(&rel, &e))?;
        Ok((out.len() as u64 <= limit).then_some(out))
    }

    pub(super) fn write_bytes_sync(&self, path: &str, content: &[u8]) -> Result<()> {
        let (rel, host) = self.resolve(path)?;
        if rel == "." {
            return Err(Error::new(Code::IsADirectory, "Is a directory: . (the workspace root)"));
        }
        let parent = host.parent().ok_or_else(|| escape(&rel))?.to_path_buf();
        let existing = std::fs::metadata(&host).ok();
        if let Some(meta) = &existing {
            if meta.is_dir() {
                return Err(Error::new(Code::IsADirectory, format!("Is a directory: {rel}")));
            }
            if !meta.is_file() {
                return Err(Error::new(Code::NotAFile, format!("Not a regular file: {rel}")));
            }
            if is_read_only(meta) {
                return Err(Error::new(Code::ReadOnly, format!("File is read-only: {rel}")));
            }
        }
        std::fs::create_dir_all(&parent).map_err(|e| Error::io(&rel, &e))?;
        // The parent now exists: check again that it is still inside the root.
        let real_parent = std::fs::canonicalize(&parent).map_err(|e| Error::io(&rel, &e))?;
        if !real_parent.starts_with(&self.inner.path) {
            return Err(escape(&rel));
        }
        let name = host.file_name().ok_or_else(|| escape(&rel))?;
        let mut tmp = tempfile_in(&real_parent).map_err(|e| Error::io(&rel, &e))?;
        let result = (|| -> std::io::Result<()> {
            tmp.1.write_all(content)?;
            tmp.1.flush()?;
            if let Some(meta) = &existing {
                tmp.1.set_permissions(meta.permissions())?;
            }
            tmp.1.sync_all()?;
            std::fs::rename(&tmp.0, real_parent.join(name))?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp.0);
            return Err(Error::io(&rel, &e));
        }
        tmp.0 = PathBuf::new();
        Ok(())
    }

    pub(super) fn stat_sync(&self, path: &str) -> Result<Option<Stat>> {
        let host = match self.resolve(path) {
            Ok((_, host)) => host,
            Err(e) => {
                // A link that dangles or leads out of the root is reported as the link it is.
                if let Ok((_, own)) = self.resolve_nofollow(path) {
                    if let Ok(m) = std::fs::symlink_metadata(&own) {
                        if m.file_type().is_symlink() {
                            return Ok(Some(Stat {
                                kind: EntryType::Symlink,
                                size: m.len(),
                                modified_ms: modified_ms(&m),
                            }));
                        }
                    }
                }
                return Err(e);
            }
        };
        match std::fs::metadata(&host) {
            Ok(m) => Ok(Some(Stat { kind: entry_type(m.file_type()), size: m.len(), modified_ms: modified_ms(&m) })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                Ok(None)
            }
            Err(e) => Err(Error::io(path, &e)),
        }
    }

    pub(super) fn readdir_sync(&self, path: &str) -> Result<Vec<DirEntry>> {
        let (rel, host) = self.resolve(path)?;
        let meta = std::fs::metadata(&host).map_err(|e| Error::io(&rel, &e))?;
        if !meta.is_dir() {
            return Err(Error::new(Code::NotAFile, format!("Not a directory: {rel}")));
        }
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&host).map_err(|e| Error::io(&rel, &e))? {
            let entry = entry.map_err(|e| Error::io(&rel, &e))?;
            let kind = entry.file_type().map(entry_type).unwrap_or(EntryType::Other);
            out.push(DirEntry { name: entry.file_name().to_string_lossy().into_owned(), kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    pub(crate) fn mkdir_sync(&self, path: &str) -> Result<()> {
        let (rel, host) = self.resolve(path)?;
        std::fs::create_dir_all(&host).map_err(|e| Error::io(&rel, &e))?;
        let real = std::fs::canonicalize(&host).map_err(|e| Error::io(&rel, &e))?;
        if !real.starts_with(&self.inner.path) {
            return Err(escape(&rel));
        }
        Ok(())
    }

    pub(super) fn rm_sync(&self, path: &str, recursive: bool) -> Result<()> {
        let (rel, host) = self.resolve_nofollow(path)?;
        if rel == "." {
            return Err(Error::new(Code::Denied, "Refused: the workspace root itself cannot be removed."));
        }
        let meta = std::fs::symlink_metadata(&host).map_err(|e| Error::io(&rel, &e))?;
        let r = if meta.is_dir() {
            if recursive {
                std::fs::remove_dir_all(&host)
            } else {
                std::fs::remove_dir(&host)
            }
        } else {
            // A link is removed itself; its target is left alone.
            std::fs::remove_file(&host)
        };
        r.map_err(|e| Error::io(&rel, &e))
    }

    pub(super) fn host_dir(&self, path: &str) -> Result<PathBuf> {
        Ok(self.resolve(path)?.1)
    }
}

/// A new file next to the target, removed again if it is dropped before the rename.
struct TempFile(PathBuf, std::fs::File);
impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

fn tempfile_in(dir: &Path) -> std::io::Result<TempFile> {
    use rand::Rng;
    for _ in 0..16 {
        let suffix: u64 = rand::thread_rng().gen();
        // A fixed-length name: a target whose own name is near the 255-byte limit still works.
        let tmp = dir.join(format!(".corral-{suffix:016x}.tmp"));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok(TempFile(tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "cannot create a temp file"))
}

/// The modification time of a file's metadata, in milliseconds since the Unix epoch.
fn modified_ms(m: &std::fs::Metadata) -> Option<i64> {
    let t = m.modified().ok()?;
    Some(match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    })
}
