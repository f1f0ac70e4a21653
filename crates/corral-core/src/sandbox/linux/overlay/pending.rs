//! `applyChanges: 'manual'`: each command's changeset is kept in its layer instead of applied.
//! Later commands see the pending ones (their upper layers are the overlay's lower layers above
//! the host's tree, newest first); `apply` applies the oldest ones up to a given changeset, in
//! order, each through the same path as an automatic one (protected names refused, host changes
//! since its command started refused, recorded in checkpoints); `discard` drops a changeset and
//! every one after it (they were made over it).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::capture::{self, Entry, Lower, Op};
use super::{finish_with, Layer, Protected};
use crate::error::{Code, Error, Result};
use crate::sandbox::ChangeRecord;
use crate::shell::changes::{Changes, Refusal};

/// The most changesets kept pending at once (each is a layer of every later command's overlay).
pub const MAX_PENDING: usize = 32;

struct Set {
    id: String,
    command: String,
    /// Shared with an apply in flight: a set leaves the list only once applied, so an apply
    /// that is cancelled part way leaves it (and what it has not applied yet) pending.
    layer: Arc<Layer>,
    record: Option<ChangeRecord>,
    protected: Protected,
    /// Left by a process that no longer runs.
    interrupted: bool,
}

#[derive(Default)]
struct State {
    /// Oldest first.
    sets: Vec<Set>,
    /// The paths earlier changesets changed when they were applied: each pending changeset's
    /// command started before, so they are no host change to it. Forgotten once none is pending.
    ours: super::Ours,
    /// The first look for what dead processes left, while it runs: the layers it found are
    /// locked by it, so a look whose caller gave up is awaited by the next, never repeated
    /// beside it (a second look would find them locked and pass them by).
    looking: Option<tokio::task::JoinHandle<Result<Vec<super::layer::Orphan>>>>,
}

/// A SandboxShell's pending changesets: with `applyChanges: 'manual'` every command's, and in
/// either mode those a process that died left behind.
pub struct Pending {
    mount: PathBuf,
    state: tokio::sync::Mutex<State>,
    next: AtomicU64,
    manual: std::sync::atomic::AtomicBool,
    recovered: std::sync::atomic::AtomicBool,
}

impl Pending {
    pub fn new(mount: &Path) -> Pending {
        Pending {
            mount: mount.to_path_buf(),
            state: Default::default(),
            next: AtomicU64::new(1),
            manual: Default::default(),
            recovered: Default::default(),
        }
    }

    /// `applyChanges: 'manual'`: commands' changesets are kept.
    pub fn set_manual(&self) {
        self.manual.store(true, Ordering::Relaxed);
    }

    pub fn manual(&self) -> bool {
        self.manual.load(Ordering::Relaxed)
    }

    /// Once, before the first command or listing: the layers a process that no longer runs left
    /// over this directory, listed as pending and `interrupted` — one it died applying too (each
    /// file is old or new; what was applied is gone from the layer, `applyChanges` applies the
    /// rest). None is applied unasked: a layer is only what its directory holds, and whoever
    /// could write there (a command given the temp directory) could have made it.
    pub async fn recover(&self, changes_dir: Option<&Path>) -> Result<()> {
        if self.recovered.load(Ordering::SeqCst) {
            return Ok(());
        }
        // Under the lock: two first commands look once. A look that fails leaves what it found
        // on disk (not adopted, not removed) for the next; one whose caller gives up goes on,
        // and the next caller takes its result.
        let mut state = self.state.lock().await;
        if self.recovered.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (mount, dir) = (self.mount.clone(), changes_dir.map(Path::to_path_buf));
        let look = state
            .looking
            .get_or_insert_with(|| tokio::task::spawn_blocking(move || Layer::orphans(&mount, dir.as_deref())));
        let found = look.await;
        state.looking = None;
        let orphans =
            found.map_err(|e| Error::new(Code::Io, format!("Could not look for interrupted changesets: {e}")))??;
        let mut adopted = Vec::new();
        for mut o in orphans {
            o.layer.adopt();
            let protected = o.protected;
            let id = format!("c{}", self.next.fetch_add(1, Ordering::Relaxed));
            let layer = Arc::new(o.layer);
            adopted.push(Set { id, command: o.command, layer, record: None, protected, interrupted: true });
        }
        adopted.append(&mut state.sets);
        state.sets = adopted;
        self.recovered.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// The pending layers' directories, newest first: what a new command sees below its own.
    pub async fn lowers(&self) -> Result<Vec<PathBuf>> {
        let state = self.state.lock().await;
        let sets = &state.sets;
        if !self.manual() {
            return Ok(Vec::new());
        }
        if sets.len() >= MAX_PENDING {
            return Err(Error::new(
                Code::TooLarge,
                format!("{MAX_PENDING} changesets are pending: apply or discard some (applyChanges, discardChanges) before the next command."),
            ));
        }
        // What a dead process left is not under this one's commands.
        Ok(sets.iter().rev().filter(|s| !s.interrupted).map(|s| s.layer.dir.clone()).collect())
    }

    /// Keeps a finished command's layer as the newest pending changeset; what it changed, as a
    /// command that applied would report it, with `pending: true`.
    pub async fn keep(
        &self,
        layer: Layer,
        command: &str,
        record: Option<ChangeRecord>,
        protected: Protected,
    ) -> Changes {
        let mut state = self.state.lock().await;
        let lower = Lower {
            layers: state.sets.iter().rev().filter(|s| !s.interrupted).map(|s| s.layer.upper()).collect(),
            host: self.mount.clone(),
        };
        let upper = layer.upper();
        let described = {
            let protected = protected.clone();
            tokio::task::spawn_blocking(move || {
                capture::capture(&upper, &lower).map(|ops| (ops.is_empty(), describe(&ops, &protected)))
            })
            .await
        };
        // (A directory's mode or a removed empty directory is a change no list names.)
        let (nothing, mut changes) = match described {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return super::unread(e.to_string()),
            Err(e) => return super::unread(e.to_string()),
        };
        if nothing {
            layer.recycle(); // nothing to keep: the layer goes (or serves the next command)
            return changes;
        }
        changes.pending = true;
        let id = format!("c{}", self.next.fetch_add(1, Ordering::Relaxed));
        layer.mark("pending", command, &protected);
        let layer = Arc::new(layer);
        state.sets.push(Set { id, command: command.to_string(), layer, record, protected, interrupted: false });
        changes
    }

    /// `pendingChanges()`: `[{ id, command, changes: [{ path, kind }], diff }]`, oldest first.
    pub async fn list(&self) -> Result<Value> {
        let state = self.state.lock().await;
        let sets = &state.sets;
        let mut out = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            // An apply whose caller gave up may still be reading (and opening) this layer.
            settled(set).await;
            let lower =
                Lower { layers: sets[..i].iter().rev().map(|s| s.layer.upper()).collect(), host: self.mount.clone() };
            let (upper, protected) = (set.layer.upper(), set.protected.clone());
            let listed = tokio::task::spawn_blocking(move || -> std::io::Result<(Vec<Value>, String)> {
                let ops = capture::capture(&upper, &lower)?;
                let c = describe(&ops, &protected);
                let mut changes: Vec<Value> = Vec::new();
                for (kind, paths) in [("added", &c.added), ("modified", &c.modified), ("deleted", &c.deleted)] {
                    changes.extend(paths.iter().map(|p| json!({ "path": p, "kind": kind })));
                }
                changes.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
                Ok((changes, diff(&ops, &upper, &lower)))
            })
            .await
            .map_err(|e| Error::new(Code::Io, format!("Could not read a pending changeset: {e}")))?
            .map_err(|e| Error::new(Code::Io, format!("Could not read a pending changeset: {e}")))?;
            let mut one = json!({ "id": set.id, "command": set.command, "changes": listed.0, "diff": listed.1 });
            if set.interrupted {
                one["interrupted"] = Value::Bool(true);
            }
            out.push(one);
        }
        Ok(Value::Array(out))
    }

    /// Applies the pending changesets up to and including `id` (all without one), oldest first;
    /// what each changed, `[{ id, changes }]`.
    pub async fn apply(&self, id: Option<&str>) -> Result<Value> {
        let mut state = self.state.lock().await;
        let end = match id {
            None => state.sets.len(),
            Some(id) => state.sets.iter().position(|s| s.id == id).map(|i| i + 1).ok_or_else(|| unknown(id))?,
        };
        let mut done = Vec::new();
        for _ in 0..end {
            settled(&state.sets[0]).await;
            let set = &state.sets[0];
            let (layer, protected, record) = (set.layer.clone(), set.protected.clone(), set.record.clone());
            let (mut changes, unsaved) =
                finish_with(layer, self.mount.clone(), protected, record, state.ours.clone()).await;
            if unsaved {
                // Nothing of it applied: it stays (pending again for a later process too), and
                // so do the sets over it.
                let set = &state.sets[0];
                set.layer.mark("pending", &set.command, &set.protected);
                changes.pending = true;
                done.push(json!({ "id": state.sets[0].id, "changes": changes.to_json() }));
                break;
            }
            // Applied: it leaves the list (and its layer goes with the last holder).
            let set = state.sets.remove(0);
            done.push(json!({ "id": set.id, "changes": changes.to_json() }));
        }
        if state.sets.is_empty() {
            state.ours.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        Ok(Value::Array(done))
    }

    /// Discards the changeset `id` and every one after it (all without one); their ids.
    pub async fn discard(&self, id: Option<&str>) -> Result<Value> {
        let mut state = self.state.lock().await;
        let start = match id {
            None => 0,
            Some(id) => state.sets.iter().position(|s| s.id == id).ok_or_else(|| unknown(id))?,
        };
        for set in &state.sets[start..] {
            settled(set).await;
        }
        let gone: Vec<Value> = state.sets.drain(start..).map(|s| Value::from(s.id)).collect();
        if state.sets.is_empty() {
            state.ours.lock().unwrap_or_else(|p| p.into_inner()).clear();
        }
        Ok(Value::Array(gone))
    }
}

/// Waits until no apply holds `set`'s layer: one whose caller gave up goes on to its end on the
/// blocking pool (a file is never left half applied), and the set is applied or dropped only
/// after.
async fn settled(set: &Set) {
    while Arc::strong_count(&set.layer) > 1 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

fn unknown(id: &str) -> Error {
    Error::new(Code::NotFound, format!("No pending changeset {id:?} (see pendingChanges())."))
}

/// What `ops` would change, as `ExecResult.changes` says it (nothing applied).
fn describe(ops: &[Op], protected: &Protected) -> Changes {
    let mut c = Changes::default();
    let mut refused: Vec<PathBuf> = Vec::new();
    for op in ops {
        let rel = op.path();
        if refused.iter().any(|r| rel.starts_with(r)) {
            continue;
        }
        let shown = rel.to_string_lossy().into_owned();
        if protected.covers(rel) {
            c.refused.push(Refusal { path: shown, reason: "protected".into() });
            refused.push(rel.to_path_buf());
            continue;
        }
        match op {
            Op::Put { existed: true, .. } => c.modified.push(shown),
            Op::Put { .. } => c.added.push(shown),
            Op::MakeDir { empty: true, .. } => c.added.push(format!("{shown}/")),
            Op::Remove { .. } => c.deleted.push(shown),
            Op::Refuse { reason, .. } => {
                c.refused.push(Refusal { path: shown, reason: (*reason).to_string() });
                refused.push(rel.to_path_buf());
            }
            Op::MakeDir { .. } | Op::RemoveDir { .. } | Op::ModeDir { .. } => {}
        }
    }
    c
}

/// What a file or link shows in a diff: its text, `None` for bytes that are not text.
fn shown_text(path: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if m.file_type().is_symlink() {
        return Some(format!("(link to {})\n", std::fs::read_link(path).ok()?.display()));
    }
    let bytes = std::fs::read(path).ok()?;
    String::from_utf8(bytes).ok().filter(|t| !t.contains('\0'))
}

/// A unified diff of `ops` (binary files named).
fn diff(ops: &[Op], upper: &Path, lower: &Lower) -> String {
    let mut out = String::new();
    for op in ops {
        let rel = op.path();
        let name = rel.to_string_lossy();
        let (before, after) = match op {
            Op::Put { entry: Entry::File { .. } | Entry::Link { .. }, existed, .. } => {
                let before =
                    if *existed { lower.find(rel).map(|(p, _)| shown_text(&p)) } else { Some(Some(String::new())) };
                (before.flatten(), shown_text(&upper.join(rel)))
            }
            Op::Remove { .. } => (lower.find(rel).and_then(|(p, _)| shown_text(&p)), Some(String::new())),
            _ => continue,
        };
        let (a, b) = (
            if matches!(op, Op::Put { existed: false, .. }) { "/dev/null".to_string() } else { format!("a/{name}") },
            if matches!(op, Op::Remove { .. }) { "/dev/null".to_string() } else { format!("b/{name}") },
        );
        match (before, after) {
            (Some(before), Some(after)) => {
                out.push_str(&similar::TextDiff::from_lines(&before, &after).unified_diff().header(&a, &b).to_string())
            }
            _ => out.push_str(&format!("Binary files {a} and {b} differ\n")),
        }
    }
    out
}
