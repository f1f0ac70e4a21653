use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use std::collections::BTreeMap;
use std::path::Path;

use async_trait::async_trait;

use super::format::*;
use super::*;
use crate::fs::{Caps, DirEntry, Stat};

// ---------------------------------------------------------------------------------------------
// A small in-memory provider

#[derive(Default)]
struct State {
    files: BTreeMap<String, Vec<u8>>,
    modes: BTreeMap<String, u32>,
    dirs: BTreeSet<String>,
}

struct TestFs {
    state: std::sync::Mutex<State>,
    caps: Caps,
    /// Writes, removals and chmods made through the provider interface.
    changes: AtomicUsize,
    fail_stat: std::sync::Mutex<Option<String>>,
}

const ALL_CAPS: Caps = Caps { read_bytes: true, write_bytes: true, mode: true, real_path: false };

impl TestFs {
    fn with_caps(files: &[(&str, &str)], caps: Caps) -> Self {
        let fs = TestFs {
            state: std::sync::Mutex::new(State::default()),
            caps,
            changes: AtomicUsize::new(0),
            fail_stat: std::sync::Mutex::new(None),
        };
        for (path, content) in files {
            fs.put(path, content.as_bytes());
        }
        fs
    }
    fn new(files: &[(&str, &str)]) -> Self {
        Self::with_caps(files, ALL_CAPS)
    }
    fn text_only(files: &[(&str, &str)]) -> Self {
        Self::with_caps(files, Caps::default())
    }

    /// A change made by someone else (the user, an editor, the shell tool).
    fn put(&self, path: &str, content: &[u8]) {
        let mut st = self.state.lock().unwrap();
        let mut parent = path;
        while let Some(i) = parent.rfind('/') {
            parent = &parent[..i];
            st.dirs.insert(parent.to_string());
        }
        st.files.insert(path.to_string(), content.to_vec());
        st.modes.entry(path.to_string()).or_insert(0o644);
    }
    fn replace_with_dir(&self, path: &str) {
        let mut st = self.state.lock().unwrap();
        st.files.remove(path);
        st.modes.remove(path);
        st.dirs.insert(path.to_string());
    }
    fn set_mode(&self, path: &str, mode: u32) {
        self.state.lock().unwrap().modes.insert(path.to_string(), mode);
    }
    fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.state.lock().unwrap().files.get(path).cloned()
    }
    fn text(&self, path: &str) -> Option<String> {
        self.get(path).map(|b| String::from_utf8(b).unwrap())
    }
    fn mode(&self, path: &str) -> Option<u32> {
        self.state.lock().unwrap().modes.get(path).copied()
    }
    fn is_dir(&self, path: &str) -> bool {
        self.state.lock().unwrap().dirs.contains(path)
    }
    fn snapshot(&self) -> BTreeMap<String, String> {
        let st = self.state.lock().unwrap();
        st.files.iter().map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned())).collect()
    }
    fn changes(&self) -> usize {
        self.changes.load(Ordering::SeqCst)
    }
    fn store(&self, path: &str, content: &[u8]) -> Result<()> {
        if self.is_dir(path) {
            return Err(Error::new(Code::IsADirectory, format!("Is a directory: {path}")));
        }
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.put(path, content);
        Ok(())
    }
}

fn no_cap(what: &str) -> Error {
    Error::new(Code::Io, format!("test provider has no {what}"))
}

#[async_trait]
impl FsProvider for TestFs {
    async fn read_file(&self, path: &str) -> Result<String> {
        let bytes = self.read_file_bytes_any(path)?;
        String::from_utf8(bytes).map_err(|_| Error::new(Code::NotUtf8, format!("Not UTF-8: {path}")))
    }
    async fn write_file(&self, path: &str, content: &str) -> Result<()> {
        self.store(path, content.as_bytes())
    }
    async fn stat(&self, path: &str) -> Result<Option<Stat>> {
        if self.fail_stat.lock().unwrap().as_deref() == Some(path) {
            return Err(Error::new(Code::Io, format!("stat failed: {path}")));
        }
        let st = self.state.lock().unwrap();
        if let Some(bytes) = st.files.get(path) {
            return Ok(Some(Stat { kind: EntryType::File, size: bytes.len() as u64, modified_ms: None }));
        }
        if st.dirs.contains(path) {
            return Ok(Some(Stat { kind: EntryType::Directory, size: 0, modified_ms: None }));
        }
        Ok(None)
    }
    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>> {
        let st = self.state.lock().unwrap();
        let prefix = format!("{path}/");
        let child = |p: &String| p.strip_prefix(&prefix).filter(|rest| !rest.contains('/')).map(str::to_string);
        let mut out: Vec<DirEntry> =
            st.files.keys().filter_map(child).map(|name| DirEntry { name, kind: EntryType::File }).collect();
        out.extend(st.dirs.iter().filter_map(child).map(|name| DirEntry { name, kind: EntryType::Directory }));
        Ok(out)
    }
    async fn mkdir(&self, path: &str) -> Result<()> {
        self.state.lock().unwrap().dirs.insert(path.to_string());
        Ok(())
    }
    async fn rm(&self, path: &str, _recursive: bool) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        self.changes.fetch_add(1, Ordering::SeqCst);
        st.modes.remove(path);
        if st.files.remove(path).is_none() && !st.dirs.remove(path) {
            return Err(Error::not_found(path));
        }
        Ok(())
    }
    fn caps(&self) -> Caps {
        self.caps
    }
    async fn read_file_bytes(&self, path: &str) -> Result<Vec<u8>> {
        if !self.caps.read_bytes {
            return Err(no_cap("readFileBytes"));
        }
        self.read_file_bytes_any(path)
    }
    async fn write_file_bytes(&self, path: &str, content: &[u8]) -> Result<()> {
        if !self.caps.write_bytes {
            return Err(no_cap("writeFileBytes"));
        }
        self.store(path, content)
    }
    async fn get_mode(&self, path: &str) -> Result<u32> {
        if !self.caps.mode {
            return Err(no_cap("getMode"));
        }
        self.mode(path).ok_or_else(|| Error::not_found(path))
    }
    async fn chmod(&self, path: &str, mode: u32) -> Result<()> {
        if !self.caps.mode {
            return Err(no_cap("chmod"));
        }
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.set_mode(path, mode);
        Ok(())
    }
}

impl TestFs {
    fn read_file_bytes_any(&self, path: &str) -> Result<Vec<u8>> {
        let st = self.state.lock().unwrap();
        if st.dirs.contains(path) {
            return Err(Error::new(Code::IsADirectory, format!("Is a directory: {path}")));
        }
        st.files.get(path).cloned().ok_or_else(|| Error::not_found(path))
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

const S: &str = "session-1";

/// What write_file/edit_file do: nothing when the content is already there, else backup, write,
/// confirm.
async fn agent_write(ck: &Checkpoints, fs: &TestFs, session: &str, turn: u32, path: &str, content: &str) {
    if fs.get(path).as_deref() == Some(content.as_bytes()) {
        return;
    }
    ck.before_write(fs, session, turn, path, content.as_bytes()).await.unwrap();
    fs.write_file(path, content).await.unwrap();
    ck.after_write(session, turn, path, content.as_bytes()).await.unwrap();
}

fn with_store(store: Arc<dyn CheckpointStore>, max_turns: usize, max_file_bytes: u64) -> Checkpoints {
    Checkpoints::new(store, CheckpointOptions { max_turns, max_file_bytes, ..CheckpointOptions::default() }).unwrap()
}

fn turns(list: &[TurnChanges]) -> Vec<(u32, Vec<&str>)> {
    list.iter().map(|t| (t.turn, t.paths.iter().map(String::as_str).collect())).collect()
}

fn report(dry_run: bool, restored: &[&str], deleted: &[&str], skipped: &[(&str, SkipReason)]) -> RewindReport {
    RewindReport {
        dry_run,
        restored: restored.iter().map(|s| s.to_string()).collect(),
        deleted: deleted.iter().map(|s| s.to_string()).collect(),
        skipped: skipped.iter().map(|(p, r)| SkippedPath { path: p.to_string(), reason: *r }).collect(),
    }
}

fn snap(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

// ---------------------------------------------------------------------------------------------
// The rules

#[tokio::test]
async fn checkpoints_spec_example_list_dry_run_rewind() {
    let fs = TestFs::new(&[("notes.md", "# Notes\n")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "notes.md", "# Plan\n").await;
    agent_write(&ck, &fs, S, 1, "todo.md", "- ship it\n").await;

    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["notes.md"]), (1, vec!["todo.md"])]);

    let preview = ck.rewind(&fs, S, 0, true, false).await.unwrap();
    assert_eq!(preview, report(true, &["notes.md"], &["todo.md"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("notes.md", "# Plan\n"), ("todo.md", "- ship it\n")]));
    assert_eq!(ck.list(S).await.unwrap().len(), 2, "a dry run forgets nothing");

    let done = ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(done, RewindReport { dry_run: false, ..preview });
    assert_eq!(fs.snapshot(), snap(&[("notes.md", "# Notes\n")]));

    // The backups of the rewound turns are gone: a second rewind does nothing.
    assert!(ck.list(S).await.unwrap().is_empty());
    let changes = fs.changes();
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &[], &[], &[]));
    assert_eq!(fs.changes(), changes);
}

#[tokio::test]
async fn checkpoints_list_turns_ascending_paths_sorted() {
    let fs = TestFs::new(&[]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 3, "z.txt", "z").await;
    agent_write(&ck, &fs, S, 3, "a/b.txt", "b").await;
    agent_write(&ck, &fs, S, 3, "a.txt", "a").await;
    agent_write(&ck, &fs, S, 1, "m.txt", "m").await;
    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(1, vec!["m.txt"]), (3, vec!["a.txt", "a/b.txt", "z.txt"])]);
    assert!(ck.list("other").await.unwrap().is_empty());
}

#[tokio::test]
async fn checkpoints_rewind_uses_earliest_backup_at_or_after_turn() {
    let fs = TestFs::new(&[("f.txt", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "f.txt", "v1").await;
    agent_write(&ck, &fs, S, 1, "f.txt", "v2").await;
    agent_write(&ck, &fs, S, 1, "new.txt", "n").await;
    agent_write(&ck, &fs, S, 2, "f.txt", "v3").await;
    agent_write(&ck, &fs, S, 2, "new.txt", "n2").await;

    let r = ck.rewind(&fs, S, 1, false, false).await.unwrap();
    assert_eq!(r, report(false, &["f.txt"], &["new.txt"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("f.txt", "v1")]));
    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["f.txt"])]);

    ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(fs.snapshot(), snap(&[("f.txt", "v0")]));
}

#[tokio::test]
async fn checkpoints_rewind_to_a_turn_after_every_change_does_nothing() {
    let fs = TestFs::new(&[("f.txt", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "f.txt", "v1").await;
    assert_eq!(ck.rewind(&fs, S, 1, false, false).await.unwrap(), report(false, &[], &[], &[]));
    assert_eq!(fs.text("f.txt").unwrap(), "v1");
    assert_eq!(ck.list(S).await.unwrap().len(), 1);
}

#[tokio::test]
async fn checkpoints_same_turn_keeps_first_content_then_hashes() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let fs = TestFs::new(&[("f.txt", "original")]);
    let ck = with_store(store.clone(), 20, 1_000_000);
    agent_write(&ck, &fs, S, 0, "f.txt", "second-SECRET").await;
    agent_write(&ck, &fs, S, 0, "f.txt", "third-SECRET").await;
    agent_write(&ck, &fs, S, 0, "f.txt", "fourth-SECRET").await;

    let json = store.load(S).await.unwrap().unwrap();
    let backup = &json["turns"]["0"]["f.txt"];
    assert_eq!(backup["before"]["content"], "original");
    assert_eq!(backup["writes"].as_array().unwrap().len(), 3);
    assert_eq!(backup["writes"][1]["from"], sha256(b"second-SECRET"));
    assert!(!json.to_string().contains("SECRET"), "later writes keep only hashes");

    ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(fs.text("f.txt").unwrap(), "original");
}

#[tokio::test]
async fn checkpoints_write_that_changes_nothing_records_nothing() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let fs = TestFs::new(&[("f.txt", "same")]);
    let ck = with_store(store.clone(), 20, 1_000_000);
    // The tools skip such a write; before_write is safe anyway.
    ck.before_write(&fs, S, 0, "f.txt", b"same").await.unwrap();
    ck.after_write(S, 0, "f.txt", b"same").await.unwrap();
    assert!(ck.list(S).await.unwrap().is_empty());
    assert!(store.load(S).await.unwrap().is_none());
}

#[tokio::test]
async fn checkpoints_changed_since_skipped_unless_force() {
    let fs = TestFs::new(&[("edited.txt", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "edited.txt", "agent").await;
    agent_write(&ck, &fs, S, 0, "created.txt", "agent").await;
    fs.put("edited.txt", b"user");
    fs.put("created.txt", b"user");

    let skipped = [("created.txt", SkipReason::ChangedSince), ("edited.txt", SkipReason::ChangedSince)];
    assert_eq!(ck.rewind(&fs, S, 0, true, false).await.unwrap(), report(true, &[], &[], &skipped));
    let changes = fs.changes();
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &[], &[], &skipped));
    assert_eq!(fs.changes(), changes);
    assert_eq!(fs.snapshot(), snap(&[("created.txt", "user"), ("edited.txt", "user")]));
    // Skipped files' backups are forgotten too.
    assert!(ck.list(S).await.unwrap().is_empty());
    assert_eq!(ck.rewind(&fs, S, 0, false, true).await.unwrap(), report(false, &[], &[], &[]));
    assert_eq!(fs.snapshot(), snap(&[("created.txt", "user"), ("edited.txt", "user")]));

    // With force, the same situation is restored.
    let fs = TestFs::new(&[("edited.txt", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "edited.txt", "agent").await;
    agent_write(&ck, &fs, S, 0, "created.txt", "agent").await;
    fs.put("edited.txt", b"user");
    fs.put("created.txt", b"user");
    let r = ck.rewind(&fs, S, 0, false, true).await.unwrap();
    assert_eq!(r, report(false, &["edited.txt"], &["created.txt"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("edited.txt", "v0")]));
}

#[tokio::test]
async fn checkpoints_changed_since_compares_with_the_last_write_across_turns() {
    let fs = TestFs::new(&[("f.txt", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "f.txt", "v1").await;
    agent_write(&ck, &fs, S, 1, "f.txt", "v2").await;
    // v1 is what the agent wrote in turn 0, but not what it wrote last.
    fs.put("f.txt", b"v1");
    let r = ck.rewind(&fs, S, 0, true, false).await.unwrap();
    assert_eq!(r, report(true, &[], &[], &[("f.txt", SkipReason::ChangedSince)]));
    fs.put("f.txt", b"v2");
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &["f.txt"], &[], &[]));
    assert_eq!(fs.text("f.txt").unwrap(), "v0");
}

#[tokio::test]
async fn checkpoints_path_that_is_not_a_file_is_skipped_even_with_force() {
    let fs = TestFs::new(&[("dir-now", "v0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "dir-now", "v1").await;
    agent_write(&ck, &fs, S, 0, "created", "c").await;
    fs.replace_with_dir("dir-now");
    fs.replace_with_dir("created");
    for force in [false, true] {
        let r = ck.rewind(&fs, S, 0, true, force).await.unwrap();
        let skipped = [("created", SkipReason::NotAFile), ("dir-now", SkipReason::NotAFile)];
        assert_eq!(r, report(true, &[], &[], &skipped));
    }
    ck.rewind(&fs, S, 0, false, true).await.unwrap();
    assert!(fs.is_dir("dir-now") && fs.is_dir("created"));
    // A write to a directory fails in the provider: nothing is recorded for it.
    ck.before_write(&fs, S, 1, "dir-now", b"x").await.unwrap();
    assert!(ck.list(S).await.unwrap().is_empty());
}

#[tokio::test]
async fn checkpoints_too_large_files_are_never_copied_deleted_or_restored() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let fs = TestFs::new(&[("big.txt", "0123456789-BIG-CONTENT")]);
    let ck = with_store(store.clone(), 20, 10);
    agent_write(&ck, &fs, S, 0, "big.txt", "small").await;
    agent_write(&ck, &fs, S, 0, "huge-new.txt", "created-but-over-the-limit").await;
    agent_write(&ck, &fs, S, 0, "grown.txt", "tiny").await;
    agent_write(&ck, &fs, S, 1, "grown.txt", "now-over-the-limit").await;

    let json = store.load(S).await.unwrap().unwrap();
    assert_eq!(json["turns"]["0"]["big.txt"]["before"], serde_json::json!({ "state": "too-large", "size": 22 }));
    assert!(!json.to_string().contains("BIG-CONTENT"));

    let skipped = [
        ("big.txt", SkipReason::TooLarge),
        ("grown.txt", SkipReason::TooLarge),
        ("huge-new.txt", SkipReason::TooLarge),
    ];
    for force in [false, true] {
        assert_eq!(ck.rewind(&fs, S, 0, true, force).await.unwrap(), report(true, &[], &[], &skipped));
    }
    let before = fs.snapshot();
    assert_eq!(ck.rewind(&fs, S, 0, false, true).await.unwrap(), report(false, &[], &[], &skipped));
    assert_eq!(fs.snapshot(), before);
}

#[tokio::test]
async fn checkpoints_restore_permission_bits_when_the_provider_has_them() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let fs = TestFs::new(&[("run.sh", "#!/bin/sh\n")]);
    fs.set_mode("run.sh", 0o755);
    let ck = with_store(store.clone(), 20, 1_000_000);
    agent_write(&ck, &fs, S, 0, "run.sh", "#!/bin/sh\necho hi\n").await;
    fs.set_mode("run.sh", 0o600);
    assert_eq!(store.load(S).await.unwrap().unwrap()["turns"]["0"]["run.sh"]["before"]["mode"], 0o755);

    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &["run.sh"], &[], &[]));
    assert_eq!(fs.text("run.sh").unwrap(), "#!/bin/sh\n");
    assert_eq!(fs.mode("run.sh"), Some(0o755));
}

#[tokio::test]
async fn checkpoints_every_path_is_checked_before_anything_is_written() {
    let fs = TestFs::new(&[("a.txt", "a0"), ("b.txt", "b0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "a.txt", "a1").await;
    agent_write(&ck, &fs, S, 0, "b.txt", "b1").await;
    agent_write(&ck, &fs, S, 0, "c.txt", "c1").await;
    *fs.fail_stat.lock().unwrap() = Some("b.txt".to_string());

    let changes = fs.changes();
    let err = ck.rewind(&fs, S, 0, false, false).await.unwrap_err();
    assert_eq!(err.message, "stat failed: b.txt");
    assert_eq!(fs.changes(), changes, "a.txt sorts first, yet nothing was written");
    assert_eq!(fs.snapshot(), snap(&[("a.txt", "a1"), ("b.txt", "b1"), ("c.txt", "c1")]));
    assert_eq!(ck.list(S).await.unwrap().len(), 1, "a failed rewind forgets nothing");

    *fs.fail_stat.lock().unwrap() = None;
    let r = ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(r, report(false, &["a.txt", "b.txt"], &["c.txt"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("a.txt", "a0"), ("b.txt", "b0")]));
}

#[tokio::test]
async fn checkpoints_dry_run_returns_the_same_report_and_changes_nothing() {
    let fs = TestFs::new(&[("edit.txt", "e0"), ("user.txt", "u0"), ("dir", "d0")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "edit.txt", "e1").await;
    agent_write(&ck, &fs, S, 1, "new.txt", "n1").await;
    agent_write(&ck, &fs, S, 1, "user.txt", "u1").await;
    agent_write(&ck, &fs, S, 1, "dir", "d1").await;
    fs.put("user.txt", b"changed by the user");
    fs.replace_with_dir("dir");

    let changes = fs.changes();
    let before = fs.snapshot();
    let dry = ck.rewind(&fs, S, 0, true, false).await.unwrap();
    let expected = report(
        true,
        &["edit.txt"],
        &["new.txt"],
        &[("dir", SkipReason::NotAFile), ("user.txt", SkipReason::ChangedSince)],
    );
    assert_eq!(dry, expected);
    assert_eq!(ck.rewind(&fs, S, 0, true, false).await.unwrap(), expected, "repeatable");
    assert_eq!((fs.changes(), fs.snapshot()), (changes, before));
    assert_eq!(ck.list(S).await.unwrap().len(), 2);

    let real = ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(real, RewindReport { dry_run: false, ..expected });
}

#[tokio::test]
async fn checkpoints_only_the_newest_max_turns_are_kept() {
    let fs = TestFs::new(&[("f.txt", "v-init")]);
    let ck = with_store(Arc::new(MemoryCheckpointStore::new()), 3, 1_000_000);
    for turn in 0..=5u32 {
        agent_write(&ck, &fs, S, turn, "f.txt", &format!("v{turn}")).await;
    }
    let kept: Vec<u32> = ck.list(S).await.unwrap().iter().map(|t| t.turn).collect();
    assert_eq!(kept, vec![3, 4, 5]);

    for too_old in [0, 2] {
        for dry_run in [true, false] {
            let err = ck.rewind(&fs, S, too_old, dry_run, true).await.unwrap_err();
            assert_eq!(err.code, Code::InvalidArguments);
            assert!(err.message.contains("kept: 3, 4, 5"), "{}", err.message);
            assert!(err.message.contains("turn 3 or later"), "{}", err.message);
        }
    }
    assert_eq!(fs.text("f.txt").unwrap(), "v5");

    assert_eq!(ck.rewind(&fs, S, 3, false, false).await.unwrap(), report(false, &["f.txt"], &[], &[]));
    assert_eq!(fs.text("f.txt").unwrap(), "v2");
}

#[tokio::test]
async fn checkpoints_max_turns_must_be_positive() {
    let opts = CheckpointOptions { max_turns: 0, ..CheckpointOptions::default() };
    let err = Checkpoints::new(Arc::new(MemoryCheckpointStore::new()), opts).err().unwrap();
    assert_eq!(err.code, Code::Configuration);
    assert_eq!((DEFAULT_MAX_TURNS, DEFAULT_MAX_FILE_BYTES), (20, 1_000_000));
}

#[tokio::test]
async fn checkpoints_clear_forgets_one_session() {
    let fs = TestFs::new(&[]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, "a", 0, "a.txt", "a").await;
    agent_write(&ck, &fs, "b", 0, "b.txt", "b").await;
    ck.clear("a").await.unwrap();
    assert!(ck.list("a").await.unwrap().is_empty());
    assert_eq!(ck.rewind(&fs, "a", 0, false, false).await.unwrap(), report(false, &[], &[], &[]));
    assert_eq!(turns(&ck.list("b").await.unwrap()), vec![(0, vec!["b.txt"])]);
    assert_eq!(ck.rewind(&fs, "b", 0, false, false).await.unwrap(), report(false, &[], &["b.txt"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("a.txt", "a")]));
}

#[tokio::test]
async fn checkpoints_report_and_list_never_hold_content() {
    let fs = TestFs::new(&[("f.txt", "OLD-SECRET")]);
    let ck = Checkpoints::in_memory();
    agent_write(&ck, &fs, S, 0, "f.txt", "NEW-SECRET").await;
    let list = serde_json::to_string(&ck.list(S).await.unwrap()).unwrap();
    assert_eq!(list, r#"[{"turn":0,"paths":["f.txt"]}]"#);
    let r = serde_json::to_string(&ck.rewind(&fs, S, 0, false, false).await.unwrap()).unwrap();
    assert_eq!(r, r#"{"dryRun":false,"restored":["f.txt"],"deleted":[],"skipped":[]}"#);

    let skipped = SkippedPath { path: "x".into(), reason: SkipReason::ChangedSince };
    assert_eq!(serde_json::to_string(&skipped).unwrap(), r#"{"path":"x","reason":"changed-since"}"#);
    assert_eq!(SkipReason::NotAFile.as_str(), "not-a-file");
    assert_eq!(serde_json::to_value(SkipReason::TooLarge).unwrap(), "too-large");
}

#[tokio::test]
async fn checkpoints_text_only_provider_backs_up_and_restores_text() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let fs = TestFs::text_only(&[("f.txt", "héllo\n")]);
    let ck = with_store(store.clone(), 20, 1_000_000);
    agent_write(&ck, &fs, S, 0, "f.txt", "bye\n").await;
    let before = &store.load(S).await.unwrap().unwrap()["turns"]["0"]["f.txt"]["before"];
    assert_eq!(before["encoding"], "utf8");
    assert!(before.get("mode").is_none(), "no getMode, no mode");
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &["f.txt"], &[], &[]));
    assert_eq!(fs.text("f.txt").unwrap(), "héllo\n");

    // A file a text-only provider cannot read cannot be backed up: the write must not happen.
    fs.put("bin", &[0xff, 0xfe]);
    let err = ck.before_write(&fs, S, 1, "bin", b"text").await.unwrap_err();
    assert_eq!(err.code, Code::NotUtf8);
    assert!(ck.list(S).await.unwrap().is_empty());
}

#[tokio::test]
async fn checkpoints_binary_content_round_trips_as_base64() {
    let store = Arc::new(MemoryCheckpointStore::new());
    let original = [0xffu8, 0x00, 0x01, 0x80, b'a'];
    let fs = TestFs::new(&[]);
    fs.put("blob", &original);
    let ck = with_store(store.clone(), 20, 1_000_000);
    agent_write(&ck, &fs, S, 0, "blob", "text now").await;
    let before = &store.load(S).await.unwrap().unwrap()["turns"]["0"]["blob"]["before"];
    assert_eq!(before["encoding"], "base64");
    assert_eq!(before["content"], "/wABgGE=");
    ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(fs.get("blob").unwrap(), original);
}

#[test]
fn checkpoints_base64() {
    for (plain, encoded) in
        [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")]
    {
        assert_eq!(base64_encode(plain.as_bytes()), encoded);
        assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(base64_decode(&base64_encode(&all)).unwrap(), all);
    for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "===="] {
        assert_eq!(base64_decode(bad), None, "{bad}");
    }
}

// ---------------------------------------------------------------------------------------------
// Restarts and crashes (FileCheckpointStore)

fn file_checkpoints(dir: &Path) -> Checkpoints {
    with_store(Arc::new(FileCheckpointStore::new(dir)), 20, 1_000_000)
}

#[tokio::test]
async fn checkpoints_file_store_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("checkpoints");
    let fs = TestFs::new(&[("notes.md", "# Notes\n")]);
    {
        let ck = file_checkpoints(&dir);
        agent_write(&ck, &fs, S, 0, "notes.md", "# Plan\n").await;
        agent_write(&ck, &fs, S, 1, "todo.md", "- ship it\n").await;
        agent_write(&ck, &fs, S, 1, "notes.md", "# Plan B\n").await;
    }
    {
        let ck = file_checkpoints(&dir);
        assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["notes.md"]), (1, vec!["notes.md", "todo.md"])]);
        let r = ck.rewind(&fs, S, 1, false, false).await.unwrap();
        assert_eq!(r, report(false, &["notes.md"], &["todo.md"], &[]));
        assert_eq!(fs.snapshot(), snap(&[("notes.md", "# Plan\n")]));
    }
    let ck = file_checkpoints(&dir);
    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["notes.md"])]);
    ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(fs.snapshot(), snap(&[("notes.md", "# Notes\n")]));

    // One JSON file per session, no temp files left behind; clear removes it.
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(names, vec![FileCheckpointStore::file_name(S)]);
    let text = std::fs::read_to_string(dir.join(&names[0])).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["format"], FORMAT);
    ck.clear(S).await.unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(file_checkpoints(&dir).list(S).await.unwrap().is_empty());
}

#[tokio::test]
async fn checkpoints_file_store_names_are_safe_and_distinct() {
    let tmp = tempfile::tempdir().unwrap();
    let store = FileCheckpointStore::new(tmp.path());
    let ids = ["../../etc/passwd", "Session", "session", "a/b\\c:d*?\0", "CON", "", "é"];
    for (i, id) in ids.iter().enumerate() {
        let name = FileCheckpointStore::file_name(id);
        assert!(
            name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' || c == '.'),
            "{name}"
        );
        assert!(!name.starts_with('.') && name.ends_with(".json"), "{name}");
        store.save(id, serde_json::json!({ "i": i })).await.unwrap();
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), ids.len());
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(store.load(id).await.unwrap(), Some(serde_json::json!({ "i": i })));
    }
    store.delete("Session").await.unwrap();
    store.delete("Session").await.unwrap();
    assert_eq!(store.load("Session").await.unwrap(), None);
    assert!(store.load("session").await.unwrap().is_some());
}

#[tokio::test]
async fn checkpoints_crash_between_backup_and_write_leaves_nothing_to_undo() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = TestFs::new(&[("done.txt", "d0"), ("edited.txt", "old")]);
    {
        let ck = file_checkpoints(tmp.path());
        agent_write(&ck, &fs, S, 0, "done.txt", "d1").await;
        // Killed after the backups were stored, before the files were written.
        ck.before_write(&fs, S, 0, "edited.txt", b"new").await.unwrap();
        ck.before_write(&fs, S, 0, "created.txt", b"new").await.unwrap();
    }
    let ck = file_checkpoints(tmp.path());
    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["created.txt", "done.txt", "edited.txt"])]);
    let expected = report(true, &["done.txt"], &[], &[]);
    assert_eq!(ck.rewind(&fs, S, 0, true, false).await.unwrap(), expected);
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), RewindReport { dry_run: false, ..expected });
    assert_eq!(fs.snapshot(), snap(&[("done.txt", "d0"), ("edited.txt", "old")]));
    assert!(ck.list(S).await.unwrap().is_empty());
}

#[tokio::test]
async fn checkpoints_crash_before_a_later_write_still_rewinds_the_earlier_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = TestFs::new(&[("f.txt", "v0")]);
    {
        let ck = file_checkpoints(tmp.path());
        agent_write(&ck, &fs, S, 0, "f.txt", "v1").await;
        ck.before_write(&fs, S, 1, "f.txt", b"v2").await.unwrap(); // killed before writing
    }
    let ck = file_checkpoints(tmp.path());
    // The file holds what turn 0 wrote, which is what turn 1 backed up: not a change by someone else.
    assert_eq!(ck.rewind(&fs, S, 1, true, false).await.unwrap(), report(true, &[], &[], &[]));
    assert_eq!(ck.rewind(&fs, S, 0, false, false).await.unwrap(), report(false, &["f.txt"], &[], &[]));
    assert_eq!(fs.text("f.txt").unwrap(), "v0");
}

#[tokio::test]
async fn checkpoints_crash_after_write_before_confirmation_still_rewinds() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = TestFs::new(&[("edited.txt", "old")]);
    {
        let ck = file_checkpoints(tmp.path());
        ck.before_write(&fs, S, 0, "edited.txt", b"new").await.unwrap();
        ck.before_write(&fs, S, 0, "created.txt", b"new").await.unwrap();
        fs.write_file("edited.txt", "new").await.unwrap();
        fs.write_file("created.txt", "new").await.unwrap();
        // Killed before after_write.
    }
    let ck = file_checkpoints(tmp.path());
    let r = ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(r, report(false, &["edited.txt"], &["created.txt"], &[]));
    assert_eq!(fs.snapshot(), snap(&[("edited.txt", "old")]));
}

#[tokio::test]
async fn checkpoints_rerun_after_a_crash_keeps_the_first_backup() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = TestFs::new(&[("f.txt", "before the first attempt"), ("g.txt", "g0")]);
    {
        let ck = file_checkpoints(tmp.path());
        ck.before_write(&fs, S, 0, "f.txt", b"the agent's content").await.unwrap();
        fs.put("f.txt", b"the agent's con"); // a half-finished write, then the process died
        ck.before_write(&fs, S, 0, "g.txt", b"g1").await.unwrap(); // died before writing g.txt
    }
    let store = Arc::new(FileCheckpointStore::new(tmp.path()));
    let ck = with_store(store.clone(), 20, 1_000_000);
    // The tool calls run again on resume.
    agent_write(&ck, &fs, S, 0, "f.txt", "the agent's content").await;
    agent_write(&ck, &fs, S, 0, "g.txt", "g1").await;

    let json = store.load(S).await.unwrap().unwrap();
    assert_eq!(json["turns"]["0"]["f.txt"]["before"]["content"], "before the first attempt");
    assert_eq!(json["turns"]["0"]["f.txt"]["writes"].as_array().unwrap().len(), 2);
    assert_eq!(json["turns"]["0"]["g.txt"]["writes"].as_array().unwrap().len(), 1, "same write, one record");
    assert_eq!(json["turns"]["0"]["g.txt"]["writes"][0]["done"], true);

    let r = ck.rewind(&fs, S, 0, false, false).await.unwrap();
    assert_eq!(r, report(false, &["f.txt", "g.txt"], &[], &[]));
    assert_eq!(fs.snapshot(), snap(&[("f.txt", "before the first attempt"), ("g.txt", "g0")]));
}

#[tokio::test]
async fn checkpoints_store_failure_fails_before_write_and_keeps_state() {
    struct FailingStore {
        inner: MemoryCheckpointStore,
        fail: std::sync::atomic::AtomicBool,
    }
    #[async_trait]
    impl CheckpointStore for FailingStore {
        async fn load(&self, id: &str) -> Result<Option<serde_json::Value>> {
            self.inner.load(id).await
        }
        async fn save(&self, id: &str, data: serde_json::Value) -> Result<()> {
            if self.fail.load(Ordering::SeqCst) {
                return Err(Error::new(Code::Io, "disk full"));
            }
            self.inner.save(id, data).await
        }
        async fn delete(&self, id: &str) -> Result<()> {
            self.inner.delete(id).await
        }
    }
    let store = Arc::new(FailingStore { inner: MemoryCheckpointStore::new(), fail: false.into() });
    let fs = TestFs::new(&[("a.txt", "a0"), ("b.txt", "b0")]);
    let ck = with_store(store.clone(), 20, 1_000_000);
    agent_write(&ck, &fs, S, 0, "a.txt", "a1").await;
    store.fail.store(true, Ordering::SeqCst);
    let err = ck.before_write(&fs, S, 0, "b.txt", b"b1").await.unwrap_err();
    assert_eq!(err.message, "disk full");
    store.fail.store(false, Ordering::SeqCst);
    // The failed backup is not remembered: only what the store holds counts.
    assert_eq!(turns(&ck.list(S).await.unwrap()), vec![(0, vec!["a.txt"])]);
}
