//! What must not have changed for a directory's listing, read before, to stand: its device,
//! inode and status-change time (ctime). Adding, removing or renaming an entry changes a
//! directory's ctime, and no unprivileged program can set a ctime back (`touch -d` moves the
//! modification time, and that change itself stamps the ctime with the clock). Three edges are
//! closed: a listing is kept only when the directory's ctime was at least `SETTLED_NS` older than
//! the clock when it was read (a change in the same clock tick as the read, or on a file system
//! that stores times to the second, could otherwise leave the ctime as it was); only on file
//! systems that keep ctime as POSIX says (`TRUSTED`); and never of an encrypted directory, whose
//! names change with its key and not its ctime. Elsewhere there is no stamp and every walk reads.
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
/// not given to another file system while one walk runs). `None`: not trusted.
#[derive(Default)]
pub struct Devices(#[cfg_attr(not(target_os = "linux"), allow(dead_code))] HashMap<u64, Option<i64>>);

#[cfg(target_os = "linux")]
impl Devices {
    /// The type of the trusted file system `st` lies on, or `None`.
    #[allow(clippy::unnecessary_cast)]
    fn trusted(&mut self, st: &libc::stat, fs_type: impl FnOnce() -> Option<i64>) -> Option<i64> {
        *self.0.entry(st.st_dev as u64).or_insert_with(|| fs_type().filter(|t| TRUSTED.contains(t)))
    }
}

/// File systems where a directory may be encrypted (fscrypt): ext4 and F2FS.
#[cfg(target_os = "linux")]
const ENCRYPTING: [i64; 2] = [0xEF53, 0xF2F52010];

/// Whether the directory `path` from `dir` (an empty path: `dir` itself) is encrypted, or cannot
/// be told: adding or removing its key changes the names it lists without changing its ctime, and
/// without an inotify event (a command could hide a `.git` behind a key it removes, and show it
/// after a walk's result was kept), so no listing of it is kept.
#[cfg(target_os = "linux")]
fn encrypted(dir: libc::c_int, path: &std::ffi::CStr) -> bool {
    const STATX_ATTR_ENCRYPTED: u64 = 0x800;
    corral_keeper::child::statx_attribute(dir, path, STATX_ATTR_ENCRYPTED) != Some(false)
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
    let fs = devices.trusted(&st, || {
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        (unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0).then_some(fs.f_type as i64)
    })?;
    if ENCRYPTING.contains(&fs) && encrypted(libc::AT_FDCWD, &c) {
        return None;
    }
    Some(Stamp::of(&st))
}

/// The stamp of the directory `name` in the open directory `dir` (not followed: a link is
/// `None`), without opening it; `None` too where its file system is not trusted or is one this
/// walk has not met yet (then opening it and `stamp` tell).
#[cfg(target_os = "linux")]
pub fn stamp_in(dir: std::os::fd::BorrowedFd<'_>, name: &std::ffi::CStr, devices: &Devices) -> Option<Stamp> {
    use std::os::fd::AsRawFd;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a zeroed plain-data buffer for the kernel to fill; a valid descriptor and a
    // NUL-terminated name.
    let r = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if r != 0 || st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    let fs = (*devices.0.get(&(st.st_dev as u64))?)?;
    if ENCRYPTING.contains(&fs) && encrypted(dir.as_raw_fd(), name) {
        return None;
    }
    Some(Stamp::of(&st))
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
    let fs = devices.trusted(&st, || fs_type(fd))?;
    if ENCRYPTING.contains(&fs) && encrypted(fd.as_raw_fd(), c"") {
        return None;
    }
    Some(Stamp::of(&st))
}

/// Whether a listing read from the clock time `read_at` (`clock()`, taken before the first stamp)
/// of a directory stamped `before` the read and `after` it may be kept.
pub fn settled(read_at: i128, before: Stamp, after: Option<Stamp>) -> bool {
    after == Some(before) && before.ctime_ns + SETTLED_NS <= read_at
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::fd::AsFd;
    use std::process::Command;

    /// An ext4 file system with encryption on, mounted from an image (root, a loop device and
    /// mkfs.ext4 needed; `None`, said as skipped, where they are missing). Unmounted when dropped.
    struct Mounted(tempfile::TempDir);

    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0.path().join("mnt")).status();
        }
    }

    fn encrypting_ext4() -> Option<Mounted> {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mounting an image needs root");
            return None;
        }
        let d = tempfile::tempdir().unwrap();
        let (img, mnt) = (d.path().join("fs.img"), d.path().join("mnt"));
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&img).unwrap().set_len(8 << 20).unwrap();
        let made = Command::new("mkfs.ext4").args(["-q", "-O", "encrypt"]).arg(&img).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfs.ext4 with encryption is not available here");
            return None;
        }
        if !Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&mnt).status().is_ok_and(|s| s.success()) {
            eprintln!("skipped: cannot mount a loop device here");
            return None;
        }
        Some(Mounted(d))
    }

    /// `FS_IOC_SET_ENCRYPTION_POLICY` with a v1 policy (AES-256-XTS names and contents): needs no
    /// key while the directory is empty.
    fn encrypt(dir: &std::path::Path) -> std::io::Result<()> {
        const FS_IOC_SET_ENCRYPTION_POLICY: libc::c_ulong = 0x800c_6613;
        let policy: [u8; 12] = [0, 1, 4, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        let f = std::fs::File::open(dir)?;
        // SAFETY: a valid descriptor and a 12-byte `fscrypt_policy_v1`.
        let r =
            unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), FS_IOC_SET_ENCRYPTION_POLICY, policy.as_ptr()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    #[test]
    fn an_encrypted_directory_has_no_stamp_so_no_listing_of_it_is_kept() {
        let Some(m) = encrypting_ext4() else { return };
        let mnt = m.0.path().join("mnt");
        let (plain, secret) = (mnt.join("plain"), mnt.join("secret"));
        std::fs::create_dir(&plain).unwrap();
        std::fs::create_dir(&secret).unwrap();
        if let Err(e) = encrypt(&secret) {
            eprintln!("skipped: this kernel does not encrypt directories here ({e})");
            return;
        }
        let mut devices = super::Devices::default();
        assert!(super::stamp_at(&plain, &mut devices).is_some(), "a plain directory of ext4 has a stamp");
        assert_eq!(super::stamp_at(&secret, &mut devices), None);
        let fd = std::fs::File::open(&secret).unwrap();
        assert_eq!(super::stamp(fd.as_fd(), &mut devices), None);
        let fd = std::fs::File::open(&plain).unwrap();
        assert!(super::stamp(fd.as_fd(), &mut devices).is_some());
    }
}
