//! The keeper's loop. One single-threaded process, started by the library from its own bytes,
//! forks each sandboxed command (a fork of this small process, not of Node) and reports on it:
//! `STARTED` once the command's exec succeeded, `FAILED` with the errno of the step that refused,
//! `EXITED` with the wait status of its first process. It ends, killing every command it started,
//! when the library's end of the control socket closes (Node exited, however it ended).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::frame;
use crate::prepared::{self, Prepared};
use crate::wire::{self, Dec, Reply, Run};

struct Command {
    id: u64,
    pid: libc::pid_t,
    /// The read end of the pipe the command's processes report a failed step on, until the
    /// command's exec (or its failure) is known.
    report: Option<OwnedFd>,
    failed: bool,
    /// It runs in a process prepared before it came (`prepared.rs`).
    prepared: bool,
    /// A prepared command's first process writes its wait status here once every process of the
    /// command ended, before its namespaces are torn down (its own exit), so the end is reported
    /// without waiting for that.
    status: Option<OwnedFd>,
    /// Its end was reported from `status`; reaping it reports nothing more.
    ended: bool,
}

struct Keeper {
    ctl: RawFd,
    signals: RawFd,
    commands: Vec<Command>,
    /// A process waiting for the next command under the last plan that allows one.
    prepared: Option<Prepared>,
    /// This keeper's `/proc/self/mountinfo`: a change of the host's mounts (an unmount, a
    /// remount) turns it readable with `POLLPRI`, and the prepared view, which holds the mounts
    /// as they were, is dropped.
    mounts: Option<OwnedFd>,
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Serves the control socket `ctl` until it closes; returns the exit code.
pub fn run(ctl: RawFd) -> i32 {
    // SAFETY: fstat into a zeroed struct.
    let is_socket = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(ctl, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
    };
    if !is_socket {
        eprintln!("corral-keeper: started without its control socket (it is started by corral's LinuxSandbox).");
        return 2;
    }
    // SAFETY: raw calls on this process's own signal state and descriptors.
    let signals = unsafe {
        // Nothing Node left open without close-on-exec stays in the keeper.
        libc::syscall(libc::SYS_close_range, (ctl + 1) as libc::c_uint, libc::c_uint::MAX, 0 as libc::c_uint);
        libc::fcntl(ctl, libc::F_SETFD, libc::FD_CLOEXEC);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if signals < 0 {
        eprintln!("corral-keeper: signalfd failed: {}", io::Error::last_os_error());
        return 1;
    }
    // SAFETY: a NUL-terminated literal; the descriptor is owned at once.
    let mounts = unsafe {
        let fd = libc::open(c"/proc/self/mountinfo".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        (fd >= 0).then(|| OwnedFd::from_raw_fd(fd))
    };
    let mut k = Keeper { ctl, signals, commands: Vec::new(), prepared: None, mounts };
    k.serve();
    k.kill_all();
    0
}

/// Adds a readable-wait on the descriptor `pick` gives of each command that has one: their ids,
/// in the order of the `pollfd`s added.
fn poll_each(
    commands: &[Command],
    fds: &mut Vec<libc::pollfd>,
    pick: impl Fn(&Command) -> Option<&OwnedFd>,
) -> Vec<u64> {
    let mut ids = Vec::new();
    for c in commands {
        if let Some(fd) = pick(c) {
            fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
            ids.push(c.id);
        }
    }
    ids
}

impl Keeper {
    fn serve(&mut self) {
        loop {
            let mut fds = vec![
                libc::pollfd { fd: self.ctl, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.signals, events: libc::POLLIN, revents: 0 },
            ];
            let waiting = poll_each(&self.commands, &mut fds, |c| c.report.as_ref());
            // Started commands that say their end themselves.
            let saying = poll_each(&self.commands, &mut fds, |c| c.status.as_ref().filter(|_| c.report.is_none()));
            // A prepared process that failed or died turns its report pipe readable, a change of
            // the mounts its view holds the mount table; one that waited its time is dropped.
            // Until C2's pid came, the groups made ahead for it wait (`Prepared::join_ahead`).
            let joining = self.prepared.as_ref().and_then(|p| p.joining_fd());
            let timeout = match &self.prepared {
                Some(p) => {
                    let mounts = self.mounts.as_ref().map_or(-1, |m| m.as_raw_fd());
                    fds.push(libc::pollfd { fd: mounts, events: libc::POLLPRI, revents: 0 });
                    fds.push(libc::pollfd { fd: p.report_fd(), events: libc::POLLIN, revents: 0 });
                    if let Some(fd) = joining {
                        fds.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
                    }
                    p.left().as_millis().min(i32::MAX as u128) as i32
                }
                None => -1,
            };
            // SAFETY: a live array of pollfd.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                return;
            }
            let prepared_fds = &fds[fds.len().saturating_sub(2 + joining.is_some() as usize)..];
            if let Some(mut p) = self.prepared.take() {
                let mounts_changed = prepared_fds[0].revents != 0;
                if mounts_changed {
                    self.mounts_seen();
                }
                let failed = prepared_fds[1].revents != 0
                    || (joining.is_some() && prepared_fds[2].revents != 0 && p.join_ahead().is_err());
                match mounts_changed || failed || p.left().is_zero() {
                    true => p.discard(),
                    false => self.prepared = Some(p),
                }
            }
            for (i, id) in waiting.iter().enumerate() {
                if fds[2 + i].revents != 0 && !self.settle(*id, false) {
                    return;
                }
            }
            for (i, id) in saying.iter().enumerate() {
                if fds[2 + waiting.len() + i].revents != 0 && !self.said_end(*id) {
                    return;
                }
            }
            if fds[1].revents != 0 && !self.reap() {
                return;
            }
            if fds[0].revents != 0 {
                match frame::recv(self.ctl) {
                    Ok(Some((payload, received))) => {
                        if !self.handle(&payload, received) {
                            return;
                        }
                    }
                    // The library is gone.
                    Ok(None) | Err(_) => return,
                }
            }
        }
    }

    fn reply(&self, r: Reply) -> bool {
        frame::send(self.ctl, &r.encode(), &[]).is_ok()
    }

    fn handle(&mut self, payload: &[u8], received: Vec<OwnedFd>) -> bool {
        let mut d = Dec::new(payload);
        match d.u8() {
            Ok(wire::RUN) => {
                let run = match Run::decode(&mut d) {
                    Ok(r) => r,
                    // Without an id there is no one to answer: the library sent garbage.
                    Err(_) => return false,
                };
                let id = run.id;
                match self.start(run, received) {
                    Ok(c) => {
                        self.commands.push(c);
                        true
                    }
                    Err(e) => self.reply(Reply::Failed { id, errno: e.raw_os_error().unwrap_or(libc::EIO) }),
                }
            }
            Ok(wire::SESSION) => {
                // Commands made before the session's namespaces are not its commands.
                if let Some(p) = self.prepared.take() {
                    p.discard();
                }
                let (Ok(id), Ok(user_ns), Ok(uid_map), Ok(gid_map)) = (d.u64(), d.bool(), d.bytes(), d.bytes()) else {
                    return false;
                };
                let Ok((binds, cover)) = wire::session_root(&mut d) else { return false };
                match enter_session(user_ns, uid_map, gid_map).and_then(|()| {
                    if binds.is_empty() {
                        Ok(())
                    } else {
                        crate::root::enter(&binds, &cover)
                    }
                }) {
                    Ok(()) => self.reply(Reply::Ready { id }),
                    Err(e) => self.reply(Reply::Failed { id, errno: e.raw_os_error().unwrap_or(libc::EIO) }),
                }
            }
            Ok(tag @ (wire::CONNECT | wire::LISTEN | wire::SOCKETS)) => {
                let (Ok(id), Ok(port)) = (d.u64(), d.u32()) else { return false };
                let Ok(port) = u16::try_from(port) else { return false };
                let made = match tag {
                    wire::CONNECT => connect(port).map(|(s, p)| (vec![s], p)),
                    wire::LISTEN => listen(port).map(|(s, p)| (vec![s], p)),
                    _ => {
                        let n = usize::from(port).min(wire::MAX_FDS);
                        (0..n)
                            .map(|_| tcp_socket(libc::SOCK_NONBLOCK))
                            .collect::<io::Result<Vec<_>>>()
                            .map(|s| (s, n as u16))
                    }
                };
                match made {
                    Ok((socks, port)) => {
                        let fds: Vec<RawFd> = socks.iter().map(|s| s.as_raw_fd()).collect();
                        frame::send(self.ctl, &Reply::Socket { id, port: port as i32 }.encode(), &fds).is_ok()
                    }
                    Err(e) => self.reply(Reply::Failed { id, errno: e.raw_os_error().unwrap_or(libc::EIO) }),
                }
            }
            Ok(wire::KILL) => {
                let (Ok(id), Ok(sig)) = (d.u64(), d.i32()) else { return false };
                if let Some(c) = self.commands.iter().find(|c| c.id == id) {
                    // SAFETY: signals a process group this keeper started and has not reaped.
                    unsafe { libc::kill(-c.pid, sig) };
                }
                true
            }
            _ => false,
        }
    }

    /// Forks the command's first process.
    fn start(&mut self, mut run: Run, received: Vec<OwnedFd>) -> io::Result<Command> {
        let fixed = if run.stdin { 3 } else { 2 };
        let in_container: Vec<i32> =
            run.plan.container.iter().flat_map(|c| std::iter::once(c.pid_ns).chain(c.ns.iter().map(|n| n.0))).collect();
        let named = run
            .plan
            .userns
            .iter()
            .chain(&run.plan.trees)
            .chain(&run.plan.layer)
            .chain(&run.plan.lowers)
            .chain(&in_container)
            .chain(&run.spares);
        let fd_at = |i: i32| -> io::Result<RawFd> {
            usize::try_from(i)
                .ok()
                .filter(|i| *i >= fixed)
                .and_then(|i| received.get(i))
                .map(|f| f.as_raw_fd())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
        };
        if received.len() < fixed || named.clone().any(|i| fd_at(*i).is_err()) {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        // The plan's key, when the next command under it can be prepared.
        let key = match prepared::preparable(&run.plan) {
            true => prepared::key(&run.plan, fd_at).ok(),
            false => None,
        };
        run.plan.userns = run.plan.userns.map(fd_at).transpose()?;
        run.plan.trees = run.plan.trees.iter().map(|i| fd_at(*i)).collect::<io::Result<_>>()?;
        run.plan.layer = run.plan.layer.map(fd_at).transpose()?;
        run.plan.lowers = run.plan.lowers.iter().map(|i| fd_at(*i)).collect::<io::Result<_>>()?;
        if let Some(c) = &mut run.plan.container {
            c.pid_ns = fd_at(c.pid_ns)?;
            for n in &mut c.ns {
                n.0 = fd_at(n.0)?;
            }
        }
        // Copies of the writable trees for the next prepared process (a detached tree is attached
        // once), sent with a command the library expects to start here.
        let copies = match run.spares.len() == run.plan.trees.len() {
            true => run.spares.iter().map(|i| fd_at(*i)).collect::<io::Result<Vec<_>>>().ok(),
            false => None,
        };
        // Each the same directory as the tree it stands for.
        let same = |a: RawFd, b: RawFd| {
            crate::child::identity(a).ok().is_some_and(|id| crate::child::identity(b).ok() == Some(id))
        };
        let copies = copies
            .filter(|c| c.len() == run.plan.trees.len() && c.iter().zip(&run.plan.trees).all(|(a, b)| same(*a, *b)));
        // SAFETY: raw call.
        let keeper = unsafe { libc::getpid() };
        let mut waiting = self.prepared.take();
        if waiting.is_some() && self.mounts_changed() {
            if let Some(p) = waiting.take() {
                p.discard();
            }
        }
        let command = match waiting {
            Some(p) if key.as_deref() == Some(p.key()) => p.go(&run, &received[..fixed]),
            Some(p) => {
                p.discard();
                None
            }
            None => None,
        };
        // A command started in a prepared process leaves its own trees unused: they are the next
        // prepared process's. A command started here takes them, and the next prepared process
        // gets the copies, if the library sent them.
        let (command, next_trees) = match command {
            Some((pid, report, status)) => (
                Command {
                    id: run.id,
                    pid,
                    report: Some(report),
                    failed: false,
                    prepared: true,
                    status: Some(status),
                    ended: false,
                },
                Some(run.plan.trees.clone()),
            ),
            None => (self.fork_command(&run, &received[..fixed], keeper)?, copies),
        };
        // The next command under this plan finds its process ready.
        if let (Some(key), Some(trees)) = (key, next_trees) {
            run.plan.trees = trees;
            self.prepared = Prepared::start(key, &run, keeper, exec).ok();
        }
        Ok(command)
    }

    /// Forks the command's first process.
    fn fork_command(&self, run: &Run, stdio: &[OwnedFd], keeper: libc::pid_t) -> io::Result<Command> {
        let (report, report_w) = crate::pipe()?;
        // SAFETY: this process is single-threaded, so the child may run any code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let code = first_process(self, keeper, run, stdio, report_w.as_raw_fd());
            // SAFETY: ends the child without running this process's exit handlers.
            unsafe { libc::_exit(code) }
        }
        Ok(Command {
            id: run.id,
            pid,
            report: Some(report),
            failed: false,
            prepared: false,
            status: None,
            ended: false,
        })
    }

    /// Reads a command's report pipe: nothing (its exec succeeded, or it died before) or an errno.
    /// With `wait`, waits for the pipe to close (the command's first process is gone).
    fn settle(&mut self, id: u64, wait: bool) -> bool {
        let Some(c) = self.commands.iter_mut().find(|c| c.id == id) else { return true };
        let Some(report) = c.report.take() else { return true };
        if wait {
            let mut p = libc::pollfd { fd: report.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd. A second at most: the processes holding the pipe die with the
            // first one (their parent-death signal).
            unsafe { libc::poll(&mut p, 1, 1000) };
        }
        let mut buf = [0u8; 4];
        // SAFETY: reading into a live buffer.
        let n = unsafe { libc::read(report.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
        let reply = if n == 4 {
            c.failed = true;
            Reply::Failed { id, errno: i32::from_ne_bytes(buf) }
        } else {
            Reply::Started { id, pid: c.pid, prepared: c.prepared }
        };
        self.reply(reply)
    }

    /// Reads a prepared command's wait status, sent by its first process once every process of
    /// it ended, and reports the end. Nothing read (the process was killed): its reaping reports.
    fn said_end(&mut self, id: u64) -> bool {
        let Some(c) = self.commands.iter_mut().find(|c| c.id == id) else { return true };
        let Some(status) = c.status.take() else { return true };
        let mut buf = [0u8; 4];
        // SAFETY: reading into a live buffer.
        if unsafe { libc::read(status.as_raw_fd(), buf.as_mut_ptr().cast(), 4) } != 4 || c.failed {
            return true;
        }
        c.ended = true;
        self.reply(Reply::Exited { id, status: i32::from_ne_bytes(buf) })
    }

    fn reap(&mut self) -> bool {
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        // SAFETY: draining the signalfd into a buffer of one record.
        while unsafe { libc::read(self.signals, info.as_mut_ptr().cast(), info.len()) } > 0 {}
        loop {
            let mut status = 0;
            // SAFETY: reaps any child that has ended.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return true;
            }
            if self.prepared.as_ref().is_some_and(|p| p.pid() == pid) {
                // It ended on its own: nothing waits there any more.
                self.prepared = None;
                continue;
            }
            let Some(i) = self.commands.iter().position(|c| c.pid == pid) else { continue };
            let id = self.commands[i].id;
            if !self.settle(id, true) {
                return false;
            }
            let c = self.commands.remove(i);
            if !c.failed && !c.ended && !self.reply(Reply::Exited { id, status }) {
                return false;
            }
        }
    }

    /// Whether the host's mounts changed since the mount table was last read through (then it
    /// is read through).
    fn mounts_changed(&self) -> bool {
        let Some(m) = &self.mounts else { return false };
        let mut p = libc::pollfd { fd: m.as_raw_fd(), events: libc::POLLPRI, revents: 0 };
        // SAFETY: one pollfd, no wait.
        let changed = unsafe { libc::poll(&mut p, 1, 0) } == 1;
        if changed {
            self.mounts_seen();
        }
        changed
    }

    /// Reads the mount table through, so its next change is seen again.
    fn mounts_seen(&self) {
        if let Some(m) = &self.mounts {
            let mut buf = [0u8; 8192];
            // SAFETY: reads into a live buffer from offset 0 until the end.
            unsafe {
                libc::lseek(m.as_raw_fd(), 0, libc::SEEK_SET);
                while libc::read(m.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) > 0 {}
            }
        }
    }

    fn kill_all(&mut self) {
        if let Some(p) = self.prepared.take() {
            p.discard();
        }
        for c in &self.commands {
            // SAFETY: signals process groups this keeper started and has not reaped.
            unsafe { libc::kill(-c.pid, libc::SIGKILL) };
        }
    }
}

/// Makes this keeper a session's: a network namespace of its own (in a user namespace mapping
/// this user to itself, for a user other than root), its loopback up. Every command forked after
/// shares it.
fn enter_session(user_ns: bool, uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    let flags = if user_ns { libc::CLONE_NEWUSER | libc::CLONE_NEWNET } else { libc::CLONE_NEWNET };
    // SAFETY: raw syscall in this single-threaded process.
    if unsafe { libc::unshare(flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    if user_ns {
        crate::child::write_file(c"/proc/self/setgroups", b"deny")?;
        crate::child::write_file(c"/proc/self/uid_map", uid_map)?;
        crate::child::write_file(c"/proc/self/gid_map", gid_map)?;
    }
    crate::child::loopback_up()
}

fn tcp_socket(flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a raw socket call; the descriptor is owned at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor socket just made.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

const ADDR_LEN: libc::socklen_t = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// A socket connecting to 127.0.0.1:`port` in this (the session's) network namespace, without
/// waiting: the library finishes the connect (a listener that never accepts must not stall this
/// loop).
fn connect(port: u16) -> io::Result<(OwnedFd, u16)> {
    let sock = tcp_socket(libc::SOCK_NONBLOCK)?;
    let addr = crate::forward::loopback(port);
    loop {
        // SAFETY: a sockaddr_in of the size given.
        if unsafe { libc::connect(sock.as_raw_fd(), (&addr as *const libc::sockaddr_in).cast(), ADDR_LEN) } == 0 {
            return Ok((sock, port));
        }
        match errno() {
            libc::EINTR => continue,
            libc::EINPROGRESS => return Ok((sock, port)),
            _ => return Err(io::Error::last_os_error()),
        }
    }
}

/// A listener on 127.0.0.1:`port` (0: any free port) in the session's network namespace, and
/// its port.
fn listen(port: u16) -> io::Result<(OwnedFd, u16)> {
    let sock = tcp_socket(0)?;
    let mut addr = crate::forward::loopback(port);
    let mut len = ADDR_LEN;
    // SAFETY: a sockaddr_in of the size given, filled back by getsockname.
    unsafe {
        if libc::bind(sock.as_raw_fd(), (&addr as *const libc::sockaddr_in).cast(), ADDR_LEN) < 0
            || libc::listen(sock.as_raw_fd(), 128) < 0
            || libc::getsockname(sock.as_raw_fd(), (&mut addr as *mut libc::sockaddr_in).cast(), &mut len) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((sock, u16::from_be(addr.sin_port)))
}

/// The program's path: `argv[0]` when it names a path, else the first executable match in the
/// command's own `PATH`.
fn resolve(argv: &[CString], env: &[CString]) -> io::Result<CString> {
    let program = argv.first().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let bytes = program.as_bytes();
    if bytes.contains(&b'/') {
        return Ok(program.clone());
    }
    let path = env.iter().find_map(|e| e.as_bytes().strip_prefix(b"PATH=")).unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    for dir in path.split(|b| *b == b':').filter(|d| !d.is_empty()) {
        let mut full = dir.to_vec();
        full.push(b'/');
        full.extend_from_slice(bytes);
        let Ok(c) = CString::new(full) else { continue };
        // SAFETY: a NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
            return Ok(c);
        }
    }
    Err(io::Error::from_raw_os_error(libc::ENOENT))
}

/// Writes the errno of a failed step to a command's report pipe.
pub(crate) fn report(fd: RawFd, e: &io::Error) {
    let n = e.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
    // SAFETY: writing four bytes to the report pipe.
    unsafe { libc::write(fd, n.as_ptr().cast(), 4) };
}

/// The command's first process: its own process group, its standard streams, its control
/// groups, then the sandbox (`child::enter`, which forks the namespace's init and returns in it),
/// then the program. Returns an exit code only when a step failed.
fn first_process(k: &Keeper, keeper: libc::pid_t, run: &Run, stdio: &[OwnedFd], report_w: RawFd) -> i32 {
    // SAFETY: raw calls in a child of a single-threaded process.
    unsafe {
        // Ends with the keeper (which ends with Node); a keeper already gone means no command.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != keeper {
            return 1;
        }
        libc::close(k.ctl);
        libc::close(k.signals);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::setpgid(0, 0);
        let (stdin, rest) = if run.stdin {
            (stdio[0].as_raw_fd(), &stdio[1..])
        } else {
            (libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC), stdio)
        };
        if stdin < 0
            || libc::dup2(stdin, 0) < 0
            || libc::dup2(rest[0].as_raw_fd(), 1) < 0
            || libc::dup2(rest[1].as_raw_fd(), 2) < 0
        {
            report(report_w, &io::Error::last_os_error());
            return 127;
        }
        // A group that cannot be joined would leave its limits unenforced: the command fails.
        for procs in &run.cgroups {
            if let Err(e) = crate::child::write_file(procs, b"0") {
                report(report_w, &e);
                return 127;
            }
        }
    }
    if let Err(e) = crate::child::enter(&run.plan, None) {
        report(report_w, &e);
        return 127;
    }
    exec(&run.argv, &run.env, report_w)
}

/// The namespace's init: the program, looked up in the command's own view.
fn exec(argv: &[CString], env: &[CString], report_w: RawFd) -> i32 {
    let program = match resolve(argv, env) {
        Ok(p) => p,
        Err(e) => {
            report(report_w, &e);
            return 127;
        }
    };
    let argv: Vec<*const libc::c_char> =
        argv.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    let env: Vec<*const libc::c_char> =
        env.iter().map(|a| a.as_ptr()).chain(std::iter::once(std::ptr::null())).collect();
    // SAFETY: NULL-terminated arrays of NUL-terminated strings that outlive the call.
    unsafe { libc::execve(program.as_ptr(), argv.as_ptr(), env.as_ptr()) };
    report(report_w, &io::Error::last_os_error());
    127
}

/// A new detached copy of the detached tree `tree` (its mount attributes and idmapping kept),
/// made in the mount namespace `tree` was detached from.
pub fn copy_tree(tree: RawFd) -> io::Result<OwnedFd> {
    let fd = crate::child::clone_tree_at(tree, c"", true)?;
    // SAFETY: a descriptor open_tree just made.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
