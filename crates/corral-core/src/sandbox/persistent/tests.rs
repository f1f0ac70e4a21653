//! A persistent session through its core API: files, `/tmp` and home kept, ports, the proxy
//! under the policy, stop, resume, destroy. Needs namespaces: `#[ignore]`d, and run by
//! scripts/test.sh (as root and as an unprivileged user).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use super::{SessionKind, SessionOptions, SessionSandbox};
use crate::broker::NetworkPolicy;
use crate::error::Code;
use crate::sandbox::linux::LinuxSandboxOptions;

fn options(policy: serde_json::Value, ports: Vec<u16>) -> SessionOptions {
    SessionOptions {
        sandbox: SessionKind::Linux(LinuxSandboxOptions::default()),
        policy: NetworkPolicy::from_value(&policy, "network").unwrap(),
        ports,
        upstream_ca: Vec::new(),
        env: BTreeMap::new(),
    }
}

fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    d
}

async fn sh(s: &SessionSandbox, command: &str) -> crate::shell::ExecResult {
    s.run(command, None, &BTreeMap::new(), None, 20_000, None, None).await.unwrap()
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_keeps_its_files_tmp_and_home_across_stop_and_resume() {
    let r = root();
    let s = SessionSandbox::create(r.path(), "s-1", options(serde_json::json!({ "mode": "deny-all" }), vec![]))
        .await
        .unwrap();
    let out = sh(
        &s,
        "echo a > /workspace/a; echo b > /tmp/b; echo c > $HOME/c; echo \"$HOME $TMPDIR $IS_SANDBOX [$NO_PROXY]\"",
    )
    .await;
    assert_eq!(out.stdout, "/home/agent /tmp 1 []\n", "{out:?}");
    s.stop().await;
    s.stop().await;
    let again = SessionSandbox::resume(r.path(), "s-1", options(serde_json::json!({ "mode": "deny-all" }), vec![]))
        .await
        .unwrap();
    assert_eq!(sh(&again, "cat /workspace/a /tmp/b /home/agent/c").await.stdout, "a\nb\nc\n");
    let cwd = again.run("pwd", Some("/tmp"), &BTreeMap::new(), None, 20_000, None, None).await.unwrap();
    assert_eq!(cwd.stdout, "/tmp\n");
    sh(&again, "ln -s /etc /workspace/etc-link && mkdir /workspace/d").await;
    // A working directory is resolved lexically, a relative one under /workspace.
    for (given, inside) in
        [("/workspace/./d", "/workspace/d\n"), ("d", "/workspace/d\n"), ("/workspace/d/..", "/workspace\n")]
    {
        let r = again.run("pwd", Some(given), &BTreeMap::new(), None, 20_000, None, None).await.unwrap();
        assert_eq!(r.stdout, inside, "{given}");
    }
    for outside in ["/etc", "/workspace/../etc", "/workspace/etc-link", "workspace", "/workspace/missing"] {
        let r = again.run("pwd", Some(outside), &BTreeMap::new(), None, 20_000, None, None).await;
        assert_eq!(r.unwrap_err().code, Code::NotFound, "{outside}");
    }
    again.destroy().await.unwrap();
    assert!(!r.path().join("s-1").exists());
    let unknown = SessionSandbox::resume(r.path(), "s-1", options(serde_json::json!({ "mode": "deny-all" }), vec![]));
    assert_eq!(unknown.await.err().unwrap().code, Code::NotFound);
    for bad in ["", "../x", "a/b", "é"] {
        let e = SessionSandbox::create(r.path(), bad, options(serde_json::json!({ "mode": "deny-all" }), vec![]));
        assert_eq!(e.await.err().unwrap().code, Code::Configuration, "{bad:?}");
    }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn exposed_ports_are_reached_from_the_host_and_set_ports_replaces_them() {
    let r = root();
    let s = std::sync::Arc::new(
        SessionSandbox::create(r.path(), "ports", options(serde_json::json!({ "mode": "deny-all" }), vec![4010]))
            .await
            .unwrap(),
    );
    assert_eq!(s.ports(), vec![4010]);
    assert!(s.port_url(4011, "http").is_none());
    let server = s.clone();
    let serve = tokio::spawn(async move {
        sh(&server, "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"127.0.0.1:4010\", Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) { print $c \"inside\\n\"; close $c }'").await
    });
    let url = s.port_url(4010, "http").unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(s.port_url(4010, "ws").unwrap().starts_with("ws://127.0.0.1:"));
    let addr = url.trim_start_matches("http://").to_string();
    let got = tokio::task::spawn_blocking(move || {
        let start = std::time::Instant::now();
        loop {
            let mut text = String::new();
            if let Ok(mut c) = std::net::TcpStream::connect(&addr) {
                let _ = c.read_to_string(&mut text);
                if !text.is_empty() {
                    return text;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "the port never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    assert_eq!(got, "inside\n");
    s.set_ports(&[]).await.unwrap();
    assert!(s.port_url(4010, "http").is_none());
    let addr = url.trim_start_matches("http://").to_string();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(std::net::TcpStream::connect(&addr).is_err(), "a port set_ports removed still answers");
    s.stop().await;
    assert!(tokio::time::timeout(Duration::from_secs(10), serve).await.is_ok(), "stop left the server running");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_proxy_inside_follows_the_sessions_policy() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in host.incoming() {
            let Ok(mut c) = c else { continue };
            let mut buf = [0u8; 2048];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\nconnection: close\r\n\r\nhost");
        }
    });
    let r = root();
    let s = SessionSandbox::create(
        r.path(),
        "policy",
        options(serde_json::json!({ "mode": "custom", "allowedCIDRs": ["127.0.0.1/32"] }), vec![]),
    )
    .await
    .unwrap();
    let curl = format!("curl -s --max-time 10 -w ' %{{http_code}}' http://127.0.0.1:{port}/");
    assert_eq!(sh(&s, &curl).await.stdout, "host 200");
    s.set_policy(NetworkPolicy::DenyAll).unwrap();
    assert!(sh(&s, &curl).await.stdout.ends_with(" 403"));
    // Without the proxy, 127.0.0.1 is the session's own loopback.
    let direct = sh(
        &s,
        &format!("curl -s --noproxy '*' --max-time 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/"),
    )
    .await;
    assert_eq!(direct.stdout, "000");
    s.destroy().await.unwrap();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_later_session_of_an_identity_starts_with_what_the_first_left_in_tmp_and_home() {
    let r = root();
    let deny = || options(serde_json::json!({ "mode": "deny-all" }), vec![]);
    let (first, found) = SessionSandbox::create_for(r.path(), "first", "claude-code@1", deny()).await.unwrap();
    assert!(!found, "no state yet");
    let out = sh(
        &first,
        "mkdir -p /tmp/harness && echo installed > /tmp/harness/marker && ln -s /etc/passwd $HOME/link && echo h > $HOME/h && echo w > /workspace/w && echo ok",
    )
    .await;
    assert_eq!(out.stdout, "ok\n", "{out:?}");
    first.save_identity("claude-code@1").unwrap();
    // The state outlives the session that made it.
    first.destroy().await.unwrap();
    let (second, found) = SessionSandbox::create_for(r.path(), "second", "claude-code@1", deny()).await.unwrap();
    assert!(found);
    let out = sh(&second, "cat /tmp/harness/marker $HOME/h; readlink $HOME/link; ls /workspace | wc -l").await;
    assert_eq!(out.stdout, "installed\nh\n/etc/passwd\n0\n", "{out:?}");
    // The link was copied as a link, not followed.
    assert!(std::fs::symlink_metadata(second.dir().join("home/link")).unwrap().file_type().is_symlink());
    let (third, found) = SessionSandbox::create_for(r.path(), "third", "another", deny()).await.unwrap();
    assert!(!found);
    assert_eq!(sh(&third, "ls /tmp | wc -l").await.stdout, "0\n");
    second.destroy().await.unwrap();
    third.destroy().await.unwrap();
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_session_sees_neither_another_sessions_files_nor_hidden_paths_where_the_host_shows_them() {
    // A sessions root under /var/tmp, which the session's root shows (read-only) from the host.
    let r = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::set_permissions(r.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let secret_dir = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(secret_dir.path().join("key"), "host secret").unwrap();
    let hidden = std::fs::canonicalize(secret_dir.path()).unwrap();
    let mut opts = options(serde_json::json!({ "mode": "deny-all" }), vec![]);
    linux(&mut opts).hide = Some(vec![hidden.to_str().unwrap().to_string()]);
    let a = SessionSandbox::create(r.path(), "a", opts).await.unwrap();
    let b = SessionSandbox::create(r.path(), "b", options(serde_json::json!({ "mode": "deny-all" }), vec![]))
        .await
        .unwrap();
    assert_eq!(sh(&a, "echo mine > /workspace/secret && echo ok").await.stdout, "ok\n");
    let a_file = a.dir().join("workspace/secret");
    assert!(a_file.is_file());
    let r_b = sh(&b, &format!("cat {} 2>&1 || echo refused", a_file.display())).await;
    assert!(r_b.stdout.ends_with("refused\n") && !r_b.stdout.contains("mine"), "{r_b:?}");
    let r_a = sh(&a, &format!("cat {}/key 2>&1 || echo refused", hidden.display())).await;
    assert!(r_a.stdout.ends_with("refused\n") && !r_a.stdout.contains("host secret"), "{r_a:?}");
    a.destroy().await.unwrap();
    b.destroy().await.unwrap();
}

/// Every regular file under `dir`, read without following a link.
fn file_texts(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                out.push(std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    out
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn saving_an_identity_while_a_command_swaps_files_for_links_copies_no_host_file() {
    let secret = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(secret.path().join("key"), "host secret").unwrap();
    let key = std::fs::canonicalize(secret.path().join("key")).unwrap();
    let keydir = std::fs::canonicalize(secret.path()).unwrap();
    let r = root();
    let s = std::sync::Arc::new(
        SessionSandbox::create(r.path(), "swapper", options(serde_json::json!({ "mode": "deny-all" }), vec![]))
            .await
            .unwrap(),
    );
    let swapper = s.clone();
    // Fifty names, each turned from a file into a link to the host's secret and back, as fast
    // as renames go.
    let script = format!(
        "cd /tmp && perl -e 'while (1) {{ for $i (1..50) {{ open(F, \">a$i\"); print F \"a\"; close F; rename(\"a$i\", \"f$i\"); symlink(\"{k}\", \"s$i\"); rename(\"s$i\", \"f$i\"); mkdir(\"e$i\"); rename(\"e$i\", \"d$i\") or do {{ rmdir(\"d$i\"); }}; symlink(\"{d}\", \"t$i\"); rename(\"t$i\", \"d$i\") }} }}'",
        k = key.display(),
        d = keydir.display()
    );
    let run = tokio::spawn(async move { swapper.run(&script, None, &BTreeMap::new(), None, 60_000, None, None).await });
    let tmp = s.dir().join("tmp");
    let started = std::time::Instant::now();
    while !tmp.join("d50").exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "the swapping never started: {:?}", run);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let state = r.path().join(".identities");
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let mut saves = 0;
    while std::time::Instant::now() < until {
        // A save may fail when an entry vanishes under it; it never copies through a link.
        if s.save_identity("swapped").is_ok() {
            saves += 1;
        }
        for text in file_texts(&state) {
            assert!(!text.contains("host secret"), "a host file reached the identity's state");
        }
    }
    eprintln!("completed saves: {saves}");
    assert!(saves > 3, "too few saves to mean anything: {saves}");
    s.stop().await;
    let _ = run.await;
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_sessions_pids_limit_stops_a_fork_bomb_and_says_so() {
    if crate::shell::exec::cgroup::Cgroup::create().is_none() {
        eprintln!("skipped: no writable control group here (an unprivileged user)");
        return;
    }
    let r = root();
    let mut opts = options(serde_json::json!({ "mode": "deny-all" }), vec![]);
    linux(&mut opts).limits = crate::sandbox::limits::Limits { pids: Some(16), ..Default::default() };
    let s = SessionSandbox::create(r.path(), "limited", opts).await.unwrap();
    let out = sh(&s, "i=0; while [ $i -lt 60 ]; do sleep 3 & i=$((i+1)); done; echo spawned").await;
    assert!(out.note.as_deref().is_some_and(|n| n.contains("pids")), "{out:?}");
    s.destroy().await.unwrap();
}

fn linux(o: &mut SessionOptions) -> &mut LinuxSandboxOptions {
    match &mut o.sandbox {
        SessionKind::Linux(l) => l,
        SessionKind::Docker(_) => unreachable!("a LinuxSandbox session's options"),
    }
}

/// The session's keeper runs in a root of its own (a mount namespace the library's trees were not
/// made in): the process prepared for the next command gets its copies of the trees from the
/// library, and commands after the first start there.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_sessions_commands_after_the_first_start_in_prepared_processes() {
    let r = root();
    let s = SessionSandbox::create(r.path(), "s-prep", options(serde_json::json!({ "mode": "deny-all" }), vec![]))
        .await
        .unwrap();
    for i in 0..3 {
        let out = sh(&s, &format!("echo {i} > /workspace/n; cat /workspace/n; ls /tmp")).await;
        assert_eq!((out.stdout, out.exit_code), (format!("{i}\n"), Some(0)));
    }
    assert_eq!(s.keeper().map(|k| k.prepared_starts()), Some(2));
    s.stop().await;
}
