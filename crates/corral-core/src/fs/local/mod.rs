//! A directory on disk, confined to its root.
//!
//! Every path is normalized first (`crate::path`), then resolved below the root. On unix that is
//! done one component at a time relative to directory descriptors (`beneath`), and the operation
//! acts on the descriptor of the directory it found, so a directory swapped for a link while a
//! tool runs cannot lead it outside the root or, with a deny list (`denying`), into `.git`.
//! Elsewhere paths are resolved with realpath (`portable`). A link may lead anywhere inside the
//! root; a link whose target does not exist is never followed. Writes go to a temp file in the
//! same directory, are flushed and renamed over the target, keeping the old file's permission
//! bits; a read-only file is refused by its mode bits (so a process running as root is refused
//! too). A FIFO, socket or device is never opened for reading or writing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::{Caps, DirEntry, EntryType, FsProvider, Stat};
use crate::error::{Code, Error, Result};
use crate::path::Flavor;

#[cfg(unix)]
mod beneath;
#[cfg(target_os = "linux")]
pub(crate) use beneath::chmod_fd;
/// Used by the overlay's apply (Linux).
#[cfg(target_os = "linux")]
pub(crate) use beneath::open_no_links;
#[cfg(target_os = "linux")]
mod listings;
#[cfg(not(unix))]
mod portable;
#[cfg(unix)]
pub(crate) mod stamp;
#[cfg(unix)]
mod unix;

/// What a path holds, its last component not followed (`LocalFs::entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEntry {
    Missing,
    File {
        size: u64,
        mode: u32,
    },
    /// A symbolic link and its target.
    Link(Vec<u8>),
    Dir {
        mode: u32,
    },
    /// A device, socket or FIFO.
    Other,
}

#[derive(Debug)]
struct Root {
    /// The real, absolute root.
    path: PathBuf,
    /// The root, held open: every path is resolved below this descriptor.
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
    /// Shared by every `denying` view of this directory.
    guarded: super::GuardedDirs,
    /// Whether the root lies on a local disk's file system (`on_local_disk`).
    local_disk: bool,
}

#[derive(Debug, Clone)]
pub struct LocalFs {
    inner: Arc<Root>,
    flavor: Flavor,
    /// Names no resolved path may go through (the file tools' `deny`); empty for the provider
    /// itself.
    deny: Arc<[String]>,
}

/// The file systems of local disks and memory, whose directories also get a new ctime with every
/// change of their entries (the protected-name walks rely on that).
#[cfg(target_os = "linux")]
pub(crate) const TRUSTED: [i64; 7] = [
    0xEF53,     // ext2/3/4
    0x58465342, // XFS
    0x9123683E, // Btrfs
    0x01021994, // tmpfs
    0x794C7630, // overlayfs
    0xF2F52010, // F2FS
    0x2FC12FC1, // ZFS
];

/// The type of the file system the open file `fd` lies on (`statfs`'s `f_type`).
#[cfg(target_os = "linux")]
#[allow(clippy::unnecessary_cast)]
pub(crate) fn fs_type(fd: std::os::fd::BorrowedFd<'_>) -> Option<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed plain-data buffer for the kernel to fill; a valid descriptor.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstatfs(fd.as_raw_fd(), &mut fs) } == 0).then_some(fs.f_type as i64)
}

#[cfg(target_os = "linux")]
fn on_local_disk(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsFd;
    fs_type(fd.as_fd()).is_some_and(|t| TRUSTED.contains(&t))
}

#[cfg(all(unix, not(target_os = "linux")))]
fn on_local_disk(_fd: &std::os::fd::OwnedFd) -> bool {
    false
}

#[allow(dead_code)]
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
        #[cfg(unix)]
        let fd = beneath::open_root(&real)
            .map_err(|e| Error::config(format!("NodeWorkspace: root '{root}' cannot be opened ({}).", e.kind())))?;
        Ok(LocalFs {
            inner: Arc::new(Root {
                path: real,
                #[cfg(unix)]
                local_disk: on_local_disk(&fd),
                #[cfg(not(unix))]
                local_disk: false,
                #[cfg(unix)]
                fd,
                guarded: Default::default(),
            }),
            flavor: Flavor::native(),
            deny: Arc::from(Vec::new()),
        })
    }

    /// The same directory, refusing every path that really leads through one of `deny`'s names
    /// (checked on the resolved components, at the moment of the operation).
    pub fn denying(&self, deny: &[String]) -> LocalFs {
        LocalFs { inner: self.inner.clone(), flavor: self.flavor, deny: Arc::from(deny.to_vec()) }
    }

    /// Whether the root lies on a file system of a local disk or of memory (ext4, XFS, Btrfs,
    /// tmpfs, overlayfs, F2FS, ZFS), where metadata and a small read answer in microseconds from
    /// the cache. A network or FUSE file system can take any time to answer: `false`.
    pub fn on_local_disk(&self) -> bool {
        self.inner.local_disk
    }

    /// One value for this directory and every `denying` view of it.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// The real, absolute root.
    pub fn root(&self) -> &Path {
        &self.inner.path
    }

    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    /// A file's bytes when it holds at most `limit` of them (checked on the opened file, and
    /// read no further than one byte past it); `None` when it holds more.
    pub async fn read_bytes_within(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
        #[cfg(unix)]
        {
            let opened = self.open_regular_sync(path)?;
            if opened.size > limit {
                return Ok(None);
            }
            // As `read_file_bytes`: a small file is read in place, a larger one on the blocking
            // pool (the hop costs more than reading 64 KiB from the page cache).
            if opened.size <= INLINE_READ_BYTES {
                return opened.read_within(limit);
            }
            blocking(move || opened.read_within(limit)).await
        }
        #[cfg(not(unix))]
        {
            let (this, path) = (self.clone(), path.to_string());
            blocking(move || this.read_bytes_within_sync(&path, limit)).await
        }
    }

    /// Workspace-relative real path of a path (for links: where they lead).
    pub fn real_relative(&self, path: &str) -> Result<String> {
        self.real_relative_sync(path)
    }

    /// A directory to walk: its host path and its resolved workspace path.
    pub fn walk_root(&self, path: &str) -> Result<(PathBuf, String)> {
        #[cfg(unix)]
        {
            self.host_dir(path)
        }
        #[cfg(not(unix))]
        {
            let host = self.host_dir(path)?;
            let real = self.real_relative_sync(path)?;
            Ok((host, real))
        }
    }

    /// For each path a walk found (resolved workspace paths): whether it is still a regular file
    /// below the root, reached without a link. Paths grouped by directory are checked fastest.
    pub fn walked_files_present(&self, reals: &[&str]) -> Vec<bool> {
        #[cfg(unix)]
        {
            self.walked_present(reals)
        }
        #[cfg(not(unix))]
        {
            reals
                .iter()
                .map(|r| self.open_walked_file(r).is_ok_and(|f| f.metadata().is_ok_and(|m| m.is_file())))
                .collect()
        }
    }

    /// Opens a file a walk found, by its resolved workspace path, entering no link on the way.
    pub fn open_walked_file(&self, real: &str) -> std::io::Result<std::fs::File> {
        #[cfg(unix)]
        {
            self.open_walked(real)
        }
        #[cfg(not(unix))]
        {
            std::fs::File::open(self.inner.path.join(real))
        }
    }
}

#[cfg(not(unix))]
fn is_read_only(meta: &std::fs::Metadata) -> bool {
    meta.permissions().readonly()
}

/// Files up to this size are read without a hop to the blocking pool.
#[cfg(unix)]
const INLINE_READ_BYTES: u64 = 64 * 1024;

/// Directories whose size on disk is at most this (a few hundred entries on ext4, where a
/// directory of a few entries takes 4 KiB) are listed without a hop to the blocking pool.
#[cfg(unix)]
const INLINE_LIST_BYTES: u64 = 16 * 1024;

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
    fn guarded_dirs(&self) -> Option<&super::GuardedDirs> {
        Some(&self.inner.guarded)
    }
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
        // Metadata of a local path takes microseconds: asked in place, where a hop to the
        // blocking pool and back (a thread wake-up each way) would cost more than the call.
        self.stat_sync(path)
    }

    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        #[cfg(unix)]
        {
            // Opening is resolution, done in place; a small directory (its size on disk, what the
            // file system keeps its entries in) is listed in place too, a larger one on the
            // blocking pool: as with reads, the hop costs more than a few entries.
            let (dir, rel) = self.open_dir_sync(path)?;
            let size = nix::sys::stat::fstat(&dir).map(|st| st.st_size as u64).unwrap_or(u64::MAX);
            if size <= INLINE_LIST_BYTES {
                return LocalFs::list_opened(dir, &rel);
            }
            blocking(move || LocalFs::list_opened(dir, &rel)).await
        }
        #[cfg(not(unix))]
        {
            let (this, path) = (self.clone(), path.to_string());
            blocking(move || this.readdir_sync(&path)).await
        }
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
        #[cfg(unix)]
        {
            // Opening is resolution and metadata, done in place; a small file is read in place
            // too (a hop to the blocking pool and back costs more than reading 64 KiB from the
            // page cache), a larger one on the blocking pool.
            let opened = self.open_regular_sync(path)?;
            if opened.size <= INLINE_READ_BYTES {
                return opened.read_all();
            }
            blocking(move || opened.read_all()).await
        }
        #[cfg(not(unix))]
        {
            let (this, path) = (self.clone(), path.to_string());
            blocking(move || this.read_bytes_sync(&path)).await
        }
    }

    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        let (this, path, content) = (self.clone(), path.to_string(), content.to_vec());
        blocking(move || this.write_bytes_sync(&path, &content)).await
    }

    #[cfg(unix)]
    async fn get_mode(&self, path: &str) -> Result<u32> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.get_mode_sync(&path)).await
    }

    #[cfg(unix)]
    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        let (this, path) = (self.clone(), path.to_string());
        blocking(move || this.chmod_sync(&path, mode)).await
    }

    async fn real_path(&self, path: &str) -> Result<String> {
        // Resolving a local path is metadata only, as for `stat`.
        self.real_relative_sync(path)
    }

    fn as_local(&self) -> Option<&LocalFs> {
        Some(self)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod race_tests;

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

    #[test]
    fn walked_files_present_answers_each_path_in_order_however_many() {
        let (d, fs) = setup();
        let root = d.path().join("root");
        // Enough paths to be checked on several threads; every third one missing, a directory,
        // or behind a link.
        let mut reals = Vec::new();
        let mut want = Vec::new();
        for i in 0..6000 {
            let dir = format!("d{}", i / 100);
            std::fs::create_dir_all(root.join(&dir)).unwrap();
            let p = format!("{dir}/f{i}");
            match i % 3 {
                0 => {
                    std::fs::write(root.join(&p), "x").unwrap();
                    want.push(true);
                }
                1 if i % 2 == 0 => {
                    std::fs::create_dir(root.join(&p)).unwrap();
                    want.push(false);
                }
                _ => want.push(false),
            }
            reals.push(p);
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("d0"), root.join("link")).unwrap();
            reals.push("link/f0".into());
            want.push(false);
        }
        let got = fs.walked_files_present(&reals.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(got, want);
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

    /// On every platform's implementation (descriptors on unix, realpath on Windows): a denied
    /// name is refused however it is spelled, and through a link that leads into it.
    #[tokio::test]
    async fn a_denied_name_is_refused_however_it_is_reached() {
        let (d, fs) = setup();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]").unwrap();
        let fs = fs.denying(&[".git".to_string()]);
        for path in [".git/config", ".GIT/config", "src/../.git/config", ".git"] {
            assert_eq!(fs.read_file(path).await.unwrap_err().code, Code::Denied, "{path}");
        }
        assert_eq!(fs.write_file(".git/config", "x").await.unwrap_err().code, Code::Denied);
        assert_eq!(fs.rm(".git", true).await.unwrap_err().code, Code::Denied);
        #[cfg(unix)]
        let linked = std::os::unix::fs::symlink(".git", root.join("g"));
        // A link needs a privilege on Windows; without it that half is not run.
        #[cfg(windows)]
        let linked = std::os::windows::fs::symlink_dir(root.join(".git"), root.join("g"));
        if linked.is_ok() {
            assert_eq!(fs.read_file("g/config").await.unwrap_err().code, Code::Denied);
            assert_eq!(fs.write_file("g/config", "x").await.unwrap_err().code, Code::Denied);
        }
        assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), "[core]");
    }

    #[test]
    fn bad_roots_are_configuration_errors() {
        assert_eq!(LocalFs::new("").unwrap_err().code, Code::Configuration);
        assert_eq!(LocalFs::new("/definitely/not/here").unwrap_err().code, Code::Configuration);
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(LocalFs::new(f.path().to_str().unwrap()).unwrap_err().code, Code::Configuration);
    }
}
