//! The file-system provider interface every tool stands on, and its implementations:
//! `local` (a directory on disk, confined by realpath) and `memory` (an in-memory tree).
//! A provider written in JavaScript implements the same trait in the binding.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::{Code, Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryType {
    File,
    Directory,
    Symlink,
    Other,
}

impl EntryType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::File => "file",
            EntryType::Directory => "directory",
            EntryType::Symlink => "symlink",
            EntryType::Other => "other",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "file" => EntryType::File,
            "directory" => EntryType::Directory,
            "symlink" => EntryType::Symlink,
            "other" => EntryType::Other,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub kind: EntryType,
    pub size: u64,
    /// The last modification, in milliseconds since the Unix epoch, where the provider knows it.
    pub modified_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryType,
}

/// Which optional methods a provider has (index.d.ts `FsProvider`: `readFileBytes`, `getMode`/`chmod`, `realPath`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    pub read_bytes: bool,
    pub write_bytes: bool,
    pub mode: bool,
    pub real_path: bool,
}

fn unsupported(what: &str) -> Error {
    Error::new(Code::Io, format!("This provider has no {what}."))
}

/// A whole file's bytes when it holds at most `limit` of them, `None` when it holds more. On disk
/// the limit is checked on the opened file and nothing past it is read, so a file a command grows
/// between a caller's check and the read never makes this process hold it; another provider's
/// bytes are checked once read (a provider that reads text only gives its text's bytes).
pub async fn read_within(fs: &dyn FsProvider, path: &str, limit: u64) -> Result<Option<Vec<u8>>> {
    if let Some(local) = fs.as_local() {
        return local.read_bytes_within(path, limit).await;
    }
    let bytes =
        if fs.caps().read_bytes { fs.read_file_bytes(path).await? } else { fs.read_file(path).await?.into_bytes() };
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Paths are workspace-relative with `/` separators. Every implementation confines them itself
/// (a custom tool may call it directly), and reports failures as workspace errors that name the
/// workspace path, never a host path.
#[async_trait]
pub trait FsProvider: Send + Sync {
    async fn read_file(&self, path: &str) -> Result<String>;
    /// Creates missing parent directories.
    async fn write_file(&self, path: &str, content: &str) -> Result<()>;
    async fn stat(&self, path: &str) -> Result<Option<Stat>>;
    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>>;
    /// Recursive; no error when the directory exists.
    async fn mkdir(&self, path: &str) -> Result<()>;
    async fn rm(&self, path: &str, recursive: bool) -> Result<()>;

    fn caps(&self) -> Caps {
        Caps::default()
    }
    async fn read_file_bytes(&self, _path: &str) -> Result<Vec<u8>> {
        Err(unsupported("readFileBytes"))
    }
    async fn write_file_bytes(&self, _path: &str, _content: &[u8]) -> Result<()> {
        Err(unsupported("writeFileBytes"))
    }
    async fn get_mode(&self, _path: &str) -> Result<u32> {
        Err(unsupported("getMode"))
    }
    async fn chmod(&self, _path: &str, _mode: u32) -> Result<()> {
        Err(unsupported("chmod"))
    }
    /// Where the path really leads, workspace-relative (links resolved).
    async fn real_path(&self, _path: &str) -> Result<String> {
        Err(unsupported("realPath"))
    }

    /// The directories of this provider the file tools must not write (the shell tool's spill
    /// directory); `None` for a provider that keeps none, where no spill directory is guarded.
    fn guarded_dirs(&self) -> Option<&GuardedDirs> {
        None
    }

    /// Native fast paths: the search engine walks a local directory in parallel, and an
    /// in-memory tree without going through the async interface.
    fn as_local(&self) -> Option<&crate::fs::local::LocalFs> {
        None
    }
    fn as_memory(&self) -> Option<&crate::fs::memory::MemoryFs> {
        None
    }
}

/// Directories of a provider that the file tools refuse to write, held by the provider itself so
/// they live and die with it (a directory on disk shares one set among all its views).
#[derive(Debug, Default)]
pub struct GuardedDirs(std::sync::Mutex<Vec<String>>);

impl GuardedDirs {
    pub fn add(&self, dir: &str) {
        let mut dirs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_string());
        }
    }

    pub fn list(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub mod local;
pub mod memory;
