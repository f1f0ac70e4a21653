//! `LinuxSandbox({ changes: 'overlay' })`: each command runs over an overlay of its working
//! directory (made in the command's own user and mount namespaces, `corral_keeper::child`), so
//! the host tree is untouched while it runs. When it ends, what its upper layer holds is read
//! (`capture`) and applied to the host (`apply`): protected names refused, host changes made in
//! the meantime refused per path, modes and links kept, deletions applied.

mod apply;
pub(super) mod capture;
pub mod layer;
pub mod pending;

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub use apply::Protected;
pub use layer::Layer;

use crate::checkpoints::ShellChange;
use crate::sandbox::ChangeRecord;
use crate::shell::changes::{Changes, Refusal};

/// Reads what the command left in `layer`, records it (with `record`), applies it to `mount`,
/// then removes the layer.
pub async fn finish(layer: Layer, mount: PathBuf, protected: Protected, record: Option<ChangeRecord>) -> Changes {
    finish_with(std::sync::Arc::new(layer), mount, protected, record, Default::default()).await.0
}

/// Paths corral changed since the pending commands started (earlier changesets it applied), not
/// the host: no conflict. Shared, so an apply whose caller gave up still adds what it applied.
pub(super) type Ours = std::sync::Arc<std::sync::Mutex<std::collections::HashSet<PathBuf>>>;

fn add_ours(ours: &Ours, changes: &Changes) {
    let mut set = ours.lock().unwrap_or_else(|p| p.into_inner());
    for p in changes.added.iter().chain(&changes.modified).chain(&changes.deleted) {
        set.insert(PathBuf::from(p.trim_end_matches('/')));
    }
}

/// As `finish`, with the paths corral changed since the command started (`ours`), to which what
/// this applies is added; `true` beside the report when nothing was applied because the
/// checkpoint could not be saved (the changeset may be tried again).
pub(super) async fn finish_with(
    layer: std::sync::Arc<Layer>,
    mount: PathBuf,
    protected: Protected,
    record: Option<ChangeRecord>,
    shared: Ours,
) -> (Changes, bool) {
    let keyed = record.is_some();
    let ours = std::sync::Arc::new(shared.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let ours_then = ours.clone();
    let shared_then = shared.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let ours = ours_then;
        // The working directory as the command had it (the same directory, reached through no
        // link: one of its parents may have been moved and replaced since), and the layer, both
        // held open: everything after goes through them.
        let root = layer.open_mount(&mount)?;
        let upper = layer.open_upper()?;
        let below = PathBuf::from(format!("/proc/self/fd/{}", root.as_raw_fd()));
        let ops = capture::capture(&layer.upper(), &capture::Lower::host(&below))?;
        let (ops, refused) = apply::plan(ops, root.as_fd(), &protected, layer.stamp, &ours);
        // From here a process that dies leaves the apply for the next one to finish.
        if !ops.is_empty() {
            layer.mark("applying", "", &protected);
        }
        if !keyed {
            // Nothing to record first: applied in the same hop to the blocking pool.
            let (applied, _) = apply::apply(&ops, upper.as_fd(), root.as_fd(), layer.stamp, &ours);
            add_ours(&shared_then, &applied);
            drop(upper);
            end(layer);
            return Ok(Err((applied, refused)));
        }
        let keys: Vec<Option<ShellChange>> = ops.iter().map(|op| shell_change(op, upper.as_fd())).collect();
        Ok::<_, std::io::Error>(Ok((layer, root, upper, ops, refused, keys)))
    })
    .await;
    let (layer, root, upper, ops, refused, keys) = match prepared {
        Ok(Ok(Ok(p))) => p,
        Ok(Ok(Err((applied, refused)))) => return (tidy(applied, refused, Vec::new()), false),
        Ok(Err(e)) => return (unread(e.to_string()), false),
        Err(e) => return (unread(e.to_string()), false),
    };
    let mut not_undoable: Vec<String> = Vec::new();
    let mut recorded: std::collections::HashSet<String> = Default::default();
    if let Some(r) = &record {
        let changes: Vec<ShellChange> = keys.iter().flatten().cloned().collect();
        match r.checkpoints.before_shell_changes(&*r.fs, &r.session, r.turn, &changes).await {
            Ok(flags) => {
                not_undoable = changes.iter().zip(flags).filter(|(_, ok)| !ok).map(|(c, _)| c.path.clone()).collect();
                recorded = changes.into_iter().map(|c| c.path).collect();
            }
            Err(e) => {
                // Nothing recorded: nothing applies.
                let reason = format!("not applied: its checkpoint could not be saved ({})", e.message);
                let mut out = Changes { refused, ..Changes::default() };
                out.refused.extend(
                    ops.iter().map(|o| Refusal { path: o.path().to_string_lossy().into(), reason: reason.clone() }),
                );
                return (out, true);
            }
        }
        // What has no key (a name that is not UTF-8) is applied unrecorded.
        not_undoable.extend(
            ops.iter().zip(&keys).filter(|(_, k)| k.is_none()).map(|(op, _)| op.path().to_string_lossy().into_owned()),
        );
    }
    let applied = tokio::task::spawn_blocking(move || {
        let out = apply::apply(&ops, upper.as_fd(), root.as_fd(), layer.stamp, &ours);
        add_ours(&shared, &out.0);
        drop(upper);
        end(layer);
        (out, ops)
    })
    .await;
    let ((mut changes, done), ops) = match applied {
        Ok(a) => a,
        Err(e) => return (unread(e.to_string()), false),
    };
    if let Some(r) = &record {
        let done: Vec<(String, bool)> = ops
            .iter()
            .zip(&done)
            .filter_map(|(op, d)| op.path().to_str().filter(|p| recorded.contains(*p)).map(|p| (p.to_string(), *d)))
            .collect();
        if let Err(e) = r.checkpoints.after_shell_changes(&r.session, r.turn, &done).await {
            changes.not_undoable.push(format!("(the checkpoint could not be completed: {})", e.message));
        }
    }
    (tidy(changes, refused, not_undoable), false)
}

/// A command's use of its layer is over: kept for the next command when it is empty and no
/// one else holds it (a pending changeset being applied), else removed with its last holder.
fn end(layer: std::sync::Arc<Layer>) {
    if let Ok(layer) = std::sync::Arc::try_unwrap(layer) {
        layer.recycle();
    }
}

/// The report: what was refused before applying first, every list sorted.
fn tidy(mut changes: Changes, refused: Vec<Refusal>, mut not_undoable: Vec<String>) -> Changes {
    changes.refused.splice(0..0, refused);
    not_undoable.sort();
    not_undoable.dedup();
    changes.not_undoable.extend(not_undoable);
    for list in [&mut changes.added, &mut changes.modified, &mut changes.deleted] {
        list.sort();
    }
    changes.refused.sort_by(|a, b| a.path.cmp(&b.path));
    changes
}

/// The change `op` makes, as checkpoints record it (`None`: nothing to record, or a name that is
/// not UTF-8).
fn shell_change(op: &capture::Op, upper: std::os::fd::BorrowedFd<'_>) -> Option<ShellChange> {
    let path = op.path().to_str()?.to_string();
    Some(match op {
        capture::Op::Put { entry: capture::Entry::File { .. }, .. } => {
            ShellChange::file_digest(path, &apply::digest(upper, op.path()).ok()?)
        }
        capture::Op::Put { entry: capture::Entry::Link { target }, .. } => ShellChange::link(path, target.as_bytes()),
        // A directory's mode: recorded as the directory it was (its mode with it).
        capture::Op::MakeDir { .. } | capture::Op::ModeDir { .. } => ShellChange::dir(path),
        capture::Op::Remove { .. } | capture::Op::RemoveDir { .. } => ShellChange::deleted(path),
        capture::Op::Refuse { .. } => return None,
    })
}

pub(super) fn unread(e: String) -> Changes {
    Changes {
        refused: vec![Refusal { path: ".".into(), reason: format!("the command's changes could not be read ({e})") }],
        ..Changes::default()
    }
}

/// As root, with a container engine on this machine: an overlay of a working directory mounted
/// on the host at `<layer>/merged`, for the engine to bind into a container in its place
/// (SubprocessSandbox). Unmounted when finished or dropped.
pub struct HostOverlay {
    layer: Option<Layer>,
    pub merged: PathBuf,
}

impl HostOverlay {
    pub fn mount(mount: &Path, changes_dir: Option<&Path>) -> crate::error::Result<HostOverlay> {
        let layer = Layer::new(mount, changes_dir)?;
        if layer.dir.starts_with(mount) {
            return Err(crate::error::Error::config(format!(
                "SubprocessSandbox: the command's layer would lie in {}, which the container sees; give the SandboxShell a changesDir outside its cwd.",
                mount.display()
            )));
        }
        let merged = layer.dir.join("merged");
        let failed = |what: &str, e: std::io::Error| {
            crate::error::Error::new(
                crate::error::Code::Io,
                format!("SubprocessSandbox: could not mount the command's overlay: {what} ({e})."),
            )
        };
        std::fs::create_dir(&merged).map_err(|e| failed("making its directory", e))?;
        let open = |p: &Path| -> std::io::Result<OwnedFd> {
            let c =
                CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
            let fd = corral_keeper::child::open_dir_nofollow(&c)?;
            // SAFETY: a descriptor open_dir_nofollow just gave us.
            Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
        };
        let lower = open(mount).map_err(|e| failed("opening the working directory", e))?;
        let (upper, work) = (open(&layer.upper()), open(&layer.dir.join("work")));
        let (upper, work) =
            (upper.map_err(|e| failed("opening its layer", e))?, work.map_err(|e| failed("opening its layer", e))?);
        // Every path through a descriptor; no metacopy (a file whose data stays below would land
        // empty) and no redirect (a renamed directory would be read as new and empty), and the
        // marks in trusted.overlay.* (this process is root).
        let data = format!(
            "lowerdir=/proc/self/fd/{},upperdir=/proc/self/fd/{},workdir=/proc/self/fd/{},metacopy=off,index=off,redirect_dir=off",
            lower.as_raw_fd(),
            upper.as_raw_fd(),
            work.as_raw_fd()
        );
        let (data, target) = (
            CString::new(data).map_err(|e| failed("its options", std::io::Error::other(e)))?,
            CString::new(merged.as_os_str().as_bytes()).map_err(|e| failed("its path", std::io::Error::other(e)))?,
        );
        let kind = c"overlay";
        // SAFETY: NUL-terminated strings.
        let r = unsafe {
            libc::mount(
                kind.as_ptr(),
                target.as_ptr(),
                kind.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                data.as_ptr().cast(),
            )
        };
        if r < 0 {
            return Err(failed("mount", std::io::Error::last_os_error()));
        }
        Ok(HostOverlay { layer: Some(layer), merged })
    }

    fn unmount(&self) {
        if let Ok(c) = CString::new(self.merged.as_os_str().as_bytes()) {
            // SAFETY: a NUL-terminated path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }

    /// Unmounts the overlay, then reads and applies what the command changed (`finish`).
    pub async fn finish(mut self, mount: PathBuf, protected: Protected, record: Option<ChangeRecord>) -> Changes {
        self.unmount();
        match self.layer.take() {
            Some(layer) => finish(layer, mount, protected, record).await,
            None => Changes::default(),
        }
    }
}

impl Drop for HostOverlay {
    fn drop(&mut self) {
        self.unmount();
    }
}

/// Whether this kernel mounts an overlay in a user namespace, with its layers in the temp
/// directory (tried in a throwaway child). As root, `userns` is the commands' namespace and
/// `owner` its root's host uid; otherwise the child makes a namespace of its own.
pub fn probe(userns: Option<&OwnedFd>, owner: u32) -> Result<(), String> {
    let base = std::env::temp_dir().join(format!("corral-overlay-probe-{:016x}", rand::random::<u64>()));
    std::fs::DirBuilder::new().mode(0o700).create(&base).map_err(|e| e.to_string())?;
    let result = probe_in(&base, userns, owner);
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn probe_in(base: &Path, userns: Option<&OwnedFd>, owner: u32) -> Result<(), String> {
    for d in ["lower", "upper", "work"] {
        std::fs::create_dir(base.join(d)).map_err(|e| e.to_string())?;
    }
    if userns.is_some() {
        for d in ["", "lower", "upper", "work"] {
            std::os::unix::fs::lchown(base.join(d), Some(owner), Some(super::HOST_GID)).map_err(|e| e.to_string())?;
        }
    }
    let c = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).map_err(|e| e.to_string());
    let lower = c(base.join("lower"))?;
    let data = c(PathBuf::from(format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        base.join("lower").display(),
        base.join("upper").display(),
        base.join("work").display()
    )))?;
    // SAFETY: raw syscalls.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = format!("{uid} {uid} 1");
    let gid_map = format!("{gid} {gid} 1");
    let ns = userns.map(|n| n.as_raw_fd());
    // SAFETY: the child makes only raw syscalls on what was prepared above, then exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if pid == 0 {
        // SAFETY: raw syscalls in the child; `_exit` with the step that failed.
        unsafe {
            let write = |path: &std::ffi::CStr, data: &[u8]| -> bool {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                fd >= 0 && libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize
            };
            match ns {
                Some(ns) => {
                    if libc::setns(ns, libc::CLONE_NEWUSER) < 0
                        || libc::syscall(libc::SYS_setresgid, 0u32, 0u32, 0u32) < 0
                        || libc::syscall(libc::SYS_setresuid, 0u32, 0u32, 0u32) < 0
                    {
                        libc::_exit(2);
                    }
                }
                None => {
                    if libc::unshare(libc::CLONE_NEWUSER) < 0
                        || !write(c"/proc/self/setgroups", b"deny")
                        || !write(c"/proc/self/uid_map", uid_map.as_bytes())
                        || !write(c"/proc/self/gid_map", gid_map.as_bytes())
                    {
                        libc::_exit(2);
                    }
                }
            }
            if libc::unshare(libc::CLONE_NEWNS) < 0 {
                libc::_exit(3);
            }
            let none = std::ptr::null();
            if libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_PRIVATE, none.cast()) < 0 {
                libc::_exit(4);
            }
            let kind = c"overlay".as_ptr();
            if libc::mount(kind, lower.as_ptr(), kind, libc::MS_NOSUID | libc::MS_NODEV, data.as_ptr().cast()) < 0 {
                libc::_exit(5);
            }
            libc::_exit(0);
        }
    }
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        (true, 0) => Ok(()),
        (true, 2) => Err("the user namespace could not be entered".into()),
        (true, 5) => Err("the kernel refused the overlay mount".into()),
        _ => Err("a mount namespace could not be made".into()),
    }
}
