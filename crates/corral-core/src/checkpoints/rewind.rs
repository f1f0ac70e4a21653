//! Rewinding a session to a turn: every path checked first, then put back.

use std::collections::BTreeMap;

use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;
use crate::path::shown;

use super::format::*;
use super::*;

pub(super) enum Action {
    Delete,
    Write { bytes: Vec<u8>, mode: Option<u32> },
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
}
