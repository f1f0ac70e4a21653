//! A walk of a directory on disk in path order, for a caller that stops once what comes first
//! is settled (grep with its default limits).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{join, remember, skipped, small, walk_threads, Disk, Entry, Filter, Limits, Visit};

/// The files below a directory on disk in path order, listed lazily: a depth-first walk whose
/// siblings are sorted so that a directory `d` sorts as `d/` — then the files come out in the byte
/// order of their paths (`a-b` before `a/x`, as a sort of the paths puts them).
struct PathOrder<'a> {
    host: &'a std::path::Path,
    /// `ignore` entries with a `/` name paths from the root: the real base, then a `/`.
    real_prefix: String,
    by_path: bool,
    limits: &'a Limits<'a>,
    filter: &'a Filter,
    /// Per open directory, its entries not visited yet (path below the base, is a directory),
    /// last first.
    stack: Vec<Vec<(String, bool)>>,
    next_place: usize,
    /// Entries listed so far.
    listed: usize,
}

impl PathOrder<'_> {
    /// The entries of the directory `rel` (below the base; "" for the base) that the walk keeps,
    /// in reverse path order; None when it cannot be read.
    fn list(&mut self, rel: &str) -> Option<Vec<(String, bool)>> {
        let dir = if rel.is_empty() { self.host.to_path_buf() } else { self.host.join(rel) };
        let mut entries = Vec::new();
        for e in std::fs::read_dir(dir).ok()? {
            let Ok(e) = e else {
                self.limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            // The type the directory lists (d_type; `lstat` where it gives none): a link is
            // neither a file nor a directory, and is never followed.
            let Ok(kind) = e.file_type() else { continue };
            let (is_dir, is_file) = (kind.is_dir(), kind.is_file());
            if !is_dir && !is_file {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let path = if self.by_path && is_dir { format!("{}{child}", self.real_prefix) } else { String::new() };
            if skipped(&name, &path, is_dir, self.limits.o) {
                continue;
            }
            entries.push((child, is_dir));
        }
        self.listed += entries.len();
        // Reverse path order (a directory sorts as its name and a `/`), so `pop` gives the first.
        entries.sort_unstable_by(|(p, d), (q, e)| {
            let a = p.bytes().chain(d.then_some(b'/'));
            let b = q.bytes().chain(e.then_some(b'/'));
            b.cmp(a)
        });
        Some(entries)
    }

    /// The next file in path order that the filter keeps, with its place; None at the end, at
    /// `maxFilesScanned` or when the walk was stopped.
    fn next(&mut self) -> Option<(usize, String)> {
        if self.limits.stopped() {
            return None;
        }
        let rel = self.next_kept()?;
        if !self.limits.count(false) {
            return None;
        }
        let place = self.next_place;
        self.next_place += 1;
        Some((place, rel))
    }

    /// The next file in path order that the filter keeps, whatever the limits.
    fn next_kept(&mut self) -> Option<String> {
        loop {
            let top = self.stack.last_mut()?;
            let Some((rel, is_dir)) = top.pop() else {
                self.stack.pop();
                continue;
            };
            if is_dir {
                match self.list(&rel) {
                    Some(entries) => self.stack.push(entries),
                    None => {
                        self.limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                    }
                }
                continue;
            }
            if (self.filter)(&rel) {
                return Some(rel);
            }
        }
    }
}

/// A directory on disk in path order: one thread lists directories ahead (lazily, in order,
/// never more than `LOOK_AHEAD` files in front of the visits), the others visit the files in the
/// order they come; each visit gets the file's place, so the caller can settle a prefix while
/// later files are still being read. A tree that was small when last walked is listed and
/// visited on the calling thread alone.
pub(super) fn walk_disk_ordered(disk: &Disk<'_>, limits: &Limits<'_>, filter: &Filter, visit: &Visit) {
    let Disk { local, host, base, real_base } = *disk;
    /// Files are handed out in batches of `BATCH` (one lock and one wake-up each), at most
    /// `LOOK_AHEAD` batches waiting.
    const BATCH: usize = 16;
    const LOOK_AHEAD: usize = 64;
    let mut order = PathOrder {
        host,
        real_prefix: if real_base == "." { String::new() } else { format!("{real_base}/") },
        by_path: limits.o.ignore.iter().any(|i| i.contains('/')),
        limits,
        filter,
        stack: Vec::new(),
        next_place: 0,
        listed: 0,
    };
    match order.list("") {
        Some(entries) => order.stack.push(entries),
        None => {
            limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    // Visits one file; when the call was cancelled or the visit stops the walk, the walk stops
    // and the error says whether it was the visit.
    let visit_one = |place: usize, rel: &str| -> std::result::Result<(), bool> {
        let real = join(real_base, rel);
        let cancelled = limits.ctx.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        if cancelled || !visit(&join(base, rel), rel, Entry::Disk { local, real: &real }, Some(place)) {
            limits.stop.store(true, Ordering::Relaxed);
            return Err(!cancelled);
        }
        Ok(())
    };
    if small(host) {
        while let Some((place, rel)) = order.next() {
            if let Err(by_visit) = visit_one(place, &rel) {
                if by_visit && order.next_kept().is_some() {
                    limits.stats.more.store(true, Ordering::Relaxed);
                }
                break;
            }
        }
        remember(host, order.listed, !limits.stopped());
        return;
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(usize, String)>>(LOOK_AHEAD);
    // Taken away (and so dropped) when a visit stops the walk: the lister's send then fails
    // instead of waiting for room.
    let rx = std::sync::Mutex::new(Some(rx));
    let stopped_by_visit = AtomicBool::new(false);
    let work = || loop {
        let next = match rx.lock().unwrap().as_ref() {
            Some(rx) => rx.recv().ok(),
            None => None,
        };
        let Some(batch) = next else { return };
        // Files listed before `maxFilesScanned` stopped the lister are still visited.
        for (place, rel) in batch {
            if let Err(by_visit) = visit_one(place, &rel) {
                stopped_by_visit.store(by_visit, Ordering::Relaxed);
                rx.lock().unwrap().take();
                return;
            }
        }
    };
    let more = std::thread::scope(|s| {
        let lister = s.spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                let item = order.next();
                let end = item.is_none();
                batch.extend(item);
                let full = (end && !batch.is_empty()) || batch.len() == BATCH;
                if full && tx.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH))).is_err() {
                    // The files it could not hand out are more.
                    return (true, order.listed);
                }
                if end {
                    return (order.next_kept().is_some(), order.listed);
                }
            }
        });
        for _ in 1..walk_threads() {
            s.spawn(work);
        }
        work();
        lister.join().unwrap_or((false, 0))
    });
    let (more, listed) = more;
    // A walk stopped anywhere (by the limits, a visit or a cancel) is not whole.
    remember(host, listed, !limits.stopped());
    if more && stopped_by_visit.load(Ordering::Relaxed) {
        limits.stats.more.store(true, Ordering::Relaxed);
    }
}
