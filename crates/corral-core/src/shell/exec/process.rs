//! The process runner: spawn in a process group (and a control group where one can be made),
//! feed stdin, wait for the exit, a timeout or a cancel, and kill the whole tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{Code, Error, Result};
use crate::shell::{Cancel, ExecResult};

use super::*;
use crate::shell::{Sink, Stream};

/// How long to wait for the pipes after the group was killed (a process that left the group
/// may still hold them).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);
/// How long to wait for the killed shell to be reaped.
const REAP_AFTER_KILL: Duration = Duration::from_secs(5);

/// Kills the process tree when dropped while armed, and stops the helper tasks.
struct TreeGuard {
    pid: Option<u32>,
    armed: bool,
    tasks: Vec<AbortHandle>,
    /// A launched command's own kill (its launcher signals the group it has not reaped yet).
    kill: Option<Killer>,
    /// The command's job object (Windows): every process it started.
    job: Option<Job>,
}

#[cfg(windows)]
use super::job::Job;
/// Job objects are Windows's alone.
#[cfg(not(windows))]
enum Job {}
#[cfg(not(windows))]
impl Job {
    fn kill(&self) -> bool {
        match *self {}
    }
}

type Killer = Arc<dyn Fn() + Send + Sync>;

impl TreeGuard {
    /// Kills every process of the command: its job (Windows), else its process group or tree.
    fn kill_tree_now(&self) {
        match (&self.job, self.pid) {
            (Some(job), _) => {
                job.kill();
            }
            (None, Some(pid)) => kill_tree_now(pid),
            (None, None) => {}
        }
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Some(kill) = &self.kill {
                kill();
            }
            self.kill_tree_now();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(unix)]
fn kill_tree_now(pid: u32) {
    use nix::sys::signal::{killpg, Signal};
    use nix::unistd::Pid;
    if let Ok(pid) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

#[cfg(windows)]
fn kill_tree_now(pid: u32) {
    let _ = std::process::Command::new("taskkill")
        .args(["/T", "/F", "/PID", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

#[cfg(not(any(unix, windows)))]
fn kill_tree_now(_pid: u32) {}

/// Kills the whole tree (the job, where there is one) and the shell itself.
async fn kill_tree(pid: Option<u32>, child: &mut Proc, job: Option<&Job>) {
    if let Some(job) = job {
        job.kill();
        child.start_kill();
        return;
    }
    #[cfg(windows)]
    if let Some(pid) = pid {
        let mut taskkill = Command::new("taskkill");
        taskkill
            .args(["/T", "/F", "/PID", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let _ = tokio::time::timeout(REAP_AFTER_KILL, taskkill.status()).await;
    }
    #[cfg(not(windows))]
    if let Some(pid) = pid {
        kill_tree_now(pid);
    }
    child.start_kill();
}

#[cfg(unix)]
fn shell_command(command: &str, env: &BTreeMap<String, String>) -> Command {
    let mut cmd = Command::new(shell_path(env));
    cmd.arg("-c").arg(command);
    // Its own process group (pgid = its pid), so the whole tree can be killed at once.
    cmd.process_group(0);
    cmd
}

/// `sh` as the command's own `PATH` finds it (`/bin/sh` when it names none). Found here, so the
/// child is started with `posix_spawn` (no copy of this process's page tables): the C library
/// looks a bare name up in this process's `PATH`, so the standard library forks for it when the
/// command's environment sets another.
#[cfg(unix)]
fn shell_path(env: &BTreeMap<String, String>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = env.get("PATH").map(String::as_str).unwrap_or("/usr/local/bin:/usr/bin:/bin");
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("sh"))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

#[cfg(windows)]
fn shell_command(command: &str, _env: &BTreeMap<String, String>) -> Command {
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    // Suspended until it is in its job (`job.rs`): nothing it starts is outside the job.
    const CREATE_SUSPENDED: u32 = 0x0000_0004;
    let mut cmd = Command::new("cmd.exe");
    // `/s /c "<command>"`: cmd strips the outer quotes and runs the rest as typed.
    cmd.args(["/d", "/s", "/c"]).raw_arg(format!("\"{command}\""));
    cmd.creation_flags(CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP | CREATE_SUSPENDED);
    cmd
}

/// Windows cannot start `cmd.exe` in a `\\?\C:\…` directory; give it the plain form.
#[cfg(windows)]
fn plain_dir(dir: &Path) -> PathBuf {
    let s = dir.to_string_lossy();
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => dir.to_path_buf(),
    }
}

#[cfg(not(windows))]
fn plain_dir(dir: &Path) -> PathBuf {
    dir.to_path_buf()
}

/// Exit code, or the name of the signal that killed the process.
fn decode_status(status: &ExitStatus) -> (Option<i32>, Option<String>) {
    if let Some(code) = status.code() {
        return (Some(code), None);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("SIG{sig}"));
            return (None, Some(name));
        }
    }
    (None, None)
}

enum Outcome {
    Exited(std::io::Result<ExitStatus>),
    TimedOut,
    Aborted,
}

/// The command's first process: this process's child, or one a launcher started.
enum Proc {
    Child(Child),
    #[cfg(unix)]
    Launched {
        exit: std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<i32>> + Send>>,
        status: Option<ExitStatus>,
        kill: Killer,
    },
}

type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

impl Proc {
    async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Proc::Child(c) => c.wait().await,
            #[cfg(unix)]
            Proc::Launched { exit, status, .. } => {
                if let Some(s) = status {
                    return Ok(*s);
                }
                use std::os::unix::process::ExitStatusExt;
                let s = ExitStatus::from_raw(exit.as_mut().await?);
                *status = Some(s);
                Ok(s)
            }
        }
    }

    fn start_kill(&mut self) {
        match self {
            Proc::Child(c) => {
                let _ = c.start_kill();
            }
            #[cfg(unix)]
            Proc::Launched { kill, .. } => kill(),
        }
    }
}

/// The started command: its first process, its pipes, its pid.
struct Started {
    proc: Proc,
    pid: Option<u32>,
    stdin: Option<Writer>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
    kill: Option<Killer>,
}

/// Puts a command started suspended (`shell_command`) into a job of its own and lets it run. Where
/// no job can be made, it runs without one (its tree is then killed with `taskkill /T`).
#[cfg(windows)]
fn into_job(s: &Started) -> Option<Job> {
    let Proc::Child(child) = &s.proc;
    let pid = s.pid?;
    match (Job::new(), child.raw_handle()) {
        (Ok(job), Some(handle)) => job.adopt(handle, pid).ok().map(|()| job),
        _ => {
            super::job::resume(pid);
            None
        }
    }
}

/// Starts `cmd` as this process's child.
fn spawn_child(mut cmd: Command) -> Result<Started> {
    let mut child = cmd.spawn().map_err(|e| Error::new(Code::Io, format!("Could not start the command: {e}")))?;
    let pid = child.id();
    let stdin = child.stdin.take().map(|p| Box::new(p) as Writer);
    let stdout = child.stdout.take().map(|p| Box::new(p) as Reader);
    let stderr = child.stderr.take().map(|p| Box::new(p) as Reader);
    Ok(Started { proc: Proc::Child(child), pid, stdin, stdout, stderr, kill: None })
}

/// Starts `sh -c command` as this process's child, in the control group of `procs`.
#[cfg(target_os = "linux")]
fn spawn_grouped(
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    stdin: bool,
    procs: &std::ffi::CStr,
) -> Result<Started> {
    use tokio::net::unix::pipe;
    let io = |e: std::io::Error| Error::new(Code::Io, format!("Could not start the command: {e}"));
    let s = super::spawn::spawn_in_group(&shell_path(env), command, &plain_dir(cwd), env, stdin, procs).map_err(io)?;
    // Pipes the runtime cannot take: the command, already running, is killed (and reaped).
    let kill_on_error = |e: std::io::Error| {
        (s.kill)();
        io(e)
    };
    let stdin = match s.stdin {
        Some(fd) => Some(Box::new(pipe::Sender::from_owned_fd(fd).map_err(kill_on_error)?) as Writer),
        None => None,
    };
    let stdout = Box::new(pipe::Receiver::from_owned_fd(s.stdout).map_err(kill_on_error)?) as Reader;
    let stderr = Box::new(pipe::Receiver::from_owned_fd(s.stderr).map_err(kill_on_error)?) as Reader;
    Ok(Started {
        proc: Proc::Launched { exit: s.exit, status: None, kill: s.kill.clone() },
        pid: Some(s.pid),
        stdin,
        stdout: Some(stdout),
        stderr: Some(stderr),
        kill: Some(s.kill),
    })
}

/// Starts the command through `launch`.
#[cfg(unix)]
async fn spawn_launched(
    launch: super::launch::Launcher,
    command: &str,
    env: &BTreeMap<String, String>,
    stdin: bool,
    cgroups: Vec<std::ffi::CString>,
    ahead: Vec<std::ffi::CString>,
) -> Result<Started> {
    use tokio::net::unix::pipe;
    let argv = vec!["sh".to_string(), "-c".to_string(), command.to_string()];
    let req = super::launch::LaunchRequest { argv, env: env.clone(), stdin, cgroups, ahead };
    let l = launch(req).await.map_err(|e| Error::new(Code::Io, format!("Could not start the command: {e}")))?;
    let io = |e: std::io::Error| Error::new(Code::Io, format!("Could not start the command: {e}"));
    let stdin = match l.stdin {
        Some(fd) => Some(Box::new(pipe::Sender::from_owned_fd(fd).map_err(io)?) as Writer),
        None => None,
    };
    let stdout = Box::new(pipe::Receiver::from_owned_fd(l.stdout).map_err(io)?) as Reader;
    let stderr = Box::new(pipe::Receiver::from_owned_fd(l.stderr).map_err(io)?) as Reader;
    // No pid: the launcher reaps the process, so a group signalled by its number after that
    // could be another's; its own kill signals only what it has not reaped.
    Ok(Started {
        proc: Proc::Launched { exit: l.exit, status: None, kill: l.kill.clone() },
        pid: None,
        stdin,
        stdout: Some(stdout),
        stderr: Some(stderr),
        kill: Some(l.kill),
    })
}

/// Runs `command` with the platform shell in `cwd` (a host path already confined by the caller)
/// with exactly `env`. Resolves for a non-zero exit, a timeout or a cancel; fails only when the
/// command could not be started.
#[allow(clippy::too_many_arguments)]
pub async fn run_shell_command(
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    stdin: Option<String>,
    timeout_ms: Option<u64>,
    cancel: Option<Cancel>,
    on_output: Option<Sink>,
    capture_bytes: Option<usize>,
) -> Result<ExecResult> {
    let isolation = Isolation { capture_bytes, ..Isolation::default() };
    run_shell_command_with(command, cwd, env, stdin, timeout_ms, cancel, on_output, isolation).await
}

/// How a sandbox starts the command (its launcher), the limits of the command's control group,
/// and how much output is held.
#[derive(Default)]
pub struct Isolation {
    /// `pids.max` of the command's control group.
    pub pids_max: Option<u64>,
    /// Set when the group could not take the pids limit.
    pub pids_unlimited: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The group's `pids.events` / `max` count after the run (forks it refused).
    pub pids_refused: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// The most bytes of each stream held (`MAX_CAPTURE_BYTES` when `None`).
    pub capture_bytes: Option<usize>,
    /// Input while the command runs (used when there is no `stdin` text).
    pub input: Option<crate::shell::Input>,
    /// Kill what the shell left running when it exits (`ExecOptions::end_with_shell`).
    pub end_with_shell: bool,
    /// Another process starts the command (LinuxSandbox's keeper) instead of a fork of this one.
    #[cfg(unix)]
    pub launch: Option<super::launch::Launcher>,
    /// Where the launcher's commands take their control group from, made ahead (`cgroup::Ahead`).
    #[cfg(target_os = "linux")]
    pub ahead: Option<Arc<super::cgroup::Ahead>>,
}

/// `run_shell_command` with a sandbox's set-up in the child.
#[allow(clippy::too_many_arguments)]
pub async fn run_shell_command_with(
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    stdin: Option<String>,
    timeout_ms: Option<u64>,
    cancel: Option<Cancel>,
    on_output: Option<Sink>,
    isolation: Isolation,
) -> Result<ExecResult> {
    if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
        return Ok(ExecResult { aborted: true, ..Default::default() });
    }
    let input = if stdin.is_none() { isolation.input.as_ref().and_then(|i| i.take()) } else { None };
    let mut cmd = shell_command(command, env);
    cmd.current_dir(plain_dir(cwd))
        .env_clear()
        .envs(env)
        .stdin(if stdin.is_some() || input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own control group where one can be made (made ahead where its launcher prepares
    // commands): a timeout or an abort then kills every process it started, also those that left
    // its process group.
    #[cfg(target_os = "linux")]
    let cgroup = isolation.ahead.as_ref().and_then(|a| a.take()).or_else(crate::shell::exec::cgroup::Cgroup::create);
    #[cfg(target_os = "linux")]
    if let Some(group) = &cgroup {
        if let Some(n) = isolation.pids_max {
            if !group.set("pids.max", &n.to_string()) {
                if let Some(flag) = &isolation.pids_unlimited {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
    #[cfg(target_os = "linux")]
    if cgroup.is_none() && isolation.pids_max.is_some() {
        if let Some(flag) = &isolation.pids_unlimited {
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    // The owner guard runs before the command does, so its registration is one write.
    super::guard::running();
    #[cfg(unix)]
    let started = match isolation.launch {
        Some(launch) => {
            #[cfg(target_os = "linux")]
            let cgroups: Vec<std::ffi::CString> = cgroup.iter().map(|g| g.procs_path()).collect();
            // The next command's group, where this one has one.
            #[cfg(target_os = "linux")]
            let ahead: Vec<std::ffi::CString> = match (&cgroup, &isolation.ahead) {
                (Some(_), Some(a)) => a.make().into_iter().collect(),
                _ => Vec::new(),
            };
            #[cfg(not(target_os = "linux"))]
            let (cgroups, ahead) = (Vec::new(), Vec::new());
            spawn_launched(launch, command, env, stdin.is_some() || input.is_some(), cgroups, ahead).await?
        }
        // A command that joins its group first starts without a fork of this process (`spawn.rs`).
        #[cfg(target_os = "linux")]
        None if cgroup.is_some() => spawn_grouped(
            command,
            cwd,
            env,
            stdin.is_some() || input.is_some(),
            &cgroup.as_ref().map(|g| g.procs_path()).unwrap_or_default(),
        )?,
        None => spawn_child(cmd)?,
    };
    #[cfg(not(unix))]
    let started = spawn_child(cmd)?;
    #[cfg(windows)]
    let job = into_job(&started);
    #[cfg(not(windows))]
    let job = None;
    let Started { proc: mut child, pid, stdin: child_stdin, stdout: child_stdout, stderr: child_stderr, kill } =
        started;
    let mut guard = TreeGuard { pid, armed: true, tasks: Vec::new(), kill, job };

    // Killed with this process, however it dies (`guard.rs`).
    if let Some(pid) = pid {
        super::guard::register(pid);
    }
    // (The pipe is taken only where it is used: a pipe taken and dropped closes the input.)
    if let Some(text) = stdin {
        if let Some(mut pipe) = child_stdin {
            let task = tokio::spawn(async move {
                let _ = pipe.write_all(text.as_bytes()).await;
                let _ = pipe.shutdown().await;
            });
            guard.tasks.push(task.abort_handle());
        }
    } else if let (Some(mut rx), Some(mut pipe)) = (input, child_stdin) {
        let task = tokio::spawn(async move {
            while let Some(chunk) = rx.recv().await {
                if pipe.write_all(&chunk).await.is_err() || pipe.flush().await.is_err() {
                    break;
                }
            }
            let _ = pipe.shutdown().await;
        });
        guard.tasks.push(task.abort_handle());
    }
    let cap = isolation.capture_bytes.unwrap_or(MAX_CAPTURE_BYTES);
    let out = Arc::new(Mutex::new(Capture::new(cap)));
    let err = Arc::new(Mutex::new(Capture::new(cap)));
    let out_done = CancellationToken::new();
    let err_done = CancellationToken::new();
    match child_stdout {
        Some(pipe) => guard.tasks.push(
            tokio::spawn(read_into(pipe, out.clone(), out_done.clone(), Stream::Stdout, on_output.clone()))
                .abort_handle(),
        ),
        None => out_done.cancel(),
    }
    match child_stderr {
        Some(pipe) => guard.tasks.push(
            tokio::spawn(read_into(pipe, err.clone(), err_done.clone(), Stream::Stderr, on_output.clone()))
                .abort_handle(),
        ),
        None => err_done.cancel(),
    }

    let outcome = {
        let finished = async {
            let status = child.wait().await;
            out_done.cancelled().await;
            err_done.cancelled().await;
            status
        };
        let timer = async {
            match timeout_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        };
        let cancelled = async {
            match &cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            status = finished => Outcome::Exited(status),
            _ = timer => Outcome::TimedOut,
            _ = cancelled => Outcome::Aborted,
        }
    };

    let mut result = ExecResult::default();
    let status = match outcome {
        Outcome::Exited(status) => {
            let status = status.map_err(|e| Error::new(Code::Io, format!("The command failed: {e}")))?;
            // A background command ends with everything it started: a child left running (`cmd &`)
            // would outlive its process and every stop.
            if isolation.end_with_shell {
                guard.kill_tree_now();
                #[cfg(target_os = "linux")]
                if let Some(group) = &cgroup {
                    group.kill_all().await;
                }
            }
            Some(status)
        }
        Outcome::TimedOut | Outcome::Aborted => {
            result.timed_out = matches!(outcome, Outcome::TimedOut);
            result.aborted = matches!(outcome, Outcome::Aborted);
            kill_tree(pid, &mut child, guard.job.as_ref()).await;
            // A job holds every process the command started.
            result.every_process_killed = guard.job.is_some();
            #[cfg(target_os = "linux")]
            {
                result.every_process_killed = match &cgroup {
                    Some(group) => group.kill_all().await,
                    None => false,
                };
            }
            let status = tokio::time::timeout(REAP_AFTER_KILL, child.wait()).await.ok().and_then(|s| s.ok());
            // A process that left the group may still hold the pipes: do not wait for it forever.
            let _ = tokio::time::timeout(DRAIN_AFTER_KILL, async {
                out_done.cancelled().await;
                err_done.cancelled().await;
            })
            .await;
            status
        }
    };
    #[cfg(target_os = "linux")]
    if let (Some(group), Some(counter)) = (&cgroup, &isolation.pids_refused) {
        let refused = group
            .get("pids.events")
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("max ").and_then(|n| n.trim().parse().ok())))
            .unwrap_or(0);
        counter.store(refused, std::sync::atomic::Ordering::Relaxed);
    }
    guard.armed = false;
    let job = guard.job.take();
    drop(guard);
    // A process the command left running keeps its job open, and goes with this process.
    #[cfg(windows)]
    if let Some(job) = job {
        super::job::keep(job);
    }
    #[cfg(not(windows))]
    let _ = job;
    if let Some(pid) = pid {
        super::guard::release_if_empty(pid);
    }

    match status {
        Some(status) => (result.exit_code, result.signal) = decode_status(&status),
        None => result.signal = Some("SIGKILL".to_string()),
    }
    // Windows has no signals: a command ended at its timeout or abort ends with the code its job
    // or process was terminated with, which the command never chose. It has none, as on Unix.
    #[cfg(windows)]
    if result.timed_out || result.aborted {
        result.exit_code = None;
    }
    result.stdout = out.lock().unwrap().text();
    result.stderr = err.lock().unwrap().text();
    Ok(result)
}
