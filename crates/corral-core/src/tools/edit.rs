//! `edit_file`: replaces exact text. Refuses text that is missing (with a CRLF hint) or
//! ambiguous; succeeds without writing when the edit was already applied; refuses files that are
//! not UTF-8 when the provider can read bytes; keeps a UTF-8 BOM.

use super::{
    check_read_size, check_write_size, checked_path, fmt_count, hooked_write, lock_path, path_prop, str_arg, Ctx,
    FsToolOptions,
};
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

/// The arguments of `edit_file`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative path of the file to edit."),
            "old_string": { "type": "string", "minLength": 1, "description": "The exact text to replace, including whitespace and indentation." },
            "new_string": { "type": "string", "description": "The text to put in its place." },
            "replace_all": { "type": "boolean", "description": "Replace every occurrence instead of requiring exactly one." }
        },
        "required": ["path", "old_string", "new_string"],
        "additionalProperties": false
    })
}

/// What the model is told about `edit_file`, with the limits these options set.
pub(super) fn description(_o: &FsToolOptions) -> String {
    "Replace exact text in a file: old_string must appear exactly once (or pass replace_all: true), including whitespace and indentation. Read the file first. Fails with an explanation when old_string is missing or appears more than once. Refuses files that are not UTF-8.".to_string()
}

/// The file's text, whether it started with a UTF-8 BOM, refusing what is not UTF-8.
async fn read_text(fs: &dyn FsProvider, path: &str) -> Result<(String, bool)> {
    if fs.caps().read_bytes {
        let bytes = fs.read_file_bytes(path).await?;
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

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or_default()).await?;
    let old = str_arg(args, "old_string").unwrap_or_default();
    let new = str_arg(args, "new_string").unwrap_or_default();
    let replace_all = args.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
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
    check_write_size(&path, text.len() as u64, "the file to edit")?;
    if old == new && text.contains(old) {
        return Ok(format!("old_string and new_string are the same: {path} is left as it is. Nothing was written."));
    }
    let count = text.matches(old).count();
    if count == 0 {
        if !new.is_empty() && text.contains(new) {
            return Ok(format!(
                "The edit was already applied: {path} already contains new_string and not old_string. Nothing was written."
            ));
        }
        let mut msg = format!("old_string was not found in {path}. Read the file and copy the exact text, including whitespace and indentation.");
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
        return Err(Error::new(Code::NoMatch, msg));
    }
    if count > 1 && !replace_all {
        return Err(Error::new(
            Code::Ambiguous,
            format!("old_string appears {count} times in {path}. Include more surrounding lines to make it unique, or pass replace_all: true to replace every occurrence."),
        ));
    }
    // The result's size, computed before anything is allocated: a short old_string replaced
    // everywhere by a long new_string must not grow the file past the limit.
    let replacements = if replace_all { count } else { 1 } as u64;
    let size = (bom as u64 * 3 + text.len() as u64 - replacements * old.len() as u64)
        .saturating_add(replacements.saturating_mul(new.len() as u64));
    check_write_size(&path, size, "the edited file")?;
    let replaced = if replace_all { text.replace(old, new) } else { text.replacen(old, new, 1) };
    let mut out = String::with_capacity(replaced.len() + 3);
    if bom {
        out.push_str(BOM);
    }
    out.push_str(&replaced);
    hooked_write(fs, o, ctx, &path, out.as_bytes()).await?;
    Ok(if count == 1 {
        format!("Edited {path}: replaced 1 occurrence.")
    } else {
        format!("Edited {path}: replaced {} occurrences.", fmt_count(count))
    })
}
