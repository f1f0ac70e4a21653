use std::sync::Mutex;

use async_trait::async_trait;

use super::*;
use crate::fs::memory::MemoryFs;
use crate::fs::{DirEntry, Stat};

/// A provider seen only through the interface (the walk of a JS provider).
struct Plain(MemoryFs, Option<&'static str>);

#[async_trait]
impl FsProvider for Plain {
    async fn read_file(&self, p: &str) -> Result<String> {
        self.0.read_file(p).await
    }
    async fn write_file(&self, p: &str, c: &str) -> Result<()> {
        self.0.write_file(p, c).await
    }
    async fn stat(&self, p: &str) -> Result<Option<Stat>> {
        self.0.stat(p).await
    }
    async fn readdir(&self, p: &str) -> Result<Vec<DirEntry>> {
        if Some(p) == self.1 {
            return Err(Error::new(Code::Io, "permission denied"));
        }
        self.0.readdir(p).await
    }
    async fn mkdir(&self, p: &str) -> Result<()> {
        self.0.mkdir(p).await
    }
    async fn rm(&self, p: &str, r: bool) -> Result<()> {
        self.0.rm(p, r).await
    }
}

const TREE: [&str; 7] =
    ["a.txt", "src/b.rs", "src/deep/c.rs", "node_modules/x/d.js", ".git/config", "build/out/e.o", "keep/out/f.o"];

fn memory() -> MemoryFs {
    MemoryFs::new(TREE.iter().map(|p| (p.to_string(), b"x\n".to_vec()))).unwrap()
}

fn disk() -> (tempfile::TempDir, LocalFs) {
    let d = tempfile::tempdir().unwrap();
    for p in TREE {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, "x\n").unwrap();
    }
    let fs = LocalFs::new(d.path().to_str().unwrap()).unwrap();
    (d, fs)
}

async fn files(fs: &dyn FsProvider, o: &FsToolOptions, base: &str) -> (Vec<String>, WalkStats) {
    files_in(fs, o, base, Order::Any).await
}

async fn files_in(fs: &dyn FsProvider, o: &FsToolOptions, base: &str, order: Order) -> (Vec<String>, WalkStats) {
    let found = Arc::new(Mutex::new(Vec::new()));
    let f2 = found.clone();
    let visit: Visit = Arc::new(move |p, _, _, _| {
        f2.lock().unwrap().push(p.to_string());
        true
    });
    let stats =
        walk(fs, o, base, &Ctx::default(), Arc::new(|_| true), visit, Want { sizes: false, order, light: false })
            .await
            .unwrap();
    let mut v = std::mem::take(&mut *found.lock().unwrap());
    v.sort();
    (v, stats)
}

#[tokio::test]
async fn the_walk_finds_the_same_files_on_disk_in_memory_and_through_a_provider() {
    let (_d, local) = disk();
    let o = FsToolOptions { ignore: vec!["node_modules".into(), "build/out".into()], ..Default::default() };
    let want = vec!["a.txt", "keep/out/f.o", "src/b.rs", "src/deep/c.rs"];
    // The same rules whatever the order the walk goes in.
    for order in [Order::Any, Order::Path] {
        for fs in [&local as &dyn FsProvider, &memory(), &Plain(memory(), None)] {
            let (found, stats) = files_in(fs, &o, ".", order).await;
            assert_eq!(found, want, "{order:?}: an ignore entry with a / is a path from the root; .git is denied");
            assert_eq!(stats.files.load(Ordering::Relaxed), 4);
            assert!(stats.notes(&o).is_empty());
        }
        for fs in [&local as &dyn FsProvider, &memory(), &Plain(memory(), None)] {
            assert_eq!(files_in(fs, &o, "src", order).await.0, vec!["src/b.rs", "src/deep/c.rs"], "{order:?}");
        }
    }
    // Walked again, the tree is known to be small: on unix it is walked from directory
    // descriptors on one thread, with the same rules.
    for base in [".", "src"] {
        let (found, stats) = files(&local, &o, base).await;
        assert_eq!(found, files(&memory(), &o, base).await.0, "{base}");
        assert_eq!(stats.confined.load(Ordering::Relaxed), cfg!(unix), "{base}");
        assert!(stats.notes(&o).is_empty());
    }
}

/// The files a walk in path order visits, in the order of their places.
async fn in_path_order(fs: &dyn FsProvider, o: &FsToolOptions) -> (Vec<String>, WalkStats) {
    let found = Arc::new(Mutex::new(Vec::new()));
    let f2 = found.clone();
    let visit: Visit = Arc::new(move |p, _, _, place| {
        f2.lock().unwrap().push((place.expect("a place in path order"), p.to_string()));
        true
    });
    let stats = walk(
        fs,
        o,
        ".",
        &Ctx::default(),
        Arc::new(|_| true),
        visit,
        Want { sizes: false, order: Order::Path, light: false },
    )
    .await
    .unwrap();
    let mut v = std::mem::take(&mut *found.lock().unwrap());
    v.sort();
    assert!(v.iter().enumerate().all(|(i, (place, _))| *place == i), "places are 0, 1, 2, …: {v:?}");
    (v.into_iter().map(|(_, p)| p).collect(), stats)
}

#[tokio::test]
async fn a_walk_in_path_order_gives_each_file_its_place_in_the_byte_order_of_paths() {
    // `a-b.txt` sorts before `a/…` (`-` < `/`), `a.txt` after; `A` before `a`.
    let names = ["a/x.txt", "a-b.txt", "a.txt", "a/b/c.txt", "a/b-c.txt", "A.txt", "ab/z.txt", "b.txt", ".git/x"];
    let d = tempfile::tempdir().unwrap();
    for p in names {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, "x\n").unwrap();
    }
    let local = LocalFs::new(d.path().to_str().unwrap()).unwrap();
    let memory = MemoryFs::new(names.iter().map(|p| (p.to_string(), b"x\n".to_vec()))).unwrap();
    let mut want: Vec<String> = names.iter().filter(|p| !p.starts_with(".git")).map(|p| p.to_string()).collect();
    want.sort();
    for fs in [&local as &dyn FsProvider, &memory] {
        for _ in 0..5 {
            assert_eq!(in_path_order(fs, &FsToolOptions::default()).await.0, want);
        }
        // maxFilesScanned keeps the first files in path order, the same on every run.
        let o = FsToolOptions { max_files_scanned: 3, ..Default::default() };
        let (first, stats) = in_path_order(fs, &o).await;
        assert_eq!(first, want[..3]);
        assert!(stats.limit_hit.load(Ordering::Relaxed));
    }
}

#[tokio::test]
async fn max_files_scanned_counts_the_same_files_everywhere_and_says_so() {
    let (_d, local) = disk();
    let o = FsToolOptions { max_files_scanned: 2, ..Default::default() };
    for fs in [&local as &dyn FsProvider, &memory(), &Plain(memory(), None)] {
        let (found, stats) = files(fs, &o, ".").await;
        // A provider's walk counts its directories too.
        assert_eq!(found.len(), if fs.as_local().is_some() || fs.as_memory().is_some() { 2 } else { 1 });
        assert!(stats.limit_hit.load(Ordering::Relaxed));
        assert!(stats.notes(&o)[0].contains("Stopped after scanning 2 files"), "{:?}", stats.notes(&o));
    }
}

#[tokio::test]
async fn an_unreadable_directory_is_skipped_and_counted() {
    let fs = Plain(memory(), Some("src"));
    let o = FsToolOptions::default();
    let (found, stats) = files(&fs, &o, ".").await;
    assert_eq!(found, vec!["a.txt", "build/out/e.o", "keep/out/f.o"]);
    assert_eq!(stats.unreadable.load(Ordering::Relaxed), 1);
    assert_eq!(stats.notes(&o), vec!["(1 entry could not be read and was skipped.)"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Root reads any directory: only an unprivileged walk can see this one refused.
        if unsafe { libc::geteuid() } != 0 {
            let (d, local) = disk();
            std::fs::set_permissions(d.path().join("src"), std::fs::Permissions::from_mode(0o000)).unwrap();
            let (_, stats) = files(&local, &o, ".").await;
            std::fs::set_permissions(d.path().join("src"), std::fs::Permissions::from_mode(0o755)).unwrap();
            assert_eq!(stats.unreadable.load(Ordering::Relaxed), 1);
        }
    }
}

#[tokio::test]
async fn a_provider_that_invents_directories_forever_is_stopped() {
    struct Loop;
    #[async_trait]
    impl FsProvider for Loop {
        async fn read_file(&self, _: &str) -> Result<String> {
            Ok(String::new())
        }
        async fn write_file(&self, _: &str, _: &str) -> Result<()> {
            Ok(())
        }
        async fn stat(&self, _: &str) -> Result<Option<Stat>> {
            Ok(Some(Stat { kind: EntryType::Directory, size: 0, modified_ms: None }))
        }
        async fn readdir(&self, _: &str) -> Result<Vec<DirEntry>> {
            Ok(vec![DirEntry { name: "loop".into(), kind: EntryType::Directory }])
        }
        async fn mkdir(&self, _: &str) -> Result<()> {
            Ok(())
        }
        async fn rm(&self, _: &str, _: bool) -> Result<()> {
            Ok(())
        }
    }
    let o = FsToolOptions { max_files_scanned: 300, ..Default::default() };
    let (found, stats) = files(&Loop, &o, ".").await;
    assert!(found.is_empty());
    assert!(stats.limit_hit.load(Ordering::Relaxed));
    assert_eq!(stats.dirs.load(Ordering::Relaxed), 300);
}

/// The files a walk visits, sorted, and how many threads visited them.
async fn files_and_threads(fs: &dyn FsProvider, order: Order) -> (Vec<String>, usize) {
    let found = Arc::new(Mutex::new(Vec::new()));
    let f2 = found.clone();
    let visit: Visit = Arc::new(move |p, _, _, _| {
        // Each visit takes a while, so more than one thread would take part if any could.
        std::thread::sleep(std::time::Duration::from_millis(5));
        f2.lock().unwrap().push((p.to_string(), std::thread::current().id()));
        true
    });
    let o = FsToolOptions::default();
    walk(fs, &o, ".", &Ctx::default(), Arc::new(|_| true), visit, Want { sizes: false, order, light: false })
        .await
        .unwrap();
    let v = std::mem::take(&mut *found.lock().unwrap());
    let threads: std::collections::HashSet<_> = v.iter().map(|(_, t)| *t).collect();
    let mut files: Vec<String> = v.into_iter().map(|(p, _)| p).collect();
    files.sort();
    (files, threads.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_that_was_small_is_walked_again_on_one_thread_with_the_same_files() {
    if walk_threads() < 2 {
        eprintln!("skipped: one walk thread on this machine, so every walk is on one thread");
        return;
    }
    for order in [Order::Any, Order::Path] {
        let d = tempfile::tempdir().unwrap();
        for i in 0..100 {
            let f = d.path().join(format!("d{}/f{i}.txt", i % 6));
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "x\n").unwrap();
        }
        let fs = LocalFs::new(d.path().to_str().unwrap()).unwrap();
        // Never walked: every thread takes part.
        let (first, threads) = files_and_threads(&fs, order).await;
        assert_eq!(first.len(), 100);
        assert!(threads > 1, "{order:?}: the first walk of a tree runs on {threads} thread(s)");
        let (again, threads) = files_and_threads(&fs, order).await;
        assert_eq!(again, first, "{order:?}");
        assert_eq!(threads, 1, "{order:?}: a small tree walked again runs on one thread");
    }
}
