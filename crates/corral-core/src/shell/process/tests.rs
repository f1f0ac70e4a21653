use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::tools::{call, start_background};
use super::*;
use crate::shell::exec::{InheritEnv, LocalShell};
use crate::shell::tool::ShellToolOptions;

fn local() -> (tempfile::TempDir, Arc<dyn ShellProvider>) {
    let dir = tempfile::tempdir().unwrap();
    let shell = LocalShell::new(dir.path().to_path_buf(), Default::default(), InheritEnv::None);
    (dir, Arc::new(shell))
}

fn opts() -> ShellToolOptions {
    ShellToolOptions { background: true, ..ShellToolOptions::default() }
}

async fn start(shell: &Arc<dyn ShellProvider>, procs: &Processes, command: &str) -> String {
    let v =
        start_background(shell.clone(), &opts(), procs, &json!({ "command": command, "run_in_background": true }), "s")
            .await
            .unwrap();
    assert_eq!(v["running"], true);
    v["id"].as_str().unwrap().to_string()
}

/// Reads until `until` says the collected stdout is complete (or 20 s pass).
async fn read_until(procs: &Processes, id: &str, until: impl Fn(&str, &Value) -> bool) -> (String, Value) {
    let started = Instant::now();
    let mut all = String::new();
    loop {
        let v = call(procs, "process_output", &json!({ "id": id, "wait_ms": 500 }), "s", None, None).await.unwrap();
        all.push_str(v["stdout"].as_str().unwrap());
        if until(&all, &v) || started.elapsed() > Duration::from_secs(20) {
            return (all, v);
        }
    }
}

fn alive(pid: i32) -> bool {
    // Signal 0 checks without killing; a zombie is reaped by its parent, so it counts as gone once
    // its state says so.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() && !status.contains("State:\tZ")
}

#[tokio::test]
async fn a_background_command_keeps_running_and_its_new_output_is_read_later() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let id = start(&shell, &procs, "echo one; sleep 0.3; echo two; sleep 0.3; exit 3").await;
    assert_eq!(id, "p1");
    let (out, last) = read_until(&procs, &id, |_, v| v["running"] == false).await;
    assert_eq!(out, "one\ntwo\n");
    assert_eq!(last["exitCode"], 3);
    // Nothing new after the end.
    let again = call(&procs, "process_output", &json!({ "id": id }), "s", None, None).await.unwrap();
    assert_eq!((again["stdout"].as_str(), again["running"].as_bool()), (Some(""), Some(false)));
    let list = call(&procs, "process_list", &json!({}), "s", None, None).await.unwrap();
    assert_eq!(
        list,
        json!([{ "id": "p1", "command": "echo one; sleep 0.3; echo two; sleep 0.3; exit 3", "running": false, "exitCode": 3 }])
    );
}

#[tokio::test]
async fn input_reaches_the_process_and_closing_it_ends_a_reader() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let id = start(&shell, &procs, "while read line; do echo \"got $line\"; done; echo bye").await;
    call(&procs, "process_input", &json!({ "id": id, "text": "a\n" }), "s", None, None).await.unwrap();
    let (out, _) = read_until(&procs, &id, |o, _| o.contains("got a")).await;
    assert_eq!(out, "got a\n");
    call(&procs, "process_input", &json!({ "id": id, "text": "b\n", "close": true }), "s", None, None).await.unwrap();
    let (out, last) = read_until(&procs, &id, |_, v| v["running"] == false).await;
    assert_eq!(out, "got b\nbye\n");
    assert_eq!(last["exitCode"], 0);
    let e = call(&procs, "process_input", &json!({ "id": id, "text": "c" }), "s", None, None).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
}

#[tokio::test]
async fn stop_kills_every_process_of_the_group_and_returns_the_last_output() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let id = start(&shell, &procs, "sleep 300 & echo $!; sleep 300 & echo $!; echo started; wait").await;
    let (out, _) = read_until(&procs, &id, |o, _| o.contains("started")).await;
    let pids: Vec<i32> = out.lines().filter_map(|l| l.parse().ok()).collect();
    assert_eq!(pids.len(), 2, "{out}");
    assert!(pids.iter().all(|&p| alive(p)));
    let v = call(&procs, "process_stop", &json!({ "id": id }), "s", None, None).await.unwrap();
    assert_eq!(v["running"], false);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(pids.iter().all(|&p| !alive(p)), "{pids:?} still alive");
}

#[tokio::test]
async fn a_session_runs_at_most_sixteen_and_sees_only_its_own() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    for _ in 0..MAX_RUNNING_PER_SESSION {
        start(&shell, &procs, "sleep 30").await;
    }
    let e = start_background(
        shell.clone(),
        &opts(),
        &procs,
        &json!({ "command": "sleep 1", "run_in_background": true }),
        "s",
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, Code::CommandRefused);
    // Another session has its own sixteen, and cannot read these.
    start_background(shell.clone(), &opts(), &procs, &json!({ "command": "true", "run_in_background": true }), "t")
        .await
        .unwrap();
    let e = call(&procs, "process_output", &json!({ "id": "p1" }), "t", None, None).await.unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    procs.close().await;
    let list = call(&procs, "process_list", &json!({}), "s", None, None).await.unwrap();
    assert!(list.as_array().unwrap().iter().all(|p| p["running"] == false), "{list}");
}

#[tokio::test]
async fn a_process_past_its_lifetime_is_stopped_with_a_note() {
    let (_d, shell) = local();
    let procs = Processes::new(300);
    let id = start(&shell, &procs, "sleep 30").await;
    let (_, last) = read_until(&procs, &id, |_, v| v["running"] == false).await;
    assert_eq!(last["running"], false);
    assert!(last["note"].as_str().unwrap().contains("backgroundTimeoutMs"), "{last}");
}

#[tokio::test]
async fn the_rules_apply_to_a_background_start() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let o =
        ShellToolOptions::from_options(&json!({ "background": true, "deny": ["rm"] }), &|_| None, None, None).unwrap();
    let e = start_background(shell, &o, &procs, &json!({ "command": "rm -rf x", "run_in_background": true }), "s")
        .await
        .unwrap_err();
    assert_eq!(e.code, Code::CommandRefused);
    assert_eq!(procs.list("s"), json!([]));
}

#[tokio::test]
async fn ended_processes_are_remembered_up_to_a_bound_the_oldest_forgotten_first() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    for _ in 0..MAX_ENDED + 10 {
        let id = start(&shell, &procs, "true").await;
        read_until(&procs, &id, |_, v| v["running"] == false).await;
    }
    let list = procs.list("s");
    let ids: Vec<&str> = list.as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), MAX_ENDED);
    assert_eq!(ids.last().copied(), Some(format!("p{}", MAX_ENDED + 10).as_str()));
    assert!(!ids.contains(&"p1"));
}

#[tokio::test]
async fn a_child_left_running_when_the_command_ends_is_killed_with_it() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let id = start(&shell, &procs, "sleep 300 >/dev/null 2>&1 & echo $!").await;
    let (out, last) = read_until(&procs, &id, |_, v| v["running"] == false).await;
    assert_eq!(last["running"], false);
    let pid: i32 = out.trim().parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "{pid} outlived its background command");
}

#[tokio::test]
async fn input_to_a_process_that_does_not_read_is_bounded() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let id = start(&shell, &procs, "exec sleep 300").await;
    let mut refused = None;
    for i in 0..crate::shell::INPUT_QUEUE * 4 {
        if let Err(e) = procs.input("s", &id, "x".repeat(64 * 1024).as_bytes(), false) {
            refused = Some((i, e));
            break;
        }
    }
    let (i, e) = refused.expect("writes to a process that does not read are refused at some point");
    assert!(i >= crate::shell::INPUT_QUEUE, "{i}");
    assert!(e.message.contains("not reading its input"), "{}", e.message);
    procs.close().await;
}

/// Reads a process to its end through the bytes face: its stdout and how it ended.
async fn read_to_end(procs: &Processes, id: &str) -> (Vec<u8>, ExecResult) {
    let started = Instant::now();
    let mut out = Vec::new();
    loop {
        let r = procs.read("s", id, 500, None, false).await.unwrap();
        out.extend_from_slice(&r.stdout);
        if let Some(end) = r.ended {
            return (out, end);
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{id} did not end");
    }
}

#[tokio::test]
async fn a_spawn_request_runs_in_its_own_directory_with_its_variables_and_bytes_pass_unchanged() {
    let (d, shell) = local();
    std::fs::create_dir(d.path().join("sub")).unwrap();
    let procs = Processes::new(60_000);
    let opts = ShellToolOptions { env: [("A".to_string(), "tool".to_string())].into(), ..opts() };
    let request = tools::Request {
        cwd: Some("sub".into()),
        env: [("B".to_string(), "call".to_string())].into(),
        input: true,
        keep_bytes: None,
        asked: false,
    };
    let id = tools::spawn(shell.clone(), &opts, &procs, "pwd; echo \"$A $B\"; cat", &request, "s").await.unwrap();
    procs.feed("s", &id, vec![0xff, 0x00, 0x80], false).await.unwrap();
    procs.feed("s", &id, Vec::new(), true).await.unwrap();
    let (out, end) = read_to_end(&procs, &id).await;
    let want = format!("{}\ntool call\n", d.path().join("sub").display());
    assert_eq!(&out[..want.len()], want.as_bytes());
    assert_eq!(&out[want.len()..], &[0xff, 0x00, 0x80]);
    assert_eq!(end.exit_code, Some(0));
    // Its input is closed: another write is refused.
    assert_eq!(procs.feed("s", &id, b"x".to_vec(), false).await.unwrap_err().code, Code::InvalidArguments);
}

#[tokio::test]
async fn a_spawn_request_the_rules_refuse_never_runs() {
    let (d, shell) = local();
    let procs = Processes::new(60_000);
    let deny = crate::shell::tool::ShellToolOptions::from_options(&json!({ "deny": ["touch"] }), &|_| None, None, None)
        .unwrap()
        .deny;
    let opts = ShellToolOptions { deny, ..opts() };
    let e = tools::spawn(shell, &opts, &procs, "touch made", &tools::Request::default(), "s").await.unwrap_err();
    assert_eq!(e.code, Code::CommandRefused);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!d.path().join("made").exists());
    assert_eq!(procs.list("s"), json!([]));
}

#[tokio::test]
async fn a_spawn_request_for_input_is_refused_before_it_starts_where_the_shell_cannot_pass_it() {
    let shell: Arc<dyn ShellProvider> = Arc::new(crate::shell::StubShell::new(None));
    let procs = Processes::new(60_000);
    let request = tools::Request { input: true, ..Default::default() };
    let e = tools::spawn(shell, &opts(), &procs, "cat", &request, "s").await.unwrap_err();
    assert!(matches!(e.code, Code::InvalidArguments | Code::CommandRefused), "{e:?}");
    assert_eq!(procs.list("s"), json!([]));
}

#[tokio::test]
async fn a_spawn_request_without_input_reads_end_of_file_and_a_cut_is_counted_not_spliced_in() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    // `cat` with its input closed ends at once.
    let id =
        tools::spawn(shell.clone(), &opts(), &procs, "cat; echo after", &tools::Request::default(), "s").await.unwrap();
    let (out, end) = read_to_end(&procs, &id).await;
    assert_eq!((out.as_slice(), end.exit_code), (&b"after\n"[..], Some(0)));
    // A bound of 64 bytes, 1000 written before anyone reads: the bytes kept, the rest counted.
    let request = tools::Request { keep_bytes: Some(64), ..Default::default() };
    let id = tools::spawn(shell, &opts(), &procs, "head -c 1000 /dev/zero | tr '\\0' x; sleep 0.3", &request, "s")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let r = procs.read("s", &id, 0, None, false).await.unwrap();
    assert_eq!(r.stdout, vec![b'x'; 64]);
    assert_eq!(r.cut, 936);
}

#[test]
fn text_for_an_id_that_names_no_process_yet_needs_approval() {
    // The attack: while the user is asked about `sh` in the background, the model sends text to
    // the id it will get; a call checked before the process exists must not run unasked after.
    let procs = Processes::new(60_000);
    assert!(procs.input_needs_approval(&serde_json::json!({ "id": "p1", "text": "touch x\n" })));
    assert!(!procs.input_needs_approval(&serde_json::json!({ "id": "p1", "text": "" })));
}

#[tokio::test]
async fn run_to_end_keeps_both_streams_whole_and_stops_a_command_past_its_bound_or_its_cancel() {
    let (_d, shell) = local();
    let procs = Processes::new(60_000);
    let request = tools::Request::default();
    // Both streams whole, past what one read would carry.
    let command = "head -c 300000 /dev/zero | tr '\\0' o; head -c 200000 /dev/zero | tr '\\0' e >&2; exit 4";
    let id = tools::spawn(shell.clone(), &opts(), &procs, command, &request, "s").await.unwrap();
    let r = procs.run_to_end("s", &id, None).await.unwrap();
    assert_eq!((r.stdout.len(), r.stderr.len(), r.ended.exit_code), (300_000, 200_000, Some(4)));
    assert!(r.stdout.iter().all(|b| *b == b'o') && r.stderr.iter().all(|b| *b == b'e'));
    // Past the bound: stopped, and the call fails once it has ended.
    let id = tools::spawn(shell.clone(), &opts(), &procs, "yes", &request, "s").await.unwrap();
    let e = procs.run_to_end("s", &id, None).await.unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{e:?}");
    assert_eq!(procs.list("s").as_array().unwrap().iter().filter(|p| p["running"] == true).count(), 0);
    // A cancel stops it long before it would end.
    let id = tools::spawn(shell, &opts(), &procs, "sleep 30", &request, "s").await.unwrap();
    let cancel = Cancel::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        later.cancel();
    });
    let started = Instant::now();
    let r = procs.run_to_end("s", &id, Some(&cancel)).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
    assert_eq!(r.ended.exit_code, None);
    // A command read to its end is not kept among the ended ones.
    assert_eq!(procs.list("s"), serde_json::json!([]));
}
