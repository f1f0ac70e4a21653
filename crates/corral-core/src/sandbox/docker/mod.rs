//! `SubprocessSandbox`: each command is `sh -c <command>` in a new Docker container, the cwd
//! bind-mounted at the same path, no network unless asked, spoken to over the Engine API.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::Method;
use serde_json::{json, Value};

mod egress;
pub(crate) mod engine;
#[cfg(target_os = "linux")]
mod entry;
#[cfg(target_os = "linux")]
pub mod netns;
mod options;
pub use options::check_broker;
mod session;
mod streams;
pub mod tls;

use egress::Egress;
use streams::Streams;

use super::{validate_host, EgressBroker, Network, SandboxAdapter, SandboxRequest};
use crate::error::{Code, Error, Result};
use crate::shell::{Cancel, ExecResult};
use engine::{DockerClient, DockerHost};

/// The oldest Engine allowlisted egress runs on: 25.0.5 stopped forwarding DNS from internal
/// networks (CVE-2024-29018).
pub const MIN_EGRESS_ENGINE: (u32, u32, u32) = (25, 0, 5);
/// The label on the internal networks this sandbox makes.
pub(crate) const EGRESS_LABEL: (&str, &str) = ("com.lousho.sandbox", "egress");
/// The label on its containers: `run` for one command's, `session` for a kept one.
pub(crate) const RUN_LABEL: (&str, &str) = ("com.lousho.sandbox", "run");
/// The label a session container carries instead.
pub(crate) const SESSION_LABEL: &str = "session";
/// The workspace directory a harness session's container mounts.
pub(crate) const SESSION_DIR_LABEL: &str = "com.lousho.sandbox.session-dir";
/// Which process made a container (`owner.rs`).
pub(crate) const OWNER_LABEL: &str = "com.lousho.sandbox.owner";
/// How long the output is still read after the container stopped or was killed.
pub(super) const DRAIN: Duration = Duration::from_secs(5);

/// Most processes one command's container may have.
pub const PIDS_LIMIT: i64 = 4096;

/// `new SubprocessSandbox({ image, network?, broker?, networkName?, dockerHost? })`.
#[derive(Clone, Default)]
pub struct SubprocessSandboxOptions {
    pub image: String,
    pub network: Network,
    pub broker: Option<Arc<dyn EgressBroker>>,
    /// The internal network for `Allow`; `lousho-egress-<random>` when `None`.
    pub network_name: Option<String>,
    /// `unix:///path/docker.sock`; `DOCKER_HOST`, then `unix:///var/run/docker.sock` when `None`.
    pub docker_host: Option<String>,
    /// The container's memory (swap equal: none extra), pids, and CPU-time, file-size and
    /// open-file ulimits.
    pub limits: super::limits::Limits,
    /// A new container per command, or one kept per SandboxShell cwd.
    pub reuse: Reuse,
    /// TLS to a daemon on TCP; `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH` when `None`.
    pub tls: Option<super::DockerTls>,
    /// Kept read-only inside the container (`protect.rs`: a bare name at any depth, a path with
    /// a `/` from the cwd). The JS API's default is `['.git']`.
    pub protect: Vec<String>,
    /// `changes: 'overlay'`: each command runs over an overlay of its working directory, mounted
    /// on the host (as root, with a local engine) and bound into the container.
    pub overlay: bool,
}

/// `reuse`: `'command'` (the default) or `'session'`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Reuse {
    /// Each command in a new container, removed when it ends.
    #[default]
    Command,
    /// One container per SandboxShell cwd, kept until `close()`; each command runs in it
    /// through the exec API.
    Session,
}

/// Runs each command in a new container (see the module docs).
pub struct SubprocessSandbox {
    image: String,
    network: Network,
    broker: Option<Arc<dyn EgressBroker>>,
    network_name: String,
    host: DockerHost,
    client: Option<Arc<DockerClient>>,
    egress: tokio::sync::Mutex<Option<Egress>>,
    pub(super) limits: super::limits::Limits,
    pub(super) reuse: Reuse,
    /// The kept containers (`reuse: 'session'`).
    pub(super) sessions: session::Sessions,
    protect: Vec<String>,
    /// A harness session's container (`in_session`): host directory and path inside of each
    /// directory it mounts, the first being where commands start.
    fixed: Option<Vec<(std::path::PathBuf, std::path::PathBuf)>>,
    /// Host files a session's container shows at the same path, read-only.
    read_only: Vec<std::path::PathBuf>,
    /// `changes: 'overlay'` (root, a local engine, a container per command).
    overlay: bool,
}

impl std::fmt::Debug for SubprocessSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubprocessSandbox")
            .field("image", &self.image)
            .field("network", &self.network)
            .field("broker", &self.broker.is_some())
            .field("network_name", &self.network_name)
            .field("host", &self.host)
            .finish()
    }
}

fn valid_network_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

impl SubprocessSandbox {
    /// Checks the options: a non-empty image, valid `network.allow` hosts (kept normalised), a
    /// valid network name and Docker host.
    pub fn new(options: SubprocessSandboxOptions) -> Result<Self> {
        let SubprocessSandboxOptions {
            image,
            network,
            broker,
            network_name,
            docker_host,
            limits,
            reuse,
            tls,
            protect,
            overlay,
        } = options;
        if image.trim().is_empty() {
            return Err(Error::config("SubprocessSandbox: image must be a non-empty string."));
        }
        let network = match network {
            Network::Allow(hosts) => Network::Allow(hosts.iter().map(|h| validate_host(h)).collect::<Result<_>>()?),
            other => other,
        };
        let network_name = match network_name {
            Some(name) if valid_network_name(&name) => name,
            Some(name) => {
                return Err(Error::config(format!(
                "SubprocessSandbox: networkName \"{name}\" is not a Docker network name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)"
            )))
            }
            None => format!("lousho-egress-{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff),
        };
        let host = DockerHost::resolve(docker_host.as_deref())?;
        if matches!(host, DockerHost::Tcp { .. }) && !protect.is_empty() {
            return Err(Error::config(
                "SubprocessSandbox: protect looks for what to keep read-only in the working directory, which a daemon on TCP mounts from its own machine; pass protect: [] to run there with nothing kept read-only.",
            ));
        }
        if overlay {
            // SAFETY: raw syscall.
            #[cfg(target_os = "linux")]
            let root = unsafe { libc::geteuid() } == 0;
            #[cfg(not(target_os = "linux"))]
            let root = false;
            let why = if !root {
                Some("the overlay is mounted on this machine, which needs this process to be root on Linux")
            } else if !matches!(host, DockerHost::Unix(_)) {
                Some("the overlay is mounted on this machine and bound into the container, so the Engine must run here (a unix socket)")
            } else if reuse == Reuse::Session {
                Some("a kept container's mounts cannot change per command (reuse: 'session')")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(Error::config(format!("SubprocessSandbox: changes: 'overlay' cannot run here: {why}.")));
            }
        }
        let client = match &host {
            DockerHost::Unix(_) | DockerHost::Pipe(_) => {
                if tls.is_some() {
                    return Err(Error::config(format!(
                        "SubprocessSandbox: tls is for a daemon on TCP (dockerHost tcp://HOST:PORT), not {host}."
                    )));
                }
                Some(Arc::new(DockerClient::at(host.clone())))
            }
            DockerHost::Tcp { https, .. } => {
                let tls = tls.or_else(super::DockerTls::from_env).or(https.then(super::DockerTls::default));
                let client = DockerClient::at(host.clone());
                Some(Arc::new(match tls {
                    Some(t) => client.with_tls(t.client_config()?),
                    None => client,
                }))
            }
            DockerHost::Remote(_) => None,
        };
        Ok(SubprocessSandbox {
            image,
            network,
            broker,
            network_name,
            host,
            client,
            egress: tokio::sync::Mutex::new(None),
            limits,
            reuse,
            sessions: Default::default(),
            protect,
            fixed: None,
            read_only: Vec::new(),
            overlay,
        })
    }

    /// One kept container for a harness session: it mounts `binds` (host directory, path inside;
    /// the first is where commands start and what `protect` looks at), runs with `NetworkMode:
    /// none`, and every command runs in it whatever its directory. A container that is gone is
    /// not replaced (what the session made inside its network namespace went with it).
    /// `read_only`: host files shown at the same path, read-only (the CA bundle commands trust).
    /// A daemon on TCP mounts directories of its own machine, so it is refused.
    pub fn in_session(
        mut self,
        binds: Vec<(std::path::PathBuf, std::path::PathBuf)>,
        read_only: Vec<std::path::PathBuf>,
    ) -> Result<Self> {
        if !matches!(self.host, DockerHost::Unix(_) | DockerHost::Pipe(_)) || binds.is_empty() {
            return Err(Error::config(format!(
                "A harness session's directories are bind-mounted into its container, so the Docker Engine must run on this machine (a unix socket or named pipe), not at {}.",
                self.host
            )));
        }
        self.reuse = Reuse::Session;
        self.network = Network::None;
        self.broker = None;
        self.fixed = Some(binds);
        self.read_only = read_only;
        Ok(self)
    }

    /// Starts the session's container (`in_session`) if it is not running: its id and the pid
    /// of its first process as the engine reports it.
    pub async fn start_session_container(&self) -> Result<(String, i64)> {
        let Some(binds) = &self.fixed else {
            return Err(Error::new(Code::InvalidArguments, "SubprocessSandbox: not a session's sandbox."));
        };
        let req = SandboxRequest { cwd: binds[0].1.to_string_lossy().into_owned(), ..Default::default() };
        let p = self.prepare(&req).await?;
        // A container an earlier process left over these directories (it crashed before `stop`)
        // could still be writing in them while this one is set up: it is removed first.
        let label = format!("{SESSION_DIR_LABEL}={}", binds[0].0.to_string_lossy());
        for c in session::labelled(&p.client, &label).await? {
            if let Some(id) = c.get("Id").and_then(Value::as_str) {
                let gone = p.client.call(Method::DELETE, &format!("/containers/{id}?force=1&v=1"), None).await?;
                if !gone.status.is_success() && gone.status != http::StatusCode::NOT_FOUND {
                    return Err(Error::new(
                        Code::Io,
                        format!(
                            "Docker Engine: a container left over this session could not be removed: {}",
                            gone.message()
                        ),
                    ));
                }
            }
        }
        let kept = self.sessions.get_or_start(self, &p).await?;
        let id = kept.id.clone();
        let v = match p.client.json(Method::GET, &format!("/containers/{id}/json"), None).await {
            Ok(v) => v,
            Err(e) => {
                self.sessions.remove_all(&p.client).await;
                return Err(e);
            }
        };
        let pid = v.get("State").and_then(|s| s.get("Pid")).and_then(Value::as_i64).unwrap_or(0);
        Ok((id, pid))
    }

    /// From now on, every command of the session's container `id` (whose first process is `pid`
    /// of this machine) is started by this machine's keeper in a pid namespace of its own
    /// (`entry.rs`). For a process that can enter the container's namespaces (root, the engine
    /// on this machine); a failure is an error, and the session does not start.
    #[cfg(target_os = "linux")]
    pub async fn start_commands_in_own_pid_namespaces(&self, id: &str, pid: i64) -> Result<()> {
        let kept =
            self.sessions.find(id).await.ok_or_else(|| Error::new(Code::Io, "The session's container is gone."))?;
        let owned = id.to_string();
        let taken = tokio::task::spawn_blocking(move || entry::Entry::take(pid, &owned))
            .await
            .map_err(|e| Error::new(Code::Io, e.to_string()))?;
        match taken {
            Ok(entry) => {
                kept.enter(entry);
                Ok(())
            }
            // A container in a user namespace of its own (an Engine that remaps users): its
            // commands cannot be started like its first process, so they go through the exec API.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => Ok(()),
            Err(e) => Err(Error::new(
                Code::Io,
                format!("Could not read how the session's container starts its processes: {e}"),
            )),
        }
    }

    /// The labels of a kept container: a session's also names the directory it mounts.
    pub(super) fn session_labels(&self) -> Value {
        let mut l = labels(SESSION_LABEL);
        if let Some(binds) = &self.fixed {
            l[SESSION_DIR_LABEL] = json!(binds[0].0.to_string_lossy());
        }
        l
    }

    /// Whether a container that is gone is replaced (not for a session's: see `in_session`).
    pub(super) fn replaces_gone(&self) -> bool {
        self.fixed.is_none()
    }

    /// The user a session's container runs as: this process's uid and gid, so what commands
    /// write in the session's directories is this user's own; left to the image as root, and
    /// with a rootless engine (whose root is this user).
    pub(super) async fn session_user(&self, client: &DockerClient) -> Result<Option<String>> {
        #[cfg(unix)]
        {
            // SAFETY: plain calls without arguments.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            if self.fixed.is_none() || uid == 0 {
                return Ok(None);
            }
            let info = client.json(Method::GET, "/info", None).await?;
            Ok((!engine::rootless(&info)).then(|| format!("{uid}:{gid}")))
        }
        #[cfg(not(unix))]
        {
            let _ = client;
            Ok(None)
        }
    }

    /// The network policy, with `Allow` hosts validated and normalised (`sandbox.network`).
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Removes the containers a crashed process left behind: those this library labelled, made
    /// on this machine by a process that no longer runs. Returns how many were removed.
    pub async fn prune(&self) -> Result<usize> {
        session::prune(self.client()?).await
    }

    pub fn image(&self) -> &str {
        &self.image
    }

    /// The name of the internal network used (or to be made) for `Allow` with a broker.
    pub fn network_name(&self) -> &str {
        &self.network_name
    }

    /// The daemon's socket, or `None` for a host this client does not speak to.
    pub fn docker_socket(&self) -> Option<&std::path::Path> {
        self.client.as_deref().and_then(DockerClient::socket)
    }

    fn egress_wanted(&self) -> Option<(&Arc<dyn EgressBroker>, &[String])> {
        match (&self.network, &self.broker) {
            (Network::Allow(hosts), Some(broker)) => Some((broker, hosts)),
            _ => None,
        }
    }

    pub(super) fn client(&self) -> Result<&Arc<DockerClient>> {
        match (&self.client, &self.host) {
            (Some(c), _) => Ok(c),
            (None, h) => Err(Error::config(format!(
                "SubprocessSandbox speaks to a Docker Engine over its unix socket, named pipe or TCP (tcp://HOST:PORT, with tls), not to \"{h}\"."
            ))),
        }
    }
}

/// What every container of a run needs, checked before any exists.
pub(super) struct Prepared {
    pub client: Arc<DockerClient>,
    pub network_mode: String,
    /// The request's variables and the proxy's, as `KEY=value`.
    pub env: Vec<String>,
    /// The directory bind-mounted at the same path.
    pub mount: String,
}

impl SubprocessSandbox {
    /// Egress is checked (and refused) and the mount looked at before any container exists.
    pub(super) async fn prepare(&self, req: &SandboxRequest) -> Result<Prepared> {
        let (network_mode, proxy_env) = self.network_plan().await?;
        let client = self.client()?.clone();
        let mut env = req.env.clone();
        env.extend(proxy_env);
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // The container sees SandboxShell's cwd, bind-mounted at the same path, and starts in
        // the request's cwd (the same directory, or one below it).
        if let Some(binds) = &self.fixed {
            if !binds.iter().all(|(host, _)| host.is_dir()) {
                return Err(Error::new(Code::NotFound, "The session's directories are gone."));
            }
            let mount = binds[0].1.to_string_lossy().into_owned();
            return Ok(Prepared { client, network_mode, env, mount });
        }
        let mount = req.mount.as_deref().unwrap_or(&req.cwd).to_string();
        // A daemon on TCP mounts a directory of its own machine: it says if there is none.
        let local = !matches!(self.host, DockerHost::Tcp { .. });
        if local && !std::path::Path::new(&mount).is_dir() {
            return Err(Error::new(
                Code::NotFound,
                "SubprocessSandbox: the SandboxShell's cwd is not a directory on this machine; it is bind-mounted into the container, so it must exist here.",
            ));
        }
        Ok(Prepared { client, network_mode, env, mount })
    }

    /// What `protect` names in the mounted working directory now (nothing for a daemon on TCP,
    /// which mounts from its own machine), and the watch that finds what a command made there.
    pub(super) fn protected_now(
        &self,
        p: &Prepared,
    ) -> Result<(super::protect::Protected, Option<super::protect::Watch>)> {
        if self.protect.is_empty() || matches!(self.host, DockerHost::Tcp { .. }) {
            return Ok(Default::default());
        }
        let root = match &self.fixed {
            Some(binds) => binds[0].0.as_path(),
            None => std::path::Path::new(&p.mount),
        };
        let found = super::protect::protected(root, &self.protect, &[])?;
        let watch = super::protect::Watch::new(root, &self.protect, Vec::new(), found.names.clone());
        Ok((found, Some(watch)))
    }

    /// A new container's `HostConfig`: network, the bind mount (what `protect` finds in it now
    /// mounted again read-only, and the directories above those onto themselves, so they cannot
    /// be renamed), no setuid escalation, and the limits. Looked for only when a container is
    /// made: a kept one serves its later commands without another walk of the tree.
    pub(super) fn host_config(
        &self,
        p: &Prepared,
        found: &super::protect::Protected,
        over: Option<&std::path::Path>,
    ) -> Result<Value> {
        // Each mount as (host directory, path inside); a session's from its binds, else the
        // working directory at the same path (in overlay mode, the overlay `over` of it).
        let same = std::path::PathBuf::from(&p.mount);
        let binds = match &self.fixed {
            Some(binds) => binds.clone(),
            None => vec![(over.map_or_else(|| same.clone(), |o| o.to_path_buf()), same.clone())],
        };
        let (source, at) = (&binds[0].0, &binds[0].1);
        // Protected paths are found in the working directory and bound from what is mounted.
        let root = if over.is_some() { &same } else { source };
        let protected = &found.paths;
        let bind = |d: &std::path::PathBuf, read_only: bool| {
            let rel = d.strip_prefix(root).ok()?;
            let (from, target) = (source.join(rel), at.join(rel));
            Some(json!({ "Type": "bind", "Source": from.to_str()?, "Target": target.to_str()?, "ReadOnly": read_only }))
        };
        let mut mounts: Vec<Value> = binds
            .iter()
            .map(|(host, inside)| {
                json!({ "Type": "bind", "Source": host.to_string_lossy(), "Target": inside.to_string_lossy() })
            })
            .collect();
        mounts.extend(self.read_only.iter().map(|f| {
            json!({ "Type": "bind", "Source": f.to_string_lossy(), "Target": f.to_string_lossy(), "ReadOnly": true })
        }));
        mounts.extend(super::protect::pins(root, protected).iter().filter_map(|d| bind(d, false)));
        mounts.extend(protected.iter().filter_map(|d| bind(d, true)));
        let mut host = json!({
            "NetworkMode": p.network_mode,
            "AutoRemove": false,
            "Mounts": mounts,
            // No setuid escalation inside the container, and no fork bomb that takes the host down.
            "SecurityOpt": ["no-new-privileges"],
            "PidsLimit": self.limits.pids.map_or(PIDS_LIMIT, |p| p as i64),
        });
        if self.fixed.is_some() || self.overlay {
            // A harness session's commands may run as root (the image's user), and what an
            // overlay's command leaves is applied to the host: no device files and no file
            // capabilities left there.
            host["CapDrop"] = json!(["MKNOD", "SETFCAP"]);
        }
        if let Some(m) = self.limits.memory_bytes {
            host["Memory"] = json!(m);
            host["MemorySwap"] = json!(m);
        }
        let ulimits: Vec<Value> = [
            ("cpu", self.limits.cpu_seconds),
            ("fsize", self.limits.file_size_bytes),
            ("nofile", self.limits.open_files),
        ]
        .into_iter()
        .filter_map(|(name, v)| {
            v.map(|n| json!({ "Name": name, "Soft": n, "Hard": super::limits::hard_limit(name == "cpu", n) }))
        })
        .collect();
        if !ulimits.is_empty() {
            host["Ulimits"] = json!(ulimits);
        }
        Ok(host)
    }

    /// A command that could not run: an image without `sh` is a result with exit code 127, as a
    /// shell says it; anything else an error.
    pub(super) fn could_not_run(&self, e: Error) -> Result<ExecResult> {
        if e.message.contains("executable file not found") {
            return Ok(ExecResult {
                exit_code: Some(127),
                stderr: format!(
                    "The command could not start: the image {} has no sh ({}).\n",
                    self.image,
                    e.message.trim()
                ),
                ..Default::default()
            });
        }
        Err(Error::new(e.code, format!("Could not run the command: {}", e.message)))
    }

    /// Killed for memory: the container's state says so (asked only when a limit was set and
    /// the command failed).
    pub(super) async fn oom_killed(&self, client: &DockerClient, id: &str, result: &ExecResult) -> bool {
        self.limits.memory_bytes.is_some()
            && result.exit_code.is_some_and(|c| c != 0)
            && client
                .json(Method::GET, &format!("/containers/{id}/json"), None)
                .await
                .ok()
                .and_then(|v| v.get("State").and_then(|s| s.get("OOMKilled")).and_then(Value::as_bool))
                .unwrap_or(false)
    }

    pub(super) fn add_limit_note(&self, result: &mut ExecResult, oom: bool) {
        if !self.limits.is_empty() {
            result.note = super::limits::limit_note(result, &self.limits, oom, false, 0);
        }
    }
}

/// The labels of a container this sandbox makes: what it is for, and which process on which
/// machine made it (so `prune()` can tell what a crashed host left behind).
pub(super) fn labels(kind: &str) -> Value {
    json!({ RUN_LABEL.0: kind, OWNER_LABEL: super::owner::label() })
}

/// Force-removes a container when dropped while armed (a dropped or failed run).
struct ContainerGuard {
    client: Arc<DockerClient>,
    id: Option<String>,
}

impl ContainerGuard {
    async fn remove(&mut self) {
        if let Some(id) = self.id.take() {
            remove_container(&self.client, &id).await;
        }
    }
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        // Its own thread and runtime: the caller's runtime may be shutting down (a dropped
        // future is often dropped with it), and spawned tasks would then never run.
        if let Some(id) = self.id.take() {
            let client = self.client.clone();
            let _ = std::thread::Builder::new().name("corral-sandbox-cleanup".into()).spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    rt.block_on(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(30), remove_container(&client, &id)).await;
                    });
                }
            });
        }
    }
}

pub(super) async fn remove_container(client: &DockerClient, id: &str) {
    let _ = client.call(Method::DELETE, &format!("/containers/{id}?force=1&v=1"), None).await;
}

enum Outcome {
    Exited(Result<i64>),
    TimedOut,
    Aborted,
}

#[async_trait]
impl SandboxAdapter for SubprocessSandbox {
    fn takes_input(&self) -> bool {
        true
    }

    /// The output streams from the attached connection; a cancel kills the container (one per
    /// command) or every process of the command in the kept one.
    fn runs_in_background(&self) -> bool {
        true
    }

    fn records_changes(&self) -> bool {
        self.overlay
    }

    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        let cancel = cancel.unwrap_or_default();
        if cancel.is_cancelled() {
            return Ok(ExecResult { aborted: true, ..Default::default() });
        }
        if self.reuse == Reuse::Session {
            return session::run(self, req, cancel).await;
        }
        let deadline =
            (req.timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms));
        let prepared = self.prepare(&req).await?;
        // Overlay mode: the command's layer, and the overlay of the working directory the
        // container gets in its place (unmounted when this run ends, however it ends).
        #[cfg(target_os = "linux")]
        let over = match self.overlay {
            true => Some(super::linux::overlay::HostOverlay::mount(
                std::path::Path::new(&prepared.mount),
                req.changes_dir.as_deref(),
            )?),
            false => None,
        };
        #[cfg(target_os = "linux")]
        let over_path = over.as_ref().map(|o| o.merged.clone());
        #[cfg(not(target_os = "linux"))]
        let over_path: Option<std::path::PathBuf> = None;
        let (found, watch) = self.protected_now(&prepared)?;
        // What the command writes lands in the layer: nothing to sweep on the host.
        let watch = if over_path.is_some() { None } else { watch };
        let host_config = self.host_config(&prepared, &found, over_path.as_deref())?;
        let Prepared { client, env, mount: prepared_mount, .. } = prepared;
        let with_stdin = req.stdin.is_some() || req.input.is_some();
        let body = json!({
            "Image": self.image,
            "Entrypoint": ["sh", "-c"],
            "Cmd": [req.command],
            "WorkingDir": req.cwd,
            "Env": env,
            "Tty": false,
            "AttachStdin": with_stdin,
            "OpenStdin": with_stdin,
            "StdinOnce": with_stdin,
            "AttachStdout": true,
            "AttachStderr": true,
            "Labels": labels(RUN_LABEL.1),
            "HostConfig": host_config,
        });
        let created = client
            .json(Method::POST, "/containers/create", Some(&body))
            .await
            .map_err(|e| Error::new(e.code, format!("Could not start the command: {}", e.message)))?;
        let id = created
            .get("Id")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::new(Code::Io, "Docker Engine: the created container has no Id"))?
            .to_string();
        let mut guard = ContainerGuard { client: client.clone(), id: Some(id.clone()) };

        let streams = Streams::new(req.capture_bytes);
        let Streams { out, err, done, .. } = &streams;
        let mut reader: Option<tokio::task::JoinHandle<()>> = None;
        let work = async {
            let attached = client.attach(&id, with_stdin).await?;
            reader = Some(streams.read(attached, &req));
            client.json(Method::POST, &format!("/containers/{id}/start"), None).await?;
            let waited =
                client.json(Method::POST, &format!("/containers/{id}/wait?condition=not-running"), None).await?;
            if let Some(msg) = waited.get("Error").and_then(|e| e.get("Message")).and_then(Value::as_str) {
                if !msg.is_empty() {
                    return Err(Error::new(Code::Io, format!("Docker Engine: wait: {msg}")));
                }
            }
            waited
                .get("StatusCode")
                .and_then(Value::as_i64)
                .ok_or_else(|| Error::new(Code::Io, "Docker Engine: wait gave no StatusCode"))
        };
        let timer = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            r = work => Outcome::Exited(r),
            _ = timer => Outcome::TimedOut,
            _ = cancel.cancelled() => Outcome::Aborted,
        };

        let mut result = ExecResult::default();
        match outcome {
            Outcome::Exited(Ok(code)) => {
                result.exit_code = Some(i32::try_from(code).unwrap_or(-1));
            }
            Outcome::Exited(Err(e)) => {
                if let Some(r) = reader.take() {
                    r.abort();
                }
                guard.remove().await;
                let watch = watch.clone();
                super::protect::sweep_blocking(watch.into_iter().collect()).await;
                return self.could_not_run(e);
            }
            Outcome::TimedOut | Outcome::Aborted => {
                result.timed_out = matches!(outcome, Outcome::TimedOut);
                result.aborted = matches!(outcome, Outcome::Aborted);
                // The container is removed with every process in it.
                result.every_process_killed = true;
                result.signal = Some("SIGKILL".to_string());
                let _ = client.call(Method::POST, &format!("/containers/{id}/kill?signal=SIGKILL"), None).await;
            }
        }
        if reader.is_some() {
            let _ = tokio::time::timeout(DRAIN, done.cancelled()).await;
        }
        if let Some(r) = reader.take() {
            r.abort();
        }
        let oom = self.oom_killed(&client, &id, &result).await;
        guard.remove().await;
        result.stdout = out.lock().unwrap().text();
        result.stderr = err.lock().unwrap().text();
        self.add_limit_note(&mut result, oom);
        // Protected names the command made (a `git init`) never reach the host's tools.
        let swept = super::protect::sweep_blocking(watch.into_iter().collect()).await;
        super::protect::add_notes(&mut result, swept);
        #[cfg(not(target_os = "linux"))]
        let _ = prepared_mount;
        #[cfg(target_os = "linux")]
        if let Some(over) = over {
            let mount = std::path::PathBuf::from(&prepared_mount);
            let protected = super::linux::overlay::Protected::of(&self.protect, &mount);
            result.changes = Some(over.finish(mount, protected, req.record.clone()).await);
        }
        Ok(result)
    }

    /// Removes the kept containers, stops the broker's listener and removes the network if this
    /// sandbox made it.
    async fn close(&self) -> Result<()> {
        if let Ok(client) = self.client() {
            self.sessions.remove_all(client).await;
        }
        let Some(e) = self.egress.lock().await.take() else { return Ok(()) };
        let mut first_error = None;
        if let Some(broker) = &self.broker {
            if let Err(err) = broker.unlisten(&e.proxy).await {
                first_error.get_or_insert(err);
            }
        }
        if e.created {
            if let Ok(client) = self.client() {
                match client.call(Method::DELETE, &format!("/networks/{}", e.id), None).await {
                    Ok(r) if r.status.is_success() || r.status == http::StatusCode::NOT_FOUND => {}
                    Ok(r) => {
                        first_error.get_or_insert(Error::new(
                            Code::Io,
                            format!("Docker Engine: removing network {}: {}", e.network, r.message()),
                        ));
                    }
                    Err(err) => {
                        first_error.get_or_insert(err);
                    }
                }
            }
        }
        match first_error {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}
