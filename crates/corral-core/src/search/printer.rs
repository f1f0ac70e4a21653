//! What grep returns, in each `output_mode`: matching lines (`content`, with context as ripgrep
//! shows it), the files with matches, or a count per file; paged by `offset`, capped by the
//! tool's limits, with notes on skipped files and a last line, when the results are cut, that
//! gives the total and the `offset` that continues.

use super::searcher::Collected;
use crate::text::{fmt_count, format_bytes, push_line};

/// What grep returns (`output_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Content,
    Files,
    Count,
}

/// The tool's limits the output keeps to.
#[derive(Debug, Clone, Copy)]
pub struct PrintLimits {
    pub max_output_chars: usize,
    /// `maxGrepFileBytes`, named in the note on skipped files.
    pub max_file_bytes: u64,
}

/// The files grep skipped for their size: a few names (sorted) and how many in all.
#[derive(Default)]
pub(crate) struct Skipped {
    names: Vec<String>,
    count: usize,
}

/// How many names `Skipped` keeps before it only counts (the note shows 5).
const SKIPPED_KEPT: usize = 1000;

impl Skipped {
    pub(crate) fn add(&mut self, path: &str) {
        self.count += 1;
        if self.names.len() < SKIPPED_KEPT {
            self.names.push(path.to_string());
        }
    }

    /// `(Skipped 7 files over 2 MB (maxGrepFileBytes): a, b, c, d, e and 2 more.)`
    fn note(mut self, limit: u64) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        self.names.sort();
        let shown: Vec<&str> = self.names.iter().take(5).map(String::as_str).collect();
        let more = self.count - shown.len();
        let files = if self.count == 1 { "1 file".to_string() } else { format!("{} files", fmt_count(self.count)) };
        let tail = if more > 0 { format!(" and {} more", fmt_count(more)) } else { String::new() };
        Some(format!("(Skipped {files} over {} (maxGrepFileBytes): {}{tail}.)", format_bytes(limit), shown.join(", ")))
    }
}

/// The page asked for: skip `offset` results of the mode, show at most `keep`.
pub(crate) struct Page {
    pub offset: usize,
    pub keep: usize,
}

/// The last line when results are cut: what was shown, of how many (`at least` when the search
/// stopped once the results shown were settled), and the offset that goes on.
fn cut(what: &str, offset: usize, shown: usize, total: usize, counted: bool) -> String {
    let next = offset + shown;
    let of = if counted { fmt_count(total) } else { format!("at least {}", fmt_count(total)) };
    if offset == 0 {
        format!(
            "(Showing the first {} of {of} {what}. Narrow the pattern, path or glob, or continue with offset={next}.)",
            fmt_count(shown)
        )
    } else {
        format!("(Showing {what} {}-{} of {of}. Continue with offset={next}.)", fmt_count(offset + 1), fmt_count(next))
    }
}

pub(crate) fn format(
    mut results: Collected,
    o: PrintLimits,
    mode: Mode,
    page: Page,
    notes: &[String],
    skipped: Skipped,
) -> String {
    results.prune();
    let total = results.total;
    let mut out = String::new();
    let (shown, of, what) = match mode {
        Mode::Content => (content(&results, o, &page, &mut out), total, "matches"),
        Mode::Files | Mode::Count => {
            let mut files = std::mem::take(&mut results.counts);
            files.sort();
            let mut chars = 0;
            let mut shown = 0;
            for (path, n) in files.iter().skip(page.offset).take(page.keep) {
                let line = if mode == Mode::Count { format!("{path}:{n}") } else { path.clone() };
                if !push_line(&mut out, &mut chars, &line, o.max_output_chars) {
                    break;
                }
                shown += 1;
            }
            if mode == Mode::Count && total > 0 {
                let files =
                    if files.len() == 1 { "1 file".to_string() } else { format!("{} files", fmt_count(files.len())) };
                out.push_str(&format!("({} in {files})\n", plural_matches(total)));
            }
            (shown, files.len(), "files")
        }
    };
    if total == 0 {
        out.push_str("No matches found.\n");
    } else if shown == 0 && page.offset >= of {
        out.push_str(&format!("(offset={} is past the last of {} {what}.)\n", page.offset, fmt_count(of)));
    }
    // Notes come before the cut line, which stays the last line.
    if let Some(n) = skipped.note(o.max_file_bytes) {
        out.push_str(&n);
        out.push('\n');
    }
    for n in notes {
        out.push_str(n);
        out.push('\n');
    }
    if shown > 0 && page.offset + shown < of {
        out.push_str(&cut(what, page.offset, shown, of, results.counted));
        out.push('\n');
    }
    out.pop();
    out
}

fn plural_matches(n: usize) -> String {
    if n == 1 {
        "1 match".to_string()
    } else {
        format!("{} matches", fmt_count(n))
    }
}

/// Matches as `path:12: text`; with context, context lines as `path-12- text` and `--` between
/// groups that do not touch (ripgrep's convention). The page is the matches from `page.offset`
/// on, with the context around them. Returns how many matches were shown.
fn content(results: &Collected, o: PrintLimits, page: &Page, out: &mut String) -> usize {
    let c = results.context;
    let end = page.offset.saturating_add(page.keep);
    let (mut index, mut shown, mut chars) = (0usize, 0usize, 0usize);
    let mut last: Option<(usize, usize)> = None; // (file index, line) of the last line shown
    for (fi, file) in results.files.iter().enumerate() {
        if index >= end {
            break;
        }
        // The lines of this file's matches that are on the page.
        let mut on_page = Vec::new();
        for l in file.lines.iter().filter(|l| l.matched) {
            if (page.offset..end).contains(&index) {
                on_page.push(l.n);
            }
            index += 1;
        }
        for l in &file.lines {
            let show =
                if l.matched { on_page.contains(&l.n) } else { on_page.iter().any(|&m| l.n + c >= m && l.n <= m + c) };
            if !show {
                continue;
            }
            if c > 0
                && last.is_some_and(|(f, n)| f != fi || l.n > n + 1)
                && !push_line(out, &mut chars, "--", o.max_output_chars)
            {
                return shown;
            }
            let sep = if l.matched { ':' } else { '-' };
            if !push_line(out, &mut chars, &format!("{}{sep}{}{sep} {}", file.path, l.n, l.text), o.max_output_chars) {
                return shown;
            }
            last = Some((fi, l.n));
            if l.matched {
                shown += 1;
            }
        }
    }
    shown
}
