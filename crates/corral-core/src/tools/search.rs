//! `glob` and `grep`: one engine over every provider. A local directory is walked in parallel
//! (`ignore`'s walker, links never followed), an in-memory tree directly, and any other provider
//! through its `readdir`/`stat`/`readFile`. Matching uses the JavaScript-regex engine
//! (`crate::search::jsregex`) under a time budget; results are sorted once at the end.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use super::{
    checked_path, fmt_count, format_bytes, kind_of, push_line, str_arg, Ctx, FsToolOptions, GREP_LINE_CHARS,
    MAX_GREP_FILE_BYTES,
};
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;
use crate::search::jsregex::JsRegex;
use crate::shell::Cancel;

fn compile_glob(pattern: &str) -> Result<GlobMatcher> {
    let unified = pattern.replace('\\', "/");
    if unified.starts_with('/') || unified.split('/').any(|s| s == "..") {
        return Err(Error::new(
            Code::OutsideWorkspace,
            format!("Glob pattern is outside the workspace: {pattern} (use a pattern relative to path, without '..' or a leading '/')"),
        ));
    }
    if pattern.len() > MAX_GLOB_BYTES {
        return Err(Error::new(
            Code::InvalidPattern,
            format!("Invalid glob pattern: it is {} bytes long; the limit is {}.", pattern.len(), MAX_GLOB_BYTES),
        ));
    }
    let unified = unified.trim_start_matches("./").to_string();
    let invalid = |why: String| Error::new(Code::InvalidPattern, format!("Invalid glob pattern {pattern}: {why}"));
    // globset panics on a glob whose regex outgrows its size limit: that is a bad pattern too.
    std::panic::catch_unwind(|| GlobBuilder::new(&unified).literal_separator(true).build().map(|g| g.compile_matcher()))
        .map_err(|_| invalid("it is too complex".to_string()))?
        .map_err(|e| invalid(e.kind().to_string()))
}

/// The longest glob accepted (`glob`'s pattern, grep's `glob`).
pub const MAX_GLOB_BYTES: usize = 1024;

/// A workspace path for a file found `rel` below the search base.
fn join(base: &str, rel: &str) -> String {
    if base == "." {
        rel.to_string()
    } else if rel.is_empty() {
        base.to_string()
    } else {
        format!("{base}/{rel}")
    }
}

/// Whether any directory segment of `rel` (below the base) is an ignored name, or any segment
/// a denied one.
fn excluded(rel: &str, o: &FsToolOptions) -> bool {
    let segs: Vec<&str> = rel.split('/').collect();
    let last = segs.len() - 1;
    segs.iter().enumerate().any(|(i, s)| skipped(s, i < last, &o.ignore, &o.deny))
}

/// Whether a walk leaves out an entry: a denied name, or a directory named in `ignore`. The one
/// rule of every walk (on disk, in memory, through a provider).
fn skipped(name: &str, is_dir: bool, ignore: &[String], deny: &[String]) -> bool {
    name_is_denied(name, deny) || (is_dir && ignore.iter().any(|i| i == name))
}

/// What a walk reports besides its files.
#[derive(Default)]
struct WalkStats {
    limit_hit: AtomicBool,
    visited: AtomicUsize,
}

/// The search base: a directory to walk, or one file.
async fn base_of(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<(String, EntryType)> {
    let base = checked_path(fs, o, str_arg(args, "path").unwrap_or(".")).await?;
    match kind_of(fs, &base).await? {
        None => Err(Error::not_found(&base)),
        Some(kind) => Ok((base, kind)),
    }
}

/// Lists the files under `base` (workspace paths with their sizes), skipping ignored directories,
/// denied names and links, visiting at most `max_files_scanned` files.
type Keep = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// `keep(rel)` chooses, by the path below `base`, which of the visited files are returned; every
/// visited file counts toward `maxFilesScanned`. Sizes are read only with `sizes` (on disk they
/// cost a stat each).
async fn list_files(
    fs: &dyn FsProvider,
    o: &FsToolOptions,
    base: &str,
    ctx: &Ctx,
    stats: &WalkStats,
    keep: Keep,
    sizes: bool,
) -> Result<Vec<(String, u64)>> {
    let max = o.max_files_scanned;
    if let Some(local) = fs.as_local() {
        let host = local.walk_root(base)?.0;
        let o2 = o.clone();
        let cancel = ctx.cancel.clone();
        let found = Arc::new(Mutex::new(Vec::new()));
        let f2 = found.clone();
        let visited = Arc::new(AtomicUsize::new(0));
        let v2 = visited.clone();
        let limit = Arc::new(AtomicBool::new(false));
        let l2 = limit.clone();
        let base_s = base.to_string();
        let keep = keep.clone();
        tokio::task::spawn_blocking(move || {
            walk_local(&host, &o2, |rel, entry| {
                if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                    return false;
                }
                if v2.fetch_add(1, Ordering::Relaxed) >= max {
                    l2.store(true, Ordering::Relaxed);
                    return false;
                }
                if keep(rel) {
                    let size = if sizes { entry.metadata().map(|m| m.len()).unwrap_or(0) } else { 0 };
                    f2.lock().unwrap().push((join(&base_s, rel), size));
                }
                true
            })
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
        ctx.check_cancel()?;
        stats.visited.store(visited.load(Ordering::Relaxed).min(max), Ordering::Relaxed);
        stats.limit_hit.store(limit.load(Ordering::Relaxed), Ordering::Relaxed);
        let v = std::mem::take(&mut *found.lock().unwrap());
        return Ok(v);
    }
    if let Some(mem) = fs.as_memory() {
        let mut out = Vec::new();
        let mut visited = 0usize;
        for (path, content) in mem.files_under(base) {
            let rel = if base == "." { path.as_str() } else { &path[base.len() + 1..] };
            if excluded(rel, o) {
                continue;
            }
            if visited >= max {
                stats.limit_hit.store(true, Ordering::Relaxed);
                break;
            }
            visited += 1;
            if keep(rel) {
                out.push((path.clone(), content.len() as u64));
            }
        }
        stats.visited.store(visited, Ordering::Relaxed);
        return Ok(out);
    }
    // Any other provider: breadth-first through readdir, links never followed. Directories count
    // toward maxFilesScanned like files, and the walk itself has the time budget, so a provider
    // that invents directories forever is stopped.
    let mut out = Vec::new();
    let mut visited = 0usize;
    let strip = if base == "." { 0 } else { base.len() + 1 };
    let deadline = Instant::now() + std::time::Duration::from_millis(o.grep_timeout_ms);
    let mut queue = std::collections::VecDeque::from([base.to_string()]);
    'walk: while let Some(dir) = queue.pop_front() {
        ctx.check_cancel()?;
        if Instant::now() > deadline {
            return Err(Error::new(
                Code::Timeout,
                format!(
                    "The search stopped: listing the directories took longer than {} ms ({} files scanned). Narrow path.",
                    fmt_count(o.grep_timeout_ms as usize),
                    fmt_count(visited)
                ),
            ));
        }
        for e in fs.readdir(&dir).await? {
            if e.name.is_empty() || e.name == "." || e.name == ".." || e.name.contains(['/', '\\', '\0']) {
                return Err(Error::new(
                    Code::Io,
                    format!("The provider's readdir({dir}) returned the entry name {:?}, which is not a name.", e.name),
                ));
            }
            if skipped(&e.name, e.kind == EntryType::Directory, &o.ignore, &o.deny) {
                continue;
            }
            let p = join(&dir, &e.name);
            if matches!(e.kind, EntryType::Directory | EntryType::File) {
                if visited >= max {
                    stats.limit_hit.store(true, Ordering::Relaxed);
                    break 'walk;
                }
                visited += 1;
            }
            match e.kind {
                EntryType::Directory => queue.push_back(p),
                EntryType::File => {
                    if keep(&p[strip..]) {
                        let size = if sizes { fs.stat(&p).await?.map(|s| s.size).unwrap_or(0) } else { 0 };
                        out.push((p, size));
                    }
                }
                _ => {}
            }
        }
    }
    stats.visited.store(visited, Ordering::Relaxed);
    Ok(out)
}

/// How many threads walk (and match) a directory on disk.
fn walk_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).min(8)
}

/// Walks a directory on disk in parallel; `visit(rel, entry)` returns false to stop the walk.
fn walk_local(host: &std::path::Path, o: &FsToolOptions, visit: impl Fn(&str, &ignore::DirEntry) -> bool + Sync) {
    use ignore::{WalkBuilder, WalkState};
    let ignore = o.ignore.clone();
    let deny = o.deny.clone();
    let threads = walk_threads();
    let walker = WalkBuilder::new(host)
        .standard_filters(false)
        .hidden(false)
        .follow_links(false)
        .threads(threads)
        .filter_entry(move |e| {
            if e.depth() == 0 {
                return true;
            }
            !skipped(&e.file_name().to_string_lossy(), e.file_type().is_some_and(|t| t.is_dir()), &ignore, &deny)
        })
        .build_parallel();
    let visit = &visit;
    walker.run(|| {
        Box::new(move |entry| {
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let Ok(rel) = entry.path().strip_prefix(host) else { return WalkState::Continue };
            let rel = rel.to_string_lossy();
            let rel = if cfg!(windows) { std::borrow::Cow::Owned(rel.replace('\\', "/")) } else { rel };
            if visit(&rel, &entry) {
                WalkState::Continue
            } else {
                WalkState::Quit
            }
        })
    });
}

fn limit_note(stats: &WalkStats, o: &FsToolOptions) -> Option<String> {
    stats.limit_hit.load(Ordering::Relaxed).then(|| {
        format!(
            "(Stopped after scanning {} files (maxFilesScanned); there may be more. Narrow path or the pattern.)",
            fmt_count(o.max_files_scanned)
        )
    })
}

pub(super) async fn glob(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let pattern = str_arg(args, "pattern").unwrap_or_default();
    let matcher = compile_glob(pattern)?;
    let (base, kind) = base_of(fs, o, args).await?;
    if kind != EntryType::Directory {
        return Err(Error::new(Code::NotAFile, format!("{base} is not a directory; glob searches a directory.")));
    }
    let stats = WalkStats::default();
    let files = list_files(fs, o, &base, ctx, &stats, Arc::new(move |rel| matcher.is_match(rel)), false).await?;
    let mut hits: Vec<String> = files.into_iter().map(|(p, _)| p).collect();
    hits.sort();
    if let Some(local) = fs.as_local() {
        // What is shown must still be there below the root, reached without a link: a directory
        // swapped for a link while the walker listed it would otherwise show outside names.
        let real_base = local.walk_root(&base)?.1;
        let strip = if base == "." { 0 } else { base.len() + 1 };
        let mut checked = 0;
        hits.retain(|h| {
            if checked >= o.max_results {
                return true;
            }
            checked += 1;
            local.open_walked_file(&join(&real_base, &h[strip..])).is_ok()
        });
    }
    let total = hits.len();
    let mut out = String::new();
    let (mut shown, mut chars) = (0, 0);
    for h in hits.iter().take(o.max_results) {
        if !push_line(&mut out, &mut chars, h, o.max_output_chars) {
            break;
        }
        shown += 1;
    }
    if total == 0 {
        out.push_str("No files matched.\n");
    } else if shown < total {
        out.push_str(&format!(
            "(Showing the first {} of {} matching files. Narrow the pattern or path.)\n",
            fmt_count(shown),
            fmt_count(total)
        ));
    }
    if let Some(n) = limit_note(&stats, o) {
        out.push_str(&n);
        out.push('\n');
    }
    out.pop();
    Ok(out)
}

/// The matching side of grep: the regex, the time budget and the counters, shared by threads.
struct Grep {
    re: JsRegex,
    budget_nanos: u64,
    spent_nanos: AtomicU64,
    scanned: AtomicUsize,
    slow: AtomicBool,
    /// A line needed more backtracking steps than the engine allows (backreferences, lookaround).
    step_limit: AtomicBool,
    stop: AtomicBool,
    cancel: Option<Cancel>,
    keep: usize,
}

struct FileHits {
    path: String,
    lines: Vec<(usize, String)>,
    count: usize,
}

/// The hits kept for the output: every match is counted, but only lines that can still be among
/// the first `keep` in path order are kept, so memory follows the output, not the match set.
struct Collected {
    files: Vec<FileHits>,
    kept: usize,
    total: usize,
    keep: usize,
}

impl Collected {
    fn new(keep: usize) -> Self {
        Collected { files: Vec::new(), kept: 0, total: 0, keep }
    }

    fn add(&mut self, h: FileHits) {
        self.total += h.count;
        self.kept += h.lines.len();
        self.files.push(h);
        if self.kept > 2 * self.keep.max(64) {
            self.prune();
        }
    }

    /// Sorts by path and keeps the first `keep` lines.
    fn prune(&mut self) {
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut n = 0;
        let mut cut = self.files.len();
        for (i, f) in self.files.iter_mut().enumerate() {
            if n >= self.keep {
                cut = i;
                break;
            }
            f.lines.truncate(self.keep - n);
            n += f.lines.len();
        }
        self.files.truncate(cut);
        self.kept = n;
    }
}

/// A line cut to its first `GREP_LINE_CHARS` characters.
fn cut_line(line: &str) -> &str {
    if line.len() <= GREP_LINE_CHARS {
        return line;
    }
    match line.char_indices().nth(GREP_LINE_CHARS) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

impl Grep {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.cancel.as_ref().is_some_and(|c| c.is_cancelled())
    }

    /// Matches one file's bytes; `None` for a binary file or no match.
    fn search(&self, path: &str, bytes: &[u8]) -> Option<FileHits> {
        if self.stopped() || memchr::memchr(0, bytes).is_some() {
            return None;
        }
        self.scanned.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let result = self.search_lines(path, bytes, started);
        let spent = started.elapsed().as_nanos() as u64;
        if self.spent_nanos.fetch_add(spent, Ordering::Relaxed) + spent > self.budget_nanos {
            self.slow.store(true, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
        }
        result
    }

    fn search_lines(&self, path: &str, bytes: &[u8], started: Instant) -> Option<FileHits> {
        if let Some(pf) = self.re.prefilter() {
            if !pf.is_match(bytes) {
                return None;
            }
        }
        let text = String::from_utf8_lossy(bytes);
        let mut hits = FileHits { path: path.to_string(), lines: Vec::new(), count: 0 };
        let already = self.spent_nanos.load(Ordering::Relaxed);
        // A final newline ends the last line; it does not start another.
        let body = text.strip_suffix('\n').unwrap_or(&text);
        for (i, line) in body.split('\n').enumerate() {
            // Time and cancellation are checked before every line: one line of a slow pattern can
            // take milliseconds, and a budget checked every thousand lines ran seconds over.
            if self.stopped() || already + started.elapsed().as_nanos() as u64 > self.budget_nanos {
                self.slow.store(!self.cancel.as_ref().is_some_and(|c| c.is_cancelled()), Ordering::Relaxed);
                self.stop.store(true, Ordering::Relaxed);
                return None;
            }
            let line = line.strip_suffix('\r').unwrap_or(line);
            let line = cut_line(line);
            match self.re.is_match(line) {
                Ok(true) => {
                    hits.count += 1;
                    if hits.lines.len() < self.keep {
                        hits.lines.push((i + 1, line.to_string()));
                    }
                }
                Ok(false) => {}
                Err(_) => {
                    self.step_limit.store(true, Ordering::Relaxed);
                    self.stop.store(true, Ordering::Relaxed);
                    return None;
                }
            }
        }
        (hits.count > 0).then_some(hits)
    }
}

pub(super) async fn grep(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let pattern = str_arg(args, "pattern").unwrap_or_default();
    let flags = if args.get("ignore_case").and_then(Value::as_bool).unwrap_or(false) { "i" } else { "" };
    let re = JsRegex::new(pattern, flags)?;
    let file_glob = match str_arg(args, "glob") {
        Some(g) if !g.is_empty() => Some((compile_glob(g)?, g.replace('\\', "/").contains('/'))),
        _ => None,
    };
    let (base, kind) = base_of(fs, o, args).await?;
    let grep = Arc::new(Grep {
        re,
        // Matching time is summed over the files; a parallel walk matches on several threads
        // at once, so its budget is the time limit on each of them.
        budget_nanos: o.grep_timeout_ms.saturating_mul(1_000_000).saturating_mul(if fs.as_local().is_some() {
            walk_threads() as u64
        } else {
            1
        }),
        spent_nanos: AtomicU64::new(0),
        scanned: AtomicUsize::new(0),
        slow: AtomicBool::new(false),
        step_limit: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        cancel: ctx.cancel.clone(),
        keep: o.max_results,
    });
    let strip = if base == "." || kind != EntryType::Directory { 0 } else { base.len() + 1 };
    let glob_ok = move |path: &str| match &file_glob {
        None => true,
        Some((m, true)) => m.is_match(&path[strip.min(path.len())..]),
        Some((m, false)) => m.is_match(path.rsplit('/').next().unwrap_or(path)),
    };
    let stats = WalkStats::default();
    let too_large = AtomicUsize::new(0);
    let mut results = Collected::new(o.max_results);
    if kind == EntryType::File {
        let size = fs.stat(&base).await?.map(|s| s.size).unwrap_or(0);
        if size > MAX_GREP_FILE_BYTES {
            too_large.fetch_add(1, Ordering::Relaxed);
        } else {
            let bytes = read_bytes(fs, &base).await?;
            let g = grep.clone();
            let b = base.clone();
            let hit = tokio::task::spawn_blocking(move || g.search(&b, &bytes))
                .await
                .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
            if let Some(h) = hit {
                results.add(h);
            }
        }
    } else if kind != EntryType::Directory {
        return Err(Error::new(Code::NotAFile, format!("{base} is neither a file nor a directory.")));
    } else if let Some(local) = fs.as_local() {
        // Walk and match in the same parallel pass: each thread reads and searches its files.
        // Each file is opened below the root entering no link, by its resolved path: a directory
        // swapped for a link since the walker listed it is not entered.
        let (host, real_base) = local.walk_root(&base)?;
        let local = local.clone();
        let o2 = o.clone();
        let g = grep.clone();
        let found = Arc::new(Mutex::new(Collected::new(o.max_results)));
        let f2 = found.clone();
        let big = Arc::new(AtomicUsize::new(0));
        let big2 = big.clone();
        let visited = Arc::new(AtomicUsize::new(0));
        let v2 = visited.clone();
        let limit = Arc::new(AtomicBool::new(false));
        let l2 = limit.clone();
        let max = o.max_files_scanned;
        let base_s = base.clone();
        tokio::task::spawn_blocking(move || {
            walk_local(&host, &o2, |rel, entry| {
                if g.stopped() {
                    return false;
                }
                let path = join(&base_s, rel);
                if !glob_ok(&path) {
                    return true;
                }
                if v2.fetch_add(1, Ordering::Relaxed) >= max {
                    l2.store(true, Ordering::Relaxed);
                    return false;
                }
                let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
                if size > MAX_GREP_FILE_BYTES {
                    big2.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                let Ok(bytes) = read_walked(&local, &join(&real_base, rel)) else { return true };
                if let Some(h) = g.search(&path, &bytes) {
                    f2.lock().unwrap().add(h);
                }
                true
            })
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
        stats.limit_hit.store(limit.load(Ordering::Relaxed), Ordering::Relaxed);
        too_large.store(big.load(Ordering::Relaxed), Ordering::Relaxed);
        results = std::mem::replace(&mut *found.lock().unwrap(), Collected::new(0));
    } else {
        let files = list_files(fs, o, &base, ctx, &stats, Arc::new(|_| true), true).await?;
        for (path, size) in files {
            if grep.stopped() {
                break;
            }
            if !glob_ok(&path) {
                continue;
            }
            if size > MAX_GREP_FILE_BYTES {
                too_large.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let bytes = read_bytes(fs, &path).await?;
            // Matching runs on the blocking pool, never on the async threads the shell and the
            // broker also need.
            let g = grep.clone();
            let hit = tokio::task::spawn_blocking(move || g.search(&path, &bytes))
                .await
                .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
            if let Some(h) = hit {
                results.add(h);
            }
        }
    }
    ctx.check_cancel()?;
    if grep.step_limit.load(Ordering::Relaxed) {
        return Err(Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern needed more backtracking steps on one line than the limit allows ({} files scanned). Backreferences and lookaround backtrack; use a simpler pattern.",
                fmt_count(grep.scanned.load(Ordering::Relaxed))
            ),
        ));
    }
    if grep.slow.load(Ordering::Relaxed) {
        return Err(Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern took longer than {} ms to match ({} files scanned). Use a simpler pattern, or narrow path or glob.",
                fmt_count(o.grep_timeout_ms as usize),
                fmt_count(grep.scanned.load(Ordering::Relaxed))
            ),
        ));
    }
    Ok(format_hits(results, o, &stats, too_large.load(Ordering::Relaxed)))
}

/// Reads a regular file a walk found on disk (never a FIFO or device that took its place).
fn read_walked(local: &crate::fs::local::LocalFs, real: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let file = local.open_walked_file(real)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_GREP_FILE_BYTES + 1).read_to_end(&mut out)?;
    Ok(out)
}

async fn read_bytes(fs: &dyn FsProvider, path: &str) -> Result<Vec<u8>> {
    if fs.caps().read_bytes {
        fs.read_file_bytes(path).await
    } else {
        fs.read_file(path).await.map(String::into_bytes)
    }
}

fn format_hits(mut results: Collected, o: &FsToolOptions, stats: &WalkStats, too_large: usize) -> String {
    results.prune();
    let total = results.total;
    let results = results.files;
    let mut out = String::new();
    let mut shown = 0usize;
    let mut chars = 0usize;
    'files: for file in &results {
        for (n, text) in &file.lines {
            if shown >= o.max_results {
                break 'files;
            }
            if !push_line(&mut out, &mut chars, &format!("{}:{}: {}", file.path, n, text), o.max_output_chars) {
                break 'files;
            }
            shown += 1;
        }
    }
    if total == 0 {
        out.push_str("No matches found.\n");
    } else if shown < total {
        out.push_str(&format!(
            "(Showing the first {} of {} matches. Narrow the pattern, path or glob to see the rest.)\n",
            fmt_count(shown),
            fmt_count(total)
        ));
    }
    if too_large > 0 {
        out.push_str(&if too_large == 1 {
            format!("(1 file over {} was skipped.)\n", format_bytes(MAX_GREP_FILE_BYTES))
        } else {
            format!("({} files over {} were skipped.)\n", fmt_count(too_large), format_bytes(MAX_GREP_FILE_BYTES))
        });
    }
    if let Some(n) = limit_note(stats, o) {
        out.push_str(&n);
        out.push('\n');
    }
    out.pop();
    out
}
