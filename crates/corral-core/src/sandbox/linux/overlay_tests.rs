//! `changes: 'overlay'`: a command's changes land in a layer and reach the host only when it
//! ends, checked. Run as root and as an unprivileged user by `scripts/test.sh` (they need
//! namespaces, so they are `#[ignore]`d in a plain `cargo test`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::attacks::{sh, shell};
use super::*;
use crate::sandbox::SandboxShell;
use crate::shell::changes::Changes;
use crate::shell::{ExecOptions, ShellProvider};

fn overlay() -> LinuxSandboxOptions {
    LinuxSandboxOptions { overlay: true, ..Default::default() }
}

fn write(cwd: &Path, rel: &str, text: &str) {
    let p = cwd.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn read(cwd: &Path, rel: &str) -> String {
    std::fs::read_to_string(cwd.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn changes(r: &ExecResult) -> &Changes {
    r.changes.as_ref().unwrap_or_else(|| panic!("no changes in {r:?}"))
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_host_is_untouched_while_the_command_runs_and_gets_its_changes_when_it_ends() {
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "a.txt", "one\n");
    write(&cwd, "c.txt", "gone\n");
    write(&cwd, "d1/f", "in d1\n");
    write(&cwd, "run.sh", "echo run\n");
    write(&cwd, "same.txt", "same\n");
    let command = "echo new > b.txt && echo two >> a.txt && rm c.txt && rm -rf d1 && chmod +x run.sh \
                   && ln -s a.txt link && mkdir empty && cat same.txt > /dev/null && touch same.txt \
                   && cat a.txt && sleep 1";
    let run = sh(&s, command);
    let look = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        (cwd.join("b.txt").exists(), read(&cwd, "a.txt"), cwd.join("c.txt").exists())
    };
    let (r, during) = tokio::join!(run, look);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.stdout, "one\ntwo\n");
    assert_eq!(during, (false, "one\n".to_string(), true), "the host changed while the command ran");
    let c = changes(&r);
    assert_eq!(c.modified, vec!["a.txt", "run.sh"]);
    assert_eq!(c.added, vec!["b.txt", "empty/", "link"]);
    assert_eq!(c.deleted, vec!["c.txt", "d1/f"]);
    assert!(c.refused.is_empty() && !c.pending, "{c:?}");
    assert_eq!(read(&cwd, "a.txt"), "one\ntwo\n");
    assert_eq!(read(&cwd, "b.txt"), "new\n");
    assert!(!cwd.join("c.txt").exists() && !cwd.join("d1").exists());
    assert_eq!(std::fs::metadata(cwd.join("run.sh")).unwrap().permissions().mode() & 0o111, 0o111);
    assert_eq!(std::fs::read_link(cwd.join("link")).unwrap(), Path::new("a.txt"));
    assert!(cwd.join("empty").is_dir());
    // Nothing of the command is left behind: at most an empty layer, kept for the next command.
    let keyed = overlay::layer::keyed_dir(&std::fs::canonicalize(&cwd).unwrap(), None).unwrap();
    assert_empty_layers(&keyed);
}

/// Every layer in `dir` is empty (kept for a next command), and there is at most one.
fn assert_empty_layers(dir: &Path) {
    let layers = layer_dirs(dir);
    assert!(layers.len() <= 1, "layers left: {layers:?}");
    for l in layers {
        let upper = walkdir(&l.join("upper"));
        assert!(upper.is_empty(), "a layer with something in it was left: {upper:?}");
    }
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        out.push(e.path());
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walkdir(&e.path()));
        }
    }
    out
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn edits_renames_and_a_file_replaced_by_a_directory_are_applied() {
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "src/main.c", "int main() { return 1; }\n");
    write(&cwd, "old.txt", "moved\n");
    write(&cwd, "swap", "a file\n");
    write(&cwd, "dir1/x", "x\n");
    let r = sh(&s, "sed -i 's/return 1/return 0/' src/main.c && mv old.txt new.txt && rm swap && mkdir swap && echo in > swap/in && mv dir1 dir2").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let c = changes(&r);
    assert_eq!(c.modified, vec!["src/main.c"]);
    assert_eq!(c.added, vec!["dir2/x", "new.txt", "swap/in"]);
    assert_eq!(c.deleted, vec!["dir1/x", "old.txt", "swap"]);
    assert_eq!(read(&cwd, "src/main.c"), "int main() { return 0; }\n");
    assert_eq!(read(&cwd, "new.txt"), "moved\n");
    assert_eq!(read(&cwd, "swap/in"), "in\n");
    assert_eq!(read(&cwd, "dir2/x"), "x\n");
    assert!(!cwd.join("dir1").exists() && !cwd.join("old.txt").exists());
    // And back: the directory becomes a file again.
    let r = sh(&s, "rm -rf swap && echo file again > swap").await;
    assert_eq!(changes(&r).deleted, vec!["swap/in"]);
    assert_eq!(changes(&r).added, vec!["swap"]);
    assert_eq!(read(&cwd, "swap"), "file again\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_program_renaming_a_directory_of_the_host_gets_exdev_and_nothing_changes() {
    // Unprivileged overlays have no redirect_dir: rename(2) of a directory below them fails with
    // EXDEV (mv copies instead, above); the docs say so.
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "dir1/x", "x\n");
    let r = sh(&s, "perl -e 'rename(\"dir1\", \"dir3\") or die \"rename: $!\\n\"'").await;
    assert_ne!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stderr.contains("Invalid cross-device link"), "{r:?}");
    assert!(changes(&r).is_empty(), "{r:?}");
    assert_eq!(read(&cwd, "dir1/x"), "x\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_new_git_directory_never_lands_and_the_rest_is_applied() {
    let (_d, cwd, s) = shell(overlay());
    let r = sh(&s, "mkdir -p sub/.git/hooks && echo evil > sub/.git/hooks/post-checkout && echo ok > sub/file").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let c = changes(&r);
    assert_eq!(c.refused.len(), 1, "{c:?}");
    assert_eq!((c.refused[0].path.as_str(), c.refused[0].reason.as_str()), ("sub/.git", "protected"));
    assert_eq!(c.added, vec!["sub/file"]);
    assert!(!cwd.join("sub/.git").exists());
    assert_eq!(read(&cwd, "sub/file"), "ok\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_file_the_host_changed_while_the_command_ran_is_refused_and_kept() {
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "a.txt", "start\n");
    write(&cwd, "b.txt", "start\n");
    let run = sh(&s, "sleep 1 && echo command > a.txt && echo command > b.txt");
    let host = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        write(&cwd, "a.txt", "host\n");
    };
    let (r, ()) = tokio::join!(run, host);
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let c = changes(&r);
    assert_eq!(c.refused.len(), 1, "{c:?}");
    assert_eq!((c.refused[0].path.as_str(), c.refused[0].reason.as_str()), ("a.txt", "changed on the host"));
    assert_eq!(c.modified, vec!["b.txt"]);
    assert_eq!(read(&cwd, "a.txt"), "host\n");
    assert_eq!(read(&cwd, "b.txt"), "command\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_file_owned_by_the_host_user_is_changed_through_the_overlay_and_keeps_its_owner() {
    // As root the file is root's: the layers are idmapped, so the command's root copies it up.
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "owned.txt", "mine\n");
    std::fs::set_permissions(cwd.join("owned.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let owner = std::fs::metadata(cwd.join("owned.txt")).unwrap().uid();
    let r = sh(&s, "echo changed >> owned.txt && chmod 600 owned.txt").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(changes(&r).modified, vec!["owned.txt"]);
    let m = std::fs::metadata(cwd.join("owned.txt")).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (owner, 0o600));
    assert_eq!(read(&cwd, "owned.txt"), "mine\nchanged\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_shell_tools_note_ends_with_the_changes_line() {
    let (_d, cwd, s) = shell(overlay());
    write(&cwd, "a.ts", "a\n");
    let r = sh(&s, "echo b > a.ts && echo c > c.ts && mkdir -p lib/.git").await;
    let line = changes(&r).note().unwrap();
    assert_eq!(line, "Changes: M a.ts, A c.ts; refused: lib/.git (protected)");
    let json = crate::shell::tool::result_json(&r, 1000, 10_000);
    assert!(json["note"].as_str().unwrap().ends_with(&line), "{json}");
    assert_eq!(json["stdout"], "");
}

/// Set in the child `construction_is_refused_where_overlay_mounts_fail` starts.
const NO_OVERLAY: &str = "CORRAL_TEST_NO_OVERLAY";

#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn construction_is_refused_where_overlay_mounts_fail() {
    if std::env::var_os(NO_OVERLAY).is_some() {
        // The child: its every mount with exactly `nosuid,nodev` (the overlay's) fails.
        let e = LinuxSandbox::new(overlay()).expect_err("an overlay sandbox was made where no overlay mounts");
        assert_eq!(e.code, Code::Configuration, "{e:?}");
        assert!(e.message.contains("changes: 'overlay' needs overlayfs in a user namespace"), "{e:?}");
        // Direct mode does not need it.
        LinuxSandbox::new(LinuxSandboxOptions::default()).expect("a direct sandbox");
        return;
    }
    LinuxSandbox::new(overlay()).expect("overlays work on this machine");
    let flags: u64 = libc::MS_NOSUID | libc::MS_NODEV;
    let cond = seccompiler::SeccompCondition::new(
        3,
        seccompiler::SeccompCmpArgLen::Qword,
        seccompiler::SeccompCmpOp::Eq,
        flags,
    )
    .unwrap();
    let rules: std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        [(libc::SYS_mount, vec![seccompiler::SeccompRule::new(vec![cond]).unwrap()])].into_iter().collect();
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        seccomp::arch().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    let test = "sandbox::linux::overlay_tests::construction_is_refused_where_overlay_mounts_fail";
    let (passed, out) = super::attacks::in_child(test, NO_OVERLAY, Some(prog));
    assert!(passed, "{out}");
}

/// Every entry below `dir`: its kind, permission bits and content (a link's target).
/// Every path below a directory: its kind, permission bits and content (a link's target).
type Snapshot = std::collections::BTreeMap<PathBuf, (char, u32, Vec<u8>)>;

fn snapshot(dir: &Path) -> Snapshot {
    let mut out = std::collections::BTreeMap::new();
    for p in walkdir(dir) {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(dir).unwrap().to_path_buf();
        let entry = if m.file_type().is_symlink() {
            ('l', 0, std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes())
        } else if m.is_dir() {
            ('d', m.mode() & 0o7777, Vec::new())
        } else {
            ('f', m.mode() & 0o777, std::fs::read(&p).unwrap())
        };
        out.insert(rel, entry);
    }
    out
}

type Ck = Arc<crate::checkpoints::Checkpoints>;
type Fs = Arc<dyn crate::fs::FsProvider>;

fn workspace(dir: &Path) -> Fs {
    Arc::new(crate::fs::local::LocalFs::new(dir.to_str().unwrap()).unwrap())
}

fn with_checkpoints(options: LinuxSandboxOptions) -> (tempfile::TempDir, PathBuf, SandboxShell, Ck, Fs) {
    let (d, cwd, s) = shell(options);
    let checkpoints = Arc::new(crate::checkpoints::Checkpoints::in_memory());
    let fs = workspace(&cwd);
    let s = s.with_checkpoints(checkpoints.clone(), fs.clone()).unwrap();
    (d, cwd, s, checkpoints, fs)
}

async fn in_turn(s: &SandboxShell, turn: u32, cmd: &str) -> ExecResult {
    let o =
        ExecOptions { timeout_ms: Some(30_000), session_id: Some("s1".into()), turn: Some(turn), ..Default::default() };
    let r = s.exec(cmd, o).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    r
}

/// Rewinding session `s1` to turn 1 skips nothing and gives back the tree `before` showed.
async fn assert_rewinds_to(checkpoints: &Ck, fs: &Fs, cwd: &Path, before: &Snapshot) {
    let report = checkpoints.rewind(fs.as_ref(), "s1", 1, false, false).await.unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(&snapshot(cwd), before, "{report:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_rewind_after_a_turn_of_commands_gives_back_the_tree_as_it_was() {
    let (_d, cwd, s, checkpoints, fs) = with_checkpoints(overlay());
    write(&cwd, "a.txt", "one\n");
    write(&cwd, "b.txt", "bee\n");
    write(&cwd, "c.txt", "sea\n");
    write(&cwd, "run.sh", "echo run\n");
    write(&cwd, "dir1/x", "x\n");
    write(&cwd, "dir1/deep/y", "y\n");
    write(&cwd, "swap", "a file\n");
    std::os::unix::fs::symlink("b.txt", cwd.join("old-link")).unwrap();
    std::fs::create_dir(cwd.join("empty-before")).unwrap();
    write(&cwd, "modes/kept", "k\n");
    write(&cwd, "locked/inside", "i\n");
    write(&cwd, "shared/s", "s\n");
    std::fs::set_permissions(cwd.join("shared"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let before = snapshot(&cwd);
    let one = in_turn(
        &s,
        1,
        "echo two >> a.txt && rm b.txt && mv c.txt c2.txt && chmod +x run.sh && rm -rf dir1 \
                    && mkdir -p made/deeper && echo f > made/deeper/f && ln -s a.txt new-link \
                    && rm old-link && echo now a file > old-link && rm swap && mkdir swap && echo in > swap/in \
                    && rmdir empty-before && mkdir empty-after && chmod 700 modes \
                    && echo more >> locked/inside && chmod 500 locked \
                    && chmod 755 shared",
    )
    .await;
    assert_eq!(std::fs::metadata(cwd.join("locked")).unwrap().mode() & 0o777, 0o500, "{one:?}");
    in_turn(&s, 2, "echo three >> a.txt && rm -rf swap && ln -s nowhere swap").await;
    assert_ne!(snapshot(&cwd), before);
    assert_rewinds_to(&checkpoints, &fs, &cwd, &before).await;
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn directories_a_command_closed_after_writing_into_them_are_applied_and_rewound() {
    // As an unprivileged user, this process could neither read nor move the layer's closed
    // directories, nor write into the host's `ro` (closed before and after the command): they are
    // opened for the change and the rewind, and closed again.
    let (_d, cwd, s, checkpoints, fs) = with_checkpoints(overlay());
    write(&cwd, "ro/a", "a\n");
    write(&cwd, "ro/c", "c\n");
    std::fs::set_permissions(cwd.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = snapshot(&cwd);
    let r = in_turn(
        &s,
        1,
        "mkdir out && echo x > out/f && chmod 555 out && mkdir -p wo/sub && echo y > wo/sub/g && chmod 300 wo \
         && echo new > ro/a && chmod u+w ro && echo b > ro/b && rm ro/c && chmod 555 ro",
    )
    .await;
    let c = changes(&r);
    assert!(c.refused.is_empty() && c.not_undoable.is_empty(), "{c:?}");
    assert_eq!(c.added, vec!["out/f", "ro/b", "wo/sub/g"]);
    assert_eq!((c.modified.clone(), c.deleted.clone()), (vec!["ro/a".to_string()], vec!["ro/c".to_string()]));
    let mode = |rel: &str| std::fs::metadata(cwd.join(rel)).unwrap().mode() & 0o7777;
    assert_eq!((mode("out"), mode("wo"), mode("ro")), (0o555, 0o300, 0o555));
    assert_eq!(
        (read(&cwd, "out/f"), read(&cwd, "wo/sub/g"), read(&cwd, "ro/a")),
        ("x\n".into(), "y\n".into(), "new\n".into())
    );
    assert_rewinds_to(&checkpoints, &fs, &cwd, &before).await;
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_file_a_command_replaced_by_a_closed_directory_comes_back_with_its_own_mode() {
    // The directory is opened for the rewind (as an unprivileged user); its mode must not be set
    // back on the file that takes its place.
    let (_d, cwd, s, checkpoints, fs) = with_checkpoints(overlay());
    write(&cwd, "x", "file\n");
    let before = snapshot(&cwd);
    in_turn(&s, 1, "rm x && mkdir x && chmod 500 x").await;
    assert_eq!(std::fs::metadata(cwd.join("x")).unwrap().mode() & 0o7777, 0o500);
    assert_rewinds_to(&checkpoints, &fs, &cwd, &before).await;
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_direct_exec_records_under_the_default_session_and_turn_zero() {
    let (_d, cwd, s, checkpoints, fs) = with_checkpoints(overlay());
    write(&cwd, "a.txt", "one\n");
    let r = sh(&s, "echo two > a.txt && echo new > n.txt").await;
    assert_eq!(changes(&r).modified, vec!["a.txt"]);
    let turns = checkpoints.list("default").await.unwrap();
    assert_eq!(turns.len(), 1);
    assert_eq!((turns[0].turn, turns[0].paths.clone()), (0, vec!["a.txt".to_string(), "n.txt".to_string()]));
    let report = checkpoints.rewind(fs.as_ref(), "default", 0, false, false).await.unwrap();
    assert_eq!((report.restored, report.deleted), (vec!["a.txt".to_string()], vec!["n.txt".to_string()]));
    assert_eq!(read(&cwd, "a.txt"), "one\n");
    assert!(!cwd.join("n.txt").exists());
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_change_past_max_turn_bytes_applies_and_is_named_as_not_undoable() {
    let (_d, cwd, s) = shell(overlay());
    let opts = crate::checkpoints::CheckpointOptions { max_turn_bytes: 10, ..Default::default() };
    let checkpoints = Arc::new(
        crate::checkpoints::Checkpoints::new(Arc::new(crate::checkpoints::MemoryCheckpointStore::new()), opts).unwrap(),
    );
    let fs = workspace(&cwd);
    let s = s.with_checkpoints(checkpoints.clone(), fs.clone()).unwrap();
    write(&cwd, "small.txt", "tiny\n");
    write(&cwd, "big.txt", "more than ten bytes\n");
    let r = in_turn(&s, 1, "echo x > small.txt && echo y > big.txt").await;
    let c = changes(&r);
    assert_eq!(c.modified, vec!["big.txt", "small.txt"]);
    assert_eq!(c.not_undoable, vec!["big.txt"]);
    assert!(c.note().unwrap().contains("cannot be undone (too large): big.txt"), "{c:?}");
    assert_eq!(read(&cwd, "big.txt"), "y\n");
    let report = checkpoints.rewind(fs.as_ref(), "s1", 1, false, false).await.unwrap();
    assert_eq!(report.restored, vec!["small.txt"]);
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].reason, crate::checkpoints::SkipReason::TooLarge);
}

#[test]
fn checkpoints_need_an_overlay_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let noop = SandboxShell::new(Arc::new(crate::sandbox::NoopSandbox), &cwd, Default::default(), Default::default());
    let ck = Arc::new(crate::checkpoints::Checkpoints::in_memory());
    let e = noop.unwrap().with_checkpoints(ck, workspace(&cwd)).err().unwrap();
    assert_eq!(e.code, Code::Configuration);
    assert!(e.message.contains("changes: 'overlay'"), "{e:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn checkpoints_over_another_directory_than_the_shells_cwd_are_refused() {
    let (_d, cwd, s) = shell(overlay());
    std::fs::create_dir(cwd.join("sub")).unwrap();
    let ck = Arc::new(crate::checkpoints::Checkpoints::in_memory());
    let e = s.with_checkpoints(ck, workspace(&cwd.join("sub"))).err().unwrap();
    assert_eq!(e.code, Code::Configuration);
    assert!(e.message.contains("whose root is the shell's cwd"), "{e:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn layers_live_in_changes_dir_while_a_command_runs_and_never_inside_cwd() {
    let (_d, cwd, s) = shell(overlay());
    let e = SandboxShell::new(s.adapter().clone(), &cwd, Default::default(), Default::default())
        .unwrap()
        .with_changes_dir(&cwd.join(".")) // the cwd itself
        .err()
        .unwrap();
    assert_eq!(e.code, Code::Configuration, "{e:?}");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let s = s.with_changes_dir(dir.path()).unwrap();
    let run = sh(&s, "echo x > made.txt && sleep 1");
    let look = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        walkdir(dir.path()).iter().any(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("layer-")))
    };
    let (r, seen) = tokio::join!(run, look);
    assert!(seen, "no layer in changesDir while the command ran");
    assert_eq!(changes(&r).added, vec!["made.txt"]);
    assert_empty_layers(dir.path());
}

/// The layer directories in `changes`.
fn layer_dirs(changes: &Path) -> Vec<PathBuf> {
    walkdir(changes)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("layer-")))
        .collect()
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_layer_left_empty_serves_the_next_command_which_sees_nothing_of_the_one_before() {
    let (_d, cwd, s) = shell(overlay());
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let s = s.with_changes_dir(dir.path()).unwrap();
    assert_eq!(changes(&sh(&s, "true").await), &Changes::default());
    let kept = layer_dirs(dir.path());
    assert_eq!(kept.len(), 1, "{kept:?}");
    // A file made and removed again, and one applied: the layer is empty after each.
    assert_eq!(changes(&sh(&s, "echo x > gone.txt && rm gone.txt").await), &Changes::default());
    assert_eq!(changes(&sh(&s, "echo y > b.txt").await).added, vec!["b.txt"]);
    assert_eq!(layer_dirs(dir.path()), kept, "the layer was not reused");
    let r = sh(&s, "ls -A").await;
    assert_eq!(r.stdout, "b.txt\n", "{r:?}");
    // Each command is stamped anew: what the host changed between two commands is no conflict.
    write(&cwd, "c.txt", "host\n");
    let r = sh(&s, "echo more >> c.txt").await;
    assert_eq!(changes(&r).modified, vec!["c.txt"], "{r:?}");
    assert_eq!(read(&cwd, "c.txt"), "host\nmore\n");
    // A command that leaves something in it (a refused `.git`) gets a layer of its own after.
    let r = sh(&s, "mkdir .git").await;
    assert_eq!(changes(&r).refused.len(), 1, "{r:?}");
    assert!(!layer_dirs(dir.path()).contains(&kept[0]), "a layer with something in it was kept");
    // So does one that marked the working directory with an extended attribute.
    sh(&s, "true").await;
    let kept = layer_dirs(dir.path());
    let mark = "/usr/bin/python3 -c \"import os; os.setxattr('.', 'user.corral-test', b'1')\"";
    let r = sh(&s, mark).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(!layer_dirs(dir.path()).contains(&kept[0]), "a layer whose top has an attribute was kept");
    let r = sh(&s, "/usr/bin/python3 -c \"import os; print(os.listxattr('.'))\"").await;
    assert_eq!(r.stdout, "[]\n", "{r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_layer_tampered_with_while_it_waits_or_left_by_a_stopped_command_is_never_reused() {
    let (_d, cwd, s) = shell(overlay());
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let s = s.with_changes_dir(dir.path()).unwrap();
    // What a command of another sandbox given the temp directory could do to a waiting layer:
    // plant a file in it, or make its upper directory a link to a directory of the user's.
    let victim = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(victim.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    for tamper in ["plant", "link"] {
        sh(&s, "true").await;
        let kept = layer_dirs(dir.path());
        assert_eq!(kept.len(), 1, "{kept:?}");
        let upper = kept[0].join("upper");
        match tamper {
            "plant" => std::fs::write(upper.join("planted.txt"), "planted\n").unwrap(),
            _ => {
                std::fs::remove_dir(&upper).unwrap();
                std::os::unix::fs::symlink(victim.path(), &upper).unwrap();
            }
        }
        let r = sh(&s, "ls -A").await;
        assert_eq!(r.stdout, "", "{tamper}: {r:?}");
        assert_eq!(changes(&r), &Changes::default(), "{tamper}");
        assert!(!cwd.join("planted.txt").exists(), "{tamper}");
        assert!(!layer_dirs(dir.path()).contains(&kept[0]), "{tamper}: the layer was used again");
    }
    let mode = std::fs::metadata(victim.path()).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o700, "a link in the layer was followed");
    // A command stopped by its timeout may leave a process that still writes: a layer of its own.
    sh(&s, "true").await;
    let kept = layer_dirs(dir.path());
    let r = s.exec("sleep 5", ExecOptions { timeout_ms: Some(300), ..Default::default() }).await.unwrap();
    assert!(r.timed_out, "{r:?}");
    assert!(
        layer_dirs(dir.path()).iter().all(|l| !kept.contains(l) || !l.exists()),
        "a stopped command's layer was kept"
    );
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn manual_mode_keeps_a_command_that_only_changed_a_directory_s_mode() {
    let (_dir, cwd, layers) = cwd_and_layers();
    std::fs::create_dir(cwd.join("d")).unwrap();
    std::fs::set_permissions(cwd.join("d"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = overlay_shell(&cwd, &layers, true);
    sh(&s, "chmod 700 d").await;
    assert_eq!(s.pending_changes().await.unwrap().as_array().unwrap().len(), 1);
    s.apply_changes(None).await.unwrap();
    assert_eq!(std::fs::metadata(cwd.join("d")).unwrap().permissions().mode() & 0o7777, 0o700);
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn manual_mode_lists_and_applies_a_directory_the_command_closed_with_its_mode() {
    // Listed first (the directory is opened and its mode journaled), applied later from the
    // journal: the mode that lands is the command's.
    let (_dir, cwd, layers) = cwd_and_layers();
    let s = overlay_shell(&cwd, &layers, true);
    sh(&s, "mkdir out && echo x > out/f && chmod 300 out").await;
    let listed = s.pending_changes().await.unwrap();
    assert_eq!(listed[0]["changes"][0]["path"], "out/f", "{listed}");
    assert_eq!(s.pending_changes().await.unwrap(), listed);
    let applied = s.apply_changes(None).await.unwrap();
    assert_eq!(applied[0]["changes"]["added"], serde_json::json!(["out/f"]), "{applied}");
    assert_eq!(applied[0]["changes"]["refused"], serde_json::json!([]), "{applied}");
    assert_eq!(std::fs::metadata(cwd.join("out")).unwrap().permissions().mode() & 0o7777, 0o300);
    assert_eq!(read(&cwd, "out/f"), "x\n");
}

/// A checkpoint store that refuses to save while `fail` is set.
#[derive(Default)]
struct FailingStore {
    fail: std::sync::atomic::AtomicBool,
    inner: crate::checkpoints::MemoryCheckpointStore,
}

#[async_trait::async_trait]
impl crate::checkpoints::CheckpointStore for FailingStore {
    async fn load(&self, session_id: &str) -> crate::error::Result<Option<serde_json::Value>> {
        self.inner.load(session_id).await
    }
    async fn save(&self, session_id: &str, data: serde_json::Value) -> crate::error::Result<()> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(crate::error::Error::new(crate::error::Code::Io, "the disk is full"));
        }
        self.inner.save(session_id, data).await
    }
    async fn delete(&self, session_id: &str) -> crate::error::Result<()> {
        self.inner.delete(session_id).await
    }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_pending_changeset_whose_checkpoint_cannot_be_saved_stays_pending_and_applies_later() {
    let store = Arc::new(FailingStore::default());
    let checkpoints = Arc::new(crate::checkpoints::Checkpoints::new(store.clone(), Default::default()).unwrap());
    let (_d, cwd, s) = shell(overlay());
    let s = s.with_checkpoints(checkpoints.clone(), workspace(&cwd)).unwrap().with_manual_changes().unwrap();
    sh(&s, "echo one > a.txt").await;
    sh(&s, "echo two > b.txt").await;
    store.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let tried = s.apply_changes(None).await.unwrap();
    assert_eq!(tried.as_array().unwrap().len(), 1, "{tried}");
    assert_eq!(tried[0]["changes"]["pending"], true, "{tried}");
    assert!(tried[0]["changes"]["refused"][0]["reason"].as_str().unwrap().contains("checkpoint"), "{tried}");
    assert!(!cwd.join("a.txt").exists() && !cwd.join("b.txt").exists());
    assert_eq!(s.pending_changes().await.unwrap().as_array().unwrap().len(), 2, "a set was dropped");
    store.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let applied = s.apply_changes(None).await.unwrap();
    assert_eq!(applied.as_array().unwrap().len(), 2, "{applied}");
    assert_eq!((read(&cwd, "a.txt"), read(&cwd, "b.txt")), ("one\n".into(), "two\n".into()));
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn manual_mode_stacks_three_commands_applies_one_discards_one_and_applies_the_rest() {
    let (_d, cwd, s, checkpoints, fs) = with_checkpoints(overlay());
    let s = s.with_manual_changes().unwrap();
    write(&cwd, "a.txt", "0\n");
    let before = snapshot(&cwd);
    let one = in_turn(&s, 1, "echo 1 > a.txt").await;
    assert!(changes(&one).pending, "{one:?}");
    assert_eq!(changes(&one).modified, vec!["a.txt"]);
    // Later commands see what is pending.
    let two = in_turn(&s, 1, "cat a.txt && echo 2 >> a.txt && echo b > b.txt").await;
    assert_eq!(two.stdout, "1\n");
    let three = in_turn(&s, 2, "rm b.txt && echo c > c.txt && cat a.txt").await;
    assert_eq!(three.stdout, "1\n2\n");
    assert_eq!(changes(&three).deleted, vec!["b.txt"]);
    assert_eq!(snapshot(&cwd), before, "a pending change reached the host");
    let listed = s.pending_changes().await.unwrap();
    let ids: Vec<&str> = listed.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(listed[1]["command"], "cat a.txt && echo 2 >> a.txt && echo b > b.txt");
    assert_eq!(
        listed[1]["changes"],
        serde_json::json!([{ "path": "a.txt", "kind": "modified" }, { "path": "b.txt", "kind": "added" }])
    );
    let diff = listed[1]["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- a/a.txt\n+++ b/a.txt\n") && diff.contains(" 1\n+2\n") && diff.contains("+++ b/b.txt\n"),
        "{diff}"
    );
    let (c1, c3) = (ids[0].to_string(), ids[2].to_string());
    let applied = s.apply_changes(Some(&c1)).await.unwrap();
    assert_eq!(applied[0]["changes"]["modified"], serde_json::json!(["a.txt"]));
    assert_eq!(read(&cwd, "a.txt"), "1\n");
    assert_eq!(s.discard_changes(Some(&c3)).await.unwrap(), serde_json::json!([c3]));
    let rest = s.apply_changes(None).await.unwrap();
    assert_eq!(rest.as_array().unwrap().len(), 1);
    assert_eq!(read(&cwd, "a.txt"), "1\n2\n");
    assert_eq!(read(&cwd, "b.txt"), "b\n");
    assert!(!cwd.join("c.txt").exists());
    assert_eq!(s.pending_changes().await.unwrap(), serde_json::json!([]));
    // What was applied was recorded under the turns of the commands that made it.
    let report = checkpoints.rewind(fs.as_ref(), "s1", 1, false, false).await.unwrap();
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(snapshot(&cwd), before);
    let e = s.apply_changes(Some("c99")).await.err().unwrap();
    assert_eq!(e.code, Code::NotFound);
}

// ---------------------------------------------------------------------------------------------
// Attacks on the apply step

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_that_moves_a_parent_of_cwd_and_links_another_in_its_place_applies_nothing() {
    // `writable` is cwd's grandparent: the command renames cwd's parent (allowed: only a mount
    // point itself cannot be renamed) and puts a link chain where it was, leading to a directory
    // it cannot write; a change applied through the path would land there.
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let (w, target) = (base_path.join("w"), base_path.join("target"));
    std::fs::create_dir_all(w.join("app/repo")).unwrap();
    std::fs::create_dir(&target).unwrap();
    let options =
        LinuxSandboxOptions { overlay: true, writable: vec![w.to_str().unwrap().into()], ..Default::default() };
    let sb = Arc::new(LinuxSandbox::new(options).unwrap());
    let cwd = w.join("app/repo");
    let s = SandboxShell::new(sb, &cwd, Default::default(), Default::default()).unwrap();
    let attack = format!(
        "echo evil > passwd && mv {w}/app {w}/x && mkdir -p {w}/y && ln -s {t} {w}/y/repo && ln -s {w}/y {w}/app",
        w = w.display(),
        t = target.display()
    );
    let r = sh(&s, &attack).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(!target.join("passwd").exists(), "the change was applied through the planted links");
    let c = changes(&r);
    assert!(c.added.is_empty(), "{c:?}");
    assert!(c.refused.iter().any(|x| x.reason.contains("moved or replaced")), "{c:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_git_directory_in_another_case_is_refused_too() {
    let (_d, cwd, s) = shell(overlay());
    std::fs::create_dir(cwd.join(".git")).unwrap();
    let r = sh(&s, "mkdir -p .GIT/hooks && echo evil > .GIT/hooks/pre-commit && mkdir -p sub/.Git && echo x > sub/.Git/config && echo ok > ok").await;
    let c = changes(&r);
    let refused: Vec<&str> = c.refused.iter().map(|x| x.path.as_str()).collect();
    assert_eq!(refused, vec![".GIT", "sub/.Git"], "{c:?}");
    assert!(!cwd.join(".GIT").exists() && !cwd.join("sub/.Git").exists());
    assert_eq!(c.added, vec!["ok"]);
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn layers_in_a_path_the_command_can_write_are_refused() {
    let base = tempfile::tempdir_in("/var/tmp").unwrap();
    let base_path = std::fs::canonicalize(base.path()).unwrap();
    let (cwd, shared) = (base_path.join("cwd"), base_path.join("shared"));
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&shared).unwrap();
    let options =
        LinuxSandboxOptions { overlay: true, writable: vec![shared.to_str().unwrap().into()], ..Default::default() };
    let s =
        SandboxShell::new(Arc::new(LinuxSandbox::new(options).unwrap()), &cwd, Default::default(), Default::default())
            .unwrap()
            .with_changes_dir(&shared)
            .unwrap();
    let e = s.exec("echo x > a", ExecOptions::default()).await.expect_err("a layer the command could write");
    assert_eq!(e.code, Code::Configuration, "{e:?}");
    assert!(!cwd.join("a").exists());
}

/// Set in the child `a_tree_nested_twenty_thousand_deep_is_applied_and_its_layer_removed` starts.
const DEEP: &str = "CORRAL_TEST_DEEP_TREE";

#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn a_tree_nested_twenty_thousand_deep_is_handled_and_its_layer_removed() {
    if std::env::var_os(DEEP).is_none() {
        // In a child process: a stack overflow there fails this test instead of the run.
        let test = "sandbox::linux::overlay_tests::a_tree_nested_twenty_thousand_deep_is_handled_and_its_layer_removed";
        let (passed, out) = super::attacks::in_child(test, DEEP, None);
        assert!(passed, "{out}");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let layers = tempfile::tempdir_in("/var/tmp").unwrap();
        let s = SandboxShell::new(
            Arc::new(LinuxSandbox::new(overlay()).unwrap()),
            dir.path(),
            Default::default(),
            Default::default(),
        )
        .unwrap()
        .with_changes_dir(layers.path())
        .unwrap();
        // As deep as the shell can go (its cwd's path grows past PATH_MAX well before 20,000).
        let r = sh(&s, "i=0; while [ $i -lt 20000 ]; do mkdir a && cd a || break; i=$((i+1)); done; echo $i").await;
        assert!(r.stdout.trim().parse::<usize>().unwrap() > overlay::capture::MAX_DEPTH, "{r:?}");
        let c = changes(&r);
        assert!(c.refused.iter().any(|x| x.reason.contains("more than 512 deep")), "{c:?}");
        assert!(c.added.is_empty());
        // Whatever was applied, nothing of the layer is left.
        let key = hex::encode(
            &<sha2::Sha256 as sha2::Digest>::digest(
                std::fs::canonicalize(dir.path()).unwrap().as_os_str().as_encoded_bytes(),
            )[..8],
        );
        let keyed = std::fs::canonicalize(layers.path()).unwrap().join(key);
        let left = std::fs::read_dir(&keyed).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "a layer was left in {}", keyed.display());
        let _ = std::process::Command::new("rm").arg("-rf").arg(dir.path()).status();
    });
}

// ---------------------------------------------------------------------------------------------
// A process that dies with changes pending or half applied

/// Set (to the working directory, then the changes directory) in the child processes below.
const CHILD_CWD: &str = "CORRAL_TEST_CHILD_CWD";
const CHILD_CHANGES: &str = "CORRAL_TEST_CHILD_CHANGES";

/// A shell over `cwd` with its layers in `layers`.
fn overlay_shell(cwd: &Path, layers: &Path, manual: bool) -> SandboxShell {
    let s =
        SandboxShell::new(Arc::new(LinuxSandbox::new(overlay()).unwrap()), cwd, Default::default(), Default::default())
            .unwrap()
            .with_changes_dir(layers)
            .unwrap();
    if manual {
        s.with_manual_changes().unwrap()
    } else {
        s
    }
}

/// In a child process: the shell over the directories its parent named.
fn child_shell(manual: bool) -> SandboxShell {
    let cwd = PathBuf::from(std::env::var_os(CHILD_CWD).unwrap());
    overlay_shell(&cwd, &PathBuf::from(std::env::var_os(CHILD_CHANGES).unwrap()), manual)
}

/// A working directory and a changes directory beside it.
fn cwd_and_layers() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let (cwd, layers) = (dir.path().join("cwd"), dir.path().join("layers"));
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&layers).unwrap();
    (dir, cwd, layers)
}

/// Starts this test binary's test `name` in a child process over `cwd`, layers in `changes`.
fn start_child(name: &str, cwd: &Path, changes: &Path) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([&format!("sandbox::linux::overlay_tests::{name}"), "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_CWD, cwd)
        .env(CHILD_CHANGES, changes)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn a_dead_process_s_pending_changeset_is_listed_as_interrupted_and_applies() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if std::env::var_os(CHILD_CWD).is_some() {
        // The child: keeps a changeset, and dies without dropping anything (the layer stays as
        // a crash leaves it).
        rt.block_on(async {
            let s = child_shell(true);
            let r = sh(&s, "echo kept > kept.txt").await;
            assert!(changes(&r).pending);
            std::process::exit(0);
        });
    }
    rt.block_on(dead_process_pending());
}

async fn dead_process_pending() {
    let (_dir, cwd, layers) = cwd_and_layers();
    let status = start_child("a_dead_process_s_pending_changeset_is_listed_as_interrupted_and_applies", &cwd, &layers)
        .wait()
        .unwrap();
    assert!(status.success());
    assert!(!cwd.join("kept.txt").exists());
    // A new shell, in either mode, lists it; even where its first look was given up part way
    // (that look holds the layer's lock while it runs: the next one takes its result).
    let s = overlay_shell(&cwd, &layers, false);
    {
        let first = s.pending_changes();
        let mut first = std::pin::pin!(first);
        let _ = futures::poll!(first.as_mut());
    }
    let listed = s.pending_changes().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["interrupted"], true);
    assert_eq!(listed[0]["command"], "echo kept > kept.txt");
    assert_eq!(listed[0]["changes"], serde_json::json!([{ "path": "kept.txt", "kind": "added" }]));
    s.apply_changes(None).await.unwrap();
    assert_eq!(read(&cwd, "kept.txt"), "kept\n");
    assert_eq!(s.pending_changes().await.unwrap(), serde_json::json!([]));
}

#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn a_dead_process_s_changeset_is_taken_by_one_shell_only() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if std::env::var_os(CHILD_CWD).is_some() {
        rt.block_on(async {
            let s = child_shell(true);
            let r = sh(&s, "echo once >> once.txt").await;
            assert!(changes(&r).pending);
            std::process::exit(0);
        });
    }
    rt.block_on(async {
        let (_dir, cwd, layers) = cwd_and_layers();
        let status =
            start_child("a_dead_process_s_changeset_is_taken_by_one_shell_only", &cwd, &layers).wait().unwrap();
        assert!(status.success());
        // Two shells over one directory (two processes would be the same): the first to look
        // takes it; the second, while the first holds it, must not (it would apply it again).
        let (a, b) = (overlay_shell(&cwd, &layers, false), overlay_shell(&cwd, &layers, false));
        assert_eq!(a.pending_changes().await.unwrap().as_array().unwrap().len(), 1);
        assert_eq!(b.pending_changes().await.unwrap(), serde_json::json!([]));
        a.apply_changes(None).await.unwrap();
        b.apply_changes(None).await.unwrap();
        assert_eq!(read(&cwd, "once.txt"), "once\n");
    });
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn an_apply_cancelled_part_way_leaves_the_changesets_it_had_not_applied_pending() {
    let (_dir, cwd, layers) = cwd_and_layers();
    let s = overlay_shell(&cwd, &layers, true);
    // The second also changes the first's file: what the cancelled apply put there is corral's
    // own change, no conflict with the host.
    for cmd in ["echo 1 > f1.txt", "echo 2 > f2.txt && echo again >> f1.txt", "echo 3 > f3.txt"] {
        assert!(changes(&sh(&s, cmd).await).pending);
    }
    // Polled once (it starts applying the first), then dropped: a caller that gave up.
    {
        let apply = s.apply_changes(None);
        let mut apply = std::pin::pin!(apply);
        let _ = futures::poll!(apply.as_mut());
    }
    // How far the one poll got depends on the machine; what holds is that each set is either on
    // the host or still pending, none dropped.
    let left = s.pending_changes().await.unwrap();
    let listed: Vec<&str> = left
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["changes"].as_array().unwrap())
        .filter_map(|c| c["path"].as_str())
        .collect();
    for n in 2..=3 {
        let f = format!("f{n}.txt");
        let on_host = std::fs::read_to_string(cwd.join(&f)).ok() == Some(format!("{n}\n"));
        assert!(on_host || listed.contains(&f.as_str()), "{f} was neither applied nor left pending: {left}");
    }
    let applied = s.apply_changes(None).await.unwrap();
    for set in applied.as_array().unwrap() {
        assert_eq!(set["changes"]["refused"], serde_json::json!([]), "{applied}");
    }
    assert_eq!(read(&cwd, "f1.txt"), "1\nagain\n");
    for n in 2..=3 {
        assert_eq!(read(&cwd, &format!("f{n}.txt")), format!("{n}\n"));
    }
    assert_eq!(s.pending_changes().await.unwrap(), serde_json::json!([]));
}

#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn a_process_killed_while_applying_leaves_each_file_old_or_new_and_the_next_shell_lists_the_rest() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if std::env::var_os(CHILD_CWD).is_some() {
        // The child: a command that rewrites every file, applied until it is killed.
        rt.block_on(async {
            let r = sh(&child_shell(false), "for f in f*; do echo new-content-of-$f > $f; done").await;
            assert_eq!(r.exit_code, Some(0));
        });
        return;
    }
    rt.block_on(killed_while_applying());
}

async fn killed_while_applying() {
    const FILES: usize = 4000;
    let mut interrupted = false;
    for _attempt in 0..3 {
        let (_dir, cwd, layers) = cwd_and_layers();
        for i in 0..FILES {
            std::fs::write(cwd.join(format!("f{i:05}")), format!("old-content-of-f{i:05}\n")).unwrap();
        }
        let mut child = start_child(
            "a_process_killed_while_applying_leaves_each_file_old_or_new_and_the_next_shell_lists_the_rest",
            &cwd,
            &layers,
        );
        // Killed (SIGKILL) as soon as it says it is applying.
        let applying = || {
            walkdir(&layers)
                .iter()
                .any(|p| p.ends_with("state.json") && std::fs::read_to_string(p).is_ok_and(|t| t.contains("applying")))
        };
        let started = std::time::Instant::now();
        while !applying() && started.elapsed() < Duration::from_secs(60) && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let mut new = 0;
        for i in 0..FILES {
            let name = format!("f{i:05}");
            let text = std::fs::read_to_string(cwd.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(
                text == format!("old-content-of-{name}\n") || text == format!("new-content-of-{name}\n"),
                "{name}: {text:?}"
            );
            new += usize::from(text.starts_with("new"));
        }
        let strays: Vec<String> = std::fs::read_dir(&cwd)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('f'))
            .collect();
        assert!(strays.is_empty(), "left in cwd: {strays:?}");
        if new == FILES {
            continue; // it finished before it was killed: try again
        }
        interrupted = true;
        // The next shell over the directory lists it (nothing is applied unasked); applying it
        // finishes what was left.
        let s = overlay_shell(&cwd, &layers, false);
        let listed = s.pending_changes().await.unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        assert_eq!(listed[0]["interrupted"], true);
        s.apply_changes(None).await.unwrap();
        for i in 0..FILES {
            let name = format!("f{i:05}");
            assert_eq!(read(&cwd, &name), format!("new-content-of-{name}\n"));
        }
        assert_eq!(s.pending_changes().await.unwrap(), serde_json::json!([]));
        break;
    }
    assert!(interrupted, "the apply finished before the kill three times: nothing was tested");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_planted_layer_that_is_a_link_or_not_private_is_never_adopted_and_nothing_is_applied_unasked() {
    let (_dir, cwd, layers) = cwd_and_layers();
    let keyed = overlay::layer::keyed_dir(&std::fs::canonicalize(&cwd).unwrap(), Some(&layers)).unwrap();
    // A link to a directory that looks like a layer, and a layer-shaped directory others may read.
    let elsewhere = layers.join("elsewhere");
    for d in [elsewhere.join("upper"), keyed.join("layer-open/upper")] {
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("planted.txt"), "planted\n").unwrap();
    }
    std::fs::write(elsewhere.join("owner.json"), r#"{"pid":0,"started":0,"mount":[0,0],"stamp":[0,0]}"#).unwrap();
    std::fs::copy(elsewhere.join("owner.json"), keyed.join("layer-open/owner.json")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, keyed.join("layer-link")).unwrap();
    std::fs::set_permissions(keyed.join("layer-open"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = overlay_shell(&cwd, &layers, false);
    assert_eq!(s.pending_changes().await.unwrap(), serde_json::json!([]));
    let r = sh(&s, "true").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(!cwd.join("planted.txt").exists());
    assert!(elsewhere.join("upper/planted.txt").exists(), "what the link led to was touched");
}
