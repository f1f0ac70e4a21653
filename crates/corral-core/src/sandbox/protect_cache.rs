//! What the protected-name walks read of each directory, kept between commands, so that a
//! sandbox's every command does not read its whole tree twice (a harness session's `/tmp` holds
//! an agent's installed packages: thousands of directories).
//!
//! A listing is used again only while its directory's *status-change time* (ctime), device and
//! inode are what they were when it was read. Adding, removing or renaming an entry changes the
//! directory's ctime, and no program can set a ctime back (`touch -d` moves the modification
//! time, and that change itself stamps the ctime with the clock): a `.git` made since is always
//! seen. Two edges are closed: a listing is kept only when the directory's ctime was at least
//! `SETTLED` older than the clock when it was read (a change in the same clock tick as the read
//! could otherwise leave the ctime as it was), and only on file systems that keep ctime as
//! POSIX says (ext4, XFS, Btrfs, tmpfs, overlayfs, F2FS, ZFS); elsewhere every walk reads.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// How much older than the clock a directory's ctime must be for its listing to be kept.
const SETTLED_NS: i128 = 2_000_000_000;
/// The most listings kept; past it the cache starts over.
const MAX_LISTINGS: usize = 100_000;

/// A directory as `stat` sees it: what must not have changed for a listing to stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    ctime_ns: i128,
}

impl Stamp {
    /// The directory's device and inode.
    #[cfg(target_os = "linux")]
    pub fn dev_ino(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    // The field types differ between targets.
    #[cfg(target_os = "linux")]
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &libc::stat) -> Stamp {
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
        }
    }
}

/// One directory's entries that a walk needs: its subdirectories, and the entries named one of
/// the walk's names (with whether each is a link).
#[derive(Debug, Default)]
pub struct Listing {
    pub dirs: Vec<OsString>,
    pub named: Vec<(OsString, bool)>,
}

/// The clock now, in nanoseconds since the epoch: take it before reading a directory, for `put`.
pub fn clock() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

#[cfg(target_os = "linux")]
use crate::fs::local::{fs_type, TRUSTED};

/// The stamp of the open directory `fd`, or `None` where its file system is not trusted.
#[cfg(not(target_os = "linux"))]
pub fn stamp(_fd: std::os::fd::BorrowedFd<'_>, _devices: &mut Devices) -> Option<Stamp> {
    None
}

/// The stamp of the directory at `path` (not followed), or `None`.
#[cfg(not(target_os = "linux"))]
pub fn stamp_at(_path: &Path, _devices: &mut Devices) -> Option<Stamp> {
    None
}

/// The file systems one walk has met, by device: a directory on a device seen before is on the
/// same file system, so its type is asked once a device, not once a directory (a device number is
/// not given to another file system while one walk runs).
#[derive(Default)]
pub struct Devices(#[cfg_attr(not(target_os = "linux"), allow(dead_code))] HashMap<u64, bool>);

#[cfg(target_os = "linux")]
impl Devices {
    #[allow(clippy::unnecessary_cast)]
    fn trusted(&mut self, st: &libc::stat, fs_type: impl FnOnce() -> Option<i64>) -> bool {
        *self.0.entry(st.st_dev as u64).or_insert_with(|| fs_type().is_some_and(|t| TRUSTED.contains(&t)))
    }
}

/// The stamp of the directory at `path` (not followed: a link is `None`), or `None` where its
/// file system is not trusted.
#[cfg(target_os = "linux")]
#[allow(clippy::unnecessary_cast)]
pub fn stamp_at(path: &Path, devices: &mut Devices) -> Option<Stamp> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: zeroed plain-data buffers for the kernel to fill; a NUL-terminated path.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::lstat(c.as_ptr(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    let trusted = devices.trusted(&st, || {
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0).then_some(fs.f_type as i64)
    });
    trusted.then(|| Stamp::of(&st))
}

/// The stamp of the open directory `fd`, or `None` where its file system is not trusted.
#[cfg(target_os = "linux")]
pub fn stamp(fd: std::os::fd::BorrowedFd<'_>, devices: &mut Devices) -> Option<Stamp> {
    use std::os::fd::AsRawFd;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a zeroed plain-data buffer for the kernel to fill; a valid descriptor.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    devices.trusted(&st, || fs_type(fd)).then(|| Stamp::of(&st))
}

/// Which walk a listing is for: its names (and how they compare) and the subtrees it leaves out.
pub fn walk_key(names: &[&str], folded: bool, skip: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (names, folded, skip).hash(&mut h);
    h.finish()
}

type Listings = HashMap<(u64, PathBuf), (Stamp, Arc<Listing>)>;
static CACHE: LazyLock<Mutex<Listings>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The listing of `dir` read before by the walk `key`, when `dir` is as it was then.
pub fn get(key: u64, dir: &Path, now: Stamp) -> Option<Arc<Listing>> {
    let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    match cache.get(&(key, dir.to_path_buf())) {
        Some((s, l)) if *s == now => Some(l.clone()),
        _ => None,
    }
}

/// Keeps the listing of `dir`, read from the clock time `read_at` (`clock()`) when it had the
/// stamp `before`, if it still has it (`after`, taken after the read) and it had settled by then.
pub fn put(key: u64, dir: &Path, read_at: i128, before: Stamp, after: Option<Stamp>, listing: Arc<Listing>) {
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if after != Some(before) || before.ctime_ns + SETTLED_NS > read_at {
        cache.remove(&(key, dir.to_path_buf()));
        return;
    }
    if cache.len() >= MAX_LISTINGS {
        cache.clear();
    }
    cache.insert((key, dir.to_path_buf()), (before, listing));
}
