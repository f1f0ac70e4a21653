//! Where the backups live: the store interface, in memory, and one JSON file per session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::error::{Code, Error, Result};
use crate::path::shown;

/// Where the backups live: one JSON document per session. The JS `WorkspaceCheckpointStore`
/// (`load(sessionId)`, `save(sessionId, data)`, `delete(sessionId)`) implements it in the binding.
#[async_trait]
pub trait CheckpointStore: Send + Sync {
    /// The document last saved for the session, `None` when there is none.
    async fn load(&self, session_id: &str) -> Result<Option<serde_json::Value>>;
    /// Replaces the session's document; it must be durable when this returns.
    async fn save(&self, session_id: &str, data: serde_json::Value) -> Result<()>;
    /// Forgets the session; no error when there is nothing to forget.
    async fn delete(&self, session_id: &str) -> Result<()>;
}

/// The default store: documents in memory, gone with the process.
#[derive(Debug, Default)]
pub struct MemoryCheckpointStore {
    sessions: std::sync::Mutex<HashMap<String, serde_json::Value>>,
}

impl MemoryCheckpointStore {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl CheckpointStore for MemoryCheckpointStore {
    async fn load(&self, session_id: &str) -> Result<Option<serde_json::Value>> {
        Ok(self.sessions.lock().unwrap().get(session_id).cloned())
    }
    async fn save(&self, session_id: &str, data: serde_json::Value) -> Result<()> {
        self.sessions.lock().unwrap().insert(session_id.to_string(), data);
        Ok(())
    }
    async fn delete(&self, session_id: &str) -> Result<()> {
        self.sessions.lock().unwrap().remove(session_id);
        Ok(())
    }
}

/// One JSON file per session in a directory (created when first needed), written atomically:
/// a temp file in the same directory, fsync, rename, then fsync of the directory.
#[derive(Debug, Clone)]
pub struct FileCheckpointStore {
    dir: PathBuf,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn store_error(session_id: &str, what: &str, err: &std::io::Error) -> Error {
    Error::new(Code::Io, format!("Checkpoint store could not {what} session {}: {}", shown(session_id), err.kind()))
}

impl FileCheckpointStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileCheckpointStore { dir: dir.into() }
    }

    /// `new FileWorkspaceCheckpointStore(dir)`: `dir` a non-empty path.
    pub fn from_option(dir: &serde_json::Value) -> crate::error::Result<Self> {
        match dir.as_str() {
            Some(d) if !d.is_empty() => Ok(FileCheckpointStore::new(d)),
            _ => Err(crate::error::Error::config("FileWorkspaceCheckpointStore: dir must be a directory path.")),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a session is kept in: `[a-z0-9_-]` from the id (at most 40 of them, lowercased),
    /// a dash, and 16 hex digits of the id's SHA-256, so any id gives a distinct, safe name on
    /// every platform (case-insensitive file systems included).
    pub fn file_name(session_id: &str) -> String {
        let readable: String = session_id
            .chars()
            .filter_map(|c| {
                let c = c.to_ascii_lowercase();
                (c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-').then_some(c)
            })
            .take(40)
            .collect();
        let digest = hex::encode(Sha256::digest(session_id.as_bytes()));
        format!("{readable}-{}.json", &digest[..16])
    }

    fn path_of(&self, session_id: &str) -> PathBuf {
        self.dir.join(Self::file_name(session_id))
    }
}

#[async_trait]
impl CheckpointStore for FileCheckpointStore {
    async fn load(&self, session_id: &str) -> Result<Option<serde_json::Value>> {
        let bytes = match tokio::fs::read(self.path_of(session_id)).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(store_error(session_id, "read", &e)),
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|_| {
            Error::new(
                Code::Io,
                format!("Checkpoint store: the file of session {} is not valid JSON.", shown(session_id)),
            )
        })
    }

    async fn save(&self, session_id: &str, data: serde_json::Value) -> Result<()> {
        let bytes = serde_json::to_vec(&data).map_err(|e| Error::new(Code::Io, e.to_string()))?;
        let dir = self.dir.clone();
        let name = Self::file_name(session_id);
        let id = session_id.to_string();
        tokio::task::spawn_blocking(move || write_atomically(&dir, &name, &bytes))
            .await
            .map_err(|e| Error::new(Code::Io, format!("Checkpoint store: {e}")))?
            .map_err(|e| store_error(&id, "save", &e))
    }

    async fn delete(&self, session_id: &str) -> Result<()> {
        match tokio::fs::remove_file(self.path_of(session_id)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(store_error(session_id, "delete", &e)),
        }
    }
}

fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, dir.join(name))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // Make the rename itself durable (not possible on Windows, where a directory cannot be opened).
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}
