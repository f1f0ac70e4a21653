//! What must not have changed for a directory's listing, read before, to stand: its device,
//! inode and status-change time (ctime). Adding, removing or renaming an entry changes a
//! directory's ctime, and no program can set a ctime back (`touch -d` moves the modification
//! time, and that change itself stamps the ctime with the clock). Two edges are closed: a listing
//! is kept only when the directory's ctime was at least `SETTLED_NS` older than the clock when it
//! was read (a change in the same clock tick as the read, or on a file system that stores times to
//! the second, could otherwise leave the ctime as it was), and only on file systems that keep
//! ctime as POSIX says (`TRUSTED`); elsewhere there is no stamp and every walk reads.
//! The protected-name walks (`sandbox::protect`) and the file tools' walks (`listings`) keep
//! listings by these rules.

use std::collections::HashMap;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::{fs_type, TRUSTED};

/// How much older than the clock a directory's ctime must be for its listing to be kept.
const SETTLED_NS: i128 = 2_000_000_000;

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

/// The clock now, in nanoseconds since the epoch: take it before reading a directory, for `put`.
pub fn clock() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

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

/// Whether a listing read from the clock time `read_at` (`clock()`, taken before the first stamp)
/// of a directory stamped `before` the read and `after` it may be kept.
pub fn settled(read_at: i128, before: Stamp, after: Option<Stamp>) -> bool {
    after == Some(before) && before.ctime_ns + SETTLED_NS <= read_at
}
