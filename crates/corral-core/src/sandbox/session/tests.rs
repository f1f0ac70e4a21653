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

// ---- a session's network ----------------------------------------------------------------------

use crate::sandbox::SandboxAdapter;
use crate::shell::ExecResult;
use std::io::{Read, Write};

/// A perl one-liner answering every connection on `127.0.0.1:$port` with `reply` (until the
/// session ends).
fn server(port: u16, reply: &str) -> String {
    format!(
        "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"127.0.0.1:{port}\", Listen => 5, ReuseAddr => 1) or die \"listen: $!\"; while ($c = $s->accept) {{ print $c \"{reply}\\n\"; close $c }}'"
    )
}

/// A perl one-liner reading one line from `127.0.0.1:$port`.
fn client(port: u16) -> String {
    format!(
        "perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\") or die \"connect: $!\\n\"; print scalar <$c>'"
    )
}

fn req(cwd: &std::path::Path, command: &str) -> SandboxRequest {
    SandboxRequest {
        command: command.to_string(),
        cwd: cwd.to_str().unwrap().to_string(),
        env: BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]),
        timeout_ms: 20_000,
        stdin: None,
        mount: None,
        on_output: None,
        capture_bytes: None,
        input: None,
    }
}

async fn session() -> (tempfile::TempDir, Arc<LinuxSandbox>, std::path::PathBuf, Keeper) {
    let (d, _, cwd) = fixture();
    let keeper = Keeper::start_session().await.expect("a session keeper");
    let sb = LinuxSandbox::new(LinuxSandboxOptions::default()).unwrap().in_session(keeper.clone());
    (d, Arc::new(sb), cwd, keeper)
}

/// Runs `command` in the background of the test; resolves when it ends.
fn background(
    sb: &Arc<LinuxSandbox>,
    cwd: &std::path::Path,
    command: String,
) -> tokio::task::JoinHandle<crate::error::Result<ExecResult>> {
    let (sb, r) = (sb.clone(), req(cwd, &command));
    tokio::spawn(async move {
        let r = sb.run(r, None).await;
        eprintln!("background command ended: {r:?}");
        r
    })
}

/// Waits until something listens on `port` inside the session.
async fn listening(keeper: &Keeper, port: u16) {
    let start = Instant::now();
    while keeper.connect(port).await.is_err() {
        assert!(start.elapsed() < Duration::from_secs(10), "nothing listens on {port} in the session");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

use std::sync::Arc;

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_commands_of_a_session_share_one_network() {
    let (_d, sb, cwd, keeper) = session().await;
    // The keeper's own probe takes the first connection: serve two.
    let serve = background(&sb, &cwd, server(4000, "from the first command"));
    listening(&keeper, 4000).await;
    let r = sb.run(req(&cwd, &client(4000)), None).await.unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (Some(0), "from the first command\n"), "{r:?}");
    keeper.close();
    // Closing the session ended the server (its run fails: the keeper is gone).
    let (sb2, r2) = (sb.clone(), req(&cwd, "true"));
    assert!(sb2.run(r2, None).await.is_err(), "a closed session ran a command");
    let ended = tokio::time::timeout(Duration::from_secs(10), serve).await.expect("the server outlived its session");
    assert!(ended.unwrap().is_err(), "the server's run says it ended by itself");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_port_is_reached_from_the_host_through_its_forwarder_and_only_there() {
    let (_d, sb, cwd, keeper) = session().await;
    let serve = background(&sb, &cwd, server(4001, "hello host"));
    listening(&keeper, 4001).await;
    let fwd = ports::Forwarder::start(keeper.clone(), 4001).await.unwrap();
    assert!(fwd.local().ip().is_loopback());
    let text = tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::connect(fwd.local()).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    })
    .await
    .unwrap();
    assert_eq!(text, "hello host\n");
    // The same port on the host's own loopback is not the session's.
    assert!(std::net::TcpStream::connect(("127.0.0.1", 4001)).is_err(), "the session's port is on the host");
    keeper.close();
    drop(serve);
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_reaches_neither_the_hosts_loopback_nor_another_session() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    let (_d, a, cwd, ka) = session().await;
    let (_e, b, cwd_b, kb) = session().await;
    let r = a.run(req(&cwd, &client(host_port)), None).await.unwrap();
    assert_ne!(r.exit_code, Some(0), "a session reached the host's loopback: {r:?}");
    assert!(r.stderr.contains("connect:"), "{r:?}");
    let serve = background(&a, &cwd, server(4002, "from a"));
    listening(&ka, 4002).await;
    let r = b.run(req(&cwd_b, &client(4002)), None).await.unwrap();
    assert_ne!(r.exit_code, Some(0), "session b reached session a: {r:?}");
    assert!(kb.connect(4002).await.is_err(), "b's keeper reached a's port");
    drop((host, serve));
    ka.close();
    kb.close();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_listener_made_in_the_session_is_reached_by_its_commands() {
    let (_d, sb, cwd, keeper) = session().await;
    let (fd, port) = keeper.listen(0).await.unwrap();
    assert_ne!(port, 0);
    let listener = std::net::TcpListener::from(fd);
    listener.set_nonblocking(false).unwrap();
    let accept = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        c.write_all(b"from outside\n").unwrap();
    });
    let r = sb.run(req(&cwd, &client(port)), None).await.unwrap();
    assert_eq!((r.exit_code, r.stdout.as_str()), (Some(0), "from outside\n"), "{r:?}");
    accept.join().unwrap();
    keeper.close();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_cannot_take_down_or_reconfigure_the_sessions_network() {
    if !std::path::Path::new("/usr/bin/busybox").exists() && !std::path::Path::new("/bin/busybox").exists() {
        eprintln!("skipped: busybox (its ifconfig) is not installed");
        return;
    }
    let (_d, sb, cwd, keeper) = session().await;
    let r = sb.run(req(&cwd, "busybox ifconfig lo down; busybox ifconfig lo 10.9.9.9"), None).await.unwrap();
    assert!(r.stderr.matches("Operation not permitted").count() >= 2, "{r:?}");
    // Loopback still works for the session.
    let serve = background(&sb, &cwd, server(4003, "still up"));
    listening(&keeper, 4003).await;
    let r = sb.run(req(&cwd, &client(4003)), None).await.unwrap();
    assert_eq!(r.stdout, "still up\n", "{r:?}");
    keeper.close();
    drop(serve);
}
