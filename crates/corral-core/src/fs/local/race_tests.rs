//! The symlink-swap race, run for real: a thread exchanges a directory inside the workspace with
//! a link that leads outside (or into `.git`) as fast as it can, while the file tools run against
//! the same paths. Nothing may be read from, written to or left outside, and nothing may land in
//! `.git`.

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fs::local::LocalFs;
use crate::tools::{call, Ctx, FsToolOptions};

const RACE: Duration = Duration::from_secs(4);

fn exchange(a: &Path, b: &Path) {
    let (a, b) = (CString::new(a.to_str().unwrap()).unwrap(), CString::new(b.to_str().unwrap()).unwrap());
    // SAFETY: two valid NUL-terminated paths.
    unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_with_a_link_never_lets_the_file_tools_out_of_the_root_or_into_git() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), "OUTSIDE secret\n").unwrap();
    std::fs::write(outside.join("outside-only.txt"), "OUTSIDE\n").unwrap();
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(root.join("e")).unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join("d/f.txt"), "inside A\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("l")).unwrap();
    std::os::unix::fs::symlink(".git/hooks", root.join("g")).unwrap();
    let outside_before = names(&outside);

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                exchange(&root.join("d"), &root.join("l"));
                exchange(&root.join("e"), &root.join("g"));
                n += 1;
            }
            n
        })
    };

    let fs = LocalFs::new(root.to_str().unwrap()).unwrap();
    let o = FsToolOptions::default();
    let ctx = Ctx::default();
    let started = Instant::now();
    let (mut calls, mut leaks) = (0u64, Vec::<String>::new());
    while started.elapsed() < RACE {
        let results = [
            call(&fs, &o, "read_file", &json!({"path": "d/f.txt"}), &ctx).await,
            call(&fs, &o, "write_file", &json!({"path": "d/w.txt", "content": format!("w{calls}")}), &ctx).await,
            call(&fs, &o, "write_file", &json!({"path": "e/pre-commit", "content": "#!/bin/sh\nid\n"}), &ctx).await,
            call(&fs, &o, "edit_file", &json!({"path": "d/f.txt", "old_string": "A", "new_string": "A"}), &ctx).await,
            call(&fs, &o, "edit_file", &json!({"path": "d/f.txt", "old_string": "secret", "new_string": "S"}), &ctx)
                .await,
            call(&fs, &o, "list_dir", &json!({"path": "d"}), &ctx).await,
            call(&fs, &o, "grep", &json!({"pattern": "OUTSIDE"}), &ctx).await,
            call(&fs, &o, "glob", &json!({"pattern": "**/outside-only.txt"}), &ctx).await,
        ];
        for r in results.iter().flatten() {
            let r = r.to_string();
            if r.contains("OUTSIDE") || r.contains("outside-only") {
                leaks.push(r);
            }
        }
        calls += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 1000 && calls > 50, "the race ran ({swaps} swaps, {calls} rounds of calls)");
    assert!(leaks.is_empty(), "{} results showed outside content, e.g. {:?}", leaks.len(), leaks.first());
    assert_eq!(names(&outside), outside_before, "nothing written or left outside");
    assert_eq!(std::fs::read_to_string(outside.join("f.txt")).unwrap(), "OUTSIDE secret\n");
    assert!(
        names(&root.join(".git/hooks")).is_empty(),
        "nothing written into .git: {:?}",
        names(&root.join(".git/hooks"))
    );
}
