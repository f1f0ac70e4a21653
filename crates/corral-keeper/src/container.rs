//! A command started in a running container (a harness session's Docker container, as root with
//! the engine on this machine), each in a pid namespace of its own nested in the container's.
//!
//! The library reads, once, what the container's first process was given by its runtime (its
//! namespaces, control groups, user, groups, capabilities, LSM label, rlimits and seccomp
//! programs) and sends it with each command. C1 (the command's first process, in this machine's
//! pid namespace, already in the container's control groups) enters the container's pid
//! namespace for its children, makes a new one below it, and forks C2, that namespace's init:
//! C2 enters the container's other namespaces and takes on its first process's credentials,
//! then execs the command. C1 waits for C2 and exits with its status; C2 dies with C1 (a
//! parent-death signal), and when C2 dies the kernel kills every process of its namespace, so
//! a timeout or abort takes all of that command and nothing else, and a command sees no
//! process of another (it cannot signal them either).

use std::ffi::CString;
use std::io;

/// What a command inherits from the container's first process.
#[derive(Default, Clone)]
pub struct Container {
    /// The container's pid namespace (an index into the run's descriptors, then a descriptor).
    pub pid_ns: libc::c_int,
    /// The container's control groups (`cgroup.procs` files on this machine), joined by C1 so
    /// its limits and device rules hold for the command.
    pub cgroups: Vec<CString>,
    /// The container's other namespaces, entered in this order: (descriptor, `CLONE_NEW*`).
    pub ns: Vec<(libc::c_int, libc::c_int)>,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub umask: u32,
    /// The first process's `oom_score_adj`, which the command takes (M, its guard, takes -1000:
    /// the memory limit's killer never picks it).
    pub oom_score_adj: i32,
    /// Capability sets: bounding, inheritable, permitted, effective, ambient.
    pub caps: [u64; 5],
    /// What to write to `attr/exec` so the command's exec takes the first process's LSM label.
    pub label: Option<CString>,
}

fn check(r: libc::c_long) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAPS_V3: u32 = 0x2008_0522;

/// Takes on the container's user, groups and capabilities (bounding set first, while this
/// process may still drop from it).
fn credentials(c: &Container) -> io::Result<()> {
    let [bounding, inheritable, permitted, effective, ambient] = c.caps;
    for cap in 0..64u32 {
        if bounding & (1 << cap) != 0 {
            continue;
        }
        // SAFETY: raw syscall; EINVAL past the kernel's last capability ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(io::Error::last_os_error());
        }
    }
    let words = |set: u64| [set as u32, (set >> 32) as u32];
    let (e, p, i) = (words(effective), words(permitted), words(inheritable));
    let mut data = [CapData::default(); 2];
    for w in 0..2 {
        data[w] = CapData { effective: e[w], permitted: p[w], inheritable: i[w] };
    }
    let mut header = CapHeader { version: CAPS_V3, pid: 0 };
    // SAFETY: raw syscalls on this process's own credentials, with live arrays.
    unsafe {
        check(libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) as libc::c_long)?;
        check(libc::syscall(libc::SYS_setgroups, c.groups.len(), c.groups.as_ptr()))?;
        check(libc::syscall(libc::SYS_setresgid, c.gid, c.gid, c.gid))?;
        check(libc::syscall(libc::SYS_setresuid, c.uid, c.uid, c.uid))?;
        check(libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) as libc::c_long)?;
        check(libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, data.as_ptr()))?;
        check(libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) as libc::c_long)?;
        for cap in (0..64u32).filter(|b| ambient & (1 << b) != 0) {
            check(libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_RAISE, cap as libc::c_ulong, 0, 0)
                as libc::c_long)?;
        }
    }
    Ok(())
}

/// Forks. The parent holds nothing open but the write end of a pipe, waits for the child and
/// exits as it did (it never returns). The child dies with its parent (a parent-death signal;
/// it ends at once if the parent is already gone) and gets the pipe's read end, which reports
/// the parent gone by closing: its pid may not be visible from the child's pid namespace.
fn fork_and_wait() -> io::Result<libc::c_int> {
    let mut alive = [-1; 2];
    // SAFETY: a two-element array.
    check(unsafe { libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    // SAFETY: fork in a single-threaded child; the parent branch below only makes raw syscalls.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        // SAFETY: raw syscalls; exit_like never returns.
        unsafe {
            let keep = alive[1] as u32;
            if keep > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32);
            }
            libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 {
                if *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            crate::child::exit_like(status)
        }
    }
    // SAFETY: raw syscalls on this process's own state and descriptors.
    unsafe {
        libc::close(alive[1]);
        die_with_parent(alive[0]);
    }
    Ok(alive[0])
}

/// Sets the parent-death signal (again: a change of credentials clears it) and ends this process
/// if the parent, which holds the write end of `alive`, is already gone.
///
/// # Safety
/// Raw syscalls only.
unsafe fn die_with_parent(alive: libc::c_int) {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    let mut p = libc::pollfd { fd: alive, events: libc::POLLIN, revents: 0 };
    if libc::poll(&mut p, 1, 0) != 0 {
        libc::_exit(1);
    }
}

/// M, in the container's pid namespace: forks C2 (returned in C2) and guards it. M leaves C1's
/// process group (a kill of that group must not take M first) and waits with SIGTERM and SIGCHLD
/// blocked: SIGTERM is its parent-death signal, sent when C1 ends however it ends (killed by the
/// keeper, or with it), and M then kills C2, the command's pid namespace's init, and with it every
/// process of that namespace. C2's own parent-death signal is not enough: the command, as C2,
/// can clear it by changing its effective ids. When C2 ends first, M exits as it did.
fn fork_guarded(from_c1: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: raw syscalls on this single-threaded process's own signal state and descriptors.
    unsafe {
        libc::setsid();
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        // Set back for C2 below, before its credentials change.
        let _ = crate::child::write_file(c"/proc/self/oom_score_adj", b"-1000");
        let mut alive = [-1; 2];
        check(libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) as libc::c_long)?;
        let pid = libc::fork();
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // C2: signals as the command will have them.
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::close(alive[1]);
            libc::close(from_c1);
            die_with_parent(alive[0]);
            return Ok(alive[0]);
        }
        // M: nothing open but its two pipe ends; C1 gone before the signal was set counts too.
        let keep = [from_c1.min(alive[1]) as u32, from_c1.max(alive[1]) as u32];
        if keep[0] > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, keep[0] - 1, 0u32);
        }
        libc::syscall(libc::SYS_close_range, keep[0] + 1, keep[1] - 1, 0u32);
        libc::syscall(libc::SYS_close_range, keep[1] + 1, u32::MAX, 0u32);
        let mut p = libc::pollfd { fd: from_c1, events: libc::POLLIN, revents: 0 };
        if libc::poll(&mut p, 1, 0) != 0 {
            libc::kill(pid, libc::SIGKILL);
        }
        loop {
            let mut status = 0;
            let done = libc::waitpid(pid, &mut status, libc::WNOHANG);
            if done == pid {
                crate::child::exit_like(status);
            }
            if done < 0 && *libc::__errno_location() != libc::EINTR {
                libc::kill(pid, libc::SIGKILL);
                libc::_exit(126);
            }
            if libc::sigwaitinfo(&set, std::ptr::null_mut()) == libc::SIGTERM {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Gives C2 a mount namespace of its own whose `/proc` is its pid namespace's: a command then
/// sees, and can open, only its own processes (not the container's first process, nor other
/// commands'). The overmounts the runtime put on the container's `/proc` (its masked paths, bound
/// to `/dev/null` or an empty tmpfs, and its read-only ones, `/proc/sys` and the like) are cloned
/// first and put back on the new one in the same order, so nothing they hid shows; the
/// container's /proc itself is unmounted in this namespace.
fn own_proc() -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let points: Vec<CString> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with("/proc/"))
        .map(|p| CString::new(p.replace("\\040", " ")).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL)))
        .collect::<io::Result<_>>()?;
    // SAFETY: raw syscalls in a single-threaded process, on NUL-terminated literals.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS) as libc::c_long)?;
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) as libc::c_long)?;
    }
    let trees = points.iter().map(|p| crate::child::clone_tree(p, false)).collect::<io::Result<Vec<_>>>()?;
    // The container's /proc goes from this namespace, its overmounts with it (their copies are
    // the trees above).
    // SAFETY: a NUL-terminated literal.
    check(unsafe { libc::umount2(c"/proc".as_ptr(), libc::MNT_DETACH) } as libc::c_long)?;
    // SAFETY: NUL-terminated literals.
    check(unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    } as libc::c_long)?;
    for (tree, point) in trees.into_iter().zip(&points) {
        crate::child::attach(tree, point)?;
    }
    Ok(())
}

/// The pre-exec step of a command in a container. Returns in C2 (which then execs the command);
/// C1 and M never return.
///
/// C1 enters the container's namespaces (the pid namespace for its children): a new pid namespace
/// can only be made below the one a process lives in, so C1 forks M there, which makes the
/// command's and forks C2 in it. Neither C1 nor M is seen from the command's namespace, and
/// neither shows this machine's network or mounts through its `/proc` entries.
pub fn enter(plan: &crate::child::Plan, c: &Container) -> io::Result<()> {
    // Not dumpable (inherited by the processes below until the command's exec): M keeps this
    // machine's root and every capability, and nothing in the container may read its `/proc`
    // entries (its root, its descriptors).
    // SAFETY: raw syscall.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } as libc::c_long)?;
    // After any group the run joined: these are the container's, in every hierarchy it has.
    for procs in &c.cgroups {
        crate::child::write_file(procs, b"0")?;
    }
    // Through this machine's /proc, before the container's mount namespace hides it; kept across
    // the forks, it applies at C2's exec.
    if let Some(label) = &c.label {
        crate::child::write_file(c"/proc/thread-self/attr/exec", label.as_bytes())?;
    }
    // SAFETY: raw syscalls on descriptors the run carried, in a single-threaded process.
    unsafe {
        check(libc::setns(c.pid_ns, libc::CLONE_NEWPID) as libc::c_long)?;
        for &(fd, kind) in &c.ns {
            check(libc::setns(fd, kind) as libc::c_long)?;
        }
    }
    let from_c1 = fork_and_wait()?;
    // M, in the container's pid namespace.
    // SAFETY: raw syscall in a single-threaded process.
    check(unsafe { libc::unshare(libc::CLONE_NEWPID) } as libc::c_long)?;
    let alive = fork_guarded(from_c1)?;
    // C2: the command's pid namespace's init.
    crate::child::write_file(c"/proc/self/oom_score_adj", c.oom_score_adj.to_string().as_bytes())?;
    own_proc()?;
    // SAFETY: resetting a disposition to its default (see `child::enter`), and the mask.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
        libc::umask(c.umask as libc::mode_t);
    }
    for &(resource, soft, hard) in &plan.rlimits {
        let lim = libc::rlimit { rlim_cur: soft, rlim_max: hard };
        // SAFETY: a valid rlimit.
        check(unsafe { libc::setrlimit(resource, &lim) } as libc::c_long)?;
    }
    // SAFETY: raw syscalls: a session of its own (no terminal), and no descriptor but stdio (and
    // the pipe, close-on-exec) reaches the command.
    unsafe {
        libc::setsid();
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, crate::child::CLOSE_RANGE_CLOEXEC);
    }
    credentials(c)?;
    // SAFETY: raw syscalls on our own state and descriptor.
    unsafe {
        die_with_parent(alive);
        libc::close(alive);
    }
    // As the container's user, in the container's mount namespace.
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::chdir(plan.cwd.as_ptr()) } as libc::c_long)?;
    // SAFETY: raw syscall.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)?;
    // The oldest program first, as the container's runtime installed them.
    for prog in &plan.seccomp {
        crate::child::install_filter(prog)?;
    }
    Ok(())
}
