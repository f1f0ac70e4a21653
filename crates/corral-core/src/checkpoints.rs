//! Checkpoints: undo what the agent did to the files.
//!
//! `write_file`/`edit_file` call [`Checkpoints::before_write`] before they write a file and
//! [`Checkpoints::after_write`] once the write succeeded. Before the first write of a path in a
//! turn, the old content (bytes when the provider reads bytes, else text; permission bits when it
//! has `getMode`/`chmod`) is saved to a [`CheckpointStore`] under the session and turn, before the
//! file is touched. [`Checkpoints::rewind`] puts every file changed in a turn or later back as it
//! was before that turn.
//!
//! # Stored format
//!
//! One JSON document per session, given to [`CheckpointStore::save`] and read back by
//! [`CheckpointStore::load`]:
//!
//! ```json
//! {
//!   "format": "corral-checkpoints/1",
//!   "droppedThrough": 3,
//!   "turns": {
//!     "4": {
//!       "notes.md": {
//!         "before": { "state": "file", "encoding": "utf8", "content": "# Notes\n",
//!                     "sha256": "…", "mode": 420 },
//!         "writes": [ { "from": "<sha256 of the old content>", "to": "<sha256 written>", "done": true },
//!                     { "from": "…", "to": "…", "done": false } ]
//!       },
//!       "todo.md": { "before": { "state": "missing" }, "writes": [ { "from": null, "to": "…", "done": true } ] },
//!       "big.bin": { "before": { "state": "too-large", "size": 5000000 }, "writes": [ … ] }
//!     }
//!   }
//! }
//! ```
//!
//! - `turns` maps a turn number (as a string: JSON keys are strings) to the paths it wrote.
//! - `before` is the file as it was before the turn's first write of the path: `missing` (the
//!   file did not exist), `file` (its content, `encoding` `utf8` for UTF-8 text stored as is,
//!   `base64` for anything else; its SHA-256; `mode` only when the provider has `getMode`), or
//!   `too-large` (over `maxFileBytes`: no content kept, never restored or deleted).
//! - `writes` is the audit trail, one record per write of the path in that turn: the SHA-256 of
//!   the content before it (`null` for a missing file, `"too-large"` for one not read) and of the
//!   content written. `done` is `false` from `before_write` until `after_write` confirms the write;
//!   a record that stays `false` (the process died, the write failed) means the file may hold
//!   either `from` or `to`.
//! - `droppedThrough` is the newest turn dropped to keep only `maxTurns` turns; a rewind to it or
//!   an older turn is refused.
//!
//! File content lives only in the store: [`RewindReport`] and [`TurnChanges`] carry paths only.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::shown;

pub const DEFAULT_MAX_TURNS: usize = 20;
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1_000_000;
/// The `format` field of a session's stored document.
pub const FORMAT: &str = "corral-checkpoints/1";

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

// ---------------------------------------------------------------------------------------------
// The stored document

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionData {
    format: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dropped_through: Option<u32>,
    #[serde(default)]
    turns: BTreeMap<u32, BTreeMap<String, Backup>>,
}

impl SessionData {
    fn new() -> Self {
        SessionData { format: FORMAT.to_string(), dropped_through: None, turns: BTreeMap::new() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Backup {
    before: Before,
    writes: Vec<WriteRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Encoding {
    Utf8,
    Base64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
enum Before {
    Missing,
    File {
        encoding: Encoding,
        content: String,
        sha256: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<u32>,
    },
    TooLarge {
        size: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct WriteRecord {
    from: Option<String>,
    to: String,
    done: bool,
}

const TOO_LARGE_MARK: &str = "too-large";

impl Before {
    fn file(bytes: Vec<u8>, mode: Option<u32>) -> Before {
        let sha256 = sha256(&bytes);
        let (encoding, content) = match String::from_utf8(bytes) {
            Ok(text) => (Encoding::Utf8, text),
            Err(e) => (Encoding::Base64, base64_encode(e.as_bytes())),
        };
        Before::File { encoding, content, sha256, mode }
    }
}

fn decode_content(path: &str, encoding: Encoding, content: &str) -> Result<Vec<u8>> {
    match encoding {
        Encoding::Utf8 => Ok(content.as_bytes().to_vec()),
        Encoding::Base64 => base64_decode(content)
            .ok_or_else(|| Error::new(Code::Io, format!("The checkpoint of {} is corrupt (bad base64).", shown(path)))),
    }
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (chunk[0] as u32) << 16 | (b1 as u32) << 8 | b2 as u32;
        out.push(BASE64[(n >> 18) as usize & 63] as char);
        out.push(BASE64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { BASE64[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { BASE64[n as usize & 63] as char } else { '=' });
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let groups = bytes.len() / 4;
    let mut out = Vec::with_capacity(groups * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i + 1 != groups) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = n << 6 | value(c)?;
        }
        n <<= 6 * pad as u32;
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Public results

/// Why a rewind left a path alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// The file is no longer what the agent last wrote there (`force` restores it anyway).
    ChangedSince,
    /// The path exists but is not a file (a directory, say).
    NotAFile,
    /// Over `max_file_bytes`: never copied, deleted or restored.
    TooLarge,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::ChangedSince => "changed-since",
            SkipReason::NotAFile => "not-a-file",
            SkipReason::TooLarge => "too-large",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedPath {
    pub path: String,
    pub reason: SkipReason,
}

/// What a rewind did (or, with `dry_run`, would do). Paths only, sorted; never content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RewindReport {
    pub dry_run: bool,
    pub restored: Vec<String>,
    pub deleted: Vec<String>,
    pub skipped: Vec<SkippedPath>,
}

/// One turn with changes, as `list` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnChanges {
    pub turn: u32,
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointOptions {
    /// How many turns of a session are kept, the newest ones (default 20, at least 1).
    pub max_turns: usize,
    /// Files larger than this are not copied, and never restored or deleted (default 1,000,000).
    pub max_file_bytes: u64,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions { max_turns: DEFAULT_MAX_TURNS, max_file_bytes: DEFAULT_MAX_FILE_BYTES }
    }
}

/// The options of `list`, `rewind` and `clear`: `{ sessionId?, dryRun?, force? }` (the last two
/// for `rewind` only); `sessionId` defaults to `'default'`, as the tools' context does. A wrong
/// type is an `InvalidArguments` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOptions {
    pub session: String,
    pub dry_run: bool,
    pub force: bool,
}

impl CallOptions {
    pub fn from_options(method: &'static str, v: &serde_json::Value) -> Result<CallOptions> {
        let known: &[&str] = if method == "rewind" { &["sessionId", "dryRun", "force"] } else { &["sessionId"] };
        let args = |e: Error| Error::new(Code::InvalidArguments, e.message);
        let r = crate::options::Reader::new(method, v, known).map_err(args)?;
        Ok(CallOptions {
            session: r.string("sessionId").map_err(args)?.unwrap_or_else(|| "default".to_string()),
            dry_run: r.bool("dryRun", false).map_err(args)?,
            force: r.bool("force", false).map_err(args)?,
        })
    }

    /// `rewind`'s `toTurn`: a non-negative integer.
    pub fn turn(v: &serde_json::Value) -> Result<u32> {
        v.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u32::MAX as f64).map(|f| f as u32).ok_or_else(
            || Error::new(Code::InvalidArguments, "rewind: toTurn must be a turn number (a non-negative integer)."),
        )
    }
}

impl CheckpointOptions {
    /// `WorkspaceCheckpoints`'s options (the store is attached by the binding).
    pub fn from_options(v: &serde_json::Value) -> Result<CheckpointOptions> {
        let r = crate::options::Reader::new("WorkspaceCheckpoints", v, &["store", "maxTurns", "maxFileBytes"])?;
        Ok(CheckpointOptions {
            max_turns: r.int("maxTurns", DEFAULT_MAX_TURNS as u64, 1..=100_000)? as usize,
            max_file_bytes: r.int("maxFileBytes", DEFAULT_MAX_FILE_BYTES, 1..=1 << 32)?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

/// A file as found on the provider.
enum Observed {
    Missing,
    NotAFile,
    TooLarge(u64),
    File(Vec<u8>),
    /// A text-only provider could not read it as UTF-8.
    NotText,
}

enum Action {
    Delete,
    Write { bytes: Vec<u8>, mode: Option<u32> },
}

pub struct Checkpoints {
    store: Arc<dyn CheckpointStore>,
    max_turns: usize,
    max_file_bytes: u64,
    /// Sessions loaded from the store, kept in step with it, each behind its own lock: every
    /// change is a load-modify-save of a session's document and a rewind runs start to end under
    /// it, while a store that never settles for one session blocks only that session. The map's
    /// own lock is never held across an await.
    sessions: std::sync::Mutex<HashMap<String, Arc<Mutex<Option<SessionData>>>>>,
}

impl Checkpoints {
    pub fn new(store: Arc<dyn CheckpointStore>, options: CheckpointOptions) -> Result<Self> {
        if options.max_turns == 0 {
            return Err(Error::config("maxTurns must be at least 1."));
        }
        Ok(Checkpoints {
            store,
            max_turns: options.max_turns,
            max_file_bytes: options.max_file_bytes,
            sessions: std::sync::Mutex::new(HashMap::new()),
        })
    }

    /// The defaults: a [`MemoryCheckpointStore`], 20 turns, 1,000,000 bytes.
    pub fn in_memory() -> Self {
        Checkpoints::new(Arc::new(MemoryCheckpointStore::new()), CheckpointOptions::default())
            .expect("the default options are valid")
    }

    pub fn max_turns(&self) -> usize {
        self.max_turns
    }

    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// Called by `write_file`/`edit_file` before writing `new_content` to `path` (normalized).
    ///
    /// Records nothing when the file already holds `new_content`, or when the path is not a file
    /// (the write will fail). On the turn's first write of the path it records the old content
    /// (or "did not exist", or "too large"), with the permission bits when the provider has them;
    /// a later write of the path in the same turn, or a re-run of a call after a crash, keeps that
    /// first backup and adds only a hash. The store has the backup when this returns; an error
    /// means nothing was recorded and the caller must not write.
    pub async fn before_write(
        &self,
        fs: &dyn FsProvider,
        session: &str,
        turn: u32,
        path: &str,
        new_content: &[u8],
    ) -> Result<()> {
        let observed = self.observe(fs, path).await?;
        let from = match &observed {
            Observed::NotAFile => return Ok(()),
            Observed::File(bytes) if bytes.as_slice() == new_content => return Ok(()),
            Observed::NotText => {
                return Err(Error::new(
                    Code::NotUtf8,
                    format!(
                        "Cannot back up {} before writing it: it is not UTF-8 text and the provider cannot read bytes.",
                        shown(path)
                    ),
                ))
            }
            Observed::Missing => None,
            Observed::TooLarge(_) => Some(TOO_LARGE_MARK.to_string()),
            Observed::File(bytes) => Some(sha256(bytes)),
        };
        let record = WriteRecord { from, to: sha256(new_content), done: false };
        let mode = match &observed {
            Observed::File(_) if fs.caps().mode => Some(fs.get_mode(path).await? & 0o777),
            _ => None,
        };

        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        match data.turns.get_mut(&turn).and_then(|files| files.get_mut(path)) {
            Some(backup) => {
                if backup.writes.last() == Some(&record) {
                    return Ok(()); // the same call run again: already recorded
                }
                backup.writes.push(record);
            }
            None => {
                let before = match observed {
                    Observed::Missing => Before::Missing,
                    Observed::TooLarge(size) => Before::TooLarge { size },
                    Observed::File(bytes) => Before::file(bytes, mode),
                    Observed::NotAFile | Observed::NotText => unreachable!("returned above"),
                };
                data.turns.entry(turn).or_default().insert(path.to_string(), Backup { before, writes: vec![record] });
            }
        }
        self.commit(&mut sessions, session).await
    }

    /// Called when the write that `before_write` prepared failed (the provider refused it): the
    /// file is as it was, so the record is taken back, and a turn left with no change disappears.
    pub async fn write_failed(&self, session: &str, turn: u32, path: &str) -> Result<()> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        let Some(files) = data.turns.get_mut(&turn) else { return Ok(()) };
        if let Some(backup) = files.get_mut(path) {
            if backup.writes.last().is_some_and(|r| !r.done) {
                backup.writes.pop();
            }
            if backup.writes.is_empty() {
                files.remove(path);
            }
        }
        if files.is_empty() {
            data.turns.remove(&turn);
        }
        self.commit(&mut sessions, session).await
    }

    /// Called after the write succeeded, with the content now in the file: rewind then expects
    /// exactly this content, and reports anything else as changed since.
    pub async fn after_write(&self, session: &str, turn: u32, path: &str, written: &[u8]) -> Result<()> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        let Some(record) =
            data.turns.get_mut(&turn).and_then(|files| files.get_mut(path)).and_then(|backup| backup.writes.last_mut())
        else {
            return Ok(()); // nothing was recorded (no change, or the turn was dropped)
        };
        let to = sha256(written);
        if record.done && record.to == to {
            return Ok(());
        }
        record.to = to;
        record.done = true;
        // Only a write that happened counts toward maxTurns: the oldest turns go once it is known.
        while data.turns.len() > self.max_turns {
            if let Some((dropped, _)) = data.turns.pop_first() {
                data.dropped_through = Some(data.dropped_through.map_or(dropped, |d| d.max(dropped)));
            }
        }
        self.commit(&mut sessions, session).await
    }

    /// The turns with changes, ascending, and the paths each changed, sorted.
    pub async fn list(&self, session: &str) -> Result<Vec<TurnChanges>> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        Ok(data
            .turns
            .iter()
            .filter(|(_, files)| !files.is_empty())
            .map(|(&turn, files)| TurnChanges { turn, paths: files.keys().cloned().collect() })
            .collect())
    }

    /// Puts every file changed in turn `to_turn` or later back as it was before `to_turn`.
    ///
    /// Every path is checked before anything is written. A file that did not exist is deleted, any
    /// other gets its content (and mode, when the provider has `chmod`) back; a file already as it
    /// was is left alone and not reported. Skipped: `changed-since` (not what the agent last wrote,
    /// unless `force`), `not-a-file`, `too-large`. With `dry_run` nothing changes; otherwise the
    /// backups of the rewound turns are forgotten, skipped files' included. Rewinding to a turn
    /// dropped by `max_turns` is an `InvalidArguments` error.
    pub async fn rewind(
        &self,
        fs: &dyn FsProvider,
        session: &str,
        to_turn: u32,
        dry_run: bool,
        force: bool,
    ) -> Result<RewindReport> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        if let Some(dropped) = data.dropped_through.filter(|&d| to_turn <= d) {
            let kept: Vec<String> = data.turns.keys().map(u32::to_string).collect();
            let kept = if kept.is_empty() { "none".to_string() } else { kept.join(", ") };
            return Err(Error::new(
                Code::InvalidArguments,
                format!(
                    "Cannot rewind to turn {to_turn}: only the newest {} turns of a session are kept, and turns up to {dropped} were dropped (kept: {kept}). Rewind to turn {} or later.",
                    self.max_turns,
                    dropped.saturating_add(1)
                ),
            ));
        }

        // Per path: the earliest backup at or after to_turn (what to put back) and the latest (what
        // the agent last wrote).
        let mut per_path: BTreeMap<&str, (&Backup, &Backup)> = BTreeMap::new();
        for files in data.turns.range(to_turn..).map(|(_, files)| files) {
            for (path, backup) in files {
                per_path.entry(path.as_str()).or_insert((backup, backup)).1 = backup;
            }
        }

        // The store may have been edited (a file store lives where the agent can write): every
        // path must be one the file tools could write, and on disk the writes are refused where
        // they would really lead into `.git`, as the tools' are.
        let deny = crate::path::default_deny();
        for &path in per_path.keys() {
            let norm = crate::path::normalize(path, crate::path::Flavor::native())?;
            if norm != path {
                return Err(Error::new(
                    Code::InvalidArguments,
                    format!("The checkpoint store holds a path that is not a workspace path: {}", shown(path)),
                ));
            }
            crate::path::check_denied(path, &deny)?;
        }
        let guarded;
        let fs: &dyn FsProvider = match fs.as_local() {
            Some(local) => {
                guarded = local.denying(&deny);
                &guarded
            }
            None => fs,
        };
        let caps = fs.caps();
        let mut report = RewindReport { dry_run, ..RewindReport::default() };
        let mut actions: Vec<(String, Action)> = Vec::new();
        for (&path, &(first, last)) in &per_path {
            let skip =
                |report: &mut RewindReport, reason| report.skipped.push(SkippedPath { path: path.to_string(), reason });
            if let Before::TooLarge { .. } = first.before {
                skip(&mut report, SkipReason::TooLarge);
                continue;
            }
            let current = match self.observe(fs, path).await? {
                Observed::NotAFile => {
                    skip(&mut report, SkipReason::NotAFile);
                    continue;
                }
                Observed::TooLarge(_) => {
                    skip(&mut report, SkipReason::TooLarge);
                    continue;
                }
                Observed::Missing => None,
                Observed::File(bytes) => Some(sha256(&bytes)),
                Observed::NotText => Some("not-utf8".to_string()),
            };
            let target = match &first.before {
                Before::Missing => None,
                Before::File { sha256, .. } => Some(sha256.clone()),
                Before::TooLarge { .. } => unreachable!("skipped above"),
            };
            if current == target {
                continue; // already as it was: nothing to undo (a crash before the write, say)
            }
            // What the agent last wrote; while a write is unconfirmed the file may still hold
            // what it held before that write.
            let expected: Vec<Option<String>> = match last.writes.last() {
                Some(w) if w.done => vec![Some(w.to.clone())],
                Some(w) => vec![Some(w.to.clone()), w.from.clone()],
                None => vec![target.clone()],
            };
            if !force && !expected.contains(&current) {
                skip(&mut report, SkipReason::ChangedSince);
                continue;
            }
            match &first.before {
                Before::Missing => {
                    report.deleted.push(path.to_string());
                    actions.push((path.to_string(), Action::Delete));
                }
                Before::File { encoding, content, mode, .. } => {
                    let bytes = decode_content(path, *encoding, content)?;
                    if !caps.write_bytes && std::str::from_utf8(&bytes).is_err() {
                        return Err(Error::new(
                            Code::NotUtf8,
                            format!(
                                "Cannot restore {}: its backup is not UTF-8 text and the provider cannot write bytes.",
                                shown(path)
                            ),
                        ));
                    }
                    report.restored.push(path.to_string());
                    // Permission bits only: a stored setuid or sticky bit is never put back.
                    let mode = mode.filter(|_| caps.mode).map(|m| m & 0o777);
                    actions.push((path.to_string(), Action::Write { bytes, mode }));
                }
                Before::TooLarge { .. } => unreachable!("skipped above"),
            }
        }

        if dry_run || per_path.is_empty() {
            return Ok(report);
        }
        for (path, action) in actions {
            match action {
                Action::Delete => fs.rm(&path, false).await?,
                Action::Write { bytes, mode } => {
                    if caps.write_bytes {
                        fs.write_file_bytes(&path, &bytes).await?;
                    } else {
                        let text = String::from_utf8(bytes).expect("checked above");
                        fs.write_file(&path, &text).await?;
                    }
                    if let Some(mode) = mode {
                        fs.chmod(&path, mode).await?;
                    }
                }
            }
        }
        // Only now, with every file back: a rewind that failed half-way can be run again.
        data.turns.split_off(&to_turn);
        self.commit(&mut sessions, session).await?;
        Ok(report)
    }

    /// Forgets every backup of the session.
    pub async fn clear(&self, session: &str) -> Result<()> {
        let mut sessions = self.slot(session).await;
        *sessions = None;
        self.store.delete(session).await
    }

    async fn observe(&self, fs: &dyn FsProvider, path: &str) -> Result<Observed> {
        let Some(stat) = fs.stat(path).await? else {
            return Ok(Observed::Missing);
        };
        if matches!(stat.kind, EntryType::Directory | EntryType::Other) {
            return Ok(Observed::NotAFile);
        }
        if stat.size > self.max_file_bytes {
            return Ok(Observed::TooLarge(stat.size));
        }
        let read = if fs.caps().read_bytes {
            fs.read_file_bytes(path).await
        } else {
            fs.read_file(path).await.map(String::into_bytes)
        };
        match read {
            // A symlink's stat may give the link's own size: check what was read.
            Ok(bytes) if bytes.len() as u64 > self.max_file_bytes => Ok(Observed::TooLarge(bytes.len() as u64)),
            Ok(bytes) => Ok(Observed::File(bytes)),
            Err(e) => match e.code {
                Code::NotFound => Ok(Observed::Missing),
                Code::IsADirectory | Code::NotAFile => Ok(Observed::NotAFile),
                Code::NotUtf8 => Ok(Observed::NotText),
                _ => Err(e),
            },
        }
    }

    /// The session's lock, taken.
    async fn slot(&self, session: &str) -> tokio::sync::OwnedMutexGuard<Option<SessionData>> {
        let slot = self.sessions.lock().unwrap().entry(session.to_string()).or_default().clone();
        slot.lock_owned().await
    }

    /// The session's document, loaded from the store the first time.
    async fn session<'a>(&self, slot: &'a mut Option<SessionData>, session: &str) -> Result<&'a mut SessionData> {
        if slot.is_none() {
            *slot = Some(match self.store.load(session).await? {
                None => SessionData::new(),
                Some(value) => parse_session(session, value)?,
            });
        }
        Ok(slot.as_mut().expect("loaded above"))
    }

    /// Saves the session's document; when the store fails, the cached copy (already changed) is
    /// dropped so the next call reloads what the store really has.
    async fn commit(&self, slot: &mut Option<SessionData>, session: &str) -> Result<()> {
        let Some(data) = slot.as_ref() else { return Ok(()) };
        let result = match serde_json::to_value(data) {
            Ok(value) => self.store.save(session, value).await,
            Err(e) => Err(Error::new(Code::Io, format!("Cannot serialize checkpoints: {e}"))),
        };
        if result.is_err() {
            *slot = None;
        }
        result
    }
}

fn parse_session(session: &str, value: serde_json::Value) -> Result<SessionData> {
    let data: SessionData = serde_json::from_value(value).map_err(|e| {
        Error::new(
            Code::Io,
            format!("The checkpoint data of session {} is not in the expected format: {e}", shown(session)),
        )
    })?;
    if data.format != FORMAT {
        return Err(Error::new(
            Code::Io,
            format!(
                "The checkpoint data of session {} has format {:?}; this version reads {FORMAT:?}.",
                shown(session),
                data.format
            ),
        ));
    }
    Ok(data)
}

#[cfg(test)]
mod tests;
