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
        let v = call(procs, "process_output", &json!({ "id": id, "wait_ms": 500 }), "s", None).await.unwrap();
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
    let again = call(&procs, "process_output", &json!({ "id": id }), "s", None).await.unwrap();
    assert_eq!((again["stdout"].as_str(), again["running"].as_bool()), (Some(""), Some(false)));
    let list = call(&procs, "process_list", &json!({}), "s", None).await.unwrap();
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
    call(&procs, "process_input", &json!({ "id": id, "text": "a\n" }), "s", None).await.unwrap();
    let (out, _) = read_until(&procs, &id, |o, _| o.contains("got a")).await;
    assert_eq!(out, "got a\n");
    call(&procs, "process_input", &json!({ "id": id, "text": "b\n", "close": true }), "s", None).await.unwrap();
    let (out, last) = read_until(&procs, &id, |_, v| v["running"] == false).await;
    assert_eq!(out, "got b\nbye\n");
    assert_eq!(last["exitCode"], 0);
    let e = call(&procs, "process_input", &json!({ "id": id, "text": "c" }), "s", None).await.unwrap_err();
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
    let v = call(&procs, "process_stop", &json!({ "id": id }), "s", None).await.unwrap();
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
    let e = call(&procs, "process_output", &json!({ "id": "p1" }), "t", None).await.unwrap_err();
    assert_eq!(e.code, Code::NotFound);
    procs.close().await;
    let list = call(&procs, "process_list", &json!({}), "s", None).await.unwrap();
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
    let o = ShellToolOptions::from_options(&json!({ "background": true, "deny": ["rm"] }), &|_| None, None).unwrap();
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
        if let Err(e) = procs.input("s", &id, &"x".repeat(64 * 1024), false) {
            refused = Some((i, e));
            break;
        }
    }
    let (i, e) = refused.expect("writes to a process that does not read are refused at some point");
    assert!(i >= crate::shell::INPUT_QUEUE, "{i}");
    assert!(e.message.contains("not reading its input"), "{}", e.message);
    procs.close().await;
}
