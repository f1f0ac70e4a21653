//! What runs in a command's process between the keeper's fork and the command's exec. The plan
//! (`Plan`) is prepared by the library in Node and sent to the keeper (`wire.rs`); the child makes
//! raw syscalls on it.
//!
//! The child (C1) enters a user namespace when it is not root, then new mount, pid, net, ipc and
//! uts namespaces, and forks C2, the pid namespace's init, which sets up the view and execs the
//! command; C1 closes every descriptor, waits for C2 and exits with its status. When C2 dies, the
//! kernel kills every process of the namespace, so nothing a command started outlives it.
//!
//! C2's view: the host's tree read-only (`mount_setattr(AT_RECURSIVE, RDONLY)`), a fresh /proc,
//! a minimal /dev (null, zero, full, random, urandom, tty copied from the host with `open_tree`
//! and attached with `move_mount`), a private /tmp,
//! the `hide` paths empty (a tmpfs, or /dev/null over a file), the working directory read-write at
//! the same path (and the `writable` paths), the `protect` paths read-only again inside it. Then loopback up, the rlimits,
//! `PR_SET_NO_NEW_PRIVS`, Landlock where the kernel has it (`landlock.rs`) and the seccomp filter.

use std::ffi::{CStr, CString};
use std::io;

use crate::forward;

/// The resource argument of `setrlimit`: glibc has its own enum type, musl a plain `int`.
#[cfg(target_env = "gnu")]
pub type RlimitResource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
pub type RlimitResource = libc::c_int;

/// Everything the child needs, prepared before the fork.
#[derive(Default)]
pub struct Plan {
    /// Not root: a new user namespace mapping the host user to itself.
    pub user_ns: bool,
    /// Root: the user namespace the command enters (`userns.rs`), whose root is `hostUid`.
    pub userns: Option<libc::c_int>,
    /// Root: the writable trees, already detached, idmapped and `nosuid,nodev` by the parent
    /// (one per `writable` entry, in order); empty otherwise, and the child copies them itself.
    pub trees: Vec<libc::c_int>,
    /// Each writable tree's (device, inode), taken by the parent through a path with no symlink:
    /// the child attaches only that directory, at that directory (a symlink an earlier command
    /// planted cannot redirect either).
    pub writable_ids: Vec<(u64, u64)>,
    /// Per writable tree: whether a tmpfs of the view covers it (its path is made again there).
    pub writable_covered: Vec<bool>,
    /// Directories between a writable tree and a protected or hidden path inside it, bound onto
    /// themselves: a mount point cannot be renamed, so a command cannot carry the path away
    /// from where the next run looks for it.
    pub pins: Vec<CString>,
    /// `/proc/self/uid_map` and `gid_map` contents (user namespace only).
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    /// The host's device nodes the command gets (`/dev/null`, …), bound at the same paths.
    pub devices: Vec<CString>,
    pub cwd: CString,
    /// The trees bound read-write at their own paths: the request's mount first, then `writable`.
    pub writable: Vec<CString>,
    /// The directories to create (parents first) so a writable tree can be bound where a tmpfs
    /// hid it.
    pub writable_parents: Vec<CString>,
    pub protect: Vec<CString>,
    pub hide_dirs: Vec<CString>,
    pub hide_files: Vec<CString>,
    /// Hidden paths inside a writable tree: covered after the tree is attached.
    pub hide_inner_dirs: Vec<CString>,
    pub hide_inner_files: Vec<CString>,
    /// (resource, soft, hard) for `setrlimit`.
    pub rlimits: Vec<(RlimitResource, libc::rlim_t, libc::rlim_t)>,
    /// A memory control group's `cgroup.procs` to join.
    pub memory_procs: Option<CString>,
    /// The seccomp programs, installed in order (built by the library with `seccompiler`).
    pub seccomp: Vec<Vec<libc::sock_filter>>,
    /// `network: { allow }` with a broker: the broker's port on the host's 127.0.0.1, served at
    /// the same address inside (`forward.rs`).
    pub forward: Option<u16>,
    /// A session's command: it stays in the keeper's network namespace (the session's, shared by
    /// all its commands) instead of making its own.
    pub shared_net: bool,
    /// A session's command: `/tmp` is the session's (a writable tree), not a new tmpfs.
    pub session_tmp: bool,
    /// The Landlock layer, where the kernel has it.
    pub landlock: Option<crate::landlock::Plan>,
    /// `changes: 'overlay'`: a directory (a descriptor; as root an idmapped tree) holding `upper`
    /// and `work`. The request's mount is then an overlay: the host's tree below, read-only to
    /// the overlay, and what the command writes, makes and deletes lands in `upper` only.
    pub layer: Option<libc::c_int>,
    /// The layer directory's path: without a user namespace of the parent's, the child copies
    /// the layer's mount from there (checked to be the same directory).
    pub layer_dir: CString,
    /// Below the command's own layer, the layers of earlier commands whose changes are pending
    /// (newest first): their `upper` directories are the overlay's upper lower layers, above the
    /// host's tree. Descriptors as `layer`, and their paths as `layer_dir`.
    pub lowers: Vec<libc::c_int>,
    pub lower_dirs: Vec<CString>,
    /// A command in a running container (`container.rs`): every field above but `cwd`,
    /// `rlimits` and `seccomp` is unused.
    pub container: Option<crate::container::Container>,
}

fn check(r: libc::c_long) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn mount(
    src: *const libc::c_char,
    target: &CStr,
    fstype: *const libc::c_char,
    flags: libc::c_ulong,
    data: *const libc::c_char,
) -> io::Result<()> {
    // SAFETY: NUL-terminated strings (or null pointers) prepared before the fork.
    check(unsafe { libc::mount(src, target.as_ptr(), fstype, flags, data.cast()) } as libc::c_long)
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
pub const MOUNT_ATTR_IDMAP: u64 = 0x10_0000;
const AT_RECURSIVE: libc::c_int = 0x8000;
/// What every mount of the view but the device nodes carries.
const SAFE: u64 = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/// Sets `set` on a detached tree's top mount (with `recursive`, on all of them), with `userns`
/// for `MOUNT_ATTR_IDMAP`.
pub fn mount_setattr_fd(fd: libc::c_int, set: u64, userns: u64, recursive: bool) -> io::Result<()> {
    let attr = MountAttr { attr_set: set, attr_clr: 0, propagation: 0, userns_fd: userns };
    // SAFETY: an empty NUL-terminated path and a mount_attr of the size given.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH | if recursive { AT_RECURSIVE } else { 0 },
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// Sets read-only (with `on`, else clears it) and `nosuid,nodev` on `path`'s mount, and with
/// `recursive` on every mount below it.
fn read_only(path: &CStr, on: bool, recursive: bool) -> io::Result<()> {
    set_attr(path, if on { MOUNT_ATTR_RDONLY | SAFE } else { SAFE }, if on { 0 } else { MOUNT_ATTR_RDONLY }, recursive)
}

fn set_attr(path: &CStr, set: u64, clear: u64, recursive: bool) -> io::Result<()> {
    let attr = MountAttr { attr_set: set, attr_clr: clear, propagation: 0, userns_fd: 0 };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a NUL-terminated path and a mount_attr of the size given.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// Writes `data` to `path` with raw syscalls.
pub fn write_file(path: &CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; raw syscalls only.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        libc::close(fd);
        if n != data.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn touch(path: &CStr) -> io::Result<()> {
    // SAFETY: a NUL-terminated path.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC, 0o666);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        libc::close(fd);
    }
    Ok(())
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// A directory opened `O_PATH` through a path with no symbolic link in any component.
pub fn open_dir_nofollow(path: &CStr) -> io::Result<libc::c_int> {
    open_path_nofollow(path, libc::O_DIRECTORY)
}

/// `path` opened `O_PATH` (with `flags`), through no symbolic link in any component, the last
/// included.
pub fn open_path_nofollow(path: &CStr, flags: libc::c_int) -> io::Result<libc::c_int> {
    open_nofollow_at(libc::AT_FDCWD, path, flags, 0)
}

/// `path` opened `O_PATH` as another process sees it: `root` is its `/proc/<pid>/root`, and
/// `path` is resolved there as `/`, through no symbolic link.
pub fn open_path_in(root: libc::c_int, path: &CStr) -> io::Result<libc::c_int> {
    const RESOLVE_IN_ROOT: u64 = 0x10;
    open_nofollow_at(root, path, 0, RESOLVE_IN_ROOT)
}

fn open_nofollow_at(dir: libc::c_int, path: &CStr, flags: libc::c_int, resolve: u64) -> io::Result<libc::c_int> {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW | flags) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | resolve,
    };
    // SAFETY: a NUL-terminated path and an open_how of the size given.
    let fd = unsafe {
        libc::syscall(libc::SYS_openat2, dir, path.as_ptr(), &how as *const OpenHow, std::mem::size_of::<OpenHow>())
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd as libc::c_int)
}

/// Whether `path` from `dir` (an empty path: `dir` itself; a link is not followed) has the
/// `statx` attribute `bit` (a `STATX_ATTR_*`); `None` where the call fails or the kernel does not
/// say for that attribute.
pub fn statx_attribute(dir: libc::c_int, path: &CStr, bit: u64) -> Option<bool> {
    // `struct statx`: 256 bytes, `stx_attributes` at byte 8, `stx_attributes_mask` at byte 56
    // (read by offset: musl's headers, and so the libc crate there, do not all declare it).
    let mut buf = [0u64; 32];
    let flags = libc::AT_SYMLINK_NOFOLLOW | if path.is_empty() { libc::AT_EMPTY_PATH } else { 0 };
    // SAFETY: a NUL-terminated path and a 256-byte, 8-aligned buffer for the kernel to fill.
    let r =
        unsafe { libc::syscall(libc::SYS_statx, dir, path.as_ptr(), flags, libc::STATX_BASIC_STATS, buf.as_mut_ptr()) };
    if r != 0 || buf[7] & bit == 0 {
        return None;
    }
    Some(buf[1] & bit != 0)
}

/// The (device, inode) of what `fd` is open on.
pub fn identity(fd: libc::c_int) -> io::Result<(u64, u64)> {
    // SAFETY: a zeroed stat filled by fstat on a descriptor of ours.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((st.st_dev as u64, st.st_ino as u64))
    }
}

fn exists(path: &CStr) -> bool {
    // SAFETY: a NUL-terminated path.
    unsafe { libc::access(path.as_ptr(), libc::F_OK) == 0 }
}

/// Whether `path` is a directory and not a symlink to one.
fn is_real_dir(path: &CStr) -> bool {
    // SAFETY: a zeroed stat filled by lstat on a NUL-terminated path.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::lstat(path.as_ptr(), &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFDIR
    }
}

/// The capabilities a command keeps when the sandbox runs as root (Docker's default set less
/// CAP_MKNOD and CAP_NET_RAW): enough to own and write files, never to reach devices, mounts,
/// other processes' memory, the clock or the kernel.
const KEPT_CAPS: [u32; 11] = [0, 1, 3, 4, 5, 6, 7, 8, 10, 18, 29]; // chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap, net_bind_service, sys_chroot, audit_write

/// Drops every other capability from the bounding set, so the command's exec gets none of them.
fn drop_capabilities() -> io::Result<()> {
    for cap in 0..64u32 {
        if KEPT_CAPS.contains(&cap) {
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
    Ok(())
}

/// Brings the new network namespace's loopback interface up.
pub fn loopback_up() -> io::Result<()> {
    // SAFETY: a zeroed ifreq with a NUL-terminated name; raw socket and ioctl calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        req.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        // The request's type is the C library's (`c_ulong` in glibc, `c_int` in musl).
        let r = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req);
        libc::close(fd);
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

const NONE: *const libc::c_char = std::ptr::null();
pub(crate) const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Exits with `status` (a wait status): the same code, or death by the same signal, so the caller
/// sees what ended the command.
///
/// # Safety
/// Raw syscalls only; call in C1.
pub(crate) unsafe fn exit_like(status: libc::c_int) -> ! {
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    let sig = libc::WTERMSIG(status);
    libc::signal(sig, libc::SIG_DFL);
    libc::kill(libc::getpid(), sig);
    libc::_exit(128 + sig);
}

/// The pre-exec step. Returns in C2 (which then execs the command); C1 never returns. With
/// `hold` (a prepared command, `prepared.rs`), C1 waits for the command and C2 gets back the
/// socket it comes on.
pub fn enter(plan: &Plan, hold: Option<&crate::prepared::Hold>) -> io::Result<Option<libc::c_int>> {
    if let Some(c) = &plan.container {
        return crate::container::enter(plan, c).map(|()| None);
    }
    // SAFETY: raw syscall.
    let parent = unsafe { libc::getppid() };
    if let Some(procs) = &plan.memory_procs {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd >= 0 {
            // SAFETY: a valid descriptor and a one-byte buffer.
            unsafe {
                libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
            }
        }
    }
    if let Some(ns) = plan.userns {
        // Root: no supplementary group (root's would follow the command), into the namespace,
        // and become its root — host `hostUid`, owner of nothing of the host's root.
        // SAFETY: raw syscalls.
        unsafe {
            check(libc::syscall(libc::SYS_setgroups, 0usize, std::ptr::null::<libc::gid_t>()))?;
            check(libc::setns(ns, libc::CLONE_NEWUSER) as libc::c_long)?;
            check(libc::syscall(libc::SYS_setresgid, 0u32, 0u32, 0u32))?;
            check(libc::syscall(libc::SYS_setresuid, 0u32, 0u32, 0u32))?;
        }
    } else if plan.user_ns {
        // SAFETY: raw syscall.
        check(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as libc::c_long)?;
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &plan.uid_map)?;
        write_file(c"/proc/self/gid_map", &plan.gid_map)?;
    }
    // A change of credentials clears the parent-death signal (the keeper's, set before): set it
    // again, and end here if the keeper is already gone.
    // SAFETY: raw syscalls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
    // With a forwarder, C1 stays in the host's network namespace and C2 makes the new one.
    let net = if plan.forward.is_some() || plan.shared_net { 0 } else { libc::CLONE_NEWNET };
    let flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | net | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
    // SAFETY: raw syscall.
    check(unsafe { libc::unshare(flags) } as libc::c_long)?;
    let mut pair = [-1; 2];
    if plan.forward.is_some() || hold.is_some() {
        // SAFETY: a two-element array for the pair.
        check(
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr()) }
                as libc::c_long,
        )?;
    }
    // SAFETY: fork in a single-threaded child; the parent branch below only makes raw syscalls.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        // C1: hold nothing open (the command's pipes end when C2's copies close) but its end of
        // the pair, relay or wait, report.
        // SAFETY: raw syscalls; exit_like never returns.
        unsafe {
            match plan.forward {
                Some(port) => {
                    let keep = pair[0] as u32;
                    if keep > 0 {
                        libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32);
                    }
                    libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
                    let listener = forward::recv_fd(pair[0]);
                    libc::close(pair[0]);
                    if let Some(l) = listener {
                        exit_like(forward::relay(l, port, pid));
                    }
                }
                None => {
                    if let Some(h) = hold {
                        libc::close(pair[1]);
                        crate::prepared::hold(h, pair[0], pid);
                    }
                    libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
                }
            }
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 {
                if *libc::__errno_location() != libc::EINTR {
                    libc::_exit(126);
                }
            }
            exit_like(status)
        }
    }
    // C2: the namespace's init.
    // SAFETY: raw syscall; when the command's parent C1 dies, C2 is killed too.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    if plan.forward.is_some() {
        // SAFETY: raw syscalls on our own descriptor.
        unsafe { libc::close(pair[0]) };
        check(unsafe { libc::unshare(libc::CLONE_NEWNET) } as libc::c_long)?;
    }
    if let Some(h) = hold {
        // SAFETY: C1's ends, not needed here.
        unsafe {
            libc::close(pair[0]);
            libc::close(h.go);
        }
    }
    // A session's namespace is the keeper's, its loopback already up.
    if !plan.shared_net {
        loopback_up()?;
    }
    if let Some(port) = plan.forward {
        let listener = forward::listen(port)?;
        forward::send_fd(pair[1], listener)?;
        // SAFETY: our own descriptors.
        unsafe {
            libc::close(listener);
            libc::close(pair[1]);
        }
    }
    view(plan)?;
    // SAFETY: a NUL-terminated literal.
    unsafe { libc::sethostname(b"corral".as_ptr().cast(), 6) };
    // Node ignores SIGXFSZ, and an ignored signal stays ignored across exec: the file size limit
    // would turn into a quiet EFBIG instead of stopping the command.
    // SAFETY: resetting a disposition to its default.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_DFL) };
    for &(resource, soft, hard) in &plan.rlimits {
        let lim = libc::rlimit { rlim_cur: soft, rlim_max: hard };
        // SAFETY: a valid rlimit.
        check(unsafe { libc::setrlimit(resource, &lim) } as libc::c_long)?;
    }
    // SAFETY: raw syscalls.
    check(unsafe { libc::chdir(plan.cwd.as_ptr()) } as libc::c_long)?;
    // A session of its own: no controlling terminal to type into or take over.
    // SAFETY: raw syscall (C2 is not a process group leader, so this cannot fail).
    unsafe { libc::setsid() };
    // No descriptor the host process left without CLOEXEC reaches the command.
    // SAFETY: raw syscall; 3.. keeps stdio.
    unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    drop_capabilities()?;
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } as libc::c_long)?;
    if let Some(l) = &plan.landlock {
        l.apply(&plan.writable, &plan.devices)?;
    }
    for prog in &plan.seccomp {
        install_filter(prog)?;
    }
    Ok(hold.map(|_| pair[1]))
}

/// Installs one seccomp program (`SECCOMP_SET_MODE_FILTER`, as `seccompiler::apply_filter`).
pub(crate) fn install_filter(prog: &[libc::sock_filter]) -> io::Result<()> {
    // BPF_MAXINSNS: the kernel's limit, and what fits the 16-bit length below.
    if prog.is_empty() || prog.len() > 4096 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let fprog = libc::sock_fprog { len: prog.len() as libc::c_ushort, filter: prog.as_ptr() as *mut libc::sock_filter };
    // SAFETY: a sock_fprog over a live slice; the kernel copies it.
    check(unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0u32, &fprog as *const libc::sock_fprog)
    })
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// The most device nodes a plan names.
const MAX_DEVICES: usize = 8;
/// The most writable trees a plan names.
pub const MAX_WRITABLE: usize = 16;

/// A detached copy of the mount tree at `path` (this namespace's), to attach elsewhere later.
pub fn clone_tree(path: &CStr, recursive: bool) -> io::Result<libc::c_int> {
    clone_tree_at(libc::AT_FDCWD, path, recursive)
}

/// `clone_tree` of `path` from the directory `dir` (an empty path: `dir` itself, which may be
/// a tree of another mount namespace's).
pub fn clone_tree_at(dir: libc::c_int, path: &CStr, recursive: bool) -> io::Result<libc::c_int> {
    let mut flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | if recursive { AT_RECURSIVE as libc::c_uint } else { 0 };
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH as libc::c_uint;
    }
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dir, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd as libc::c_int)
}

/// Attaches a detached tree at `target`.
pub fn attach(tree: libc::c_int, target: &CStr) -> io::Result<()> {
    // SAFETY: a descriptor from open_tree and NUL-terminated paths.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(tree) };
    check(r)
}

const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;

/// Attaches a detached tree on the directory `at` is open on; closes both.
fn attach_at(tree: libc::c_int, at: libc::c_int) -> io::Result<()> {
    // SAFETY: descriptors of ours and empty NUL-terminated paths.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            at,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    // SAFETY: closing our own descriptors.
    unsafe {
        libc::close(tree);
        libc::close(at);
    }
    check(r)
}

/// Makes every mount of this namespace private: nothing done here propagates back.
pub fn make_private() -> io::Result<()> {
    mount(NONE, c"/", NONE, libc::MS_REC | libc::MS_PRIVATE, NONE)
}

/// Mounts an overlay on `at` (the request's mount, attached above): `at` as it is below, the
/// layer's `upper` and `work` above. Every path goes through a descriptor, so nothing in a path
/// (a `:` or `,`, a link planted since) can change what is mounted. Unprivileged overlays keep
/// their whiteouts' and opaque directories' marks in `user.overlay.*` (`userxattr`).
fn overlay(at: &CStr, layer: libc::c_int, lowers: &[libc::c_int]) -> io::Result<()> {
    // The view made every mount read-only, the layer's too.
    let attr = MountAttr { attr_set: 0, attr_clr: MOUNT_ATTR_RDONLY, propagation: 0, userns_fd: 0 };
    // SAFETY: an empty NUL-terminated path and a mount_attr of the size given.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            layer,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    let lower = open_dir_nofollow(at)?;
    let pending: String = lowers.iter().map(|l| format!("/proc/self/fd/{l}/upper:")).collect();
    let data = format!(
        "lowerdir={pending}/proc/self/fd/{lower},upperdir=/proc/self/fd/{layer}/upper,workdir=/proc/self/fd/{layer}/work,userxattr"
    );
    let data = CString::new(data).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let kind = c"overlay";
    let r = mount(kind.as_ptr(), at, kind.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, data.as_ptr());
    // SAFETY: our own descriptor.
    unsafe { libc::close(lower) };
    r
}

/// The layer directory `fd` is open on, as a detached tree to attach later: `fd` itself where it
/// is one (as root, idmapped by the parent), else a copy of `path` taken now, before anything
/// covers it (checked to be the same directory).
fn layer_tree(fd: libc::c_int, path: &CStr, detached: bool) -> io::Result<(libc::c_int, (u64, u64))> {
    let id = identity(fd)?;
    let tree = if detached { fd } else { clone_tree(path, false)? };
    if identity(tree)? != id {
        // SAFETY: our own descriptor.
        unsafe { libc::close(tree) };
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    Ok((tree, id))
}

/// Where layer `i` is attached while the overlay is made (0: the command's own, then the pending
/// ones): in the view's own /tmp, which the command's user owns (no host directory on the way to
/// search), removed again after.
fn layer_at(i: usize) -> io::Result<CString> {
    CString::new(format!("/tmp/.corral-layer-{i}")).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Attaches a layer's tree at `at` (an overlay's layers must be mounts of this namespace) and
/// opens it there.
fn attach_layer(tree: libc::c_int, id: (u64, u64), at: &CStr) -> io::Result<libc::c_int> {
    // SAFETY: a NUL-terminated path.
    check(unsafe { libc::mkdir(at.as_ptr(), 0o700) } as libc::c_long)?;
    attach(tree, at)?;
    let own = open_dir_nofollow(at)?;
    if identity(own)? != id {
        // SAFETY: our own descriptor.
        unsafe { libc::close(own) };
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    Ok(own)
}

/// The filesystem the command sees.
fn view(plan: &Plan) -> io::Result<()> {
    let root = c"/";
    let (tmp, proc_, dev) = (c"/tmp", c"/proc", c"/dev");
    let tmpfs = c"tmpfs";
    // Nothing done here propagates back to the host.
    make_private()?;
    // Copies of what will be covered (the working directory, the device nodes), taken before
    // anything is covered: a bind from the parent's namespace is not allowed, a copy of ours is.
    let mut trees = [-1; MAX_WRITABLE];
    if plan.trees.is_empty() {
        for ((slot, w), id) in trees.iter_mut().zip(&plan.writable).zip(&plan.writable_ids) {
            *slot = clone_tree(w, true)?;
            // The path led elsewhere than the directory the parent checked: refuse.
            if identity(*slot)? != *id {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            mount_setattr_fd(*slot, SAFE, 0, true)?;
        }
    } else {
        for (slot, t) in trees.iter_mut().zip(&plan.trees) {
            *slot = *t;
        }
    }
    let layer = match plan.layer {
        Some(fd) => Some(layer_tree(fd, &plan.layer_dir, !plan.trees.is_empty())?),
        None => None,
    };
    let mut lowers = Vec::with_capacity(plan.lowers.len());
    for (fd, dir) in plan.lowers.iter().zip(&plan.lower_dirs) {
        lowers.push(layer_tree(*fd, dir, !plan.trees.is_empty())?);
    }
    let mut devices = [-1; MAX_DEVICES];
    for (slot, dev) in devices.iter_mut().zip(&plan.devices) {
        *slot = clone_tree(dev, false)?;
    }
    read_only(root, true, true)?;
    // A private /tmp, a minimal /dev, a fresh /proc.
    if !plan.session_tmp {
        mount(tmpfs.as_ptr(), tmp, tmpfs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, c"mode=1777".as_ptr())?;
    }
    // A read-only mount does not stop connect() on a unix socket: the host's sockets (the session
    // bus, a Docker socket, agents) live under /run, which is new and empty inside.
    for run in [c"/run", c"/var/run"] {
        if is_real_dir(run) {
            mount(tmpfs.as_ptr(), run, tmpfs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, c"mode=755".as_ptr())?;
        }
    }
    mount(
        tmpfs.as_ptr(),
        dev,
        tmpfs.as_ptr(),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        c"mode=755".as_ptr(),
    )?;
    for (tree, target) in devices.iter().zip(&plan.devices) {
        touch(target)?;
        mount_setattr_fd(*tree, MOUNT_ATTR_NOSUID, 0, false)?;
        attach(*tree, target)?;
    }
    // SAFETY: NUL-terminated literals.
    unsafe {
        libc::symlink(c"/proc/self/fd".as_ptr(), c"/dev/fd".as_ptr());
        libc::symlink(c"/proc/self/fd/0".as_ptr(), c"/dev/stdin".as_ptr());
        libc::symlink(c"/proc/self/fd/1".as_ptr(), c"/dev/stdout".as_ptr());
        libc::symlink(c"/proc/self/fd/2".as_ptr(), c"/dev/stderr".as_ptr());
    }
    // Hidden paths look empty; they stay writable until the cwd is in place below them.
    for d in &plan.hide_dirs {
        mount(tmpfs.as_ptr(), d, tmpfs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, c"mode=755".as_ptr())?;
    }
    for f in &plan.hide_files {
        mount(c"/dev/null".as_ptr(), f, NONE, libc::MS_BIND, NONE)?;
    }
    // The working directory and the writable paths, read-write at their own paths (made again
    // where a tmpfs covers them).
    for p in &plan.writable_parents {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::mkdir(p.as_ptr(), 0o755) };
    }
    for (i, (tree, target)) in trees.iter().zip(&plan.writable).enumerate() {
        let at = open_dir_nofollow(target)?;
        let same =
            plan.writable_covered.get(i) == Some(&true) || identity(at).ok() == plan.writable_ids.get(i).copied();
        if !same {
            // SAFETY: our own descriptor.
            unsafe { libc::close(at) };
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        attach_at(*tree, at)?;
    }
    if let (Some((tree, id)), Some(mount)) = (layer, plan.writable.first()) {
        let mut attached = vec![(attach_layer(tree, id, &layer_at(0)?)?, layer_at(0)?)];
        for (i, (tree, id)) in lowers.into_iter().enumerate() {
            let at = layer_at(i + 1)?;
            attached.push((attach_layer(tree, id, &at)?, at));
        }
        let below: Vec<libc::c_int> = attached[1..].iter().map(|(fd, _)| *fd).collect();
        overlay(mount, attached[0].0, &below)?;
        // The overlay holds its own copies of the layers' mounts.
        for (fd, at) in attached {
            // SAFETY: our own descriptor and NUL-terminated paths.
            unsafe {
                libc::close(fd);
                libc::umount2(at.as_ptr(), libc::MNT_DETACH);
                libc::rmdir(at.as_ptr());
            }
        }
    }
    for p in &plan.pins {
        mount(p.as_ptr(), p, NONE, libc::MS_BIND | libc::MS_REC, NONE)?;
        set_attr(p, SAFE, 0, true)?;
    }
    for d in &plan.hide_inner_dirs {
        mount(tmpfs.as_ptr(), d, tmpfs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, c"mode=755".as_ptr())?;
        read_only(d, true, false)?;
    }
    for f in &plan.hide_inner_files {
        mount(c"/dev/null".as_ptr(), f, NONE, libc::MS_BIND, NONE)?;
    }
    for p in &plan.protect {
        mount(p.as_ptr(), p, NONE, libc::MS_BIND | libc::MS_REC, NONE)?;
        read_only(p, true, true)?;
    }
    for d in &plan.hide_dirs {
        read_only(d, true, false)?;
    }
    mount(c"proc".as_ptr(), proc_, c"proc".as_ptr(), libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, NONE)?;
    // The kernel's knobs stay out of reach even where a write would pass its own checks, as the
    // container runtimes mask them.
    for p in [c"/proc/sys", c"/proc/sysrq-trigger", c"/proc/irq", c"/proc/bus", c"/proc/fs"] {
        if exists(p) {
            mount(p.as_ptr(), p, NONE, libc::MS_BIND | libc::MS_REC, NONE)?;
            set_attr(p, MOUNT_ATTR_RDONLY | SAFE | MOUNT_ATTR_NOEXEC, 0, true)?;
        }
    }
    // The new network namespace's own /sys (only lo in /sys/class/net), where the kernel allows it;
    // else the host's stays, read-only.
    let _ = mount(
        c"sysfs".as_ptr(),
        c"/sys",
        c"sysfs".as_ptr(),
        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        NONE,
    );
    Ok(())
}
