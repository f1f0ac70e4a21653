//! `edit_file`: replaces exact text. Refuses text that is missing (with a CRLF hint) or
//! ambiguous; succeeds without writing when the edit was already applied; refuses files that are
//! not UTF-8 when the provider can read bytes; keeps a UTF-8 BOM.

use super::args::{path_prop, str_arg};
use super::guard::{check_protected, check_read_size, check_write_size, checked_path, lock_path};
use super::options::{Ctx, FsToolOptions};
use super::write_path::file_bytes_within;
use super::write_path::{hooked_write, notify_edit};
use crate::text::fmt_count;
use serde_json::{json, Value};

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};

const BOM: &str = "\u{feff}";

fn not_utf8(path: &str, what: &str) -> Error {
    Error::new(
        Code::NotUtf8,
        format!("{path} is not UTF-8 text ({what}); edit_file leaves it unchanged. Use write_file only if you mean to replace the whole file."),
    )
}

/// The most edits one `edit_file` call may make.
pub const MAX_EDITS: usize = 100;

/// The arguments of `edit_file`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative path of the file to edit."),
            "old_string": { "type": "string", "minLength": 1, "description": "The exact text to replace, including whitespace and indentation." },
            "new_string": { "type": "string", "description": "The text to put in its place." },
            "replace_all": { "type": "boolean", "description": "Replace every occurrence instead of requiring exactly one." },
            "edits": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_EDITS,
                "description": "Several replacements at once, instead of old_string/new_string: all or nothing, each matched against the file as it was before the call, none overlapping.",
                "items": {
                    "type": "object",
                    "properties": {
                        "old_string": { "type": "string", "minLength": 1 },
                        "new_string": { "type": "string" },
                        "replace_all": { "type": "boolean" }
                    },
                    "required": ["old_string", "new_string"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// What the model is told about `edit_file`, with the limits these options set.
pub(super) fn description(o: &FsToolOptions) -> String {
    let mut d = "Replace exact text in a file: old_string must appear exactly once (or pass replace_all: true), including whitespace and indentation. Read the file first. Fails with an explanation when old_string is missing or appears more than once. Refuses files that are not UTF-8. To make several changes at once, pass edits: [{ old_string, new_string, replace_all? }] instead (all or nothing; each is matched against the file as it was).".to_string();
    if o.fuzzy_edit {
        d.push_str(" When old_string is not found exactly, it is matched once more with whitespace runs, curly quotes and dashes normalised.");
    }
    d
}

/// The file's text, whether it started with a UTF-8 BOM, refusing what is not UTF-8.
async fn read_text(fs: &dyn FsProvider, path: &str) -> Result<(String, bool)> {
    if fs.caps().read_bytes {
        let bytes = file_bytes_within(fs, path, "edit", "").await?;
        if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
            return Err(not_utf8(path, "it starts with a UTF-16 byte order mark"));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            not_utf8(path, &format!("invalid UTF-8 at byte {at}; it may be latin1, Windows-1252 or UTF-16"))
        })?;
        Ok(match text.strip_prefix(BOM) {
            Some(rest) => (rest.to_string(), true),
            None => (text, false),
        })
    } else {
        let text = fs.read_file(path).await?;
        Ok(match text.strip_prefix(BOM) {
            Some(rest) => (rest.to_string(), true),
            None => (text, false),
        })
    }
}

/// One replacement of a call: the old text, the new, whether every occurrence.
struct Change<'a> {
    old: &'a str,
    new: &'a str,
    all: bool,
}

/// Where a change applies in the file: byte ranges, and whether the fuzzy matcher found them.
struct Found {
    spans: Vec<(usize, usize)>,
    fuzzy: bool,
}

fn not_found(path: &str, text: &str, old: &str, which: &str) -> Error {
    let mut msg = format!("{which}old_string was not found in {path}. Read the file and copy the exact text, including whitespace and indentation.");
    if text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        msg.push_str(
            " The file has CRLF (\\r\\n) line endings but old_string uses \\n: match the file's line endings.",
        );
        if text.contains(&old.replace('\n', "\r\n")) {
            msg.push_str(" With \\r\\n line endings, old_string would match.");
        }
    } else if !text.contains("\r\n") && old.contains("\r\n") {
        msg.push_str(" old_string has CRLF (\\r\\n) line endings but the file uses \\n.");
    }
    Error::new(Code::NoMatch, msg)
}

/// Finds a change in the file as it is: exactly, else (with `fuzzyEdit`) normalised. One match,
/// or every match with `all`.
fn locate(path: &str, text: &str, c: &Change<'_>, fuzzy: bool, which: &str) -> Result<Found> {
    let exact: Vec<(usize, usize)> = text.match_indices(c.old).map(|(i, m)| (i, i + m.len())).collect();
    let found = if !exact.is_empty() {
        Found { spans: exact, fuzzy: false }
    } else if fuzzy {
        let spans = super::fuzzy::find(text, c.old);
        if spans.is_empty() {
            return Err(not_found(path, text, c.old, which));
        }
        Found { spans, fuzzy: true }
    } else {
        return Err(not_found(path, text, c.old, which));
    };
    if found.spans.len() > 1 && !c.all {
        let how = if found.fuzzy { " once whitespace, quotes and dashes are normalised" } else { "" };
        return Err(Error::new(
            Code::Ambiguous,
            format!(
                "{which}old_string appears {} times in {path}{how}. Include more surrounding lines to make it unique, or pass replace_all: true to replace every occurrence.",
                found.spans.len()
            ),
        ));
    }
    Ok(found)
}

/// The replacements of a call, made on the text as it was: each span replaced, in order. Returns
/// the new text and, for each change, the line it starts on in the new text.
fn apply(path: &str, text: &str, bom: bool, changes: &[(usize, &Found, &str)]) -> Result<(String, Vec<usize>)> {
    let mut spans: Vec<(usize, usize, usize, &str)> = Vec::new();
    for (n, found, new) in changes {
        for &(a, b) in &found.spans {
            spans.push((a, b, *n, new));
        }
    }
    spans.sort_by_key(|s| (s.0, s.1));
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(Error::new(
                Code::Ambiguous,
                format!(
                    "edits {} and {} overlap in {path}: each edit must change a different part of the file as it was.",
                    w[0].2.min(w[1].2) + 1,
                    w[0].2.max(w[1].2) + 1
                ),
            ));
        }
    }
    // The result's size, computed before anything is allocated.
    let size = spans.iter().fold(text.len() as u64 + 3 * bom as u64, |acc, (a, b, _, new)| {
        acc.saturating_sub((b - a) as u64).saturating_add(new.len() as u64)
    });
    check_write_size(path, size, "the edited file")?;
    let mut out = String::with_capacity(size as usize);
    if bom {
        out.push_str(BOM);
    }
    let mut lines = vec![0usize; changes.len()];
    let (mut at, mut line) = (0usize, 1usize);
    for (a, b, n, new) in spans {
        line += text[at..a].matches('\n').count();
        out.push_str(&text[at..a]);
        if lines[n] == 0 {
            lines[n] = line;
        }
        out.push_str(new);
        line += new.matches('\n').count();
        at = b;
    }
    out.push_str(&text[at..]);
    Ok((out, lines))
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    let single = args.get("old_string").is_some() || args.get("new_string").is_some();
    let edits = args.get("edits").and_then(Value::as_array);
    let bad = |m: &str| Err(Error::new(Code::InvalidArguments, format!("Invalid arguments for edit_file: {m}")));
    match (single, edits.is_some()) {
        (true, true) => return bad("give either old_string/new_string or edits, not both."),
        (false, false) => return bad("give old_string and new_string, or edits."),
        (true, false) if args.get("old_string").is_none() || args.get("new_string").is_none() => {
            return bad("old_string and new_string go together.")
        }
        _ => {}
    }
    check_protected(fs, o, &path).await?;
    let _writer = lock_path(fs, &path).await;
    match fs.stat(&path).await? {
        None => return Err(Error::not_found(&path)),
        Some(s) if s.kind == EntryType::Directory => {
            return Err(Error::new(Code::IsADirectory, format!("{path} is a directory.")))
        }
        Some(s) if s.kind == EntryType::Other => {
            return Err(Error::new(Code::NotAFile, format!("{path} is not a regular file.")))
        }
        Some(s) => check_read_size(&path, s.size, "edit", "")?,
    }
    let (text, bom) = read_text(fs, &path).await?;
    let bom_bytes: &[u8] = if bom { BOM.as_bytes() } else { b"" };
    o.check_read(ctx, &path, &[bom_bytes, text.as_bytes()])?;
    check_write_size(&path, text.len() as u64, "the file to edit")?;
    // Markers the model was shown are restored where this file holds their values, before matching.
    let restore = |v: &Value, key: &str| o.restore(str_arg(v, key).unwrap_or_default(), ctx, &text).into_owned();
    let (out, summary) = match edits {
        Some(list) => {
            let given: Vec<(String, String)> =
                list.iter().map(|e| (restore(e, "old_string"), restore(e, "new_string"))).collect();
            let changes: Vec<Change<'_>> = list
                .iter()
                .zip(&given)
                .map(|(e, (old, new))| Change {
                    old,
                    new,
                    all: e.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
                })
                .collect();
            let found: Vec<Found> = changes
                .iter()
                .enumerate()
                .map(|(i, c)| locate(&path, &text, c, o.fuzzy_edit, &format!("edit {}: ", i + 1)))
                .collect::<Result<_>>()?;
            let plan: Vec<(usize, &Found, &str)> =
                found.iter().zip(&changes).enumerate().map(|(i, (f, c))| (i, f, c.new)).collect();
            let (out, lines) = apply(&path, &text, bom, &plan)?;
            let mut summary = format!("Edited {path} with {} edits:", changes.len());
            for (i, f) in found.iter().enumerate() {
                summary.push_str(&format!("\n  {}. line {}", i + 1, lines[i]));
                if f.spans.len() > 1 {
                    summary.push_str(&format!(" ({} occurrences)", fmt_count(f.spans.len())));
                }
                if f.fuzzy {
                    summary.push_str(" (matched after normalising whitespace, quotes and dashes)");
                }
            }
            (out, summary)
        }
        None => {
            let (old, new) = (restore(args, "old_string"), restore(args, "new_string"));
            let c =
                Change { old: &old, new: &new, all: args.get("replace_all").and_then(Value::as_bool).unwrap_or(false) };
            if c.old == c.new && text.contains(c.old) {
                return Ok(format!(
                    "old_string and new_string are the same: {path} is left as it is. Nothing was written."
                ));
            }
            if !text.contains(c.old) && !c.new.is_empty() && text.contains(c.new) {
                return Ok(format!(
                    "The edit was already applied: {path} already contains new_string and not old_string. Nothing was written."
                ));
            }
            let found = locate(&path, &text, &c, o.fuzzy_edit, "")?;
            let count = found.spans.len();
            let (out, _) = apply(&path, &text, bom, &[(0, &found, c.new)])?;
            let mut summary = if count == 1 {
                format!("Edited {path}: replaced 1 occurrence.")
            } else {
                format!("Edited {path}: replaced {} occurrences.", fmt_count(count))
            };
            if found.fuzzy {
                summary.push_str(
                    " old_string was not found exactly; it matched once whitespace, quotes and dashes were normalised: read the result to check it.",
                );
            }
            (out, summary)
        }
    };
    let before = if bom { format!("{BOM}{text}") } else { text };
    if out == before {
        return Ok(format!("{path} is left as it is: the edits change nothing. Nothing was written."));
    }
    hooked_write(fs, o, ctx, &path, out.as_bytes()).await?;
    o.note_read(ctx, &path, &[out.as_bytes()]);
    notify_edit(o, ctx, &path, &before, &out).await;
    Ok(summary)
}
