//! A file's new content from its update chunks, as codex computes it: each chunk located after
//! the previous one (and after its `@@` anchor line), then every replacement made at once.

use super::parse::Chunk;
use super::seek::Seeker;
use crate::error::{Code, Error, Result};

fn mismatch(message: String) -> Error {
    Error::new(Code::PatchMismatch, message)
}

/// The content of `path` after `chunks`; a chunk whose lines or anchor are not found is a
/// `PatchMismatch` naming them. The result ends with a newline. `stop` is asked while matching
/// (an abort or a spent timeout ends the call).
pub fn updated(path: &str, original: &str, chunks: &[Chunk], stop: &dyn Fn() -> Result<()>) -> Result<String> {
    let mut lines: Vec<String> = original.split('\n').map(str::to_string).collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let mut seeker = Seeker::new(&lines, stop);
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut at = 0;
    for chunk in chunks {
        let mut anchored = false;
        if let Some(ctx) = &chunk.context {
            match seeker.seek(std::slice::from_ref(ctx), at, false)? {
                Some(i) => {
                    at = i + 1;
                    anchored = true;
                }
                None => return Err(mismatch(format!("Failed to find context '{ctx}' in {path}"))),
            }
        }
        if chunk.old_lines.is_empty() {
            // Pure addition: right after the anchor line; without one, at the end of the file.
            let i = if anchored { at } else { lines.len() };
            replacements.push((i, 0, chunk.new_lines.clone()));
            continue;
        }
        let mut old: &[String] = &chunk.old_lines;
        let mut new: &[String] = &chunk.new_lines;
        let mut found = seeker.seek(old, at, chunk.end_of_file)?;
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            // A trailing empty line in the chunk stands for the file's final newline.
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seeker.seek(old, at, chunk.end_of_file)?;
        }
        match found {
            Some(i) => {
                replacements.push((i, old.len(), new.to_vec()));
                at = i + old.len();
            }
            None => {
                return Err(mismatch(format!(
                    "Failed to find expected lines in {path}:\n{}",
                    chunk.old_lines.join("\n")
                )))
            }
        }
    }
    drop(seeker);
    replacements.sort_by_key(|r| r.0);
    // Each chunk is found after the one before it, so they cannot overlap; checked all the same,
    // since splicing overlapping ranges would go past the end.
    if replacements.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
        return Err(mismatch(format!("The chunks of the patch for {path} overlap; give each part of the file once.")));
    }
    for (start, len, new) in replacements.into_iter().rev() {
        lines.splice(start..start + len, new);
    }
    if !lines.last().is_some_and(String::is_empty) {
        lines.push(String::new());
    }
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upd(path: &str, original: &str, chunks: &[Chunk]) -> Result<String> {
        updated(path, original, chunks, &|| Ok(()))
    }

    fn chunk(context: Option<&str>, old: &[&str], new: &[&str]) -> Chunk {
        Chunk {
            context: context.map(str::to_string),
            old_lines: old.iter().map(|s| s.to_string()).collect(),
            new_lines: new.iter().map(|s| s.to_string()).collect(),
            end_of_file: false,
        }
    }

    #[test]
    fn chunks_replace_in_order_and_the_result_ends_with_a_newline() {
        let out = upd("a", "a\nb\nc\nb\n", &[chunk(None, &["b"], &["B"]), chunk(None, &["b"], &["B2"])]).unwrap();
        assert_eq!(out, "a\nB\nc\nB2\n");
        assert_eq!(upd("a", "x", &[chunk(None, &["x"], &["y"])]).unwrap(), "y\n");
    }

    #[test]
    fn an_anchor_moves_the_search_past_its_line_and_a_pure_addition_goes_right_after_it() {
        let src = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let out = upd("f", src, &[chunk(Some("fn b() {"), &["    x"], &["    y"])]).unwrap();
        assert_eq!(out, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
        let out = upd("f", src, &[chunk(Some("fn a() {"), &[], &["    // first"])]).unwrap();
        assert!(out.starts_with("fn a() {\n    // first\n    x\n"), "{out}");
        let out = upd("f", "a\nb\n", &[chunk(None, &[], &["c"])]).unwrap();
        assert_eq!(out, "a\nb\nc\n");
    }

    #[test]
    fn missing_lines_or_anchor_are_a_mismatch_naming_them() {
        let e = upd("src/x.rs", "a\n", &[chunk(None, &["zzz", "yyy"], &[])]).unwrap_err();
        assert_eq!(e.code, Code::PatchMismatch);
        assert_eq!(e.message, "Failed to find expected lines in src/x.rs:\nzzz\nyyy");
        let e = upd("src/x.rs", "a\n", &[chunk(Some("impl Q"), &["a"], &["b"])]).unwrap_err();
        assert_eq!(e.message, "Failed to find context 'impl Q' in src/x.rs");
    }

    #[test]
    fn a_trailing_empty_line_in_the_chunk_matches_the_end_of_the_file() {
        let out = upd("a", "x\ny\n", &[chunk(None, &["y", ""], &["z", ""])]).unwrap();
        assert_eq!(out, "x\nz\n");
    }
}
