//! Rewinding a session to a turn: every path checked first, then put back.

use std::collections::BTreeMap;

use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;
use crate::path::shown;

use super::format::*;
use super::*;

pub(super) enum Action {
    Delete,
    Write {
        bytes: Vec<u8>,
        mode: Option<u32>,
    },
    /// A directory a command made, removed once empty.
    RemoveDir,
    MakeDir {
        mode: u32,
    },
    Link {
        target: Vec<u8>,
    },
    /// A directory's mode, set back in place (last: a directory made read-only again must not
    /// stop what the rewind puts below it).
    Chmod {
        mode: u32,
    },
}

/// Where a path is, for a rewind: its key (as write records name states), or why it is skipped.
enum Now {
    /// Its key, and a file's permission bits when a command's change is being undone (a
    /// `chmod` alone changes no content).
    Key(Option<String>, Option<u32>),
    Skip(SkipReason),
}

impl Checkpoints {
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
            // A command's change: the path as it is (a link, a directory), not what it leads to.
            let shell = first.shell || last.shell;
            let now = if shell { self.now_as_is(fs, path).await? } else { self.now(fs, path).await? };
            let (current, mode_now) = match now {
                Now::Key(k, m) => (k, m),
                Now::Skip(reason) => {
                    skip(&mut report, reason);
                    continue;
                }
            };
            let target = first.before.key(path)?;
            let mode_back = match (&first.before, mode_now) {
                (Before::File { mode: Some(m), .. }, Some(now)) => now & 0o777 != m & 0o777,
                (Before::Dir { mode: m }, Some(now)) => now & 0o7777 != m & 0o7777,
                _ => false,
            };
            if current == target && !mode_back {
                continue; // already as it was: nothing to undo (a crash before the write, say)
            }
            // What the agent last wrote; while a write is unconfirmed the file may still hold
            // what it held before that write.
            // A deletion left no file: nothing is what is expected there.
            let written = |w: &WriteRecord| (w.to != DELETED_MARK).then(|| w.to.clone());
            let expected: Vec<Option<String>> = match last.writes.last() {
                Some(w) if w.done => vec![written(w)],
                Some(w) => vec![written(w), w.from.clone()],
                None => vec![target.clone()],
            };
            if !force && !expected.contains(&current) {
                skip(&mut report, SkipReason::ChangedSince);
                continue;
            }
            // A directory still a directory, whose mode a command changed: set back in place.
            if let (Some(DIR_MARK), Before::Dir { mode }) = (current.as_deref(), &first.before) {
                report.restored.push(path.to_string());
                actions.push((path.to_string(), Action::Chmod { mode: *mode }));
                continue;
            }
            // What is there now goes first where what comes back cannot replace it in place (a
            // file written over a link would land where the link leads).
            match current.as_deref() {
                None => {}
                Some(DIR_MARK) => actions.push((path.to_string(), Action::RemoveDir)),
                Some(k) => {
                    let in_place = match &first.before {
                        Before::File { .. } => !k.starts_with("link:"),
                        Before::Link { .. } => true,
                        _ => false,
                    };
                    if !in_place {
                        actions.push((path.to_string(), Action::Delete));
                    }
                }
            }
            match &first.before {
                Before::Missing => report.deleted.push(path.to_string()),
                Before::Dir { mode } => {
                    report.restored.push(path.to_string());
                    actions.push((path.to_string(), Action::MakeDir { mode: *mode }));
                }
                Before::Link { encoding, target } => {
                    report.restored.push(path.to_string());
                    actions.push((path.to_string(), Action::Link { target: decode_content(path, *encoding, target)? }));
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
        // Files and links go first, then the directories commands made (deepest first), then
        // what comes back (parents first), and the directories' modes last (deepest first).
        let phase = |a: &Action| match a {
            Action::Delete => 0,
            Action::RemoveDir => 1,
            Action::MakeDir { .. } => 2,
            Action::Chmod { .. } => 4,
            _ => 3,
        };
        let depth = |p: &str| p.matches('/').count();
        actions.sort_by(|(pa, a), (pb, b)| {
            phase(a).cmp(&phase(b)).then_with(|| match phase(a) {
                1 | 4 => depth(pb).cmp(&depth(pa)),
                _ => depth(pa).cmp(&depth(pb)).then_with(|| pa.cmp(pb)),
            })
        });
        // Set last, deepest first: the modes of directories put back or changed back (`true`),
        // after those of directories opened for the rewind (`false`): set back, whatever became
        // of the rewind, where a directory is still there and no action replaced or removed it.
        let replaced: std::collections::HashSet<String> = actions
            .iter()
            .filter(|(_, a)| !matches!(a, Action::Chmod { .. } | Action::MakeDir { .. }))
            .map(|(p, _)| p.clone())
            .collect();
        let mut modes: Vec<(String, u32, bool)> = open_closed_dirs(fs, &actions)
            .await
            .into_iter()
            .filter(|(p, _)| !replaced.contains(p))
            .map(|(p, m)| (p, m, false))
            .collect();
        let carried: Result<()> = async {
            for (path, action) in actions {
                match action {
                    Action::Delete => fs.rm(&path, false).await?,
                    Action::RemoveDir => {
                        // Left where something not of the command's is still in it.
                        if fs.readdir(&path).await?.is_empty() {
                            fs.rm(&path, false).await?;
                        }
                    }
                    Action::MakeDir { mode } => {
                        fs.mkdir(&path).await?;
                        modes.push((path, mode & 0o7777, true));
                    }
                    Action::Link { target } => Self::put_link(fs, &path, &target)?,
                    Action::Chmod { mode } => modes.push((path, mode & 0o7777, true)),
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
            Ok(())
        }
        .await;
        modes.sort_by_key(|(p, ..)| std::cmp::Reverse(depth(p)));
        let mut failed = carried.err();
        for (path, mode, ours) in modes {
            if !ours {
                if still_dir(fs, &path) {
                    let _ = fs.chmod(&path, mode).await;
                }
            } else if failed.is_none() {
                failed = fs.chmod(&path, mode).await.err();
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        // Only now, with every file back: a rewind that failed half-way can be run again. The
        // reference forgets the rewound turns whole; with keepSkipped the backups of the files it
        // skipped stay (only those), for a later forced rewind.
        let mut rewound = data.turns.split_off(&to_turn);
        if self.keep_skipped {
            let skipped: std::collections::BTreeSet<&str> =
                report.skipped.iter().filter(|s| s.reason != SkipReason::TooLarge).map(|s| s.path.as_str()).collect();
            for (turn, mut files) in std::mem::take(&mut rewound) {
                files.retain(|path, _| skipped.contains(path.as_str()));
                if !files.is_empty() {
                    data.turns.insert(turn, files);
                }
            }
        }
        self.commit(&mut sessions, session).await?;
        Ok(report)
    }

    /// A path's key as the file tools see it (a link followed).
    async fn now(&self, fs: &dyn FsProvider, path: &str) -> Result<Now> {
        Ok(match self.observe(fs, path).await? {
            Observed::NotAFile => Now::Skip(SkipReason::NotAFile),
            Observed::TooLarge(_) => Now::Skip(SkipReason::TooLarge),
            Observed::Missing => Now::Key(None, None),
            Observed::File(bytes) => Now::Key(Some(sha256(&bytes)), None),
            Observed::NotText => Now::Key(Some("not-utf8".to_string()), None),
        })
    }

    /// A path's key as it is: a link or a directory itself.
    #[cfg(unix)]
    async fn now_as_is(&self, fs: &dyn FsProvider, path: &str) -> Result<Now> {
        use super::shell::Seen;
        Ok(match self.seen(super::shell::local(fs)?, path).await? {
            Seen::TooLarge(_) => Now::Skip(SkipReason::TooLarge),
            Seen::Other => Now::Skip(SkipReason::NotAFile),
            Seen::File { bytes, mode } => Now::Key(Some(sha256(&bytes)), Some(mode)),
            Seen::Dir(mode) => Now::Key(Some(super::format::DIR_MARK.to_string()), Some(mode)),
            seen => Now::Key(seen.key(), None),
        })
    }

    #[cfg(not(unix))]
    async fn now_as_is(&self, fs: &dyn FsProvider, path: &str) -> Result<Now> {
        self.now(fs, path).await
    }

    #[cfg(unix)]
    fn put_link(fs: &dyn FsProvider, path: &str, target: &[u8]) -> Result<()> {
        super::shell::local(fs)?.symlink_sync(path, target)
    }

    #[cfg(not(unix))]
    fn put_link(_fs: &dyn FsProvider, path: &str, _target: &[u8]) -> Result<()> {
        Err(Error::new(Code::Io, format!("Cannot restore the link {}: links are restored on unix only.", shown(path))))
    }
}

/// Opens (`u+rwx`) the directories a rewind must reach into or list that are closed to this
/// user, parents first: a command can close a directory it wrote into (`chmod 555 out`), its
/// root being root over this user's files in its namespace, where this process is not. Their
/// paths and modes, to be set back; nothing as root, whom no mode stops.
#[cfg(unix)]
async fn open_closed_dirs(fs: &dyn FsProvider, actions: &[(String, Action)]) -> Vec<(String, u32)> {
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } == 0 {
        return Vec::new();
    }
    let Ok(local) = super::shell::local(fs) else { return Vec::new() };
    let mut dirs = std::collections::BTreeSet::new();
    for (path, action) in actions {
        let mut at = path.as_str();
        if matches!(action, Action::RemoveDir) {
            dirs.insert(at.to_string()); // listed before it goes
        }
        while let Some(i) = at.rfind('/') {
            at = &at[..i];
            dirs.insert(at.to_string());
        }
    }
    // Sorted, a directory comes before everything below it.
    let mut opened = Vec::new();
    for dir in dirs {
        if let Ok(crate::fs::local::HostEntry::Dir { mode }) = local.entry_sync(&dir) {
            if mode & 0o700 != 0o700 && fs.chmod(&dir, (mode | 0o700) & 0o7777).await.is_ok() {
                opened.push((dir, mode & 0o7777));
            }
        }
    }
    opened
}

#[cfg(not(unix))]
async fn open_closed_dirs(_fs: &dyn FsProvider, _actions: &[(String, Action)]) -> Vec<(String, u32)> {
    Vec::new()
}

/// Whether `path` is a directory now (a link there is not followed).
#[cfg(unix)]
fn still_dir(fs: &dyn FsProvider, path: &str) -> bool {
    super::shell::local(fs)
        .ok()
        .and_then(|l| l.entry_sync(path).ok())
        .is_some_and(|e| matches!(e, crate::fs::local::HostEntry::Dir { .. }))
}

#[cfg(not(unix))]
fn still_dir(_fs: &dyn FsProvider, _path: &str) -> bool {
    false
}
