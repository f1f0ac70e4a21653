//! The keeper: where commands come from, and that they end with it. The tests that start
//! commands need namespaces: `#[ignore]`d, and run by scripts/test.sh (as root and as an
//! unprivileged user).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::*;
use crate::sandbox::linux::{LinuxSandbox, LinuxSandboxOptions};
use crate::sandbox::SandboxRequest;

/// A keeper's plan for `command` in a fresh directory, and what it needs sent with it.
fn plan_for(sb: &LinuxSandbox, dir: &std::path::Path) -> (Plan, Option<OwnedFd>, Vec<OwnedFd>) {
    let req = SandboxRequest {
        command: String::new(),
        cwd: dir.to_str().unwrap().to_string(),
        env: BTreeMap::new(),
        timeout_ms: 0,
        stdin: None,
        mount: None,
        on_output: None,
        capture_bytes: None,
        input: None,
    };
    let (plan, trees, _) = sb.plan(&req, None, None).unwrap();
    let userns = sb.userns_for(&trees).unwrap();
    (plan, userns, trees)
}

fn request(argv: &[&str]) -> LaunchRequest {
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    LaunchRequest { argv: argv.iter().map(|s| s.to_string()).collect(), env, stdin: false, cgroups: Vec::new() }
}

fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie no longer runs (whoever adopted it reaps it).
        Ok(stat) => stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fixture() -> (tempfile::TempDir, LinuxSandbox, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::set_permissions(&cwd, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    (dir, LinuxSandbox::new(LinuxSandboxOptions::default()).unwrap(), cwd)
}

#[test]
fn the_keeper_runs_from_a_sealed_memory_file_with_no_environment() {
    let k = Keeper::start(false).unwrap();
    let exe = std::fs::read_link(format!("/proc/{}/exe", k.pid())).unwrap();
    assert!(exe.to_string_lossy().starts_with("/memfd:corral-keeper"), "{exe:?}");
    let environ = std::fs::read(format!("/proc/{}/environ", k.pid())).unwrap();
    assert!(environ.is_empty(), "the keeper has an environment: {:?}", String::from_utf8_lossy(&environ));
    k.close();
    wait_until("the keeper ended when its socket closed", || !running(k.pid() as u32));
}

#[test]
fn the_keeper_runs_from_a_private_copy_removed_once_it_started() {
    let k = Keeper::start(true).unwrap();
    let exe = std::fs::read_link(format!("/proc/{}/exe", k.pid())).unwrap();
    let shown = exe.to_string_lossy().into_owned();
    assert!(shown.ends_with(" (deleted)") && shown.contains("corral-keeper-"), "{shown}");
    let dir = std::path::Path::new(shown.trim_end_matches(" (deleted)")).parent().unwrap().to_path_buf();
    assert!(!dir.exists(), "the private copy's directory is left: {dir:?}");
    k.close();
}

/// `vm.memfd_noexec = 2` (per pid namespace, so the test sets it in one of its own): the keeper
/// starts from the private copy instead. The test runs itself again in that namespace.
#[test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
fn where_memory_files_may_not_be_executed_the_keeper_starts_from_a_private_copy() {
    const INNER: &str = "CORRAL_NOEXEC_INNER";
    if std::env::var_os(INNER).is_some() {
        std::fs::write("/proc/sys/vm/memfd_noexec", "2").unwrap();
        let k = Keeper::start(false).unwrap();
        let exe = std::fs::read_link(format!("/proc/{}/exe", k.pid())).unwrap();
        assert!(exe.to_string_lossy().contains("corral-keeper-"), "{exe:?}");
        k.close();
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: setting vm.memfd_noexec in a pid namespace needs root");
        return;
    }
    let name = "sandbox::session::tests::where_memory_files_may_not_be_executed_the_keeper_starts_from_a_private_copy";
    let out = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--ignored", "--test-threads=1"])
        .env(INNER, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_is_the_keepers_child_and_ends_with_the_keeper_when_it_closes() {
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(request(&["sleep", "60"]), plan, userns, trees).await.unwrap();
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", k.pid())).unwrap();
    assert_eq!(children.split_whitespace().collect::<Vec<_>>(), vec![l.pid.to_string()]);
    k.close();
    assert!(tokio::time::timeout(Duration::from_secs(10), l.exit).await.is_ok(), "no word of the end");
    wait_until("the command ended with the keeper", || !running(l.pid));
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_killed_keeper_takes_its_commands_with_it() {
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(request(&["sleep", "60"]), plan, userns, trees).await.unwrap();
    unsafe { libc::kill(k.pid(), libc::SIGKILL) };
    let exit = tokio::time::timeout(Duration::from_secs(10), l.exit).await.expect("no word of the end");
    assert!(exit.is_err(), "a command of a dead keeper reported {exit:?}");
    wait_until("the command ended with the keeper", || !running(l.pid));
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let e = k.spawn(request(&["true"]), plan, userns, trees).await.err().expect("a dead keeper started a command");
    assert!(e.to_string().contains("keeper process ended"), "{e}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_missing_program_fails_to_start_with_its_errno_and_the_exit_status_comes_back() {
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let e = k.spawn(request(&["corral-no-such-program"]), plan, userns, trees).await.err().unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(request(&["sh", "-c", "exit 7"]), plan, userns, trees).await.unwrap();
    let status = l.exit.await.unwrap();
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7, "{status}");
    k.close();
}

#[test]
fn a_malformed_frame_ends_the_keeper_and_later_spawns_say_so() {
    let k = Keeper::start(false).unwrap();
    k.inner.send(&[99, 1, 2, 3], &[]).unwrap();
    wait_until("the keeper ended on a malformed frame", || !k.inner.alive.load(Ordering::SeqCst));
    assert!(!running(k.pid() as u32));
}
