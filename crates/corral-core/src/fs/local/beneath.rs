//! Race-free resolution below a held root directory (unix).
//!
//! A path is resolved one component at a time, relative to directory file descriptors: each
//! directory is opened with `O_NOFOLLOW` from the one before it, so a component swapped for a link
//! between two steps is seen (the open fails with `ELOOP`/`ENOTDIR` and the step is retried), never
//! followed blindly. A link is read with `readlinkat` and its target resolved by the same rules,
//! lexically, against the components resolved so far: it may not climb above the root, and an
//! absolute target must lie inside the root's real path. What the caller then does (open, create
//! a temp file, rename, unlink) is relative to the descriptor of the final directory, so the
//! operation lands where the checks were made. The resolved components are known at every step,
//! so a deny list (`.git`) is checked on where the path really leads, not on how it was spelled.
//!
//! Why not `openat2(RESOLVE_BENEATH)` alone: it confines, but does not tell which components the
//! path went through, and the deny rules need them. It is used where no link may be followed at
//! all (files found by a walk: `open_no_links`), with this walk as the fallback on kernels
//! before 5.6.

use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::path::name_is_denied;

/// Links followed in one resolution before it is refused as a loop (Linux's own limit).
const MAX_LINKS: usize = 40;
/// How often one step is retried when the entry changed between looking and opening.
const MAX_RETRIES: usize = 64;

#[derive(Debug)]
pub(super) enum Refused {
    /// A `..` or a link leads above the root.
    Escape,
    /// A link whose target does not exist: such links are never followed.
    Dangling,
    /// The resolved path holds a denied name (the real component is given).
    Denied(String),
    /// Too many links.
    Loop,
    Io(io::Error),
}

impl From<io::Error> for Refused {
    fn from(e: io::Error) -> Self {
        Refused::Io(e)
    }
}

pub(super) type Resolve<T> = std::result::Result<T, Refused>;

/// Where a path leads: the directory that holds it and its name there (`None` for a directory
/// reached as a whole, such as the root), plus the resolved workspace components.
pub(super) struct Found {
    pub dir: OwnedFd,
    pub name: Option<CString>,
    pub comps: Vec<String>,
}

impl Found {
    /// The resolved workspace path (`.` for the root).
    pub fn real(&self) -> String {
        if self.comps.is_empty() {
            ".".to_string()
        } else {
            self.comps.join("/")
        }
    }
}

pub(super) fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// How a directory is held to resolve below it: a path-only descriptor where the OS has one
/// (Linux's `O_PATH`: no read permission needed), a read-only one elsewhere.
#[cfg(target_os = "linux")]
pub(super) const DIR_ONLY: libc::c_int = libc::O_PATH | libc::O_DIRECTORY;
#[cfg(not(target_os = "linux"))]
pub(super) const DIR_ONLY: libc::c_int = libc::O_RDONLY | libc::O_DIRECTORY;
const DIR_FLAGS: libc::c_int = DIR_ONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

pub(super) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let r = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
        match check(r) {
            // SAFETY: a descriptor the kernel just gave us.
            Ok(fd) => return Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sets the mode of the inode a descriptor holds (an `O_PATH` one too, so the inode's own mode
/// need not allow reading it), through its `/proc/self/fd` entry; `ENOENT` where there is no /proc.
#[cfg(target_os = "linux")]
pub(crate) fn chmod_fd(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    let at = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number");
    // SAFETY: a NUL-terminated path to our own descriptor.
    check(unsafe { libc::chmod(at.as_ptr(), mode as libc::mode_t) }).map(drop)
}

/// The root directory, held open for the life of the provider.
pub(super) fn open_root(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the root"))?;
    // SAFETY: a NUL-terminated path.
    let fd = check(unsafe { libc::open(c.as_ptr(), DIR_FLAGS) })?;
    // SAFETY: a descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The status of `name` in `dir` (a link itself, not what it leads to), or of `dir` itself.
pub(super) fn fstatat(dir: BorrowedFd<'_>, name: Option<&CStr>) -> io::Result<libc::stat> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    match name {
        // SAFETY: a valid descriptor, a NUL-terminated name and room for the result.
        Some(n) => {
            check(unsafe { libc::fstatat(dir.as_raw_fd(), n.as_ptr(), st.as_mut_ptr(), libc::AT_SYMLINK_NOFOLLOW) })?
        }
        // SAFETY: as above; an empty name with AT_EMPTY_PATH is the descriptor itself (an O_PATH
        // descriptor, which fstat refuses on older kernels).
        #[cfg(target_os = "linux")]
        None => check(unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                c"".as_ptr(),
                st.as_mut_ptr(),
                libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            )
        })?,
        // SAFETY: a valid descriptor and room for the result.
        #[cfg(not(target_os = "linux"))]
        None => check(unsafe { libc::fstat(dir.as_raw_fd(), st.as_mut_ptr()) })?,
    };
    // SAFETY: fstatat filled it.
    Ok(unsafe { st.assume_init() })
}

pub(super) fn kind(st: &libc::stat) -> libc::mode_t {
    st.st_mode & libc::S_IFMT
}

/// The permission bits of a status, as the `u32` every platform's callers take (`mode_t` is
/// `u16` on macOS).
#[allow(clippy::unnecessary_cast)]
pub(super) fn permissions(st: &libc::stat) -> u32 {
    (st.st_mode & 0o7777) as u32
}

pub(super) fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a valid descriptor, a NUL-terminated name and a buffer of the given size.
    let n = unsafe { libc::readlinkat(dir.as_raw_fd(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

pub(super) fn dup(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    fd.try_clone_to_owned()
}

fn raw_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// How `resolve` treats the last component and missing directories.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    /// Follow a link in the last component (read, write, stat of what it leads to).
    Follow,
    /// Stop at the last component itself (rm, lstat).
    NoFollow,
    /// Follow, creating every missing directory including the last (mkdir).
    CreateDirs,
    /// Follow, creating missing parent directories (write).
    CreateParents,
}

/// Resolves a normalized workspace path (`.` or `a/b/c`) below `root`.
pub(super) fn resolve(
    root: BorrowedFd<'_>,
    root_path: &Path,
    rel: &str,
    last: Last,
    deny: &[String],
) -> Resolve<Found> {
    let mut todo: VecDeque<String> =
        rel.split('/').filter(|s| !s.is_empty() && *s != ".").map(str::to_string).collect();
    // How many of the entries still in `todo` are the caller's own (they sit at its end); the
    // rest came from link targets.
    let mut own_left = todo.len();
    let mut stack: Vec<(OwnedFd, String)> = Vec::new();
    let (mut links, mut retries) = (0usize, 0usize);
    while let Some(c) = todo.pop_front() {
        let from_link = todo.len() >= own_left;
        if !from_link {
            own_left -= 1;
        }
        if c == "." {
            continue;
        }
        if c == ".." {
            if stack.pop().is_none() {
                return Err(Refused::Escape);
            }
            continue;
        }
        let is_last = todo.is_empty();
        let cur = match stack.last() {
            Some((fd, _)) => fd.as_fd(),
            None => root,
        };
        let name = cstr(&c)?;
        let comps = || stack.iter().map(|(_, n)| n.clone()).chain(std::iter::once(c.clone())).collect::<Vec<_>>();
        if name_is_denied(&c, deny) {
            return Err(Refused::Denied(comps().join("/")));
        }
        if is_last && last == Last::NoFollow {
            return Ok(Found { dir: dup(cur)?, name: Some(name), comps: comps() });
        }
        match fstatat(cur, Some(&name)) {
            Ok(st) if kind(&st) == libc::S_IFLNK => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(Refused::Loop);
                }
                let target = match readlinkat(cur, &name) {
                    Ok(t) => t,
                    // No longer a link: it changed under us; look again.
                    Err(e) if raw_errno(&e) == libc::EINVAL || raw_errno(&e) == libc::ENOENT => {
                        retry(&mut retries)?;
                        todo.push_front(c);
                        if !from_link {
                            own_left += 1;
                        }
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                };
                let target = OsStr::from_bytes(&target);
                let target_path = Path::new(target);
                let rest: Vec<String> = if target_path.is_absolute() {
                    let inside = target_path.strip_prefix(root_path).map_err(|_| Refused::Escape)?;
                    stack.clear();
                    inside.components().map(|p| p.as_os_str().to_string_lossy().into_owned()).collect()
                } else {
                    target_path.components().map(|p| p.as_os_str().to_string_lossy().into_owned()).collect()
                };
                for part in rest.into_iter().rev() {
                    todo.push_front(part);
                }
            }
            Ok(st) if kind(&st) == libc::S_IFDIR && (!is_last || last == Last::CreateDirs) => {
                match openat(cur, &name, DIR_FLAGS, 0) {
                    // The last component of a mkdir, a directory: handed over whole.
                    Ok(fd) if is_last => return Ok(Found { dir: fd, name: None, comps: comps() }),
                    Ok(fd) => stack.push((fd, c)),
                    // It changed between the look and the open (now a link, or gone): look again.
                    Err(e) if matches!(raw_errno(&e), libc::ELOOP | libc::ENOTDIR | libc::ENOENT) => {
                        retry(&mut retries)?;
                        todo.push_front(c);
                        if !from_link {
                            own_left += 1;
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(_) if !is_last => return Err(io::Error::from_raw_os_error(libc::ENOTDIR).into()),
            Ok(_) => return Ok(Found { dir: dup(cur)?, name: Some(name), comps: comps() }),
            Err(e) if raw_errno(&e) == libc::ENOENT => {
                if from_link {
                    return Err(Refused::Dangling);
                }
                let create = (!is_last && matches!(last, Last::CreateDirs | Last::CreateParents))
                    || (is_last && last == Last::CreateDirs);
                if create {
                    // SAFETY: a valid descriptor and a NUL-terminated name.
                    let r = unsafe { libc::mkdirat(cur.as_raw_fd(), name.as_ptr(), 0o777) };
                    if let Err(e) = check(r) {
                        if raw_errno(&e) != libc::EEXIST {
                            return Err(e.into());
                        }
                    }
                    todo.push_front(c);
                    own_left += 1;
                    continue;
                }
                if is_last {
                    return Ok(Found { dir: dup(cur)?, name: Some(name), comps: comps() });
                }
                return Err(io::Error::from_raw_os_error(libc::ENOENT).into());
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Nothing left: the path is the directory reached (the root, or a `..`/link back to one).
    let comps: Vec<String> = stack.iter().map(|(_, n)| n.clone()).collect();
    let dir = match stack.pop() {
        Some((fd, _)) => fd,
        None => dup(root)?,
    };
    Ok(Found { dir, name: None, comps })
}

fn retry(retries: &mut usize) -> Resolve<()> {
    *retries += 1;
    if *retries > MAX_RETRIES {
        return Err(Refused::Io(io::Error::new(
            io::ErrorKind::WouldBlock,
            "the path kept changing while it was resolved",
        )));
    }
    Ok(())
}

/// Opens a file found by a walk, relative to the root, following no link at all: on Linux
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, on macOS 11 and later `O_NOFOLLOW_ANY`,
/// elsewhere (or on kernels without them) one `O_NOFOLLOW` step per component.
/// `rel` may be any bytes but NUL (a name a command made need not be UTF-8).
pub(crate) fn open_no_links(root: BorrowedFd<'_>, rel: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let rel = rel.as_os_str().as_bytes();
    let cstr =
        |b: &[u8]| CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"));
    let mut parts: Vec<&[u8]> = rel.split(|b| *b == b'/').filter(|s| !s.is_empty()).collect();
    if rel.starts_with(b"/") || parts.contains(&&b".."[..]) {
        // A walk's paths are relative and plain: anything else is not confined by the calls below.
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    #[cfg(target_os = "macos")]
    if macos_has_nofollow_any() {
        // No `..` and no leading `/`, and no link in any component: the open stays below `root`.
        return openat(root, &cstr(rel)?, flags | libc::O_NOFOLLOW | libc::O_NOFOLLOW_ANY, 0);
    }
    #[cfg(target_os = "linux")]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            #[repr(C)]
            struct OpenHow {
                flags: u64,
                mode: u64,
                resolve: u64,
            }
            const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
            const RESOLVE_NO_SYMLINKS: u64 = 0x04;
            const RESOLVE_BENEATH: u64 = 0x08;
            let how = OpenHow {
                flags: (flags | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
                mode: 0,
                resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
            };
            let path = cstr(rel)?;
            loop {
                // SAFETY: a valid descriptor, a NUL-terminated path and an open_how of the size given.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_openat2,
                        root.as_raw_fd(),
                        path.as_ptr(),
                        &how as *const OpenHow,
                        std::mem::size_of::<OpenHow>(),
                    )
                };
                if r >= 0 {
                    // SAFETY: a descriptor the kernel just gave us.
                    return Ok(unsafe { OwnedFd::from_raw_fd(r as std::os::fd::RawFd) });
                }
                let e = io::Error::last_os_error();
                match raw_errno(&e) {
                    libc::EINTR | libc::EAGAIN => continue,
                    libc::ENOSYS => {
                        NO_OPENAT2.store(true, Ordering::Relaxed);
                        break;
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    let last = parts.pop().ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?;
    let mut dir = dup(root)?;
    for p in parts {
        dir = openat(dir.as_fd(), &cstr(p)?, DIR_FLAGS, 0)?;
    }
    openat(dir.as_fd(), &cstr(last)?, flags | libc::O_NOFOLLOW, 0)
}

/// Whether this macOS knows `O_NOFOLLOW_ANY` (macOS 11, Darwin 20): an older kernel ignores an
/// unknown open flag, so the flag is used only where it is known to be honoured.
#[cfg(target_os = "macos")]
fn macos_has_nofollow_any() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        let mut u = std::mem::MaybeUninit::<libc::utsname>::zeroed();
        // SAFETY: room for the result.
        if unsafe { libc::uname(u.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: uname filled it with NUL-terminated strings.
        let release = unsafe { CStr::from_ptr(u.assume_init_ref().release.as_ptr()) };
        let major = release.to_string_lossy().split('.').next().and_then(|m| m.parse::<u32>().ok());
        major.is_some_and(|m| m >= 20)
    })
}
