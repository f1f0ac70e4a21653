use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::iso8601;
use crate::checkpoints::{CheckpointOptions, Checkpoints, MemoryCheckpointStore};
use crate::error::{Code, Result};
use crate::fs::memory::MemoryFs;
use crate::fs::FsProvider;
use crate::tools::{call, specs, Ctx, FsToolOptions};

fn mem(files: &[(&str, &str)]) -> MemoryFs {
    MemoryFs::new(files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))).unwrap()
}

fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(p, c)| (p.to_string(), c.to_string())).collect()
}

fn opts() -> FsToolOptions {
    FsToolOptions {
        include: ["move_file", "delete_file", "make_dir", "file_info", "read_files"].map(String::from).to_vec(),
        ..Default::default()
    }
}

async fn run(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: Value) -> Result<String> {
    call(fs, o, name, &args, &Ctx::default()).await.map(|v| v.as_str().unwrap().to_string())
}

#[test]
fn times_are_iso_8601_in_utc() {
    assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(iso8601(1_796_150_405_123), "2026-12-01T18:40:05.123Z");
    assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(iso8601(-1), "1969-12-31T23:59:59.999Z");
}

#[tokio::test]
async fn move_file_makes_missing_parents_and_refuses_an_existing_target_unless_overwrite() {
    let fs = mem(&[("a.txt", "a"), ("b.txt", "b")]);
    let o = opts();
    assert_eq!(
        run(&fs, &o, "move_file", json!({ "from": "a.txt", "to": "x/y/a.txt" })).await.unwrap(),
        "Moved a.txt to x/y/a.txt."
    );
    assert_eq!(fs.snapshot(), tree(&[("b.txt", "b"), ("x/y/a.txt", "a")]));
    let e = run(&fs, &o, "move_file", json!({ "from": "b.txt", "to": "x/y/a.txt" })).await.unwrap_err();
    assert_eq!(e.code, Code::Exists);
    assert!(e.message.contains("overwrite: true"), "{}", e.message);
    run(&fs, &o, "move_file", json!({ "from": "b.txt", "to": "x/y/a.txt", "overwrite": true })).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[("x/y/a.txt", "b")]));
}

#[tokio::test]
async fn a_directory_moves_whole_but_never_into_itself_nor_with_a_denied_name_inside() {
    let fs = mem(&[("src/a.rs", "a"), ("src/deep/b.rs", "b"), ("keep.txt", "k")]);
    let o = opts();
    run(&fs, &o, "move_file", json!({ "from": "src", "to": "lib" })).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[("keep.txt", "k"), ("lib/a.rs", "a"), ("lib/deep/b.rs", "b")]));
    let e = run(&fs, &o, "move_file", json!({ "from": "lib", "to": "lib/inner" })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    let fs = mem(&[("repo/.git/config", "x"), ("repo/a", "a")]);
    let e = run(&fs, &o, "move_file", json!({ "from": "repo", "to": "moved" })).await.unwrap_err();
    assert_eq!(e.code, Code::Denied);
    assert_eq!(fs.snapshot(), tree(&[("repo/.git/config", "x"), ("repo/a", "a")]));
}

#[tokio::test]
async fn delete_file_needs_recursive_for_a_directory_never_takes_the_root_and_is_all_or_nothing() {
    let fs = mem(&[("d/a", "a"), ("d/sub/b", "b"), ("d/dist/out.js", "o"), ("c", "c")]);
    let o = opts().with_protect(vec!["**/dist/**".into()]).unwrap();
    assert_eq!(run(&fs, &o, "delete_file", json!({ "path": "c" })).await.unwrap(), "Deleted c.");
    let e = run(&fs, &o, "delete_file", json!({ "path": "d" })).await.unwrap_err();
    assert_eq!(e.code, Code::IsADirectory);
    let e = run(&fs, &o, "delete_file", json!({ "path": "d", "recursive": true })).await.unwrap_err();
    assert_eq!(e.code, Code::Protected);
    assert_eq!(fs.snapshot(), tree(&[("d/a", "a"), ("d/sub/b", "b"), ("d/dist/out.js", "o")]));
    let e = run(&fs, &o, "delete_file", json!({ "path": ".", "recursive": true })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    run(&fs, &opts(), "delete_file", json!({ "path": "d", "recursive": true })).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[]));
    assert!(fs.stat("d").await.unwrap().is_none());
    let e = run(&fs, &o, "delete_file", json!({ "path": "nothing" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotFound);
}

#[tokio::test]
async fn make_dir_creates_says_when_it_exists_and_refuses_a_file() {
    let fs = mem(&[("f", "x")]);
    let o = opts();
    assert_eq!(run(&fs, &o, "make_dir", json!({ "path": "a/b" })).await.unwrap(), "Created a/b/.");
    assert_eq!(run(&fs, &o, "make_dir", json!({ "path": "a/b" })).await.unwrap(), "a/b/ already exists.");
    assert_eq!(run(&fs, &o, "make_dir", json!({ "path": "f" })).await.unwrap_err().code, Code::Exists);
}

#[tokio::test]
async fn file_info_on_disk_gives_type_size_lines_time_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let fs = crate::fs::local::LocalFs::new(dir.path().to_str().unwrap()).unwrap();
    let out = run(&fs, &opts(), "file_info", json!({ "path": "a.txt" })).await.unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..4], ["path: a.txt", "type: file", "size: 8 bytes", "lines: 2"]);
    assert!(lines[4].starts_with("modified: 20") && lines[4].ends_with('Z'), "{out}");
    #[cfg(unix)]
    assert!(lines[5].starts_with("mode: 0"), "{out}");
    let out = run(&fs, &opts(), "file_info", json!({ "path": "sub" })).await.unwrap();
    assert!(out.starts_with("path: sub\ntype: directory\nmodified: "), "{out}");
    // A provider that cannot give a time leaves that line out.
    let out = run(&mem(&[("m.txt", "x")]), &opts(), "file_info", json!({ "path": "m.txt" })).await.unwrap();
    assert_eq!(out, "path: m.txt\ntype: file\nsize: 1 bytes\nlines: 1\nmode: 0644");
}

#[tokio::test]
async fn read_files_gives_each_file_and_a_failing_one_does_not_fail_the_others() {
    let fs = mem(&[("a.txt", "alpha\n"), ("b.txt", "beta\n")]);
    let out = run(&fs, &opts(), "read_files", json!({ "paths": ["a.txt", "missing.txt", "b.txt"] })).await.unwrap();
    assert_eq!(
        out,
        "==> a.txt <==\n 1\talpha\n\n==> missing.txt <==\n(File not found: missing.txt)\n\n==> b.txt <==\n 1\tbeta"
    );
    let e = run(&fs, &opts(), "read_files", json!({ "paths": [] })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
}

#[tokio::test]
async fn a_rewind_puts_back_a_moved_and_a_deleted_tree() {
    let fs = mem(&[("src/a", "a"), ("src/b/c", "c"), ("old/x", "x")]);
    let ck = Arc::new(Checkpoints::in_memory());
    let o = FsToolOptions { checkpoints: Some(ck.clone()), ..opts() };
    let ctx = Ctx { turn: 4, ..Ctx::default() };
    call(&fs, &o, "move_file", &json!({ "from": "src", "to": "lib" }), &ctx).await.unwrap();
    call(&fs, &o, "delete_file", &json!({ "path": "old", "recursive": true }), &ctx).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[("lib/a", "a"), ("lib/b/c", "c")]));
    let report = ck.rewind(&fs, "default", 4, false, false).await.unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(fs.snapshot(), tree(&[("src/a", "a"), ("src/b/c", "c"), ("old/x", "x")]));
}

#[tokio::test]
async fn with_checkpoints_a_file_too_large_to_back_up_is_neither_moved_nor_deleted() {
    let big = "x".repeat(3000);
    let fs = mem(&[("d/big", &big), ("d/small", "s")]);
    let options = CheckpointOptions::from_options(&json!({ "maxFileBytes": 1000 })).unwrap();
    let ck = Arc::new(Checkpoints::new(Arc::new(MemoryCheckpointStore::new()), options).unwrap());
    let o = FsToolOptions { checkpoints: Some(ck), ..opts() };
    for (name, args) in
        [("move_file", json!({ "from": "d", "to": "e" })), ("delete_file", json!({ "path": "d", "recursive": true }))]
    {
        let e = run(&fs, &o, name, args).await.unwrap_err();
        assert_eq!(e.code, Code::TooLarge, "{name}: {}", e.message);
        assert_eq!(fs.snapshot(), tree(&[("d/big", &big), ("d/small", "s")]));
    }
}

#[test]
fn read_only_creates_only_the_reading_ones() {
    let o = FsToolOptions { read_only: true, ..opts() };
    let names: Vec<&str> = specs(&o).iter().map(|s| s.name).collect();
    assert_eq!(names, ["read_file", "list_dir", "glob", "grep", "file_info", "read_files"]);
    let names: Vec<&str> = specs(&opts()).iter().map(|s| s.name).collect();
    assert_eq!(names[6..], ["move_file", "delete_file", "make_dir", "file_info", "read_files"]);
}

/// A workspace on disk with `src/a.txt`, `keep.txt`, a link `root_link` to `.` and a link
/// `src_link` to `src`.
#[cfg(unix)]
fn linked() -> (tempfile::TempDir, crate::fs::local::LocalFs) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.txt"), "a").unwrap();
    std::fs::write(dir.path().join("keep.txt"), "k").unwrap();
    std::os::unix::fs::symlink(".", dir.path().join("root_link")).unwrap();
    std::os::unix::fs::symlink("src", dir.path().join("src_link")).unwrap();
    let fs = crate::fs::local::LocalFs::new(dir.path().to_str().unwrap()).unwrap();
    (dir, fs)
}

#[cfg(unix)]
#[tokio::test]
async fn a_link_to_the_root_never_deletes_or_moves_the_workspace() {
    // The attack: `ln -s . zz`, then a recursive delete of zz.
    let (dir, fs) = linked();
    let e = run(&fs, &opts(), "delete_file", json!({ "path": "root_link", "recursive": true })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments, "{}", e.message);
    let e = run(&fs, &opts(), "move_file", json!({ "from": "root_link", "to": "elsewhere" })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments, "{}", e.message);
    assert!(dir.path().join("keep.txt").exists() && dir.path().join("src/a.txt").exists());
}

#[cfg(unix)]
#[tokio::test]
async fn deleting_a_link_to_a_directory_removes_the_link_not_what_it_leads_to() {
    let (dir, fs) = linked();
    run(&fs, &opts(), "delete_file", json!({ "path": "src_link", "recursive": true })).await.unwrap();
    assert!(!dir.path().join("src_link").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(), "a");
    let e = run(&fs, &opts(), "move_file", json!({ "from": "src", "to": "lib" })).await;
    assert!(e.is_ok(), "{e:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("lib/a.txt")).unwrap(), "a");
}

#[cfg(unix)]
#[tokio::test]
async fn a_tree_holding_a_link_is_not_moved_and_a_link_itself_is_not_moved() {
    let (dir, fs) = linked();
    std::os::unix::fs::symlink("../keep.txt", dir.path().join("src/to_keep")).unwrap();
    let e = run(&fs, &opts(), "move_file", json!({ "from": "src", "to": "lib" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotAFile);
    let e = run(&fs, &opts(), "move_file", json!({ "from": "src_link", "to": "lib" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotAFile);
    assert!(dir.path().join("src/a.txt").exists() && !dir.path().join("lib").exists());
}

#[tokio::test]
async fn move_file_over_an_unread_file_is_refused_by_the_stale_file_guard() {
    let fs = mem(&[("a.txt", "a"), ("b.txt", "b")]);
    let o = FsToolOptions { reads: Some(Default::default()), ..opts() };
    let e = run(&fs, &o, "move_file", json!({ "from": "a.txt", "to": "b.txt", "overwrite": true })).await.unwrap_err();
    assert_eq!(e.code, Code::NotRead);
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "a"), ("b.txt", "b")]));
}

#[cfg(unix)]
#[tokio::test]
async fn a_move_onto_a_link_to_its_own_source_or_into_itself_through_a_link_is_refused() {
    // The attacks: `move_file a.txt alink` with alink -> a.txt (overwrite) deleted a.txt and left
    // a dangling link; `move_file d dlink/inner` with dlink -> d half-moved d into itself.
    let (dir, fs) = linked();
    std::os::unix::fs::symlink("src/a.txt", dir.path().join("alink")).unwrap();
    let e = run(&fs, &opts(), "move_file", json!({ "from": "src/a.txt", "to": "alink", "overwrite": true }))
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments, "{}", e.message);
    assert_eq!(std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(), "a");
    assert!(dir.path().join("alink").symlink_metadata().unwrap().file_type().is_symlink());
    let e = run(&fs, &opts(), "move_file", json!({ "from": "src", "to": "src_link/inner" })).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments, "{}", e.message);
    assert_eq!(std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(), "a");
    assert!(!dir.path().join("src/inner").exists());
    // A plain move still works (the positive control).
    run(&fs, &opts(), "move_file", json!({ "from": "src/a.txt", "to": "b.txt" })).await.unwrap();
    assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "a");
}

#[tokio::test]
async fn require_read_covers_delete_and_move_so_an_unread_file_cannot_be_replaced_that_way() {
    // The attack: delete (or move away) an unread file, then write it: no read was ever needed.
    let fs = mem(&[("a.txt", "secret plan"), ("b.txt", "b")]);
    let o = FsToolOptions { reads: Some(Default::default()), ..opts() };
    let e = run(&fs, &o, "delete_file", json!({ "path": "a.txt" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotRead, "{}", e.message);
    let e = run(&fs, &o, "move_file", json!({ "from": "a.txt", "to": "c.txt" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotRead, "{}", e.message);
    // A read past the end showed nothing: it is not a read.
    let out = run(&fs, &o, "read_file", json!({ "path": "a.txt", "offset": 50 })).await.unwrap();
    assert!(out.contains("past the end"), "{out}");
    let e = run(&fs, &o, "delete_file", json!({ "path": "a.txt" })).await.unwrap_err();
    assert_eq!(e.code, Code::NotRead, "{}", e.message);
    assert_eq!(fs.snapshot(), tree(&[("a.txt", "secret plan"), ("b.txt", "b")]));
    // Once read, both work.
    run(&fs, &o, "read_file", json!({ "path": "a.txt" })).await.unwrap();
    run(&fs, &o, "move_file", json!({ "from": "a.txt", "to": "c.txt" })).await.unwrap();
    run(&fs, &o, "read_file", json!({ "path": "b.txt" })).await.unwrap();
    run(&fs, &o, "delete_file", json!({ "path": "b.txt" })).await.unwrap();
    assert_eq!(fs.snapshot(), tree(&[("c.txt", "secret plan")]));
}
