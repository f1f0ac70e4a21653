//! Sandboxed shells (spec: "Sandboxed shell: SandboxShell" and "Allowlisted egress").
//!
//! A [`SandboxAdapter`] runs one command somewhere else (a container, a VM, a JS callback);
//! [`SandboxShell`] turns any adapter into a [`ShellProvider`]. [`NoopSandbox`] runs on the host
//! and [`SubprocessSandbox`] runs each command in a new Docker container, speaking the Docker
//! Engine API over its unix socket.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Code, Error, Result};
use crate::shell::exec::{base_env, set_var, InheritEnv, LocalShell};
use crate::shell::{Cancel, ExecOptions, ExecResult, ShellProvider};

pub(crate) mod docker;
pub mod kubernetes;
mod lead;
pub mod limits;
#[cfg(target_os = "linux")]
pub mod linux;
mod network;
mod noop;
pub use docker::check_broker;
mod owner;
#[cfg(target_os = "linux")]
pub mod persistent;
pub mod protect;
#[cfg(target_os = "linux")]
pub mod session;
mod wire;

#[cfg(all(test, unix))]
mod tests;

pub use crate::broker::NetworkPolicy;
pub use docker::tls::DockerTls;
pub use docker::{Reuse, SubprocessSandbox, SubprocessSandboxOptions, MIN_EGRESS_ENGINE};
pub use network::Network;
pub use noop::NoopSandbox;

/// The timeout a command gets when the caller gives none (the shell tool always gives one).
pub const DEFAULT_SANDBOX_TIMEOUT_MS: u64 = crate::shell::tool::DEFAULT_TIMEOUT_MS;
/// How long an adapter is still waited on after the cancel before the run is reported aborted.
const GRACE_AFTER_CANCEL: Duration = Duration::from_millis(1000);
/// How long past its timeout an adapter that ignores it is still waited on.
const GRACE_AFTER_TIMEOUT: Duration = Duration::from_secs(10);

/// One command for an adapter (the `SandboxAdapter` request of index.d.ts: `{ command, cwd, env, timeoutMs, stdin? }`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxRequest {
    pub command: String,
    /// Absolute host path, inside the SandboxShell's cwd.
    pub cwd: String,
    /// Exactly the variables the command gets.
    pub env: BTreeMap<String, String>,
    /// `0`: no timeout.
    pub timeout_ms: u64,
    /// Standard input; closed when `None`.
    pub stdin: Option<String>,
    /// The directory an isolating adapter shows the command (SandboxShell's cwd, so a per-call
    /// cwd below it still sees the whole of it); `cwd` itself when `None`. Not part of the
    /// request a JS adapter receives.
    pub mount: Option<String>,
    /// Where the output goes while the command runs, for an adapter that can stream it. Not part
    /// of the request a JS adapter receives.
    pub on_output: Option<crate::shell::Sink>,
    /// The most bytes of each stream an adapter holds (`ExecOptions::capture_bytes`). Not part
    /// of the request a JS adapter receives.
    pub capture_bytes: Option<usize>,
    /// Input while the command runs, for an adapter that `takes_input`. Not part of the request
    /// a JS adapter receives.
    pub input: Option<crate::shell::Input>,
    /// Overlay mode: where the command's changes are recorded before they apply. Not part of the
    /// request a JS adapter receives.
    pub record: Option<ChangeRecord>,
    /// Overlay mode: where the command's layer is made (`changesDir`; under the temp directory
    /// when `None`). Not part of the request a JS adapter receives.
    pub changes_dir: Option<PathBuf>,
    /// Overlay mode with `applyChanges: 'manual'`: where the command's changeset is kept, and
    /// the pending ones it sees below its own. Not part of the request a JS adapter receives.
    pub pending: Option<PendingSlot>,
}

/// Where an adapter that runs commands over an overlay (`changes: 'overlay'`) records what a
/// command changed before applying it: a SandboxShell's `checkpoints`, under the call's session
/// and turn.
#[derive(Clone)]
pub struct ChangeRecord {
    pub checkpoints: Arc<crate::checkpoints::Checkpoints>,
    pub fs: Arc<dyn crate::fs::FsProvider>,
    pub session: String,
    pub turn: u32,
}

impl std::fmt::Debug for ChangeRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeRecord").field("session", &self.session).field("turn", &self.turn).finish_non_exhaustive()
    }
}

impl PartialEq for ChangeRecord {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.checkpoints, &other.checkpoints) && self.session == other.session && self.turn == other.turn
    }
}

impl Eq for ChangeRecord {}

/// A SandboxShell's pending changesets (`applyChanges: 'manual'`), held as the adapter that
/// makes them knows them (LinuxSandbox's `overlay::pending::Pending`).
#[derive(Clone)]
pub struct PendingSlot(pub Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for PendingSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingSlot")
    }
}

impl PartialEq for PendingSlot {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for PendingSlot {}

/// Runs one command in some sandbox (`SandboxAdapter` in index.d.ts). Like a `ShellProvider`, `run`
/// resolves for a non-zero exit, a timeout or a cancel, and fails only when the command could
/// not be started.
#[async_trait]
pub trait SandboxAdapter: Send + Sync {
    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult>;
    async fn close(&self) -> Result<()> {
        Ok(())
    }
    /// Whether commands run on the host itself (only [`NoopSandbox`]): SandboxShell then gives
    /// them NodeWorkspace's base environment, and `inheritEnv: true` the whole host environment.
    fn runs_on_host(&self) -> bool {
        false
    }
    /// Whether commands run over an overlay and their changes go through `SandboxRequest::record`.
    fn records_changes(&self) -> bool {
        false
    }
    /// Whether a command's changeset can be kept pending, later commands running over it
    /// (`SandboxRequest::pending`).
    fn keeps_changes(&self) -> bool {
        false
    }
    /// Whether `SandboxRequest::input` reaches the command while it runs.
    fn takes_input(&self) -> bool {
        false
    }
    /// Whether the output streams to `on_output` while the command runs and a cancel stops all
    /// of it: what a background process needs.
    fn runs_in_background(&self) -> bool {
        false
    }
}

/// What a sandbox needs from the credential broker for allowlisted egress.
#[async_trait]
pub trait EgressBroker: Send + Sync {
    /// Adds a listener on `host` serving only peers in `clients` (CIDR); allowlist = broker rule
    /// hosts + `allow`. Returns the proxy URL.
    async fn listen(&self, host: &str, clients: &str, allow: Vec<String>) -> Result<String>;
    /// Stops that listener (called by sandbox.close()).
    async fn unlisten(&self, url: &str) -> Result<()>;
}

/// The variables that send a command's HTTP(S) through the broker's `proxy`, in both spellings
/// tools read, with `no_proxy` (comma-separated hosts) reached directly.
pub(crate) fn proxy_env(proxy: &str, no_proxy: &str) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (key, value) in [("HTTP_PROXY", proxy), ("HTTPS_PROXY", proxy), ("NO_PROXY", no_proxy)] {
        env.insert(key.to_string(), value.to_string());
        env.insert(key.to_ascii_lowercase(), value.to_string());
    }
    env
}

/// Checks one `network.allow` entry: an exact host name, an IP address or `*.suffix`. Returns
/// the normalised form (lower case, no trailing dot, IPv6 without brackets); a URL, a port, a
/// path or a malformed name is a `ConfigurationError`.
pub fn validate_host(s: &str) -> Result<String> {
    crate::broker::HostPattern::parse_named(s, "host in network.allow").map(|p| p.to_string())
}

/// A [`ShellProvider`] over a [`SandboxAdapter`] (spec: `SandboxShell(adapter, { cwd, env?,
/// inheritEnv? })`).
pub struct SandboxShell {
    adapter: Arc<dyn SandboxAdapter>,
    cwd: SandboxCwd,
    env: BTreeMap<String, String>,
    inherit: InheritEnv,
    /// `checkpoints`: where an overlay adapter records each command's changes.
    checkpoints: Option<(Arc<crate::checkpoints::Checkpoints>, Arc<dyn crate::fs::FsProvider>)>,
    /// `changesDir`: where an overlay adapter makes each command's layer.
    changes_dir: Option<PathBuf>,
    /// `applyChanges: 'manual'`: the changesets kept pending.
    pending: Option<PendingSlot>,
}

/// Where commands run: a directory of this machine (a local sandbox, a bind mount), confined
/// through links like NodeWorkspace's; or a path that exists only inside the sandbox (a remote or
/// hosted one), where per-call directories are joined to it lexically.
enum SandboxCwd {
    Local(LocalShell),
    Remote(PathBuf),
}

impl std::fmt::Debug for SandboxShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxShell").field("cwd", &self.cwd()).field("inherit", &self.inherit).finish_non_exhaustive()
    }
}

impl SandboxShell {
    /// `cwd` must be an absolute path. It is a path inside the sandbox, which need not exist on
    /// this machine; when it does, it is resolved through links (an adapter that bind-mounts it
    /// checks that it exists when it runs a command).
    pub fn new(
        adapter: Arc<dyn SandboxAdapter>,
        cwd: impl AsRef<Path>,
        env: BTreeMap<String, String>,
        inherit: InheritEnv,
    ) -> Result<Self> {
        let cwd = cwd.as_ref();
        // A POSIX path (`/work/project`) is a path inside the sandbox on any host: on Windows it
        // names no drive, so it is never looked up here.
        let posix = cwd.to_str().is_some_and(|s| s.starts_with('/'));
        if !(cwd.is_absolute() || posix) || cwd.to_str().is_none() {
            return Err(Error::config(format!(
                "SandboxShell: cwd must be an absolute path, not \"{}\"",
                cwd.display()
            )));
        }
        let here = if cfg!(windows) && posix { None } else { dunce::canonicalize(cwd).ok() };
        let cwd = match here {
            Some(real) if real.is_dir() => SandboxCwd::Local(LocalShell::new(real, BTreeMap::new(), InheritEnv::None)),
            Some(_) => {
                return Err(Error::config(format!("SandboxShell: cwd \"{}\" is not a directory", cwd.display())))
            }
            None => SandboxCwd::Remote(cwd.to_path_buf()),
        };
        #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
        let mut shell =
            SandboxShell { adapter, cwd, env, inherit, checkpoints: None, changes_dir: None, pending: None };
        // An overlay adapter's changesets: kept with 'manual', and those a dead process left.
        #[cfg(target_os = "linux")]
        if shell.adapter.records_changes() {
            let pending = linux::overlay::pending::Pending::new(shell.cwd());
            shell.pending = Some(PendingSlot(Arc::new(pending)));
        }
        Ok(shell)
    }

    /// `applyChanges: 'manual'`: each command's changeset is kept pending (later commands see
    /// it) until `apply_changes`, or dropped by `discard_changes`.
    pub fn with_manual_changes(self) -> Result<Self> {
        if !self.adapter.keeps_changes() {
            return Err(Error::config(
                "SandboxShell: applyChanges: 'manual' keeps what commands change and runs later commands over it, which needs LinuxSandbox with changes: 'overlay'.",
            ));
        }
        #[cfg(target_os = "linux")]
        if let Some(p) = self.pending() {
            p.set_manual();
        }
        Ok(self)
    }

    #[cfg(target_os = "linux")]
    fn pending(&self) -> Option<Arc<linux::overlay::pending::Pending>> {
        self.pending.as_ref().and_then(|p| p.0.clone().downcast().ok())
    }

    #[cfg(not(target_os = "linux"))]
    fn pending(&self) -> Option<std::convert::Infallible> {
        None
    }

    /// `pendingChanges()`: `[{ id, command, changes: [{ path, kind }], diff }]` (none without
    /// `applyChanges: 'manual'`).
    pub async fn pending_changes(&self) -> Result<serde_json::Value> {
        match self.pending() {
            #[cfg(target_os = "linux")]
            Some(p) => {
                p.recover(self.changes_dir.as_deref()).await?;
                p.list().await
            }
            _ => Ok(serde_json::Value::Array(Vec::new())),
        }
    }

    /// `applyChanges(id?)`: the pending changesets up to and including `id` (all without one),
    /// applied oldest first; `[{ id, changes }]`.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub async fn apply_changes(&self, id: Option<&str>) -> Result<serde_json::Value> {
        match self.pending() {
            #[cfg(target_os = "linux")]
            Some(p) => {
                p.recover(self.changes_dir.as_deref()).await?;
                p.apply(id).await
            }
            _ => Ok(serde_json::Value::Array(Vec::new())),
        }
    }

    /// `discardChanges(id?)`: drops changeset `id` and every one after it (all without one);
    /// their ids.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub async fn discard_changes(&self, id: Option<&str>) -> Result<serde_json::Value> {
        match self.pending() {
            #[cfg(target_os = "linux")]
            Some(p) => {
                p.recover(self.changes_dir.as_deref()).await?;
                p.discard(id).await
            }
            _ => Ok(serde_json::Value::Array(Vec::new())),
        }
    }

    /// `changesDir`: an existing directory outside the shell's cwd, where an overlay adapter
    /// makes each command's layer.
    pub fn with_changes_dir(mut self, dir: &Path) -> Result<Self> {
        let real = dunce::canonicalize(dir).ok().filter(|p| p.is_dir()).ok_or_else(|| {
            Error::config(format!("SandboxShell: changesDir {} is not a directory on this machine.", dir.display()))
        })?;
        if real.starts_with(self.cwd()) || self.cwd().starts_with(&real) {
            return Err(Error::config(format!(
                "SandboxShell: changesDir {} must lie outside the shell's cwd (and not hold it): a command would see its own layers.",
                real.display()
            )));
        }
        self.changes_dir = Some(real);
        Ok(self)
    }

    /// `checkpoints`: every change a command makes is recorded under the call's session and turn
    /// before it applies, so `rewind` undoes commands as it undoes the file tools. The adapter
    /// must run commands over an overlay (`changes: 'overlay'`) and `fs` be a NodeWorkspace whose
    /// root is this shell's cwd.
    pub fn with_checkpoints(
        mut self,
        checkpoints: Arc<crate::checkpoints::Checkpoints>,
        fs: Arc<dyn crate::fs::FsProvider>,
    ) -> Result<Self> {
        if !self.adapter.records_changes() {
            return Err(Error::config(
                "SandboxShell: checkpoints record what commands change, which needs an adapter that runs them over an overlay (LinuxSandbox with changes: 'overlay').",
            ));
        }
        let same_root = fs.as_local().is_some_and(|l| l.root() == self.cwd());
        if !same_root {
            return Err(Error::config(format!(
                "SandboxShell: checkpoints must be a WorkspaceCheckpoints over a NodeWorkspace whose root is the shell's cwd ({}).",
                self.cwd().display()
            )));
        }
        self.checkpoints = Some((checkpoints, fs));
        Ok(self)
    }

    /// The path commands run in (unless a call names a subdirectory): the real host path when
    /// it exists here.
    pub fn cwd(&self) -> &Path {
        match &self.cwd {
            SandboxCwd::Local(shell) => shell.root(),
            SandboxCwd::Remote(path) => path,
        }
    }

    pub fn adapter(&self) -> &Arc<dyn SandboxAdapter> {
        &self.adapter
    }

    /// The environment of one command: on the host (NoopSandbox) NodeWorkspace's base with the
    /// inherited names (everything with `inheritEnv: true`); in a sandbox only the inherited
    /// names (never the whole host environment); then the shell's `env`, then the call's.
    pub fn command_env(&self, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = if self.adapter.runs_on_host() {
            base_env(&self.inherit)
        } else {
            let mut env = BTreeMap::new();
            if let InheritEnv::List(names) = &self.inherit {
                for name in names {
                    if let Some(value) = std::env::var_os(name).and_then(|v| v.into_string().ok()) {
                        set_var(&mut env, name, &value);
                    }
                }
            }
            env
        };
        for (k, v) in self.env.iter().chain(extra) {
            set_var(&mut env, k, v);
        }
        env
    }

    fn resolve_cwd(&self, cwd: Option<&str>) -> Result<PathBuf> {
        match &self.cwd {
            SandboxCwd::Local(shell) => shell.resolve_cwd(cwd),
            SandboxCwd::Remote(base) => match cwd {
                None => Ok(base.clone()),
                Some(rel) => {
                    let rel = crate::path::normalize(rel, crate::path::Flavor::Posix)?;
                    // Joined with `/`, as the sandbox reads it, on a Windows host too.
                    let base = base.to_string_lossy();
                    Ok(if rel == "." {
                        base.as_ref().into()
                    } else {
                        format!("{}/{rel}", base.trim_end_matches('/')).into()
                    })
                }
            },
        }
    }
}

#[async_trait]
impl ShellProvider for SandboxShell {
    /// `sh` in a sandbox; the host's own shell (`cmd.exe` on Windows) where commands run on the
    /// host (NoopSandbox).
    fn shell(&self) -> Option<String> {
        Some(if self.adapter.runs_on_host() { crate::shell::exec::SHELL_NAME } else { "sh" }.to_string())
    }

    /// The sandbox sees this directory's files (bind-mounted at the same path) when it is here.
    fn host_dir(&self, cwd: Option<&str>) -> Option<PathBuf> {
        match &self.cwd {
            SandboxCwd::Local(_) => self.resolve_cwd(cwd).ok(),
            SandboxCwd::Remote(_) => None,
        }
    }

    fn takes_input(&self) -> bool {
        self.adapter.takes_input()
    }

    fn runs_in_background(&self) -> bool {
        self.adapter.runs_in_background()
    }

    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult> {
        let cwd = self.resolve_cwd(options.cwd.as_deref())?;
        let cwd = cwd
            .to_str()
            .ok_or_else(|| Error::new(Code::InvalidArguments, "The working directory is not valid Unicode."))?
            .to_string();
        let timeout_ms = options.timeout_ms.unwrap_or(DEFAULT_SANDBOX_TIMEOUT_MS);
        let req = SandboxRequest {
            command: command.to_string(),
            cwd,
            env: self.command_env(&options.env),
            timeout_ms,
            stdin: options.stdin,
            mount: self.cwd().to_str().map(str::to_string),
            on_output: options.on_output,
            capture_bytes: options.capture_bytes,
            input: options.input,
            record: self.checkpoints.as_ref().map(|(checkpoints, fs)| ChangeRecord {
                checkpoints: checkpoints.clone(),
                fs: fs.clone(),
                session: options.session_id.clone().unwrap_or_else(|| crate::tools::DEFAULT_SESSION.to_string()),
                turn: options.turn.unwrap_or(0),
            }),
            changes_dir: self.changes_dir.clone(),
            pending: self.pending.clone(),
        };
        run_guarded(self.adapter.clone(), req, options.cancel).await
    }
}

/// Runs `req` on `adapter` in its own task: an adapter that ignores the cancel keeps running (and
/// cleaning up) after it is no longer waited on, and a stalled one is given up on after its
/// timeout and a grace. Dropping the future aborts the task (a container is then removed, a host
/// process group killed).
pub(crate) async fn run_guarded(
    adapter: Arc<dyn SandboxAdapter>,
    req: SandboxRequest,
    cancel: Option<Cancel>,
) -> Result<ExecResult> {
    let timeout_ms = req.timeout_ms;
    if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
        return Ok(ExecResult { aborted: true, ..Default::default() });
    }
    let c = cancel.clone();
    let mut run = AbortOnDrop(Some(tokio::spawn(async move { adapter.run(req, c).await })));
    let cancelled = async {
        match &cancel {
            Some(c) => c.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let backstop = async {
        match timeout_ms {
            0 => std::future::pending().await,
            ms => tokio::time::sleep(Duration::from_millis(ms) + GRACE_AFTER_TIMEOUT).await,
        }
    };
    let stalled = tokio::select! {
        r = run.join() => return r,
        _ = cancelled => {
            match tokio::time::timeout(GRACE_AFTER_CANCEL, run.join()).await {
                Ok(r) => return r,
                Err(_) => ExecResult { aborted: true, ..Default::default() },
            }
        }
        _ = backstop => ExecResult { timed_out: true, ..Default::default() },
    };
    // No longer waited on, but not stopped either: its own timeout ends it.
    run.detach();
    Ok(stalled)
}

/// A spawned run, aborted when dropped unless detached.
struct AbortOnDrop(Option<tokio::task::JoinHandle<Result<ExecResult>>>);

impl AbortOnDrop {
    async fn join(&mut self) -> Result<ExecResult> {
        let handle = self.0.as_mut().expect("joined after detach");
        let r = handle.await;
        self.0 = None;
        match r {
            Ok(r) => r,
            Err(e) => Err(Error::new(Code::Io, format!("The sandbox adapter failed: {e}"))),
        }
    }

    fn detach(mut self) {
        self.0 = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// The credential broker is the egress proxy of allowlisted sandboxes.
#[async_trait]
impl EgressBroker for crate::broker::Broker {
    async fn listen(&self, host: &str, clients: &str, allow: Vec<String>) -> Result<String> {
        crate::broker::Broker::listen(self, host, clients, allow).await
    }
    async fn unlisten(&self, url: &str) -> Result<()> {
        crate::broker::Broker::unlisten(self, url).await
    }
}
