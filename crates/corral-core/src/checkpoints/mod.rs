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

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::shown;

mod format;
mod rewind;
#[cfg(unix)]
mod shell;
mod store;

use format::*;
#[cfg(unix)]
pub use shell::ShellChange;
pub use store::{CheckpointStore, FileCheckpointStore, MemoryCheckpointStore};

pub const DEFAULT_MAX_TURNS: usize = 20;
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1_000_000;
/// How many bytes of backups one turn keeps of what commands changed (`maxTurnBytes`).
pub const DEFAULT_MAX_TURN_BYTES: u64 = 100_000_000;
/// The `format` field of a session's stored document.
pub const FORMAT: &str = "corral-checkpoints/1";

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
    /// A real rewind keeps the backups of the files it skipped (the reference forgets them), so a
    /// later forced rewind can still restore them (default false).
    pub keep_skipped: bool,
    /// The most bytes of backups a turn keeps of what commands changed; past it a change still
    /// applies but cannot be undone (default 100 MB).
    pub max_turn_bytes: u64,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions {
            max_turns: DEFAULT_MAX_TURNS,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            keep_skipped: false,
            max_turn_bytes: DEFAULT_MAX_TURN_BYTES,
        }
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
        let r = crate::options::Reader::new(
            "WorkspaceCheckpoints",
            v,
            &["store", "maxTurns", "maxFileBytes", "keepSkipped", "maxTurnBytes"],
        )?;
        Ok(CheckpointOptions {
            max_turns: r.int("maxTurns", DEFAULT_MAX_TURNS as u64, 1..=100_000)? as usize,
            max_file_bytes: r.int("maxFileBytes", DEFAULT_MAX_FILE_BYTES, 1..=1 << 32)?,
            keep_skipped: r.bool("keepSkipped", false)?,
            max_turn_bytes: r.int("maxTurnBytes", DEFAULT_MAX_TURN_BYTES, 0..=1 << 50)?,
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

pub struct Checkpoints {
    store: Arc<dyn CheckpointStore>,
    max_turns: usize,
    max_file_bytes: u64,
    keep_skipped: bool,
    /// Read by the checkpoints of commands' changes (unix only).
    #[cfg_attr(not(unix), allow(dead_code))]
    max_turn_bytes: u64,
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
            keep_skipped: options.keep_skipped,
            max_turn_bytes: options.max_turn_bytes,
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
        self.before_change(fs, session, turn, path, Some(new_content)).await
    }

    /// As `before_write`, for a change that deletes the file: rewind puts it back.
    pub async fn before_delete(&self, fs: &dyn FsProvider, session: &str, turn: u32, path: &str) -> Result<()> {
        self.before_change(fs, session, turn, path, None).await
    }

    /// Called after the deletion `before_delete` prepared succeeded.
    pub async fn after_delete(&self, session: &str, turn: u32, path: &str) -> Result<()> {
        self.after_change(session, turn, path, None).await
    }

    async fn before_change(
        &self,
        fs: &dyn FsProvider,
        session: &str,
        turn: u32,
        path: &str,
        new_content: Option<&[u8]>,
    ) -> Result<()> {
        let observed = self.observe(fs, path).await?;
        let from = match &observed {
            Observed::NotAFile => return Ok(()),
            Observed::Missing if new_content.is_none() => return Ok(()),
            Observed::File(bytes) if Some(bytes.as_slice()) == new_content => return Ok(()),
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
        let to = new_content.map_or_else(|| DELETED_MARK.to_string(), sha256);
        let record = WriteRecord { from, to, done: false };
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
                data.turns
                    .entry(turn)
                    .or_default()
                    .insert(path.to_string(), Backup { before, writes: vec![record], shell: false });
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
        self.after_change(session, turn, path, Some(written)).await
    }

    async fn after_change(&self, session: &str, turn: u32, path: &str, written: Option<&[u8]>) -> Result<()> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        let Some(record) =
            data.turns.get_mut(&turn).and_then(|files| files.get_mut(path)).and_then(|backup| backup.writes.last_mut())
        else {
            return Ok(()); // nothing was recorded (no change, or the turn was dropped)
        };
        let to = written.map_or_else(|| DELETED_MARK.to_string(), sha256);
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
        // Read no further than the limit (a file that grows meanwhile is not held), and checked
        // on what was read (a symlink's stat may give the link's own size).
        match crate::fs::read_within(fs, path, self.max_file_bytes).await {
            Ok(None) => Ok(Observed::TooLarge(stat.size.max(self.max_file_bytes + 1))),
            Ok(Some(bytes)) => Ok(Observed::File(bytes)),
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

#[cfg(test)]
mod tests;
