//! `read_file`: numbered lines, cut at `maxReadLines` lines or `maxOutputChars` characters with a
//! last line that says what was shown and the offset to continue from.

use super::{
    check_read_size, checked_path, fmt_count, fmt_num, format_bytes, path_prop, plural, str_arg, FsToolOptions,
    MAX_READ_BYTES,
};
use serde_json::{json, Value};

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};

/// The arguments of `read_file`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative path of the file to read."),
            "offset": { "type": "integer", "minimum": 1, "description": "1-based line to start from." },
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

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<String> {
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
    let content = fs.read_file(&path).await?;
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(1) as usize;
    let limit =
        args.get("limit").and_then(Value::as_u64).map(|l| l as usize).unwrap_or(o.max_read_lines).min(o.max_read_lines);
    Ok(format_lines(&path, &content, offset, limit, o.max_output_chars))
}

/// Formats `content` as numbered lines from 1-based `offset`, at most `limit` lines and about
/// `max_chars` characters.
pub fn format_lines(path: &str, content: &str, offset: usize, limit: usize, max_chars: usize) -> String {
    if content.is_empty() {
        return format!("({path} is empty.)");
    }
    let body = content.strip_suffix('\n').unwrap_or(content);
    let lines: Vec<&str> = body.split('\n').collect();
    let total = lines.len();
    if offset > total {
        return format!("({path} has {}; offset {offset} is past the end.)", plural(total, "line"));
    }
    let start = offset - 1;
    let end = (start + limit).min(total);
    let width = end.to_string().len();
    let mut out = String::new();
    let mut chars = 0usize;
    let mut shown_to = start;
    for (i, line) in lines[start..end].iter().enumerate() {
        let n = start + i + 1;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let entry = format!(" {n:>width$}\t{line}\n");
        let len = entry.chars().count();
        if chars + len > max_chars {
            if i == 0 {
                // A single line longer than the budget: show its start.
                let cut: String = entry.chars().take(max_chars.saturating_sub(1)).collect();
                out.push_str(&cut);
                out.push('\n');
                out.push_str(&format!(
                    "(Line {n} is longer than {} characters and was cut. Showing line {n} of {}. Use offset {} to continue.)",
                    fmt_count(max_chars),
                    fmt_count(total),
                    n + 1
                ));
                return out;
            }
            break;
        }
        chars += len;
        out.push_str(&entry);
        shown_to = n;
    }
    if shown_to < total {
        out.push_str(&format!(
            "(Showing lines {}-{} of {}. Use offset {} to continue.)",
            offset,
            shown_to,
            fmt_count(total),
            shown_to + 1
        ));
    } else if out.ends_with('\n') {
        out.pop();
    }
    out
}
