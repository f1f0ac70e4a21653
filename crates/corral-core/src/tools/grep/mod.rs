//! The `grep` tool: its arguments, and the walk that hands files to the searcher
//! (`search::searcher`) over every provider; the printer (`search::printer`) shapes the result.

use super::args::{path_prop, skipped_names, str_arg};
use super::options::{Ctx, FsToolOptions};
use super::write_path::file_bytes;
use crate::text::{fmt_num, format_bytes};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::glob::{base_of, compile_glob};
use super::walk::{walk, walk_threads, Entry, Filter, Order, Visit, Want};
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::search::jsregex::JsRegex;
use crate::search::printer::{self, Mode, Page, PrintLimits, Skipped};
use crate::search::searcher::{Collected, Config, Searcher, LINE_CHARS};

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
            fmt_num(o.max_results as u64), fmt_num(o.max_output_chars as u64), fmt_num(LINE_CHARS as u64),
            format_bytes(o.max_grep_file_bytes), skipped_names(o), fmt_num(o.max_files_scanned as u64), fmt_num(o.grep_timeout_ms)
        )
}

/// The furthest `offset` pages: the lines before a page are held while matching, so they are
/// bounded (narrow the search to see past it).
pub const MAX_OFFSET: u64 = 10_000;

/// The most lines of context grep shows around a match.
pub const MAX_CONTEXT: u64 = 10;

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
    let grep = Arc::new(Searcher::new(Config {
        re,
        // Matching time is summed over the files; a parallel walk matches on several threads
        // at once, so its budget is the time limit on each of them.
        budget_nanos: o.grep_timeout_ms.saturating_mul(1_000_000).saturating_mul(if fs.as_local().is_some() {
            walk_threads() as u64
        } else {
            1
        }),
        cancel: ctx.cancel.clone(),
        keep,
        context,
        multiline,
        // Counting needs every file; the other modes show the first results in path order.
        settle: (mode != Mode::Count).then_some((offset.saturating_add(shown), mode == Mode::Files)),
        redact: o.redactor.clone().map(|r| (r, ctx.session_id.clone())),
    }));
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
            let stats = walk(fs, o, &base, ctx, filter, visit, Want { sizes: true, order, light: false }).await?;
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
            return Err(grep.step_limit_error());
        }
        if grep.slow.load(Ordering::Relaxed) {
            return Err(grep.slow_error(o.grep_timeout_ms));
        }
        let mut results = std::mem::replace(&mut *found.lock().unwrap(), Collected::new(0, 0, false));
        results.counted = !grep.enough.load(Ordering::Relaxed);
        let skipped = std::mem::take(&mut *too_large.lock().unwrap());
        let limits = PrintLimits { max_output_chars: o.max_output_chars, max_file_bytes: o.max_grep_file_bytes };
        Ok(printer::format(results, limits, mode, Page { offset, keep: shown }, &notes, skipped))
    };
    grep.race(work, o.grep_timeout_ms).await
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
