//! `grep`: lines matching a JavaScript regex, over every provider through the one walker. The
//! matching runs on the blocking pool under a time budget checked before every line; results are
//! kept as the output can show them and sorted by path once at the end.

mod collect;
mod output;

use super::args::{path_prop, skipped_names, str_arg};
use super::format::{fmt_count, fmt_num, format_bytes, plural};
use super::options::{Ctx, FsToolOptions};
use super::write_path::file_bytes;
use super::GREP_LINE_CHARS;
use collect::{Collected, FileHits, Line, Settle};
use output::{Page, Skipped};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::glob::{base_of, compile_glob};
use super::walk::{walk, walk_threads, Entry, Filter, Order, Visit, Want};
use crate::cancel::Cancel;
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::search::jsregex::JsRegex;

/// The arguments of `grep`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": { "type": "string", "minLength": 1, "description": "A JavaScript regular expression (without slashes)." },
            "path": path_prop("File or directory to search (the root when omitted)."),
            "glob": { "type": "string", "description": "Only search files matching this glob, such as `*.ts` or `src/**/*.rs`." },
            "ignore_case": { "type": "boolean", "description": "Match case-insensitively." },
            "literal": { "type": "boolean", "description": "The pattern is plain text, not a regular expression." },
            "context": { "type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match (shown as `path-12- text`, groups separated by `--`)." },
            "limit": { "type": "integer", "minimum": 1, "description": "Most matching lines to show (at most the tool's own limit)." },
            "output_mode": { "type": "string", "enum": ["content", "files_with_matches", "count"], "description": "content (default): the matching lines; files_with_matches: one path a line; count: path:N matching lines per file, then the total." },
            "offset": { "type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "description": "Skip this many results of the mode (lines, files or counts): the cut line names the offset that continues." },
            "multiline": { "type": "boolean", "description": "Let a match span lines (. also matches a newline); the line where each match starts is reported." }
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

/// What the model is told about `grep`, with the limits these options set.
pub(super) fn description(o: &FsToolOptions) -> String {
    format!(
            "Search file contents with a JavaScript regular expression. Returns `path:line: text` for each matching line, at most {} matches and {} characters. Each line is tested on its first {} characters. Binary files and files over {} are skipped, and so are {}; at most {} files are scanned. Patterns with nested repetition like (a+)+ are refused; matching stops after {} ms.",
            fmt_num(o.max_results as u64), fmt_num(o.max_output_chars as u64), fmt_num(GREP_LINE_CHARS as u64),
            format_bytes(o.max_grep_file_bytes), skipped_names(o), fmt_num(o.max_files_scanned as u64), fmt_num(o.grep_timeout_ms)
        )
}

/// What grep returns (`output_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Content,
    Files,
    Count,
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
    context: usize,
    /// A match may span lines; the line where it starts is the one reported.
    multiline: bool,
    /// Once `keep` matches are held, the last path holding one: a file sorting after it cannot
    /// be shown, so it is only counted (no lines built).
    bound: std::sync::RwLock<Option<String>>,
    /// When the search began: the clock `busy` counts from.
    began: Instant,
    /// Per matching thread, when its current file's matching began (nanoseconds after `began`,
    /// plus one; 0 when idle): with `spent_nanos`, the time spent so far, read by the watchdog
    /// while a slow line is still being matched.
    busy: [AtomicU64; BUSY_SLOTS],
    /// In a walk in path order, which files are done: grep stops once the results it shows are
    /// settled (None when every match must be counted).
    settle: Option<Mutex<Settle>>,
    /// The walk stopped early because the results shown were settled: the total is a lower bound.
    enough: AtomicBool,
}

const BUSY_SLOTS: usize = 64;
/// How often the watchdog reads the time spent: an abort or a spent budget is answered within it.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// The furthest `offset` pages: the lines before a page are held while matching, so they are
/// bounded (narrow the search to see past it).
pub const MAX_OFFSET: u64 = 10_000;

/// The most lines of context grep shows around a match.
pub const MAX_CONTEXT: u64 = 10;

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

    /// A walk in path order finished the file at `place`: once the results shown are settled,
    /// no file is started any more (those being matched finish, and count).
    fn settled(&self, place: Option<usize>, count: usize) {
        let (Some(place), Some(settle)) = (place, &self.settle) else { return };
        if settle.lock().unwrap().done(place, count) {
            self.enough.store(true, Ordering::Relaxed);
        }
    }

    /// Whether every file the walk handed out (`visited`) is done, so that the counts are whole
    /// for the files walked.
    fn all_settled(&self, visited: usize) -> bool {
        self.settle.as_ref().is_none_or(|s| {
            let s = s.lock().unwrap();
            s.ahead.is_empty() && s.next == visited
        })
    }

    /// Matches one file's bytes; `None` for a binary file or no match.
    fn search(&self, path: &str, bytes: &[u8]) -> Option<FileHits> {
        if self.stopped() || memchr::memchr(0, bytes).is_some() {
            return None;
        }
        self.scanned.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        // A free slot of this search's own, claimed for the file (none past 64 files at once: that
        // file's time then counts when it ends).
        let since = started.duration_since(self.began).as_nanos() as u64 + 1;
        let slot = (0..BUSY_SLOTS)
            .find(|&i| self.busy[i].compare_exchange(0, since, Ordering::Relaxed, Ordering::Relaxed).is_ok());
        let result = self.search_lines(path, bytes, started);
        if let Some(i) = slot {
            self.busy[i].store(0, Ordering::Relaxed);
        }
        let spent = started.elapsed().as_nanos() as u64;
        if self.spent_nanos.fetch_add(spent, Ordering::Relaxed) + spent > self.budget_nanos {
            self.slow.store(true, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
        }
        result
    }

    /// Whether the matching time so far, the files in progress included, is over the budget.
    fn over_budget_now(&self) -> bool {
        let now = self.began.elapsed().as_nanos() as u64;
        let in_progress: u64 = self
            .busy
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .filter(|&t| t > 0)
            .map(|t| now.saturating_sub(t - 1))
            .sum();
        self.spent_nanos.load(Ordering::Relaxed) + in_progress > self.budget_nanos
    }

    fn slow_error(&self, o: &FsToolOptions) -> Error {
        Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern took longer than {} ms to match ({} scanned). Use a simpler pattern, or narrow path or glob.",
                fmt_count(o.grep_timeout_ms as usize),
                plural(self.scanned.load(Ordering::Relaxed), "file")
            ),
        )
    }

    /// Runs `work` until it ends, the call is aborted, or the budget is spent — whichever comes
    /// first; the last two answer within `WATCH_EVERY` however long a line takes to match. The
    /// work left behind stops at its next check (a line matched, or the engine's step limit)
    /// and its result is dropped.
    async fn race(&self, work: impl std::future::Future<Output = Result<String>>, o: &FsToolOptions) -> Result<String> {
        let cancelled = async {
            match &self.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let watchdog = async {
            loop {
                tokio::time::sleep(WATCH_EVERY).await;
                if self.over_budget_now() {
                    return;
                }
            }
        };
        tokio::select! {
            biased;
            _ = cancelled => {
                self.stop.store(true, Ordering::Relaxed);
                Err(Error::aborted())
            }
            _ = watchdog => {
                self.slow.store(true, Ordering::Relaxed);
                self.stop.store(true, Ordering::Relaxed);
                Err(self.slow_error(o))
            }
            r = work => r,
        }
    }

    /// Adds a file's hits to what is kept, and narrows the bound when that says to.
    fn add(&self, found: &Mutex<Collected>, h: FileHits) {
        let bound = found.lock().unwrap().add(h);
        if bound.is_some() {
            *self.bound.write().unwrap() = bound;
        }
    }

    /// Whether matching must stop: cancelled, stopped elsewhere, or over the time budget (this
    /// file's time so far added to what was spent before it). Sets the flags that say why.
    fn out_of_time(&self, already: u64, started: Instant) -> bool {
        if self.stopped() || already + started.elapsed().as_nanos() as u64 > self.budget_nanos {
            self.slow.store(!self.cancel.as_ref().is_some_and(|c| c.is_cancelled()), Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// How many lines run between checks of the clock. One line of a backtracking pattern can
    /// take milliseconds (a budget checked every thousand lines ran seconds over), so it is
    /// checked before each of them; the linear engine's time per line is bounded by its length.
    fn check_every(&self) -> u32 {
        if self.re.is_backtracking() {
            1
        } else {
            64
        }
    }

    fn search_lines(&self, path: &str, bytes: &[u8], started: Instant) -> Option<FileHits> {
        let keep = if self.bound.read().unwrap().as_deref().is_some_and(|b| path > b) {
            // Files after this path already hold `keep` matches: this one is only counted.
            0
        } else {
            self.keep
        };
        match self.re.prefilter() {
            // The prefilter finds lines; a match that spans lines is not in any one of them.
            _ if self.multiline => self.search_multiline(path, bytes, started, keep),
            Some(pf) if self.context == 0 => self.search_candidates(pf, path, bytes, started, keep),
            Some(pf) if !pf.is_match(bytes) => None,
            _ => self.search_each_line(path, bytes, started, keep),
        }
    }

    /// Without context: the prefilter searches the whole buffer, and only the lines it lands
    /// in are looked at (ripgrep's approach). A line is tested with the pattern unless the
    /// prefilter's match is known to be one (`prefilter_is_exact`); line numbers are counted
    /// only for the lines kept.
    fn search_candidates(
        &self,
        pf: &regex::bytes::Regex,
        path: &str,
        bytes: &[u8],
        started: Instant,
        keep: usize,
    ) -> Option<FileHits> {
        let already = self.spent_nanos.load(Ordering::Relaxed);
        let exact = self.re.prefilter_is_exact();
        let every = self.check_every();
        let mut hits = FileHits { path: path.to_string(), lines: Vec::new(), count: 0 };
        // The number of the line that starts at `numbered_to`.
        let (mut line_no, mut numbered_to) = (1usize, 0usize);
        let mut pos = 0;
        let mut seen = 0u32;
        while pos < bytes.len() {
            let Some(m) = pf.find_at(bytes, pos) else { break };
            let start = m.start();
            // `pos` is always the start of a line; the match lies within one line.
            let line_start = memchr::memrchr(b'\n', &bytes[pos..start]).map_or(pos, |i| pos + i + 1);
            let line_end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            let content_end =
                if line_end > line_start && bytes[line_end - 1] == b'\r' { line_end - 1 } else { line_end };
            pos = line_end + 1;
            seen += 1;
            if seen.is_multiple_of(every) && self.out_of_time(already, started) {
                return None;
            }
            let raw = &bytes[line_start..content_end];
            let text = String::from_utf8_lossy(raw);
            let line = cut_line(&text);
            let valid = matches!(text, std::borrow::Cow::Borrowed(_));
            let matched = if exact && valid && m.end() <= content_end && raw.len() <= GREP_LINE_CHARS {
                true
            } else {
                match self.re.is_match(line) {
                    Ok(m) => m,
                    Err(_) => {
                        self.step_limit.store(true, Ordering::Relaxed);
                        self.stop.store(true, Ordering::Relaxed);
                        return None;
                    }
                }
            };
            if !matched {
                continue;
            }
            hits.count += 1;
            if hits.count <= keep {
                line_no += memchr::memchr_iter(b'\n', &bytes[numbered_to..line_start]).count();
                numbered_to = line_start;
                hits.lines.push(Line { n: line_no, text: line.to_string(), matched: true });
            }
        }
        (hits.count > 0).then_some(hits)
    }

    /// Over the whole file, for `multiline`: each line where a match starts is a matching line
    /// (counted once), shown with its context.
    fn search_multiline(&self, path: &str, bytes: &[u8], started: Instant, keep: usize) -> Option<FileHits> {
        let text = String::from_utf8_lossy(bytes);
        let raw = text.as_bytes();
        let already = self.spent_nanos.load(Ordering::Relaxed);
        let every = self.check_every();
        let (mut line_no, mut counted_to, mut last_line, mut seen) = (1usize, 0usize, 0usize, 0u32);
        let (mut count, mut kept, mut out_of_time) = (0usize, Vec::new(), false);
        let found = self.re.for_each_start(&text, |start| {
            seen += 1;
            if seen.is_multiple_of(every) && (self.stopped() || self.out_of_time(already, started)) {
                out_of_time = true;
                return false;
            }
            line_no += memchr::memchr_iter(b'\n', &raw[counted_to..start]).count();
            counted_to = start;
            if line_no != last_line {
                last_line = line_no;
                count += 1;
                if count <= keep {
                    kept.push(line_no);
                }
            }
            true
        });
        if found.is_err() {
            self.step_limit.store(true, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            return None;
        }
        if out_of_time || count == 0 {
            return None;
        }
        let mut hits = FileHits { path: path.to_string(), lines: Vec::new(), count };
        if !kept.is_empty() {
            // The kept lines and their context: each line once, in order (the ranges around the
            // sorted matches, merged), never a pass over every line per match.
            let body = text.strip_suffix('\n').unwrap_or(&text);
            let all: Vec<&str> = body.split('\n').map(|l| cut_line(l.strip_suffix('\r').unwrap_or(l))).collect();
            let c = self.context;
            let mut next = 1; // the first line not yet shown
            for &m in &kept {
                let from = m.saturating_sub(c).max(1).max(next);
                let to = (m + c).min(all.len());
                for n in from..=to {
                    let matched = kept.binary_search(&n).is_ok();
                    hits.lines.push(Line { n, text: all[n - 1].to_string(), matched });
                }
                next = next.max(to + 1);
            }
        }
        Some(hits)
    }

    /// Line by line, for context and for patterns without a prefilter (they can match an
    /// empty line).
    fn search_each_line(&self, path: &str, bytes: &[u8], started: Instant, keep: usize) -> Option<FileHits> {
        let text = String::from_utf8_lossy(bytes);
        let mut hits = FileHits { path: path.to_string(), lines: Vec::new(), count: 0 };
        let already = self.spent_nanos.load(Ordering::Relaxed);
        let every = self.check_every() as usize;
        // A final newline ends the last line; it does not start another.
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let all: Vec<&str> = body.split('\n').map(|l| cut_line(l.strip_suffix('\r').unwrap_or(l))).collect();
        let mut shown_to = 0; // lines before this index are already in `hits.lines`
        let mut last_match: Option<usize> = None;
        for (i, line) in all.iter().enumerate() {
            if i.is_multiple_of(every) && self.out_of_time(already, started) {
                return None;
            }
            match self.re.is_match(line) {
                Ok(true) => {
                    hits.count += 1;
                    if hits.count <= keep {
                        // The context before (not shown yet), the match; the context after is
                        // added as the lines come, below.
                        for (j, before) in
                            all.iter().enumerate().take(i).skip(i.saturating_sub(self.context).max(shown_to))
                        {
                            hits.lines.push(Line { n: j + 1, text: before.to_string(), matched: false });
                        }
                        hits.lines.push(Line { n: i + 1, text: line.to_string(), matched: true });
                        shown_to = i + 1;
                        last_match = Some(i + 1);
                    }
                }
                Ok(false) => {
                    if let Some(m) = last_match.filter(|_| self.context > 0) {
                        if hits.count <= keep && i < m + self.context && i >= shown_to {
                            hits.lines.push(Line { n: i + 1, text: line.to_string(), matched: false });
                            shown_to = i + 1;
                        }
                    }
                }
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
    let multiline = args.get("multiline").and_then(Value::as_bool).unwrap_or(false);
    let mut flags = String::new();
    if args.get("ignore_case").and_then(Value::as_bool).unwrap_or(false) {
        flags.push('i');
    }
    if multiline {
        // `.` matches a newline, and `^`/`$` still match at each line's ends.
        flags.push_str("ms");
    }
    let flags = flags.as_str();
    let mode = match str_arg(args, "output_mode") {
        Some("files_with_matches") => Mode::Files,
        Some("count") => Mode::Count,
        _ => Mode::Content,
    };
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let literal;
    let source = if args.get("literal").and_then(Value::as_bool).unwrap_or(false) {
        literal = escape_literal(pattern);
        &literal
    } else {
        pattern
    };
    let re = if multiline { JsRegex::for_positions(source, flags)? } else { JsRegex::new(source, flags)? };
    let shown = args.get("limit").and_then(Value::as_u64).map_or(o.max_results, |l| (l as usize).min(o.max_results));
    // The lines kept while matching: the page's and those before it; none when only counting.
    let keep = if mode == Mode::Content { offset.saturating_add(shown) } else { 0 };
    let context = args.get("context").and_then(Value::as_u64).unwrap_or(0) as usize;
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
        keep,
        context,
        multiline,
        bound: Default::default(),
        began: Instant::now(),
        busy: std::array::from_fn(|_| AtomicU64::new(0)),
        // Counting needs every file; the other modes show the first results in path order.
        settle: (mode != Mode::Count).then(|| {
            Mutex::new(Settle {
                needed: offset.saturating_add(shown),
                files: mode == Mode::Files,
                next: 0,
                before: 0,
                ahead: Default::default(),
            })
        }),
        enough: AtomicBool::new(false),
    });
    let work = async {
        let too_large = Arc::new(Mutex::new(Skipped::default()));
        let found = Arc::new(Mutex::new(Collected::new(keep, context, mode != Mode::Content)));
        let mut notes = Vec::new();
        if kind == EntryType::File {
            let size = fs.stat(&base).await?.map(|s| s.size).unwrap_or(0);
            if size > o.max_grep_file_bytes {
                too_large.lock().unwrap().add(&base);
            } else {
                let bytes = file_bytes(fs, &base).await?;
                let (g, b) = (grep.clone(), base.clone());
                let hit = tokio::task::spawn_blocking(move || g.search(&b, &bytes))
                    .await
                    .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
                if let Some(h) = hit {
                    grep.add(&found, h);
                }
            }
        } else if kind != EntryType::Directory {
            return Err(Error::new(Code::NotAFile, format!("{base} is neither a file nor a directory.")));
        } else {
            // `glob` filters by the path below the base when it has a `/`, else by the file name.
            let filter: Filter = Arc::new(move |rel: &str| match &file_glob {
                None => true,
                Some((m, true)) => m.is_match(rel),
                Some((m, false)) => m.is_match(rel.rsplit('/').next().unwrap_or(rel)),
            });
            // On disk and in memory the walker's threads read and match; a provider's files are read
            // afterwards through its interface, and matched on the blocking pool.
            let pending = Arc::new(Mutex::new(Vec::new()));
            let (g, f2, big, p2) = (grep.clone(), found.clone(), too_large.clone(), pending.clone());
            let limit = o.max_grep_file_bytes;
            let visit: Visit = Arc::new(move |path, _rel, entry, place| {
                if g.stopped() || g.enough.load(Ordering::Relaxed) {
                    return false;
                }
                let size = match &entry {
                    // On disk the size comes from the opened file (one `fstat`, no `lstat` first).
                    Entry::Disk { .. } => 0,
                    Entry::Provider { size } => *size,
                    Entry::Memory(bytes) => bytes.len() as u64,
                };
                if size > limit {
                    big.lock().unwrap().add(path);
                    g.settled(place, 0);
                    return !g.enough.load(Ordering::Relaxed);
                }
                let hit = match entry {
                    Entry::Disk { local, real } => {
                        READ_BUFFER.with_borrow_mut(|buf| match read_walked(local, real, buf, limit) {
                            Ok(true) => g.search(path, buf),
                            Ok(false) => {
                                big.lock().unwrap().add(path);
                                None
                            }
                            Err(_) => None,
                        })
                    }
                    Entry::Memory(bytes) => g.search(path, bytes),
                    Entry::Provider { .. } => {
                        p2.lock().unwrap().push(path.to_string());
                        None
                    }
                };
                let count = hit.as_ref().map_or(0, |h| h.count);
                if let Some(h) = hit {
                    g.add(&f2, h);
                }
                g.settled(place, count);
                !g.enough.load(Ordering::Relaxed)
            });
            let order = if grep.settle.is_some() { Order::Path } else { Order::Any };
            let stats = walk(fs, o, &base, ctx, filter, visit, Want { sizes: true, order }).await?;
            let pending = std::mem::take(&mut *pending.lock().unwrap());
            for path in pending {
                if grep.stopped() {
                    break;
                }
                let bytes = match file_bytes(fs, &path).await {
                    Ok(bytes) => bytes,
                    Err(e) if e.code == Code::Foreign => return Err(e),
                    Err(_) => {
                        stats.unreadable.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                // Matching runs on the blocking pool, never on the async threads the shell and the
                // broker also need.
                let g = grep.clone();
                let hit = tokio::task::spawn_blocking(move || g.search(&path, &bytes))
                    .await
                    .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
                if let Some(h) = hit {
                    grep.add(&found, h);
                }
            }
            if grep.slow.load(Ordering::Relaxed) || grep.step_limit.load(Ordering::Relaxed) {
                // reported below
            } else if let Some(e) = stats.timeout(o, "grep") {
                return Err(e);
            }
            notes = stats.notes(o);
            // Stopped once the results shown were settled: the total is exact only when no file
            // was left unsearched.
            let whole = !stats.more.load(Ordering::Relaxed) && grep.all_settled(stats.files.load(Ordering::Relaxed));
            if whole {
                grep.enough.store(false, Ordering::Relaxed);
            }
        }
        ctx.check_cancel()?;
        if grep.step_limit.load(Ordering::Relaxed) {
            return Err(Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern needed more backtracking steps on one line than the limit allows ({} scanned). Backreferences and lookaround backtrack; use a simpler pattern.",
                plural(grep.scanned.load(Ordering::Relaxed), "file")
            ),
        ));
        }
        if grep.slow.load(Ordering::Relaxed) {
            return Err(grep.slow_error(o));
        }
        let mut results = std::mem::replace(&mut *found.lock().unwrap(), Collected::new(0, 0, false));
        results.counted = !grep.enough.load(Ordering::Relaxed);
        let skipped = std::mem::take(&mut *too_large.lock().unwrap());
        Ok(output::format(results, o, mode, Page { offset, keep: shown }, &notes, skipped))
    };
    grep.race(work, o).await
}

thread_local! {
    /// Each walker thread reads its files into one buffer, reused: no allocation per file.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Reads a regular file a walk found on disk (never a FIFO or device that took its place) into
/// `buf`; false when it is over `limit` bytes (then it is not read).
fn read_walked(local: &crate::fs::local::LocalFs, real: &str, buf: &mut Vec<u8>, limit: u64) -> std::io::Result<bool> {
    use std::io::Read;
    let file = local.open_walked_file(real)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > limit {
        return Ok(false);
    }
    buf.clear();
    // One byte more than the size, so the read that finds the end needs no growth.
    buf.reserve(meta.len() as usize + 1);
    file.take(limit + 1).read_to_end(buf)?;
    Ok(buf.len() as u64 <= limit)
}

/// A JavaScript regex that matches `text` literally.
fn escape_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
