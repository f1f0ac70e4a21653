//! A persistent session through its core API: files, `/tmp` and home kept, ports, the proxy
//! under the policy, stop, resume, destroy. Needs namespaces: `#[ignore]`d, and run by
//! scripts/test.sh (as root and as an unprivileged user).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use super::{SessionOptions, SessionSandbox};
use crate::broker::NetworkPolicy;
use crate::error::Code;
use crate::sandbox::linux::LinuxSandboxOptions;

fn options(policy: serde_json::Value, ports: Vec<u16>) -> SessionOptions {
    SessionOptions {
        sandbox: LinuxSandboxOptions::default(),
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
    let outside = again.run("pwd", Some("/etc"), &BTreeMap::new(), None, 20_000, None, None).await;
    assert_eq!(outside.unwrap_err().code, Code::NotFound);
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
    s.set_policy(NetworkPolicy::DenyAll);
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
