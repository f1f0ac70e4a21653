//! Applies captured operations to the host tree. Every path is reached from a descriptor of the
//! working directory through no link (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`); a file
//! or link lands whole (renamed into place), so a crash leaves each path old or new, never a mix.
//! A path under a protected name is refused; so is one the host changed since the command started
//! (its change time is the layer's stamp or later). The rest applies.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::capture::{Entry, Op};
use super::layer::Stamp;
use crate::shell::changes::{Changes, Refusal};

/// What may not land: bare names at any depth (`.git`), and paths relative to the working
/// directory with what lies below them.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    pub names: Vec<String>,
    pub paths: Vec<PathBuf>,
}

impl Protected {
    pub(super) fn covers(&self, rel: &Path) -> bool {
        rel.components().any(|c| self.names.iter().any(|n| c.as_os_str() == OsStr::new(n)))
            || self.paths.iter().any(|p| rel.starts_with(p))
    }
}

const CHANGED: &str = "changed on the host";
const PROTECTED: &str = "protected";

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `rel` below `root`, through no link and never above it.
fn open_beneath(root: BorrowedFd<'_>, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    if rel.as_os_str().is_empty() {
        return root.try_clone_to_owned();
    }
    crate::fs::local::open_no_links(root, rel, flags)
}

fn lstat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<libc::stat>> {
    // SAFETY: a zeroed stat filled by fstatat on a descriptor of ours and a NUL-terminated name.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::ENOENT) { Ok(None) } else { Err(e) };
        }
        Ok(Some(st))
    }
}

fn changed_since(st: &libc::stat, stamp: Stamp) -> bool {
    (st.st_ctime, st.st_ctime_nsec) >= stamp
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// A name no command would choose, for a file on its way into place.
fn temp_name(name: &CStr) -> io::Result<CString> {
    let mut b = b".corral-apply-".to_vec();
    b.extend_from_slice(format!("{:016x}-", rand::random::<u64>()).as_bytes());
    b.extend(name.to_bytes().iter().take(64));
    cstr(&b)
}

struct Applier<'a> {
    root: OwnedFd,
    upper: &'a Path,
    stamp: Stamp,
    /// Paths corral itself changed since the command started: never a conflict.
    ours: &'a HashSet<PathBuf>,
    out: Changes,
}

fn shown(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

fn open_root(host: &Path) -> io::Result<OwnedFd> {
    std::fs::File::open(host).map(OwnedFd::from)
}

/// The operations that may apply, and those refused: under a protected name, of a kind a tree
/// does not hold, or on a path the host changed since the command started; nothing below a
/// refused directory applies either.
pub fn plan(
    ops: Vec<Op>,
    host: &Path,
    protected: &Protected,
    stamp: Stamp,
    ours: &HashSet<PathBuf>,
) -> (Vec<Op>, Vec<Refusal>) {
    let root = match open_root(host) {
        Ok(r) => r,
        Err(e) => {
            let reason = format!("the working directory could not be opened ({e})");
            return (
                Vec::new(),
                ops.iter().map(|o| Refusal { path: shown(o.path()), reason: reason.clone() }).collect(),
            );
        }
    };
    let mut refused: Vec<Refusal> = Vec::new();
    let mut below: Vec<PathBuf> = Vec::new();
    let mut kept = Vec::with_capacity(ops.len());
    for op in ops {
        let rel = op.path();
        if below.iter().any(|s| rel.starts_with(s)) {
            continue;
        }
        let reason = if protected.covers(rel) {
            Some(PROTECTED.to_string())
        } else if let Op::Refuse { reason, .. } = &op {
            Some((*reason).to_string())
        } else if matches!(op, Op::Put { .. } | Op::Remove { .. } | Op::MakeDir { .. })
            && !ours.contains(rel)
            && changed(root.as_fd(), rel, stamp, matches!(op, Op::MakeDir { .. }))
        {
            Some(CHANGED.to_string())
        } else {
            None
        };
        match reason {
            Some(reason) => {
                refused.push(Refusal { path: shown(rel), reason });
                below.push(rel.to_path_buf());
            }
            None => kept.push(op),
        }
    }
    (kept, refused)
}

/// Whether the host changed `rel` since `stamp` (a directory, with `dirs_ok`, never counts: what
/// the command put below it joins it).
fn changed(root: BorrowedFd<'_>, rel: &Path, stamp: Stamp, dirs_ok: bool) -> bool {
    let Some(name) = rel.file_name() else { return false };
    let Ok(dir) = open_beneath(root, rel.parent().unwrap_or(Path::new("")), libc::O_PATH | libc::O_DIRECTORY) else {
        return false;
    };
    let Ok(name) = cstr(name.as_bytes()) else { return false };
    match lstat_at(dir.as_fd(), &name) {
        Ok(Some(st)) => !(dirs_ok && is_dir(&st)) && changed_since(&st, stamp),
        _ => false,
    }
}

/// Applies `ops` (planned) to the tree at `host`: the report, and per operation whether it was
/// carried out.
pub fn apply(ops: &[Op], upper: &Path, host: &Path, stamp: Stamp, ours: &HashSet<PathBuf>) -> (Changes, Vec<bool>) {
    let root = match open_root(host) {
        Ok(r) => r,
        Err(e) => {
            let reason = format!("not applied: the working directory could not be opened ({e})");
            let refused = ops.iter().map(|o| Refusal { path: shown(o.path()), reason: reason.clone() }).collect();
            return (Changes { refused, ..Changes::default() }, vec![false; ops.len()]);
        }
    };
    let mut a = Applier { root, upper, stamp, ours, out: Changes::default() };
    let mut done = Vec::with_capacity(ops.len());
    let mut failed: Vec<PathBuf> = Vec::new();
    for op in ops {
        let rel = op.path();
        if failed.iter().any(|f| rel.starts_with(f)) {
            done.push(false);
            continue;
        }
        match a.one(op) {
            Ok(true) => done.push(true),
            Ok(false) => {
                failed.push(rel.to_path_buf());
                done.push(false);
            }
            Err(e) => {
                a.out.refused.push(Refusal { path: shown(rel), reason: format!("not applied: {e}") });
                failed.push(rel.to_path_buf());
                done.push(false);
            }
        }
    }
    (a.out, done)
}

impl Applier<'_> {
    /// The directory holding `rel` and its name there.
    fn parent(&self, rel: &Path) -> io::Result<(OwnedFd, CString)> {
        let name = rel.file_name().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let dir =
            open_beneath(self.root.as_fd(), rel.parent().unwrap_or(Path::new("")), libc::O_PATH | libc::O_DIRECTORY)?;
        Ok((dir, cstr(name.as_bytes())?))
    }

    /// Whether the host changed `rel` (as `st` finds it) since the command started.
    fn changed(&self, st: &libc::stat, rel: &Path) -> bool {
        !self.ours.contains(rel) && changed_since(st, self.stamp)
    }

    /// A host change made since the plan was checked: refused now.
    fn raced(&mut self, rel: &Path) -> bool {
        self.out.refused.push(Refusal { path: shown(rel), reason: CHANGED.into() });
        false
    }

    /// Carries out one operation; `false` when it was refused here (the host changed it).
    fn one(&mut self, op: &Op) -> io::Result<bool> {
        match op {
            Op::Refuse { .. } => Ok(false),
            Op::ModeDir { path, mode } => {
                let dir = open_beneath(self.root.as_fd(), path, libc::O_RDONLY | libc::O_DIRECTORY)?;
                // SAFETY: a descriptor of ours.
                check(unsafe { libc::fchmod(dir.as_raw_fd(), mode & 0o1777) }).map(|_| true)
            }
            Op::MakeDir { path, mode, empty } => {
                let (dir, name) = self.parent(path)?;
                if let Some(st) = lstat_at(dir.as_fd(), &name)? {
                    if is_dir(&st) {
                        return Ok(true); // the host made it too: what the command put below it joins it
                    }
                    return Ok(self.raced(path));
                }
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode & 0o1777) })?;
                if *empty {
                    self.out.added.push(format!("{}/", shown(path)));
                }
                Ok(true)
            }
            Op::Remove { path } => {
                let (dir, name) = self.parent(path)?;
                match lstat_at(dir.as_fd(), &name)? {
                    None => return Ok(true),
                    Some(st) if is_dir(&st) || self.changed(&st, path) => return Ok(self.raced(path)),
                    Some(_) => {}
                }
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
                self.out.deleted.push(shown(path));
                Ok(true)
            }
            Op::RemoveDir { path } => {
                let (dir, name) = self.parent(path)?;
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                match check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) }) {
                    Ok(_) => Ok(true),
                    // What was kept below it (refused, or made by the host since) keeps it.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTEMPTY) | Some(libc::ENOENT)) => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Op::Put { path, entry, existed } => {
                let (dir, name) = self.parent(path)?;
                if let Some(st) = lstat_at(dir.as_fd(), &name)? {
                    if self.changed(&st, path) || is_dir(&st) {
                        return Ok(self.raced(path));
                    }
                }
                self.put(dir.as_fd(), &name, path, entry)?;
                if *existed { &mut self.out.modified } else { &mut self.out.added }.push(shown(path));
                Ok(true)
            }
        }
    }

    /// The layer's file or link at `rel` replaces `name` in `dir` in one rename.
    fn put(&self, dir: BorrowedFd<'_>, name: &CStr, rel: &Path, entry: &Entry) -> io::Result<()> {
        let src = self.upper.join(rel);
        let src_c = cstr(src.as_os_str().as_bytes())?;
        let tmp = temp_name(name)?;
        match entry {
            Entry::Link { target } => {
                let target = cstr(target.as_bytes())?;
                // SAFETY: NUL-terminated strings and a descriptor of ours.
                check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), tmp.as_ptr()) })?;
            }
            Entry::File { mode } => {
                // No setuid or setgid bit and no file capability reaches the host: the command's
                // root is not the host's.
                // SAFETY: NUL-terminated strings; the layer is this process's and the command is over.
                unsafe {
                    libc::lremovexattr(src_c.as_ptr(), c"security.capability".as_ptr());
                    check(libc::chmod(src_c.as_ptr(), mode & 0o1777))?;
                }
                // The layer's file itself where the two share a mount, else a copy.
                // SAFETY: NUL-terminated strings and a descriptor of ours.
                let moved =
                    unsafe { libc::renameat(libc::AT_FDCWD, src_c.as_ptr(), dir.as_raw_fd(), tmp.as_ptr()) } == 0;
                if !moved {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EXDEV) {
                        return Err(e);
                    }
                    copy_into(&src, dir, &tmp, mode & 0o1777)?;
                }
            }
        }
        // SAFETY: descriptors of ours and NUL-terminated names.
        let r = check(unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) });
        if r.is_err() {
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        r.map(drop)
    }
}

/// Copies the layer's file at `src` to a new file `tmp` in `dir` with `mode`.
fn copy_into(src: &Path, dir: BorrowedFd<'_>, tmp: &CStr, mode: u32) -> io::Result<()> {
    let mut from = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(src)?;
    // SAFETY: a descriptor of ours and a NUL-terminated name.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            tmp.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
            0o600,
        )
    })?;
    // SAFETY: a descriptor openat just gave us.
    let mut to = unsafe { std::fs::File::from_raw_fd(fd) };
    let r = std::io::copy(&mut from, &mut to).and_then(|_| {
        // SAFETY: a descriptor of ours.
        check(unsafe { libc::fchmod(to.as_raw_fd(), mode) }).map(drop)
    });
    if r.is_err() {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
    }
    r
}
