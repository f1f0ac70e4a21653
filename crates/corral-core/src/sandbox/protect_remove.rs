//! Removing a protected name a command made (`protect::remove_made`), safely while other commands
//! may still run in the same tree: the entry is renamed aside first (no tool takes it for a `.git`
//! any more), then removed through descriptors, never following a link, with the depth and the
//! work bounded so a command's tree cannot exhaust this process.

use std::path::{Path, PathBuf};

/// Why an entry was not removed whole, and the name it was left under (when renamed aside).
pub struct Left {
    pub aside: Option<PathBuf>,
    pub error: std::io::Error,
}

/// The deepest directory chain removed (one descriptor per level).
#[cfg(unix)]
const MAX_DEPTH: usize = 512;
/// The most entries removed from one made entry.
#[cfg(unix)]
const MAX_ENTRIES: usize = 1_000_000;

fn aside_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut n = std::ffi::OsString::from(".corral-removed-");
    n.push(name);
    n.push(format!("-{:x}", rand::random::<u32>()));
    n
}

#[cfg(unix)]
pub fn remove_beneath(root: &Path, rel: &Path) -> Result<(), Left> {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let left = |aside: Option<PathBuf>| move |error: std::io::Error| Left { aside, error };
    let name = rel.file_name().ok_or_else(|| left(None)(std::io::Error::from_raw_os_error(libc::EINVAL)))?;
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let dir = fd::open_dir_beneath(root, parent_rel).map_err(left(None))?;
    let aside = aside_name(name);
    let (from, to) = (fd::cstr(name.as_bytes()).map_err(left(None))?, fd::cstr(aside.as_bytes()).map_err(left(None))?);
    fd::rename_in(dir.as_fd(), &from, &to).map_err(left(None))?;
    let shown = Some(rel.with_file_name(&aside));
    let mut budget = MAX_ENTRIES;
    fd::remove_entry(dir.as_fd(), &to, 0, &mut budget).map_err(left(shown))
}

#[cfg(not(unix))]
pub fn remove_beneath(root: &Path, rel: &Path) -> Result<(), Left> {
    let path = root.join(rel);
    let name = rel.file_name().ok_or_else(|| Left { aside: None, error: std::io::ErrorKind::InvalidInput.into() })?;
    let aside_rel = rel.with_file_name(aside_name(name));
    let aside = root.join(&aside_rel);
    std::fs::rename(&path, &aside).map_err(|error| Left { aside: None, error })?;
    let meta = std::fs::symlink_metadata(&aside).map_err(|error| Left { aside: Some(aside_rel.clone()), error })?;
    let r = if meta.is_dir() { std::fs::remove_dir_all(&aside) } else { std::fs::remove_file(&aside) };
    r.map_err(|error| Left { aside: Some(aside_rel), error })
}

#[cfg(unix)]
mod fd {
    use std::ffi::{CStr, CString};
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    pub fn cstr(b: &[u8]) -> io::Result<CString> {
        CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    }

    fn owned(r: libc::c_int) -> io::Result<OwnedFd> {
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just gave us.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    }

    fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        // SAFETY: a valid descriptor and a NUL-terminated name.
        owned(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) })
    }

    /// `root`, then each component of `rel` opened from the one before with `O_NOFOLLOW`: a
    /// component swapped for a link is refused, never followed.
    pub fn open_dir_beneath(root: &Path, rel: &Path) -> io::Result<OwnedFd> {
        let c = cstr(root.as_os_str().as_bytes())?;
        // SAFETY: a NUL-terminated path.
        let mut dir = owned(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) })?;
        for part in rel.components() {
            let std::path::Component::Normal(part) = part else {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            };
            dir = openat(dir.as_fd(), &cstr(part.as_bytes())?, libc::O_RDONLY | libc::O_DIRECTORY)?;
        }
        Ok(dir)
    }

    pub fn rename_in(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
        // SAFETY: a valid descriptor and NUL-terminated names.
        if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: a valid descriptor and a NUL-terminated name.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn is_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
        // SAFETY: a zeroed stat is a valid buffer for fstatat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated name and a stat buffer.
        if unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// At most this many names are read from a directory before they are removed.
    const BATCH: usize = 4096;

    /// Removes `name` in `dir` (a directory with everything in it), entering no link.
    pub fn remove_entry(dir: BorrowedFd<'_>, name: &CStr, depth: usize, budget: &mut usize) -> io::Result<()> {
        if !is_dir(dir, name)? {
            return unlinkat(dir, name, 0);
        }
        if depth >= super::MAX_DEPTH {
            return Err(io::Error::other(format!("deeper than {} directories", super::MAX_DEPTH)));
        }
        let sub = openat(dir, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        loop {
            // A batch of names, read afresh each round (removing while reading could skip some).
            let mut names: Vec<CString> = Vec::new();
            let mut stream = nix::dir::Dir::from_fd(sub.try_clone()?).map_err(io::Error::from)?;
            for entry in stream.iter() {
                let entry = entry.map_err(io::Error::from)?;
                let n = entry.file_name();
                if n != c"." && n != c".." {
                    names.push(n.to_owned());
                    if names.len() == BATCH {
                        break;
                    }
                }
            }
            drop(stream);
            if names.is_empty() {
                break;
            }
            for n in &names {
                if *budget == 0 {
                    return Err(io::Error::other("more entries than corral removes at once"));
                }
                *budget -= 1;
                remove_entry(sub.as_fd(), n, depth + 1, budget)?;
            }
        }
        unlinkat(dir, name, libc::AT_REMOVEDIR)
    }
}
