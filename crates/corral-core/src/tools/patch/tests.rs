//! apply_patch scenarios: each an input tree, a patch and the expected tree (byte for byte), or
//! the error and an unchanged tree. They cover the cases codex's own fixture scenarios cover.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use crate::checkpoints::Checkpoints;
use crate::error::{Code, Result};
use crate::fs::memory::MemoryFs;
use crate::fs::FsProvider;
use crate::tools::{call, Ctx, FsToolOptions};

fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
}

fn mem(files: &[(&str, &str)]) -> MemoryFs {
    MemoryFs::new(files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))).unwrap()
}

fn opts() -> FsToolOptions {
    FsToolOptions { include: vec!["apply_patch".into()], ..Default::default() }
}

async fn patch(fs: &dyn FsProvider, o: &FsToolOptions, input: &str) -> Result<String> {
    call(fs, o, "apply_patch", &json!({ "input": input }), &Ctx::default())
        .await
        .map(|v| v.as_str().unwrap().to_string())
}

/// The patch turns `before` into `after`, and says so with `result`.
async fn scenario(before: &[(&str, &str)], input: &str, after: &[(&str, &str)], result: &str) {
    let fs = mem(before);
    let out = patch(&fs, &opts(), input).await.unwrap_or_else(|e| panic!("{input}\n-> {e:?}"));
    assert_eq!(out, result, "{input}");
    assert_eq!(fs.snapshot(), tree(after), "{input}");
}

/// The patch fails with `code` (and a message containing `says`) and the tree is unchanged.
async fn refused(before: &[(&str, &str)], input: &str, code: Code, says: &str) {
    let fs = mem(before);
    let e = patch(&fs, &opts(), input).await.unwrap_err();
    assert_eq!(e.code, code, "{input}\n-> {}", e.message);
    assert!(e.message.contains(says), "{input}\n-> {}", e.message);
    assert_eq!(fs.snapshot(), tree(before), "{input}");
}

#[tokio::test]
async fn add_delete_and_update_in_one_patch() {
    scenario(
        &[("old.txt", "gone\n"), ("keep.txt", "a\nb\nc\n")],
        "*** Begin Patch\n*** Add File: new/hello.txt\n+hello\n+world\n*** Delete File: old.txt\n*** Update File: keep.txt\n a\n-b\n+B\n c\n*** End Patch",
        &[("keep.txt", "a\nB\nc\n"), ("new/hello.txt", "hello\nworld\n")],
        "Success. Updated the following files:\nA new/hello.txt\nM keep.txt\nD old.txt",
    )
    .await;
}

#[tokio::test]
async fn several_hunks_of_one_file_apply_in_order() {
    scenario(
        &[("m.py", "def a():\n    return 1\n\ndef b():\n    return 1\n")],
        "*** Begin Patch\n*** Update File: m.py\n@@ def a():\n-    return 1\n+    return 2\n@@ def b():\n-    return 1\n+    return 3\n*** End Patch",
        &[("m.py", "def a():\n    return 2\n\ndef b():\n    return 3\n")],
        "Success. Updated the following files:\nM m.py",
    )
    .await;
}

#[tokio::test]
async fn an_anchor_picks_the_second_of_two_identical_blocks() {
    scenario(
        &[("c.rs", "impl A {\n    fn f() {}\n}\nimpl B {\n    fn f() {}\n}\n")],
        "*** Begin Patch\n*** Update File: c.rs\n@@ impl B {\n-    fn f() {}\n+    fn g() {}\n*** End Patch",
        &[("c.rs", "impl A {\n    fn f() {}\n}\nimpl B {\n    fn g() {}\n}\n")],
        "Success. Updated the following files:\nM c.rs",
    )
    .await;
}

#[tokio::test]
async fn a_move_writes_the_new_path_and_removes_the_old() {
    scenario(
        &[("src/a.ts", "export const a = 1;\n")],
        "*** Begin Patch\n*** Update File: src/a.ts\n*** Move to: lib/b.ts\n@@\n-export const a = 1;\n+export const b = 1;\n*** End Patch",
        &[("lib/b.ts", "export const b = 1;\n")],
        "Success. Updated the following files:\nM lib/b.ts",
    )
    .await;
}

#[tokio::test]
async fn an_end_of_file_chunk_matches_the_last_lines() {
    scenario(
        &[("t.txt", "x\ny\nx\ny\n")],
        "*** Begin Patch\n*** Update File: t.txt\n@@\n x\n-y\n+z\n*** End of File\n*** End Patch",
        &[("t.txt", "x\ny\nx\nz\n")],
        "Success. Updated the following files:\nM t.txt",
    )
    .await;
}

#[tokio::test]
async fn whitespace_and_unicode_punctuation_are_forgiven_in_that_order() {
    scenario(
        &[("w.txt", "  indented   \nsay \u{201C}hi\u{201D} \u{2014} ok\n")],
        "*** Begin Patch\n*** Update File: w.txt\n@@\n-indented\n+flat\n-say \"hi\" - ok\n+said\n*** End Patch",
        &[("w.txt", "flat\nsaid\n")],
        "Success. Updated the following files:\nM w.txt",
    )
    .await;
}

#[tokio::test]
async fn pure_additions_go_after_their_anchor_or_at_the_end() {
    scenario(
        &[("p.txt", "head\nbody\ntail\n")],
        "*** Begin Patch\n*** Update File: p.txt\n@@ head\n+after head\n@@\n+at the end\n*** End Patch",
        &[("p.txt", "head\nafter head\nbody\ntail\nat the end\n")],
        "Success. Updated the following files:\nM p.txt",
    )
    .await;
}

#[tokio::test]
async fn a_heredoc_wrapped_patch_applies() {
    scenario(
        &[("h.txt", "1\n")],
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: h.txt\n-1\n+2\n*** End Patch\nEOF",
        &[("h.txt", "2\n")],
        "Success. Updated the following files:\nM h.txt",
    )
    .await;
}

#[tokio::test]
async fn add_overwrites_an_existing_file_and_a_file_without_final_newline_gets_one() {
    scenario(
        &[("a.txt", "old"), ("b.txt", "no newline")],
        "*** Begin Patch\n*** Add File: a.txt\n+new\n*** Update File: b.txt\n-no newline\n+with newline\n*** End Patch",
        &[("a.txt", "new\n"), ("b.txt", "with newline\n")],
        "Success. Updated the following files:\nA a.txt\nM b.txt",
    )
    .await;
}

#[tokio::test]
async fn a_later_hunk_sees_what_an_earlier_one_did() {
    scenario(
        &[],
        "*** Begin Patch\n*** Add File: n.txt\n+one\n*** Update File: n.txt\n-one\n+two\n*** End Patch",
        &[("n.txt", "two\n")],
        "Success. Updated the following files:\nA n.txt\nM n.txt",
    )
    .await;
}

#[tokio::test]
async fn a_patch_whose_second_file_does_not_match_changes_no_file() {
    refused(
        &[("a.txt", "a\n"), ("b.txt", "b\n")],
        "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Delete File: gone.txt\n*** End Patch",
        Code::NotFound,
        "gone.txt",
    )
    .await;
    refused(
        &[("a.txt", "a\n"), ("b.txt", "b\n")],
        "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Update File: a.txt\n-a\n+A\n*** Update File: b.txt\n-nope\n+B\n*** End Patch",
        Code::PatchMismatch,
        "Failed to find expected lines in b.txt:\nnope",
    )
    .await;
}

#[tokio::test]
async fn each_error_is_reported_with_its_code() {
    let files = [("a.txt", "a\n"), ("dir/x.txt", "x\n")];
    refused(
        &files,
        "*** Begin Patch\n*** Update File: a.txt\n@@ nowhere\n-a\n*** End Patch",
        Code::PatchMismatch,
        "Failed to find context 'nowhere' in a.txt",
    )
    .await;
    refused(&files, "*** Begin Patch\n*** Update File: missing.txt\n-a\n*** End Patch", Code::NotFound, "missing.txt")
        .await;
    refused(&files, "*** Begin Patch\n*** Update File: dir\n-a\n*** End Patch", Code::NotAFile, "dir").await;
    refused(&files, "*** Begin Patch\n*** Add File: dir\n+a\n*** End Patch", Code::IsADirectory, "dir").await;
    refused(&files, "*** Begin Patch\n*** Bogus: a\n*** End Patch", Code::InvalidPatch, "invalid hunk at line 2").await;
    refused(&files, "*** Begin Patch\n*** End Patch", Code::InvalidPatch, "no changes").await;
    refused(&files, "no patch here", Code::InvalidPatch, "*** Begin Patch").await;
    refused(&files, "*** Begin Patch\n*** Add File: ../out.txt\n+x\n*** End Patch", Code::OutsideWorkspace, "").await;
    refused(&files, "*** Begin Patch\n*** Add File: .git/config\n+x\n*** End Patch", Code::Denied, "").await;
}

#[tokio::test]
async fn protect_and_read_only_hold_for_patches() {
    let fs = mem(&[("a.txt", "a\n"), ("secrets/k", "k\n")]);
    let o = opts().with_protect(vec!["secrets/**".into()]).unwrap();
    let e =
        patch(&fs, &o, "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Delete File: secrets/k\n*** End Patch")
            .await
            .unwrap_err();
    assert_eq!(e.code, Code::Protected);
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "a\n"), ("secrets/k", "k\n")]));
    let ro = FsToolOptions { read_only: true, ..opts() };
    assert!(!crate::tools::specs(&ro).iter().any(|s| s.name == "apply_patch"));
    let e = patch(&fs, &ro, "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch").await.unwrap_err();
    assert_eq!(e.code, Code::ReadOnly);
}

#[tokio::test]
async fn a_rewind_undoes_the_whole_patch_deletions_and_moves_included() {
    let fs = mem(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    let ck = Arc::new(Checkpoints::in_memory());
    let o = FsToolOptions { checkpoints: Some(ck.clone()), ..opts() };
    let ctx = Ctx { turn: 1, ..Ctx::default() };
    let input = "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: d.txt\n-c\n+d\n*** Add File: e.txt\n+e\n*** End Patch";
    call(&fs, &o, "apply_patch", &json!({ "input": input }), &ctx).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "A\n"), ("d.txt", "d\n"), ("e.txt", "e\n")]));
    let report = ck.rewind(&fs, "default", 1, false, false).await.unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]));
}

#[tokio::test]
async fn with_checkpoints_deleting_a_file_too_large_to_back_up_is_refused() {
    let big = "x".repeat(2_000);
    let fs = mem(&[("big.txt", &big), ("a.txt", "a\n")]);
    let options = crate::checkpoints::CheckpointOptions::from_options(&json!({ "maxFileBytes": 1000 })).unwrap();
    let ck = Arc::new(Checkpoints::new(Arc::new(crate::checkpoints::MemoryCheckpointStore::new()), options).unwrap());
    let o = FsToolOptions { checkpoints: Some(ck), ..opts() };
    let e = patch(&fs, &o, "*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Delete File: big.txt\n*** End Patch")
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::TooLarge);
    assert_eq!(fs.snapshot(), tree(&[("big.txt", &big), ("a.txt", "a\n")]));
}

/// A provider (with modes) whose writes of one path fail, as a full disk would, or whose removal
/// of one path fails.
struct Failing {
    inner: MemoryFs,
    writes: &'static str,
    removals: &'static str,
}

#[async_trait::async_trait]
impl FsProvider for Failing {
    async fn read_file(&self, p: &str) -> Result<String> {
        self.inner.read_file(p).await
    }
    async fn write_file(&self, p: &str, c: &str) -> Result<()> {
        if p == self.writes {
            return Err(crate::error::Error::new(Code::Io, "disk full"));
        }
        self.inner.write_file(p, c).await
    }
    async fn stat(&self, p: &str) -> Result<Option<crate::fs::Stat>> {
        self.inner.stat(p).await
    }
    async fn readdir(&self, p: &str) -> Result<Vec<crate::fs::DirEntry>> {
        self.inner.readdir(p).await
    }
    async fn mkdir(&self, p: &str) -> Result<()> {
        self.inner.mkdir(p).await
    }
    async fn rm(&self, p: &str, r: bool) -> Result<()> {
        if p == self.removals {
            return Err(crate::error::Error::new(Code::Io, "device busy"));
        }
        self.inner.rm(p, r).await
    }
    fn caps(&self) -> crate::fs::Caps {
        crate::fs::Caps { mode: true, ..Default::default() }
    }
    async fn get_mode(&self, p: &str) -> Result<u32> {
        self.inner.get_mode(p).await
    }
    async fn chmod(&self, p: &str, m: u32) -> Result<()> {
        self.inner.chmod(p, m).await
    }
}

#[tokio::test]
async fn a_write_that_fails_half_way_puts_back_the_files_already_written() {
    let fs = Failing { inner: mem(&[("a.txt", "a\n"), ("b.txt", "b\n")]), writes: "b.txt", removals: "" };
    let e = patch(&fs, &opts(), "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Add File: new.txt\n+n\n*** Update File: b.txt\n-b\n+B\n*** End Patch").await.unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (Code::Io, "disk full"));
    assert_eq!(fs.inner.snapshot(), tree(&[("a.txt", "a\n"), ("b.txt", "b\n")]));
}

#[tokio::test]
async fn an_end_of_file_chunk_cannot_land_inside_the_chunk_before_it() {
    // The attack: a second chunk whose lines were already replaced by the first.
    refused(
        &[("f.txt", "a\nb\nc\n")],
        "*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-b\n-c\n+X\n@@\n-c\n*** End of File\n*** End Patch",
        Code::PatchMismatch,
        "f.txt",
    )
    .await;
}

#[tokio::test]
async fn a_failed_patch_leaves_no_directory_it_made_and_gives_back_modes_exactly() {
    let fs = Failing { inner: mem(&[("a.sh", "run\n"), ("b.txt", "b\n")]), writes: "", removals: "b.txt" };
    fs.inner.chmod("a.sh", 0o755).await.unwrap();
    let e = patch(
        &fs,
        &opts(),
        "*** Begin Patch\n*** Add File: new/deep/c.txt\n+c\n*** Delete File: a.sh\n*** Delete File: b.txt\n*** End Patch",
    )
    .await
    .unwrap_err();
    assert_eq!((e.code, e.message.as_str()), (Code::Io, "device busy"));
    assert_eq!(fs.inner.snapshot(), tree(&[("a.sh", "run\n"), ("b.txt", "b\n")]));
    assert_eq!(fs.inner.get_mode("a.sh").await.unwrap(), 0o755, "the deleted file's mode comes back");
    assert!(fs.inner.stat("new").await.unwrap().is_none(), "no directory the patch made is left");
}

#[tokio::test]
async fn a_patch_past_its_bounds_is_invalid_before_any_matching() {
    let big_hunk = format!("*** Begin Patch\n*** Update File: f.txt\n{}*** End Patch", " x\n".repeat(10_001));
    refused(&[("f.txt", "x\n")], &big_hunk, Code::InvalidPatch, "10000").await;
    let many: String = (0..2_001).map(|i| format!("*** Add File: f{i}.txt\n+x\n")).collect();
    refused(&[("f.txt", "x\n")], &format!("*** Begin Patch\n{many}*** End Patch"), Code::InvalidPatch, "2000").await;
}

#[tokio::test]
async fn require_read_covers_a_patch_that_deletes_or_moves_an_unread_file() {
    let fs = mem(&[("a.txt", "a\n")]);
    let o = FsToolOptions { reads: Some(Default::default()), ..opts() };
    let e = patch(&fs, &o, "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch").await.unwrap_err();
    assert_eq!(e.code, Code::NotRead, "{}", e.message);
    let e = patch(&fs, &o, "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-a\n+a\n*** End Patch")
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::NotRead, "{}", e.message);
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "a\n")]));
}
