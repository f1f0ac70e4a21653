//! The one walker of `glob` and `grep`, over every provider: a directory on disk in parallel
//! (`ignore`'s walker, links never followed), an in-memory tree directly, and any other provider
//! breadth-first through `readdir`. The same rules on all three:
//!
//! - A denied name is left out at any depth, and so is a directory named in `ignore` (a name
//!   matches anywhere; an entry with a `/` is a path from the root).
//! - Every file the filter accepts counts toward `maxFilesScanned`; past it the walk stops and
//!   says so. The walk stops at an abort.
//! - A provider's tree can be anything (one whose `readdir` invents a directory forever would
//!   never end), so there directories count toward `maxFilesScanned` too, and the walk itself
//!   has the time budget (`grepTimeoutMs`). A tree on disk (links never followed)
//!   or in memory is finite, and its walk time is reading time, which the budget does not count.
//! - An entry that cannot be read (a directory without permission, a provider that fails for one
//!   path) is skipped and counted; an error thrown by the program's own provider code is not a
//!   read failure and ends the call.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::options::{Ctx, FsToolOptions};
use crate::error::{Code, Error, Result};
use crate::fs::local::LocalFs;
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;
use crate::text::{fmt_count, plural};

mod ordered;
use ordered::walk_disk_ordered;

/// Whether a provider's readdir gave a name, not a path: not empty, `.` or `..`, and without a
/// separator or NUL.
pub(crate) fn is_entry_name(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == ".." || name.contains(['/', '\\', '\0']))
}

/// A file the walk found.
pub(super) enum Entry<'a> {
    /// On disk: `real` is its resolved workspace path, to open with `LocalFs::open_walked_file`
    /// (its size is not asked: the opened file tells it without another call).
    Disk { local: &'a LocalFs, real: &'a str },
    /// In memory: its bytes.
    Memory(&'a [u8]),
    /// Through a provider's interface: read it afterwards; the size when `stat` was asked.
    Provider { size: u64 },
}

/// Chooses by the path below the base which files are scanned (and counted).
pub(super) type Filter = Arc<dyn Fn(&str) -> bool + Send + Sync>;
/// Called with each scanned file's workspace path, its path below the base, the entry, and —
/// when the walk goes in path order — the file's place in that order (0, 1, 2, … over the files
/// the filter accepts); false stops the walk. On disk and in memory it runs on the blocking pool,
/// on several threads.
pub(super) type Visit = Arc<dyn Fn(&str, &str, Entry<'_>, Option<usize>) -> bool + Send + Sync>;

/// The order a walk visits files in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Order {
    /// Whatever is fastest: on disk, every thread walks.
    Any,
    /// Path order (byte order of the workspace path), each file with its place in it, so a
    /// caller can stop once what comes first is settled. On disk one thread lists directories
    /// while every thread visits files; in memory the walk is in path order anyway. A provider's
    /// walk is breadth-first through its interface and gives no places.
    Path,
}

/// What a walk gives its visits besides the files.
#[derive(Clone, Copy, Debug)]
pub(super) struct Want {
    /// A provider's files come with their size (one `stat` each).
    pub sizes: bool,
    pub order: Order,
    /// Each visit does little (glob matches a path; grep reads a file): one thread walks a
    /// larger tree on disk before threads pay for themselves.
    pub light: bool,
}

/// What a walk reports besides its files.
#[derive(Default)]
pub(super) struct WalkStats {
    /// `maxFilesScanned` stopped it.
    pub limit_hit: AtomicBool,
    /// Files scanned.
    pub files: AtomicUsize,
    pub dirs: AtomicUsize,
    /// Entries skipped because they could not be read.
    pub unreadable: AtomicUsize,
    pub timed_out: AtomicBool,
    /// A walk in path order that a visit stopped had files left after the ones it handed out.
    pub more: AtomicBool,
    /// On disk: every name was read from a directory opened below the root without following a
    /// link (`LocalFs::walk_confined`), so none needs checking afterwards.
    pub confined: AtomicBool,
}

impl WalkStats {
    /// The lines the walk adds to a result.
    pub fn notes(&self, o: &FsToolOptions) -> Vec<String> {
        let mut notes = Vec::new();
        let unreadable = self.unreadable.load(Ordering::Relaxed);
        if unreadable == 1 {
            notes.push("(1 entry could not be read and was skipped.)".to_string());
        } else if unreadable > 1 {
            notes.push(format!("({} entries could not be read and were skipped.)", fmt_count(unreadable)));
        }
        if self.limit_hit.load(Ordering::Relaxed) {
            notes.push(format!(
                "(Stopped after scanning {} (maxFilesScanned); there may be more. Narrow path or the pattern.)",
                plural(o.max_files_scanned, "file")
            ));
        }
        notes
    }

    /// The error of a walk that ran out of time.
    pub fn timeout(&self, o: &FsToolOptions, what: &str) -> Option<Error> {
        self.timed_out.load(Ordering::Relaxed).then(|| {
            Error::new(
                Code::Timeout,
                format!(
                    "{what} stopped: the search took longer than {} ms ({} scanned). Narrow path or the pattern.",
                    fmt_count(o.grep_timeout_ms as usize),
                    plural(self.files.load(Ordering::Relaxed), "file")
                ),
            )
        })
    }
}

/// A workspace path for a file found `rel` below the search base.
pub(super) fn join(base: &str, rel: &str) -> String {
    if base == "." {
        rel.to_string()
    } else if rel.is_empty() {
        base.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

/// `join`, borrowing `rel` when the base is the root.
fn joined<'r>(base: &str, rel: &'r str) -> std::borrow::Cow<'r, str> {
    if base == "." {
        std::borrow::Cow::Borrowed(rel)
    } else {
        std::borrow::Cow::Owned(join(base, rel))
    }
}

/// Whether a walk leaves out an entry at `path` (a workspace path) named `name`: a denied name,
/// or a directory named in `ignore` (by name, or by its path from the root when the entry has a
/// `/`). The one rule of every walk.
fn skipped(name: &str, path: &str, is_dir: bool, o: &FsToolOptions) -> bool {
    name_is_denied(name, &o.deny)
        || (is_dir && o.ignore.iter().any(|i| if i.contains('/') { i.trim_matches('/') == path } else { i == name }))
}

/// The shared limits of one walk.
struct Limits<'a> {
    o: &'a FsToolOptions,
    stats: &'a WalkStats,
    /// Only for a provider's walk.
    deadline: Option<Instant>,
    ctx: &'a Ctx,
    stop: AtomicBool,
}

impl Limits<'_> {
    fn stopped(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) || self.ctx.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return true;
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            self.stats.timed_out.store(true, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Counts one more file or directory; false (and the walk stops) past the limit.
    fn count(&self, dir: bool) -> bool {
        let (counter, other) =
            if dir { (&self.stats.dirs, &self.stats.files) } else { (&self.stats.files, &self.stats.dirs) };
        if counter.fetch_add(1, Ordering::Relaxed) + other.load(Ordering::Relaxed) >= self.o.max_files_scanned {
            counter.fetch_sub(1, Ordering::Relaxed);
            self.stats.limit_hit.store(true, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }
}

/// How many threads walk (and match) a directory on disk.
pub(super) fn walk_threads() -> usize {
    crate::worker_threads()
}

/// A tree whose last walk saw at most this many entries is walked again on the calling thread:
/// no thread is started and no entry handed between threads (most workspaces are this small).
const SMALL_TREE: usize = 4096;
/// How many roots' sizes are remembered.
const ROOTS_KEPT: usize = 256;

fn sizes() -> &'static std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, usize>> {
    static S: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, usize>>> =
        std::sync::OnceLock::new();
    S.get_or_init(Default::default)
}

/// With visits that do little (`Want::light`), a tree of up to this many entries is walked on
/// the calling thread: listing is then most of the work, and one thread listing from directory
/// descriptors beats several handing entries to each other, up to tens of thousands of files.
#[cfg(unix)]
const LIGHT_TREE: usize = 32_768;

/// How many entries the last whole walk of `host` saw, if it was walked.
fn known_size(host: &std::path::Path) -> Option<usize> {
    sizes().lock().unwrap_or_else(|p| p.into_inner()).get(host).copied()
}

/// Whether the tree at `host` was small when last walked (a tree never walked is not).
fn small(host: &std::path::Path) -> bool {
    known_size(host).is_some_and(|n| n <= SMALL_TREE)
}

/// Remembers how many entries a whole walk of `host` saw (a walk stopped early says little).
fn remember(host: &std::path::Path, entries: usize, whole: bool) {
    let mut s = sizes().lock().unwrap_or_else(|p| p.into_inner());
    if !whole {
        if entries > SMALL_TREE {
            s.insert(host.to_path_buf(), entries);
        }
        return;
    }
    if s.len() >= ROOTS_KEPT && !s.contains_key(host) {
        s.clear();
    }
    s.insert(host.to_path_buf(), entries);
}

/// Walks the files below `base` (a normalized workspace directory).
pub(super) async fn walk(
    fs: &dyn FsProvider,
    o: &FsToolOptions,
    base: &str,
    ctx: &Ctx,
    filter: Filter,
    visit: Visit,
    want: Want,
) -> Result<WalkStats> {
    if let Some(local) = fs.as_local() {
        let (host, real_base) = local.walk_root(base)?;
        let local = local.clone();
        let base = base.to_string();
        // The blocking pool needs 'static data: the limits are rebuilt from owned copies there.
        let (o2, ctx2) = (o.clone(), ctx.clone());
        let stats = tokio::task::spawn_blocking(move || {
            let stats = WalkStats::default();
            let limits = Limits { o: &o2, stats: &stats, deadline: None, ctx: &ctx2, stop: AtomicBool::new(false) };
            let disk = Disk { local: &local, host: &host, base: &base, real_base: &real_base };
            if want.order == Order::Path {
                walk_disk_ordered(&disk, &limits, &filter, &visit);
            } else {
                walk_disk(&disk, &limits, &filter, &visit, want.light);
            }
            stats
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
        ctx.check_cancel()?;
        return Ok(stats);
    }
    if let Some(mem) = fs.as_memory() {
        let files = mem.files_under(base);
        let base = base.to_string();
        let (o2, ctx2) = (o.clone(), ctx.clone());
        let stats = tokio::task::spawn_blocking(move || {
            let stats = WalkStats::default();
            let limits = Limits { o: &o2, stats: &stats, deadline: None, ctx: &ctx2, stop: AtomicBool::new(false) };
            let mut place = 0;
            for (i, (path, content)) in files.iter().enumerate() {
                if limits.stopped() {
                    break;
                }
                let rel = if base == "." { path.as_str() } else { &path[base.len() + 1..] };
                // The rule applies below the base, as on disk.
                let segs: Vec<&str> = rel.split('/').collect();
                let hidden = (0..segs.len())
                    .any(|i| skipped(segs[i], &join(&base, &segs[..=i].join("/")), i + 1 < segs.len(), &o2));
                if hidden || !filter(rel) {
                    continue;
                }
                if !limits.count(false) {
                    break;
                }
                if !visit(path, rel, Entry::Memory(content), Some(place)) {
                    // Files after this one may be hidden or filtered out: "more" may overstate.
                    stats.more.store(i + 1 < files.len(), Ordering::Relaxed);
                    break;
                }
                place += 1;
            }
            stats
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
        ctx.check_cancel()?;
        return Ok(stats);
    }
    let stats = WalkStats::default();
    let deadline = Some(Instant::now() + Duration::from_millis(o.grep_timeout_ms));
    let limits = Limits { o, stats: &stats, deadline, ctx, stop: AtomicBool::new(false) };
    walk_provider(fs, base, &limits, &filter, &visit, want.sizes).await?;
    ctx.check_cancel()?;
    Ok(stats)
}

/// Any other provider: breadth-first through `readdir`, links never followed.
async fn walk_provider(
    fs: &dyn FsProvider,
    base: &str,
    limits: &Limits<'_>,
    filter: &Filter,
    visit: &Visit,
    sizes: bool,
) -> Result<()> {
    let strip = if base == "." { 0 } else { base.len() + 1 };
    let mut queue = std::collections::VecDeque::from([base.to_string()]);
    'walk: while let Some(dir) = queue.pop_front() {
        if limits.stopped() {
            break;
        }
        let entries = match fs.readdir(&dir).await {
            Ok(entries) => entries,
            Err(e) if e.code == Code::Foreign || dir == base => return Err(e),
            Err(_) => {
                limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        for e in entries {
            if !is_entry_name(&e.name) {
                return Err(Error::new(
                    Code::Io,
                    format!("The provider's readdir({dir}) returned the entry name {:?}, which is not a name.", e.name),
                ));
            }
            let p = join(&dir, &e.name);
            if skipped(&e.name, &p, e.kind == EntryType::Directory, limits.o) {
                continue;
            }
            match e.kind {
                EntryType::Directory => {
                    if !limits.count(true) {
                        break 'walk;
                    }
                    queue.push_back(p);
                }
                EntryType::File => {
                    let rel = &p[strip..];
                    if !filter(rel) {
                        continue;
                    }
                    if limits.stopped() || !limits.count(false) {
                        break 'walk;
                    }
                    let size = if sizes {
                        match fs.stat(&p).await {
                            Ok(s) => s.map(|s| s.size).unwrap_or(0),
                            Err(e) if e.code == Code::Foreign => return Err(e),
                            Err(_) => {
                                limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                        }
                    } else {
                        0
                    };
                    if !visit(&p, rel, Entry::Provider { size }, None) {
                        break 'walk;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The directory on disk a walk starts from: its host path, its workspace path and its real
/// (resolved) workspace path.
#[derive(Clone, Copy)]
struct Disk<'a> {
    local: &'a LocalFs,
    host: &'a std::path::Path,
    base: &'a str,
    real_base: &'a str,
}

/// A directory on disk, in parallel: each thread visits (and, for grep, reads and matches) the
/// files it finds; a tree that was small when last walked, on the calling thread alone.
fn walk_disk(disk: &Disk<'_>, limits: &Limits<'_>, filter: &Filter, visit: &Visit, light: bool) {
    let Disk { local, host, base, real_base } = *disk;
    #[cfg(unix)]
    if known_size(host).is_some_and(|n| n <= if light { LIGHT_TREE } else { SMALL_TREE }) {
        return walk_disk_confined(disk, limits, filter, visit);
    }
    // Elsewhere a small tree is walked on the calling thread by `ignore`'s walker, below.
    #[cfg(not(unix))]
    let _ = light;
    use ignore::{WalkBuilder, WalkState};
    let o = limits.o.clone();
    let seen = AtomicUsize::new(0);
    // `ignore` entries with a `/` are paths from the root: the walk knows paths below the base.
    let real_prefix = if real_base == "." { String::new() } else { format!("{real_base}/") };
    let by_path = o.ignore.iter().any(|i| i.contains('/'));
    let mut walker = WalkBuilder::new(host);
    walker.standard_filters(false).hidden(false).follow_links(false).filter_entry(move |e| {
        if e.depth() == 0 {
            return true;
        }
        let name = e.file_name().to_string_lossy();
        let is_dir = e.file_type().is_some_and(|t| t.is_dir());
        // The path below the root is built only when an `ignore` entry names one.
        let path = if by_path && is_dir {
            let rel =
                e.path().strip_prefix(e.path().ancestors().nth(e.depth()).unwrap_or(e.path())).unwrap_or(e.path());
            format!("{real_prefix}{}", rel.to_string_lossy())
        } else {
            String::new()
        };
        !skipped(&name, &path, is_dir, &o)
    });
    // The walker joins each name to its directory's path: a file's path below the base is the
    // bytes after the base and its separator.
    let host_len = host.as_os_str().len();
    let on_entry = |entry: std::result::Result<ignore::DirEntry, ignore::Error>| {
        seen.fetch_add(1, Ordering::Relaxed);
        if limits.stopped() {
            return WalkState::Quit;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(_) => {
                limits.stats.unreadable.fetch_add(1, Ordering::Relaxed);
                return WalkState::Continue;
            }
        };
        let Some(kind) = entry.file_type() else { return WalkState::Continue };
        if kind.is_dir() {
            return WalkState::Continue;
        }
        if !kind.is_file() {
            return WalkState::Continue;
        }
        let Some(rel) = below(entry.path(), host, host_len) else { return WalkState::Continue };
        let rel = if cfg!(windows) { std::borrow::Cow::Owned(rel.replace('\\', "/")) } else { rel };
        if !filter(&rel) {
            return WalkState::Continue;
        }
        if !limits.count(false) {
            return WalkState::Quit;
        }
        // No copies when the walk starts at the root (the common case): both are `rel`.
        let real = joined(real_base, &rel);
        if visit(&joined(base, &rel), &rel, Entry::Disk { local, real: &real }, None) {
            WalkState::Continue
        } else {
            limits.stop.store(true, Ordering::Relaxed);
            WalkState::Quit
        }
    };
    if small(host) {
        for entry in walker.build() {
            if matches!(on_entry(entry), WalkState::Quit) {
                break;
            }
        }
    } else {
        walker.threads(walk_threads()).build_parallel().run(|| Box::new(&on_entry));
    }
    // A walk stopped anywhere (by the limits, a visit or a cancel) is not whole.
    remember(host, seen.load(Ordering::Relaxed), !limits.stopped());
}

/// A small tree on disk, walked on this thread from directory descriptors (no thread started,
/// no path resolved twice, no name that needs checking afterwards): the same rules as
/// `walk_disk`.
#[cfg(unix)]
fn walk_disk_confined(disk: &Disk<'_>, limits: &Limits<'_>, filter: &Filter, visit: &Visit) {
    let Disk { local, host, base, real_base } = *disk;
    let o = limits.o;
    let real_prefix = if real_base == "." { String::new() } else { format!("{real_base}/") };
    let by_path = o.ignore.iter().any(|i| i.contains('/'));
    let mut enter = |name: &str, rel: &str| {
        if limits.stopped() {
            return false;
        }
        let path = if by_path { format!("{real_prefix}{rel}") } else { String::new() };
        !skipped(name, &path, true, o)
    };
    let mut file = |rel: &str| {
        if limits.stopped() {
            return false;
        }
        let name = rel.rsplit('/').next().unwrap_or(rel);
        if skipped(name, "", false, o) || !filter(rel) {
            return true;
        }
        if !limits.count(false) {
            return false;
        }
        let real = joined(real_base, rel);
        if visit(&joined(base, rel), rel, Entry::Disk { local, real: &real }, None) {
            true
        } else {
            limits.stop.store(true, Ordering::Relaxed);
            false
        }
    };
    let (seen, unreadable) = local.walk_confined(real_base, &mut enter, &mut file);
    limits.stats.unreadable.fetch_add(unreadable, Ordering::Relaxed);
    limits.stats.confined.store(true, Ordering::Relaxed);
    remember(host, seen, !limits.stopped());
}

/// `path` below `host` (`host_len` bytes long), as text.
fn below<'p>(path: &'p std::path::Path, host: &std::path::Path, host_len: usize) -> Option<std::borrow::Cow<'p, str>> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.as_os_str().as_bytes();
        let rest = bytes.strip_prefix(host.as_os_str().as_bytes())?;
        // `host` may end with a separator (`/`) or not.
        let rest = if host_len > 0 && bytes.get(host_len - 1) == Some(&b'/') { rest } else { rest.strip_prefix(b"/")? };
        Some(String::from_utf8_lossy(rest))
    }
    #[cfg(not(unix))]
    {
        let _ = host_len;
        path.strip_prefix(host).ok().map(|r| r.to_string_lossy())
    }
}

#[cfg(test)]
mod tests;
