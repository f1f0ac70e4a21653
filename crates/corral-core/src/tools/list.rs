//! `list_dir`: sorted entries, directories ending with `/`, links with `@`, denied names left out.

use super::args::{path_prop, str_arg};
use super::guard::checked_path;
use super::options::FsToolOptions;
use super::write_path::kind_of;
use crate::text::{fmt_count, fmt_num, push_lines};
use serde_json::{json, Value};

use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;

/// The arguments of `list_dir`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": path_prop("Workspace-relative directory to list (the root when omitted)."),
            "depth": { "type": "integer", "minimum": 1, "maximum": 100, "description": "How many levels to list (default 1: the directory's own entries); deeper entries are paths relative to the listed directory." }
        },
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
    let depth = args.get("depth").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
    // Level by level; a deeper entry is its path from the listed directory. Links are not followed.
    let mut names: Vec<String> = Vec::new();
    let mut level = vec![String::new()];
    for d in 1..=depth {
        let mut next = Vec::new();
        for rel in level {
            let dir = if rel.is_empty() {
                path.clone()
            } else if path == "." {
                rel.clone()
            } else {
                format!("{path}/{rel}")
            };
            for e in fs.readdir(&dir).await? {
                // A provider's entry that is not a name (`..`, `../../etc`, `/abs`) is dropped.
                if !super::walk::is_entry_name(&e.name) || name_is_denied(&e.name, &o.deny) {
                    continue;
                }
                let shown = if rel.is_empty() { e.name.clone() } else { format!("{rel}/{}", e.name) };
                match e.kind {
                    EntryType::Directory => {
                        names.push(format!("{shown}/"));
                        if d < depth {
                            next.push(shown);
                        }
                    }
                    EntryType::Symlink => names.push(format!("{shown}@")),
                    _ => names.push(shown),
                }
            }
            if names.len() > o.max_files_scanned {
                break;
            }
        }
        level = next;
        if names.len() > o.max_files_scanned {
            break;
        }
    }
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
