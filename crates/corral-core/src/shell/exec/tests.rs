use super::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::shell::{Cancel, ExecOptions, ShellProvider};

fn root() -> (tempfile::TempDir, LocalShell) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    (dir, LocalShell::new(root, BTreeMap::new(), InheritEnv::None))
}

fn opts() -> ExecOptions {
    ExecOptions { timeout_ms: Some(20_000), ..Default::default() }
}

async fn run(shell: &LocalShell, cmd: &str) -> ExecResult {
    shell.exec(cmd, opts()).await.unwrap()
}

#[tokio::test]
async fn runs_in_the_root_with_sh() {
    let (_d, shell) = root();
    assert_eq!(shell.shell().as_deref(), Some("sh"));
    let r = run(&shell, "pwd; echo err >&2").await;
    assert_eq!(r.stdout.trim_end(), shell.root().to_str().unwrap());
    assert_eq!(r.stderr, "err\n");
    assert_eq!(r.exit_code, Some(0));
    assert!(!r.timed_out && !r.aborted && r.signal.is_none());
}

#[tokio::test]
async fn env_is_minimal() {
    std::env::set_var("CORRAL_TEST_SECRET_A", "s3cret");
    std::env::set_var("LC_CORRAL_TEST", "lc");
    let (_d, shell) = root();
    let r = run(&shell, "env").await;
    assert!(!r.stdout.contains("CORRAL_TEST_SECRET_A"), "{}", r.stdout);
    assert!(!r.stdout.contains("s3cret"));
    assert!(r.stdout.contains("LC_CORRAL_TEST=lc"));
    let path = std::env::var("PATH").unwrap();
    assert!(r.stdout.lines().any(|l| l == format!("PATH={path}")), "{}", r.stdout);
    let names: Vec<&str> = r.stdout.lines().filter_map(|l| l.split('=').next()).collect();
    for n in names {
        // sh itself may add PWD, SHLVL and `_`.
        assert!(is_base_name(n) || matches!(n, "PWD" | "OLDPWD" | "SHLVL" | "_"), "unexpected variable {n}");
    }
}

#[tokio::test]
async fn env_inherit_list_all_and_overrides() {
    std::env::set_var("CORRAL_TEST_SECRET_B", "b-value");
    std::env::set_var("CORRAL_TEST_OTHER_B", "other");
    let (d, _) = root();
    let r = std::fs::canonicalize(d.path()).unwrap();

    let listed = LocalShell::new(
        r.clone(),
        BTreeMap::new(),
        InheritEnv::List(vec!["CORRAL_TEST_SECRET_B".into(), "CORRAL_MISSING".into()]),
    );
    let out = run(&listed, "env").await.stdout;
    assert!(out.contains("CORRAL_TEST_SECRET_B=b-value"));
    assert!(!out.contains("CORRAL_TEST_OTHER_B"));
    assert!(!out.contains("CORRAL_MISSING"));

    let all = LocalShell::new(r.clone(), BTreeMap::new(), InheritEnv::All);
    let out = run(&all, "env").await.stdout;
    assert!(out.contains("CORRAL_TEST_SECRET_B=b-value") && out.contains("CORRAL_TEST_OTHER_B=other"));

    let env = BTreeMap::from([
        ("NODE_ENV".to_string(), "test".to_string()),
        ("CORRAL_TEST_SECRET_B".to_string(), "mine".to_string()),
    ]);
    let shell = LocalShell::new(r, env, InheritEnv::All);
    let mut o = opts();
    o.env.insert("NODE_ENV".into(), "call".into());
    o.env.insert("EXTRA".into(), "x".into());
    let out = shell.exec("env", o).await.unwrap().stdout;
    assert!(out.lines().any(|l| l == "NODE_ENV=call"));
    assert!(out.lines().any(|l| l == "CORRAL_TEST_SECRET_B=mine"));
    assert!(out.lines().any(|l| l == "EXTRA=x"));
    let base = base_env(&InheritEnv::None);
    assert!(base.contains_key("PATH") && !base.contains_key("CORRAL_TEST_SECRET_B"));
}

#[tokio::test]
async fn cwd_is_confined() {
    let (d, shell) = root();
    std::fs::create_dir_all(d.path().join("sub/deeper")).unwrap();
    std::fs::write(d.path().join("file.txt"), "x").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
    std::os::unix::fs::symlink(d.path().join("sub"), d.path().join("inlink")).unwrap();

    let mut o = opts();
    o.cwd = Some("sub/./deeper/..".into());
    let r = shell.exec("pwd", o).await.unwrap();
    assert_eq!(r.stdout.trim_end(), shell.root().join("sub").to_str().unwrap());
    let mut o = opts();
    o.cwd = Some("inlink".into());
    assert_eq!(shell.exec("pwd", o).await.unwrap().stdout.trim_end(), shell.root().join("sub").to_str().unwrap());

    for (cwd, code) in [
        ("..", Code::OutsideWorkspace),
        ("sub/../..", Code::OutsideWorkspace),
        ("/tmp", Code::OutsideWorkspace),
        ("out", Code::OutsideWorkspace),
        ("missing", Code::NotFound),
        ("file.txt", Code::InvalidArguments),
    ] {
        let mut o = opts();
        o.cwd = Some(cwd.into());
        let e = shell.exec("touch ran", o).await.unwrap_err();
        assert_eq!(e.code, code, "{cwd}: {}", e.message);
        assert!(!e.message.contains(outside.path().to_str().unwrap()));
    }
    assert!(!outside.path().join("ran").exists());
    assert!(!d.path().join("ran").exists());
}

#[tokio::test]
async fn exit_codes_and_signals() {
    let (_d, shell) = root();
    let r = run(&shell, "exit 3").await;
    assert_eq!((r.exit_code, r.signal), (Some(3), None));
    let r = run(&shell, "kill -TERM $$").await;
    assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("SIGTERM")));
    assert!(!r.timed_out && !r.aborted);
    let r = run(&shell, "nonexistent-command-xyz").await;
    assert_eq!(r.exit_code, Some(127));
}

#[tokio::test]
async fn output_is_utf8_with_replacement() {
    let (_d, shell) = root();
    let r = run(&shell, r"printf 'a\377b\n'; printf 'é' >&2").await;
    assert_eq!(r.stdout, "a\u{FFFD}b\n");
    assert_eq!(r.stderr, "é");
}

#[tokio::test]
async fn stdin_is_fed_or_closed() {
    let (_d, shell) = root();
    let mut o = opts();
    o.stdin = Some("hello\nworld".into());
    let r = shell.exec("cat; echo done", o).await.unwrap();
    assert_eq!(r.stdout, "hello\nworlddone\n");
    let start = Instant::now();
    let mut o = opts();
    o.timeout_ms = Some(5_000);
    let r = shell.exec("cat; read x; echo rc=$?", o).await.unwrap();
    assert!(!r.timed_out);
    assert_eq!(r.stdout, "rc=1\n");
    assert!(start.elapsed() < Duration::from_secs(3));
    // Much more input than a pipe buffer, to a command that never reads it.
    let mut o = opts();
    o.stdin = Some("x".repeat(1 << 20));
    let r = shell.exec("echo ignored", o).await.unwrap();
    assert_eq!(r.stdout, "ignored\n");
    let mut o = opts();
    o.stdin = Some("y".repeat(1 << 20));
    assert_eq!(shell.exec("wc -c", o).await.unwrap().stdout.trim(), (1 << 20).to_string());
}

const GRANDCHILD: &str = "sh -c 'sleep 1 && touch marker' & (sleep 1; touch marker2) & sleep 30";

async fn assert_no_markers(shell: &LocalShell) {
    // The grandchildren would have written after 1 s: wait well past that.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!shell.root().join("marker").exists(), "a grandchild survived");
    assert!(!shell.root().join("marker2").exists(), "a subshell survived");
}

#[tokio::test]
async fn timeout_kills_the_process_group() {
    let (_d, shell) = root();
    let start = Instant::now();
    let mut o = opts();
    o.timeout_ms = Some(300);
    let r = shell.exec(&format!("echo started; {GRANDCHILD}"), o).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(r.timed_out && !r.aborted);
    assert_eq!(r.exit_code, None);
    assert_eq!(r.signal.as_deref(), Some("SIGKILL"));
    assert_eq!(r.stdout, "started\n");
    assert_no_markers(&shell).await;
}

/// Processes that leave the group (`setsid`, a new process group) write a marker after 1 s.
#[cfg(target_os = "linux")]
const LEAVERS: &str =
    "setsid sh -c 'sleep 1; touch escaped1' & perl -e 'setpgrp(0,0); sleep 1; open(F, \">escaped2\")' & sleep 30";

#[cfg(target_os = "linux")]
#[tokio::test]
#[ignore = "needs a writable control group: scripts/test.sh runs it as root"]
async fn a_timeout_kills_processes_that_left_the_group_where_a_control_group_can_be_made() {
    assert!(crate::shell::exec::cgroup::Cgroup::create().is_some(), "no writable cgroup hierarchy on this machine");
    let (_d, shell) = root();
    let mut o = opts();
    o.timeout_ms = Some(300);
    let r = shell.exec(LEAVERS, o).await.unwrap();
    assert!(r.timed_out);
    assert!(r.every_process_killed, "the control group was emptied");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(!shell.root().join("escaped1").exists(), "a setsid process survived the timeout");
    assert!(!shell.root().join("escaped2").exists(), "a setpgrp process survived the timeout");
}

/// A host with cgroup v2 alone (most distributions now): `/sys/fs/cgroup` is the unified tree,
/// and there is no `pids` or `unified` below it. A command's group is made below this process's
/// own. The test runs itself again where it is so: in a
/// mount namespace of its own, the unified tree mounted over `/sys/fs/cgroup`.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs a writable control group: scripts/test.sh runs it as root"]
fn a_timeout_kills_processes_that_left_the_group_on_a_host_with_cgroup_v2_alone() {
    const INNER: &str = "CORRAL_CGROUP_V2_INNER";
    if std::env::var_os(INNER).is_some() {
        assert!(!std::path::Path::new("/sys/fs/cgroup/pids").exists(), "v1's pids hierarchy is still mounted");
        // Below this process's own group, as /proc/self/cgroup names it.
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let own = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap().trim().trim_end_matches('/').to_string();
        let group = crate::shell::exec::cgroup::Cgroup::create().expect("a group in the v2 tree");
        let at = group.procs_path().to_str().unwrap().to_string();
        assert!(at.starts_with(&format!("/sys/fs/cgroup{own}/corral-")), "{at} is not below {own}");
        drop(group);
        let (_d, shell) = root();
        let mut o = opts();
        o.timeout_ms = Some(300);
        let r = tokio::runtime::Runtime::new().unwrap().block_on(shell.exec(LEAVERS, o)).unwrap();
        assert!(r.timed_out && r.every_process_killed, "{r:?}");
        std::thread::sleep(Duration::from_millis(2000));
        assert!(!shell.root().join("escaped1").exists(), "a setsid process survived the timeout");
        assert!(!shell.root().join("escaped2").exists(), "a setpgrp process survived the timeout");
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting the cgroup tree needs root");
        return;
    }
    let name = "shell::exec::tests::a_timeout_kills_processes_that_left_the_group_on_a_host_with_cgroup_v2_alone";
    let out = std::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t cgroup2 none /sys/fs/cgroup && exec \"$0\" \"$@\"",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--ignored", "--test-threads=1"])
        .env(INNER, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}

#[cfg(target_os = "linux")]
#[tokio::test]
#[ignore = "needs a writable control group: scripts/test.sh runs it as root"]
async fn a_command_started_into_its_control_group_is_in_it_with_default_signals_its_input_and_streams() {
    assert!(crate::shell::exec::cgroup::Cgroup::create().is_some(), "no writable cgroup hierarchy on this machine");
    let (_d, shell) = root();
    let mine = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut o = opts();
    o.stdin = Some("fed\n".to_string());
    // SIGPIPE at its default (this process ignores it): `yes` ends quietly when `head` is done.
    let r = shell
        .exec("read line; echo \"$line\"; yes | head -n 1; echo err >&2; cat /proc/self/cgroup; exit 3", o)
        .await
        .unwrap();
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.stderr, "err\n");
    let mut lines = r.stdout.lines();
    assert_eq!((lines.next(), lines.next()), (Some("fed"), Some("y")));
    let groups: String = lines.map(|l| format!("{l}\n")).collect();
    assert_ne!(groups, mine, "the command is in a control group of its own");
    // A directory that is gone: the start fails, and says why.
    let gone = shell.root().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let mut o = opts();
    o.cwd = Some("gone".to_string());
    std::fs::remove_dir(&gone).unwrap();
    let e = shell.exec("true", o).await.expect_err("no directory to start in");
    assert!(
        e.message.contains("No such file or directory")
            || e.message.contains("not found")
            || e.message.contains("does not exist"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn cancel_kills_the_process_group() {
    let (_d, shell) = root();
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let mut o = opts();
    o.cancel = Some(cancel);
    let start = Instant::now();
    let r = shell.exec(GRANDCHILD, o).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(r.aborted && !r.timed_out);
    assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("SIGKILL")));
    assert_no_markers(&shell).await;
}

#[tokio::test]
async fn dropping_the_future_kills_the_process_group() {
    let (_d, shell) = root();
    let fut = shell.exec(GRANDCHILD, opts());
    assert!(tokio::time::timeout(Duration::from_millis(300), fut).await.is_err());
    assert_no_markers(&shell).await;
}

#[cfg(unix)]
#[tokio::test]
async fn a_command_whose_future_was_dropped_is_killed_and_reaped() {
    let (_d, shell) = root();
    let fut = shell.exec("echo $$ > first.pid; exec sleep 30", opts());
    assert!(tokio::time::timeout(Duration::from_millis(500), fut).await.is_err());
    let pid = std::fs::read_to_string(shell.root().join("first.pid")).unwrap();
    let proc_dir = std::path::PathBuf::from(format!("/proc/{}", pid.trim()));
    // Killed, then reaped: not even a zombie is left under this process.
    let start = Instant::now();
    while proc_dir.exists() && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
    assert!(!proc_dir.exists(), "the command's first process is still there: {state}");
}

#[tokio::test]
async fn an_already_cancelled_token_starts_nothing() {
    let (_d, shell) = root();
    let cancel = Cancel::new();
    cancel.cancel();
    let mut o = opts();
    o.cancel = Some(cancel);
    let r = shell.exec("touch marker", o).await.unwrap();
    assert!(r.aborted && !r.timed_out);
    assert_eq!(r.exit_code, None);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!shell.root().join("marker").exists());
}

#[tokio::test]
async fn the_drain_after_a_kill_is_bounded() {
    let (_d, shell) = root();
    let start = Instant::now();
    let mut o = opts();
    o.timeout_ms = Some(300);
    // setsid takes the sleep out of the group; it keeps stdout open.
    let r = shell.exec("echo a; setsid sleep 8 & sleep 30", o).await.unwrap();
    assert!(r.timed_out);
    assert_eq!(r.stdout, "a\n");
    assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
}

#[tokio::test]
async fn a_background_process_holding_the_pipes_is_waited_for_until_the_timeout() {
    let (_d, shell) = root();
    let mut o = opts();
    o.timeout_ms = Some(500);
    let r = shell.exec("echo a; sleep 30 &", o).await.unwrap();
    assert!(r.timed_out);
    assert_eq!((r.exit_code, r.signal), (Some(0), None));
    let r = run(&shell, "sleep 3 >/dev/null 2>&1 & echo b").await;
    assert!(!r.timed_out);
    assert_eq!(r.stdout, "b\n");
}

#[test]
fn capture_keeps_the_start_and_the_end() {
    let mut c = Capture::new(8);
    c.push(b"0123");
    c.push(b"456789");
    c.push(b"ab");
    assert_eq!(c.text(), "0123\n... [4 bytes omitted: the output exceeded 0 MiB] ...\n89ab");
    let mut c = Capture::new(8);
    c.push(b"01234567");
    assert_eq!(c.text(), "01234567");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts and kills an owner process: scripts/test.sh runs it, as root and as an unprivileged user"]
async fn every_command_ends_with_its_owner_however_the_owner_ends() {
    use crate::shell::exec::guard::owner_tests::*;
    if std::env::var_os(OWNER).is_some() {
        let (dir, shell) = root();
        std::mem::forget(dir);
        own_commands_then_end(std::sync::Arc::new(shell)).await;
    }
    // Where a control group can be made, every process goes, `setsid` or not; elsewhere the
    // command's process group (the `setsid` ones may stay: the README says so).
    let cgroup = crate::shell::exec::cgroup::Cgroup::create().is_some();
    for how in ["exit", "kill"] {
        let left = survivors("shell::exec::tests::every_command_ends_with_its_owner_however_the_owner_ends", how, &[]);
        if cgroup {
            assert!(left.is_empty(), "after the owner's {how}: {left:?}");
        } else {
            let in_group: Vec<&String> =
                left.iter().filter(|l| l.contains("sleep 8") || l.contains("sleep 6")).collect();
            assert!(in_group.is_empty(), "after the owner's {how}, processes of the command's group: {in_group:?}");
        }
    }
}

#[cfg(unix)]
#[tokio::test]
async fn the_shell_is_the_sh_the_command_s_own_path_finds() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, _) = root();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("sh");
    std::fs::write(&fake, "#!/bin/sh\necho \"the sh in bin: $*\"\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut env = BTreeMap::new();
    env.insert("PATH".to_string(), format!("{}:/usr/bin:/bin", bin.display()));
    let r = run_shell_command("echo real", dir.path(), &env, None, Some(30_000), None, None, None).await.unwrap();
    assert_eq!(r.stdout, "the sh in bin: -c echo real\n");
    // A PATH without an sh, or none at all: /bin/sh.
    env.insert("PATH".to_string(), dir.path().join("nothing-here").display().to_string());
    let r = run_shell_command("echo real", dir.path(), &env, None, Some(30_000), None, None, None).await.unwrap();
    assert_eq!(r.stdout, "real\n");
    let r = run_shell_command("echo real", dir.path(), &BTreeMap::new(), None, Some(30_000), None, None, None)
        .await
        .unwrap();
    assert_eq!(r.stdout, "real\n");
}
