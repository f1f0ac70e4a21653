//! A command's layer: a private directory holding the overlay's `upper` and `work`, under the
//! temp directory (never inside the working directory), and the stamp that tells a host change
//! made while the command ran from one made before.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Code, Error, Result};

/// A change time: seconds and nanoseconds.
pub type Stamp = (i64, i64);

pub fn ctime(m: &std::fs::Metadata) -> Stamp {
    (m.ctime(), m.ctime_nsec())
}

pub struct Layer {
    pub dir: PathBuf,
    /// A host path whose change time is this or later was changed since the command started.
    pub stamp: Stamp,
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::new(Code::Io, format!("LinuxSandbox: could not prepare the command's overlay layer: {what} ({e})."))
}

/// `<temp>/corral-changes-<uid>`: made by this user, mode 0700, not a link; refused otherwise
/// (another user of a shared temp directory could have made it first). A `changesDir` given is
/// the caller's own and used as it is.
pub fn base_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    // SAFETY: raw syscall.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("corral-changes-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("making its directory", e)),
    }
    let m = std::fs::symlink_metadata(&base).map_err(|e| io_err("reading its directory", e))?;
    if m.is_dir() && m.uid() == uid && m.mode() & 0o077 != 0 {
        // Ours, but opened up since: closed again.
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err("setting its directory's mode", e))?;
    } else if !m.is_dir() || m.uid() != uid {
        return Err(Error::new(
            Code::Io,
            format!(
                "LinuxSandbox: {} is not a private directory of this user; the command was not run.",
                base.display()
            ),
        ));
    }
    Ok(base)
}

impl Layer {
    /// A new layer for a command over `mount` (its real path). The upper layer's top takes the
    /// mode of `mount`, which the overlay shows as the working directory's.
    pub fn new(mount: &Path, changes_dir: Option<&Path>) -> Result<Layer> {
        let base = base_dir(changes_dir)?;
        let key = hex::encode(&Sha256::digest(mount.as_os_str().as_bytes())[..8]);
        let keyed = base.join(key);
        match std::fs::DirBuilder::new().mode(0o700).create(&keyed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err("making its directory", e)),
        }
        let dir = keyed.join(format!("layer-{:016x}", rand::random::<u64>()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| io_err("making it", e))?;
        let layer = Layer { dir, stamp: (0, 0) };
        let mode = std::fs::metadata(mount).map_err(|e| io_err("reading the working directory", e))?.mode();
        for d in ["upper", "work"] {
            std::fs::DirBuilder::new().mode(0o700).create(layer.dir.join(d)).map_err(|e| io_err("making it", e))?;
        }
        std::fs::set_permissions(layer.dir.join("upper"), std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| io_err("setting its mode", e))?;
        let mut layer = layer;
        layer.stamp = Layer::take_stamp(&layer.dir.join("stamp")).map_err(|e| io_err("taking its stamp", e))?;
        Ok(layer)
    }

    /// A change time no earlier than any change made after this call returns. The file is
    /// changed twice, its change time read in between: on file systems with fine-grained
    /// change times (Linux 6.13), the second change is then stamped finer than any coarse time
    /// handed out before it.
    fn take_stamp(path: &Path) -> io::Result<Stamp> {
        let f = std::fs::OpenOptions::new().create_new(true).write(true).open(path)?;
        f.metadata()?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        Ok(ctime(&f.metadata()?))
    }

    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

}

/// A layer's directory as the child mounts it: opened through no link, and as root an idmapped
/// tree through the command's user namespace (so root-owned files below the overlay can be
/// copied up by the command's root).
pub fn descriptor(dir: &Path, userns: Option<&OwnedFd>) -> Result<OwnedFd> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|_| Error::config("a NUL byte in a path"))?;
    let fd = corral_keeper::child::open_dir_nofollow(&path).map_err(|e| io_err("opening it", e))?;
    // SAFETY: a descriptor open_dir_nofollow just gave us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match userns {
        Some(ns) => super::super::userns::tree(fd.as_raw_fd(), Some(ns)).map_err(|e| io_err("idmapping it", e)),
        None => Ok(fd),
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        // The overlay's own `work/work` is left without permissions; what remains of a command's
        // upper layer may be too.
        let _ = open_up(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Gives this user search and write permission on every directory below `dir` (they are its own).
fn open_up(dir: &Path) -> io::Result<()> {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            open_up(&e.path())?;
        }
    }
    Ok(())
}
