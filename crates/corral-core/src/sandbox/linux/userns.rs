//! When the host process is root, the command must still get no host-root power. Dropping
//! capabilities is not enough: a process whose uid is host 0 owns every root-owned file (a 0600
//! key, a root-only socket, a sysctl under `/proc/sys`) without any capability. So the command
//! runs in a user namespace whose root is an unprivileged host user (`hostUid`, default 65534),
//! and the writable trees are *idmapped* mounts through that namespace: on disk, root-owned files
//! stay root-owned and the command owns them; everything else of the host's root is, to the
//! command, a file of an unmapped owner it cannot touch.
//!
//! Both pieces are made here, in the parent, where errors can be told in words: the namespace
//! once per sandbox (a descriptor keeps it alive), the idmapped trees once per run (detached
//! mounts the child attaches). Only the child's `setns` and `setresuid` happen after the fork.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use corral_keeper::child::{mount_setattr_fd, MOUNT_ATTR_IDMAP, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID};

fn last() -> io::Error {
    io::Error::last_os_error()
}

fn write_proc(pid: libc::pid_t, name: &str, data: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/{pid}/{name}"), data)
}

/// A user namespace mapping its uid 0 and gid 0 to host `uid` and `gid` (one id each), held open
/// by the returned descriptor. Made by a throwaway child that enters it and waits while this
/// process, root in the parent namespace, writes its maps.
pub(super) fn make(uid: u32, gid: u32) -> io::Result<OwnedFd> {
    let mut gate = [-1; 2];
    // SAFETY: a two-element array for the pipe.
    if unsafe { libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(last());
    }
    // SAFETY: the child only makes raw syscalls and exits; a clone with no new stack behaves as
    // fork.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid == 0 {
        // SAFETY: raw syscalls on our own descriptors; waits until the parent closes the gate.
        // Every other descriptor is closed first: a copy of another thread's gate held here would
        // keep that gate from ever closing.
        unsafe {
            let keep = gate[0] as libc::c_uint;
            if keep > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, keep - 1, 0u32);
            }
            libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0u32);
            let mut b = 0u8;
            // A signal (Node's handlers are inherited) must not end the wait early.
            while libc::read(gate[0], (&mut b as *mut u8).cast(), 1) < 0 && *libc::__errno_location() == libc::EINTR {}
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the read end.
    unsafe { libc::close(gate[0]) };
    // SAFETY: the write end is ours; dropping it releases the child.
    let release = unsafe { OwnedFd::from_raw_fd(gate[1]) };
    if pid < 0 {
        return Err(last());
    }
    let pid = pid as libc::pid_t;
    let result = (|| {
        write_proc(pid, "uid_map", &format!("0 {uid} 1"))?;
        write_proc(pid, "setgroups", "deny")?;
        write_proc(pid, "gid_map", &format!("0 {gid} 1"))?;
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok(OwnedFd::from(ns))
    })();
    drop(release);
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    result
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// A detached copy of the mount tree at the directory `dir` is open on, `nosuid,nodev`, and
/// idmapped through `userns` when given: what the child attaches as a writable tree.
pub(super) fn tree(dir: libc::c_int, userns: Option<&OwnedFd>) -> io::Result<OwnedFd> {
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: a descriptor of the caller's and an empty NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_open_tree, dir, c"".as_ptr(), flags) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a descriptor open_tree just gave us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    mount_setattr_fd(fd.as_raw_fd(), MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, true)?;
    if let Some(u) = userns {
        // Every mount of the tree where they all support it; else the tree's own file system
        // only (a mount below it, say a container engine's overlay, then stays unmapped: its
        // root-owned files are the command's to read, not to write).
        let ns = u.as_raw_fd() as u64;
        mount_setattr_fd(fd.as_raw_fd(), MOUNT_ATTR_IDMAP, ns, true)
            .or_else(|_| mount_setattr_fd(fd.as_raw_fd(), MOUNT_ATTR_IDMAP, ns, false))?;
    }
    Ok(fd)
}

/// Whether an idmapped tree can be made of `path` (the kernel has idmapped mounts, and `path`'s
/// file system supports them).
pub(super) fn can_idmap(path: &CStr, userns: &OwnedFd) -> io::Result<()> {
    let dir = corral_keeper::child::open_dir_nofollow(path)?;
    // SAFETY: a descriptor open_dir_nofollow just gave us.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    tree(dir.as_raw_fd(), Some(userns)).map(drop)
}
