//! The V4A diff of the OpenAI Agents SDK's `applyPatchTool` (one file's diff, headerless), applied
//! exactly as the SDK's own `applyDiff` does (`@openai/agents-core`, `utils/applyDiff`): its
//! parser, its anchors, its three matching passes (exact, trailing whitespace, both ends), its
//! `*** End of File` rule, its `create` mode and its line endings, so `createEditor` gives the
//! text the SDK would and refuses what it refuses. Its failures are typed by kind: a context or
//! an anchor that is not found is `PatchMismatch`, anything else `InvalidPatch`. A differential
//! test runs generated diffs through both (`__test__/openai-editor.test.mjs`).
//!
//! The SDK compares JavaScript strings; `trim` here is JavaScript's (its white space and line
//! terminators, U+FEFF included, U+0085 not).

use crate::error::{Code, Error, Result};

/// `applyDiff`'s two modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Patch an existing file (`@@` sections of ` `, `-` and `+` lines).
    Update,
    /// Create a file: every line starts with `+`.
    Create,
}

const END_PATCH: &str = "*** End Patch";
const END_FILE: &str = "*** End of File";
const END_SECTION_MARKERS: [&str; 5] = [END_PATCH, "*** Update File:", "*** Delete File:", "*** Add File:", END_FILE];
const SECTION_TERMINATORS: [&str; 4] = [END_PATCH, "*** Update File:", "*** Delete File:", "*** Add File:"];

fn invalid(message: String) -> Error {
    Error::new(Code::InvalidPatch, message)
}

fn mismatch(message: String) -> Error {
    Error::new(Code::PatchMismatch, message)
}

/// JavaScript's white space and line terminators (what `String.prototype.trim` removes).
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{2029}' | '\u{202f}' | '\u{205f}' | '\u{3000}' | '\u{feff}'
    )
}

fn trim(s: &str) -> &str {
    s.trim_matches(js_space)
}

fn trim_end(s: &str) -> &str {
    s.trim_end_matches(js_space)
}

/// `applyDiff(input, diff, mode)`.
pub fn apply(input: &str, diff: &str, mode: Mode) -> Result<String> {
    let lines = diff_lines(diff);
    if mode == Mode::Create {
        return parse_create(&lines);
    }
    let crlf = line_ending_is_crlf(input);
    let normalized = if crlf { input.replace("\r\n", "\n") } else { input.to_string() };
    let chunks = parse_update(&lines, &normalized)?;
    apply_chunks(&normalized, &chunks, if crlf { "\r\n" } else { "\n" })
}

/// The file's line ending: `\r\n` when every newline has a `\r` before it (and there is one).
fn line_ending_is_crlf(input: &str) -> bool {
    let b = input.as_bytes();
    let mut any = false;
    for (i, &c) in b.iter().enumerate() {
        if c != b'\n' {
            continue;
        }
        any = true;
        if i == 0 || b[i - 1] != b'\r' {
            return false;
        }
    }
    any
}

/// The diff's lines: split on `\n` or `\r\n`, a trailing `\r` dropped, and a last empty line
/// dropped.
fn diff_lines(diff: &str) -> Vec<String> {
    let mut lines: Vec<String> = diff
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.strip_suffix('\r').unwrap_or(l).to_string()
        })
        .collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

struct Parser {
    lines: Vec<String>,
    index: usize,
}

impl Parser {
    fn new(lines: &[String]) -> Parser {
        let mut lines = lines.to_vec();
        lines.push(END_PATCH.to_string());
        Parser { lines, index: 0 }
    }

    fn done(&self, prefixes: &[&str]) -> bool {
        match self.lines.get(self.index) {
            None => true,
            Some(l) => prefixes.iter().any(|p| l.starts_with(p)),
        }
    }

    fn read_str(&mut self, prefix: &str) -> Option<String> {
        let rest = self.lines.get(self.index)?.strip_prefix(prefix)?.to_string();
        self.index += 1;
        Some(rest)
    }
}

fn parse_create(lines: &[String]) -> Result<String> {
    let mut p = Parser::new(lines);
    let mut out: Vec<&str> = Vec::new();
    let mut owned: Vec<String> = Vec::new();
    while !p.done(&SECTION_TERMINATORS) {
        let line = p.lines[p.index].clone();
        p.index += 1;
        match line.strip_prefix('+') {
            Some(rest) => owned.push(rest.to_string()),
            None => return Err(invalid(format!("Invalid Add File Line: {line}"))),
        }
    }
    out.extend(owned.iter().map(String::as_str));
    Ok(out.join("\n"))
}

struct Chunk {
    orig_index: usize,
    del: Vec<String>,
    ins: Vec<String>,
}

fn parse_update(lines: &[String], input: &str) -> Result<Vec<Chunk>> {
    let mut p = Parser::new(lines);
    let input_lines: Vec<&str> = input.split('\n').collect();
    let mut chunks = Vec::new();
    let mut cursor = 0usize;
    while !p.done(&END_SECTION_MARKERS) {
        let (anchors, count) = read_anchors(&mut p);
        if !(count > 0 || cursor == 0) {
            return Err(invalid(format!("Invalid Line:\n{}", p.lines.get(p.index).map_or("", String::as_str))));
        }
        let require = count > 1;
        for (i, anchor) in anchors.iter().enumerate() {
            cursor = advance_to_anchor(anchor, &input_lines, cursor, require, i > 0)?;
        }
        let section = read_section(&p.lines, p.index)?;
        let found = find_context(&input_lines, &section.context, cursor, section.eof);
        let Some(at) = found else {
            let text = section.context.join("\n");
            return Err(mismatch(if section.eof {
                format!("Invalid EOF Context {cursor}:\n{text}")
            } else {
                format!("Invalid Context {cursor}:\n{text}")
            }));
        };
        for c in section.chunks {
            chunks.push(Chunk { orig_index: c.orig_index + at, ..c });
        }
        cursor = at + section.context.len();
        p.index = section.end;
    }
    Ok(chunks)
}

/// The `@@` lines before a section: each `@@ text` with text an anchor, a bare `@@` counted too.
fn read_anchors(p: &mut Parser) -> (Vec<String>, usize) {
    let (mut anchors, mut count) = (Vec::new(), 0);
    loop {
        let consumed = match p.read_str("@@ ") {
            Some(a) => {
                if !trim(&a).is_empty() {
                    anchors.push(a);
                }
                true
            }
            None if p.lines.get(p.index).is_some_and(|l| l == "@@") => {
                p.index += 1;
                true
            }
            None => false,
        };
        if !consumed {
            break;
        }
        count += 1;
    }
    (anchors, count)
}

fn advance_to_anchor(anchor: &str, lines: &[&str], cursor: usize, require: bool, forward: bool) -> Result<usize> {
    let mut cursor = cursor;
    let mut found = !forward && lines[..cursor.min(lines.len())].contains(&anchor);
    if !found {
        if let Some(i) = (cursor..lines.len()).find(|&i| lines[i] == anchor) {
            cursor = i + 1;
            found = true;
        }
    }
    if !found {
        found = !forward && lines[..cursor.min(lines.len())].iter().any(|l| trim(l) == trim(anchor));
        if !found {
            if let Some(i) = (cursor..lines.len()).find(|&i| trim(lines[i]) == trim(anchor)) {
                cursor = i + 1;
                found = true;
            }
        }
    }
    if require && !found {
        return Err(mismatch(format!("Invalid Anchor {cursor}:\n{anchor}")));
    }
    Ok(cursor)
}

struct Section {
    context: Vec<String>,
    chunks: Vec<Chunk>,
    end: usize,
    eof: bool,
}

#[derive(PartialEq, Clone, Copy)]
enum LineMode {
    Keep,
    Add,
    Delete,
}

fn read_section(lines: &[String], start: usize) -> Result<Section> {
    let mut context: Vec<String> = Vec::new();
    let (mut del, mut ins): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let mut chunks = Vec::new();
    let mut mode = LineMode::Keep;
    let mut index = start;
    while index < lines.len() {
        let raw = &lines[index];
        if raw.starts_with("@@") || END_SECTION_MARKERS.iter().any(|m| raw.starts_with(m)) {
            break;
        }
        if raw == "***" {
            break;
        }
        if raw.starts_with("***") {
            return Err(invalid(format!("Invalid Line: {raw}")));
        }
        index += 1;
        let last = mode;
        let line: &str = if raw.is_empty() { " " } else { raw };
        let mut chars = line.chars();
        mode = match chars.next() {
            Some('+') => LineMode::Add,
            Some('-') => LineMode::Delete,
            Some(' ') => LineMode::Keep,
            _ => return Err(invalid(format!("Invalid Line: {line}"))),
        };
        let text = chars.as_str().to_string();
        if mode == LineMode::Keep && last != mode && (!ins.is_empty() || !del.is_empty()) {
            chunks.push(Chunk {
                orig_index: context.len() - del.len(),
                del: std::mem::take(&mut del),
                ins: std::mem::take(&mut ins),
            });
        }
        match mode {
            LineMode::Delete => {
                del.push(text.clone());
                context.push(text);
            }
            LineMode::Add => ins.push(text),
            LineMode::Keep => context.push(text),
        }
    }
    if !ins.is_empty() || !del.is_empty() {
        chunks.push(Chunk { orig_index: context.len() - del.len(), del, ins });
    }
    if index < lines.len() && lines[index] == END_FILE {
        return Ok(Section { context, chunks, end: index + 1, eof: true });
    }
    if index == start {
        return Err(invalid(format!(
            "Nothing in this section - index={index} {}",
            lines.get(index).map_or("undefined", String::as_str)
        )));
    }
    Ok(Section { context, chunks, end: index, eof: false })
}

fn find_context(lines: &[&str], context: &[String], start: usize, eof: bool) -> Option<usize> {
    if eof {
        let search = if lines.len() > 1 && lines.last() == Some(&"") { &lines[..lines.len() - 1] } else { lines };
        let end_start = search.len().saturating_sub(context.len());
        if let Some(i) = find_core(search, context, end_start) {
            return Some(i);
        }
        return find_core(search, context, start.min(search.len()));
    }
    find_core(lines, context, start)
}

/// `findContextCore`: the first place from `start` where `context` matches exactly, else
/// ignoring trailing white space, else ignoring it at both ends. Each line is hashed once per
/// pass and windows are compared by a rolling hash (a hit is checked line by line), so a pass
/// costs one walk over the file whatever the context's length.
fn find_core(lines: &[&str], context: &[String], start: usize) -> Option<usize> {
    if context.is_empty() {
        return Some(start);
    }
    let m = context.len();
    if start >= lines.len() || m > lines.len() - start {
        return None;
    }
    const BASE: u64 = 0x100_0000_01b3;
    let hash = |s: &str| s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let roll = |acc: u64, x: u64| acc.wrapping_mul(BASE).wrapping_add(x);
    let top = (1..m).fold(1u64, |acc, _| acc.wrapping_mul(BASE));
    let passes: [fn(&str) -> &str; 3] = [|s| s, trim_end, trim];
    for f in passes {
        let h: Vec<u64> = lines[start..].iter().map(|l| hash(f(l))).collect();
        let want = context.iter().fold(0u64, |acc, c| roll(acc, hash(f(c))));
        let mut window = h[..m].iter().fold(0u64, |acc, &x| roll(acc, x));
        let last = h.len() - m;
        for i in 0..=last {
            if window == want && context.iter().enumerate().all(|(j, c)| f(lines[start + i + j]) == f(c)) {
                return Some(start + i);
            }
            if i < last {
                window = roll(window.wrapping_sub(h[i].wrapping_mul(top)), h[i + m]);
            }
        }
    }
    None
}

fn apply_chunks(input: &str, chunks: &[Chunk], ending: &str) -> Result<String> {
    let orig: Vec<&str> = input.split('\n').collect();
    let mut dest: Vec<&str> = Vec::new();
    let mut at = 0usize;
    for c in chunks {
        if c.orig_index > orig.len() {
            return Err(invalid(format!("applyDiff: chunk.origIndex {} > input length {}", c.orig_index, orig.len())));
        }
        if at > c.orig_index {
            return Err(invalid(format!("applyDiff: overlapping chunk at {} (cursor {at})", c.orig_index)));
        }
        dest.extend(&orig[at..c.orig_index]);
        at = c.orig_index;
        dest.extend(c.ins.iter().map(String::as_str));
        at += c.del.len();
    }
    dest.extend(orig.get(at..).unwrap_or_default());
    Ok(dest.join(ending))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_replaces_its_lines_and_keeps_the_line_ending_and_the_final_newline() {
        let out = apply("a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n c\n", Mode::Update).unwrap();
        assert_eq!(out, "a\r\nB\r\nc\r\n");
        assert_eq!(apply("", "+x\n+y\n", Mode::Create).unwrap(), "x\ny");
        assert_eq!(apply("", "x\n", Mode::Create).unwrap_err().code, Code::InvalidPatch);
        let e = apply("a\nb\n", "@@\n-zzz\n+y\n", Mode::Update).unwrap_err();
        assert_eq!(e.code, Code::PatchMismatch);
        assert!(e.message.starts_with("Invalid Context 0:"), "{}", e.message);
        let e = apply("a\n", "@@ one\n@@ two\n-a\n+b\n", Mode::Update).unwrap_err();
        assert_eq!(e.code, Code::PatchMismatch, "{}", e.message);
        assert!(e.message.starts_with("Invalid Anchor"), "{}", e.message);
        assert_eq!(apply("a\n", "@@\n?a\n", Mode::Update).unwrap_err().code, Code::InvalidPatch);
    }

    #[test]
    fn trim_is_javascripts() {
        assert_eq!(trim("\u{feff} x \u{3000}"), "x");
        assert_eq!(trim("\u{85}x"), "\u{85}x");
    }
}
