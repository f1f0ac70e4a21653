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
        return Ok(Value::String(numbered(o, ctx, &path, &content, offset, limit, None)));
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
        Ok(text) => numbered(o, ctx, &path, &text, offset, limit, None),
        Err(e) => {
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let note = format!(
                "({path} is not valid UTF-8: the bytes that are not are shown as U+FFFD. It may be latin1 or Windows-1252; edit_file leaves such files unchanged.)"
            );
            numbered(o, ctx, &path, &text, offset, limit, Some(&note))
        }
    }))
}

/// `text` as `read_file` shows it: redacted where it shows, then numbered and cut. The lines are
/// found once for both, and again only when a secret was replaced.
fn numbered(
    o: &FsToolOptions,
    ctx: &Ctx,
    path: &str,
    text: &str,
    offset: i64,
    limit: usize,
    note: Option<&str>,
) -> String {
    let split = Split::new(text);
    match redact_shown(o, ctx, &split, offset, limit) {
        Cow::Borrowed(_) => format_split(path, &split, offset, limit, o.max_output_chars, note),
        Cow::Owned(shown) => format_lines(path, &shown, offset, limit, o.max_output_chars, note),
    }
}

/// `text` with the secrets in the lines `read_file` can show (`offset`, `limit`) redacted, whole
/// lines before any cut, so a cut never shows part of a secret.
///
/// The lines it can show end, at the latest, with the line that holds the `maxOutputChars`-th
/// character from the first one (each line shown costs at least its characters), so only those
/// are searched. Where a secret is found there, its marker may be shorter than the secret and let
/// later lines in: then every line up to `limit` is searched. A token of the rules lies within one
/// line but for a private key block: a text with a key block that begins before the lines shown,
/// or in them and ends after them, or a redactor with a multi-line value, is redacted whole (a
/// multi-line secret keeps its line count).
fn redact_shown<'t>(o: &FsToolOptions, ctx: &Ctx, split: &Split<'t>, offset: i64, limit: usize) -> Cow<'t, str> {
    let text = split.text;
    let Some(r) = &o.redactor else { return Cow::Borrowed(text) };
    let session = &ctx.session_id;
    let total = split.lines.len();
    let first =
        if offset < 0 { total.saturating_sub(offset.unsigned_abs() as usize) + 1 } else { offset.max(1) as usize };
    if first > total {
        // Past the end: no line is shown.
        return Cow::Borrowed(text);
    }
    let last = (first - 1).saturating_add(limit.max(1)).min(total);
    let start = split.start(first - 1);
    let by_lines = split.end(last - 1);
    let end = start + lines_within(&text[start..by_lines], o.max_output_chars, split.ascii);
    // Every line (most reads), or a key block begun before the lines shown: the whole text.
    if (start == 0 && end == split.end(total - 1)) || r.spans_lines(&text.as_bytes()[..start]) {
        return r.redact(text, session);
    }
    let mid = match r.redact_lines(&text[start..end], session) {
        Some(Cow::Borrowed(_)) => return Cow::Borrowed(text),
        Some(Cow::Owned(_)) if end < by_lines => r.redact_lines(&text[start..by_lines], session).map(|m| (by_lines, m)),
        Some(mid) => Some((end, mid)),
        None => None,
    };
    match mid {
        Some((end, mid)) => Cow::Owned(format!("{}{mid}{}", &text[..start], &text[end..])),
        // A secret that may go on past the lines searched (a key block).
        None => r.redact(text, session),
    }
}

/// How many bytes of `lines` the lines that begin within its first `chars` characters take: up to
/// the end of the line that holds character `chars` (all of `lines` when it is shorter). `ascii`:
/// whether `lines` is known to be ASCII.
fn lines_within(lines: &str, chars: usize, ascii: bool) -> usize {
    let bytes = lines.as_bytes();
    if bytes.len() <= chars {
        return bytes.len();
    }
    let at = if ascii { chars } else { char_position(bytes, chars) };
    memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i)
}

/// Where character `chars` of UTF-8 `bytes` is (or within it), found by counting continuation
/// bytes, which the compiler does many at a time, instead of decoding character by character.
fn char_position(bytes: &[u8], chars: usize) -> usize {
    let continuations = |b: &[u8]| b.iter().filter(|&&b| (b as i8) < -64).count();
    let mut at = chars.min(bytes.len());
    let mut extra = continuations(&bytes[..at]);
    loop {
        let want = (chars + extra).min(bytes.len());
        if want == at {
            // `chars` characters begin before `at`: the next begins after the rest of the last.
            while at < bytes.len() && (bytes[at] as i8) < -64 {
                at += 1;
            }
            return at;
        }
        extra += continuations(&bytes[at..want]);
        at = want;
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
    content.is_empty() || offset <= 1 || newline(body, offset as usize - 2).is_some()
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
    format_split(path, &Split::new(content), offset, limit, max_chars, note)
}

/// A text split into its lines once, for the redaction and the numbering that both read them.
struct Split<'t> {
    text: &'t str,
    /// The lines, without their line breaks (a last line break begins no line).
    lines: Vec<&'t str>,
    ascii: bool,
}

impl<'t> Split<'t> {
    fn new(text: &'t str) -> Split<'t> {
        let body = text.strip_suffix('\n').unwrap_or(text);
        // Split at each line break found a block at a time (a line break is one byte: every cut
        // is on a character boundary).
        let mut lines: Vec<&str> = Vec::with_capacity(body.len() / 32 + 1);
        let mut at = 0;
        for i in memchr::memchr_iter(b'\n', body.as_bytes()) {
            lines.push(&body[at..i]);
            at = i + 1;
        }
        lines.push(&body[at..]);
        Split { text, lines, ascii: body.is_ascii() }
    }

    /// Where line `i` (from 0) begins in the text.
    fn start(&self, i: usize) -> usize {
        self.lines[i].as_ptr() as usize - self.text.as_ptr() as usize
    }

    /// Where line `i` (from 0) ends in the text, before its line break.
    fn end(&self, i: usize) -> usize {
        self.start(i) + self.lines[i].len()
    }
}

/// `format_lines` of a text already split.
fn format_split(path: &str, split: &Split, offset: i64, limit: usize, max_chars: usize, note: Option<&str>) -> String {
    if split.text.is_empty() {
        return format!("({path} is empty.)");
    }
    let lines = &split.lines;
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
    let ascii = split.ascii;
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
    fn a_characters_place_is_found_in_any_mix_of_widths() {
        let text = "aé€😀b\nçx😀\n".repeat(50);
        for n in 0..=text.chars().count() + 2 {
            let want = text.char_indices().nth(n).map_or(text.len(), |(i, _)| i);
            assert_eq!(super::char_position(text.as_bytes(), n), want, "character {n}");
        }
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
