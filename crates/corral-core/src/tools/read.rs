//! `read_file`: numbered lines, cut at `maxReadLines` lines or `maxOutputChars` characters with a
//! last line that says what was shown and the offset to continue from.

use super::args::{path_prop, str_arg};
use super::guard::{check_read_size, checked_path};
use super::options::{Ctx, FsToolOptions};
use super::write_path::file_bytes_within;
use super::{image, MAX_READ_BYTES};
use crate::text::{fmt_count, fmt_num, format_bytes, plural};
use serde_json::{json, Value};
use std::borrow::Cow;

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};

/// The arguments of `read_file`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative path of the file to read."),
            "offset": { "type": "integer", "description": "1-based line to start from; a negative offset reads that many last lines (-20: the last 20)." },
            "limit": { "type": "integer", "minimum": 1, "description": "Most lines to return." }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// What the model is told about `read_file`, with the limits these options set.
pub(super) fn description(o: &FsToolOptions) -> String {
    format!(
            "Read a text file from the workspace. Returns numbered lines (\"<line>\\t<text>\"), at most {} lines and {} characters per call; when the output is cut, the last line says which lines were shown and the offset to continue from. Use offset (1-based line) and limit to read a part. Files over {} are refused.",
            fmt_num(o.max_read_lines as u64), fmt_num(o.max_output_chars as u64), format_bytes(MAX_READ_BYTES)
        )
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<Value> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    match fs.stat(&path).await? {
        None => return Err(Error::not_found(&path)),
        Some(s) if s.kind == EntryType::Directory => {
            return Err(Error::new(
                Code::IsADirectory,
                format!("{path} is a directory; use list_dir to see its entries."),
            ))
        }
        Some(s) if s.size > MAX_READ_BYTES => {
            check_read_size(&path, s.size, "read", " Use grep to find the lines you need.")?
        }
        Some(s) if s.kind == EntryType::Other => {
            return Err(Error::new(
                Code::NotAFile,
                format!("{path} is not a regular file (a pipe, socket or device); read_file reads files only."),
            ))
        }
        _ => {}
    }
    let offset = args.get("offset").and_then(Value::as_i64).unwrap_or(1);
    if offset == 0 {
        return Err(Error::new(
            Code::InvalidArguments,
            "Invalid arguments for read_file: offset is a 1-based line number; give 1 for the first line, or a negative number for the last lines.",
        ));
    }
    let limit =
        args.get("limit").and_then(Value::as_u64).map(|l| l as usize).unwrap_or(o.max_read_lines).min(o.max_read_lines);
    if !fs.caps().read_bytes {
        // A provider that reads text only: its text is shown as it comes.
        let content = fs.read_file(&path).await?;
        if shows_a_line(content.as_bytes(), offset) {
            o.note_read(ctx, &path, &[content.as_bytes()]);
        }
        let content = redact_shown(o, ctx, &content, offset, limit);
        return Ok(Value::String(format_lines(&path, &content, offset, limit, o.max_output_chars, None)));
    }
    let bytes = file_bytes_within(fs, &path, "read", " Use grep to find the lines you need.").await?;
    // Any read that showed the file counts, whole or in part (not an offset past its end).
    if image::sniff(&bytes).is_some() || image::is_binary(&bytes) || shows_a_line(&bytes, offset) {
        o.note_read(ctx, &path, &[&bytes]);
    }
    if let Some(kind) = image::sniff(&bytes) {
        if o.read_images {
            return Ok(image_result(&path, kind, bytes));
        }
    }
    if image::sniff(&bytes).is_some() || image::is_binary(&bytes) {
        return Ok(Value::String(format!(
            "({path} is a binary file: {}, {}. Its bytes are not shown.)",
            plural(bytes.len(), "byte"),
            image::binary_kind(&bytes)
        )));
    }
    Ok(Value::String(match String::from_utf8(bytes) {
        Ok(text) => {
            format_lines(&path, &redact_shown(o, ctx, &text, offset, limit), offset, limit, o.max_output_chars, None)
        }
        Err(e) => {
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let text = redact_shown(o, ctx, &text, offset, limit);
            let note = format!(
                "({path} is not valid UTF-8: the bytes that are not are shown as U+FFFD. It may be latin1 or Windows-1252; edit_file leaves such files unchanged.)"
            );
            format_lines(&path, &text, offset, limit, o.max_output_chars, Some(&note))
        }
    }))
}

/// `text` with the secrets in the lines `read_file` can show (`offset`, `limit`) redacted, whole
/// lines before any cut, so a cut never shows part of a secret. A token of the rules lies within
/// one line but for a private key block: a file with a `-----BEGIN`, or a redactor with a
/// multi-line value, is redacted whole (a multi-line secret keeps its line count).
fn redact_shown<'t>(o: &FsToolOptions, ctx: &Ctx, text: &'t str, offset: i64, limit: usize) -> Cow<'t, str> {
    let Some(r) = &o.redactor else { return Cow::Borrowed(text) };
    let body = text.strip_suffix('\n').unwrap_or(text).as_bytes();
    let total = memchr::memchr_iter(b'\n', body).count() + 1;
    let first = if offset < 0 { total.saturating_sub(offset.unsigned_abs() as usize) + 1 } else { offset as usize };
    let last = first.saturating_sub(1).saturating_add(limit).min(total);
    // Every line shown (most reads): the whole text in one pass.
    if first <= 1 && last == total {
        return r.redact(text, &ctx.session_id);
    }
    if r.spans_lines(text.as_bytes()) {
        return r.redact(text, &ctx.session_id);
    }
    if first > total {
        return Cow::Borrowed(text);
    }
    let start = if first == 1 { 0 } else { newline(body, first - 2).map_or(0, |i| i + 1) };
    let end = newline(&body[start..], last - first).map_or(body.len(), |i| start + i);
    match r.redact(&text[start..end], &ctx.session_id) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(mid) => Cow::Owned(format!("{}{mid}{}", &text[..start], &text[end..])),
    }
}

/// Where the `n`-th line break (from 0) of `bytes` is. Counted a block at a time, so a long file
/// is not walked one break after another up to a far line.
fn newline(bytes: &[u8], n: usize) -> Option<usize> {
    const BLOCK: usize = 4096;
    let mut seen = 0;
    for (i, block) in bytes.chunks(BLOCK).enumerate() {
        let here = memchr::memchr_iter(b'\n', block).count();
        if seen + here > n {
            return memchr::memchr_iter(b'\n', block).nth(n - seen).map(|at| i * BLOCK + at);
        }
        seen += here;
    }
    None
}

/// An image as the tool returns it, or the note that says why it is not sent.
fn image_result(path: &str, kind: image::ImageKind, bytes: Vec<u8>) -> Value {
    let media = kind.media_type();
    let size = bytes.len() as u64;
    let dims = image::dimensions(kind, &bytes);
    let why = match dims {
        None => Some("its header gives no size".to_string()),
        Some((w, h)) if w > image::MAX_IMAGE_SIDE || h > image::MAX_IMAGE_SIDE => {
            Some(format!("it is larger than {} pixels a side", fmt_num(image::MAX_IMAGE_SIDE as u64)))
        }
        _ if size > image::MAX_IMAGE_BYTES => {
            Some(format!("it is larger than 3.75 MiB ({} bytes)", fmt_num(image::MAX_IMAGE_BYTES)))
        }
        _ => None,
    };
    if let Some(why) = why {
        let shape = dims.map(|(w, h)| format!(", {w}x{h} px")).unwrap_or_default();
        return Value::String(format!(
            "(The image {path} ({media}, {}{shape}) is not sent: {why}. Read a smaller copy: scale it down or recompress it with a command, then read that file.)",
            plural(size as usize, "byte")
        ));
    }
    let (width, height) = dims.unwrap_or_default();
    use base64::Engine;
    json!({
        "type": "image",
        "path": path,
        "mediaType": media,
        "bytes": size,
        "width": width,
        "height": height,
        "data": base64::engine::general_purpose::STANDARD.encode(&bytes),
    })
}

/// What an SDK that sends images gives the model for a `read_file` result (the AI SDK's tool
/// output): an image as text plus image data, anything else as text.
pub fn model_output(output: &Value) -> Value {
    match output {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("image") => {
            let text = format!(
                "[Image {} ({}, {}).]",
                m.get("path").and_then(Value::as_str).unwrap_or_default(),
                m.get("mediaType").and_then(Value::as_str).unwrap_or_default(),
                plural(m.get("bytes").and_then(Value::as_u64).unwrap_or(0) as usize, "byte")
            );
            json!({ "type": "content", "value": [
                { "type": "text", "text": text },
                { "type": "image-data", "data": m.get("data").cloned().unwrap_or(Value::Null), "mediaType": m.get("mediaType").cloned().unwrap_or(Value::Null) }
            ] })
        }
        Value::String(s) => json!({ "type": "text", "value": s }),
        other => json!({ "type": "text", "value": other.to_string() }),
    }
}

/// Whether `format_lines` shows `content` from `offset`: an empty file is shown whole, an offset
/// past the end shows nothing.
fn shows_a_line(content: &[u8], offset: i64) -> bool {
    let body = content.strip_suffix(b"\n").unwrap_or(content);
    let total = memchr::memchr_iter(b'\n', body).count() + 1;
    content.is_empty() || offset < 0 || offset as usize <= total
}

/// Pushes ` {n:>width$}\t` (a line's number, right-aligned) without the formatting machinery: it
/// is written once for every line shown.
fn push_number(out: &mut String, n: usize, width: usize) {
    let mut digits = [0u8; 20];
    let (mut at, mut v) = (digits.len(), n);
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - at;
    out.push(' ');
    for _ in len..width {
        out.push(' ');
    }
    for &d in &digits[at..] {
        out.push(d as char);
    }
    out.push('\t');
}

/// Formats `content` as numbered lines from 1-based `offset`, at most `limit` lines and about
/// `max_chars` characters.
///
/// `note` (a line about the content, such as invalid UTF-8) comes after the lines and before the
/// line that says how to continue, which stays last.
pub fn format_lines(
    path: &str,
    content: &str,
    offset: i64,
    limit: usize,
    max_chars: usize,
    note: Option<&str>,
) -> String {
    if content.is_empty() {
        return format!("({path} is empty.)");
    }
    let body = content.strip_suffix('\n').unwrap_or(content);
    // Split at each line break found a block at a time (a line break is one byte: every cut is on
    // a character boundary).
    let mut lines: Vec<&str> = Vec::with_capacity(body.len() / 32 + 1);
    let mut at = 0;
    for i in memchr::memchr_iter(b'\n', body.as_bytes()) {
        lines.push(&body[at..i]);
        at = i + 1;
    }
    lines.push(&body[at..]);
    let total = lines.len();
    // A negative offset counts from the end: -n starts n lines before it (the whole file at most).
    let offset = if offset < 0 { total.saturating_sub(offset.unsigned_abs() as usize) + 1 } else { offset as usize };
    if offset > total {
        return format!("({path} has {}; offset {offset} is past the end.)", plural(total, "line"));
    }
    let start = offset - 1;
    let end = (start + limit).min(total);
    let width = end.to_string().len();
    let shown_bytes: usize = lines[start..end].iter().map(|l| l.len() + width + 3).sum();
    let mut out = String::with_capacity(shown_bytes.min(max_chars.saturating_mul(4)) + 160);
    // The cap holds everything returned, the line that says how to continue included: when the
    // lines do not all fit, they get the cap less the longest such line (and the note).
    // " " + the number right-aligned to `width` + "\t" + the line + "\n", in characters.
    let ascii = body.is_ascii();
    let line_len = |l: &str| {
        let l = l.strip_suffix('\r').unwrap_or(l);
        width + 3 + if ascii || l.is_ascii() { l.len() } else { l.chars().count() }
    };
    let note_len = note.map_or(0, |n| n.chars().count() + 1);
    let all: usize = lines[start..end].iter().map(|l| line_len(l)).sum();
    let budget = if end == total && all + note_len <= max_chars {
        max_chars
    } else {
        // The longest either line can be: both grow with the line numbers they name.
        let cont = cut_line(end, max_chars, total).len().max(showing_line(offset, end, total).len());
        max_chars.saturating_sub(cont + note_len).max(1)
    };
    let mut chars = 0usize;
    let mut shown_to = start;
    for (i, line) in lines[start..end].iter().enumerate() {
        let n = start + i + 1;
        let len = line_len(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if chars + len > budget {
            let entry = format!(" {n:>width$}\t{line}\n");
            if i == 0 {
                // A single line longer than the budget: show its start.
                let cut: String = entry.chars().take(budget.saturating_sub(1)).collect();
                out.push_str(&cut);
                out.push('\n');
                if let Some(note) = note {
                    out.push_str(note);
                    out.push('\n');
                }
                out.push_str(&cut_line(n, max_chars, total));
                return out;
            }
            break;
        }
        chars += len;
        push_number(&mut out, n, width);
        out.push_str(line);
        out.push('\n');
        shown_to = n;
    }
    if let Some(note) = note {
        out.push_str(note);
        out.push('\n');
    }
    if shown_to < total {
        out.push_str(&showing_line(offset, shown_to, total));
    } else if out.ends_with('\n') {
        out.pop();
    }
    out
}

/// The last line when line `n` alone is longer than `max_chars`.
fn cut_line(n: usize, max_chars: usize, total: usize) -> String {
    format!(
        "(Line {n} is longer than {} characters and was cut. Showing line {n} of {}. Use offset {} to continue.)",
        fmt_count(max_chars),
        fmt_count(total),
        n + 1
    )
}

/// The last line when lines `offset`..=`to` were shown of `total`.
fn showing_line(offset: usize, to: usize, total: usize) -> String {
    format!("(Showing lines {offset}-{to} of {}. Use offset {} to continue.)", fmt_count(total), to + 1)
}

#[cfg(test)]
mod tests {
    /// The block count finds the same break as walking them one by one, across block edges.
    #[test]
    fn newline_finds_the_nth_break_as_a_walk_does() {
        let text: String = (0..3000).map(|i| format!("{}\n", "x".repeat(i % 37))).collect();
        let bytes = text.as_bytes();
        for n in [0, 1, 110, 111, 112, 500, 2998, 2999, 3000, 5000] {
            assert_eq!(super::newline(bytes, n), memchr::memchr_iter(b'\n', bytes).nth(n), "break {n}");
        }
        assert_eq!(super::newline(b"", 0), None);
    }

    #[test]
    fn a_line_number_is_written_as_the_formatter_writes_it() {
        for width in 1..=8 {
            for n in [0, 1, 7, 9, 10, 99, 100, 1234, 99_999, 100_000, 12_345_678, usize::MAX] {
                let mut out = String::new();
                super::push_number(&mut out, n, width);
                assert_eq!(out, format!(" {n:>width$}\t"), "{n} in {width}");
            }
        }
    }
}
