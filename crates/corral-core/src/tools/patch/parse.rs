//! The patch envelope codex's models write, parsed as codex parses it:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: path        then the file's lines, each starting with `+`
//! *** Delete File: path
//! *** Update File: path
//! *** Move to: new/path     (optional)
//! @@ context                 then ` ` (context), `-` (removed) and `+` (added) lines;
//! *** End of File            (optional) the chunk ends the file
//! *** End Patch
//! ```
//!
//! Leniently: surrounding whitespace and whitespace around the markers are ignored, a heredoc
//! wrapper (`<<'EOF'` … `EOF`) is unwrapped, and the first chunk of a file may omit its `@@`.

use crate::error::{Code, Error, Result};

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const EOF_MARK: &str = "*** End of File";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hunk {
    Add { path: String, contents: String },
    Delete { path: String },
    Update { path: String, move_to: Option<String>, chunks: Vec<Chunk> },
}

impl Hunk {
    pub fn path(&self) -> &str {
        match self {
            Hunk::Add { path, .. } | Hunk::Delete { path } | Hunk::Update { path, .. } => path,
        }
    }
}

/// One `@@` section of an update: the lines to find (context and removed) and what replaces them
/// (context and added), after the optional anchor line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Chunk {
    pub context: Option<String>,
    pub old_lines: Vec<String>,
    pub new_lines: Vec<String>,
    pub end_of_file: bool,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(Code::InvalidPatch, message.into())
}

fn invalid_hunk(line_number: usize, message: impl std::fmt::Display) -> Error {
    invalid(format!("invalid hunk at line {line_number}, {message}"))
}

/// The lines between the markers, with the line number of the first (1-based, in `input`).
fn body(input: &str) -> Result<(Vec<&str>, usize)> {
    let all: Vec<&str> = input.trim().lines().collect();
    let lead = input.lines().take_while(|l| l.trim().is_empty()).count();
    let wrapped = |lines: &[&str]| {
        lines.first().is_some_and(|l| l.trim() == BEGIN) && lines.last().is_some_and(|l| l.trim() == END)
    };
    if wrapped(&all) {
        return Ok((all[1..all.len() - 1].to_vec(), lead + 2));
    }
    // A heredoc around the envelope: `<<'EOF'`, `<<"EOF"` or `<<EOF` (after a command such as
    // `apply_patch`) and a last line `EOF`.
    if all.len() >= 4 {
        let first = all[0].trim();
        let heredoc = first.ends_with("<<EOF") || first.ends_with("<<'EOF'") || first.ends_with("<<\"EOF\"");
        if heredoc && all[all.len() - 1].trim() == "EOF" && wrapped(&all[1..all.len() - 1]) {
            return Ok((all[2..all.len() - 2].to_vec(), lead + 3));
        }
    }
    match all.first() {
        Some(l) if l.trim() != BEGIN => Err(invalid("The first line of the patch must be '*** Begin Patch'.")),
        _ => Err(invalid("The last line of the patch must be '*** End Patch'.")),
    }
}

/// The hunks of a patch, in order. A patch with none is invalid.
pub fn parse(input: &str) -> Result<Vec<Hunk>> {
    let (lines, first_number) = body(input)?;
    let mut hunks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let number = first_number + i;
        let line = lines[i].trim();
        if let Some(path) = line.strip_prefix(ADD) {
            let mut contents = String::new();
            i += 1;
            while let Some(added) = lines.get(i).and_then(|l| l.strip_prefix('+')) {
                contents.push_str(added);
                contents.push('\n');
                i += 1;
            }
            hunks.push(Hunk::Add { path: path.to_string(), contents });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete { path: path.to_string() });
            i += 1;
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            i += 1;
            let move_to = match lines.get(i).and_then(|l| l.trim().strip_prefix(MOVE_TO)) {
                Some(to) => {
                    i += 1;
                    Some(to.to_string())
                }
                None => None,
            };
            let mut chunks = Vec::new();
            while i < lines.len() {
                let l = lines[i];
                if l.trim().is_empty() {
                    i += 1; // blank lines between chunks
                    continue;
                }
                if l.starts_with("***") {
                    break;
                }
                let (chunk, used) = parse_chunk(&lines[i..], first_number + i, chunks.is_empty())?;
                chunks.push(chunk);
                i += used;
            }
            if chunks.is_empty() {
                return Err(invalid_hunk(number, format!("Update file hunk for path '{path}' is empty")));
            }
            hunks.push(Hunk::Update { path: path.to_string(), move_to, chunks });
        } else {
            return Err(invalid_hunk(
                number,
                format!(
                    "'{line}' is not a valid hunk header. Valid hunk headers: '*** Add File: {{path}}', '*** Delete File: {{path}}', '*** Update File: {{path}}'"
                ),
            ));
        }
    }
    if hunks.is_empty() {
        return Err(invalid("The patch holds no changes: give at least one Add File, Delete File or Update File."));
    }
    check_bounds(&hunks)?;
    Ok(hunks)
}

/// The most lines a chunk may have to find (context and removed lines).
pub const MAX_CHUNK_LINES: usize = 10_000;
/// The most chunks and files one patch may hold.
pub const MAX_HUNKS: usize = 2_000;

/// A patch whose matching cost is past what one call may spend is `InvalidPatch`.
fn check_bounds(hunks: &[Hunk]) -> Result<()> {
    let mut count = 0usize;
    for h in hunks {
        count += match h {
            Hunk::Update { chunks, .. } => chunks.len(),
            _ => 1,
        };
        if let Hunk::Update { path, chunks, .. } = h {
            if let Some(c) = chunks.iter().find(|c| c.old_lines.len() > MAX_CHUNK_LINES) {
                return Err(invalid(format!(
                    "A chunk for {path} has {} lines to find; the limit is {MAX_CHUNK_LINES}. Give about three lines of context around each change.",
                    c.old_lines.len()
                )));
            }
        }
    }
    if count > MAX_HUNKS {
        return Err(invalid(format!(
            "The patch holds {count} chunks and files; the limit is {MAX_HUNKS}. Split it into several patches."
        )));
    }
    Ok(())
}

/// One chunk from its `@@` line (optional for a file's first chunk); returns it and how many
/// lines it used.
fn parse_chunk(lines: &[&str], number: usize, first: bool) -> Result<(Chunk, usize)> {
    let mut chunk = Chunk::default();
    let head = lines[0];
    let mut i = if head.trim_end() == "@@" {
        1
    } else if let Some(ctx) = head.strip_prefix("@@ ") {
        chunk.context = Some(ctx.to_string());
        1
    } else if first {
        0
    } else {
        return Err(invalid_hunk(
            number,
            format!("Expected update hunk to start with a @@ context marker, got: '{head}'"),
        ));
    };
    let start = i;
    while let Some(&l) = lines.get(i) {
        if l.trim() == EOF_MARK {
            if i == start {
                return Err(invalid_hunk(number + i, "Update hunk does not contain any lines"));
            }
            chunk.end_of_file = true;
            i += 1;
            break;
        }
        match l.chars().next() {
            // An empty line is an empty context line, as codex reads it.
            None => {
                chunk.old_lines.push(String::new());
                chunk.new_lines.push(String::new());
            }
            Some(' ') => {
                chunk.old_lines.push(l[1..].to_string());
                chunk.new_lines.push(l[1..].to_string());
            }
            Some('-') => chunk.old_lines.push(l[1..].to_string()),
            Some('+') => chunk.new_lines.push(l[1..].to_string()),
            _ if i > start && (l.starts_with("@@") || l.starts_with("***")) => break,
            _ if i == start => {
                return Err(invalid_hunk(
                    number + i,
                    format!("Unexpected line found in update hunk: '{l}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)"),
                ))
            }
            _ => break,
        }
        i += 1;
    }
    if i == start {
        return Err(invalid_hunk(number, "Update hunk does not contain any lines"));
    }
    Ok((chunk, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_three_kinds_of_hunk_parse_with_move_anchor_and_end_of_file() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** Delete File: old.txt\n*** Update File: src/m.rs\n*** Move to: src/n.rs\n@@ fn main() {\n-    old();\n+    new();\n     end();\n*** End of File\n*** End Patch";
        let hunks = parse(patch).unwrap();
        assert_eq!(hunks[0], Hunk::Add { path: "a.txt".into(), contents: "one\ntwo\n".into() });
        assert_eq!(hunks[1], Hunk::Delete { path: "old.txt".into() });
        assert_eq!(
            hunks[2],
            Hunk::Update {
                path: "src/m.rs".into(),
                move_to: Some("src/n.rs".into()),
                chunks: vec![Chunk {
                    context: Some("fn main() {".into()),
                    old_lines: lines(&["    old();", "    end();"]),
                    new_lines: lines(&["    new();", "    end();"]),
                    end_of_file: true,
                }],
            }
        );
    }

    #[test]
    fn a_heredoc_wrapper_and_whitespace_around_markers_are_accepted() {
        let patch = "apply_patch <<'EOF'\n  *** Begin Patch  \n*** Update File: a\n-x\n+y\n*** End Patch \nEOF\n";
        assert_eq!(parse(patch).unwrap().len(), 1);
        let patch = "\n\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n";
        assert_eq!(parse(patch).unwrap(), vec![Hunk::Delete { path: "a".into() }]);
    }

    #[test]
    fn several_chunks_of_one_file_each_start_at_their_marker() {
        let patch = "*** Begin Patch\n*** Update File: a\n@@\n a\n-b\n+B\n@@ section\n c\n-d\n*** End Patch";
        let Hunk::Update { chunks, .. } = &parse(patch).unwrap()[0] else { panic!() };
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].context, None);
        assert_eq!(chunks[1].context.as_deref(), Some("section"));
        assert_eq!(chunks[1].old_lines, lines(&["c", "d"]));
        assert_eq!(chunks[1].new_lines, lines(&["c"]));
    }

    #[test]
    fn grammar_errors_name_the_line() {
        let e = parse("*** Begin Patch\n*** Frobnicate File: a\n*** End Patch").unwrap_err();
        assert_eq!(e.code, Code::InvalidPatch);
        assert!(
            e.message.starts_with("invalid hunk at line 2, '*** Frobnicate File: a' is not a valid hunk header"),
            "{}",
            e.message
        );
        let e = parse("*** Begin Patch\n*** Update File: a\n*** End Patch").unwrap_err();
        assert!(e.message.contains("Update file hunk for path 'a' is empty"), "{}", e.message);
        let e = parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n@@\n*** End Patch").unwrap_err();
        assert!(e.message.starts_with("invalid hunk at line 5"), "{}", e.message);
        let e = parse("*** Update File: a\n*** End Patch").unwrap_err();
        assert_eq!(e.message, "The first line of the patch must be '*** Begin Patch'.");
        let e = parse("*** Begin Patch\n*** Delete File: a").unwrap_err();
        assert_eq!(e.message, "The last line of the patch must be '*** End Patch'.");
        let e = parse("*** Begin Patch\n*** End Patch").unwrap_err();
        assert_eq!(e.code, Code::InvalidPatch);
    }
}
