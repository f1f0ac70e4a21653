//! `reuse: 'session'`: one container per SandboxShell cwd, started on its first command and kept
//! until `close()`; each command runs in it through the exec API. A timeout or abort kills that
//! command's processes (every process but the container's init when no other command is
//! running in it, else the command's process group) and leaves the container usable.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::super::SandboxRequest;
use super::engine::DockerClient;
use super::{remove_container, Prepared, Streams, SubprocessSandbox, DRAIN, OWNER_LABEL, RUN_LABEL};
use crate::error::{Code, Error, Result};
use crate::shell::{Cancel, ExecResult};

/// PID 1 of a kept container: waits forever, reaps what it inherits, stops on SIGTERM.
const KEEPALIVE: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done";
/// A harness session's container: the Engine's init (`docker-init`, a read-only file of the
/// host's) is PID 1 and reaps, and its one child runs no program after the start. Nothing in the
/// container's own pid namespace ever runs a program from the container's files, which a command
/// can replace, so nothing a command planted runs beside its guards (`entry.rs`).
const SESSION_KEEPALIVE: &str = "exec sleep 2147483647";
/// Each command writes its pid as the first line of its stdout (docker starts an exec'd process
/// as the leader of its own session, so that is also its process group), then becomes the
/// command. Nothing the command does can change that line: it is written before the command
/// exists, and read by this process off the stream (no file in the container is trusted).
/// Its start time (field 22 of its `stat`) comes with it, so a kill never takes a later process
/// that got the same pid for this one.
const WRAPPER: &str = concat!(crate::sandbox::lead::lead_line!(), r#"; exec sh -c "$1""#);

/// One kept container.
pub(super) struct Kept {
    pub(super) id: String,
    /// Commands running in it now.
    running: AtomicUsize,
    /// The OOM kills its memory cgroup had counted when last looked at.
    oom_seen: std::sync::atomic::AtomicU64,
    /// What `protect` named when it started: a name any of its commands (or what they left
    /// running) made since is removed when a command starts or ends.
    baseline: Option<super::super::protect::Watch>,
    /// Set once (root, the engine on this machine): commands start through the keeper, each in
    /// a pid namespace of its own (`entry.rs`), not through the exec API.
    #[cfg(target_os = "linux")]
    entry: std::sync::OnceLock<Arc<super::entry::Entry>>,
}

impl Kept {
    #[cfg(target_os = "linux")]
    pub(super) fn enter(&self, entry: super::entry::Entry) {
        let _ = self.entry.set(Arc::new(entry));
    }
}

/// The kept containers of one sandbox, by the directory they mount.
#[derive(Default)]
pub(crate) struct Sessions {
    kept: tokio::sync::Mutex<HashMap<String, Arc<Kept>>>,
    /// `close()` ran: a session's container (never replaced) is not started again.
    closed: std::sync::atomic::AtomicBool,
}

impl Sessions {
    /// The container for `mount`, started on first use (one at a time: two first commands
    /// share one container).
    pub(super) async fn get_or_start(&self, sb: &SubprocessSandbox, p: &Prepared) -> Result<Arc<Kept>> {
        let mut kept = self.kept.lock().await;
        if let Some(k) = kept.get(&p.mount) {
            return Ok(k.clone());
        }
        if !sb.replaces_gone() && self.closed.load(Ordering::SeqCst) {
            return Err(Error::new(Code::Io, "The session was stopped; resume it to run commands again."));
        }
        let (found, baseline) = sb.protected_now(p)?;
        let harness = !sb.replaces_gone();
        let mut body = json!({
            "Image": sb.image(),
            "Entrypoint": ["sh", "-c"],
            "Cmd": [if harness { SESSION_KEEPALIVE } else { KEEPALIVE }],
            "WorkingDir": p.mount,
            "Tty": false,
            "Labels": sb.session_labels(),
            "HostConfig": sb.host_config(p, &found, None)?,
        });
        if harness {
            body["HostConfig"]["Init"] = json!(true);
        }
        if let Some(user) = sb.session_user(&p.client).await? {
            body["User"] = json!(user);
        }
        let created = p.client.json(Method::POST, "/containers/create", Some(&body)).await?;
        let id = created
            .get("Id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::new(Code::Io, "Docker Engine: the created container has no Id"))?
            .to_string();
        if let Err(e) = p.client.json(Method::POST, &format!("/containers/{id}/start"), None).await {
            remove_container(&p.client, &id).await;
            return Err(e);
        }
        let k = Arc::new(Kept {
            id,
            running: AtomicUsize::new(0),
            oom_seen: Default::default(),
            baseline,
            #[cfg(target_os = "linux")]
            entry: Default::default(),
        });
        kept.insert(p.mount.clone(), k.clone());
        Ok(k)
    }

    /// The kept container `id`.
    #[cfg(target_os = "linux")]
    pub(super) async fn find(&self, id: &str) -> Option<Arc<Kept>> {
        self.kept.lock().await.values().find(|k| k.id == id).cloned()
    }

    /// Forgets a container that is gone or stopped (removed by hand, a daemon restart), and
    /// removes what is left of it.
    async fn forget(&self, client: &DockerClient, mount: &str, id: &str) {
        let mut kept = self.kept.lock().await;
        if kept.get(mount).is_some_and(|k| k.id == id) {
            kept.remove(mount);
        }
        drop(kept);
        remove_container(client, id).await;
    }

    /// Removes every kept container (`close()`).
    pub(crate) async fn remove_all(&self, client: &DockerClient) {
        self.closed.store(true, Ordering::SeqCst);
        let all: Vec<Arc<Kept>> = self.kept.lock().await.drain().map(|(_, k)| k).collect();
        for k in all {
            remove_container(client, &k.id).await;
        }
    }
}

/// Counts a command as running in its container while alive.
struct Running(Arc<Kept>);

impl Running {
    fn start(k: &Arc<Kept>) -> Self {
        k.running.fetch_add(1, Ordering::SeqCst);
        Running(k.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A session's container that stopped or was removed outside corral (it is never replaced).
fn gone() -> Error {
    Error::new(
        Code::Io,
        "The session's container is gone (removed or stopped outside corral); stop the session and resume it.",
    )
}

/// `POST /containers/{id}/exec`: the exec's id, or `None` when the container is gone or stopped.
async fn create_exec(client: &DockerClient, id: &str, body: &Value) -> Result<Option<String>> {
    let reply = client.call(Method::POST, &format!("/containers/{id}/exec"), Some(body)).await?;
    if reply.status == StatusCode::NOT_FOUND || reply.status == StatusCode::CONFLICT {
        return Ok(None);
    }
    if !reply.status.is_success() {
        return Err(Error::new(
            Code::Io,
            format!("Docker Engine: POST /containers/{id}/exec: {} ({})", reply.message(), reply.status.as_u16()),
        ));
    }
    reply
        .json()
        .get("Id")
        .and_then(Value::as_str)
        .map(|s| Some(s.to_string()))
        .ok_or_else(|| Error::new(Code::Io, "Docker Engine: the exec has no Id"))
}

/// The exit code of a finished exec (its streams have ended; the daemon may need a moment).
async fn exit_code(client: &DockerClient, exec: &str) -> Result<i64> {
    for _ in 0..200 {
        let v = client.json(Method::GET, &format!("/exec/{exec}/json"), None).await?;
        if !v.get("Running").and_then(Value::as_bool).unwrap_or(false) {
            if let Some(code) = v.get("ExitCode").and_then(Value::as_i64) {
                return Ok(code);
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(Error::new(Code::Io, "Docker Engine: the exec's streams ended but it did not finish"))
}

/// Kills a command: every process but init when it is alone in the container, else its
/// process group (`lead`: pid and start time, from the wrapper's line; without it nothing is
/// killed). The leader still running with that start time dies with its group; a leader gone
/// leaves its group to kill (a pid in use as a group id is not given out again); a pid that now
/// names another process is left alone. True when every process was killed.
async fn kill(client: &DockerClient, id: &str, lead: Option<(u32, u64)>, alone: bool) -> bool {
    let script = match (alone, lead) {
        (true, _) => "kill -9 -1".to_string(),
        // Never 1 (init: the container) nor 0.
        (false, Some(lead)) => match crate::sandbox::lead::kill_group_script(lead) {
            Some(script) => script,
            None => return false,
        },
        (false, None) => return false,
    };
    let body = json!({ "AttachStdout": false, "AttachStderr": false, "Tty": false, "Cmd": ["sh", "-c", script] });
    let Ok(Some(exec)) = create_exec(client, id, &body).await else { return false };
    let started =
        client.call(Method::POST, &format!("/exec/{exec}/start"), Some(&json!({ "Detach": true, "Tty": false }))).await;
    alone && started.is_ok_and(|r| r.status.is_success())
}

pub(super) async fn run(sb: &SubprocessSandbox, req: SandboxRequest, cancel: Cancel) -> Result<ExecResult> {
    let deadline = (req.timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms));
    let p = sb.prepare(&req).await?;
    let client = p.client.clone();
    let with_stdin = req.stdin.is_some() || req.input.is_some();
    let body = json!({
        "AttachStdin": with_stdin,
        "AttachStdout": true,
        "AttachStderr": true,
        "Tty": false,
        "Env": p.env,
        "WorkingDir": req.cwd,
        "Cmd": ["sh", "-c", WRAPPER, "sh", req.command],
    });
    // A kept container that is gone (removed by hand, pruned, a daemon restart) is replaced once.
    let mut attempt = 0;
    let (kept, exec, running) = loop {
        let kept = match sb.sessions.get_or_start(sb, &p).await {
            Ok(k) => k,
            Err(e) => return sb.could_not_run(e),
        };
        // Counted from before its exec exists, so a kill for another command never takes it
        // for alone in the container.
        let running = Running::start(&kept);
        #[cfg(target_os = "linux")]
        if let Some(entry) = kept.entry.get().cloned() {
            if !entry.running() {
                return Err(gone());
            }
            let swept_before = sweep_kept(&kept).await;
            let mut result = run_entered(req, cancel, &entry, &p.env).await;
            drop(running);
            if let Ok(r) = &mut result {
                let killed = r.signal.as_deref() == Some("SIGKILL") && !r.timed_out && !r.aborted;
                let oom = sb.limits.memory_bytes.is_some() && killed && killed_for_memory(&kept);
                sb.add_limit_note(r, oom);
                let mut notes = swept_before;
                notes.extend(sweep_kept(&kept).await);
                super::super::protect::add_notes(r, notes);
            }
            return result;
        }
        match create_exec(&client, &kept.id, &body).await? {
            Some(exec) => break (kept, exec, running),
            None if attempt == 0 && sb.replaces_gone() => {
                attempt += 1;
                drop(running);
                sb.sessions.forget(&client, &p.mount, &kept.id).await;
            }
            None if sb.replaces_gone() => {
                return Err(Error::new(Code::Io, "Docker Engine: the session container stopped as it started"))
            }
            None => return Err(gone()),
        }
    };

    // A protected name something in the container made since it started (a command left
    // running, say) is removed before this command runs, and again when it ends.
    let swept_before = sweep_kept(&kept).await;
    let streams = Streams::new(req.capture_bytes).with_lead();
    let Streams { out, err, done, .. } = &streams;
    if cancel.is_cancelled() {
        // Aborted before its exec started: it never will, so nothing of it runs.
        return Ok(ExecResult { aborted: true, every_process_killed: true, ..Default::default() });
    }
    let attached = client.start_exec(&exec).await?;
    let reader = streams.read(attached, &req);
    let timer = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    };
    let mut result = ExecResult::default();
    tokio::select! {
        _ = done.cancelled() => {}
        _ = timer => result.timed_out = true,
        _ = cancel.cancelled() => result.aborted = true,
    }
    if result.timed_out || result.aborted {
        // The exec may not have started yet (the daemon answers before it spawns the process),
        // and its pid line may still be on its way: kill only once it is here, or once the
        // streams ended without it (then the wrapper never ran the command).
        let lead = streams.wait_lead_pid().await;
        // A harness session's container keeps what earlier commands left running: never "alone".
        let alone = kept.running.load(Ordering::SeqCst) == 1 && sb.replaces_gone();
        result.every_process_killed = kill(&client, &kept.id, lead, alone).await;
        result.signal = Some("SIGKILL".to_string());
        let _ = tokio::time::timeout(DRAIN, done.cancelled()).await;
    } else {
        result.exit_code = Some(i32::try_from(exit_code(&client, &exec).await?).unwrap_or(-1));
    }
    reader.abort();
    drop(running);
    let oom = sb.limits.memory_bytes.is_some() && result.exit_code == Some(128 + 9) && killed_for_memory(&kept);
    result.stdout = out.lock().unwrap().text();
    result.stderr = err.lock().unwrap().text();
    sb.add_limit_note(&mut result, oom);
    // Protected names the command made never reach the host's tools; one a process still running
    // in the container makes later stays until the next command starts or ends.
    let mut notes = swept_before;
    notes.extend(sweep_kept(&kept).await);
    super::super::protect::add_notes(&mut result, notes);
    Ok(result)
}

/// Runs a command in a session's container through this machine's keeper, in a pid namespace of
/// its own: when its first process ends, or a timeout or abort kills it, every process it started
/// goes with it (`corral_keeper::container`).
#[cfg(target_os = "linux")]
async fn run_entered(
    req: SandboxRequest,
    cancel: Cancel,
    entry: &super::entry::Entry,
    vars: &[String],
) -> Result<ExecResult> {
    use crate::shell::exec::{run_shell_command_with, Isolation};
    let mut env = entry.env.clone();
    env.extend(vars.iter().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())));
    let (plan, namespaces) = entry
        .plan(&req.cwd)
        .map_err(|_| Error::new(Code::InvalidArguments, "The working directory has a NUL byte."))?;
    let keeper = crate::sandbox::session::Keeper::shared()
        .map_err(|e| Error::new(Code::Io, format!("Could not start the keeper process ({e}).")))?;
    let isolation = Isolation {
        launch: Some(Box::new(move |launch| {
            Box::pin(async move { keeper.spawn(launch, plan, None, Vec::new(), Vec::new(), &namespaces).await })
        })),
        // A container's command has no prepared process to join a group ahead.
        ahead: None,
        pids_max: None,
        pids_unlimited: None,
        pids_refused: None,
        capture_bytes: req.capture_bytes,
        input: req.input,
        // The namespace's init carries a parent-death signal, and every process goes with it.
        end_with_shell: false,
    };
    let timeout = (req.timeout_ms > 0).then_some(req.timeout_ms);
    let mut r = run_shell_command_with(
        &req.command,
        std::path::Path::new(&req.cwd),
        &env,
        req.stdin,
        timeout,
        Some(cancel),
        req.on_output,
        isolation,
    )
    .await?;
    if r.timed_out || r.aborted {
        r.every_process_killed = true;
    }
    Ok(r)
}

/// The sweep of a kept container's mount against what `protect` named when it started.
async fn sweep_kept(kept: &Arc<Kept>) -> Vec<String> {
    let Some(watch) = kept.baseline.clone() else { return Vec::new() };
    super::super::protect::sweep_blocking(vec![watch]).await
}

/// After a command died of SIGKILL in a container with a memory limit: whether the kernel's OOM
/// killer did it. Docker marks a container OOM-killed only when its main process dies, so the
/// container's memory cgroup is read where this machine runs the daemon (v1 `oom_kill` in
/// `memory.oom_control`, v2 in `memory.events`); where it cannot be read, nothing else in the
/// container sends SIGKILL on its own, so the limit is named.
fn killed_for_memory(k: &Kept) -> bool {
    let id = &k.id;
    let candidates = [
        format!("/sys/fs/cgroup/memory/docker/{id}/memory.oom_control"),
        format!("/sys/fs/cgroup/docker/{id}/memory.events"),
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.events"),
    ];
    let count = candidates.iter().find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        text.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|n| n.trim().parse::<u64>().ok())
    });
    match count {
        Some(n) => n > k.oom_seen.swap(n, Ordering::SeqCst),
        None => true,
    }
}

/// Every container, running or not, with `label` (a key, or `key=value`).
pub(super) async fn labelled(client: &DockerClient, label: &str) -> Result<Vec<Value>> {
    let filters = json!({ "label": [label] }).to_string();
    let path = format!("/containers/json?all=1&filters={}", crate::text::percent_encode(&filters));
    let list = client.json(Method::GET, &path, None).await?;
    Ok(list.as_array().cloned().unwrap_or_default())
}

/// Removes the labelled containers whose owner, a process of this machine, no longer runs.
pub(super) async fn prune(client: &DockerClient) -> Result<usize> {
    let mut removed = 0;
    for c in labelled(client, RUN_LABEL.0).await? {
        let Some(id) = c.get("Id").and_then(Value::as_str) else { continue };
        let owner = c.get("Labels").and_then(|l| l.get(OWNER_LABEL)).and_then(Value::as_str).unwrap_or("");
        if super::super::owner::provably_dead(owner) {
            remove_container(client, id).await;
            removed += 1;
        }
    }
    Ok(removed)
}
