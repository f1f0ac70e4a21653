//! Prepared commands. Most of a sandboxed command's cost is the kernel making its namespaces and
//! its view (docs/sandboxes.md), and none of that depends on the command itself. After starting a
//! command whose plan allows it, the keeper forks a process for the next command under the same
//! plan: it makes the namespaces and the view, hardens itself (capabilities, Landlock, seccomp)
//! and waits. When the next command comes with a plan that is the same byte for byte, its
//! descriptors open on the same objects (the same directories, the same user namespace), the
//! keeper hands the waiting init the command's program, environment and streams, and it runs.
//! Anything else, and the prepared process is dropped and the command started as before; so it is
//! when the prepared process is not ready within `READY_WAIT_MS`.
//!
//! The init is in the command's control groups by then: the library made them ahead and named
//! them with the command before (`Run::ahead`), and the keeper moved the init into them as soon as
//! it learnt its pid — a move the kernel may make wait for an RCU grace period, milliseconds, when
//! the last move is not recent, as between an agent's commands. A command whose groups are not
//! those gets a fresh process.
//!
//! A prepared view is only as good as when it was made. Before one is used, the keeper looks
//! into it (through `/proc/<pid>/root`): each path the view covers — the writable trees, the
//! protected, hidden and pinned paths — must still be a mount point there, each writable tree
//! still the directory the plan names, and the working directory still where the plan says. A
//! host that renamed a protected `.git` away and made another since gets a fresh view, where the
//! new one is read-only too. The view holds the host's mounts as they were when it was made: a
//! change of the keeper's mount table drops it (`keeper.rs`), and so does `MAX_AGE`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use crate::child::{self, Plan};
use crate::frame;
use crate::keeper::report;
use crate::wire::{self, Enc, Run};

/// How long a prepared process waits for its command.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// The niceness a prepared process is made at (root only; 0 again when its command comes).
const PREPARING_NICE: libc::c_int = 10;

/// How long a command waits for a prepared process still making its view.
const READY_WAIT_MS: i32 = 50;

/// The descriptors a prepared command's processes hold: `go` (C1's end of the keeper's socket),
/// `ready` (C2 writes a byte once hardened), `report` (the command's report pipe, `keeper.rs`).
pub struct Hold {
    pub go: RawFd,
    pub ready: RawFd,
    pub report: RawFd,
}

/// A process prepared for the next command under one plan, as the keeper holds it.
pub struct Prepared {
    key: Vec<u8>,
    /// C1, the command's first process and its process group's leader.
    pid: libc::pid_t,
    go: OwnedFd,
    ready: OwnedFd,
    report: OwnedFd,
    made: Instant,
    /// The paths the view covers, with the directory each writable tree must be.
    covered: Vec<(CString, Option<(u64, u64)>)>,
    cwd: CString,
    /// The next command's control groups (`Run::ahead`), which C2 joins once its pid is known.
    ahead: Vec<CString>,
    /// C2's process id, once C1 sent it.
    c2: Option<libc::pid_t>,
}

/// Whether commands under `plan` can be prepared: not in a container, without a forwarder, an
/// overlay layer or a memory group (each is the command's own).
pub fn preparable(plan: &Plan) -> bool {
    plan.container.is_none()
        && plan.forward.is_none()
        && plan.layer.is_none()
        && plan.lowers.is_empty()
        && plan.memory_procs.is_none()
        // Room for the command's streams when they come (under a small limit, C2 could not take
        // them in).
        && plan.rlimits.iter().all(|(r, soft, _)| *r != libc::RLIMIT_NOFILE || *soft >= 64)
}

/// The plan as bytes, its descriptors named by the (device, inode) they are open on (`fd_at`
/// turns a plan's index into the descriptor received).
pub fn key(plan: &Plan, fd_at: impl Fn(i32) -> io::Result<RawFd>) -> io::Result<Vec<u8>> {
    let mut e = Enc::default();
    wire::encode_plan(&mut e, plan, true);
    for i in plan.userns.iter().chain(&plan.trees) {
        let (dev, ino) = child::identity(fd_at(*i)?)?;
        e.u64(dev).u64(ino);
    }
    Ok(e.0)
}

/// Closes every descriptor but `keep`.
///
/// # Safety
/// Closes descriptors other code may own: call only in a freshly forked child.
pub unsafe fn close_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut from = 0u32;
    for &k in keep.iter().filter(|k| **k >= 0) {
        let k = k as u32;
        if k > from {
            libc::syscall(libc::SYS_close_range, from, k - 1, 0u32);
        }
        from = k + 1;
    }
    libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32);
}

impl Prepared {
    /// Forks the prepared process for `run`'s plan (`key`), its descriptors already the
    /// keeper's (`keeper.rs`). `exec` runs the command in C2 once it came.
    pub fn start(
        key: Vec<u8>,
        run: &Run,
        keeper: libc::pid_t,
        exec: impl FnOnce(&[CString], &[CString], RawFd) -> i32,
    ) -> io::Result<Prepared> {
        let mut pair = [-1; 2];
        // SAFETY: a two-element array for the pair.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr()) } < 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: descriptors socketpair just made.
        let (go, go_c) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let (ready, ready_w) = crate::pipe()?;
        let (report, report_w) = crate::pipe()?;
        let plan = &run.plan;
        let mut covered: Vec<(CString, Option<(u64, u64)>)> = plan
            .writable
            .iter()
            .zip(plan.writable_ids.iter().map(|id| Some(*id)).chain(std::iter::repeat(None)))
            .map(|(p, id)| (p.clone(), id))
            .collect();
        for p in plan.protect.iter().chain(&plan.hide_dirs).chain(&plan.hide_files) {
            covered.push((p.clone(), None));
        }
        for p in plan.hide_inner_dirs.iter().chain(&plan.hide_inner_files).chain(&plan.pins) {
            covered.push((p.clone(), None));
        }
        // SAFETY: the keeper is single-threaded, so the child may run any code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        // Its own process group from here on, whichever of the two runs first (a discard right
        // after the fork reaches it).
        // SAFETY: raw call on our own child.
        unsafe { libc::setpgid(pid, pid) };
        if pid == 0 {
            let hold = Hold { go: go_c.as_raw_fd(), ready: ready_w.as_raw_fd(), report: report_w.as_raw_fd() };
            // SAFETY: raw calls in a child of a single-threaded process.
            let code = unsafe { prepared_process(run, keeper, &hold, exec) };
            // SAFETY: ends the child without running this process's exit handlers.
            unsafe { libc::_exit(code) }
        }
        Ok(Prepared {
            key,
            pid,
            go,
            ready,
            report,
            made: Instant::now(),
            covered,
            cwd: plan.cwd.clone(),
            ahead: run.ahead.clone(),
            c2: None,
        })
    }

    /// The descriptor that turns readable when C1 sends C2's pid, while the groups made ahead
    /// wait for it.
    pub fn joining_fd(&self) -> Option<RawFd> {
        (self.c2.is_none() && !self.ahead.is_empty()).then(|| self.go.as_raw_fd())
    }

    /// Reads C2's pid (`joining_fd` is readable) and moves C2 into the groups made ahead. An
    /// error: the process cannot serve.
    pub fn join_ahead(&mut self) -> io::Result<()> {
        let c2 = self.c2_pid()?;
        self.c2 = Some(c2);
        join(&self.ahead, c2)
    }

    /// C2's process id: read from C1 once.
    fn c2_pid(&self) -> io::Result<libc::pid_t> {
        if let Some(pid) = self.c2 {
            return Ok(pid);
        }
        let mut pid = [0u8; 4];
        read_within(self.go.as_raw_fd(), &mut pid)?;
        Ok(i32::from_ne_bytes(pid))
    }

    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// C1's process id.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// The report pipe's read end, which turns readable when the process failed or died.
    pub fn report_fd(&self) -> RawFd {
        self.report.as_raw_fd()
    }

    /// How long it may still wait.
    pub fn left(&self) -> Duration {
        MAX_AGE.saturating_sub(self.made.elapsed())
    }

    /// Ends the process (C2 follows C1, its parent-death signal); the keeper reaps C1.
    pub fn discard(self) {
        // SAFETY: signals the process (group) this keeper started and has not reaped.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
    }

    /// Starts `run` here, `stdio` its streams as received (stdin first when it has one): C1's
    /// process id and the report pipe, as a command's, and the socket C1 writes C2's wait
    /// status on. `None` when this process cannot serve (not ready, its view no longer holds, a
    /// group cannot be opened); it is then discarded.
    pub fn go(self, run: &Run, stdio: &[OwnedFd]) -> Option<(libc::pid_t, OwnedFd, OwnedFd)> {
        match self.try_go(run, stdio) {
            Ok(()) => Some((self.pid, self.report, self.go)),
            Err(_) => {
                self.discard();
                None
            }
        }
    }

    fn try_go(&self, run: &Run, stdio: &[OwnedFd]) -> io::Result<()> {
        if self.made.elapsed() > MAX_AGE {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        // The priority a command gets, given back (`prepared_process`) before the wait below: a
        // view still being made is now the command's own start, and at the lower priority it
        // would finish last on a machine the library and the last command keep busy.
        // SAFETY: raw calls on this keeper's own descendants.
        let root = unsafe { libc::geteuid() } == 0;
        let normal = |who: libc::pid_t| match unsafe { libc::setpriority(libc::PRIO_PROCESS, who as libc::id_t, 0) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        };
        if root {
            normal(self.pid)?;
        }
        // C2's process id, which C1 sent as soon as it forked.
        let c2 = self.c2_pid()?;
        if root {
            normal(c2)?;
        }
        // Ready: the view made, the process hardened.
        let mut byte = [0u8; 1];
        read_within(self.ready.as_raw_fd(), &mut byte)?;
        self.holds(c2)?;
        let null;
        let streams: [RawFd; 3] = match (run.stdin, stdio) {
            (true, [i, o, e, ..]) => [i.as_raw_fd(), o.as_raw_fd(), e.as_raw_fd()],
            (false, [o, e, ..]) => {
                // SAFETY: a NUL-terminated literal; the descriptor is owned at once.
                null = unsafe { owned(libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC))? };
                [null.as_raw_fd(), o.as_raw_fd(), e.as_raw_fd()]
            }
            _ => return Err(io::Error::from_raw_os_error(libc::EBADF)),
        };
        // The command's control groups, joined by the namespace's init before it runs: ahead, or
        // now where none were made ahead. In groups made ahead for another command, it cannot serve.
        match self.c2 {
            Some(_) if run.cgroups != self.ahead => return Err(io::Error::from_raw_os_error(libc::ESTALE)),
            Some(_) => {}
            None => join(&run.cgroups, c2)?,
        }
        frame::send(self.go.as_raw_fd(), &wire::go(&run.argv, &run.env), &streams)
    }

    /// Whether the view of C2 (`pid`, as this keeper sees it) still covers what the plan
    /// covers, and its working directory is the plan's.
    ///
    /// A covered path must still be a mount point in the view: the root of the mount its path
    /// leads to, as `statx` says (Linux 5.8+). Where it cannot say (an older kernel, a path that
    /// does not open), the view's `/proc/<pid>/mountinfo` decides, read once.
    fn holds(&self, pid: libc::pid_t) -> io::Result<()> {
        let stale = || io::Error::from_raw_os_error(libc::ESTALE);
        let root = CString::new(format!("/proc/{pid}/root")).map_err(|_| stale())?;
        // SAFETY: a NUL-terminated path; the descriptor is owned at once.
        let root = unsafe { owned(libc::open(root.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC))? };
        // SAFETY: a descriptor openat2 just made.
        let at = |p: &CString| child::open_path_in(root.as_raw_fd(), p).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
        let mut points: Option<std::collections::HashSet<Vec<u8>>> = None;
        for (path, id) in &self.covered {
            let opened = at(path).ok();
            let point = match opened.as_ref().and_then(|fd| mount_root(fd.as_raw_fd())) {
                Some(point) => point,
                None => {
                    if points.is_none() {
                        points = Some(mount_points(pid)?);
                    }
                    points.as_ref().is_some_and(|p| p.contains(path.as_bytes()))
                }
            };
            if !point {
                return Err(stale());
            }
            if let Some(id) = id {
                let fd = match opened {
                    Some(fd) => fd,
                    None => at(path)?,
                };
                if child::identity(fd.as_raw_fd())? != *id {
                    return Err(stale());
                }
            }
        }
        let cwd = CString::new(format!("/proc/{pid}/cwd")).map_err(|_| stale())?;
        // SAFETY: a NUL-terminated path; the descriptor is owned at once.
        let cwd_now = unsafe { owned(libc::open(cwd.as_ptr(), libc::O_PATH | libc::O_CLOEXEC))? };
        if child::identity(at(&self.cwd)?.as_raw_fd())? != child::identity(cwd_now.as_raw_fd())? {
            return Err(stale());
        }
        Ok(())
    }
}

/// Whether what `fd` is open on is the root of its mount (`STATX_ATTR_MOUNT_ROOT`); `None` where
/// the kernel does not say (before Linux 5.8).
fn mount_root(fd: RawFd) -> Option<bool> {
    const STATX_ATTR_MOUNT_ROOT: u64 = 0x2000;
    child::statx_attribute(fd, c"", STATX_ATTR_MOUNT_ROOT)
}

/// The mount points of process `pid`'s view, as its `/proc/<pid>/mountinfo` names them.
fn mount_points(pid: libc::pid_t) -> io::Result<std::collections::HashSet<Vec<u8>>> {
    // In one read where it fits (a view has a few dozen mounts).
    let mut points = Vec::with_capacity(64 << 10);
    std::io::Read::read_to_end(&mut std::fs::File::open(format!("/proc/{pid}/mountinfo"))?, &mut points)?;
    Ok(points.split(|b| *b == b'\n').filter_map(|l| l.split(|b| *b == b' ').nth(4)).map(unescape).collect())
}

/// Moves process `pid` (C2) into each control group of `groups` (`cgroup.procs` files). Written by
/// the keeper: its credentials are the ones the groups' files were opened with. C1 stays out: it
/// only waits, and it outlives the command while its namespaces are torn down, which would keep
/// the library from removing a group it was in.
fn join(groups: &[CString], pid: libc::pid_t) -> io::Result<()> {
    for procs in groups {
        // SAFETY: a NUL-terminated path; the descriptor is owned at once.
        let g = unsafe { owned(libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))? };
        let who = pid.to_string();
        // SAFETY: writing a live buffer.
        if unsafe { libc::write(g.as_raw_fd(), who.as_ptr().cast(), who.len()) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A path as `/proc/<pid>/mountinfo` writes it (space, tab, newline and backslash as `\ooo`).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal =
            field.get(i + 1..i + 4).filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

/// # Safety
/// `fd` is a descriptor nothing else owns, or negative (then errno is the error).
unsafe fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(OwnedFd::from_raw_fd(fd))
}

/// Fills `buf` from `fd`, waiting at most `READY_WAIT_MS` for it to turn readable.
fn read_within(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, then a read into a live buffer.
    unsafe {
        if libc::poll(&mut p, 1, READY_WAIT_MS) != 1 {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        if libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) != buf.len() as isize {
            return Err(io::Error::from_raw_os_error(libc::EPIPE));
        }
    }
    Ok(())
}

/// The prepared process (C1, then C2 in `child::enter`): what `first_process` in `keeper.rs`
/// does, but the standard streams and the control groups, which come with the command.
///
/// # Safety
/// Call only in a child the keeper just forked.
unsafe fn prepared_process(
    run: &Run,
    keeper: libc::pid_t,
    hold: &Hold,
    exec: impl FnOnce(&[CString], &[CString], RawFd) -> i32,
) -> i32 {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    if libc::getppid() != keeper {
        return 1;
    }
    // Nothing of the keeper's but what the view needs: another command's pipe held here would
    // keep that command's output open while this one waits.
    let plan = &run.plan;
    let mut keep: Vec<RawFd> = vec![hold.go, hold.ready, hold.report];
    keep.extend(plan.userns.iter().chain(&plan.trees));
    close_except(&mut keep);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    libc::setpgid(0, 0);
    // Made beside the command that runs now, on the machine that command uses: it gives way. Only
    // where the keeper may give the priority back when the command comes (root).
    if libc::geteuid() == 0 {
        libc::setpriority(libc::PRIO_PROCESS, 0, PREPARING_NICE);
    }
    // Until the command's streams come, /dev/null stands in for them (so nothing opened meanwhile
    // takes 0, 1 or 2).
    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if null < 0 || libc::dup2(null, 0) < 0 || libc::dup2(null, 1) < 0 || libc::dup2(null, 2) < 0 {
        report(hold.report, &io::Error::last_os_error());
        return 127;
    }
    if null > 2 {
        libc::close(null);
    }
    let from_c1 = match child::enter(plan, Some(hold)) {
        Ok(Some(fd)) => fd,
        Ok(None) => return 127,
        Err(e) => {
            report(hold.report, &e);
            return 127;
        }
    };
    // C2, hardened: ready.
    libc::write(hold.ready, [1u8].as_ptr().cast(), 1);
    libc::close(hold.ready);
    let (payload, fds) = match frame::recv(from_c1) {
        Ok(Some(f)) if f.1.len() == 3 => f,
        Ok(_) => {
            report(hold.report, &io::Error::from_raw_os_error(libc::EBADF));
            return 127;
        }
        Err(e) => {
            report(hold.report, &e);
            return 127;
        }
    };
    libc::close(from_c1);
    for (i, f) in fds.iter().enumerate() {
        if libc::dup2(f.as_raw_fd(), i as libc::c_int) < 0 {
            report(hold.report, &io::Error::last_os_error());
            return 127;
        }
    }
    drop(fds);
    match wire::read_go(&payload) {
        Ok((argv, env)) => exec(&argv, &env, hold.report),
        Err(e) => {
            report(hold.report, &e);
            127
        }
    }
}

/// C1 of a prepared command (from `child::enter`): sends C2's process id, waits for the command
/// (the keeper has moved both into its control groups), hands it to C2, then waits for C2, sends
/// its wait status (every process of the command has ended) and exits as it did, which tears
/// down the namespaces. Ends here when the keeper drops it.
///
/// # Safety
/// Call only in C1.
pub unsafe fn hold(h: &Hold, to_c2: RawFd, c2: libc::pid_t) -> ! {
    let mut keep = [h.go, to_c2];
    close_except(&mut keep);
    let pid = c2.to_ne_bytes();
    if libc::write(h.go, pid.as_ptr().cast(), 4) != 4 {
        libc::_exit(1);
    }
    let (payload, fds) = match frame::recv(h.go) {
        Ok(Some(f)) if f.1.len() == 3 => f,
        _ => libc::_exit(1),
    };
    let streams: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
    if frame::send(to_c2, &payload, &streams).is_err() {
        libc::_exit(1);
    }
    drop(fds);
    let mut keep = [h.go];
    close_except(&mut keep);
    let mut status = 0;
    while libc::waitpid(c2, &mut status, 0) < 0 {
        if *libc::__errno_location() != libc::EINTR {
            libc::_exit(126);
        }
    }
    libc::write(h.go, status.to_ne_bytes().as_ptr().cast(), 4);
    child::exit_like(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_point_reads_back_as_the_kernel_escaped_it() {
        assert_eq!(unescape(br"/home/a\040b/.git"), b"/home/a b/.git");
        assert_eq!(unescape(br"/x\134y\011z"), b"/x\\y\tz");
        // Not an escape: kept as it is.
        assert_eq!(unescape(br"/a\9b\04"), br"/a\9b\04");
    }

    #[test]
    fn statx_tells_a_mount_point_from_a_directory_below_one() {
        let open = |p: &std::ffi::CStr| {
            // SAFETY: a NUL-terminated path; the descriptor is owned at once.
            unsafe { owned(libc::open(p.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)) }.unwrap()
        };
        // /proc is a mount point wherever this runs; /proc/self/fd lies below it.
        let (point, below) = (open(c"/proc"), open(c"/proc/self/fd"));
        match (mount_root(point.as_raw_fd()), mount_root(below.as_raw_fd())) {
            (None, None) => eprintln!("skipped: this kernel's statx does not say what is a mount point (before 5.8)"),
            said => assert_eq!(said, (Some(true), Some(false))),
        }
        // And /proc/<pid>/mountinfo, where statx cannot say, names it.
        let points = mount_points(std::process::id() as libc::pid_t).unwrap();
        assert!(points.contains(b"/proc".as_slice()), "{points:?}");
    }
}
