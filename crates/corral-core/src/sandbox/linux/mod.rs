//! `LinuxSandbox`: a `SandboxAdapter` built on the kernel's own isolation — namespaces, a
//! read-only view of the host with the working directory writable, seccomp, rlimits and control
//! groups — with no daemon.
//!
//! This side decides everything a command gets and prepares it as a plan (`child::Plan`, in
//! crates/corral-keeper): paths checked and resolved, descriptors opened, the seccomp filter
//! compiled. The keeper (`sandbox/session`), a small program started once, forks and carries the
//! plan out with raw syscalls, so no command costs a fork of Node.

pub mod overlay;
mod seccomp;
mod session_plan;
mod userns;

use corral_keeper::{child, landlock};

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::limits::{limit_note, says_out_of_memory, Limits};
use super::{validate_host, EgressBroker, Network, SandboxAdapter, SandboxRequest};
use crate::error::{Code, Error, Result};
use crate::options::Reader;
use crate::shell::exec::cgroup::Cgroup;
use crate::shell::exec::{run_shell_command_with, Isolation};
use crate::shell::{Cancel, ExecResult};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinuxSandboxOptions {
    pub limits: Limits,
    /// Paths inside the working directory kept read-only (default `.git`), relative or absolute.
    pub protect: Vec<String>,
    /// Directories the command may write besides the request's working directory (absolute).
    pub writable: Vec<String>,
    /// Paths that look empty inside (default the home directory, less the working directory).
    pub hide: Option<Vec<String>>,
    pub allow_weaker: bool,
    /// As root: the unprivileged host user the command runs as (its uid and gid).
    pub host_uid: u32,
    /// Whether the command may make `AF_UNIX` sockets (`socketpair` always works).
    pub allow_unix_sockets: bool,
    /// `network: { allow }`: the hosts a broker may reach for the command (no network without one).
    pub allow: Option<Vec<String>>,
    /// `changes: 'overlay'`: each command runs over an overlay of its working directory, and what
    /// it changed is applied when it ends (`overlay.rs`).
    pub overlay: bool,
}

/// `nobody` on Debian and most distributions.
pub const DEFAULT_HOST_UID: u32 = 65534;
/// The host group commands run as, whatever `hostUid` is (`nogroup`): a uid chosen for its
/// files must not bring a group such as `shadow` with it.
pub const HOST_GID: u32 = 65534;

impl Default for LinuxSandboxOptions {
    fn default() -> Self {
        LinuxSandboxOptions {
            limits: Limits::default(),
            protect: vec![".git".into()],
            writable: Vec::new(),
            hide: None,
            allow_weaker: false,
            host_uid: DEFAULT_HOST_UID,
            allow_unix_sockets: false,
            allow: None,
            overlay: false,
        }
    }
}

impl LinuxSandboxOptions {
    /// `new LinuxSandbox({ network?, broker?, limits?, writable?, protect?, hide?, allowWeaker? })`.
    pub fn from_options(v: &Value) -> Result<LinuxSandboxOptions> {
        let r = Reader::new(
            "LinuxSandbox",
            v,
            &[
                "network",
                "broker",
                "limits",
                "writable",
                "protect",
                "hide",
                "allowWeaker",
                "hostUid",
                "allowUnixSockets",
                "changes",
            ],
        )?;
        // `{ allow }` without a broker fails closed, as in SubprocessSandbox: loopback only.
        let allow = match super::Network::read(&r, false)? {
            Network::Allow(hosts) => Some(hosts.iter().map(|h| validate_host(h)).collect::<Result<Vec<_>>>()?),
            _ => None,
        };
        let limits = Limits::from_option(r.get("limits"), "LinuxSandbox limits")?;
        let paths = |k: &str| -> Result<Option<Vec<String>>> {
            let list = r.strings(k)?;
            if let Some(l) = &list {
                if l.iter().any(|p| p.is_empty() || p.contains('\0')) {
                    return Err(r.err(format!("{k} entries must be non-empty paths.")));
                }
            }
            Ok(list)
        };
        let writable = paths("writable")?.unwrap_or_default();
        if writable.len() > child::MAX_WRITABLE - 1 {
            return Err(r.err(format!("writable takes at most {} paths.", child::MAX_WRITABLE - 1)));
        }
        if let Some(w) = writable.iter().find(|w| !Path::new(w).is_absolute() || w.split('/').any(|c| c == "..")) {
            return Err(r.err(format!("writable paths must be absolute, without '..': {w:?}.")));
        }
        Ok(LinuxSandboxOptions {
            limits,
            writable,
            protect: paths("protect")?.unwrap_or_else(|| vec![".git".into()]),
            hide: paths("hide")?,
            allow_weaker: r.bool("allowWeaker", false)?,
            // Root's own id would give the command root's files back.
            host_uid: r.int("hostUid", DEFAULT_HOST_UID as u64, 1..=u32::MAX as u64 - 1)? as u32,
            allow_unix_sockets: r.bool("allowUnixSockets", false)?,
            allow,
            overlay: match r.get("changes") {
                None => false,
                Some(Value::String(s)) if s == "direct" => false,
                Some(Value::String(s)) if s == "overlay" => true,
                Some(_) => return Err(r.err("changes must be 'direct' or 'overlay'.")),
            },
        })
    }
}

/// What the machine offers (`LinuxSandbox.probe()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub user_namespaces: bool,
    pub mount_namespaces: bool,
    pub pid_namespaces: bool,
    pub net_namespaces: bool,
    pub seccomp: bool,
    /// Landlock's ABI version, where the kernel has it.
    pub landlock: Option<u32>,
    pub cgroups: Option<&'static str>,
    pub root: bool,
}

impl Probe {
    pub fn to_json(&self) -> Value {
        json!({
            "userNamespaces": self.user_namespaces,
            "mountNamespaces": self.mount_namespaces,
            "pidNamespaces": self.pid_namespaces,
            "netNamespaces": self.net_namespaces,
            "seccomp": self.seccomp,
            "landlock": self.landlock.is_some(),
            "cgroups": self.cgroups,
        })
    }
}

/// Tries the namespaces in a throwaway child process.
fn can_unshare(flags: libc::c_int) -> bool {
    // SAFETY: the child only makes raw syscalls and exits.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let ok = libc::unshare(flags) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        if pid < 0 {
            return false;
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

/// What the machine offers, found once per process (each question forks it).
pub fn probe() -> Probe {
    static PROBE: std::sync::OnceLock<Probe> = std::sync::OnceLock::new();
    PROBE.get_or_init(probe_now).clone()
}

fn probe_now() -> Probe {
    // SAFETY: raw syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let user = can_unshare(libc::CLONE_NEWUSER);
    let base = if root { 0 } else { libc::CLONE_NEWUSER };
    let cgroups = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        Some("v2")
    } else if Path::new("/sys/fs/cgroup/pids").exists() || Path::new("/sys/fs/cgroup/memory").exists() {
        Some("v1")
    } else {
        None
    };
    Probe {
        user_namespaces: user,
        mount_namespaces: can_unshare(base | libc::CLONE_NEWNS),
        pid_namespaces: can_unshare(base | libc::CLONE_NEWPID),
        net_namespaces: can_unshare(base | libc::CLONE_NEWNET),
        seccomp: std::fs::read_to_string("/proc/self/status").is_ok_and(|s| s.contains("Seccomp:")),
        landlock: landlock::abi(),
        cgroups,
        root,
    }
}

pub struct LinuxSandbox {
    options: LinuxSandboxOptions,
    probe: Probe,
    /// The seccomp filter, built once: every run installs the same one.
    seccomp: Vec<Vec<libc::sock_filter>>,
    broker: Option<Arc<dyn EgressBroker>>,
    /// The broker's listener for this sandbox (its URL and port), made on the first run.
    egress: tokio::sync::Mutex<Option<(String, u16)>>,
    /// As root: the user namespace commands run in (`userns.rs`); `None` for a user other than
    /// root, or as root with `allowWeaker` on a kernel without one.
    userns: Option<OwnedFd>,
    /// A session's keeper: every command shares its network namespace, and its root when it has
    /// one (`in_session`).
    session: Option<session_plan::Session>,
}

fn cstr(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::config(format!("LinuxSandbox: a NUL byte in {}", p.display())))
}

impl LinuxSandbox {
    pub fn new(options: LinuxSandboxOptions) -> Result<LinuxSandbox> {
        let mut options = options;
        // The writable paths, resolved now (a run never follows a symlink in them).
        for w in options.writable.iter_mut() {
            let real = std::fs::canonicalize(&*w).ok().filter(|p| p.is_dir()).ok_or_else(|| {
                Error::config(format!("LinuxSandbox: the writable path {w} is not a directory on this machine."))
            })?;
            *w = real
                .to_str()
                .map(str::to_string)
                .ok_or_else(|| Error::config("LinuxSandbox: a writable path is not valid Unicode."))?;
        }
        let probe = probe();
        let needs: Vec<(&str, bool)> = vec![
            ("mount namespaces", probe.mount_namespaces),
            ("pid namespaces", probe.pid_namespaces),
            ("network namespaces", probe.net_namespaces),
            ("user namespaces (as a user other than root)", probe.root || probe.user_namespaces),
        ];
        let missing: Vec<&str> = needs.iter().filter(|(_, ok)| !ok).map(|(n, _)| *n).collect();
        if !missing.is_empty() {
            return Err(Error::config(format!(
                "LinuxSandbox: this machine does not offer {}, which the sandbox cannot do without.",
                missing.join(", ")
            )));
        }
        let mut unenforced = Vec::new();
        if options.limits.pids.is_some() && !pids_group_writable() {
            unenforced.push("limits.pids needs a control group with the pids controller (cgroup v1, or v2 where the controller is enabled)");
        }
        if options.limits.memory_bytes.is_some() && !memory_group_writable() {
            unenforced.push("limits.memoryBytes needs a group of cgroup v1's memory controller");
        }
        if !unenforced.is_empty() && !options.allow_weaker {
            return Err(Error::config(format!(
                "LinuxSandbox: {}, which cannot be made here; pass allowWeaker: true to fall back to per-process limits.",
                unenforced.join(", and ")
            )));
        }
        let userns = if probe.root { root_namespace(&options)? } else { None };
        if options.overlay {
            if probe.root && userns.is_none() {
                return Err(Error::config(
                    "LinuxSandbox: changes: 'overlay' runs commands in a user namespace with idmapped layers, which this machine cannot give as root (allowWeaker does not apply to it).",
                ));
            }
            overlay::probe(userns.as_ref(), options.host_uid).map_err(|why| {
                Error::config(format!(
                    "LinuxSandbox: changes: 'overlay' needs overlayfs in a user namespace (Linux 5.11 or later) with its layers in the temp directory ({}): {why}.",
                    std::env::temp_dir().display()
                ))
            })?;
        }
        let seccomp = seccomp::filter(options.allow_unix_sockets)?
            .into_iter()
            .map(|prog| {
                prog.into_iter().map(|f| libc::sock_filter { code: f.code, jt: f.jt, jf: f.jf, k: f.k }).collect()
            })
            .collect();
        Ok(LinuxSandbox { options, probe, seccomp, broker: None, egress: Default::default(), userns, session: None })
    }

    pub fn probe(&self) -> &Probe {
        &self.probe
    }

    /// The broker `network: { allow }` goes through; without one, `{ allow }` means no network.
    pub fn with_broker(mut self, broker: Option<Arc<dyn EgressBroker>>) -> LinuxSandbox {
        self.broker = broker;
        self
    }

    /// Commands run through a session's keeper (`Keeper::start_session`) and share its network
    /// namespace: a port one command listens on is reachable from the next and through the
    /// keeper's `connect`. The session decides the network; `network: { allow }` is not used.
    /// With `binds` (host directory, path inside), which must be those the keeper's root shows,
    /// requests name paths inside (`/workspace/…`), and those directories are writable.
    pub fn in_session(
        mut self,
        keeper: crate::sandbox::session::Keeper,
        binds: Vec<(PathBuf, PathBuf)>,
    ) -> LinuxSandbox {
        self.session = Some(session_plan::Session { keeper, binds });
        self
    }

    /// The broker's port on the host's loopback for `{ allow }` (a listener made on the first run),
    /// or `None` for no network.
    async fn egress(&self) -> Result<Option<u16>> {
        if self.session.is_some() {
            return Ok(None);
        }
        let (Some(allow), Some(broker)) = (&self.options.allow, &self.broker) else { return Ok(None) };
        let mut state = self.egress.lock().await;
        if let Some((_, port)) = state.as_ref() {
            return Ok(Some(*port));
        }
        let url = broker.listen("127.0.0.1", "127.0.0.1/32", allow.clone()).await?;
        let port =
            url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse::<u16>().ok()).ok_or_else(|| {
                Error::new(Code::Io, format!("LinuxSandbox: the broker's listener {url} has no port."))
            })?;
        *state = Some((url, port));
        Ok(Some(port))
    }

    /// The child's plan for one request, and the descriptors it refers to (held until the run
    /// ends); and what `protect` named in each writable tree when it started.
    pub(crate) fn plan(
        &self,
        req: &SandboxRequest,
        memory: Option<&Cgroup>,
        forward: Option<u16>,
    ) -> Result<(child::Plan, Vec<OwnedFd>, Vec<super::protect::Watch>)> {
        let binds = self.session.as_ref().map_or(&[][..], |s| &s.binds[..]);
        let mount = session_plan::host_path(binds, Path::new(req.mount.as_deref().unwrap_or(&req.cwd)));
        let cwd = session_plan::host_path(binds, Path::new(&req.cwd));
        if !mount.is_absolute() || !mount.is_dir() {
            return Err(Error::new(
                Code::NotFound,
                "LinuxSandbox: the SandboxShell's cwd is not a directory on this machine.",
            ));
        }
        if !cwd.starts_with(&mount) {
            return Err(Error::new(
                Code::InvalidArguments,
                "LinuxSandbox: the request's cwd lies outside the SandboxShell's cwd.",
            ));
        }
        let devices: Vec<CString> = ["null", "zero", "full", "random", "urandom"]
            .iter()
            .map(|n| PathBuf::from("/dev").join(n))
            .filter(|p| p.exists())
            .map(|p| cstr(&p))
            .collect::<Result<_>>()?;
        // hide: the home directory by default (a session's root shows no host home at all).
        let hide: Vec<PathBuf> = match &self.options.hide {
            _ if !binds.is_empty() => Vec::new(),
            Some(list) => list.iter().map(PathBuf::from).collect(),
            None => std::env::var_os("HOME").map(PathBuf::from).into_iter().collect(),
        };
        let mut writable_parents = Vec::new();
        // The trees bound read-write: the mount, then `writable` (outer paths before inner ones).
        let mut writable = vec![mount.clone()];
        // Resolved once, at construction: a symlink planted since is refused below, never followed.
        // A session's own directories are writable too.
        let session_dirs = binds.iter().map(|(host, _)| host.clone());
        for real in self.options.writable.iter().map(PathBuf::from).chain(session_dirs) {
            if !writable.contains(&real) {
                writable.push(real);
            }
        }
        writable[1..].sort_by_key(|p| p.components().count());
        // protect: the entries inside the mount, and every `.git` (with the other bare names) at
        // any depth of every writable tree, as they are when the command starts.
        let mut protect: Vec<PathBuf> = Vec::new();
        let mut names: Vec<String> = std::iter::once(".git".to_string())
            .chain(self.options.protect.iter().filter(|e| super::protect::is_name(e)).cloned())
            .collect();
        names.sort();
        names.dedup();
        // Only hidden paths that exist are covered (and so skipped); one that does not is the
        // host's when the command makes it.
        let hidden: Vec<PathBuf> = hide.iter().filter(|h| h.is_absolute() && h.exists()).cloned().collect();
        // What the sweep after the command removes when the command made it: every `.git` (always
        // protected here) and the other bare names; nothing with `protect: []`, which lets an
        // agent keep a repository it cloned.
        let sweep_names: Vec<String> = if self.options.protect.is_empty() { Vec::new() } else { names.clone() };
        let mut watch = Vec::new();
        for (i, w) in writable.iter().enumerate() {
            let entries = if i == 0 {
                let mut e = names.clone();
                e.extend(self.options.protect.iter().filter(|e| !super::protect::is_name(e)).cloned());
                e
            } else {
                names.clone()
            };
            let inner: Vec<PathBuf> = hidden.iter().filter(|h| h.starts_with(w) && *h != w).cloned().collect();
            let found = super::protect::protected(w, &entries, &inner)?;
            protect.extend(found.paths);
            watch.push(super::protect::Watch::new(w, &sweep_names, inner, found.names));
        }
        protect.sort();
        protect.dedup();
        protect.sort_by_key(|p| p.components().count());
        if protect.len() > super::protect::MAX_PROTECTED {
            return Err(Error::new(
                Code::TooLarge,
                format!("More than {} protected paths; the command was not run.", super::protect::MAX_PROTECTED),
            ));
        }
        let protect: Vec<CString> = protect.iter().map(|p| cstr(p)).collect::<Result<_>>()?;
        // Each writable tree, opened through a path with no symlink: what the child attaches must
        // be this directory (a command could have replaced a component with a link to /etc).
        let mut dirs: Vec<OwnedFd> = Vec::new();
        for w in &writable {
            let fd = child::open_dir_nofollow(&cstr(w)?).map_err(|e| {
                Error::new(
                    Code::Io,
                    format!("LinuxSandbox: a writable path is gone or now passes through a symbolic link ({e}); the command was not run."),
                )
            })?;
            // SAFETY: a descriptor open_dir_nofollow just gave us.
            dirs.push(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) });
        }
        let writable_ids = dirs
            .iter()
            .map(|d| child::identity(d.as_raw_fd()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Error::new(Code::Io, format!("LinuxSandbox: cannot stat a writable path ({e}).")))?;
        // As root: the writable trees idmapped through the command's namespace, made here.
        // Without them (allowWeaker where idmapping fails) the command does not enter the namespace
        // either (`run` sends it with the trees only).
        let mut owned_trees: Vec<OwnedFd> = Vec::new();
        if let Some(ns) = self.userns.as_ref() {
            for d in &dirs {
                match userns::tree(d.as_raw_fd(), Some(ns)) {
                    Ok(t) => owned_trees.push(t),
                    Err(_) if self.options.allow_weaker => {
                        owned_trees.clear();
                        break;
                    }
                    Err(e) => {
                        return Err(Error::new(
                            Code::Io,
                            format!("LinuxSandbox: a writable path's file system cannot make idmapped mounts ({e}), so a command cannot write it as an unprivileged user; the command was not run (allowWeaker: true runs it as root instead)."),
                        ))
                    }
                }
            }
        }
        let (mut hide_dirs, mut hide_files) = (Vec::new(), Vec::new());
        let (mut hide_inner_dirs, mut hide_inner_files) = (Vec::new(), Vec::new());
        // A path under /tmp, /dev or /run is already hidden: those are new and empty inside.
        let covered_anyway = |h: &Path| ["/tmp", "/dev", "/run", "/var/run"].iter().any(|p| h.starts_with(p));
        for h in hide.iter().filter(|h| h.is_absolute() && h.exists()) {
            // A writable tree itself is never hidden; a hidden path around it is.
            if writable.iter().any(|w| w == h) {
                continue;
            }
            // One inside a writable tree is covered after the tree is in place, or it would show.
            let inner = writable.iter().any(|w| h.starts_with(w));
            if !inner && covered_anyway(h) {
                continue;
            }
            match (inner, h.is_dir()) {
                (false, true) => hide_dirs.push(cstr(h)?),
                (false, false) => hide_files.push(cstr(h)?),
                (true, true) => hide_inner_dirs.push(cstr(h)?),
                (true, false) => hide_inner_files.push(cstr(h)?),
            }
        }
        // Where a tmpfs (/tmp, /dev or a hidden directory) covers a writable tree, its path is made
        // again.
        let mut writable_covered = Vec::new();
        for w in &writable {
            let covered = ["/tmp", "/dev", "/run", "/var/run"].iter().any(|p| w.starts_with(p))
                || hide.iter().any(|h| w.starts_with(h) && w != h);
            writable_covered.push(covered);
            if covered {
                let mut p = PathBuf::new();
                for c in w.components() {
                    p.push(c);
                    writable_parents.push(cstr(&p)?);
                }
            }
        }
        let l = &self.options.limits;
        let mut rlimits = vec![(libc::RLIMIT_CORE, 0)];
        if let Some(n) = l.cpu_seconds {
            rlimits.push((libc::RLIMIT_CPU, n));
        }
        if let Some(n) = l.file_size_bytes {
            rlimits.push((libc::RLIMIT_FSIZE, n));
        }
        if let Some(n) = l.open_files {
            rlimits.push((libc::RLIMIT_NOFILE, n));
        }
        if let (Some(n), None) = (l.memory_bytes, memory) {
            rlimits.push((libc::RLIMIT_AS, n));
        }
        let rlimits = rlimits
            .into_iter()
            .map(|(r, soft)| (r, soft, super::limits::hard_limit(r == libc::RLIMIT_CPU, soft)))
            .collect();
        // The directories between each writable tree and a protected or hidden path inside it.
        let inner: Vec<PathBuf> = protect
            .iter()
            .chain(&hide_inner_dirs)
            .chain(&hide_inner_files)
            .map(|c| PathBuf::from(std::ffi::OsStr::from_bytes(c.as_bytes())))
            .collect();
        let innermost = |p: &Path| writable.iter().filter(|w| p.starts_with(w)).max_by_key(|w| w.components().count());
        let mut pins: Vec<PathBuf> = Vec::new();
        for w in &writable {
            let mine: Vec<PathBuf> = inner.iter().filter(|p| innermost(p) == Some(w)).cloned().collect();
            pins.extend(super::protect::pins(w, &mine));
        }
        pins.sort();
        pins.dedup();
        pins.sort_by_key(|p| p.components().count());
        // SAFETY: raw syscalls.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut plan = child::Plan {
            user_ns: !self.probe.root,
            // Indices into the descriptors sent with the plan, set by the keeper's client.
            userns: None,
            trees: Vec::new(),
            uid_map: format!("{uid} {uid} 1").into_bytes(),
            gid_map: format!("{gid} {gid} 1").into_bytes(),
            devices,
            cwd: cstr(&cwd)?,
            writable: writable.iter().map(|w| cstr(w)).collect::<Result<_>>()?,
            writable_ids,
            writable_covered,
            pins: pins.iter().map(|p| cstr(p)).collect::<Result<_>>()?,
            writable_parents,
            protect,
            hide_dirs,
            hide_files,
            hide_inner_dirs,
            hide_inner_files,
            rlimits,
            memory_procs: memory.map(|m| m.procs_path()),
            seccomp: self.seccomp.clone(),
            forward,
            shared_net: self.session.is_some(),
            session_tmp: false,
            landlock: self.probe.landlock.map(landlock::Plan::new),
            layer: None,
            layer_dir: CString::default(),
            lowers: Vec::new(),
            lower_dirs: Vec::new(),
            container: None,
        };
        if !binds.is_empty() {
            session_plan::translate(&mut plan, binds)?;
        }
        Ok((plan, owned_trees, watch))
    }
}

impl LinuxSandbox {
    /// What an overlay's changes may not bring to the host: every `.git` and the other bare
    /// `protect` names at any depth, and the other `protect` entries (relative to the working
    /// directory); nothing with `protect: []`, as the sweep after a direct command.
    fn protected(&self, mount: &Path) -> overlay::Protected {
        overlay::Protected::of(&self.options.protect, mount)
    }

    /// As root, the namespace a command enters: only with the idmapped trees the plan made.
    pub(crate) fn userns_for(&self, trees: &[OwnedFd]) -> Result<Option<OwnedFd>> {
        match (&self.userns, trees.is_empty()) {
            (Some(ns), false) => {
                Ok(Some(ns.try_clone().map_err(|e| Error::new(Code::Io, format!("LinuxSandbox: {e}")))?))
            }
            _ => Ok(None),
        }
    }
}

/// As root, the user namespace whose root is `hostUid`, after checking that idmapped mounts work
/// where commands will write (the temp directory, the `writable` paths). Where the kernel cannot
/// give that, a `ConfigurationError` names what is missing, unless `allowWeaker`.
fn root_namespace(options: &LinuxSandboxOptions) -> Result<Option<OwnedFd>> {
    let weaker = |what: String| -> Result<Option<OwnedFd>> {
        if options.allow_weaker {
            return Ok(None);
        }
        Err(Error::config(format!(
            "LinuxSandbox: running as root, commands run as the unprivileged host user {} in a user namespace, with idmapped mounts of the paths they write; {what}. Pass allowWeaker: true to run commands as root with fewer capabilities instead (they could then read any file root may read).",
            options.host_uid
        )))
    };
    let ns = match userns::make(options.host_uid, HOST_GID) {
        Ok(ns) => ns,
        Err(e) => return weaker(format!("this kernel refused the user namespace ({e})")),
    };
    let mut probe_paths = vec![std::env::temp_dir()];
    probe_paths.extend(options.writable.iter().map(PathBuf::from));
    for p in probe_paths.iter().filter(|p| p.is_dir()) {
        if let Err(e) = userns::can_idmap(&cstr(p)?, &ns) {
            return weaker(format!(
                "this kernel or the file system of {} cannot make idmapped mounts ({e})",
                p.display()
            ));
        }
    }
    Ok(Some(ns))
}

/// Whether `limits.pids` can be enforced here: a control group with a `pids.max` can be made
/// (the one made is removed when dropped).
fn pids_group_writable() -> bool {
    Cgroup::create().is_some_and(|g| g.get("pids.max").is_some())
}

/// Whether `limits.memoryBytes` can be: a group of cgroup v1's memory controller can be made.
fn memory_group_writable() -> bool {
    Cgroup::create_in("/sys/fs/cgroup/memory").is_some()
}

#[async_trait]
impl SandboxAdapter for LinuxSandbox {
    fn takes_input(&self) -> bool {
        true
    }

    fn runs_in_background(&self) -> bool {
        true
    }

    fn records_changes(&self) -> bool {
        self.options.overlay && self.session.is_none()
    }

    fn keeps_changes(&self) -> bool {
        self.records_changes()
    }

    /// Stops the broker listener this sandbox made; a later run makes a new one.
    async fn close(&self) -> Result<()> {
        let taken = self.egress.lock().await.take();
        if let (Some((url, _)), Some(broker)) = (taken, &self.broker) {
            broker.unlisten(&url).await?;
        }
        Ok(())
    }

    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        let limits = self.options.limits.clone();
        let memory = match limits.memory_bytes {
            Some(n) => {
                Cgroup::create_in("/sys/fs/cgroup/memory").filter(|g| g.set("memory.limit_in_bytes", &n.to_string()))
            }
            None => None,
        };
        let forward = self.egress().await?;
        let (plan, trees, watch) = self.plan(&req, memory.as_ref(), forward)?;
        let userns = self.userns_for(&trees)?;
        // Overlay mode: the command's layer, made last, just before it starts (its stamp).
        let mount = PathBuf::from(req.mount.as_deref().unwrap_or(&req.cwd));
        let layer = match self.records_changes() {
            true => Some(overlay::Layer::take(&mount, req.changes_dir.as_deref())?),
            false => None,
        };
        // A command that could reach layers would write its own changeset, or another's.
        if let Some(l) = &layer {
            let writable = std::iter::once(mount.clone()).chain(self.options.writable.iter().map(PathBuf::from));
            if let Some(w) = writable.into_iter().find(|w| l.dir.starts_with(w)) {
                return Err(Error::config(format!(
                    "LinuxSandbox: the command's layer would lie in {}, which the command can write; give the SandboxShell a changesDir outside its cwd and writable paths.",
                    w.display()
                )));
            }
        }
        // Manual mode: the pending changesets' layers below the command's own, newest first.
        let pending = req.pending.as_ref().and_then(|p| p.0.clone().downcast::<overlay::pending::Pending>().ok());
        let lowers = match (&pending, &layer) {
            (Some(p), Some(_)) => {
                p.recover(req.changes_dir.as_deref()).await?;
                p.lowers().await?
            }
            _ => Vec::new(),
        };
        let mut plan = plan;
        let mut layer_fds = Vec::new();
        if let Some(l) = &layer {
            plan.layer_dir = cstr(&l.dir)?;
            layer_fds.push(overlay::layer::descriptor(&l.dir, userns.as_ref())?);
            for dir in &lowers {
                plan.lower_dirs.push(cstr(dir)?);
                layer_fds.push(overlay::layer::descriptor(dir, userns.as_ref())?);
            }
        }
        let req_record = req.record.clone();
        let mut env = req.env.clone();
        if let Some(port) = forward {
            env.extend(super::proxy_env(&format!("http://127.0.0.1:{port}"), "localhost,127.0.0.1"));
        }
        let keeper = match &self.session {
            Some(s) => Ok(s.keeper.clone()),
            None => crate::sandbox::session::Keeper::shared(),
        }
        .map_err(|e| Error::new(Code::Io, format!("LinuxSandbox: could not start its keeper process ({e}).")))?;
        let pids_refused = Arc::new(AtomicU64::new(0));
        let ahead = Some(keeper.ahead());
        let isolation = Isolation {
            ahead,
            launch: Some(Box::new(move |launch| {
                Box::pin(async move { keeper.spawn(launch, plan, userns, trees, layer_fds, &[]).await })
            })),
            pids_max: limits.pids,
            pids_unlimited: Some(Arc::new(AtomicBool::new(false))),
            pids_refused: Some(pids_refused.clone()),
            capture_bytes: req.capture_bytes,
            input: req.input,
            // The namespace's init carries a parent-death signal, and every process goes with it
            // (and with this process: the keeper ends with it, `sandbox/session`).
            end_with_shell: false,
        };
        let timeout = (req.timeout_ms > 0).then_some(req.timeout_ms);
        let mut r = run_shell_command_with(
            &req.command,
            Path::new(&req.cwd),
            &env,
            req.stdin,
            timeout,
            cancel,
            req.on_output,
            isolation,
        )
        .await?;
        // The pid namespace's init took every process of the command with it.
        if r.timed_out || r.aborted {
            r.every_process_killed = true;
        }
        let memory_hit = match &memory {
            Some(m) => m
                .get("memory.failcnt")
                .is_some_and(|c| c.trim().parse::<u64>().unwrap_or(0) > 0 && (r.exit_code != Some(0))),
            // Under RLIMIT_AS a hog is not stopped: its allocations fail and it exits saying so.
            None => limits.memory_bytes.is_some() && r.exit_code != Some(0) && says_out_of_memory(&r.stderr),
        };
        if let Some(note) = limit_note(&r, &limits, memory_hit, memory.is_none(), pids_refused.load(Ordering::Relaxed))
        {
            r.note = Some(note);
        }
        // Protected names the command made (a `git init`) never reach the host's tools.
        let removed = super::protect::sweep_blocking(watch).await;
        super::protect::add_notes(&mut r, removed);
        if let Some(mut layer) = layer {
            if r.timed_out || r.aborted || r.signal.is_some() {
                layer.forgo_reuse();
            }
            r.changes = Some(match pending {
                Some(p) if p.manual() => p.keep(layer, &req.command, req_record, self.protected(&mount)).await,
                _ => overlay::finish(layer, mount.clone(), self.protected(&mount), req_record).await,
            });
        }
        Ok(r)
    }
}

impl std::fmt::Debug for LinuxSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxSandbox").field("options", &self.options).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod attacks;
#[cfg(test)]
mod overlay_tests;
#[cfg(test)]
mod tests;
