//! The keeper: the small program (crates/corral-keeper) that starts LinuxSandbox's commands.
//!
//! Forking Node for each command copies the page tables of a large process (most of a sandboxed
//! command's cost, docs/sandboxes.md); the keeper is started once with `posix_spawn` (no copy of
//! Node) and forks itself, a process of a few hundred kilobytes, for each command. This side sends
//! it the command's plan and descriptors (`corral_keeper::wire`) and hears back when the command
//! started, failed to start, or ended; one thread per keeper reads its replies.
//!
//! The keeper and every command it started end with this process: the keeper ends when its
//! control socket closes (this process's end goes with it, however it ends), and each command's
//! first process carries a parent-death signal bound to the keeper.

mod binary;
pub mod ports;

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use corral_keeper::child::Plan;
use corral_keeper::wire::{self, Reply, Run};
use corral_keeper::{frame, pipe, CONTROL_FD};
use tokio::sync::oneshot;

use crate::shell::exec::launch::{LaunchRequest, Launched};

struct Waiter {
    started: Option<oneshot::Sender<std::result::Result<i32, i32>>>,
    exited: Option<oneshot::Sender<i32>>,
}

/// What a `SESSION`, `CONNECT`, `LISTEN` or `SOCKETS` gets back: its sockets and a number (the
/// socket's port, or how many sockets came), or an errno.
type Answer = std::result::Result<(Vec<OwnedFd>, i32), i32>;

struct Inner {
    ctl: OwnedFd,
    /// One frame at a time on the socket.
    write: Mutex<()>,
    waiters: Mutex<HashMap<u64, Waiter>>,
    calls: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    next: AtomicU64,
    alive: AtomicBool,
    pid: libc::pid_t,
    /// Commands started in a prepared process (`corral_keeper::prepared`).
    prepared: AtomicU64,
    /// When the last command started in one (`None`: it did not): a command soon after most
    /// likely does too, and its own trees go to the process prepared after it
    /// (`wire::Run::spares`). The keeper drops a process that waited `prepared::MAX_AGE`.
    last_prepared: Mutex<Option<std::time::Instant>>,
    /// The control group made for the next command, which its prepared process joins ahead.
    ahead: Arc<crate::shell::exec::cgroup::Ahead>,
}

/// A running keeper (cheap to clone).
#[derive(Clone)]
pub struct Keeper {
    inner: Arc<Inner>,
}

/// The one socket a `CONNECT` or `LISTEN` answer carries.
fn one(fds: Vec<OwnedFd>) -> io::Result<OwnedFd> {
    fds.into_iter().next().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "the keeper sent no socket"))
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the sandbox's keeper process ended")
}

impl Inner {
    fn send(&self, payload: &[u8], fds: &[RawFd]) -> io::Result<()> {
        let _one = self.write.lock().unwrap_or_else(|p| p.into_inner());
        frame::send(self.ctl.as_raw_fd(), payload, fds)
    }

    /// Reads the keeper's replies until it ends, then fails every waiting command and reaps it.
    fn read_replies(&self) {
        while let Ok(Some((payload, fds))) = frame::recv(self.ctl.as_raw_fd()) {
            let Ok(reply) = Reply::decode(&payload) else { break };
            let answer = |id: u64, a: Answer| {
                if let Some(s) = self.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                    let _ = s.send(a);
                }
            };
            match reply {
                Reply::Socket { id, port } => {
                    answer(id, Ok((fds, port)));
                    continue;
                }
                Reply::Ready { id } => {
                    answer(id, Ok((Vec::new(), 0)));
                    continue;
                }
                Reply::Failed { id, errno }
                    if self.calls.lock().unwrap_or_else(|p| p.into_inner()).contains_key(&id) =>
                {
                    answer(id, Err(errno));
                    continue;
                }
                _ => {}
            }
            let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            match reply {
                Reply::Started { id, pid, prepared } => {
                    if prepared {
                        self.prepared.fetch_add(1, Ordering::Relaxed);
                    }
                    *self.last_prepared.lock().unwrap_or_else(|p| p.into_inner()) =
                        prepared.then(std::time::Instant::now);
                    let started = waiters.get_mut(&id).and_then(|w| w.started.take());
                    // Nobody waits for it any more (the caller was dropped): it must not run.
                    if started.is_none_or(|s| s.send(Ok(pid)).is_err()) {
                        drop(waiters);
                        let _ = self.send(&wire::kill(id, libc::SIGKILL), &[]);
                    }
                }
                Reply::Failed { id, errno } => {
                    if let Some(s) = waiters.remove(&id).and_then(|mut w| w.started.take()) {
                        let _ = s.send(Err(errno));
                    }
                }
                Reply::Exited { id, status } => {
                    if let Some(s) = waiters.remove(&id).and_then(|mut w| w.exited.take()) {
                        let _ = s.send(status);
                    }
                }
                Reply::Socket { .. } | Reply::Ready { .. } => {}
            }
        }
        self.alive.store(false, Ordering::SeqCst);
        self.waiters.lock().unwrap_or_else(|p| p.into_inner()).clear();
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clear();
        // SAFETY: reaps the keeper, this process's child.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

impl Keeper {
    /// Where its commands take their control groups from, made ahead.
    pub fn ahead(&self) -> Arc<crate::shell::exec::cgroup::Ahead> {
        self.inner.ahead.clone()
    }

    /// The keeper this process's LinuxSandboxes share, started on first use (again when the last
    /// one ended).
    pub fn shared() -> io::Result<Keeper> {
        static SHARED: Mutex<Option<Keeper>> = Mutex::new(None);
        let mut k = SHARED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(keeper) = k.as_ref().filter(|k| k.inner.alive.load(Ordering::SeqCst)) {
            return Ok(keeper.clone());
        }
        let keeper = Keeper::start(false)?;
        *k = Some(keeper.clone());
        Ok(keeper)
    }

    /// Starts a keeper: from the memory file, or from a private file (with `file`, or where the
    /// memory file cannot be executed).
    pub fn start(file: bool) -> io::Result<Keeper> {
        let mut pair = [-1; 2];
        // SAFETY: a two-element array for the pair.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr()) } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: descriptors socketpair just made.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let program = binary::program(file)?;
        let pid = match spawn_written(program.path(), theirs.as_raw_fd()) {
            Err(e)
                if !file && matches!(program, binary::Program::Memory(_)) && e.raw_os_error() == Some(libc::EACCES) =>
            {
                // `vm.memfd_noexec = 2`, or a memory file mounted without exec: the private copy.
                let copy = binary::program(true)?;
                let r = spawn_written(copy.path(), theirs.as_raw_fd());
                copy.done();
                r?
            }
            other => {
                program.done();
                other?
            }
        };
        drop(theirs);
        let inner = Arc::new(Inner {
            ctl: ours,
            write: Mutex::new(()),
            waiters: Mutex::new(HashMap::new()),
            calls: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            alive: AtomicBool::new(true),
            pid,
            prepared: AtomicU64::new(0),
            last_prepared: Mutex::new(None),
            ahead: Arc::default(),
        });
        let reader = inner.clone();
        std::thread::Builder::new().name("corral-keeper".into()).spawn(move || reader.read_replies())?;
        Ok(Keeper { inner })
    }

    /// The keeper's process id.
    pub fn pid(&self) -> i32 {
        self.inner.pid
    }

    /// How many commands started in a process prepared for them (`corral_keeper::prepared`).
    pub fn prepared_starts(&self) -> u64 {
        self.inner.prepared.load(Ordering::Relaxed)
    }

    /// Ends the keeper and every command it started.
    pub fn close(&self) {
        // SAFETY: shuts down our own socket; the keeper reads the end of the stream.
        unsafe { libc::shutdown(self.inner.ctl.as_raw_fd(), libc::SHUT_RDWR) };
    }

    /// Sends a request the keeper answers once, and waits for the answer.
    async fn call(&self, frame: impl FnOnce(u64) -> Vec<u8>) -> io::Result<(Vec<OwnedFd>, i32)> {
        let inner = &self.inner;
        let id = inner.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        inner.calls.lock().unwrap_or_else(|p| p.into_inner()).insert(id, tx);
        if !inner.alive.load(Ordering::SeqCst) || inner.send(&frame(id), &[]).is_err() {
            inner.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(gone());
        }
        match rx.await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(errno)) => Err(io::Error::from_raw_os_error(errno)),
            Err(_) => Err(gone()),
        }
    }

    /// Starts a keeper for one session: every command it starts shares its network namespace
    /// (loopback only), where `connect` and `listen` make sockets. With `binds` (host directory,
    /// path inside: `/workspace`, `/tmp`, `/home/agent`), the keeper makes the session's root
    /// (`corral_keeper::root`) and every command sees it.
    /// `cover`: host paths that look empty inside though a directory the root shows holds them.
    pub async fn start_session(
        binds: &[(std::path::PathBuf, std::path::PathBuf)],
        cover: &[std::path::PathBuf],
    ) -> io::Result<Keeper> {
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &std::path::Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
        };
        let binds = binds.iter().map(|(h, i)| Ok((c(h)?, c(i)?))).collect::<io::Result<Vec<_>>>()?;
        let cover = cover.iter().map(|p| c(p)).collect::<io::Result<Vec<_>>>()?;
        let keeper = Keeper::start(false)?;
        // SAFETY: raw calls.
        let (root, uid, gid) = unsafe { (libc::geteuid() == 0, libc::getuid(), libc::getgid()) };
        let (uid_map, gid_map) = (format!("{uid} {uid} 1"), format!("{gid} {gid} 1"));
        let made =
            keeper.call(|id| wire::session(id, !root, uid_map.as_bytes(), gid_map.as_bytes(), &binds, &cover)).await;
        if let Err(e) = made {
            keeper.close();
            return Err(e);
        }
        Ok(keeper)
    }

    /// A socket connected to `127.0.0.1:port` inside the session (non-blocking). The keeper
    /// starts the connect; it is finished here, within 10 seconds.
    pub async fn connect(&self, port: u16) -> io::Result<OwnedFd> {
        let (fds, _) = self.call(|id| wire::socket(wire::CONNECT, id, port)).await?;
        ports::finish_connect(one(fds)?).await
    }

    /// Up to `n` (at most 32) TCP sockets made inside the session, not connected yet.
    pub async fn sockets(&self, n: u16) -> io::Result<Vec<OwnedFd>> {
        Ok(self.call(|id| wire::socket(wire::SOCKETS, id, n)).await?.0)
    }

    /// A non-blocking listener on `127.0.0.1:port` (0: any) inside the session, and its port.
    pub async fn listen(&self, port: u16) -> io::Result<(OwnedFd, u16)> {
        let (fds, port) = self.call(|id| wire::socket(wire::LISTEN, id, port)).await?;
        Ok((one(fds)?, port as u16))
    }

    /// Starts one command under `plan`; `userns`, `trees` and `layers` (overlay mode: the
    /// command's own layer, then the pending ones) are the descriptors the plan names, and so are
    /// `namespaces` for a command in a container (its pid namespace, then the others in the
    /// plan's order); the plan's indices are set here.
    pub async fn spawn(
        &self,
        req: LaunchRequest,
        mut plan: Plan,
        userns: Option<OwnedFd>,
        trees: Vec<OwnedFd>,
        layers: Vec<OwnedFd>,
        namespaces: &[RawFd],
    ) -> io::Result<Launched> {
        let inner = &self.inner;
        if !inner.alive.load(Ordering::SeqCst) {
            return Err(gone());
        }
        let cstr = |s: String| CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"));
        let argv = req.argv.into_iter().map(cstr).collect::<io::Result<Vec<_>>>()?;
        let env = req.env.into_iter().map(|(k, v)| cstr(format!("{k}={v}"))).collect::<io::Result<Vec<_>>>()?;
        let stdin = if req.stdin { Some(pipe()?) } else { None };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let mut fds: Vec<RawFd> = Vec::new();
        if let Some((r, _)) = &stdin {
            fds.push(r.as_raw_fd());
        }
        fds.extend([out_w.as_raw_fd(), err_w.as_raw_fd()]);
        if let Some(ns) = &userns {
            plan.userns = Some(fds.len() as i32);
            fds.push(ns.as_raw_fd());
        }
        plan.trees = trees
            .iter()
            .map(|t| {
                fds.push(t.as_raw_fd());
                fds.len() as i32 - 1
            })
            .collect();
        // Overlay mode: the command's own layer, then the pending ones below it.
        for (i, l) in layers.iter().enumerate() {
            let at = fds.len() as i32;
            if i == 0 {
                plan.layer = Some(at);
            } else {
                plan.lowers.push(at);
            }
            fds.push(l.as_raw_fd());
        }
        if let Some(c) = &mut plan.container {
            let (pid_ns, rest) = namespaces.split_first().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            if rest.len() != c.ns.len() {
                return Err(io::Error::from_raw_os_error(libc::EBADF));
            }
            c.pid_ns = fds.len() as i32;
            fds.push(*pid_ns);
            for (n, fd) in c.ns.iter_mut().zip(rest) {
                n.0 = fds.len() as i32;
                fds.push(*fd);
            }
        }
        // Second copies of the trees, for the process prepared for the next command (where they
        // fit in the frame), once the plan is complete: unless this command most likely starts in
        // a prepared process, which leaves its own trees to the next one.
        let room = fds.len() + trees.len() <= wire::MAX_FDS;
        let waiting = corral_keeper::prepared::MAX_AGE / 2;
        let fresh =
            !inner.last_prepared.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|t| t.elapsed() < waiting);
        let spares = match room && fresh && corral_keeper::prepared::preparable(&plan) {
            true => {
                trees.iter().map(|t| corral_keeper::keeper::copy_tree(t.as_raw_fd())).collect::<io::Result<Vec<_>>>()?
            }
            false => Vec::new(),
        };
        let spare_at: Vec<i32> = spares
            .iter()
            .map(|t| {
                fds.push(t.as_raw_fd());
                fds.len() as i32 - 1
            })
            .collect();
        let id = inner.next.fetch_add(1, Ordering::Relaxed);
        let run = Run {
            id,
            argv,
            env,
            cgroups: req.cgroups,
            ahead: req.ahead,
            stdin: stdin.is_some(),
            spares: spare_at,
            plan,
        };
        let (started_tx, started_rx) = oneshot::channel();
        let (exited_tx, exited_rx) = oneshot::channel();
        inner
            .waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Waiter { started: Some(started_tx), exited: Some(exited_tx) });
        if let Err(e) = inner.send(&run.encode(), &fds) {
            inner.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            return Err(if inner.alive.load(Ordering::SeqCst) { e } else { gone() });
        }
        // The keeper has its own copies now.
        drop((out_w, err_w, userns, trees, spares, layers));
        let stdin = stdin.map(|(r, w)| {
            drop(r);
            w
        });
        let pid = match started_rx.await {
            Ok(Ok(pid)) => pid,
            Ok(Err(errno)) => return Err(io::Error::from_raw_os_error(errno)),
            Err(_) => return Err(gone()),
        };
        let killer = self.inner.clone();
        Ok(Launched {
            pid: pid as u32,
            stdin,
            stdout: out_r,
            stderr: err_r,
            exit: Box::pin(async move { exited_rx.await.map_err(|_| gone()) }),
            kill: Arc::new(move || {
                let _ = killer.send(&wire::kill(id, libc::SIGKILL), &[]);
            }),
        })
    }
}

/// `spawn` of a program file this process has just written: a process another thread forked
/// meanwhile holds the written file open until it runs its own program, and the kernel refuses to
/// run a file open for writing (`ETXTBSY`), so that refusal is tried again for a while.
fn spawn_written(path: &CString, ctl: RawFd) -> io::Result<libc::pid_t> {
    let mut tries = 0;
    loop {
        match spawn(path, ctl) {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 200 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Starts the keeper program at `path` with `ctl` as its control socket, without forking this
/// process: its own process group, no environment, standard input and output on /dev/null.
fn spawn(path: &CString, ctl: RawFd) -> io::Result<libc::pid_t> {
    // SAFETY: posix_spawn's structures are initialised, used and destroyed here; the strings and
    // arrays outlive the call.
    unsafe {
        let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut actions);
        libc::posix_spawnattr_init(&mut attr);
        let r = (|| {
            let mut r = libc::posix_spawn_file_actions_adddup2(&mut actions, ctl, CONTROL_FD);
            r |= libc::posix_spawn_file_actions_addopen(&mut actions, 0, c"/dev/null".as_ptr(), libc::O_RDONLY, 0);
            r |= libc::posix_spawn_file_actions_addopen(&mut actions, 1, c"/dev/null".as_ptr(), libc::O_WRONLY, 0);
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            let mut defaults: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut defaults);
            for s in
                [libc::SIGPIPE, libc::SIGCHLD, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP, libc::SIGXFSZ]
            {
                libc::sigaddset(&mut defaults, s);
            }
            r |= libc::posix_spawnattr_setsigmask(&mut attr, &empty);
            r |= libc::posix_spawnattr_setsigdefault(&mut attr, &defaults);
            r |= libc::posix_spawnattr_setpgroup(&mut attr, 0);
            let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETPGROUP;
            r |= libc::posix_spawnattr_setflags(&mut attr, flags as libc::c_short);
            if r != 0 {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            let argv = [c"corral-keeper".as_ptr() as *mut libc::c_char, std::ptr::null_mut()];
            let envp = [std::ptr::null_mut::<libc::c_char>()];
            let mut pid = 0;
            match libc::posix_spawn(&mut pid, path.as_ptr(), &actions, &attr, argv.as_ptr(), envp.as_ptr()) {
                0 => Ok(pid),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        })();
        libc::posix_spawn_file_actions_destroy(&mut actions);
        libc::posix_spawnattr_destroy(&mut attr);
        r
    }
}

#[cfg(test)]
mod tests;
