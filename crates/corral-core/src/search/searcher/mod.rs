//! The searcher: matching a JavaScript regex over files' lines, as ripgrep splits it (the matcher
//! is `jsregex`, the printer `printer.rs`). A file is matched on the thread that read it, under a
//! time budget checked before every line (or every 64 lines on the linear engine) and a watchdog
//! that answers an abort or a spent budget while one slow line is still matching; the lines that
//! can still be shown are kept (`collect.rs`), and in a walk in path order the search stops once
//! the results shown are settled.

mod collect;

pub(crate) use collect::{Collected, FileHits, Line, Settle};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::jsregex::JsRegex;
use crate::cancel::Cancel;
use crate::error::{Code, Error, Result};
use crate::text::{fmt_count, plural};

/// Each line is tested on its first this many characters.
pub const LINE_CHARS: usize = 2000;

/// What a search is asked to do.
pub(crate) struct Config {
    pub re: JsRegex,
    /// The matching time allowed, summed over the threads that match.
    pub budget_nanos: u64,
    pub cancel: Option<Cancel>,
    /// How many matching lines to keep (the page and those before it; 0 when only counting).
    pub keep: usize,
    /// Lines of context around each kept match.
    pub context: usize,
    /// A match may span lines.
    pub multiline: bool,
    /// In a walk in path order: how many results settle the page, and whether results are files
    /// (not lines). `None` when every match must be counted.
    pub settle: Option<(usize, bool)>,
    /// The lines kept are shown redacted in this session: each file with kept lines is redacted
    /// whole, before its lines are cut.
    pub redact: Option<(std::sync::Arc<crate::redact::Redactor>, String)>,
}

/// The matching side of grep: the regex, the time budget and the counters, shared by threads.
pub(crate) struct Searcher {
    re: JsRegex,
    budget_nanos: u64,
    spent_nanos: AtomicU64,
    pub(crate) scanned: AtomicUsize,
    pub(crate) slow: AtomicBool,
    /// A line needed more backtracking steps than the engine allows (backreferences, lookaround).
    pub(crate) step_limit: AtomicBool,
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
    pub(crate) settle: Option<Mutex<Settle>>,
    redact: Option<(std::sync::Arc<crate::redact::Redactor>, String)>,
    /// The walk stopped early because the results shown were settled: the total is a lower bound.
    pub(crate) enough: AtomicBool,
}

const BUSY_SLOTS: usize = 64;
/// How often the watchdog reads the time spent: an abort or a spent budget is answered within it.
const WATCH_EVERY: Duration = Duration::from_millis(10);

/// The kept lines of one file as the redacted file shows them, where redacting grep's whole
/// output (as every tool's result is, `tools::call`) would come too late. A token of the rules
/// lies within one line but for a private key block: a file with a `-----BEGIN`, or a redactor
/// with a multi-line value, is redacted whole first (a multi-line secret keeps its line count),
/// so a secret that spans lines is never shown in part; and a line longer than grep shows is
/// redacted whole before its cut, so a cut never shows part of a secret. A shorter line is shown
/// as it is, and redacted with the output.
fn redact_lines(r: &crate::redact::Redactor, session: &str, hits: &mut FileHits, bytes: &[u8]) {
    if hits.lines.is_empty() {
        return;
    }
    if r.spans_lines(bytes) {
        let text = String::from_utf8_lossy(bytes);
        if let std::borrow::Cow::Owned(red) = r.redact(&text, session) {
            let body = red.strip_suffix('\n').unwrap_or(&red);
            let lines: Vec<&str> = body.split('\n').collect();
            for l in &mut hits.lines {
                if let Some(line) = lines.get(l.n - 1) {
                    l.text = cut_line(line.strip_suffix('\r').unwrap_or(line)).to_string();
                }
            }
        }
        return;
    }
    // Only a line grep may have cut needs it (a cut one keeps `LINE_CHARS` characters, so at
    // least as many bytes); the rest are redacted with the output.
    let mut wanted: Vec<usize> = hits.lines.iter().filter(|l| l.text.len() >= LINE_CHARS).map(|l| l.n).collect();
    if wanted.is_empty() {
        return;
    }
    let quick = r.quick(session);
    // Their starts, found in one pass over the file.
    wanted.sort_unstable();
    wanted.dedup();
    let mut starts = std::collections::HashMap::with_capacity(wanted.len());
    let (mut n, mut at) = (1usize, 0usize);
    let mut lines = memchr::memchr_iter(b'\n', bytes);
    for w in wanted {
        while n < w {
            match lines.next() {
                Some(i) => at = i + 1,
                None => break,
            }
            n += 1;
        }
        if n == w {
            starts.insert(w, at);
        }
    }
    for l in &mut hits.lines {
        let Some(&start) = starts.get(&l.n) else { continue };
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        // Not cut (a character is at least a byte): redacted with the output.
        if end - start <= LINE_CHARS || !quick.may_hold(&bytes[start..end]) {
            continue;
        }
        let line = String::from_utf8_lossy(&bytes[start..end]);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if let std::borrow::Cow::Owned(red) = r.redact(line, session) {
            l.text = cut_line(&red).to_string();
        }
    }
}

/// A line cut to its first `LINE_CHARS` characters.
pub(crate) fn cut_line(line: &str) -> &str {
    if line.len() <= LINE_CHARS {
        return line;
    }
    match line.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

impl Searcher {
    pub(crate) fn new(c: Config) -> Searcher {
        Searcher {
            re: c.re,
            budget_nanos: c.budget_nanos,
            spent_nanos: AtomicU64::new(0),
            scanned: AtomicUsize::new(0),
            slow: AtomicBool::new(false),
            step_limit: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            cancel: c.cancel,
            keep: c.keep,
            context: c.context,
            multiline: c.multiline,
            bound: Default::default(),
            began: Instant::now(),
            busy: std::array::from_fn(|_| AtomicU64::new(0)),
            settle: c.settle.map(|(needed, files)| {
                Mutex::new(Settle { needed, files, next: 0, before: 0, ahead: Default::default() })
            }),
            enough: AtomicBool::new(false),
            redact: c.redact,
        }
    }

    /// The error when a line needed more backtracking steps than the engine allows.
    pub(crate) fn step_limit_error(&self) -> Error {
        Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern needed more backtracking steps on one line than the limit allows ({} scanned). Backreferences and lookaround backtrack; use a simpler pattern.",
                plural(self.scanned.load(Ordering::Relaxed), "file")
            ),
        )
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.cancel.as_ref().is_some_and(|c| c.is_cancelled())
    }

    /// A walk in path order finished the file at `place`: once the results shown are settled,
    /// no file is started any more (those being matched finish, and count).
    pub(crate) fn settled(&self, place: Option<usize>, count: usize) {
        let (Some(place), Some(settle)) = (place, &self.settle) else { return };
        if settle.lock().unwrap().done(place, count) {
            self.enough.store(true, Ordering::Relaxed);
        }
    }

    /// Whether every file the walk handed out (`visited`) is done, so that the counts are whole
    /// for the files walked.
    pub(crate) fn all_settled(&self, visited: usize) -> bool {
        self.settle.as_ref().is_none_or(|s| {
            let s = s.lock().unwrap();
            s.ahead.is_empty() && s.next == visited
        })
    }

    /// Matches one file's bytes; `None` for a binary file or no match.
    pub(crate) fn search(&self, path: &str, bytes: &[u8]) -> Option<FileHits> {
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
        let mut result = self.search_lines(path, bytes, started);
        if let (Some((r, session)), Some(hits)) = (&self.redact, result.as_mut()) {
            redact_lines(r, session, hits, bytes);
        }
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

    pub(crate) fn slow_error(&self, timeout_ms: u64) -> Error {
        Error::new(
            Code::Timeout,
            format!(
                "grep stopped: the pattern took longer than {} ms to match ({} scanned). Use a simpler pattern, or narrow path or glob.",
                fmt_count(timeout_ms as usize),
                plural(self.scanned.load(Ordering::Relaxed), "file")
            ),
        )
    }

    /// Runs `work` until it ends, the call is aborted, or the budget is spent — whichever comes
    /// first; the last two answer within `WATCH_EVERY` however long a line takes to match. The
    /// work left behind stops at its next check (a line matched, or the engine's step limit)
    /// and its result is dropped.
    pub(crate) async fn race(
        &self,
        work: impl std::future::Future<Output = Result<String>>,
        timeout_ms: u64,
    ) -> Result<String> {
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
                Err(self.slow_error(timeout_ms))
            }
            r = work => r,
        }
    }

    /// Adds a file's hits to what is kept, and narrows the bound when that says to.
    pub(crate) fn add(&self, found: &Mutex<Collected>, h: FileHits) {
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
            let matched = if exact && valid && m.end() <= content_end && raw.len() <= LINE_CHARS {
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
