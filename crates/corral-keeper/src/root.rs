//! A session's root: the keeper, in a mount namespace of its own, shows its commands the host's
//! top-level directories read-only (not `/home`, `/root`, `/tmp`, `/run`, `/proc`, `/sys`, nor
//! what lies elsewhere under them) and the session's own directories at `/workspace`, `/tmp` and
//! `/home/agent`, then makes that its root. Each command's mount namespace is a copy of it, in
//! which `child::view` makes everything read-only again but the session's directories.
//!
//! The keeper is single-threaded, so this runs as plain code in it.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;

use crate::child::{attach, clone_tree, mount_setattr_fd, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY};

/// Host top-level entries a session never sees: the users' homes, what is per boot or per
/// process, and the names its own directories take.
const NOT_SHOWN: [&[u8]; 9] = [b"home", b"root", b"tmp", b"run", b"proc", b"sys", b"dev", b"workspace", b"lost+found"];

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Builds the root and moves into it. `binds`: (host directory, path inside), inside paths
/// absolute (`/workspace`, `/tmp`, `/home/agent`). `cover`: host paths that look empty inside
/// though a shown directory holds them (the `hide` paths, the user's home, the directory of all
/// sessions), reached without following a symbolic link.
pub fn enter(binds: &[(CString, CString)], cover: &[CString]) -> io::Result<()> {
    // SAFETY: raw syscalls in this single-threaded process.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
    }
    crate::child::make_private()?;
    // Everything that will be shown, taken before anything is covered: a session directory may
    // lie under the host's /tmp, which the new root's tmpfs covers next.
    let mut shown: Vec<(CString, libc::c_int)> = Vec::new();
    let mut links: Vec<(CString, CString)> = Vec::new();
    for entry in std::fs::read_dir("/")? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.as_bytes();
        if NOT_SHOWN.contains(&name) {
            continue;
        }
        let kind = entry.file_type()?;
        let path = cstr(&[b"/", name].concat())?;
        if kind.is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            links.push((cstr(name)?, cstr(target.as_os_str().as_bytes())?));
        } else if kind.is_dir() {
            let tree = clone_tree(&path, true)?;
            mount_setattr_fd(tree, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, true)?;
            shown.push((cstr(name)?, tree));
        }
    }
    // The host's device nodes, for `child::view` to copy the few a command gets; the host's
    // /proc and /sys, because the kernel lets a user namespace mount a new proc or sysfs only
    // where one is already fully visible (each command mounts its own over them).
    let dev = clone_tree(c"/dev", true)?;
    let proc_ = clone_tree(c"/proc", true)?;
    // Writable here (each command's first process joins its control groups under
    // /sys/fs/cgroup before its view makes everything read-only).
    let sys = clone_tree(c"/sys", true)?;
    mount_setattr_fd(sys, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, true)?;
    let mut own: Vec<(CString, libc::c_int)> = Vec::new();
    for (host, inside) in binds {
        let tree = clone_tree(host, true)?;
        mount_setattr_fd(tree, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, true)?;
        own.push((inside.clone(), tree));
    }
    // The new root: a tmpfs over the host's /tmp (this namespace's only).
    let base = c"/tmp";
    // SAFETY: NUL-terminated strings.
    unsafe {
        check(libc::mount(
            c"tmpfs".as_ptr(),
            base.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=755".as_ptr().cast(),
        ))?;
    }
    let at = |rel: &[u8]| cstr(&[b"/tmp/", rel].concat());
    let mkdir = |p: &CStr| -> io::Result<()> {
        // SAFETY: a NUL-terminated path.
        let r = unsafe { libc::mkdir(p.as_ptr(), 0o755) };
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    for (name, tree) in shown {
        let target = at(name.as_bytes())?;
        mkdir(&target)?;
        attach(tree, &target)?;
    }
    for path in cover {
        let Some(rel) = path.as_bytes().strip_prefix(b"/") else { continue };
        hide(&at(rel)?)?;
    }
    for (name, target) in links {
        let path = at(name.as_bytes())?;
        // SAFETY: NUL-terminated strings.
        check(unsafe { libc::symlink(target.as_ptr(), path.as_ptr()) })?;
    }
    for d in [&b"proc"[..], b"sys", b"dev", b"run", b"tmp", b"home", b"workspace"] {
        mkdir(&at(d)?)?;
    }
    attach(dev, &at(b"dev")?)?;
    attach(proc_, &at(b"proc")?)?;
    attach(sys, &at(b"sys")?)?;
    for (inside, tree) in own {
        let rel = inside.as_bytes().strip_prefix(b"/").ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let mut walked = Vec::new();
        for part in rel.split(|b| *b == b'/') {
            if !walked.is_empty() {
                walked.push(b'/');
            }
            walked.extend_from_slice(part);
            mkdir(&at(&walked)?)?;
        }
        attach(tree, &at(rel)?)?;
    }
    // SAFETY: NUL-terminated paths; pivot_root(".", ".") stacks the old root under the new one,
    // which the detach then removes.
    unsafe {
        check(libc::chdir(base.as_ptr()))?;
        check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) as libc::c_int)?;
        check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
        check(libc::chdir(c"/".as_ptr()))?;
    }
    Ok(())
}

/// Covers `path` (in the new root): a directory with an empty read-only tmpfs, a file with
/// /dev/null. A path that does not exist, or passes through a symbolic link, is left alone (it
/// shows nothing of the host's there).
fn hide(path: &CStr) -> io::Result<()> {
    let Ok(fd) = crate::child::open_path_nofollow(path, 0) else { return Ok(()) };
    let result = (|| {
        // SAFETY: fstat into a zeroed struct on our descriptor; the mounts name it through
        // /proc/self/fd, so no path is resolved again.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            check(libc::fstat(fd, &mut st))?;
            let target = cstr(format!("/proc/self/fd/{fd}").as_bytes())?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => check(libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=755".as_ptr().cast(),
                )),
                libc::S_IFREG => check(libc::mount(
                    c"/dev/null".as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )),
                _ => Ok(()),
            }
        }
    })();
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    result
}
