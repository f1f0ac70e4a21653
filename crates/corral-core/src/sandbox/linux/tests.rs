//! LinuxSandbox, tried the way an attacker would: each test is an escape attempt that must fail.
//! They run as the user the tests run as. Those that need namespaces are `#[ignore]`d, so a plain
//! `cargo test` reports them as ignored, and `scripts/test.sh` runs them explicitly (as root and
//! as an unprivileged user) where the kernel has namespaces: there a sandbox that cannot be made
//! fails them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::sandbox::SandboxShell;
use crate::shell::exec::InheritEnv;
use crate::shell::{ExecOptions, ShellProvider};

/// A sandbox, or a failed test: these tests are `#[ignore]`d and run explicitly where the kernel
/// has namespaces (`scripts/test.sh`), so construction that breaks fails them, never skips them.
fn sandbox(options: LinuxSandboxOptions) -> Arc<LinuxSandbox> {
    Arc::new(LinuxSandbox::new(options).expect("LinuxSandbox::new"))
}

fn shell(options: LinuxSandboxOptions) -> (tempfile::TempDir, SandboxShell) {
    let sb = sandbox(options);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("work/.git")).unwrap();
    std::fs::write(dir.path().join("work/.git/config"), "[core]\n").unwrap();
    let cwd = std::fs::canonicalize(dir.path().join("work")).unwrap();
    let s = SandboxShell::new(sb, &cwd, BTreeMap::new(), InheritEnv::None).unwrap();
    (dir, s)
}

fn opts() -> ExecOptions {
    ExecOptions { timeout_ms: Some(20_000), ..Default::default() }
}

async fn sh(s: &SandboxShell, cmd: &str) -> ExecResult {
    s.exec(cmd, opts()).await.unwrap()
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_working_directory_is_writable_and_the_rest_of_the_host_is_not() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    let r = sh(&s, "echo inside > made.txt && cat made.txt && pwd").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.stdout, format!("inside\n{}\n", s.cwd().display()));
    assert_eq!(std::fs::read_to_string(dir.path().join("work/made.txt")).unwrap(), "inside\n");
    // Outside the working directory: read-only.
    let outside = dir.path().join("outside.txt");
    let r = sh(&s, &format!("echo x > {} ; echo x > /etc/corral-escape", outside.display())).await;
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
    assert!(!outside.exists());
    assert!(!std::path::Path::new("/etc/corral-escape").exists());
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn git_stays_read_only_inside_the_working_directory() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    let r = sh(&s, "echo evil >> .git/config; mkdir .git/hooks").await;
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("work/.git/config")).unwrap(), "[core]\n");
    assert!(!dir.path().join("work/.git/hooks").exists());
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn hidden_paths_look_empty_and_tmp_is_private() {
    // A directory outside /tmp (which is private inside anyway).
    let secret_dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    std::fs::write(secret_dir.path().join("id_rsa"), "PRIVATE KEY").unwrap();
    let host_tmp = tempfile::NamedTempFile::new().unwrap();
    let options =
        LinuxSandboxOptions { hide: Some(vec![secret_dir.path().display().to_string()]), ..Default::default() };
    let (_dir, s) = shell(options);
    let r = sh(
        &s,
        &format!(
            "ls -A {}; cat {}/id_rsa; ls {}",
            secret_dir.path().display(),
            secret_dir.path().display(),
            host_tmp.path().display()
        ),
    )
    .await;
    assert!(!r.stdout.contains("PRIVATE KEY") && !r.stdout.contains("id_rsa"), "{r:?}");
    assert!(r.stderr.contains("No such file"), "the host's /tmp is not visible: {r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_listener_on_the_hosts_loopback_cannot_be_reached() {
    let (_dir, s) = shell(LinuxSandboxOptions::default());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = sh(&s, &format!("cat < /dev/null > /dev/tcp/127.0.0.1/{port} 2>&1; busybox nc -w 2 127.0.0.1 {port} </dev/null; echo rc=$?; cat /proc/net/dev | grep -c :")).await;
    assert!(listener.accept().is_err(), "nothing connected to the host's listener: {r:?}");
    // Only the loopback interface exists inside.
    assert!(r.stdout.trim_end().ends_with('1'), "{r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn sandbox_escaping_system_calls_are_refused() {
    let (_dir, s) = shell(LinuxSandboxOptions::default());
    let r = sh(&s, "unshare -U true; echo u=$?; mount -t tmpfs x /mnt; echo m=$?").await;
    assert!(r.stdout.contains("u=1") && r.stdout.contains("m=") && !r.stdout.contains("m=0"), "{r:?}");
    // The command is the namespace's init's child: the host's processes are not there to trace.
    let r = sh(&s, "ls /proc | grep -c '^[0-9]'").await;
    let count: u32 = r.stdout.trim().parse().unwrap_or(99);
    assert!(count <= 4, "only the sandbox's own processes are visible: {r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn an_abort_kills_a_background_child_that_would_outlive_it() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let started = Instant::now();
    let r = s
        .exec(
            "(sleep 1; touch marker) & setsid sh -c 'sleep 1; touch marker2' & sleep 30",
            ExecOptions { cancel: Some(cancel), ..opts() },
        )
        .await
        .unwrap();
    assert!(r.aborted && started.elapsed() < Duration::from_secs(5), "{r:?}");
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(!dir.path().join("work/marker").exists() && !dir.path().join("work/marker2").exists());
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn limits_stop_a_fork_bomb_a_cpu_spin_and_a_big_file_and_say_which() {
    let limits = Limits { pids: Some(16), cpu_seconds: Some(1), file_size_bytes: Some(1 << 20), ..Default::default() };
    let (_dir, s) = shell(LinuxSandboxOptions { limits, allow_weaker: true, ..Default::default() });
    let r = sh(&s, "i=0; while [ $i -lt 60 ]; do sleep 3 & i=$((i+1)); done; echo spawned").await;
    if super::pids_group_writable() {
        assert!(r.note.as_deref().is_some_and(|n| n.contains("pids")), "{r:?}");
    } else {
        // allowWeaker without a control group: no pids limit, and no note claims one.
        assert!(r.stdout.contains("spawned") && !r.note.as_deref().unwrap_or("").contains("pids"), "{r:?}");
    }
    let r = sh(&s, "while :; do :; done").await;
    assert!(r.note.as_deref().is_some_and(|n| n.contains("cpu")), "{r:?}");
    // A child that spins, not the command's own process: the note names cpu too.
    let r = sh(&s, "sh -c 'while :; do :; done'; exit $?").await;
    assert!(r.note.as_deref().is_some_and(|n| n.contains("cpu")), "{r:?}");
    let r = sh(&s, "head -c 2000000 /dev/zero > big.bin").await;
    assert!(r.note.as_deref().is_some_and(|n| n.contains("file size")), "{r:?}");
}

#[test]
fn bad_options_are_configuration_errors_naming_the_option() {
    for v in [
        serde_json::json!({ "limits": { "pids": 0 } }),
        serde_json::json!({ "limits": { "memoryBytes": -1 } }),
        serde_json::json!({ "limits": { "cpuSeconds": 1e300 } }),
        serde_json::json!({ "limits": { "cpu": 1 } }),
        serde_json::json!({ "protect": [""] }),
        serde_json::json!({ "network": { "allow": ["https://x.com"] } }),
        serde_json::json!({ "network": "default" }),
        serde_json::json!({ "writable": ["relative/dir"] }),
        serde_json::json!({ "writable": ["/tmp/../etc"] }),
    ] {
        let e = LinuxSandboxOptions::from_options(&v).unwrap_err();
        assert_eq!(e.code, Code::Configuration, "{v}");
    }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_memory_hog_is_stopped_by_its_limit_and_the_note_says_memory() {
    let limits = Limits { memory_bytes: Some(64 << 20), ..Default::default() };
    let (_dir, s) = shell(LinuxSandboxOptions { limits, allow_weaker: true, ..Default::default() });
    // tail keeps the last lines of a stream with no line ends: it grows without bound.
    let r = sh(&s, "tail /dev/zero").await;
    assert_ne!(r.exit_code, Some(0), "{r:?}");
    assert!(r.note.as_deref().is_some_and(|n| n.contains("memory")), "{r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_file_tools_keep_working_on_the_same_directory_while_a_command_runs() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    let fs = crate::fs::local::LocalFs::new(dir.path().join("work").to_str().unwrap()).unwrap();
    let running = s.exec("sleep 0.5; cat note.txt", opts());
    let write = async {
        use crate::fs::FsProvider;
        fs.write_file("note.txt", "from the host\n").await.unwrap();
        fs.read_file("note.txt").await.unwrap()
    };
    let (r, read) = tokio::join!(running, write);
    assert_eq!(read, "from the host\n");
    assert_eq!(r.unwrap().stdout, "from the host\n");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn writable_paths_can_be_written_besides_the_working_directory_and_nothing_else() {
    let extra = tempfile::tempdir().unwrap();
    let extra_path = std::fs::canonicalize(extra.path()).unwrap();
    let o = LinuxSandboxOptions { writable: vec![extra_path.display().to_string()], ..Default::default() };
    let (dir, s) = shell(o);
    // The parent of a writable path is not writable (here a private /tmp, elsewhere read-only).
    let cmd = format!(
        "echo cache > {0}/c.txt && echo x > {0}/../corral-outside.txt; echo x > /etc/corral-escape",
        extra_path.display()
    );
    let r = sh(&s, &cmd).await;
    assert!(r.stderr.contains("Read-only file system"), "{r:?}");
    assert_eq!(std::fs::read_to_string(extra_path.join("c.txt")).unwrap(), "cache\n");
    assert!(!extra_path.join("../corral-outside.txt").exists());
    assert!(!std::path::Path::new("/etc/corral-escape").exists());
    drop(dir);
}

#[tokio::test]
async fn a_missing_writable_path_is_a_configuration_error_at_construction() {
    let o = LinuxSandboxOptions { writable: vec!["/nonexistent/corral-writable".into()], ..Default::default() };
    let e = LinuxSandbox::new(o).unwrap_err();
    assert_eq!(e.code, Code::Configuration, "{e:?}");
    assert!(e.message.contains("/nonexistent/corral-writable"), "{e:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_per_call_cwd_below_the_shell_cwd_runs_there_and_still_sees_the_whole_tree() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    std::fs::create_dir_all(dir.path().join("work/sub")).unwrap();
    std::fs::write(dir.path().join("work/top.txt"), "top").unwrap();
    let o = ExecOptions { cwd: Some("sub".into()), ..opts() };
    let r = s.exec("pwd && cat ../top.txt && echo w > ../w.txt", o).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.stdout, format!("{}\ntop", s.cwd().join("sub").display()));
    assert!(dir.path().join("work/w.txt").exists());
}

#[test]
fn network_allow_without_a_broker_is_accepted_and_fails_closed() {
    let o = LinuxSandboxOptions::from_options(&serde_json::json!({ "network": { "allow": ["Example.com"] } }));
    assert!(o.is_ok(), "{o:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn landlock_refuses_a_write_the_mounts_would_let_through() {
    let (_dir, s) = shell(LinuxSandboxOptions::default());
    assert!(landlock::abi().is_some(), "this kernel has no Landlock: the Landlock layer cannot be tested here");
    // /dev is a writable tmpfs in the view; Landlock allows only its device nodes.
    let r =
        sh(&s, "echo ok > /dev/null && echo t > /tmp/t && echo w > w.txt && cat /tmp/t w.txt; touch /dev/corral-made")
            .await;
    assert_eq!(r.stdout, "t\nw\n", "{r:?}");
    assert!(r.stderr.contains("Permission denied"), "{r:?}");
    let r = sh(&s, "test -e /dev/corral-made && echo made || echo absent").await;
    assert_eq!(r.stdout, "absent\n", "{r:?}");
}

/// A plain HTTP server on the host at `ip` answering "upstream" to every request.
async fn upstream(ip: &str) -> std::net::SocketAddr {
    counting_upstream(ip).await.0
}

/// A broker that may reach 127.0.0.2 and 127.0.0.3, and a shell in a LinuxSandbox allowed
/// 127.0.0.2 through it; `None` (skipped) where the kernel lacks namespaces.
async fn egress_shell() -> (Arc<crate::broker::Broker>, Arc<LinuxSandbox>, tempfile::TempDir, SandboxShell) {
    let broker = crate::broker::Broker::start(crate::broker::BrokerConfig {
        allow_private: vec!["127.0.0.2".into(), "127.0.0.3".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let o = LinuxSandboxOptions::from_options(&serde_json::json!({ "network": { "allow": ["127.0.0.2"] } })).unwrap();
    let sb = LinuxSandbox::new(o).expect("LinuxSandbox::new");
    let sb = Arc::new(sb.with_broker(Some(broker.clone() as Arc<dyn EgressBroker>)));
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let s = SandboxShell::new(sb.clone(), &cwd, BTreeMap::new(), InheritEnv::None).unwrap();
    (broker, sb, dir, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_allow_with_a_broker_reaches_allowed_hosts_through_it_and_nothing_else() {
    assert!(
        std::process::Command::new("curl").arg("--version").output().is_ok(),
        "this test needs curl (.ci/run installs it)"
    );
    let up = upstream("127.0.0.2").await;
    let other = upstream("127.0.0.3").await;
    let (broker, sb, _dir, s) = egress_shell().await;
    let cmd = format!(
        "curl -sS --max-time 10 http://{up}/x; echo; \
         curl -sS --max-time 10 -o /dev/null -w '%{{http_code}}' http://{other}/; echo; \
         curl -sS --max-time 3 --noproxy '*' http://{up}/x || echo direct-refused; \
         for i in 1 2 3 4 5 6; do curl -sS --max-time 10 http://{up}/$i & done; wait; echo"
    );
    let r = sh(&s, &cmd).await;
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"upstream"), "{r:?}");
    assert_eq!(lines.get(1), Some(&"403"), "a host off the list is refused by the broker: {r:?}");
    assert_eq!(lines.get(2), Some(&"direct-refused"), "no route around the proxy: {r:?}");
    assert_eq!(lines.get(3), Some(&"upstream".repeat(6).as_str()), "concurrent connections: {r:?}");
    sb.close().await.unwrap();
    broker.close().await;
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn host_unix_sockets_under_run_are_out_of_reach_as_root() {
    let (_dir, s) = shell(LinuxSandboxOptions::default());
    let path = format!("/run/corral-test-{}.sock", std::process::id());
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("root makes a socket under /run");
    let r = sh(&s, &format!("test -e {path} && echo visible || echo hidden")).await;
    drop(listener);
    let _ = std::fs::remove_file(&path);
    assert_eq!(r.stdout, "hidden\n", "{r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_command_has_no_terminal_no_inherited_descriptors_and_no_dangerous_capabilities() {
    let (dir, s) = shell(LinuxSandboxOptions::default());
    // A descriptor the host process holds without CLOEXEC.
    let secret = dir.path().join("held-open.txt");
    std::fs::write(&secret, "held").unwrap();
    let c = std::ffi::CString::new(secret.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY) };
    assert!(fd >= 0);
    let r = sh(
        &s,
        "cut -d' ' -f6 /proc/self/stat; test -e /dev/tty && echo tty || echo no-tty; ls -l /proc/self/fd/; mknod blk b 8 0 && echo mknod-ok; true",
    )
    .await;
    // SAFETY: ours.
    unsafe { libc::close(fd) };
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"1"), "its own session, led by the namespace's init: {r:?}");
    assert_eq!(lines.get(1), Some(&"no-tty"), "{r:?}");
    assert!(!r.stdout.contains("held-open.txt"), "an inherited descriptor: {r:?}");
    assert!(!r.stdout.contains("mknod-ok"), "a block device node: {r:?}");
    assert!(!dir.path().join("work/blk").exists());
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_command_cannot_clear_its_parent_death_signal_to_outlive_an_abort() {
    assert!(std::path::Path::new("/usr/bin/python3").exists(), "this test calls prctl through /usr/bin/python3");
    let (_dir, s) = shell(LinuxSandboxOptions::default());
    let r = sh(&s, "/usr/bin/python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(1, 0, 0, 0, 0))'").await;
    assert_eq!(r.stdout, "-1\n", "{r:?}");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn hidden_paths_inside_the_working_directory_stay_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir_all(work.join("secrets")).unwrap();
    std::fs::write(work.join("secrets/key"), "hunter2").unwrap();
    std::fs::write(work.join(".env"), "TOKEN=hunter2").unwrap();
    let hide = vec![work.join(".env").display().to_string(), work.join("secrets").display().to_string()];
    let sb = sandbox(LinuxSandboxOptions { hide: Some(hide), ..Default::default() });
    let s = SandboxShell::new(sb, &work, BTreeMap::new(), InheritEnv::None).unwrap();
    let r = sh(&s, "cat .env; ls -A secrets; echo x > secrets/new; echo ok > visible.txt; cat visible.txt").await;
    assert!(!r.stdout.contains("hunter2"), "{r:?}");
    assert!(r.stdout.ends_with("ok\n"), "the command still runs: {r:?}");
    assert!(!work.join("secrets/new").exists());
    assert_eq!(std::fs::read_to_string(work.join(".env")).unwrap(), "TOKEN=hunter2", "the host file is untouched");
}

/// A plain HTTP server on the host at `ip` answering "upstream" to every request, and the body
/// bytes of each request it answered (by its Content-Length).
async fn counting_upstream(ip: &str) -> (std::net::SocketAddr, Arc<std::sync::Mutex<Vec<usize>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let b2 = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let bodies = b2.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                let head_end = loop {
                    if let Some(i) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&seen[..head_end]).to_ascii_lowercase();
                let want: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                let mut got = seen.len() - head_end;
                while got < want {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got += n,
                    }
                }
                bodies.lock().unwrap().push(got);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nupstream").await;
            });
        }
    });
    (addr, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_a_command_sent_just_before_it_exited_still_reach_the_broker() {
    assert!(std::process::Command::new("bash").arg("--version").output().is_ok(), "this test needs bash");
    let (up, bodies) = counting_upstream("127.0.0.2").await;
    let (broker, sb, _dir, s) = egress_shell().await;
    const BODY: usize = 4 << 20;
    // The command writes a whole request with a large body to the proxy and exits at once,
    // without waiting for an answer: what it sent is in flight when it is gone.
    let cmd = format!(
        r#"bash -c 'p=${{HTTP_PROXY##*:}}; exec 3<>/dev/tcp/127.0.0.1/$p; {{ printf "POST http://{up}/big HTTP/1.1\r\nHost: {up}\r\nContent-Length: {BODY}\r\nConnection: close\r\n\r\n"; head -c {BODY} /dev/zero; }} >&3; echo sent'"#
    );
    for round in 0..3 {
        let r = sh(&s, &cmd).await;
        assert_eq!(r.stdout, "sent\n", "{r:?}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while bodies.lock().unwrap().len() <= round && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(bodies.lock().unwrap().get(round), Some(&BODY), "round {round}: the body arrived whole");
    }
    sb.close().await.unwrap();
    broker.close().await;
}
