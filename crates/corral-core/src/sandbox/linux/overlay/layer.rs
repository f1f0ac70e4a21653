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
    /// The layer's directory, locked (`flock`) for as long as this process holds the layer:
    /// another process (or another shell of this one) looking for layers left behind skips it.
    lock: OwnedFd,
    /// Removed when dropped. A layer left behind is not, until it is adopted: a listing that
    /// stops part way leaves it for the next to find.
    remove: bool,
    /// Its owner file (`owner.<pid>.<started>.<device>.<inode>.<s>.<ns>`: the process that
    /// holds it, the working directory and the stamp, in its name: an empty file costs little
    /// to make and remove), `None` for a layer a process left behind.
    owner: Option<PathBuf>,
    /// Made by `take`: kept for the next command over the same directory when it ends empty.
    reusable: bool,
}

/// Layers whose commands changed nothing, kept for the next command (their directories, made
/// and removed for every command, cost more than the rest of a layer).
static POOL: std::sync::Mutex<Vec<Layer>> = std::sync::Mutex::new(Vec::new());
/// The most layers kept in the pool.
const POOL_MAX: usize = 8;

/// At exit, the pool's layers are removed (a process killed leaves them for the next to find:
/// a layer with nothing in it is removed, never listed).
extern "C" fn empty_pool() {
    if let Ok(mut pool) = POOL.lock() {
        pool.clear();
    }
}

/// `dir` opened through no link and locked for this holder alone; `None` when another holds it.
fn lock(dir: &Path) -> io::Result<Option<OwnedFd>> {
    let fd = open_no_links(dir)?;
    // `O_PATH` descriptors cannot be locked: the directory itself, opened read-only.
    // SAFETY: a descriptor of ours and a NUL-terminated name.
    let raw =
        unsafe { libc::openat(fd.as_raw_fd(), c".".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat just gave us.
    let dir = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: a descriptor of ours.
    if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(dir))
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

/// What a layer's owner file says.
struct Owner {
    pid: u32,
    started: u64,
    mount: (u64, u64),
    stamp: Stamp,
}

/// The owner of the layer in `dir`: from its owner file's name (`owner.json` as earlier versions
/// wrote it too).
fn owner_of(dir: &Path) -> Option<Owner> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("owner.")) else { continue };
        let f: Vec<&str> = rest.split('.').collect();
        if f.len() == 6 {
            let n = |i: usize| f[i].parse::<u64>().ok();
            return Some(Owner {
                pid: n(0)? as u32,
                started: n(1)?,
                mount: (n(2)?, n(3)?),
                stamp: (f[4].parse().ok()?, f[5].parse().ok()?),
            });
        }
        if rest == "json" {
            let owner: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(e.path()).ok()?).ok()?;
            let num = |k: &str, i: usize| owner[k].get(i).and_then(serde_json::Value::as_u64).unwrap_or(0);
            return Some(Owner {
                pid: owner["pid"].as_u64()? as u32,
                started: owner["started"].as_u64().unwrap_or(0),
                mount: (num("mount", 0), num("mount", 1)),
                stamp: (num("stamp", 0) as i64, num("stamp", 1) as i64),
            });
        }
    }
    None
}

/// Whether the directory `fd` is open on has an extended attribute other than the overlay's own
/// mark of its upper layer (`overlay.uuid`, which it sets on every mount and reads back on the
/// next).
fn has_own_xattrs(fd: &OwnedFd) -> bool {
    let mut buf = vec![0u8; 256];
    // SAFETY: a descriptor of ours and a buffer of the length given.
    let n = unsafe { libc::flistxattr(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        // Too many to list in 256 bytes (or unreadable): more than the overlay's own.
        return true;
    }
    buf[..n as usize]
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .any(|name| name != b"user.overlay.uuid" && name != b"trusted.overlay.uuid")
}

/// `name` in the directory `dir` is open on, opened with `flags` and never through a link.
fn open_in(dir: &OwnedFd, name: &std::ffi::CStr, flags: libc::c_int, mode: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: a descriptor of ours and a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a descriptor of ours and a buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn fchmod(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    // SAFETY: a descriptor of ours.
    if unsafe { libc::fchmod(fd.as_raw_fd(), mode) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the directory `fd` is open on has no entry.
fn empty(fd: &OwnedFd) -> bool {
    std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).is_ok_and(|mut e| e.next().is_none())
}

/// The inode flags (`chattr`) of what `fd` is open on; `None` where the file system has none.
fn inode_flags(fd: &OwnedFd) -> Option<libc::c_long> {
    let mut flags: libc::c_long = 0;
    // SAFETY: a descriptor of ours and a buffer of the size FS_IOC_GETFLAGS writes.
    (unsafe { libc::ioctl(fd.as_raw_fd(), libc::FS_IOC_GETFLAGS as _, &mut flags) } == 0).then_some(flags)
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
            // Held by a live holder (a process, or another shell of this one): not left behind.
            let Ok(Some(held)) = lock(&dir) else { continue };
            let mut layer =
                Layer { dir, stamp: (0, 0), mount_id: (0, 0), lock: held, remove: false, owner: None, reusable: false };
            // Not yet named (being made), or named by a process that still runs: not left behind.
            let Some(owner) = owner_of(&layer.dir) else { continue };
            if started(owner.pid).is_some_and(|s| s == owner.started) {
                continue;
            }
            // A layer with nothing in it (its command changed nothing, or all was applied) is
            // removed, never listed.
            if layer.is_empty() {
                layer.remove = true;
                continue;
            }
            (layer.stamp, layer.mount_id) = (owner.stamp, owner.mount);
            let state = std::fs::read_to_string(layer.dir.join("state.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .unwrap_or_default();
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
            found.push(Orphan { state: what("state", "ran"), command: what("command", ""), layer, protected });
        }
        // In the order their commands started (a directory's own times change as it is used).
        found.sort_by_key(|o| o.layer.stamp);
        Ok(found)
    }

    /// Taken over by this process: removed when dropped, as a layer of its own.
    pub fn adopt(&mut self) {
        self.remove = true;
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
        Layer::fresh(&keyed_dir(mount, changes_dir)?, mount, false)
    }

    /// As `new`, or a layer an earlier command over `mount` left empty, stamped anew; kept for
    /// the next command again when this one changes nothing (`recycle`).
    pub fn take(mount: &Path, changes_dir: Option<&Path>) -> Result<Layer> {
        let keyed = keyed_dir(mount, changes_dir)?;
        let pooled = {
            let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
            pool.iter().position(|l| l.dir.parent() == Some(keyed.as_path())).map(|i| pool.swap_remove(i))
        };
        let Some(mut layer) = pooled else { return Layer::fresh(&keyed, mount, true) };
        // Checked again: while it waited, a command of another sandbox given the temp directory
        // could have put something in it (or a cleaner removed it).
        let mount_id = identity_of(mount).map_err(|e| io_err("opening the working directory", e))?;
        if mount_id != layer.mount_id || !layer.fit() {
            drop(layer);
            return Layer::fresh(&keyed, mount, true);
        }
        layer.prepare(mount)?;
        Ok(layer)
    }

    fn fresh(keyed: &Path, mount: &Path, reusable: bool) -> Result<Layer> {
        let (dir, held) = loop {
            let dir = keyed.join(format!("layer-{:016x}", rand::random::<u64>()));
            std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| io_err("making it", e))?;
            match lock(&dir) {
                Ok(Some(held)) => break (dir, held),
                // A look for layers left behind holds it for a moment: another name.
                Ok(None) => continue,
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(io_err("locking it", e));
                }
            }
        };
        // From here the layer is removed if anything fails.
        let mut layer = Layer { dir, stamp: (0, 0), mount_id: (0, 0), lock: held, remove: true, owner: None, reusable };
        layer.mount_id = identity_of(mount).map_err(|e| io_err("opening the working directory", e))?;
        for d in ["upper", "work"] {
            std::fs::DirBuilder::new().mode(0o700).create(layer.dir.join(d)).map_err(|e| io_err("making it", e))?;
        }
        layer.prepare(mount)?;
        Ok(layer)
    }

    /// Gives the upper layer's top the mode of `mount`, takes the stamp and names the owner;
    /// every step through the layer's own descriptor, never through a link.
    fn prepare(&mut self, mount: &Path) -> Result<()> {
        let mode = std::fs::metadata(mount).map_err(|e| io_err("reading the working directory", e))?.mode();
        let upper = self.upper_dir().map_err(|e| io_err("opening it", e))?;
        fchmod(&upper, mode & 0o7777).map_err(|e| io_err("setting its mode", e))?;
        let old = match &self.owner {
            Some(f) => CString::new(f.file_name().unwrap_or_default().as_bytes()).unwrap_or_default(),
            None => c"owner.new".to_owned(),
        };
        let creating = if self.owner.is_none() { libc::O_CREAT | libc::O_EXCL } else { 0 };
        let file =
            open_in(&self.lock, &old, libc::O_RDONLY | creating, 0o600).map_err(|e| io_err("taking its stamp", e))?;
        self.stamp = Layer::take_stamp(&file).map_err(|e| io_err("taking its stamp", e))?;
        let pid = std::process::id();
        let name = format!(
            "owner.{pid}.{}.{}.{}.{}.{}",
            started(pid).unwrap_or(0),
            self.mount_id.0,
            self.mount_id.1,
            self.stamp.0,
            self.stamp.1
        );
        let new =
            CString::new(name.as_str()).map_err(|_| io_err("naming its owner", io::ErrorKind::InvalidInput.into()))?;
        let l = self.lock.as_raw_fd();
        // SAFETY: descriptors of ours and NUL-terminated names.
        if unsafe { libc::renameat(l, old.as_ptr(), l, new.as_ptr()) } < 0 {
            return Err(io_err("naming its owner", io::Error::last_os_error()));
        }
        self.owner = Some(self.dir.join(name));
        Ok(())
    }

    /// The layer's upper directory, opened from the layer's own descriptor through no link.
    fn upper_dir(&self) -> io::Result<OwnedFd> {
        open_in(&self.lock, c"upper", libc::O_RDONLY | libc::O_DIRECTORY, 0)
    }

    /// Whether nothing is in the layer's upper directory (its top's mode aside): what a command
    /// that changed nothing leaves.
    pub fn is_empty(&self) -> bool {
        self.upper_dir().is_ok_and(|u| empty(&u))
    }

    /// Whether the layer is as it was made, for another command: its upper directory a
    /// directory (not a link) with nothing in it, of the layer's owner, with no extended
    /// attribute but the overlay's own and the layer's inode flags.
    fn fit(&self) -> bool {
        let Ok(upper) = self.upper_dir() else { return false };
        let (Ok(u), Ok(d)) = (fstat(&upper), fstat(&self.lock)) else { return false };
        empty(&upper)
            && (u.st_uid, u.st_gid) == (d.st_uid, d.st_gid)
            && !has_own_xattrs(&upper)
            && inode_flags(&upper) == inode_flags(&self.lock)
    }

    /// A command that was stopped (a timeout, an abort, a signal) may have left a process that
    /// still writes: its layer is never used again.
    pub fn forgo_reuse(&mut self) {
        self.reusable = false;
    }

    /// Ends a command's use of the layer: kept for the next command over the same directory when
    /// the command left it as it was made (`fit`), else removed.
    pub fn recycle(self) {
        if !self.reusable || !self.remove || !self.fit() {
            return;
        }
        // SAFETY: a descriptor of ours and a NUL-terminated name (gone already is fine).
        unsafe { libc::unlinkat(self.lock.as_raw_fd(), c"state.json".as_ptr(), 0) };
        // The modes a capture opened were of what the layer held; none of it is left.
        // SAFETY: as above.
        unsafe { libc::unlinkat(self.lock.as_raw_fd(), super::capture::JOURNAL.as_ptr(), 0) };
        let mut pool = POOL.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_MAX {
            static AT_EXIT: std::sync::Once = std::sync::Once::new();
            // SAFETY: registering a function with no arguments that touches only the pool.
            AT_EXIT.call_once(|| unsafe {
                libc::atexit(empty_pool);
            });
            pool.push(self);
        }
    }

    /// A change time no earlier than any change made after this call returns. The file is
    /// changed twice, its change time read in between: on file systems with fine-grained
    /// change times (Linux 6.13), the second change is then stamped finer than any coarse time
    /// handed out before it.
    fn take_stamp(file: &OwnedFd) -> io::Result<Stamp> {
        fchmod(file, 0o600)?;
        fstat(file)?;
        fchmod(file, 0o600)?;
        let st = fstat(file)?;
        Ok((st.st_ctime, st.st_ctime_nsec))
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
        if self.remove {
            let _ = remove_tree(&self.dir);
        }
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
