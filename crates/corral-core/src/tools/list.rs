//! `list_dir`: sorted entries, directories ending with `/`, links with `@`, denied names left out.

use super::{checked_path, fmt_count, fmt_num, kind_of, path_prop, push_lines, str_arg, FsToolOptions};
use serde_json::{json, Value};

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;

/// The arguments of `list_dir`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": { "path": path_prop("Workspace-relative directory to list (the root when omitted).") },
        "additionalProperties": false
    })
}

/// What the model is told about `list_dir`, with the limits these options set.
pub(super) fn description(o: &FsToolOptions) -> String {
    format!(
            "List a directory of the workspace (the root when path is omitted). Entries are sorted; directories end with '/', links with '@'. At most {} entries.",
            fmt_num(o.max_results as u64)
        )
}

pub(super) async fn run(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<String> {
    let path = checked_path(fs, o, str_arg(args, "path").unwrap_or(".")).await?;
    match kind_of(fs, &path).await? {
        None => return Err(Error::not_found(&path)),
        Some(kind) if kind != EntryType::Directory => {
            return Err(Error::new(Code::NotAFile, format!("{path} is not a directory; use read_file to read a file.")))
        }
        _ => {}
    }
    let mut names: Vec<String> = fs
        .readdir(&path)
        .await?
        .into_iter()
        // A provider's entry that is not a name (`..`, `../../etc`, `/abs`) is dropped.
        .filter(|e| super::walk::is_entry_name(&e.name) && !name_is_denied(&e.name, &o.deny))
        .map(|e| match e.kind {
            EntryType::Directory => format!("{}/", e.name),
            EntryType::Symlink => format!("{}@", e.name),
            _ => e.name,
        })
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(format!("({path} is empty.)"));
    }
    let total = names.len();
    let mut out = String::new();
    let shown = push_lines(&mut out, names.iter().map(String::as_str), o.max_results, o.max_output_chars);
    if shown < total {
        out.push_str(&format!("(Showing {} of {} entries.)", fmt_count(shown), fmt_count(total)));
    } else {
        out.pop();
    }
    Ok(out)
}
