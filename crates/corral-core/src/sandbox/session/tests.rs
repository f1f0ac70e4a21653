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
        record: None,
        changes_dir: None,
        pending: None,
    };
    let (plan, trees, _) = sb.plan(&req, None, None).unwrap();
    let userns = sb.userns_for(&trees).unwrap();
    (plan, userns, trees)
}

fn request(argv: &[&str]) -> LaunchRequest {
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    LaunchRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env,
        stdin: false,
        cgroups: Vec::new(),
        ahead: Vec::new(),
    }
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

/// Another thread starting processes meanwhile (a forked child holds the just-written copy open
/// for writing until it runs its own program) does not make a keeper fail to start.
#[test]
fn a_keeper_starts_from_its_private_copy_while_other_threads_start_processes() {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::process::Command::new("true").status();
                }
            })
        })
        .collect();
    let started = std::time::Instant::now();
    let (mut keepers, mut failed) = (0, Vec::new());
    while started.elapsed() < std::time::Duration::from_secs(3) {
        match Keeper::start(true) {
            Ok(k) => {
                keepers += 1;
                k.close();
            }
            Err(e) => failed.push(e.to_string()),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spawners {
        s.join().unwrap();
    }
    assert!(failed.is_empty(), "{} of {} starts failed: {:?}", failed.len(), keepers + failed.len(), &failed[..1]);
    assert!(keepers > 10, "the race ran ({keepers} keepers)");
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
    let name = "where_memory_files_may_not_be_executed_the_keeper_starts_from_a_private_copy";
    run_alone(&["--pid", "--fork", "--mount-proc"], name, INNER);
}

/// Runs the test `name` of this module again, alone, under `unshare` with `how`, `inner` set in
/// its environment; it must pass.
fn run_alone(how: &[&str], name: &str, inner: &str) {
    let out = std::process::Command::new("unshare")
        .args(how)
        .arg(std::env::current_exe().unwrap())
        .args([&format!("sandbox::session::tests::{name}"), "--exact", "--ignored", "--test-threads=1"])
        .env(inner, "1")
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
    let l = k.spawn(request(&["sleep", "60"]), plan, userns, trees, Vec::new(), &[]).await.unwrap();
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", k.pid())).unwrap();
    let children: Vec<u32> = children.split_whitespace().map(|p| p.parse().unwrap()).collect();
    // The command, and the process prepared for the next one (`corral_keeper::prepared`).
    assert!(children.contains(&l.pid) && children.len() <= 2, "{children:?}");
    k.close();
    assert!(tokio::time::timeout(Duration::from_secs(10), l.exit).await.is_ok(), "no word of the end");
    wait_until("the command ended with the keeper", || !running(l.pid));
    wait_until("the prepared process ended with the keeper", || children.iter().all(|p| !running(*p)));
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_killed_keeper_takes_its_commands_with_it() {
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(request(&["sleep", "60"]), plan, userns, trees, Vec::new(), &[]).await.unwrap();
    unsafe { libc::kill(k.pid(), libc::SIGKILL) };
    let exit = tokio::time::timeout(Duration::from_secs(10), l.exit).await.expect("no word of the end");
    assert!(exit.is_err(), "a command of a dead keeper reported {exit:?}");
    wait_until("the command ended with the keeper", || !running(l.pid));
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let e = k
        .spawn(request(&["true"]), plan, userns, trees, Vec::new(), &[])
        .await
        .err()
        .expect("a dead keeper started a command");
    assert!(e.to_string().contains("keeper process ended"), "{e}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_missing_program_fails_to_start_with_its_errno_and_the_exit_status_comes_back() {
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let e = k.spawn(request(&["corral-no-such-program"]), plan, userns, trees, Vec::new(), &[]).await.err().unwrap();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(request(&["sh", "-c", "exit 7"]), plan, userns, trees, Vec::new(), &[]).await.unwrap();
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
        record: None,
        changes_dir: None,
        pending: None,
    }
}

async fn session() -> (tempfile::TempDir, Arc<LinuxSandbox>, std::path::PathBuf, Keeper) {
    let (d, _, cwd) = fixture();
    let keeper = Keeper::start_session(&[], &[]).await.expect("a session keeper");
    let sb = LinuxSandbox::new(LinuxSandboxOptions::default()).unwrap().in_session(keeper.clone(), Vec::new());
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
    let fwd = ports::Forwarder::start(std::sync::Arc::new(keeper.clone()), 4001).await.unwrap();
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

/// Sockets the keeper makes ahead are the session's: connected from this process, one reaches a
/// listener inside, and none reaches a port on the host's own loopback.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn sockets_made_ahead_reach_the_sessions_loopback_and_not_the_hosts() {
    let (_d, _sb, _cwd, keeper) = session().await;
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    let (listener, inside_port) = keeper.listen(0).await.unwrap();
    let listener = std::net::TcpListener::from(listener);
    let spares = keeper.sockets(100).await.unwrap();
    assert_eq!(spares.len(), 32, "one answer carries at most 32 sockets");
    let connect = |fd: OwnedFd, port: u16| {
        let s = socket2::Socket::from(fd);
        s.set_nonblocking(false).unwrap();
        s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())
    };
    let mut spares = spares.into_iter();
    let refused = connect(spares.next().unwrap(), host_port).expect_err("a socket made ahead reached the host");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused, "{refused}");
    connect(spares.next().unwrap(), inside_port).expect("a socket made ahead reaches the session's listener");
    listener.set_nonblocking(false).unwrap();
    let (_conn, peer) = listener.accept().unwrap();
    assert!(peer.ip().is_loopback());
    drop(host);
    keeper.close();
}

/// A forwarder takes a socket made ahead for each connection and asks for more as they run out:
/// many more connections than it holds sockets for are each relayed whole.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_forwarder_relays_many_more_connections_than_it_holds_sockets_for() {
    let (_d, sb, cwd, keeper) = session().await;
    let serve = background(&sb, &cwd, server(4003, "hello again"));
    listening(&keeper, 4003).await;
    let fwd = ports::Forwarder::start(std::sync::Arc::new(keeper.clone()), 4003).await.unwrap();
    let local = fwd.local();
    let texts = tokio::task::spawn_blocking(move || {
        (0..100)
            .map(|_| {
                let mut c = std::net::TcpStream::connect(local).unwrap();
                let mut s = String::new();
                c.read_to_string(&mut s).unwrap();
                s
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    assert!(texts.iter().all(|t| t == "hello again\n"), "{texts:?}");
    drop(fwd);
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

// ---- a session's egress through its broker -----------------------------------------------------

use crate::broker::{Broker, BrokerConfig, Gate};
use crate::sandbox::NetworkPolicy;

/// A host-side HTTP server on 127.0.0.1 answering every request with `body`.
fn host_http(body: &'static str) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = c.read(&mut buf);
                let _ =
                    write!(c, "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            });
        }
    });
    port
}

fn policy(v: serde_json::Value) -> NetworkPolicy {
    NetworkPolicy::from_value(&v, "network").unwrap()
}

/// A session whose commands' proxy is a listener inside it, served by a broker under `gate`.
async fn session_with_broker(
    gate: Arc<Gate>,
) -> (tempfile::TempDir, Arc<LinuxSandbox>, std::path::PathBuf, Keeper, u16) {
    let (d, sb, cwd, keeper) = session().await;
    let (fd, port) = keeper.listen(0).await.unwrap();
    let broker = Broker::start(BrokerConfig::default()).await.unwrap();
    broker.serve_session(std::net::TcpListener::from(fd), gate).unwrap();
    // The broker lives as long as the test's runtime.
    std::mem::forget(broker);
    (d, sb, cwd, keeper, port)
}

fn curl(proxy: u16, url: &str) -> String {
    format!("curl -s -o - -w ' %{{http_code}}' --max-time 10 -x http://127.0.0.1:{proxy} {url}")
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_sessions_policy_decides_every_request_and_applies_at_once() {
    let target = host_http("from the host");
    let gate = Gate::new(policy(serde_json::json!({ "mode": "deny-all" })));
    let (_d, sb, cwd, keeper, proxy) = session_with_broker(gate.clone()).await;
    let url = format!("http://127.0.0.1:{target}/");
    let run = |cmd: String| {
        let (sb, r) = (sb.clone(), req(&cwd, &cmd));
        async move { sb.run(r, None).await.unwrap().stdout }
    };
    // deny-all: the broker opens nothing, loopback included.
    assert!(run(curl(proxy, &url)).await.ends_with(" 403"), "deny-all let a request through");
    // Only allowedCIDRs opens the host's loopback.
    gate.set(policy(serde_json::json!({ "mode": "custom", "allowedCIDRs": ["127.0.0.1/32"] })));
    assert_eq!(run(curl(proxy, &url)).await, "from the host 200");
    // deniedCIDRs wins.
    gate.set(policy(serde_json::json!({
        "mode": "custom", "allowedCIDRs": ["127.0.0.1/32"], "deniedCIDRs": ["127.0.0.0/8"]
    })));
    assert!(run(curl(proxy, &url)).await.ends_with(" 403"));
    // A named host never reaches loopback, and allow-all reaches public addresses only.
    gate.set(policy(serde_json::json!({ "mode": "custom", "allowedHosts": ["localhost", "127.0.0.1"] })));
    assert!(run(curl(proxy, &url)).await.ends_with(" 403"), "a named host reached loopback");
    gate.set(policy(serde_json::json!({ "mode": "allow-all" })));
    assert!(run(curl(proxy, &url)).await.ends_with(" 403"), "allow-all reached loopback");
    // A direct connection from inside reaches the session's own loopback, never the host's.
    let direct = run(format!("curl -s --noproxy '*' --max-time 5 -o /dev/null -w '%{{http_code}}' {url}")).await;
    assert_eq!(direct, "000", "a direct connection reached the host");
    keeper.close();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_policy_change_closes_the_open_tunnels_it_refuses() {
    // An echo server on the host.
    let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in echo.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 || c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let gate = Gate::new(policy(serde_json::json!({ "mode": "custom", "allowedCIDRs": ["127.0.0.1/32"] })));
    let (_d, _sb, _cwd, keeper, proxy) = session_with_broker(gate.clone()).await;
    // A tunnel opened from inside the session (the keeper's socket is inside it).
    let inner = keeper.connect(proxy).await.unwrap();
    let text = tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::from(inner);
        c.set_nonblocking(false).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(c, "CONNECT 127.0.0.1:{echo_port} HTTP/1.1\r\nHost: 127.0.0.1:{echo_port}\r\n\r\n").unwrap();
        let mut head = [0u8; 19];
        c.read_exact(&mut head).unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
        let mut rest = Vec::new();
        let mut b = [0u8; 1];
        while !rest.ends_with(b"\r\n\r\n") {
            c.read_exact(&mut b).unwrap();
            rest.push(b[0]);
        }
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        // The policy changes: the tunnel is closed.
        gate.set(policy(serde_json::json!({ "mode": "deny-all" })));
        let _ = c.write_all(b"more");
        let mut after = [0u8; 4];
        match c.read(&mut after) {
            Ok(0) | Err(_) => "closed".to_string(),
            Ok(n) => format!("still open: {:?}", &after[..n]),
        }
    })
    .await
    .unwrap();
    assert_eq!(text, "closed");
    keeper.close();
}

// ---- a session's root --------------------------------------------------------------------------

struct Rooted {
    dir: tempfile::TempDir,
    sb: Arc<LinuxSandbox>,
    keeper: Keeper,
}

impl Rooted {
    fn host(&self, name: &str) -> std::path::PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap().join(name)
    }

    async fn run(&self, command: &str) -> ExecResult {
        self.sb.run(req(std::path::Path::new("/workspace"), command), None).await.unwrap()
    }
}

async fn rooted() -> Rooted {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let mut binds = Vec::new();
    for (name, inside) in [("workspace", "/workspace"), ("tmp", "/tmp"), ("home", "/home/agent")] {
        let host = base.join(name);
        std::fs::create_dir(&host).unwrap();
        std::fs::set_permissions(&host, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        binds.push((host, std::path::PathBuf::from(inside)));
    }
    std::fs::set_permissions(&base, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(base.join("workspace/.git")).unwrap();
    std::fs::write(base.join("workspace/.git/config"), "[core]\n").unwrap();
    let keeper = Keeper::start_session(&binds, &[]).await.expect("a session keeper with its root");
    let sb = LinuxSandbox::new(LinuxSandboxOptions::default()).unwrap().in_session(keeper.clone(), binds);
    Rooted { dir, sb: Arc::new(sb), keeper }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_shows_its_workspace_tmp_and_home_and_keeps_them_between_commands() {
    let s = rooted().await;
    let r = s.run("pwd; echo w > /workspace/w; echo t > /tmp/t; echo h > /home/agent/h; ls /home").await;
    assert_eq!((r.exit_code, r.stdout.as_str()), (Some(0), "/workspace\nagent\n"), "{r:?}");
    assert_eq!(std::fs::read_to_string(s.host("workspace/w")).unwrap(), "w\n");
    assert_eq!(std::fs::read_to_string(s.host("tmp/t")).unwrap(), "t\n");
    assert_eq!(std::fs::read_to_string(s.host("home/h")).unwrap(), "h\n");
    let r = s.run("cat /tmp/t /home/agent/h /workspace/w").await;
    assert_eq!(r.stdout, "t\nh\nw\n", "{r:?}");
    s.keeper.close();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_sees_no_host_home_or_tmp_and_writes_only_its_own_directories() {
    let s = rooted().await;
    std::fs::write(s.host("marker"), "host").unwrap();
    let marker = s.host("marker");
    let r = s
        .run(&format!(
            "cat {m} 2>/dev/null && echo host-tmp-visible; ls /root 2>/dev/null && echo root-visible; \
             touch /usr/corral-x 2>/dev/null && echo usr-writable; echo x >> /workspace/.git/config 2>/dev/null && echo git-writable; \
             ls /run | wc -l; test -e /etc/passwd && echo etc-readable",
            m = marker.display()
        ))
        .await;
    assert_eq!(r.stdout, "0\netc-readable\n", "{r:?}");
    assert_eq!(std::fs::read_to_string(s.host("workspace/.git/config")).unwrap(), "[core]\n");
    assert!(!std::path::Path::new("/usr/corral-x").exists());
    s.keeper.close();
}

#[tokio::test]
async fn the_keeper_keeps_no_descriptor_its_parent_left_open() {
    // A descriptor without close-on-exec in this process, as a careless library would leave one.
    let file = std::fs::File::open("/etc/hostname").or_else(|_| std::fs::File::open("/etc/passwd")).unwrap();
    let leaked = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_DUPFD, 200) };
    assert!(leaked >= 200);
    let k = Keeper::start(false).unwrap();
    // An answer means the keeper is past its start (port 1: refused, or a socket).
    let _ = k.connect(1).await;
    let fds: Vec<i32> = std::fs::read_dir(format!("/proc/{}/fd", k.pid()))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    unsafe { libc::close(leaked) };
    assert!(!fds.contains(&leaked), "the keeper holds {leaked}: {fds:?}");
    // stdin, stdout, stderr, the control socket, the signal descriptor, its own mount table
    // (watched for changes) and, for a moment, the socket it just answered with.
    assert!(fds.iter().all(|fd| *fd <= 6), "{fds:?}");
    k.close();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_after_the_first_starts_in_a_prepared_process_with_its_own_streams_status_and_input() {
    let (_d, sb, cwd, keeper) = session().await;
    let first = sb.run(req(&cwd, "echo one"), None).await.unwrap();
    assert_eq!((first.stdout.as_str(), first.exit_code), ("one\n", Some(0)));
    // At the priority a fresh command gets (a prepared process is made at a lower one as root).
    let second = sb.run(req(&cwd, "echo two; echo err >&2; pwd; nice; exit 3"), None).await.unwrap();
    assert_eq!(second.stdout, format!("two\n{}\n0\n", cwd.display()));
    assert_eq!((second.stderr.as_str(), second.exit_code), ("err\n", Some(3)));
    let mut with_input = req(&cwd, "cat; echo \" $$\"");
    with_input.stdin = Some("typed".into());
    let third = sb.run(with_input, None).await.unwrap();
    // The program is the pid namespace's init, as in a process made for it.
    assert_eq!((third.stdout.as_str(), third.exit_code), ("typed 1\n", Some(0)));
    assert_eq!(keeper.prepared_starts(), 2, "the second and third commands started in prepared processes");
    keeper.close();
}

/// A command started in a prepared process leaves its own writable trees to the next prepared
/// process (the library then sends no second copies): command after command starts prepared and
/// writes the directory itself.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn commands_back_to_back_each_start_prepared_on_the_trees_the_last_one_left() {
    let (_d, sb, cwd, keeper) = session().await;
    for i in 0..8 {
        let r = sb.run(req(&cwd, &format!("echo {i} >> log")), None).await.unwrap();
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    assert_eq!(keeper.prepared_starts(), 7, "every command after the first started prepared");
    let log = std::fs::read_to_string(cwd.join("log")).unwrap();
    assert_eq!(log, (0..8).map(|i| format!("{i}\n")).collect::<String>());
    keeper.close();
}

/// The host renames a protected `.git` away and makes another after the next command's process
/// was prepared (its view made with the old one read-only): the prepared view no longer covers
/// the path, so the command gets a fresh one, where the new `.git` is read-only too.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_protected_directory_the_host_replaced_after_the_next_command_was_prepared_stays_read_only() {
    let (_d, sb, cwd, keeper) = session().await;
    std::fs::create_dir(cwd.join(".git")).unwrap();
    std::fs::write(cwd.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let first = sb.run(req(&cwd, "true"), None).await.unwrap();
    assert_eq!(first.exit_code, Some(0), "{first:?}");
    // The next command's process is prepared meanwhile.
    std::thread::sleep(Duration::from_millis(200));
    std::fs::rename(cwd.join(".git"), cwd.join("old-git")).unwrap();
    std::fs::create_dir(cwd.join(".git")).unwrap();
    let r = sb.run(req(&cwd, "echo pwned > .git/config; echo pwned > .git/HEAD"), None).await.unwrap();
    assert_ne!(r.exit_code, Some(0), "{r:?}");
    assert!(!cwd.join(".git/config").exists(), "the new .git was writable: {r:?}");
    assert_eq!(std::fs::read_to_string(cwd.join("old-git/HEAD")).unwrap(), "ref: refs/heads/main\n");
    assert_eq!(keeper.prepared_starts(), 0, "the stale prepared view was used");
    // The command after it starts prepared again, the new `.git` covered there too.
    let again = sb.run(req(&cwd, "touch .git/config"), None).await.unwrap();
    assert_ne!(again.exit_code, Some(0), "{again:?}");
    assert!(!cwd.join(".git/config").exists());
    assert_eq!(keeper.prepared_starts(), 1);
    keeper.close();
}

/// The host mounts a filesystem in the working directory after the next command's process was
/// prepared (its view holds the mounts as they were): the prepared process is dropped, and the
/// command sees the host's mounts as they are now, as a fresh view would.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_mount_the_host_makes_after_the_next_command_was_prepared_is_seen_by_it() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: mounting on the host needs root");
        return;
    }
    // In a process of its own, in a mount namespace of its own: the other tests' keepers would
    // drop their prepared views on this mount too.
    const INNER: &str = "CORRAL_MOUNT_INNER";
    if std::env::var_os(INNER).is_none() {
        let name = "a_mount_the_host_makes_after_the_next_command_was_prepared_is_seen_by_it";
        run_alone(&["--mount", "--propagation", "private"], name, INNER);
        return;
    }
    let (_d, sb, cwd, keeper) = session().await;
    let m = cwd.join("m");
    std::fs::create_dir(&m).unwrap();
    let first = sb.run(req(&cwd, "ls m"), None).await.unwrap();
    assert_eq!((first.stdout.as_str(), first.exit_code), ("", Some(0)));
    std::thread::sleep(Duration::from_millis(200));
    let target = std::ffi::CString::new(m.to_str().unwrap()).unwrap();
    let mounted = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, std::ptr::null()) };
    assert_eq!(mounted, 0, "{}", std::io::Error::last_os_error());
    std::fs::write(m.join("f"), "on the new mount\n").unwrap();
    // The keeper hears of the change on its own; the command may come at once.
    let r = sb.run(req(&cwd, "cat m/f"), None).await.unwrap();
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    assert_eq!((r.stdout.as_str(), r.exit_code), ("on the new mount\n", Some(0)), "{r:?}");
    assert_eq!(keeper.prepared_starts(), 0, "the view made before the mount was used");
    keeper.close();
}

/// A prepared command's control group is the command's alone: its init is in it, and the group
/// is gone once the command ended (the waiting first process, which outlives the command while
/// its namespaces are torn down, is not in it to keep it).
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_prepared_commands_control_group_holds_its_init_and_is_removed_when_it_ends() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: control groups need root");
        return;
    }
    let (_d, sb, cwd, keeper) = session().await;
    for _ in 0..10 {
        let r = sb.run(req(&cwd, "grep pids /proc/self/cgroup; echo $$"), None).await.unwrap();
        let group = r.stdout.lines().next().and_then(|l| l.rsplit(':').next()).unwrap_or_default().to_string();
        assert!(group.contains("/corral-"), "{r:?}");
        let dir = std::path::Path::new("/sys/fs/cgroup/pids").join(group.trim_start_matches('/'));
        assert!(!dir.exists(), "{} is left after the command", dir.display());
    }
    assert!(keeper.prepared_starts() >= 9, "{}", keeper.prepared_starts());
    keeper.close();
}

/// The pids group a command printed (`grep pids /proc/self/cgroup` first), as a directory.
fn pids_group(stdout: &str) -> std::path::PathBuf {
    let group = stdout.lines().next().and_then(|l| l.rsplit(':').next()).unwrap_or_default();
    std::path::Path::new("/sys/fs/cgroup/pids").join(group.trim_start_matches('/'))
}

/// The process prepared for the next command joins that command's control group (made ahead by
/// the library) while it waits, so the move, which can wait for an RCU grace period when moves
/// are rare, is not on the command's path; the command then runs in that group, as its init.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_process_prepared_for_the_next_command_waits_in_that_commands_control_group() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: control groups need root");
        return;
    }
    let (_d, sb, cwd, keeper) = session().await;
    sb.run(req(&cwd, "true"), None).await.unwrap();
    for _ in 0..3 {
        let ahead = keeper.ahead();
        wait_until("the prepared process joined the group made ahead", || {
            ahead.made().is_some_and(|(_, pids)| pids.len() == 1)
        });
        let (dir, _) = ahead.made().unwrap();
        let r = sb.run(req(&cwd, "grep pids /proc/self/cgroup; echo $$"), None).await.unwrap();
        assert_eq!(pids_group(&r.stdout), dir, "{r:?}");
        assert_eq!(r.stdout.lines().nth(1), Some("1"), "{r:?}");
        assert!(!dir.exists(), "{} is left after the command", dir.display());
    }
    assert_eq!(keeper.prepared_starts(), 3);
    keeper.close();
}

/// A prepared process that joined groups made for another command than the one that comes is
/// not used: that command gets a fresh process, in its own group alone.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_process_prepared_in_groups_made_for_another_command_is_not_used() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: control groups need root");
        return;
    }
    use crate::shell::exec::cgroup::Cgroup;
    let (_d, sb, cwd) = fixture();
    let k = Keeper::start(false).unwrap();
    let (made, other) = (Cgroup::create().unwrap(), Cgroup::create().unwrap());
    let mut first = request(&["true"]);
    first.ahead = vec![made.procs_path()];
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    k.spawn(first, plan, userns, trees, Vec::new(), &[]).await.unwrap().exit.await.unwrap();
    let procs = |g: &Cgroup| g.get("cgroup.procs").unwrap_or_default().lines().count();
    wait_until("the prepared process joined the group made ahead", || procs(&made) == 1);
    let mut second = request(&["sh", "-c", "grep pids /proc/self/cgroup"]);
    second.cgroups = vec![other.procs_path()];
    let (plan, userns, trees) = plan_for(&sb, &cwd);
    let l = k.spawn(second, plan, userns, trees, Vec::new(), &[]).await.unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(l.stdout), &mut out).unwrap();
    l.exit.await.unwrap();
    assert_eq!(k.prepared_starts(), 0, "the process prepared in another command's group was used");
    let other_dir = other.procs_path().to_str().unwrap().trim_end_matches("/cgroup.procs").to_string();
    assert_eq!(pids_group(&out).to_str().unwrap(), other_dir, "{out}");
    wait_until("the discarded process left the group made ahead", || procs(&made) == 0);
    k.close();
}
