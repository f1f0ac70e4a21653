//! Against a real Docker Engine: started by `scripts/dockerd-test.sh start <dir>` (Engine 20.10
//! on a private socket, no bridge, image `corral-busybox:latest`) and named by
//! `CORRAL_DOCKER_HOST=unix://<dir>/docker.sock`. The tests are `#[ignore]`d, so a plain
//! `cargo test` reports them as ignored, never as passed; `npm test` runs them with `--ignored`
//! when it could start an engine, and then a missing variable is a failure.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Method;
use serde_json::Value;

use super::{arc, env, RecordingBroker};
use crate::error::Code;
use crate::sandbox::docker::engine::{DockerClient, DockerHost};
use crate::sandbox::*;
use crate::shell::exec::{run_shell_command, InheritEnv};
use crate::shell::{Cancel, ExecOptions, ShellProvider};

const IMAGE: &str = "corral-busybox:latest";

fn real_host(test: &str) -> String {
    match std::env::var("CORRAL_DOCKER_HOST") {
        Ok(h) if !h.trim().is_empty() => h,
        _ => panic!("{test} needs a Docker Engine: set CORRAL_DOCKER_HOST (see scripts/dockerd-test.sh)"),
    }
}

fn sandbox(host: &str, network: Network, broker: Option<Arc<RecordingBroker>>) -> Arc<SubprocessSandbox> {
    arc(SubprocessSandbox::new(SubprocessSandboxOptions {
        image: IMAGE.into(),
        network,
        broker: broker.map(|b| b as Arc<dyn EgressBroker>),
        network_name: None,
        docker_host: Some(host.into()),
        limits: Default::default(),
        reuse: Default::default(),
        tls: None,
        protect: Vec::new(),
        overlay: false,
    })
    .unwrap())
}

fn client(host: &str) -> DockerClient {
    match DockerHost::parse(host).unwrap() {
        h @ DockerHost::Unix(_) => DockerClient::at(h),
        other => panic!("CORRAL_DOCKER_HOST must be unix://, not {other}"),
    }
}

/// Every container (running or not) that mounts `dir` or a directory under it.
async fn containers_for(host: &str, dir: &Path) -> Vec<Value> {
    let all = client(host).json(Method::GET, "/containers/json?all=1", None).await.unwrap();
    let dir = dir.to_str().unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["Mounts"].as_array().is_some_and(|ms| {
                ms.iter().any(|m| m["Source"].as_str().is_some_and(|s| s == dir || s.starts_with(&format!("{dir}/"))))
            })
        })
        .cloned()
        .collect()
}

fn workdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    (dir, real)
}

fn opts(timeout_ms: u64) -> ExecOptions {
    ExecOptions { timeout_ms: Some(timeout_ms), ..Default::default() }
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_network_none_lifecycle() {
    let host = real_host("real_engine_network_none_lifecycle");
    std::env::set_var("CORRAL_SBX_REAL_SECRET", "real-secret");
    std::env::set_var("CORRAL_SBX_REAL_LISTED", "listed");
    let (_d, dir) = workdir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("from-host.txt"), "host data\n").unwrap();
    let shell = SandboxShell::new(
        sandbox(&host, Network::None, None),
        &dir,
        env(&[("GIVEN", "yes")]),
        InheritEnv::List(vec!["CORRAL_SBX_REAL_LISTED".into()]),
    )
    .unwrap();
    let script = "ls /sys/class/net; echo ---; env; echo ---; cat from-host.txt; echo written > out.txt; pwd; id -u";
    let r = shell.exec(script, opts(30_000)).await.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let parts: Vec<&str> = r.stdout.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{}", r.stdout);
    // Only the loopback interface: NetworkMode none.
    assert_eq!(parts[0].split_whitespace().collect::<Vec<_>>(), vec!["lo"], "{}", r.stdout);
    // Only the given variables (plus what the runtime and sh add), none of the host's.
    let vars: Vec<(&str, &str)> = parts[1].lines().filter_map(|l| l.split_once('=')).collect();
    assert!(vars.contains(&("GIVEN", "yes")) && vars.contains(&("CORRAL_SBX_REAL_LISTED", "listed")), "{vars:?}");
    for (name, value) in &vars {
        assert!(
            matches!(*name, "GIVEN" | "CORRAL_SBX_REAL_LISTED" | "PATH" | "HOME" | "HOSTNAME" | "PWD" | "SHLVL"),
            "unexpected variable {name}={value}"
        );
    }
    let host_path = std::env::var("PATH").unwrap();
    assert!(!vars.contains(&("PATH", host_path.as_str())), "the host's PATH leaked");
    assert!(!r.stdout.contains("real-secret"));
    // The bind-mounted cwd, at the same path, readable and writable.
    let rest: Vec<&str> = parts[2].lines().collect();
    assert_eq!(rest, vec!["host data", dir.to_str().unwrap(), "0"], "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(dir.join("out.txt")).unwrap(), "written\n");
    // A per-call cwd below it.
    let r = shell.exec("pwd; touch here", ExecOptions { cwd: Some("sub".into()), ..opts(30_000) }).await.unwrap();
    assert_eq!(r.stdout.trim_end(), dir.join("sub").to_str().unwrap());
    assert!(dir.join("sub/here").exists());
    assert!(containers_for(&host, &dir).await.is_empty(), "containers left behind");
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_streams_output_while_the_container_runs() {
    use crate::shell::{OutputSink, Sink, Stream};
    struct Recorder(std::sync::Mutex<Vec<(Instant, Stream, String)>>);
    impl OutputSink for Recorder {
        fn output(&self, stream: Stream, chunk: &[u8]) {
            self.0.lock().unwrap().push((Instant::now(), stream, String::from_utf8_lossy(chunk).into_owned()));
        }
    }
    let host = real_host("real_engine_streams_output_while_the_container_runs");
    let (_d, dir) = workdir();
    let shell = SandboxShell::new(sandbox(&host, Network::None, None), &dir, env(&[]), InheritEnv::None).unwrap();
    let rec = Arc::new(Recorder(Default::default()));
    let o = ExecOptions { on_output: Some(Sink(rec.clone())), ..opts(30_000) };
    let r = shell.exec("echo first; sleep 1; echo second >&2", o).await.unwrap();
    let done = Instant::now();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str()), ("first\n", "second\n"));
    let seen = rec.0.lock().unwrap().clone();
    assert_eq!(seen.first().map(|(_, s, t)| (*s, t.as_str())), Some((Stream::Stdout, "first\n")));
    assert!(
        done.duration_since(seen[0].0) >= Duration::from_millis(500),
        "the first output came while the command ran"
    );
    assert!(seen.iter().any(|(_, s, t)| *s == Stream::Stderr && t == "second\n"));
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_exit_codes_output_and_stdin() {
    let host = real_host("real_engine_exit_codes_output_and_stdin");
    let (_d, dir) = workdir();
    let shell = SandboxShell::new(sandbox(&host, Network::None, None), &dir, env(&[]), InheritEnv::None).unwrap();
    let r = shell.exec("echo out; echo err >&2; exit 3", opts(30_000)).await.unwrap();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str(), r.exit_code), ("out\n", "err\n", Some(3)));
    assert!(!r.timed_out && !r.aborted && r.signal.is_none());
    let r = shell.exec("no-such-command-xyz", opts(30_000)).await.unwrap();
    assert_eq!(r.exit_code, Some(127));
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
    // stdin fed, then closed.
    let r = shell
        .exec("cat; echo; echo done", ExecOptions { stdin: Some("hello\nworld".into()), ..opts(30_000) })
        .await
        .unwrap();
    assert_eq!(r.stdout, "hello\nworld\ndone\n");
    // No stdin: closed, not inherited, so `cat` ends at once.
    let start = Instant::now();
    let r = shell.exec("cat; echo rc=$?", opts(10_000)).await.unwrap();
    assert_eq!(r.stdout, "rc=0\n");
    assert!(!r.timed_out && start.elapsed() < Duration::from_secs(8));
    // Larger output, interleaved streams.
    let r = shell
        .exec("i=0; while [ $i -lt 2000 ]; do echo line$i; echo e$i >&2; i=$((i+1)); done", opts(30_000))
        .await
        .unwrap();
    assert_eq!(r.stdout.lines().count(), 2000);
    assert_eq!(r.stderr.lines().last(), Some("e1999"));
    assert!(containers_for(&host, &dir).await.is_empty());
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_timeout_kills_and_removes_the_container() {
    let host = real_host("real_engine_timeout_kills_and_removes_the_container");
    let (_d, dir) = workdir();
    let shell = SandboxShell::new(sandbox(&host, Network::None, None), &dir, env(&[]), InheritEnv::None).unwrap();
    let start = Instant::now();
    let r = shell.exec("echo started; sleep 30; touch late", opts(1500)).await.unwrap();
    assert!(r.timed_out && !r.aborted, "{r:?}");
    assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("SIGKILL")));
    assert_eq!(r.stdout, "started\n");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
    assert!(containers_for(&host, &dir).await.is_empty(), "the timed-out container is left");
    assert!(!dir.join("late").exists());
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_cancel_kills_and_removes_the_container() {
    let host = real_host("real_engine_cancel_kills_and_removes_the_container");
    let (_d, dir) = workdir();
    let shell = SandboxShell::new(sandbox(&host, Network::None, None), &dir, env(&[]), InheritEnv::None).unwrap();
    let cancel = Cancel::new();
    let c = cancel.clone();
    let marker = dir.join("running");
    tokio::spawn(async move {
        // Cancel once the command is really running in its container.
        for _ in 0..200 {
            if marker.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        c.cancel();
    });
    let start = Instant::now();
    let r = shell
        .exec("touch running; sleep 30", ExecOptions { cancel: Some(cancel.clone()), ..opts(60_000) })
        .await
        .unwrap();
    assert!(r.aborted && !r.timed_out, "{r:?}");
    assert_eq!(r.signal.as_deref(), Some("SIGKILL"));
    assert!(start.elapsed() < Duration::from_secs(12), "{:?}", start.elapsed());
    assert!(dir.join("running").exists());
    assert!(containers_for(&host, &dir).await.is_empty(), "the aborted container is left");

    // An already-aborted signal starts no container.
    let r = shell.exec("touch never", ExecOptions { cancel: Some(cancel), ..opts(10_000) }).await.unwrap();
    assert!(r.aborted);
    assert!(!dir.join("never").exists());
    assert!(containers_for(&host, &dir).await.is_empty());
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_dropping_the_run_removes_the_container() {
    let host = real_host("real_engine_dropping_the_run_removes_the_container");
    let (_d, dir) = workdir();
    let shell = SandboxShell::new(sandbox(&host, Network::None, None), &dir, env(&[]), InheritEnv::None).unwrap();
    // A boxed future (async_trait), so dropping it drops the run.
    let mut fut = shell.exec("touch running; sleep 30", opts(60_000));
    let marker = dir.join("running");
    let wait_marker = async {
        while !marker.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        _ = &mut fut => panic!("finished early"),
        _ = tokio::time::timeout(Duration::from_secs(20), wait_marker) => {}
    }
    drop(fut);
    assert_gone(&host, &dir).await;

    // A run dropped with its runtime (the task is dropped at the runtime's shutdown).
    let (_d2, dir2) = workdir();
    let shell =
        Arc::new(SandboxShell::new(sandbox(&host, Network::None, None), &dir2, env(&[]), InheritEnv::None).unwrap());
    let marker = dir2.join("running");
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let s = shell.clone();
        rt.spawn(async move { s.exec("touch running; sleep 30", opts(60_000)).await });
        for _ in 0..400 {
            if marker.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(rt);
    })
    .join()
    .unwrap();
    assert!(dir2.join("running").exists());
    assert_gone(&host, &dir2).await;
}

async fn assert_gone(host: &str, dir: &Path) {
    let mut left = Vec::new();
    for _ in 0..100 {
        left = containers_for(host, dir).await;
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_refuses_egress_on_an_engine_older_than_25_0_5() {
    let host = real_host("real_engine_refuses_egress_on_an_engine_older_than_25_0_5");
    let (_d, dir) = workdir();
    let broker = arc(RecordingBroker::default());
    let sb = sandbox(&host, Network::Allow(vec!["registry.npmjs.org".into()]), Some(broker.clone()));
    let shell = SandboxShell::new(sb.clone(), &dir, env(&[]), InheritEnv::None).unwrap();
    let e = shell.exec("touch ran", opts(30_000)).await.unwrap_err();
    assert_eq!(e.code, Code::EgressUnsupported, "{}", e.message);
    assert_eq!(e.code.as_str(), "LOUSHO_SANDBOX_EGRESS_UNSUPPORTED");
    assert!(e.message.contains("20.10") && e.message.contains("25.0.5"), "{}", e.message);
    assert!(!dir.join("ran").exists());
    assert!(containers_for(&host, &dir).await.is_empty());
    assert!(broker.listen_calls().is_empty());
    // No network was made either.
    let nets = client(&host).json(Method::GET, "/networks", None).await.unwrap();
    let names: Vec<&str> = nets.as_array().unwrap().iter().filter_map(|n| n["Name"].as_str()).collect();
    assert!(!names.contains(&sb.network_name()), "{names:?}");
    sb.close().await.unwrap();
}

/// Per-command overhead of SubprocessSandbox against plain `run_shell_command` (a benchmark,
/// not a test): `cargo test -p corral-core --lib sandbox_overhead_bench -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn sandbox_overhead_bench() {
    let host = real_host("sandbox_overhead_bench");
    let (_d, dir) = workdir();
    let sb = sandbox(&host, Network::None, None);
    const RUNS: usize = 11;
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    // Warm up both (API negotiation, page cache).
    sb.run(
        SandboxRequest {
            command: "true".into(),
            cwd: dir.to_str().unwrap().into(),
            timeout_ms: 30_000,
            ..Default::default()
        },
        None,
    )
    .await
    .unwrap();
    let mut plain = Vec::new();
    let mut boxed = Vec::new();
    let env = env(&[("PATH", "/usr/bin:/bin")]);
    for _ in 0..RUNS {
        let t = Instant::now();
        let r = run_shell_command("true", &dir, &env, None, Some(30_000), None, None, None).await.unwrap();
        plain.push(t.elapsed());
        assert_eq!(r.exit_code, Some(0));
        let t = Instant::now();
        let r = sb
            .run(
                SandboxRequest {
                    command: "true".into(),
                    cwd: dir.to_str().unwrap().into(),
                    timeout_ms: 30_000,
                    ..Default::default()
                },
                None,
            )
            .await
            .unwrap();
        boxed.push(t.elapsed());
        assert_eq!(r.exit_code, Some(0));
    }
    let (p, b) = (median(plain), median(boxed));
    println!(
        "sandbox overhead (median of {RUNS}, `true`): run_shell_command {:.1} ms, SubprocessSandbox {:.1} ms, overhead {:.1} ms",
        p.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        (b.saturating_sub(p)).as_secs_f64() * 1e3
    );
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_limits_stop_a_memory_hog_and_a_big_file_and_say_which() {
    let host = real_host("real_engine_limits_stop_a_memory_hog_and_a_big_file_and_say_which");
    let (_d, dir) = workdir();
    let limits = crate::sandbox::limits::Limits::from_option(
        Some(&serde_json::json!({ "memoryBytes": 32 << 20, "pids": 32, "fileSizeBytes": 4096 })),
        "SubprocessSandbox limits",
    )
    .unwrap();
    let sb = arc(SubprocessSandbox::new(SubprocessSandboxOptions {
        image: IMAGE.into(),
        docker_host: Some(host),
        limits,
        ..Default::default()
    })
    .unwrap());
    let shell = SandboxShell::new(sb, &dir, env(&[]), InheritEnv::None).unwrap();
    // tail keeps the last lines of a stream without line ends: it grows until the kernel stops it.
    let r = shell.exec("tail /dev/zero", opts(60_000)).await.unwrap();
    assert_ne!(r.exit_code, Some(0), "{r:?}");
    assert!(r.note.as_deref().is_some_and(|n| n.contains("memory")), "{r:?}");
    let r = shell.exec("dd if=/dev/zero of=big.bin bs=1024 count=100", opts(30_000)).await.unwrap();
    assert!(r.note.as_deref().is_some_and(|n| n.contains("file size")), "{r:?}");
    assert!(std::fs::metadata(dir.join("big.bin")).unwrap().len() <= 4096);
}

#[tokio::test]
#[ignore = "needs a Docker Engine (CORRAL_DOCKER_HOST); npm test runs it"]
async fn real_engine_overlay_mode_applies_a_commands_changes_when_its_container_ends() {
    let host = real_host("real_engine_overlay_mode_applies_a_commands_changes_when_its_container_ends");
    let (_d, dir) = workdir();
    std::fs::write(dir.join("host.txt"), "host\n").unwrap();
    std::fs::write(dir.join("gone.txt"), "gone\n").unwrap();
    let options = |reuse| SubprocessSandboxOptions {
        image: IMAGE.into(),
        docker_host: Some(host.clone()),
        protect: vec![".git".into()],
        overlay: true,
        reuse,
        ..Default::default()
    };
    let e = SubprocessSandbox::new(options(Reuse::Session)).expect_err("overlay with a kept container");
    assert!(e.message.contains("reuse: 'session'"), "{e:?}");
    let sb = arc(SubprocessSandbox::new(options(Reuse::Command)).unwrap());
    let manual = SandboxShell::new(sb.clone(), &dir, env(&[]), InheritEnv::None).unwrap().with_manual_changes();
    assert!(manual.is_err_and(|e| e.message.contains("needs LinuxSandbox")), "manual mode over a container");
    let shell = SandboxShell::new(sb, &dir, env(&[]), InheritEnv::None).unwrap();
    let run = shell.exec(
        "echo more >> host.txt && rm gone.txt && echo new > made.txt && mkdir -p sub/.git && echo x > sub/.git/config && sleep 1 && cat host.txt",
        opts(60_000),
    );
    let look = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        (std::fs::read_to_string(dir.join("host.txt")).unwrap(), dir.join("made.txt").exists())
    };
    let (r, during) = tokio::join!(run, look);
    let r = r.unwrap();
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert_eq!(r.stdout, "host\nmore\n");
    assert_eq!(during, ("host\n".to_string(), false), "the host changed while the container ran");
    let c = r.changes.expect("changes in overlay mode");
    assert_eq!(
        (c.added.clone(), c.modified.clone(), c.deleted.clone()),
        (vec!["made.txt".to_string()], vec!["host.txt".to_string()], vec!["gone.txt".to_string()])
    );
    assert_eq!(
        c.refused.iter().map(|x| (x.path.as_str(), x.reason.as_str())).collect::<Vec<_>>(),
        vec![("sub/.git", "protected")]
    );
    assert_eq!(std::fs::read_to_string(dir.join("host.txt")).unwrap(), "host\nmore\n");
    assert!(!dir.join("gone.txt").exists() && !dir.join("sub/.git").exists());
    assert!(containers_for(&host, &dir).await.is_empty(), "a container was left");
}
