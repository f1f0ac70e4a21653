//! Applies captured operations to the host tree. Every path is reached from a descriptor of the
//! working directory through no link (`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`); a file
//! or link lands whole (renamed into place), so a crash leaves each path old or new, never a mix.
//! A path under a protected name is refused; so is one the host changed since the command started
//! (its change time is the layer's stamp or later). The rest applies.

use std::collections::HashSet;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::capture::{Entry, Op};
use super::layer::Stamp;
use crate::fs::local::chmod_fd;
use crate::shell::changes::{Changes, Refusal};

/// What may not land: bare names at any depth (`.git`), and paths relative to the working
/// directory with what lies below them.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    pub names: Vec<String>,
    pub paths: Vec<PathBuf>,
}

impl Protected {
    /// A sandbox's `protect` entries for a working directory `mount`: every `.git` and the other
    /// bare names at any depth, the other entries as paths from `mount` (absolute ones below it);
    /// nothing with `protect: []`.
    pub fn of(entries: &[String], mount: &Path) -> Protected {
        if entries.is_empty() {
            return Protected::default();
        }
        let (names, paths): (Vec<&String>, Vec<&String>) =
            entries.iter().partition(|e| crate::sandbox::protect::is_name(e));
        let relative = |p: &String| -> Option<PathBuf> {
            let p = Path::new(p);
            match p.is_absolute() {
                true => p.strip_prefix(mount).ok().map(Path::to_path_buf),
                false => Some(p.strip_prefix("./").unwrap_or(p).to_path_buf()),
            }
        };
        Protected {
            names: std::iter::once(".git".to_string()).chain(names.into_iter().cloned()).collect(),
            paths: paths.into_iter().filter_map(relative).collect(),
        }
    }

    /// Whether `rel` lies under a protected name (ASCII case folded: a case-insensitive file
    /// system would take `.GIT` for `.git`) or path.
    pub(super) fn covers(&self, rel: &Path) -> bool {
        rel.components().any(|c| self.names.iter().any(|n| c.as_os_str().as_bytes().eq_ignore_ascii_case(n.as_bytes())))
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
pub(super) fn open_beneath(root: BorrowedFd<'_>, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    if rel.as_os_str().is_empty() {
        return root.try_clone_to_owned();
    }
    crate::fs::local::open_no_links(root, rel, flags)
}

/// The directories below one root, the last one opened kept for the next path in it: a
/// changeset's paths come in tree order, so most share the directory of the one before. Only a
/// command's own overlay could move a directory of the working directory, and it is over.
struct Parents<'a> {
    root: BorrowedFd<'a>,
    /// Shared with the paths handed out (no descriptor is copied per path).
    last: Option<(PathBuf, std::rc::Rc<OwnedFd>)>,
}

impl<'a> Parents<'a> {
    fn new(root: BorrowedFd<'a>) -> Parents<'a> {
        Parents { root, last: None }
    }

    /// The directory holding `rel` (reached through no link) and its name there.
    fn of(&mut self, rel: &Path) -> io::Result<(std::rc::Rc<OwnedFd>, CString)> {
        let name = rel.file_name().ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        if let Some((p, fd)) = &self.last {
            if p == parent {
                return Ok((fd.clone(), cstr(name.as_bytes())?));
            }
        }
        let dir = std::rc::Rc::new(open_beneath(self.root, parent, libc::O_PATH | libc::O_DIRECTORY)?);
        self.last = Some((parent.to_path_buf(), dir.clone()));
        Ok((dir, cstr(name.as_bytes())?))
    }

    /// Forgets the kept directory (one at or below `rel` was removed or replaced).
    fn forget(&mut self) {
        self.last = None;
    }
}

fn stat_fd(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat filled by fstatat on a descriptor of ours, an empty path.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        check(libc::fstatat(fd.as_raw_fd(), c"".as_ptr(), &mut st, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW))?;
        Ok(st)
    }
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

fn same_inode(a: &libc::stat, b: &libc::stat) -> bool {
    (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
}

/// A name no command would choose, for a file on its way into place.
fn temp_name(name: &CStr) -> io::Result<CString> {
    let mut b = b".corral-apply-".to_vec();
    b.extend_from_slice(format!("{:016x}-", rand::random::<u64>()).as_bytes());
    b.extend(name.to_bytes().iter().take(64));
    cstr(&b)
}

fn shown(rel: &Path) -> String {
    rel.to_string_lossy().into_owned()
}

/// Whether `rel` or a directory above it is in `set`.
fn within(set: &HashSet<PathBuf>, rel: &Path) -> bool {
    !set.is_empty() && rel.ancestors().any(|a| set.contains(a))
}

/// The path of an open descriptor, to reach its inode itself (`chmod`, a read-only reopen of an
/// `O_PATH` descriptor) without resolving any name again.
fn fd_path(fd: BorrowedFd<'_>) -> io::Result<CString> {
    cstr(format!("/proc/self/fd/{}", fd.as_raw_fd()).as_bytes())
}

/// The layer's regular file at `rel`, reached from `upper` through no link: an `O_PATH`
/// descriptor, its status, and its directory with its name there.
fn layer_file(upper: &mut Parents<'_>, rel: &Path) -> io::Result<(OwnedFd, libc::stat, std::rc::Rc<OwnedFd>, CString)> {
    let (dir, name) = upper.of(rel)?;
    // SAFETY: a descriptor of ours and a NUL-terminated name.
    let fd = check(unsafe {
        libc::openat(dir.as_raw_fd(), name.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
    })?;
    // SAFETY: a descriptor openat just gave us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = stat_fd(fd.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    Ok((fd, st, dir, name))
}

/// The SHA-256 of the layer's file at `rel`, read as a stream (a sparse file of many gigabytes
/// is never held in memory).
pub fn digest(upper: BorrowedFd<'_>, rel: &Path) -> io::Result<[u8; 32]> {
    use sha2::Digest;
    use std::io::Read;
    let (fd, ..) = layer_file(&mut Parents::new(upper), rel)?;
    let mut file = std::fs::OpenOptions::new().read(true).open(OsStr::from_bytes(fd_path(fd.as_fd())?.as_bytes()))?;
    let mut hash = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut buf)? {
            0 => return Ok(hash.finalize().into()),
            n => hash.update(&buf[..n]),
        }
    }
}

/// The operations that may apply, and those refused: under a protected name, of a kind a tree
/// does not hold, or on a path the host changed since the command started; nothing below a
/// refused directory applies either. `root`: the working directory, opened before.
pub fn plan(
    ops: Vec<Op>,
    root: BorrowedFd<'_>,
    protected: &Protected,
    stamp: Stamp,
    ours: &HashSet<PathBuf>,
) -> (Vec<Op>, Vec<Refusal>) {
    let mut refused: Vec<Refusal> = Vec::new();
    let mut below: HashSet<PathBuf> = HashSet::new();
    let mut kept = Vec::with_capacity(ops.len());
    let mut parents = Parents::new(root);
    for op in ops {
        let rel = op.path();
        if within(&below, rel) {
            continue;
        }
        let reason = if protected.covers(rel) {
            Some(PROTECTED.to_string())
        } else if let Op::Refuse { reason, .. } = &op {
            Some((*reason).to_string())
        } else if matches!(op, Op::Put { .. } | Op::Remove { .. } | Op::MakeDir { .. } | Op::ModeDir { .. })
            && !ours.contains(rel)
            && changed(&mut parents, rel, stamp, matches!(op, Op::MakeDir { .. }))
        {
            Some(CHANGED.to_string())
        } else {
            None
        };
        match reason {
            Some(reason) => {
                refused.push(Refusal { path: shown(rel), reason });
                below.insert(rel.to_path_buf());
            }
            None => kept.push(op),
        }
    }
    (kept, refused)
}

/// Whether the host changed `rel` since `stamp` (a directory, with `dirs_ok`, never counts: what
/// the command put below it joins it).
fn changed(parents: &mut Parents<'_>, rel: &Path, stamp: Stamp, dirs_ok: bool) -> bool {
    let Ok((dir, name)) = parents.of(rel) else { return false };
    match lstat_at(dir.as_fd(), &name) {
        Ok(Some(st)) => !(dirs_ok && is_dir(&st)) && changed_since(&st, stamp),
        _ => false,
    }
}

struct Applier<'a> {
    root: BorrowedFd<'a>,
    host: Parents<'a>,
    upper: Parents<'a>,
    stamp: Stamp,
    /// Paths corral itself changed since the command started: never a conflict.
    ours: &'a HashSet<PathBuf>,
    out: Changes,
    /// Directories' modes, set last (deepest first): a directory made read-only must not stop
    /// what goes into it.
    modes: Vec<(PathBuf, u32)>,
    /// Host directories closed to their owner that a change had to go into (the command's root
    /// could write there: it is root over this user's files in its own namespace), opened for
    /// it; their modes, set back at the end.
    reopened: Vec<(PathBuf, u32)>,
}

/// Applies `ops` (planned) from the layer's `upper` to the working directory `root`: the
/// report, and per operation whether it was carried out.
pub fn apply(
    ops: &[Op],
    upper: BorrowedFd<'_>,
    root: BorrowedFd<'_>,
    stamp: Stamp,
    ours: &HashSet<PathBuf>,
) -> (Changes, Vec<bool>) {
    let mut a = Applier {
        root,
        host: Parents::new(root),
        upper: Parents::new(upper),
        stamp,
        ours,
        out: Changes::default(),
        modes: Vec::new(),
        reopened: Vec::new(),
    };
    let mut done = Vec::with_capacity(ops.len());
    let mut failed: HashSet<PathBuf> = HashSet::new();
    for op in ops {
        let rel = op.path();
        if within(&failed, rel) {
            done.push(false);
            continue;
        }
        let mut r = a.one(op);
        if r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EACCES)) && a.open_up(rel) {
            r = a.one(op);
        }
        match r {
            Ok(true) => done.push(true),
            Ok(false) => {
                failed.insert(rel.to_path_buf());
                done.push(false);
            }
            Err(e) => {
                a.out.refused.push(Refusal { path: shown(rel), reason: format!("not applied: {e}") });
                failed.insert(rel.to_path_buf());
                done.push(false);
            }
        }
    }
    // A directory opened for a change gets its mode back, unless the change set another; one
    // removed since needs none.
    let mut modes: Vec<(PathBuf, u32, bool)> = a.reopened.drain(..).map(|(p, m)| (p, m, false)).collect();
    modes.extend(a.modes.drain(..).map(|(p, m)| (p, m, true)));
    modes.sort_by_key(|(p, ..)| std::cmp::Reverse(p.components().count()));
    for (rel, mode, report) in modes {
        // A command's mode never gets a setuid or setgid bit from its root; a host directory's
        // own mode comes back whole.
        let mode = if report { mode & 0o1777 } else { mode & 0o7777 };
        let r = open_beneath(a.root, &rel, libc::O_PATH | libc::O_DIRECTORY).and_then(|d| chmod_fd(d.as_fd(), mode));
        if let (Err(e), true) = (r, report) {
            a.out.refused.push(Refusal { path: format!("{}/", shown(&rel)), reason: format!("mode not applied: {e}") });
        }
    }
    (a.out, done)
}

impl Applier<'_> {
    /// Whether the host changed `rel` (as `st` finds it) since the command started.
    fn changed(&self, st: &libc::stat, rel: &Path) -> bool {
        !self.ours.contains(rel) && changed_since(st, self.stamp)
    }

    /// Opens the host directory holding `rel` to this user (`u+wx`) where it is theirs and closed
    /// to them; whether it was (and the change may be tried again).
    fn open_up(&mut self, rel: &Path) -> bool {
        let parent = rel.parent().unwrap_or(Path::new(""));
        if self.reopened.iter().any(|(p, _)| p == parent) {
            return false;
        }
        let Ok((dir, _)) = self.host.of(rel) else { return false };
        let Ok(st) = stat_fd(dir.as_fd()) else { return false };
        // SAFETY: no arguments.
        if st.st_uid != unsafe { libc::geteuid() } || !is_dir(&st) || st.st_mode & 0o300 == 0o300 {
            return false;
        }
        if chmod_fd(dir.as_fd(), (st.st_mode | 0o300) & 0o7777).is_err() {
            return false;
        }
        self.reopened.push((parent.to_path_buf(), st.st_mode & 0o7777));
        true
    }

    /// A host change made since the plan was checked: refused now.
    fn raced(&mut self, rel: &Path) -> bool {
        self.out.refused.push(Refusal { path: shown(rel), reason: CHANGED.into() });
        false
    }

    /// Carries out one operation; `false` when it was refused here.
    fn one(&mut self, op: &Op) -> io::Result<bool> {
        match op {
            Op::Refuse { .. } => Ok(false),
            Op::ModeDir { path, mode } => {
                self.modes.push((path.clone(), *mode));
                Ok(true)
            }
            Op::MakeDir { path, mode, empty } => {
                let (dir, name) = self.host.of(path)?;
                if let Some(st) = lstat_at(dir.as_fd(), &name)? {
                    if is_dir(&st) {
                        return Ok(true); // the host made it too: what the command put below it joins it
                    }
                    return Ok(self.raced(path));
                }
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) })?;
                self.modes.push((path.clone(), *mode));
                if *empty {
                    self.out.added.push(format!("{}/", shown(path)));
                }
                Ok(true)
            }
            Op::Remove { path } => {
                let (dir, name) = self.host.of(path)?;
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
                let (dir, name) = self.host.of(path)?;
                self.host.forget();
                // SAFETY: a descriptor of ours and a NUL-terminated name.
                match check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) }) {
                    Ok(_) => Ok(true),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(true),
                    // What was kept below it (refused, or made by the host since) keeps it.
                    Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                        self.out.refused.push(Refusal {
                            path: format!("{}/", shown(path)),
                            reason: "kept: it still holds what was not removed".into(),
                        });
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            }
            Op::Put { path, entry, existed } => {
                let (dir, name) = self.host.of(path)?;
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

    /// The layer's file or link at `rel` replaces `name` in `dir` in one rename. The layer is
    /// reached through descriptors and no link, and the inode that lands is checked to be the one
    /// that was prepared.
    fn put(&mut self, dir: BorrowedFd<'_>, name: &CStr, rel: &Path, entry: &Entry) -> io::Result<()> {
        // A link, or a copy, goes through a temp name and then over `name`. The layer's own file
        // is renamed over `name` in one step: at every moment it is either still in the layer
        // (a crash leaves it for the next apply) or in place, never half way in a temp name.
        let tmp = match entry {
            Entry::Link { target } => {
                let (tmp, target) = (temp_name(name)?, cstr(target.as_bytes())?);
                // SAFETY: NUL-terminated strings and a descriptor of ours.
                check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), tmp.as_ptr()) })?;
                tmp
            }
            Entry::File { mode } => {
                let (src, st, src_dir, src_name) = layer_file(&mut self.upper, rel)?;
                let at = fd_path(src.as_fd())?;
                // No setuid or setgid bit, no file capability and no overlay mark reaches the
                // host: the command's root is not the host's. Done on the inode itself.
                if st.st_mode & 0o7777 != mode & 0o1777 {
                    chmod_fd(src.as_fd(), mode & 0o1777)?;
                }
                strip_xattrs(&at);
                // The layer's file itself where the two share a mount, else a copy.
                // SAFETY: descriptors of ours and NUL-terminated names.
                let moved =
                    unsafe { libc::renameat(src_dir.as_raw_fd(), src_name.as_ptr(), dir.as_raw_fd(), name.as_ptr()) }
                        == 0;
                if moved {
                    // What landed is what the layer held at that name: only something with the
                    // dead command's overlay still open could have put another file there since.
                    let landed = lstat_at(dir, name)?;
                    if !landed.is_some_and(|l| same_inode(&l, &st)) {
                        return Err(io::Error::other("the command's file changed while it was applied"));
                    }
                    return Ok(());
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EXDEV) {
                    return Err(e);
                }
                let tmp = temp_name(name)?;
                copy_into(&at, dir, &tmp, mode & 0o1777)?;
                tmp
            }
        };
        // SAFETY: descriptors of ours and NUL-terminated names.
        let r = check(unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) });
        if r.is_err() {
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        r.map(drop)
    }
}

/// Removes the extended attributes that must not reach the host from the inode at `at` (a
/// descriptor's path): a file capability (always asked for by name, whatever else the list
/// holds), and what the overlay keeps of its own.
fn strip_xattrs(at: &CStr) {
    // SAFETY: NUL-terminated strings.
    unsafe { libc::removexattr(at.as_ptr(), c"security.capability".as_ptr()) };
    // SAFETY: a NUL-terminated path; a null buffer asks for the size.
    let size = unsafe { libc::listxattr(at.as_ptr(), std::ptr::null_mut(), 0) };
    if size <= 0 {
        return;
    }
    let mut buf = vec![0u8; size as usize + 256];
    // SAFETY: a NUL-terminated path and a buffer of the size given.
    let n = unsafe { libc::listxattr(at.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n <= 0 {
        return;
    }
    for name in buf[..n as usize].split(|b| *b == 0).filter(|n| !n.is_empty()) {
        if name.starts_with(b"user.overlay.") || name.starts_with(b"trusted.overlay.") {
            if let Ok(c) = CString::new(name) {
                // SAFETY: NUL-terminated strings.
                unsafe { libc::removexattr(at.as_ptr(), c.as_ptr()) };
            }
        }
    }
}

/// Copies the layer's file (the inode `src`, a descriptor's path) to a new file `tmp` in `dir`
/// with `mode`.
fn copy_into(src: &CStr, dir: BorrowedFd<'_>, tmp: &CStr, mode: u32) -> io::Result<()> {
    let mut from = std::fs::OpenOptions::new().read(true).open(OsStr::from_bytes(src.to_bytes()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[ignore = "sets a file capability: scripts/test.sh runs it as root"]
    fn a_file_capability_is_stripped_however_many_other_attributes_hide_it_as_root() {
        // tmpfs: room for more attribute names than ext4's one block.
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let file = dir.path().join("x");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        let path = cstr(file.as_os_str().as_bytes()).unwrap();
        // A v2 capability (cap_setuid+ep), behind more attribute names than one 4 KiB listing holds.
        let mut cap = vec![0u8; 20];
        cap[..4].copy_from_slice(&0x0200_0001u32.to_le_bytes());
        cap[4..8].copy_from_slice(&(1u32 << 7).to_le_bytes());
        cap[8..12].copy_from_slice(&(1u32 << 7).to_le_bytes());
        let set = |name: &CStr, value: &[u8]| {
            // SAFETY: NUL-terminated strings and a value of the size given.
            let r = unsafe { libc::setxattr(path.as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
            assert_eq!(r, 0, "setxattr {name:?}: {}", io::Error::last_os_error());
        };
        for i in 0..120 {
            set(&cstr(format!("user.padding-{i:03}-{}", "x".repeat(40)).as_bytes()).unwrap(), b"1");
        }
        set(c"security.capability", &cap);
        set(c"user.overlay.origin", b"x");
        strip_xattrs(&path);
        let get = |name: &CStr| {
            // SAFETY: as above, with a null buffer (the size is asked).
            unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) }
        };
        assert!(get(c"security.capability") < 0, "the capability is still there");
        assert!(get(c"user.overlay.origin") < 0, "the overlay's mark is still there");
        assert!(get(c"user.padding-000-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") >= 0, "another attribute went too");
    }
}
