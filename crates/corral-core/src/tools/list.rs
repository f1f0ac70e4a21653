//! `list_dir`: sorted entries, directories ending with `/`, denied names left out.

use serde_json::Value;

use super::{checked_path, fmt_count, kind_of, push_line, str_arg, FsToolOptions};
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};
use crate::path::name_is_denied;

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
        .filter(|e| !name_is_denied(&e.name, &o.deny))
        .map(|e| if e.kind == EntryType::Directory { format!("{}/", e.name) } else { e.name })
        .collect();
    names.sort();
    if names.is_empty() {
        return Ok(format!("({path} is empty.)"));
    }
    let total = names.len();
    let mut out = String::new();
    let (mut shown, mut chars) = (0, 0);
    for name in names.iter().take(o.max_results) {
        if !push_line(&mut out, &mut chars, name, o.max_output_chars) {
            break;
        }
        shown += 1;
    }
    if shown < total {
        out.push_str(&format!("(Showing {} of {} entries.)", fmt_count(shown), fmt_count(total)));
    } else {
        out.pop();
    }
    Ok(out)
}
