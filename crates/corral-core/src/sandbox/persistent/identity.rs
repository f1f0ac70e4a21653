//! Per-identity state: what a session of an identity left in `/tmp` and its home after
//! `onFirstCreate`, kept under `<root>/.identities/<sha256 of the identity>/` (no session id
//! starts with a dot) and copied into each later session of that identity, so it does not set
//! itself up again. The copy walks by descriptors and never follows a link (the session's
//! commands made them, and may still be changing them): links stay links, modes are kept, other
//! special files are skipped; `io::copy` between files shares data blocks where the file system
//! can (`copy_file_range`).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The state's directory for `identity`.
pub(super) fn dir(root: &Path, identity: &str) -> PathBuf {
    root.join(".identities").join(hex::encode(Sha256::digest(identity.as_bytes())))
}

/// Opens `name` in the directory `dir` without following a link (a command may swap any entry
/// for a link or a FIFO while the copy runs): what is opened is what is copied.
fn open_at(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated name; the descriptor is owned at once.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat just made.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Copies the tree at `from` to `to` (which must not exist), by descriptors, without recursion:
/// directories, regular files (their modes), links as links; anything else, and any entry that
/// changed kind under the copy, is skipped.
pub(super) fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let from = CString::new(from.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let root = open_at(libc::AT_FDCWD, &from, libc::O_RDONLY | libc::O_DIRECTORY)?;
    std::fs::create_dir(to)?;
    let mut stack = vec![(root, to.to_path_buf())];
    while let Some((dir, dst)) = stack.pop() {
        let mut list = nix::dir::Dir::from_fd(dir.try_clone()?).map_err(io::Error::from)?;
        let names: Vec<CString> = list
            .iter()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect();
        for name in names {
            let target = dst.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
            let st = nix::sys::stat::fstatat(&dir, name.as_c_str(), nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                .map_err(io::Error::from)?;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFLNK => {
                    let link = nix::fcntl::readlinkat(&dir, name.as_c_str()).map_err(io::Error::from)?;
                    symlink(link, &target)?;
                }
                libc::S_IFDIR => {
                    let Ok(sub) = open_at(dir.as_raw_fd(), &name, libc::O_RDONLY | libc::O_DIRECTORY) else { continue };
                    std::fs::create_dir(&target)?;
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(st.st_mode & 0o1777 | 0o700))?;
                    stack.push((sub, target));
                }
                libc::S_IFREG => {
                    let Ok(fd) = open_at(dir.as_raw_fd(), &name, libc::O_RDONLY) else { continue };
                    let mut src = std::fs::File::from(fd);
                    let meta = src.metadata()?;
                    if !meta.is_file() {
                        continue;
                    }
                    let mut out = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        // Never a setuid or setgid program from one session into the next.
                        .mode(meta.permissions().mode() & 0o777)
                        .open(&target)?;
                    io::copy(&mut src, &mut out)?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Replaces `identity`'s state with the session's `/tmp` and home (made aside, then renamed in,
/// so a later session never sees half of it).
pub(super) fn save(root: &Path, identity: &str, session: &Path) -> io::Result<()> {
    let target = dir(root, identity);
    let parent = target.parent().expect("under .identities");
    std::fs::create_dir_all(parent)?;
    let aside = parent.join(format!(".new-{:016x}", rand::random::<u64>()));
    std::fs::create_dir(&aside)?;
    let made = (|| {
        copy_tree(&session.join("tmp"), &aside.join("tmp"))?;
        copy_tree(&session.join("home"), &aside.join("home"))?;
        std::fs::write(aside.join("done"), b"")
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&aside);
        return Err(e);
    }
    let old = parent.join(format!(".old-{:016x}", rand::random::<u64>()));
    let had = std::fs::rename(&target, &old).is_ok();
    std::fs::rename(&aside, &target)?;
    if had {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}
