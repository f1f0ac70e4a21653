//! `LinuxSandbox({ changes: 'overlay' })`: each command runs over an overlay of its working
//! directory (made in the command's own user and mount namespaces, `corral_keeper::child`), so
//! the host tree is untouched while it runs. When it ends, what its upper layer holds is read
//! (`capture`) and applied to the host (`apply`): protected names refused, host changes made in
//! the meantime refused per path, modes and links kept, deletions applied.

mod apply;
mod capture;
pub mod layer;

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub use apply::Protected;
pub use layer::Layer;

use crate::shell::changes::{Changes, Refusal};

/// Reads and applies what the command left in `layer` to `mount`, then removes the layer.
pub async fn finish(layer: Layer, mount: PathBuf, protected: Protected) -> Changes {
    let work = tokio::task::spawn_blocking(move || {
        let upper = layer.upper();
        match capture::capture(&upper, &mount) {
            Ok(ops) => apply::apply(&ops, &upper, &mount, &protected, layer.stamp),
            Err(e) => unread(e.to_string()),
        }
    });
    work.await.unwrap_or_else(|e| unread(e.to_string()))
}

fn unread(e: String) -> Changes {
    Changes {
        refused: vec![Refusal { path: ".".into(), reason: format!("the command's changes could not be read ({e})") }],
        ..Changes::default()
    }
}

/// Whether this kernel mounts an overlay in a user namespace, with its layers in the temp
/// directory (tried in a throwaway child). As root, `userns` is the commands' namespace and
/// `owner` its root's host uid; otherwise the child makes a namespace of its own.
pub fn probe(userns: Option<&OwnedFd>, owner: u32) -> Result<(), String> {
    let base = std::env::temp_dir().join(format!("corral-overlay-probe-{:016x}", rand::random::<u64>()));
    std::fs::DirBuilder::new().mode(0o700).create(&base).map_err(|e| e.to_string())?;
    let result = probe_in(&base, userns, owner);
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn probe_in(base: &Path, userns: Option<&OwnedFd>, owner: u32) -> Result<(), String> {
    for d in ["lower", "upper", "work"] {
        std::fs::create_dir(base.join(d)).map_err(|e| e.to_string())?;
    }
    if userns.is_some() {
        for d in ["", "lower", "upper", "work"] {
            std::os::unix::fs::lchown(base.join(d), Some(owner), Some(super::HOST_GID)).map_err(|e| e.to_string())?;
        }
    }
    let c = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string());
    let lower = c(base.join("lower"))?;
    let data = c(PathBuf::from(format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        base.join("lower").display(),
        base.join("upper").display(),
        base.join("work").display()
    )))?;
    // SAFETY: raw syscalls.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("{uid} {uid} 1");
    let gid_map = format!("{gid} {gid} 1");
    let ns = userns.map(|n| n.as_raw_fd());
    // SAFETY: the child makes only raw syscalls on what was prepared above, then exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if pid == 0 {
        // SAFETY: raw syscalls in the child; `_exit` with the step that failed.
        unsafe {
            let write = |path: &std::ffi::CStr, data: &[u8]| -> bool {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                fd >= 0 && libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize
            };
            match ns {
                Some(ns) => {
                    if libc::setns(ns, libc::CLONE_NEWUSER) < 0
                        || libc::syscall(libc::SYS_setresgid, 0u32, 0u32, 0u32) < 0
                        || libc::syscall(libc::SYS_setresuid, 0u32, 0u32, 0u32) < 0
                    {
                        libc::_exit(2);
                    }
                }
                None => {
                    if libc::unshare(libc::CLONE_NEWUSER) < 0
                        || !write(c"/proc/self/setgroups", b"deny")
                        || !write(c"/proc/self/uid_map", uid_map.as_bytes())
                        || !write(c"/proc/self/gid_map", gid_map.as_bytes())
                    {
                        libc::_exit(2);
                    }
                }
            }
            if libc::unshare(libc::CLONE_NEWNS) < 0 {
                libc::_exit(3);
            }
            let none = std::ptr::null();
            if libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, none.cast()) < 0 {
                libc::_exit(4);
            }
            let kind = c"overlay".as_ptr();
            if libc::mount(kind, lower.as_ptr(), kind, libc::MS_NOSUID | libc::MS_NODEV, data.as_ptr().cast()) < 0 {
                libc::_exit(5);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, 2) => Err("the user namespace could not be entered".into()),
        (true, 5) => Err("the kernel refused the overlay mount".into()),
        _ => Err("a mount namespace could not be made".into()),
    }
}
