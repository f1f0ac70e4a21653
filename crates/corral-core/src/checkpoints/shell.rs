//! What a command changed (overlay mode), recorded as the file tools' writes are, in one save
//! per command: before the first change of a path in a turn, the path as it was — a file, a
//! link, a directory or nothing — so a rewind puts back any of them. A turn keeps at most
//! `maxTurnBytes` of backed-up content; past it a change is recorded as too large (it still
//! applies, and cannot be undone).

use crate::error::{Code, Error, Result};
use crate::fs::local::{HostEntry, LocalFs};
use crate::fs::FsProvider;

use super::format::*;
use super::*;

/// One change a command is about to make at `path`: `to` is what will be there, as write
/// records name it (a file's SHA-256, `link:<SHA-256 of its target>`, `dir`, `deleted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellChange {
    pub path: String,
    pub to: String,
}

/// A path as a command's change finds it.
pub(super) enum Seen {
    Missing,
    File { bytes: Vec<u8>, mode: u32 },
    TooLarge(u64),
    Link(Vec<u8>),
    Dir(u32),
    Other,
}

impl ShellChange {
    /// A file whose content has this SHA-256 will be at `path`.
    pub fn file_digest(path: String, sha256: &[u8; 32]) -> ShellChange {
        ShellChange { path, to: hex::encode(sha256) }
    }

    /// A link to `target` will be at `path`.
    pub fn link(path: String, target: &[u8]) -> ShellChange {
        ShellChange { path, to: link_key(target) }
    }

    /// A directory will be at `path`.
    pub fn dir(path: String) -> ShellChange {
        ShellChange { path, to: DIR_MARK.to_string() }
    }

    /// Nothing will be at `path`.
    pub fn deleted(path: String) -> ShellChange {
        ShellChange { path, to: DELETED_MARK.to_string() }
    }
}

impl Seen {
    /// Its key, as write records name states (`None` for nothing there).
    pub(super) fn key(&self) -> Option<String> {
        match self {
            Seen::Missing => None,
            Seen::File { bytes, .. } => Some(sha256(bytes)),
            Seen::TooLarge(_) => Some(TOO_LARGE_MARK.to_string()),
            Seen::Link(target) => Some(link_key(target)),
            Seen::Dir(_) => Some(DIR_MARK.to_string()),
            Seen::Other => Some("other".to_string()),
        }
    }
}

pub(super) fn local(fs: &dyn FsProvider) -> Result<&LocalFs> {
    fs.as_local().ok_or_else(|| {
        Error::config(
            "The checkpoints of commands' changes need a NodeWorkspace (files, links and directories on this machine).",
        )
    })
}

impl Checkpoints {
    /// The path as it is, a link in its last component not followed.
    pub(super) async fn seen(&self, local: &LocalFs, path: &str) -> Result<Seen> {
        Ok(match local.entry_sync(path)? {
            HostEntry::Missing => Seen::Missing,
            HostEntry::File { size, .. } if size > self.max_file_bytes => Seen::TooLarge(size),
            HostEntry::File { size, mode } => match local.read_bytes_within(path, self.max_file_bytes).await {
                Ok(Some(bytes)) => Seen::File { bytes, mode },
                Ok(None) => Seen::TooLarge(size.max(self.max_file_bytes + 1)),
                Err(e) if e.code == Code::NotFound => Seen::Missing,
                Err(e) => return Err(e),
            },
            HostEntry::Link(target) => Seen::Link(target),
            HostEntry::Dir { mode } => Seen::Dir(mode),
            HostEntry::Other => Seen::Other,
        })
    }

    /// Called before a command's changes are applied, with every change it will make: the turn's
    /// first change of each path records the path as it is. Returns, per change, whether a rewind
    /// can undo it (not past `maxTurnBytes`, `maxFileBytes`, nor a device or socket). The store
    /// has the backups when this returns; an error means nothing was recorded and nothing may be
    /// applied.
    pub async fn before_shell_changes(
        &self,
        fs: &dyn FsProvider,
        session: &str,
        turn: u32,
        changes: &[ShellChange],
    ) -> Result<Vec<bool>> {
        let local = local(fs)?;
        let mut seen = Vec::with_capacity(changes.len());
        for c in changes {
            seen.push(self.seen(local, &c.path).await?);
        }
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        let files = data.turns.entry(turn).or_default();
        let used: u64 = files
            .values()
            .map(|b| match &b.before {
                Before::File { content, .. } => content.len() as u64,
                _ => 0,
            })
            .sum();
        let mut budget = self.max_turn_bytes.saturating_sub(used);
        let mut undoable = Vec::with_capacity(changes.len());
        for (c, seen) in changes.iter().zip(seen) {
            let record = WriteRecord { from: seen.key(), to: c.to.clone(), done: false };
            if let Some(backup) = files.get_mut(&c.path) {
                undoable.push(!matches!(backup.before, Before::TooLarge { .. }));
                backup.shell = true;
                if backup.writes.last() != Some(&record) {
                    backup.writes.push(record);
                }
                continue;
            }
            let before = match seen {
                Seen::Missing => Before::Missing,
                Seen::File { bytes, mode } if (bytes.len() as u64) <= budget => {
                    budget -= bytes.len() as u64;
                    Before::file(bytes, Some(mode & 0o777))
                }
                Seen::File { bytes, .. } => Before::TooLarge { size: bytes.len() as u64 },
                Seen::TooLarge(size) => Before::TooLarge { size },
                Seen::Link(target) => Before::link(target),
                // With its sticky and setgid bits (a shared directory's sticky bit comes back).
                Seen::Dir(mode) => Before::Dir { mode: mode & 0o7777 },
                Seen::Other => Before::TooLarge { size: 0 },
            };
            undoable.push(!matches!(before, Before::TooLarge { .. }));
            files.insert(c.path.clone(), Backup { before, writes: vec![record], shell: true });
        }
        self.commit(&mut sessions, session).await?;
        Ok(undoable)
    }

    /// Called once the changes `before_shell_changes` recorded were applied: `done` says, per
    /// path, whether its change was made (one that was not is taken back).
    pub async fn after_shell_changes(&self, session: &str, turn: u32, done: &[(String, bool)]) -> Result<()> {
        let mut sessions = self.slot(session).await;
        let data = self.session(&mut sessions, session).await?;
        if let Some(files) = data.turns.get_mut(&turn) {
            for (path, made) in done {
                let Some(backup) = files.get_mut(path) else { continue };
                match backup.writes.last_mut() {
                    Some(w) if *made => w.done = true,
                    Some(w) if !w.done => {
                        backup.writes.pop();
                    }
                    _ => {}
                }
                if backup.writes.is_empty() {
                    files.remove(path);
                }
            }
            if files.is_empty() {
                data.turns.remove(&turn);
            }
        }
        while data.turns.len() > self.max_turns {
            if let Some((dropped, _)) = data.turns.pop_first() {
                data.dropped_through = Some(data.dropped_through.map_or(dropped, |d| d.max(dropped)));
            }
        }
        self.commit(&mut sessions, session).await
    }
}
