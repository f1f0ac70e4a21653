//! A directory on disk, confined by realpath.
//!
//! Every path is normalized first (`crate::path`), then resolved: the deepest part that exists is
//! resolved with realpath and must stay inside the root's own real path. A link whose target does
//! not exist is never followed. Writes go to a temp file in the same directory, are flushed and
//! renamed over the target, keeping the old file's permission bits; a read-only file is refused by
//! its mode bits (so a process running as root is refused too).

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{Caps, DirEntry, EntryType, FsProvider, Stat};
use crate::error::{Code, Error, Result};
use crate::path::{normalize, Flavor};

#[derive(Debug, Clone)]
pub struct LocalFs {
    root: PathBuf,
    flavor: Flavor,
}

fn entry_type(ft: std::fs::FileType) -> EntryType {
    if ft.is_symlink() {
        EntryType::Symlink
    } else if ft.is_dir() {
        EntryType::Directory
    } else if ft.is_file() {
        EntryType::File
    } else {
        EntryType::Other
    }
}

fn escape(path: &str) -> Error {
    Error::new(
        Code::OutsideWorkspace,
        format!("Path is outside the workspace: {path} (it leads through a link to a place outside the root)"),
    )
}

fn dangling(path: &str) -> Error {
    Error::new(
        Code::OutsideWorkspace,
        format!("Path is refused: {path} (it goes through a link whose target does not exist; such links are never followed)"),
    )
}

impl LocalFs {
    /// `root` must name an existing directory; it is resolved with realpath and never created.
    pub fn new(root: &str) -> Result<LocalFs> {
        if root.trim().is_empty() {
            return Err(Error::config("NodeWorkspace: root must be a non-empty path to an existing directory."));
        }
        let real = std::fs::canonicalize(root).map_err(|e| {
            Error::config(format!(
                "NodeWorkspace: root '{root}' cannot be resolved ({}); it must be an existing directory.",
                e.kind()
            ))
        })?;
        if !real.is_dir() {
            return Err(Error::config(format!("NodeWorkspace: root '{root}' is not a directory.")));
        }
        Ok(LocalFs { root: real, flavor: Flavor::native() })
    }

    /// The real, absolute root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    fn host(&self, rel: &str) -> PathBuf {
        if rel == "." {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    /// Workspace-relative form of a host path inside the root.
    fn relative(&self, host: &Path) -> Option<String> {
        let rest = host.strip_prefix(&self.root).ok()?;
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
                    let real = std::fs::canonicalize(cur).map_err(|_| dangling(rel))?;
                    if !real.starts_with(&self.root) {
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
    pub fn resolve(&self, path: &str) -> Result<(String, PathBuf)> {
        let rel = normalize(path, self.flavor)?;
        let real = self.real_host(&rel)?;
        Ok((rel, real))
    }

    /// Like `resolve`, but the last part is not followed (for `rm` and `stat` of a link itself).
    fn resolve_nofollow(&self, path: &str) -> Result<(String, PathBuf)> {
        let rel = normalize(path, self.flavor)?;
        if rel == "." {
            return Ok((rel, self.root.clone()));
        }
        let (parent, name) = match rel.rfind('/') {
            Some(i) => (&rel[..i], &rel[i + 1..]),
            None => (".", rel.as_str()),
        };
        let real_parent = self.real_host(parent)?;
        Ok((rel.clone(), real_parent.join(name)))
    }

    /// Workspace-relative real path of a host path (for links: where they lead).
    pub fn real_relative(&self, path: &str) -> Result<String> {
        let (rel, real) = self.resolve(path)?;
        self.relative(&real).ok_or_else(|| escape(&rel))
    }

    fn read_bytes_sync(&self, path: &str) -> Result<Vec<u8>> {
        let (rel, host) = self.resolve(path)?;
        let meta = std::fs::metadata(&host).map_err(|e| Error::io(&rel, &e))?;
        if meta.is_dir() {
            return Err(Error::new(Code::IsADirectory, format!("Is a directory: {rel}")));
        }
        std::fs::read(&host).map_err(|e| Error::io(&rel, &e))
    }

    fn write_bytes_sync(&self, path: &str, content: &[u8]) -> Result<()> {
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
        if !real_parent.starts_with(&self.root) {
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

#[cfg(unix)]
fn is_read_only(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o222 == 0
}

#[cfg(not(unix))]
fn is_read_only(meta: &std::fs::Metadata) -> bool {
    meta.permissions().readonly()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::spawn_blocking(f)
            .await
            .unwrap_or_else(|e| Err(Error::new(Code::Io, format!("internal error: {e}")))),
        Err(_) => f(),
    }
}

#[async_trait]
impl FsProvider for LocalFs {
    async fn read_file(&self, path: &str) -> Result<String> {
        let bytes = self.read_file_bytes(path).await?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    async fn write_file(&self, path: &str, content: &str) -> Result<()> {
        self.write_file_bytes(path, content.as_bytes()).await
    }

    async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.stat_sync(&path)).await
    }

    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.readdir_sync(&path)).await
    }

    async fn mkdir(&self, path: &str) -> Result<()> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.mkdir_sync(&path)).await
    }

    async fn rm(&self, path: &str, recursive: bool) -> Result<()> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.rm_sync(&path, recursive)).await
    }

    fn caps(&self) -> Caps {
        Caps { read_bytes: true, write_bytes: true, mode: cfg!(unix), real_path: true }
    }

    async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.read_bytes_sync(&path)).await
    }

    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        let (this, path, content) = (self.clone(), path.to_string(), content.to_vec());
        blocking(move || this.write_bytes_sync(&path, &content)).await
    }

    #[cfg(unix)]
    async fn get_mode(&self, path: &str) -> Result<u32> {
        use std::os::unix::fs::PermissionsExt;
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || {
            let (rel, host) = this.resolve(&path)?;
            let meta = std::fs::metadata(&host).map_err(|e| Error::io(&rel, &e))?;
            Ok(meta.permissions().mode() & 0o7777)
        })
        .await
    }

    #[cfg(unix)]
    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || {
            let (rel, host) = this.resolve(&path)?;
            std::fs::set_permissions(&host, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|e| Error::io(&rel, &e))
        })
        .await
    }

    async fn real_path(&self, path: &str) -> Result<String> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.real_relative(&path)).await
    }

    fn as_local(&self) -> Option<&LocalFs> {
        Some(self)
    }
}

impl LocalFs {
    fn stat_sync(&self, path: &str) -> Result<Option<Stat>> {
        let host = match self.resolve(path) {
            Ok((_, host)) => host,
            Err(e) => {
                // A link that dangles or leads out of the root is reported as the link it is.
                if let Ok((_, own)) = self.resolve_nofollow(path) {
                    if let Ok(m) = std::fs::symlink_metadata(&own) {
                        if m.file_type().is_symlink() {
                            return Ok(Some(Stat { kind: EntryType::Symlink, size: m.len() }));
                        }
                    }
                }
                return Err(e);
            }
        };
        match std::fs::metadata(&host) {
            Ok(m) => Ok(Some(Stat { kind: entry_type(m.file_type()), size: m.len() })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
                Ok(None)
            }
            Err(e) => Err(Error::io(path, &e)),
        }
    }

    fn readdir_sync(&self, path: &str) -> Result<Vec<DirEntry>> {
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

    fn mkdir_sync(&self, path: &str) -> Result<()> {
        let (rel, host) = self.resolve(path)?;
        std::fs::create_dir_all(&host).map_err(|e| Error::io(&rel, &e))?;
        let real = std::fs::canonicalize(&host).map_err(|e| Error::io(&rel, &e))?;
        if !real.starts_with(&self.root) {
            return Err(escape(&rel));
        }
        Ok(())
    }

    fn rm_sync(&self, path: &str, recursive: bool) -> Result<()> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, LocalFs) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("root/src")).unwrap();
        std::fs::write(dir.path().join("root/src/a.txt"), "hello").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        let fs = LocalFs::new(dir.path().join("root").to_str().unwrap()).unwrap();
        (dir, fs)
    }

    #[tokio::test]
    async fn reads_and_writes_inside() {
        let (_d, fs) = setup();
        assert_eq!(fs.read_file("src/a.txt").await.unwrap(), "hello");
        fs.write_file("new/deep/b.txt", "b").await.unwrap();
        assert_eq!(fs.read_file("new/deep/b.txt").await.unwrap(), "b");
        assert_eq!(fs.read_file("../secret.txt").await.unwrap_err().code, Code::OutsideWorkspace);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn links_cannot_escape() {
        let (d, fs) = setup();
        let root = d.path().join("root");
        std::os::unix::fs::symlink(d.path(), root.join("escape")).unwrap();
        std::os::unix::fs::symlink(d.path().join("nope"), root.join("dangling")).unwrap();
        std::os::unix::fs::symlink("src/a.txt", root.join("inside")).unwrap();
        assert_eq!(fs.read_file("escape/secret.txt").await.unwrap_err().code, Code::OutsideWorkspace);
        assert_eq!(fs.write_file("escape/new.txt", "x").await.unwrap_err().code, Code::OutsideWorkspace);
        assert!(!d.path().join("new.txt").exists());
        assert_eq!(fs.write_file("dangling", "x").await.unwrap_err().code, Code::OutsideWorkspace);
        assert_eq!(fs.stat("dangling").await.unwrap().unwrap().kind, EntryType::Symlink);
        assert_eq!(fs.stat("escape").await.unwrap().unwrap().kind, EntryType::Symlink);
        assert!(!d.path().join("nope").exists());
        assert_eq!(fs.read_file("inside").await.unwrap(), "hello");
        assert_eq!(fs.real_path("inside").await.unwrap(), "src/a.txt");
        fs.rm("escape", false).await.unwrap();
        assert!(d.path().join("secret.txt").exists());
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn keeps_mode_and_refuses_read_only() {
        use std::os::unix::fs::PermissionsExt;
        let (d, fs) = setup();
        let p = d.path().join("root/src/a.txt");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o751)).unwrap();
        fs.write_file("src/a.txt", "new").await.unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o751);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert_eq!(fs.write_file("src/a.txt", "nope").await.unwrap_err().code, Code::ReadOnly);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        let leftovers: Vec<_> = std::fs::read_dir(d.path().join("root/src")).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
    }

    #[test]
    fn bad_roots_are_configuration_errors() {
        assert_eq!(LocalFs::new("").unwrap_err().code, Code::Configuration);
        assert_eq!(LocalFs::new("/definitely/not/here").unwrap_err().code, Code::Configuration);
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(LocalFs::new(f.path().to_str().unwrap()).unwrap_err().code, Code::Configuration);
    }
}
