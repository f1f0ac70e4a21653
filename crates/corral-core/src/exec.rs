//! Local process execution and `LocalShell`, the `ShellProvider` of `NodeWorkspace`.
//!
//! A command runs as `sh -c <command>` (`cmd.exe /d /s /c "<command>"` on Windows) with a minimal
//! environment, a confined working directory, stdin fed or closed, in its own process group. A
//! timeout, a cancel or dropping the future kills the whole group (`taskkill /T /F` on Windows),
//! so grandchildren die too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::error::{Code, Error, Result};
use crate::path::{normalize, shown, Flavor};
use crate::shell::{Cancel, ExecOptions, ExecResult, ShellProvider};

/// Most bytes kept in memory per stream: the first half and the last half; the middle of a
/// larger output is dropped (and said so in the text).
pub const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;
/// How long to wait for the pipes after the group was killed (a process that left the group
/// may still hold them).
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);
/// How long to wait for the killed shell to be reaped.
const REAP_AFTER_KILL: Duration = Duration::from_secs(5);

/// The shell that runs commands on this platform.
pub const SHELL_NAME: &str = if cfg!(windows) { "cmd.exe" } else { "sh" };

/// Which host variables a command gets beyond the minimal base.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InheritEnv {
    #[default]
    None,
    List(Vec<String>),
    /// The whole host environment.
    All,
}

const BASE_VARS: &[&str] = &["PATH", "HOME", "USERPROFILE", "TEMP", "TMP", "TMPDIR", "LANG", "TERM"];
#[cfg(windows)]
const WINDOWS_VARS: &[&str] = &["SystemRoot", "SystemDrive", "ComSpec", "PATHEXT", "WINDIR"];

/// Whether two variable names are the same (case-insensitively on Windows).
fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

fn is_base_name(name: &str) -> bool {
    if BASE_VARS.iter().any(|v| same_name(v, name)) {
        return true;
    }
    let lc = if cfg!(windows) { name.to_ascii_uppercase().starts_with("LC_") } else { name.starts_with("LC_") };
    if lc {
        return true;
    }
    #[cfg(windows)]
    if WINDOWS_VARS.iter().any(|v| same_name(v, name)) {
        return true;
    }
    false
}

/// Sets a variable, replacing one of the same name (case-insensitively on Windows).
pub fn set_var(env: &mut BTreeMap<String, String>, name: &str, value: &str) {
    if cfg!(windows) {
        env.retain(|k, _| !k.eq_ignore_ascii_case(name));
    }
    env.insert(name.to_string(), value.to_string());
}

/// The host's variables (those whose name and value are Unicode).
fn host_vars() -> Vec<(String, String)> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
}

/// The environment every command starts from: PATH, HOME, USERPROFILE, TEMP, TMP, TMPDIR, LANG,
/// LC_* and TERM from the host (plus SystemRoot, SystemDrive, ComSpec, PATHEXT and WINDIR on
/// Windows), then the inherited names (or everything with `All`).
pub fn base_env(inherit: &InheritEnv) -> BTreeMap<String, String> {
    let host = host_vars();
    let mut env = BTreeMap::new();
    for (k, v) in &host {
        if is_base_name(k) {
            set_var(&mut env, k, v);
        }
    }
    match inherit {
        InheritEnv::None => {}
        InheritEnv::List(names) => {
            for name in names {
                if let Some((k, v)) = host.iter().find(|(k, _)| same_name(k, name)) {
                    set_var(&mut env, k, v);
                }
            }
        }
        InheritEnv::All => {
            for (k, v) in &host {
                set_var(&mut env, k, v);
            }
        }
    }
    env
}

/// Runs commands on the host, in a directory confined to `root`.
#[derive(Debug, Clone)]
pub struct LocalShell {
    root: PathBuf,
    env: BTreeMap<String, String>,
    inherit: InheritEnv,
}

impl LocalShell {
    /// `root` must already be the canonical (real, absolute) path of an existing directory.
    pub fn new(root: PathBuf, env: BTreeMap<String, String>, inherit: InheritEnv) -> Self {
        LocalShell { root, env, inherit }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The environment of a command: the base, the inherited names, the shell's `env`, then
    /// the call's `extra`.
    pub fn command_env(&self, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = base_env(&self.inherit);
        for (k, v) in self.env.iter().chain(extra) {
            set_var(&mut env, k, v);
        }
        env
    }

    /// The host directory a workspace-relative `cwd` names: normalized, then resolved through
    /// links, and still inside the root. A missing directory is an error.
    pub fn resolve_cwd(&self, cwd: Option<&str>) -> Result<PathBuf> {
        let Some(cwd) = cwd else { return Ok(self.root.clone()) };
        let rel = normalize(cwd, Flavor::native())?;
        if rel == "." {
            return Ok(self.root.clone());
        }
        let real = std::fs::canonicalize(self.root.join(&rel)).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::new(Code::NotFound, format!("Working directory not found: {}", shown(cwd)))
            }
            _ => Error::io(cwd, &e),
        })?;
        if !real.starts_with(&self.root) {
            return Err(Error::new(
                Code::OutsideWorkspace,
                format!("Path is outside the workspace: {} (it leads outside the root through a link)", shown(cwd)),
            ));
        }
        if !real.is_dir() {
            return Err(Error::new(
                Code::InvalidArguments,
                format!("Working directory is not a directory: {}", shown(cwd)),
            ));
        }
        Ok(real)
    }
}

#[async_trait]
impl ShellProvider for LocalShell {
    fn shell(&self) -> Option<String> {
        Some(SHELL_NAME.to_string())
    }

    fn host_dir(&self, cwd: Option<&str>) -> Option<PathBuf> {
        self.resolve_cwd(cwd).ok()
    }

    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult> {
        let cwd = self.resolve_cwd(options.cwd.as_deref())?;
        let env = self.command_env(&options.env);
        run_shell_command(command, &cwd, &env, options.stdin, options.timeout_ms, options.cancel).await
    }
}

// ---------------------------------------------------------------------------------------------
// The process runner
// ---------------------------------------------------------------------------------------------

/// One stream's bytes, at most `cap` of them: the first half, and a rolling last half.
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    half: usize,
    dropped: u64,
}

impl Capture {
    pub(crate) fn new(cap: usize) -> Self {
        Capture { head: Vec::new(), tail: Default::default(), half: cap / 2, dropped: 0 }
    }

    pub(crate) fn push(&mut self, mut data: &[u8]) {
        if self.head.len() < self.half {
            let n = (self.half - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        self.tail.extend(data);
        if self.tail.len() > self.half {
            let excess = self.tail.len() - self.half;
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// The text, decoded as UTF-8 with replacement characters.
    pub(crate) fn text(&mut self) -> String {
        let tail = self.tail.make_contiguous();
        if self.dropped == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n... [{} bytes omitted: the output exceeded {} MiB] ...\n{}",
            String::from_utf8_lossy(&self.head),
            self.dropped,
            (self.half * 2) / (1024 * 1024),
            String::from_utf8_lossy(tail)
        )
    }
}

async fn read_into<R: AsyncRead + Unpin>(mut reader: R, capture: Arc<Mutex<Capture>>, done: CancellationToken) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => capture.lock().unwrap().push(&buf[..n]),
        }
    }
    done.cancel();
}

/// Kills the process tree when dropped while armed, and stops the helper tasks.
struct TreeGuard {
    pid: Option<u32>,
    armed: bool,
    tasks: Vec<AbortHandle>,
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Some(pid) = self.pid {
                kill_tree_now(pid);
            }
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

/// Kills the whole tree and the shell itself.
async fn kill_tree(pid: Option<u32>, child: &mut Child) {
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
    let _ = child.start_kill();
}

#[cfg(unix)]
fn shell_command(command: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command);
    // Its own process group (pgid = its pid), so the whole tree can be killed at once.
    cmd.process_group(0);
    cmd
}

#[cfg(windows)]
fn shell_command(command: &str) -> Command {
    const CREATE_NO_WINDOW: u32 = 0x0800_0000;
    const CREATE_NEW_PROCESS_GROUP: u32 = 0x0000_0200;
    let mut cmd = Command::new("cmd.exe");
    // `/s /c "<command>"`: cmd strips the outer quotes and runs the rest as typed.
    cmd.args(["/d", "/s", "/c"]).raw_arg(format!("\"{command}\""));
    cmd.creation_flags(CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP);
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

/// Runs `command` with the platform shell in `cwd` (a host path already confined by the caller)
/// with exactly `env`. Resolves for a non-zero exit, a timeout or a cancel; fails only when the
/// command could not be started.
pub async fn run_shell_command(
    command: &str,
    cwd: &Path,
    env: &BTreeMap<String, String>,
    stdin: Option<String>,
    timeout_ms: Option<u64>,
    cancel: Option<Cancel>,
) -> Result<ExecResult> {
    if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
        return Ok(ExecResult { aborted: true, ..Default::default() });
    }
    let mut cmd = shell_command(command);
    cmd.current_dir(plain_dir(cwd))
        .env_clear()
        .envs(env)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own control group where one can be made: a timeout or an abort then kills every process
    // it started, also those that left its process group.
    #[cfg(target_os = "linux")]
    let cgroup = crate::cgroup::Cgroup::create();
    #[cfg(target_os = "linux")]
    if let Some(group) = &cgroup {
        let procs = group.procs_path();
        // SAFETY: the closure only makes async-signal-safe calls (open, write, close).
        unsafe {
            cmd.pre_exec(move || crate::cgroup::join_in_child(&procs));
        }
    }
    let mut child = cmd.spawn().map_err(|e| Error::new(Code::Io, format!("Could not start the command: {e}")))?;
    let pid = child.id();
    let mut guard = TreeGuard { pid, armed: true, tasks: Vec::new() };

    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let task = tokio::spawn(async move {
            let _ = pipe.write_all(text.as_bytes()).await;
            let _ = pipe.shutdown().await;
        });
        guard.tasks.push(task.abort_handle());
    }
    let out = Arc::new(Mutex::new(Capture::new(MAX_CAPTURE_BYTES)));
    let err = Arc::new(Mutex::new(Capture::new(MAX_CAPTURE_BYTES)));
    let out_done = CancellationToken::new();
    let err_done = CancellationToken::new();
    match child.stdout.take() {
        Some(pipe) => guard.tasks.push(tokio::spawn(read_into(pipe, out.clone(), out_done.clone())).abort_handle()),
        None => out_done.cancel(),
    }
    match child.stderr.take() {
        Some(pipe) => guard.tasks.push(tokio::spawn(read_into(pipe, err.clone(), err_done.clone())).abort_handle()),
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
        Outcome::Exited(status) => Some(status.map_err(|e| Error::new(Code::Io, format!("The command failed: {e}")))?),
        Outcome::TimedOut | Outcome::Aborted => {
            result.timed_out = matches!(outcome, Outcome::TimedOut);
            result.aborted = matches!(outcome, Outcome::Aborted);
            kill_tree(pid, &mut child).await;
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
    guard.armed = false;
    drop(guard);

    match status {
        Some(status) => (result.exit_code, result.signal) = decode_status(&status),
        None => result.signal = Some("SIGKILL".to_string()),
    }
    result.stdout = out.lock().unwrap().text();
    result.stderr = err.lock().unwrap().text();
    Ok(result)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::Instant;

    fn root() -> (tempfile::TempDir, LocalShell) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, LocalShell::new(root, BTreeMap::new(), InheritEnv::None))
    }

    fn opts() -> ExecOptions {
        ExecOptions { timeout_ms: Some(20_000), ..Default::default() }
    }

    async fn run(shell: &LocalShell, cmd: &str) -> ExecResult {
        shell.exec(cmd, opts()).await.unwrap()
    }

    #[tokio::test]
    async fn runs_in_the_root_with_sh() {
        let (_d, shell) = root();
        assert_eq!(shell.shell().as_deref(), Some("sh"));
        let r = run(&shell, "pwd; echo err >&2").await;
        assert_eq!(r.stdout.trim_end(), shell.root().to_str().unwrap());
        assert_eq!(r.stderr, "err\n");
        assert_eq!(r.exit_code, Some(0));
        assert!(!r.timed_out && !r.aborted && r.signal.is_none());
    }

    #[tokio::test]
    async fn env_is_minimal() {
        std::env::set_var("CORRAL_TEST_SECRET_A", "s3cret");
        std::env::set_var("LC_CORRAL_TEST", "lc");
        let (_d, shell) = root();
        let r = run(&shell, "env").await;
        assert!(!r.stdout.contains("CORRAL_TEST_SECRET_A"), "{}", r.stdout);
        assert!(!r.stdout.contains("s3cret"));
        assert!(r.stdout.contains("LC_CORRAL_TEST=lc"));
        let path = std::env::var("PATH").unwrap();
        assert!(r.stdout.lines().any(|l| l == format!("PATH={path}")), "{}", r.stdout);
        let names: Vec<&str> = r.stdout.lines().filter_map(|l| l.split('=').next()).collect();
        for n in names {
            // sh itself may add PWD, SHLVL and `_`.
            assert!(is_base_name(n) || matches!(n, "PWD" | "OLDPWD" | "SHLVL" | "_"), "unexpected variable {n}");
        }
    }

    #[tokio::test]
    async fn env_inherit_list_all_and_overrides() {
        std::env::set_var("CORRAL_TEST_SECRET_B", "b-value");
        std::env::set_var("CORRAL_TEST_OTHER_B", "other");
        let (d, _) = root();
        let r = std::fs::canonicalize(d.path()).unwrap();

        let listed = LocalShell::new(
            r.clone(),
            BTreeMap::new(),
            InheritEnv::List(vec!["CORRAL_TEST_SECRET_B".into(), "CORRAL_MISSING".into()]),
        );
        let out = run(&listed, "env").await.stdout;
        assert!(out.contains("CORRAL_TEST_SECRET_B=b-value"));
        assert!(!out.contains("CORRAL_TEST_OTHER_B"));
        assert!(!out.contains("CORRAL_MISSING"));

        let all = LocalShell::new(r.clone(), BTreeMap::new(), InheritEnv::All);
        let out = run(&all, "env").await.stdout;
        assert!(out.contains("CORRAL_TEST_SECRET_B=b-value") && out.contains("CORRAL_TEST_OTHER_B=other"));

        let env = BTreeMap::from([
            ("NODE_ENV".to_string(), "test".to_string()),
            ("CORRAL_TEST_SECRET_B".to_string(), "mine".to_string()),
        ]);
        let shell = LocalShell::new(r, env, InheritEnv::All);
        let mut o = opts();
        o.env.insert("NODE_ENV".into(), "call".into());
        o.env.insert("EXTRA".into(), "x".into());
        let out = shell.exec("env", o).await.unwrap().stdout;
        assert!(out.lines().any(|l| l == "NODE_ENV=call"));
        assert!(out.lines().any(|l| l == "CORRAL_TEST_SECRET_B=mine"));
        assert!(out.lines().any(|l| l == "EXTRA=x"));
        let base = base_env(&InheritEnv::None);
        assert!(base.contains_key("PATH") && !base.contains_key("CORRAL_TEST_SECRET_B"));
    }

    #[tokio::test]
    async fn cwd_is_confined() {
        let (d, shell) = root();
        std::fs::create_dir_all(d.path().join("sub/deeper")).unwrap();
        std::fs::write(d.path().join("file.txt"), "x").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), d.path().join("out")).unwrap();
        std::os::unix::fs::symlink(d.path().join("sub"), d.path().join("inlink")).unwrap();

        let mut o = opts();
        o.cwd = Some("sub/./deeper/..".into());
        let r = shell.exec("pwd", o).await.unwrap();
        assert_eq!(r.stdout.trim_end(), shell.root().join("sub").to_str().unwrap());
        let mut o = opts();
        o.cwd = Some("inlink".into());
        assert_eq!(shell.exec("pwd", o).await.unwrap().stdout.trim_end(), shell.root().join("sub").to_str().unwrap());

        for (cwd, code) in [
            ("..", Code::OutsideWorkspace),
            ("sub/../..", Code::OutsideWorkspace),
            ("/tmp", Code::OutsideWorkspace),
            ("out", Code::OutsideWorkspace),
            ("missing", Code::NotFound),
            ("file.txt", Code::InvalidArguments),
        ] {
            let mut o = opts();
            o.cwd = Some(cwd.into());
            let e = shell.exec("touch ran", o).await.unwrap_err();
            assert_eq!(e.code, code, "{cwd}: {}", e.message);
            assert!(!e.message.contains(outside.path().to_str().unwrap()));
        }
        assert!(!outside.path().join("ran").exists());
        assert!(!d.path().join("ran").exists());
    }

    #[tokio::test]
    async fn exit_codes_and_signals() {
        let (_d, shell) = root();
        let r = run(&shell, "exit 3").await;
        assert_eq!((r.exit_code, r.signal), (Some(3), None));
        let r = run(&shell, "kill -TERM $$").await;
        assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("SIGTERM")));
        assert!(!r.timed_out && !r.aborted);
        let r = run(&shell, "nonexistent-command-xyz").await;
        assert_eq!(r.exit_code, Some(127));
    }

    #[tokio::test]
    async fn output_is_utf8_with_replacement() {
        let (_d, shell) = root();
        let r = run(&shell, r"printf 'a\377b\n'; printf 'é' >&2").await;
        assert_eq!(r.stdout, "a\u{FFFD}b\n");
        assert_eq!(r.stderr, "é");
    }

    #[tokio::test]
    async fn stdin_is_fed_or_closed() {
        let (_d, shell) = root();
        let mut o = opts();
        o.stdin = Some("hello\nworld".into());
        let r = shell.exec("cat; echo done", o).await.unwrap();
        assert_eq!(r.stdout, "hello\nworlddone\n");
        let start = Instant::now();
        let mut o = opts();
        o.timeout_ms = Some(5_000);
        let r = shell.exec("cat; read x; echo rc=$?", o).await.unwrap();
        assert!(!r.timed_out);
        assert_eq!(r.stdout, "rc=1\n");
        assert!(start.elapsed() < Duration::from_secs(3));
        // Much more input than a pipe buffer, to a command that never reads it.
        let mut o = opts();
        o.stdin = Some("x".repeat(1 << 20));
        let r = shell.exec("echo ignored", o).await.unwrap();
        assert_eq!(r.stdout, "ignored\n");
        let mut o = opts();
        o.stdin = Some("y".repeat(1 << 20));
        assert_eq!(shell.exec("wc -c", o).await.unwrap().stdout.trim(), (1 << 20).to_string());
    }

    const GRANDCHILD: &str = "sh -c 'sleep 1 && touch marker' & (sleep 1; touch marker2) & sleep 30";

    async fn assert_no_markers(shell: &LocalShell) {
        // The grandchildren would have written after 1 s: wait well past that.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!shell.root().join("marker").exists(), "a grandchild survived");
        assert!(!shell.root().join("marker2").exists(), "a subshell survived");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let (_d, shell) = root();
        let start = Instant::now();
        let mut o = opts();
        o.timeout_ms = Some(300);
        let r = shell.exec(&format!("echo started; {GRANDCHILD}"), o).await.unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(r.timed_out && !r.aborted);
        assert_eq!(r.exit_code, None);
        assert_eq!(r.signal.as_deref(), Some("SIGKILL"));
        assert_eq!(r.stdout, "started\n");
        assert_no_markers(&shell).await;
    }

    /// Processes that leave the group (`setsid`, a new process group) write a marker after 1 s.
    const LEAVERS: &str =
        "setsid sh -c 'sleep 1; touch escaped1' & perl -e 'setpgrp(0,0); sleep 1; open(F, \">escaped2\")' & sleep 30";

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_timeout_kills_processes_that_left_the_group_where_a_control_group_can_be_made() {
        if crate::cgroup::Cgroup::create().is_none() {
            eprintln!("skipped: no writable cgroup hierarchy on this machine");
            return;
        }
        let (_d, shell) = root();
        let mut o = opts();
        o.timeout_ms = Some(300);
        let r = shell.exec(LEAVERS, o).await.unwrap();
        assert!(r.timed_out);
        assert!(r.every_process_killed, "the control group was emptied");
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(!shell.root().join("escaped1").exists(), "a setsid process survived the timeout");
        assert!(!shell.root().join("escaped2").exists(), "a setpgrp process survived the timeout");
    }

    #[tokio::test]
    async fn cancel_kills_the_process_group() {
        let (_d, shell) = root();
        let cancel = Cancel::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            c2.cancel();
        });
        let mut o = opts();
        o.cancel = Some(cancel);
        let start = Instant::now();
        let r = shell.exec(GRANDCHILD, o).await.unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(r.aborted && !r.timed_out);
        assert_eq!((r.exit_code, r.signal.as_deref()), (None, Some("SIGKILL")));
        assert_no_markers(&shell).await;
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_process_group() {
        let (_d, shell) = root();
        let fut = shell.exec(GRANDCHILD, opts());
        assert!(tokio::time::timeout(Duration::from_millis(300), fut).await.is_err());
        assert_no_markers(&shell).await;
    }

    #[tokio::test]
    async fn an_already_cancelled_token_starts_nothing() {
        let (_d, shell) = root();
        let cancel = Cancel::new();
        cancel.cancel();
        let mut o = opts();
        o.cancel = Some(cancel);
        let r = shell.exec("touch marker", o).await.unwrap();
        assert!(r.aborted && !r.timed_out);
        assert_eq!(r.exit_code, None);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!shell.root().join("marker").exists());
    }

    #[tokio::test]
    async fn the_drain_after_a_kill_is_bounded() {
        let (_d, shell) = root();
        let start = Instant::now();
        let mut o = opts();
        o.timeout_ms = Some(300);
        // setsid takes the sleep out of the group; it keeps stdout open.
        let r = shell.exec("echo a; setsid sleep 8 & sleep 30", o).await.unwrap();
        assert!(r.timed_out);
        assert_eq!(r.stdout, "a\n");
        assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn a_background_process_holding_the_pipes_is_waited_for_until_the_timeout() {
        let (_d, shell) = root();
        let mut o = opts();
        o.timeout_ms = Some(500);
        let r = shell.exec("echo a; sleep 30 &", o).await.unwrap();
        assert!(r.timed_out);
        assert_eq!((r.exit_code, r.signal), (Some(0), None));
        let r = run(&shell, "sleep 3 >/dev/null 2>&1 & echo b").await;
        assert!(!r.timed_out);
        assert_eq!(r.stdout, "b\n");
    }

    #[test]
    fn capture_keeps_the_start_and_the_end() {
        let mut c = Capture::new(8);
        c.push(b"0123");
        c.push(b"456789");
        c.push(b"ab");
        assert_eq!(c.text(), "0123\n... [4 bytes omitted: the output exceeded 0 MiB] ...\n89ab");
        let mut c = Capture::new(8);
        c.push(b"01234567");
        assert_eq!(c.text(), "01234567");
    }
}
