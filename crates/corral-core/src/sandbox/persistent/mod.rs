//! One persistent sandbox (a harness session, API.md "Agents inside corral"): its directories
//! under `<root>/<id>` (`workspace`, `tmp`, `home`) shown at `/workspace`, `/tmp` and
//! `/home/agent`; what holds its network namespace (a keeper for LinuxSandbox, a kept container
//! with `NetworkMode: none` for Docker); a broker serving the proxy endpoint inside under the
//! session's network policy, with its request transformations and TLS termination; and the ports
//! forwarded from the host. `stop` ends its processes and forwarders (files stay); `resume` opens
//! the same directories again.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::docker::netns::NetNs;
use super::docker::{SubprocessSandbox, SubprocessSandboxOptions};
use super::session::ports::{Forwarder, Inside};
use super::session::Keeper;
use crate::broker::{Broker, BrokerConfig, Gate, NetworkPolicy};
use crate::error::{Code, Error, Result};
use crate::sandbox::linux::{LinuxSandbox, LinuxSandboxOptions};
use crate::sandbox::{SandboxAdapter, SandboxRequest};
use crate::shell::{Cancel, ExecResult};

/// Where the session's directories are inside.
pub const WORKSPACE: &str = "/workspace";
pub const HOME: &str = "/home/agent";
const DIRS: [(&str, &str); 3] = [("workspace", WORKSPACE), ("tmp", "/tmp"), ("home", HOME)];

/// A session id: one path segment.
pub fn check_id(id: &str) -> Result<()> {
    let ok = (1..=128).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(Error::config(format!("A session id is 1 to 128 of A-Z, a-z, 0-9, '-' and '_', not {id:?}.")))
    }
}

/// A new random session id (when `createSession` is given none).
pub fn new_id() -> String {
    format!("session-{:016x}", rand::random::<u64>())
}

/// What a session's commands run in.
pub enum SessionKind {
    Linux(LinuxSandboxOptions),
    Docker(SubprocessSandboxOptions),
}

pub struct SessionOptions {
    pub sandbox: SessionKind,
    pub policy: NetworkPolicy,
    pub ports: Vec<u16>,
    /// Trusted for upstream TLS besides the system roots (PEM).
    pub upstream_ca: Vec<String>,
    /// Added to every command's environment.
    pub env: BTreeMap<String, String>,
}

pub struct SessionSandbox {
    id: String,
    dir: PathBuf,
    holder: Holder,
    sandbox: Arc<dyn SandboxAdapter>,
    /// Where sockets inside the session's network namespace are made; `None` for a container this
    /// process cannot enter (then the session has loopback only and no port is exposed).
    inside: Mutex<Option<Arc<dyn Inside>>>,
    broker: Arc<Broker>,
    gate: Arc<Gate>,
    /// The proxy endpoint's port inside (none for a container this process cannot enter).
    proxy: Option<u16>,
    env: BTreeMap<String, String>,
    forwarders: Mutex<HashMap<u16, Forwarder>>,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::new(Code::Io, format!("{what}: {e}"))
}

impl SessionSandbox {
    /// The session's keeper (a LinuxSandbox session's).
    #[cfg(test)]
    pub(crate) fn keeper(&self) -> Option<&Keeper> {
        match &self.holder {
            Holder::Keeper(k) => Some(k),
            Holder::Container(_) => None,
        }
    }

    /// Makes `<root>/<id>` (and `root` when missing) and starts the session.
    pub async fn create(root: &Path, id: &str, options: SessionOptions) -> Result<SessionSandbox> {
        check_id(id)?;
        let dir = root.join(id);
        std::fs::create_dir_all(root).map_err(io("the session root"))?;
        match private_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::config(format!("A session {id} already exists under this root; resume it.")))
            }
            Err(e) => return Err(io("the session directory")(e)),
        }
        for (name, _) in DIRS {
            std::fs::create_dir(dir.join(name)).map_err(io("the session directory"))?;
        }
        Self::open(dir, id, options).await
    }

    /// `create`, with `/tmp` and the home as `identity`'s first session left them (`save_identity`),
    /// when there is such a state under `root`; `false` in the second place when there was none.
    pub async fn create_for(
        root: &Path,
        id: &str,
        identity: &str,
        options: SessionOptions,
    ) -> Result<(SessionSandbox, bool)> {
        check_id(id)?;
        let state = identity::dir(root, identity);
        let found = state.join("done").is_file();
        let dir = root.join(id);
        if found {
            std::fs::create_dir_all(root).map_err(io("the session root"))?;
            private_dir(&dir).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    Error::config(format!("A session {id} already exists under this root; resume it."))
                }
                _ => io("the session directory")(e),
            })?;
            std::fs::create_dir(dir.join("workspace")).map_err(io("the session directory"))?;
            for name in ["tmp", "home"] {
                identity::copy_tree(&state.join(name), &dir.join(name)).map_err(io("copying the identity's state"))?;
            }
            return Ok((Self::open(dir, id, options).await?, true));
        }
        Ok((Self::create(root, id, options).await?, false))
    }

    /// Keeps what is now in `/tmp` and the home as `identity`'s state under the root, for the
    /// later sessions of that identity (`create_for`); it outlives this session.
    pub fn save_identity(&self, identity: &str) -> Result<()> {
        let root = self.dir.parent().ok_or_else(|| Error::new(Code::Io, "A session directory has no parent."))?;
        identity::save(root, identity, &self.dir).map_err(io("saving the identity's state"))
    }

    /// Opens `<root>/<id>` again, with its files, `/tmp` and home.
    pub async fn resume(root: &Path, id: &str, options: SessionOptions) -> Result<SessionSandbox> {
        check_id(id)?;
        let dir = root.join(id);
        if !DIRS.iter().all(|(name, _)| dir.join(name).is_dir()) {
            return Err(Error::new(Code::NotFound, format!("No session {id} under this root.")));
        }
        Self::open(dir, id, options).await
    }

    async fn open(dir: PathBuf, id: &str, options: SessionOptions) -> Result<SessionSandbox> {
        let dir = std::fs::canonicalize(&dir).map_err(io("the session directory"))?;
        let binds: Vec<(PathBuf, PathBuf)> =
            DIRS.iter().map(|(name, inside)| (dir.join(name), PathBuf::from(inside))).collect();
        let broker = Broker::start(BrokerConfig {
            terminate_tls: true,
            extra_ca_pem: options.upstream_ca,
            ..Default::default()
        })
        .await?;
        let bundle: Vec<PathBuf> = broker.env().get("SSL_CERT_FILE").map(PathBuf::from).into_iter().collect();
        let started = Self::start_holder(&dir, binds, bundle, options.sandbox, &options.policy, &options.ports).await;
        let (holder, sandbox, inside) = match started {
            Ok(h) => h,
            Err(e) => {
                broker.close().await;
                return Err(e);
            }
        };
        let gate = Gate::new(options.policy);
        let mut env = BTreeMap::new();
        for (k, v) in
            [("HOME", HOME), ("TMPDIR", "/tmp"), ("PATH", "/usr/local/bin:/usr/bin:/bin"), ("IS_SANDBOX", "1")]
        {
            env.insert(k.to_string(), v.to_string());
        }
        let mut proxy = None;
        if let Some(inside) = &inside {
            let served = async {
                let (listener, port) = inside.listen(0).await.map_err(io("the session's proxy endpoint"))?;
                broker.serve_session(std::net::TcpListener::from(listener), gate.clone())?;
                Ok::<u16, Error>(port)
            };
            let port = match served.await {
                Ok(port) => port,
                Err(e) => {
                    holder.close().await;
                    broker.close().await;
                    return Err(e);
                }
            };
            // Through the proxy, loopback is the host's (as the policy allows); a direct
            // connection reaches the session's own: so NO_PROXY names no loopback address.
            env.extend(crate::sandbox::proxy_env(&format!("http://127.0.0.1:{port}"), ""));
            proxy = Some(port);
        }
        let bundle = crate::broker::terminate::BUNDLE_VARS;
        env.extend(broker.env().into_iter().filter(|(k, _)| bundle.contains(&k.as_str())));
        env.extend(options.env);
        let session = SessionSandbox {
            id: id.to_string(),
            dir,
            holder,
            sandbox,
            inside: Mutex::new(inside),
            broker,
            gate,
            proxy,
            env,
            forwarders: Mutex::new(HashMap::new()),
        };
        if let Err(e) = session.set_ports(&options.ports).await {
            session.stop().await;
            return Err(e);
        }
        Ok(session)
    }

    /// What holds the session's processes and network namespace, the sandbox its commands run in,
    /// and where sockets inside are made (`None`: a container this process cannot enter, which
    /// only a session with `deny-all` and no port may have).
    async fn start_holder(
        dir: &Path,
        binds: Vec<(PathBuf, PathBuf)>,
        bundle: Vec<PathBuf>,
        kind: SessionKind,
        policy: &NetworkPolicy,
        ports: &[u16],
    ) -> Result<(Holder, Arc<dyn SandboxAdapter>, Option<Arc<dyn Inside>>)> {
        Ok(match kind {
            SessionKind::Linux(o) => {
                let keeper = start_keeper(dir, &binds, &o).await?;
                let sandbox = match LinuxSandbox::new(o) {
                    Ok(s) => s.in_session(keeper.clone(), binds),
                    Err(e) => {
                        keeper.close();
                        return Err(e);
                    }
                };
                (Holder::Keeper(keeper.clone()), Arc::new(sandbox), Some(Arc::new(keeper)))
            }
            SessionKind::Docker(o) => {
                // The CA bundle commands trust is shown at its host path, read-only.
                let sandbox = Arc::new(SubprocessSandbox::new(o)?.in_session(binds, bundle)?);
                let (container, pid) = sandbox.start_session_container().await?;
                let entered = NetNs::enter(pid, &container);
                let needs_network = !matches!(policy, NetworkPolicy::DenyAll) || !ports.is_empty();
                match entered {
                    Ok(ns) => {
                        // This process can enter the container: every command gets a pid
                        // namespace of its own, or the session does not start.
                        if let Err(e) = sandbox.start_commands_in_own_pid_namespaces(&container, pid).await {
                            let _ = sandbox.close().await;
                            return Err(e);
                        }
                        (Holder::Container(sandbox.clone()), sandbox, Some(Arc::new(ns)))
                    }
                    Err(e) if needs_network => {
                        let _ = sandbox.close().await;
                        return Err(no_network(&e.to_string()));
                    }
                    Err(_) => (Holder::Container(sandbox.clone()), sandbox, None),
                }
            }
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// `<root>/<id>`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host directory behind an absolute path inside (`/workspace/a` → `<dir>/workspace/a`),
    /// or `None` for a path outside the session's directories.
    /// An absolute path with `.` or `..` in it is `None` too: it is never resolved on the host.
    pub fn host_path(&self, inside: &str) -> Option<PathBuf> {
        let p = Path::new(inside);
        let plain = p.is_absolute()
            && p.components().skip(1).all(|c| matches!(c, std::path::Component::Normal(_)))
            && !inside.split('/').any(|c| c == "." || c == "..");
        if !plain {
            return None;
        }
        DIRS.iter().find_map(|(name, at)| p.strip_prefix(at).ok().map(|rest| self.dir.join(name).join(rest)))
    }

    /// The environment every command starts with.
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }

    /// The proxy endpoint's port inside (`None`: the session has loopback only).
    pub fn proxy_port(&self) -> Option<u16> {
        self.proxy
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Runs `command` in `cwd` (inside; default `/workspace`) with the session's environment
    /// plus `env`.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        command: &str,
        cwd: Option<&str>,
        env: &BTreeMap<String, String>,
        stdin: Option<String>,
        timeout_ms: u64,
        cancel: Option<Cancel>,
        on_output: Option<crate::shell::Sink>,
    ) -> Result<ExecResult> {
        use crate::shell::{ExecOptions, ShellProvider};
        let options = ExecOptions {
            cwd: cwd.map(str::to_string),
            timeout_ms: Some(timeout_ms),
            env: env.clone(),
            stdin,
            cancel,
            on_output,
            ..Default::default()
        };
        self.exec(command, options).await
    }

    /// What the sandbox is asked to run: `command` in `cwd` (inside) with the session's
    /// environment plus `env`. `cwd` must be a directory of the session, reached without a link
    /// a command planted.
    fn request(&self, command: &str, cwd: &str, env: &BTreeMap<String, String>) -> Result<SandboxRequest> {
        self.check_dir(cwd)?;
        // The session directory that holds it (the others are writable too).
        let mount = DIRS.iter().map(|(_, at)| *at).find(|at| Path::new(cwd).starts_with(at)).unwrap_or(WORKSPACE);
        let mut all = self.env.clone();
        all.extend(env.clone());
        Ok(SandboxRequest {
            command: command.to_string(),
            cwd: cwd.to_string(),
            env: all,
            timeout_ms: 0,
            stdin: None,
            mount: Some(mount.to_string()),
            on_output: None,
            capture_bytes: None,
            input: None,
            record: None,
            changes_dir: None,
            pending: None,
        })
    }

    /// Whether `cwd` (inside, absolute) is a directory of the session, reached without a link
    /// out of it.
    pub fn check_dir(&self, cwd: &str) -> Result<()> {
        let inside_dir = self
            .host_path(cwd)
            .and_then(|p| std::fs::canonicalize(p).ok())
            .is_some_and(|p| p.is_dir() && DIRS.iter().any(|(name, _)| p.starts_with(self.dir.join(name))));
        if inside_dir {
            Ok(())
        } else {
            Err(Error::new(Code::NotFound, format!("The working directory {cwd} is not a directory of the session.")))
        }
    }

    /// An absolute path inside as the path of the file under `<root>/<id>` (`/workspace/a` →
    /// `workspace/a`, `/home/agent/.x` → `home/.x`), resolved lexically first; a relative path
    /// is under `/workspace`. Any other path is `OutsideWorkspace`.
    pub fn file_path(&self, inside: &str) -> Result<String> {
        let abs = self.inside_dir(Some(inside))?;
        for (name, at) in DIRS {
            if let Ok(rel) = crate::path::from_sandbox(at, &abs) {
                return Ok(if rel == "." { name.to_string() } else { format!("{name}/{rel}") });
            }
        }
        Err(Error::new(
            Code::OutsideWorkspace,
            format!("{inside} is outside the session: its files are under {WORKSPACE}, /tmp and {HOME}."),
        ))
    }

    /// Replaces the forwarded ports: each from `127.0.0.1:<ephemeral>` on the host.
    pub async fn set_ports(&self, ports: &[u16]) -> Result<()> {
        if let Some(p) = ports.iter().find(|p| **p == 0) {
            return Err(Error::config(format!("Port {p} cannot be exposed.")));
        }
        let inside = self.inside.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(inside) = inside else {
            if ports.is_empty() {
                return Ok(());
            }
            // A session with a proxy endpoint had a way in, until `stop`.
            if self.proxy.is_some() {
                return Err(Error::new(Code::Io, "The session was stopped; resume it to expose ports."));
            }
            return Err(no_network("no port can be forwarded into it"));
        };
        let mut made = Vec::new();
        {
            let current = self.forwarders.lock().unwrap_or_else(|p| p.into_inner());
            for port in ports.iter().filter(|p| !current.contains_key(p)) {
                made.push(*port);
            }
        }
        let mut new = Vec::new();
        for port in made {
            new.push(Forwarder::start(inside.clone(), port).await.map_err(io("a port forwarder"))?);
        }
        let mut current = self.forwarders.lock().unwrap_or_else(|p| p.into_inner());
        current.retain(|port, _| ports.contains(port));
        for f in new {
            current.insert(f.port(), f);
        }
        Ok(())
    }

    /// The exposed ports.
    pub fn ports(&self) -> Vec<u16> {
        let mut p: Vec<u16> = self.forwarders.lock().unwrap_or_else(|p| p.into_inner()).keys().copied().collect();
        p.sort_unstable();
        p
    }

    /// `http://127.0.0.1:N` (`ws://` for `ws`) reaching `port` inside, or `None` when it is not
    /// exposed.
    pub fn port_url(&self, port: u16, protocol: &str) -> Option<String> {
        let local = self.forwarders.lock().unwrap_or_else(|p| p.into_inner()).get(&port)?.local();
        let scheme = if protocol == "ws" { "ws" } else { "http" };
        Some(format!("{scheme}://{local}"))
    }

    /// Applies `policy` at once: later connections follow it, open tunnels it refuses close.
    /// A session without a proxy endpoint (a container this process cannot enter) takes only
    /// `deny-all`.
    pub fn set_policy(&self, policy: NetworkPolicy) -> Result<()> {
        if self.proxy.is_none() && !matches!(policy, NetworkPolicy::DenyAll) {
            return Err(no_network("its network policy stays deny-all"));
        }
        self.gate.set(policy);
        Ok(())
    }

    pub fn policy(&self) -> NetworkPolicy {
        self.gate.policy()
    }

    /// Ends every process of the session and its forwarders and proxy (files stay). Idempotent.
    pub async fn stop(&self) {
        self.forwarders.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.holder.close().await;
        self.broker.close().await;
        // What made sockets in the session's network namespace (a thread in a container's) ends.
        *self.inside.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// `stop`, then removes the session's directories.
    pub async fn destroy(&self) -> Result<()> {
        self.stop().await;
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("removing the session's directories")(e)),
        }
    }
}

impl Holder {
    async fn close(&self) {
        match self {
            Holder::Keeper(k) => k.close(),
            Holder::Container(sandbox) => {
                let _ = sandbox.close().await;
            }
        }
    }
}

/// A session's directory: this user's only (0700), so what its commands leave in it (a program
/// with the setuid bit, made by root in a container) is reached by no other user of the host.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// What holds a session's processes and network namespace; closing it ends them.
enum Holder {
    Keeper(Keeper),
    /// The kept container (`SubprocessSandbox::in_session`), removed on `stop`.
    Container(Arc<SubprocessSandbox>),
}

/// The keeper of a LinuxSandbox session: its root shows the session's directories, and not the
/// user's home, the hidden paths, nor the directory of all sessions (another session's files).
async fn start_keeper(dir: &Path, binds: &[(PathBuf, PathBuf)], o: &LinuxSandboxOptions) -> Result<Keeper> {
    let mut cover: Vec<PathBuf> = match &o.hide {
        Some(list) => list.iter().map(PathBuf::from).collect(),
        None => std::env::var_os("HOME").map(PathBuf::from).into_iter().collect(),
    };
    cover.extend(dir.parent().map(Path::to_path_buf));
    let cover: Vec<PathBuf> =
        cover.into_iter().filter(|p| p.is_absolute()).map(|p| std::fs::canonicalize(&p).unwrap_or(p)).collect();
    Keeper::start_session(binds, &cover)
        .await
        .map_err(|e| Error::new(Code::Io, format!("The session's sandbox could not start: {e}")))
}

/// A Docker session's network reaches past its own loopback only through sockets this process
/// makes in the container's network namespace.
fn no_network(why: &str) -> Error {
    Error::config(format!(
        "This Docker session has loopback only: a network policy other than deny-all, and any port, need this process to be root with the Docker Engine on this machine, so it can enter the container's network namespace ({why}). Pass network: {{ mode: 'deny-all' }} and ports: [] to run here."
    ))
}

/// `path` (absolute) with `.`, `..` and repeated slashes resolved as the kernel would without
/// links; `..` at the root stays at the root.
pub(crate) fn lexical(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

mod identity;
mod options;
mod shell;
pub use options::{from_options, ports, HarnessOptions};
#[cfg(test)]
mod tests;
