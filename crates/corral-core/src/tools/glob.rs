//! `glob`: files by pattern, sorted, over every provider through the one walker.

use super::args::{path_prop, skipped_names, str_arg};
use super::guard::checked_path;
use super::options::{Ctx, FsToolOptions};
use super::write_path::kind_of;
use crate::text::{fmt_count, fmt_num, push_lines};
use std::sync::{Arc, Mutex};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::{json, Value};

use super::walk::{join, walk, Order, Visit, Want};
use crate::error::{Code, Error, Result};
use crate::fs::{EntryType, FsProvider};

/// The arguments of `glob`, as JSON Schema.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": { "type": "string", "minLength": 1, "description": "Glob such as `src/**/*.ts`." },
            "path": path_prop("Directory to search from (the root when omitted).")
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

/// What the model is told about `glob`, with the limits these options set.
pub(super) fn description(o: &FsToolOptions) -> String {
    format!(
            "Find files by glob pattern: `*` matches within one directory, `**` across directories, plus `?`, `[abc]` and `{{a,b}}`. Returns sorted workspace paths, at most {}. Skips {}; scans at most {} files.",
            fmt_num(o.max_results as u64), skipped_names(o), fmt_num(o.max_files_scanned as u64)
        )
}

/// The longest glob accepted (`glob`'s pattern, grep's `glob`).
pub const MAX_GLOB_BYTES: usize = 1024;

/// The matcher of a glob as `glob` reads it. Agents ask for the same few patterns again and
/// again, and compiling one builds a regex: the last short ones compiled are kept (a short
/// pattern makes a small regex, so what is kept stays small).
pub(super) fn compile_glob(pattern: &str) -> Result<GlobMatcher> {
    use std::collections::HashMap;
    use std::sync::LazyLock;
    const KEPT: usize = 32;
    const KEPT_BYTES: usize = 128;
    static KEEP: LazyLock<Mutex<HashMap<String, GlobMatcher>>> = LazyLock::new(Default::default);
    if let Some(m) = KEEP.lock().unwrap_or_else(|p| p.into_inner()).get(pattern) {
        return Ok(m.clone());
    }
    let matcher = compiled(pattern)?.1;
    if pattern.len() > KEPT_BYTES {
        return Ok(matcher);
    }
    let mut keep = KEEP.lock().unwrap_or_else(|p| p.into_inner());
    if keep.len() >= KEPT {
        keep.clear();
    }
    keep.insert(pattern.to_string(), matcher.clone());
    Ok(matcher)
}

/// A glob as `glob` reads it: relative, `*` within one directory, `**` across.
pub(super) fn compile_glob_pattern(pattern: &str) -> Result<globset::Glob> {
    compiled(pattern).map(|(g, _)| g)
}

/// The glob and its matcher, compiled once.
fn compiled(pattern: &str) -> Result<(globset::Glob, GlobMatcher)> {
    let unified = pattern.replace('\\', "/");
    if unified.starts_with('/') || unified.split('/').any(|s| s == "..") {
        return Err(Error::new(
            Code::OutsideWorkspace,
            format!("Glob pattern is outside the workspace: {pattern} (use a pattern relative to path, without '..' or a leading '/')"),
        ));
    }
    if pattern.len() > MAX_GLOB_BYTES {
        return Err(Error::new(
            Code::InvalidPattern,
            format!("Invalid glob pattern: it is {} bytes long; the limit is {}.", pattern.len(), MAX_GLOB_BYTES),
        ));
    }
    let unified = unified.trim_start_matches("./").to_string();
    let invalid = |why: String| Error::new(Code::InvalidPattern, format!("Invalid glob pattern {pattern}: {why}"));
    // globset panics on a glob whose regex outgrows its size limit: that is a bad pattern too.
    std::panic::catch_unwind(|| {
        let g = GlobBuilder::new(&unified).literal_separator(true).build()?;
        // Compiling is where globset can panic: do it here, under the catch.
        let m = g.compile_matcher();
        Ok::<_, globset::Error>((g, m))
    })
    .map_err(|_| invalid("it is too complex".to_string()))?
    .map_err(|e| invalid(e.kind().to_string()))
}

/// The search base: a directory to walk, or one file.
pub(super) async fn base_of(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value) -> Result<(String, EntryType)> {
    let base = checked_path(fs, o, str_arg(args, "path").unwrap_or(".")).await?;
    match kind_of(fs, &base).await? {
        None => Err(Error::not_found(&base)),
        Some(kind) => Ok((base, kind)),
    }
}

pub(super) async fn glob(fs: &dyn FsProvider, o: &FsToolOptions, args: &Value, ctx: &Ctx) -> Result<String> {
    let pattern = str_arg(args, "pattern").unwrap_or_default();
    let matcher = compile_glob(pattern)?;
    let (base, kind) = base_of(fs, o, args).await?;
    if kind != EntryType::Directory {
        return Err(Error::new(Code::NotAFile, format!("{base} is not a directory; glob searches a directory.")));
    }
    // Every file is scanned (and counted); those the pattern matches are kept.
    let found = Arc::new(Mutex::new(Vec::new()));
    let f2 = found.clone();
    let visit: Visit = Arc::new(move |path, rel, _, _| {
        if matcher.is_match(rel) {
            f2.lock().unwrap().push(path.to_string());
        }
        true
    });
    let stats =
        walk(fs, o, &base, ctx, Arc::new(|_| true), visit, Want { sizes: false, order: Order::Any, light: true })
            .await?;
    if let Some(e) = stats.timeout(o, "glob") {
        return Err(e);
    }
    let mut hits: Vec<String> = std::mem::take(&mut *found.lock().unwrap());
    hits.sort();
    let confined = stats.confined.load(std::sync::atomic::Ordering::Relaxed);
    if let Some(local) = fs.as_local().filter(|_| !confined) {
        // What is shown must still be there below the root, reached without a link: a directory
        // swapped for a link while the walker listed it would otherwise show outside names.
        let real_base = local.walk_root(&base)?.1;
        let strip = if base == "." { 0 } else { base.len() + 1 };
        let checked = hits.len().min(o.max_results);
        let reals: Vec<String> = hits[..checked].iter().map(|h| join(&real_base, &h[strip..])).collect();
        let local = local.clone();
        let present = tokio::task::spawn_blocking(move || {
            local.walked_files_present(&reals.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .await
        .map_err(|e| Error::new(Code::Io, format!("internal error: {e}")))?;
        let mut present = present.into_iter();
        hits.retain(|_| present.next().unwrap_or(true));
    }
    let total = hits.len();
    let mut out = String::new();
    let shown = push_lines(&mut out, hits.iter().map(String::as_str), o.max_results, o.max_output_chars);
    if total == 0 {
        out.push_str("No files matched.\n");
    } else if shown < total {
        out.push_str(&format!(
            "(Showing the first {} of {} matching files. Narrow the pattern or path.)\n",
            fmt_count(shown),
            fmt_count(total)
        ));
    }
    for n in stats.notes(o) {
        out.push_str(&n);
        out.push('\n');
    }
    out.pop();
    Ok(out)
}
