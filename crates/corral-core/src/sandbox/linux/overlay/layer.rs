//! A command's layer: a private directory holding the overlay's `upper` and `work`, under the
//! temp directory (never inside the working directory), and the stamp that tells a host change
//! made while the command ran from one made before.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
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
    /// The working directory's (device, inode) when the command started.
    mount_id: (u64, u64),
}

/// `path` opened `O_PATH` through no link in any component.
fn open_no_links(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = corral_keeper::child::open_dir_nofollow(&c)?;
    // SAFETY: a descriptor open_dir_nofollow just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn identity_of(path: &Path) -> io::Result<(u64, u64)> {
    corral_keeper::child::identity(open_no_links(path)?.as_raw_fd())
}

fn io_err(what: &str, e: io::Error) -> Error {
    Error::new(Code::Io, format!("LinuxSandbox: could not prepare the command's overlay layer: {what} ({e})."))
}

/// `dir`, made if missing, as a private directory of this user: a directory (not a link) this
/// user owns with mode 0700 (closed again where it was opened up). Another user of a shared
/// directory could have made it first, or left a link there: refused.
fn private_dir(dir: &Path) -> Result<()> {
    // SAFETY: raw syscall.
    let uid = unsafe { libc::geteuid() };
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("making its directory", e)),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| io_err("reading its directory", e))?;
    if !m.is_dir() || m.uid() != uid {
        return Err(Error::new(
            Code::Io,
            format!(
                "LinuxSandbox: {} is not a private directory of this user; the command was not run.",
                dir.display()
            ),
        ));
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err("setting its directory's mode", e))?;
    }
    Ok(())
}

/// Where layers are made: `changesDir` when given (the caller's own directory), else
/// `<temp>/corral-changes-<uid>` (a private directory of this user).
pub fn base_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = given {
        return Ok(dir.to_path_buf());
    }
    // SAFETY: raw syscall.
    let uid = unsafe { libc::geteuid() };
    let base = std::env::temp_dir().join(format!("corral-changes-{uid}"));
    private_dir(&base)?;
    Ok(base)
}

/// The directory of the layers of commands over `mount`: keyed by its real path, a private
/// directory of this user (its name can be guessed) in any `changesDir`.
pub fn keyed_dir(mount: &Path, changes_dir: Option<&Path>) -> Result<PathBuf> {
    // Checked once per process: a private directory of this user stays one (only root could
    // change it, and root can anyway).
    static CHECKED: std::sync::Mutex<Vec<(PathBuf, Option<PathBuf>, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let given = changes_dir.map(Path::to_path_buf);
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((.., keyed)) = checked.iter().find(|(m, c, k)| m == mount && *c == given && k.is_dir()) {
        return Ok(keyed.clone());
    }
    let key = hex::encode(&Sha256::digest(mount.as_os_str().as_bytes())[..8]);
    let keyed = base_dir(changes_dir)?.join(key);
    private_dir(&keyed)?;
    checked.push((mount.to_path_buf(), given, keyed.clone()));
    Ok(keyed)
}

/// When process `pid` started (clock ticks after boot, `/proc/<pid>/stat`'s 22nd field): with
/// its pid, what tells a live process from a later one that took its pid.
fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// Writes `value` to `path` whole (a temp file renamed over it).
fn write_json(path: &Path, value: &serde_json::Value) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, value.to_string())?;
    std::fs::rename(&tmp, path)
}

/// A layer a process that no longer runs left behind, and what it was doing with it.
pub struct Orphan {
    pub layer: Layer,
    /// `applying` (it died applying the changes), `pending` (kept), or `ran` (its command ran).
    pub state: String,
    pub command: String,
    /// The `protect` names and paths its sandbox had (at least `.git`).
    pub protected: super::Protected,
}

impl Layer {
    /// The layers below `mount`'s keyed directory whose process no longer runs, oldest first.
    pub fn orphans(mount: &Path, changes_dir: Option<&Path>) -> Result<Vec<Orphan>> {
        let keyed = keyed_dir(mount, changes_dir)?;
        let mut found = Vec::new();
        // SAFETY: raw syscall.
        let uid = unsafe { libc::geteuid() };
        for e in std::fs::read_dir(&keyed).map_err(|e| io_err("reading its directory", e))?.flatten() {
            let dir = e.path();
            // Only a directory of this user's, made as a layer is: not a link, not another's.
            let Ok(m) = std::fs::symlink_metadata(&dir) else { continue };
            let named = e.file_name().to_str().is_some_and(|n| n.starts_with("layer-"));
            if !named || !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
                continue;
            }
            let Ok(owner) = std::fs::read_to_string(dir.join("owner.json")) else { continue };
            let Ok(owner) = serde_json::from_str::<serde_json::Value>(&owner) else { continue };
            let num = |k: &str, i: usize| owner[k].get(i).and_then(serde_json::Value::as_u64).unwrap_or(0);
            let pid = owner["pid"].as_u64().unwrap_or(0) as u32;
            if started(pid).is_some_and(|s| Some(s) == owner["started"].as_u64()) {
                continue; // its process still runs (this one, or another)
            }
            let state = std::fs::read_to_string(dir.join("state.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .unwrap_or_default();
            let made = e.metadata().and_then(|m| m.modified()).ok();
            let layer = Layer {
                dir,
                stamp: (num("stamp", 0) as i64, num("stamp", 1) as i64),
                mount_id: (num("mount", 0), num("mount", 1)),
            };
            let what = |k: &str, or: &str| state[k].as_str().unwrap_or(or).to_string();
            let list = |k: &str| -> Vec<String> {
                state[k]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                    .unwrap_or_default()
            };
            let mut names = list("names");
            if !names.iter().any(|n| n == ".git") {
                names.push(".git".to_string());
            }
            let protected = super::Protected { names, paths: list("paths").into_iter().map(PathBuf::from).collect() };
            found.push((made, Orphan { state: what("state", "ran"), command: what("command", ""), layer, protected }));
        }
        found.sort_by_key(|(made, _)| *made);
        Ok(found.into_iter().map(|(_, o)| o).collect())
    }

    /// Says what is being done with the layer (`pending`, `applying`), for a later process to
    /// find if this one dies.
    pub fn mark(&self, state: &str, command: &str, protected: &super::Protected) {
        let paths: Vec<String> = protected.paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let state = serde_json::json!({ "state": state, "command": command, "names": protected.names, "paths": paths });
        let _ = write_json(&self.dir.join("state.json"), &state);
    }

    /// A new layer for a command over `mount` (its real path). The upper layer's top takes the
    /// mode of `mount`, which the overlay shows as the working directory's.
    pub fn new(mount: &Path, changes_dir: Option<&Path>) -> Result<Layer> {
        let keyed = keyed_dir(mount, changes_dir)?;
        let dir = keyed.join(format!("layer-{:016x}", rand::random::<u64>()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| io_err("making it", e))?;
        let mount_id = identity_of(mount).map_err(|e| io_err("opening the working directory", e))?;
        let layer = Layer { dir, stamp: (0, 0), mount_id };
        let mode = std::fs::metadata(mount).map_err(|e| io_err("reading the working directory", e))?.mode();
        for d in ["upper", "work"] {
            std::fs::DirBuilder::new().mode(0o700).create(layer.dir.join(d)).map_err(|e| io_err("making it", e))?;
        }
        std::fs::set_permissions(layer.dir.join("upper"), std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| io_err("setting its mode", e))?;
        let mut layer = layer;
        layer.stamp = Layer::take_stamp(&layer.dir.join("stamp")).map_err(|e| io_err("taking its stamp", e))?;
        let pid = std::process::id();
        let owner = serde_json::json!({
            "pid": pid,
            "started": started(pid),
            "mount": [layer.mount_id.0, layer.mount_id.1],
            "stamp": [layer.stamp.0, layer.stamp.1],
        });
        write_json(&layer.dir.join("owner.json"), &owner).map_err(|e| io_err("writing its owner", e))?;
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

    /// The working directory, opened through no link and checked to be the one the command
    /// started over (a parent moved and replaced since, by another command, say, is refused).
    pub fn open_mount(&self, mount: &Path) -> io::Result<OwnedFd> {
        let moved = || {
            io::Error::other("the working directory was moved or replaced while the command ran; nothing was applied")
        };
        let fd = open_no_links(mount).map_err(|_| moved())?;
        if corral_keeper::child::identity(fd.as_raw_fd())? != self.mount_id {
            return Err(moved());
        }
        Ok(fd)
    }

    /// The layer's upper directory, opened through no link.
    pub fn open_upper(&self) -> io::Result<OwnedFd> {
        open_no_links(&self.upper())
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
        let _ = remove_tree(&self.dir);
    }
}

/// Removes `dir` and everything below it without recursion, however deep (a command can nest
/// directories far past what a stack or the descriptor limit allows): one directory open at a
/// time, going back up through `..`. Directories left without permissions (the overlay's
/// `work/work`, a command's `chmod 000`) are opened up first; they are this user's own.
fn remove_tree(dir: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStringExt;
    if !std::fs::symlink_metadata(dir)?.is_dir() {
        return std::fs::remove_file(dir); // never what a link there leads to
    }
    let mut names: Vec<CString> = Vec::new();
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    let mut cur =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(dir)?;
    loop {
        let listing = std::fs::read_dir(format!("/proc/self/fd/{}", cur.as_raw_fd()))?;
        let mut down = None;
        for e in listing {
            let e = e?;
            let name =
                CString::new(e.file_name().into_vec()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            if e.file_type()?.is_dir() {
                down = Some(name);
                break;
            }
            // SAFETY: a descriptor of ours and a NUL-terminated name.
            unsafe { libc::unlinkat(cur.as_raw_fd(), name.as_ptr(), 0) };
        }
        match down {
            Some(name) => {
                // SAFETY: as above.
                unsafe { libc::fchmodat(cur.as_raw_fd(), name.as_ptr(), 0o700, 0) };
                // SAFETY: as above.
                let fd = unsafe {
                    libc::openat(
                        cur.as_raw_fd(),
                        name.as_ptr(),
                        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                    )
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                names.push(name);
                // SAFETY: a descriptor openat just gave us.
                cur = unsafe { std::fs::File::from_raw_fd(fd) };
            }
            None => {
                let Some(name) = names.pop() else { break };
                // SAFETY: as above.
                let fd = unsafe {
                    libc::openat(cur.as_raw_fd(), c"..".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a descriptor openat just gave us.
                cur = unsafe { std::fs::File::from_raw_fd(fd) };
                // SAFETY: as above.
                if unsafe { libc::unlinkat(cur.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) } < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
    }
    drop(cur);
    std::fs::remove_dir(dir)
}
