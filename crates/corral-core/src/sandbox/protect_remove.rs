//! Removing the protected names a command made (`protect::sweep`), safely while other commands
//! may still run in the same tree: the tree is walked through descriptors (`sweep_tree`), each
//! entry renamed aside first (no tool takes it for a `.git` any more), then removed, never
//! following a link, with the depth and the work of a removal bounded.

use std::path::{Path, PathBuf};

/// Why an entry was not removed whole, and the name it was left under (when renamed aside).
#[cfg(not(unix))]
pub struct Left {
    pub aside: Option<PathBuf>,
    pub error: std::io::Error,
}

/// The deepest directory chain removed (one descriptor per level).
#[cfg(unix)]
const MAX_DEPTH: usize = 512;
/// The most entries removed from one made entry.
#[cfg(unix)]
const MAX_ENTRIES: usize = 1_000_000;

fn aside_name(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut n = std::ffi::OsString::from(".corral-removed-");
    n.push(name);
    n.push(format!("-{:x}", rand::random::<u32>()));
    n
}

#[cfg(not(unix))]
pub fn remove_beneath(root: &Path, rel: &Path) -> Result<(), Left> {
    let path = root.join(rel);
    let name = rel.file_name().ok_or_else(|| Left { aside: None, error: std::io::ErrorKind::InvalidInput.into() })?;
    let aside_rel = rel.with_file_name(aside_name(name));
    let aside = root.join(&aside_rel);
    std::fs::rename(&path, &aside).map_err(|error| Left { aside: None, error })?;
    let meta = std::fs::symlink_metadata(&aside).map_err(|error| Left { aside: Some(aside_rel.clone()), error })?;
    let r = if meta.is_dir() { std::fs::remove_dir_all(&aside) } else { std::fs::remove_file(&aside) };
    r.map_err(|error| Left { aside: Some(aside_rel), error })
}

#[cfg(unix)]
mod fd {
    use std::ffi::{CStr, CString};
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

    pub fn cstr(b: &[u8]) -> io::Result<CString> {
        CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    }

    pub fn owned(r: libc::c_int) -> io::Result<OwnedFd> {
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just gave us.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    }

    pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        // SAFETY: a valid descriptor and a NUL-terminated name.
        owned(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) })
    }

    pub fn rename_in(dir: BorrowedFd<'_>, from: &CStr, to: &CStr) -> io::Result<()> {
        // SAFETY: a valid descriptor and NUL-terminated names.
        if unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: a valid descriptor and a NUL-terminated name.
        if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn is_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<bool> {
        // SAFETY: a zeroed stat is a valid buffer for fstatat to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, a NUL-terminated name and a stat buffer.
        if unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
    }

    /// At most this many names are read from a directory before they are removed.
    const BATCH: usize = 4096;

    /// Removes `name` in `dir` (a directory with everything in it), entering no link.
    pub fn remove_entry(dir: BorrowedFd<'_>, name: &CStr, depth: usize, budget: &mut usize) -> io::Result<()> {
        if !is_dir(dir, name)? {
            return unlinkat(dir, name, 0);
        }
        if depth >= super::MAX_DEPTH {
            return Err(io::Error::other(format!("deeper than {} directories", super::MAX_DEPTH)));
        }
        let mut sub = openat(dir, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        loop {
            // A batch of names, read afresh each round from a descriptor opened anew (removing
            // while reading could skip some, and a duplicate would share the offset).
            let mut names: Vec<CString> = Vec::new();
            let mut stream = nix::dir::Dir::from_fd(sub.try_clone()?).map_err(io::Error::from)?;
            for entry in stream.iter() {
                let entry = entry.map_err(io::Error::from)?;
                let n = entry.file_name();
                if n != c"." && n != c".." {
                    names.push(n.to_owned());
                    if names.len() == BATCH {
                        break;
                    }
                }
            }
            drop(stream);
            if names.is_empty() {
                break;
            }
            for n in &names {
                if *budget == 0 {
                    return Err(io::Error::other("more entries than corral removes at once"));
                }
                *budget -= 1;
                remove_entry(sub.as_fd(), n, depth + 1, budget)?;
            }
            sub = openat(dir, name, libc::O_RDONLY | libc::O_DIRECTORY)?;
        }
        unlinkat(dir, name, libc::AT_REMOVEDIR)
    }
}

/// What the watches say of the last sweep of a tree with the same names, skips and `before`.
struct LastSweep {
    /// The walks' key for these names and skips (`cache::walk_key`).
    walk: u64,
    /// The sweep's: that, and `before`.
    key: u64,
    /// The watches' generation now (`None`: no watches here).
    generation: Option<u64>,
    /// The root as it was opened: a kept sweep stands only for this very directory.
    root_id: Option<(u64, u64)>,
    /// Nothing that matters changed since such a sweep began and found nothing to remove or
    /// report: this one would find the same.
    found_nothing: bool,
}

#[cfg(unix)]
fn last_sweep(
    root: &Path,
    root_fd: std::os::fd::BorrowedFd<'_>,
    names: &[String],
    skip: &[PathBuf],
    before: &[(PathBuf, bool)],
) -> LastSweep {
    let name_strs: Vec<&str> = names.iter().map(String::as_str).collect();
    let walk = super::cache::walk_key(&name_strs, true, skip);
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (walk, before).hash(&mut h);
        h.finish()
    };
    #[cfg(target_os = "linux")]
    {
        let generation = super::watch::generation(&name_strs);
        let root_id = generation.and_then(|_| super::watch::fd_id(root_fd));
        let found_nothing = match (generation, root_id) {
            (Some(g), Some(id)) => super::watch::kept(key, root, id, g).is_some(),
            _ => false,
        };
        LastSweep { walk, key, generation, root_id, found_nothing }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (root, root_fd);
        LastSweep { walk, key, generation: None, root_id: None, found_nothing: false }
    }
}

/// Whether a sweep of `root` would find nothing, as the last one found (`sweep_tree`'s first
/// step, without its walk): a few system calls, for a caller that would otherwise hand the sweep
/// to another thread.
#[cfg(unix)]
pub fn finds_nothing(root: &Path, names: &[String], skip: &[PathBuf], before: &[(PathBuf, bool)]) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = fd::cstr(root.as_os_str().as_bytes()) else { return false };
    // SAFETY: a NUL-terminated path.
    let Ok(root_fd) =
        fd::owned(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) })
    else {
        return false;
    };
    last_sweep(root, root_fd.as_fd(), names, skip, before).found_nothing
}

/// After a command: walks `root` through descriptors (no link followed, no path length limit, a
/// directory the command made unreadable opened for the walk by giving its owner read and
/// search back for that moment), and removes every entry named one of `names` (ASCII case
/// folded: a case-insensitive host's git reads `.GIT` as `.git`) that is not in `before` as
/// it was (a link that became a directory counts as made). Never looks inside a match or a
/// `skip` subtree. Removes as it goes, so no count of matches stops it, and goes on past a
/// directory it cannot look through, naming it. Returns the notes for the command's result.
#[cfg(unix)]
pub fn sweep_tree(root: &Path, names: &[String], skip: &[PathBuf], before: &[(PathBuf, bool)]) -> Vec<String> {
    use std::collections::HashMap;
    use std::ffi::CString;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::sync::Arc;

    use super::cache;

    enum Item {
        Dir { parent: Arc<OwnedFd>, name: CString, rel: PathBuf },
        Restore { parent: Arc<OwnedFd>, name: CString, mode: libc::mode_t },
    }
    let mut notes = Vec::new();
    let Ok(c) = fd::cstr(root.as_os_str().as_bytes()) else { return notes };
    // SAFETY: a NUL-terminated path.
    let root_fd =
        match fd::owned(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) }) {
            Ok(f) => Arc::new(f),
            Err(e) => {
                notes.push(format!("the working directory could not be looked through for protected names ({e})"));
                return notes;
            }
        };
    let last = last_sweep(root, root_fd.as_fd(), names, skip, before);
    if last.found_nothing {
        return notes;
    }
    let (key, sweep_key, generation, root_id) = (last.walk, last.key, last.generation, last.root_id);
    let before: HashMap<&Path, bool> = before.iter().map(|(p, l)| (p.as_path(), *l)).collect();
    let matches = |n: &[u8]| names.iter().any(|x| x.as_bytes().eq_ignore_ascii_case(n));
    #[allow(unused_mut)]
    let mut watching = generation.is_some() && root_id.is_some();
    let unreadable = |rel: &Path, e: &std::io::Error| {
        format!("could not look through {} for protected names the command may have made ({e})", rel.display())
    };
    let mut stack: Vec<Item> = Vec::new();
    let mut devices = cache::Devices::default();
    let mut current: Option<(Arc<OwnedFd>, PathBuf)> = Some((root_fd, PathBuf::new()));
    loop {
        let (dir, rel) = match current.take() {
            Some(d) => d,
            None => match stack.pop() {
                None => break,
                Some(Item::Restore { parent, name, mode }) => {
                    // SAFETY: a valid descriptor and a NUL-terminated name.
                    unsafe { libc::fchmodat(parent.as_raw_fd(), name.as_ptr(), mode, 0) };
                    continue;
                }
                Some(Item::Dir { parent, name, rel }) => {
                    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
                    match fd::openat(parent.as_fd(), &name, flags) {
                        Ok(f) => (Arc::new(f), rel),
                        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                            // A directory the command made unreadable to its owner: opened for the
                            // walk with its owner's read and search given back, then restored.
                            let mut st: libc::stat = unsafe { std::mem::zeroed() };
                            // SAFETY: a valid descriptor, a NUL-terminated name and a stat buffer.
                            let ok = unsafe { libc::fstatat(parent.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0
                                && st.st_mode & libc::S_IFMT == libc::S_IFDIR
                                // SAFETY: raw syscall.
                                && st.st_uid == unsafe { libc::geteuid() }
                                // SAFETY: as above.
                                && unsafe { libc::fchmodat(parent.as_raw_fd(), name.as_ptr(), (st.st_mode & 0o7777) | 0o700, 0) } == 0;
                            if !ok {
                                notes.push(unreadable(&rel, &e));
                                continue;
                            }
                            stack.push(Item::Restore {
                                parent: parent.clone(),
                                name: name.clone(),
                                mode: st.st_mode & 0o7777,
                            });
                            match fd::openat(parent.as_fd(), &name, flags) {
                                Ok(f) => (Arc::new(f), rel),
                                Err(e) => {
                                    notes.push(unreadable(&rel, &e));
                                    continue;
                                }
                            }
                        }
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                        Err(e) => {
                            notes.push(unreadable(&rel, &e));
                            continue;
                        }
                    }
                }
            },
        };
        let path = root.join(&rel);
        // Watched before it is read; a sweep with a directory that cannot be is not kept.
        #[cfg(target_os = "linux")]
        let stamp = if watching {
            let (stamp, watched) = super::watch::look(&path, || cache::stamp(dir.as_fd(), &mut devices));
            watching = watched;
            stamp
        } else {
            cache::stamp(dir.as_fd(), &mut devices)
        };
        #[cfg(not(target_os = "linux"))]
        let stamp = cache::stamp(dir.as_fd(), &mut devices);
        let listing = match stamp.and_then(|s| cache::get(key, &path, s)) {
            Some(listing) => listing,
            None => {
                let read_at = cache::clock();
                let entries: Vec<CString> =
                    match dir.try_clone().and_then(|d| nix::dir::Dir::from_fd(d).map_err(std::io::Error::from)) {
                        Ok(mut stream) => stream
                            .iter()
                            .filter_map(|e| e.ok())
                            .map(|e| e.file_name().to_owned())
                            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
                            .collect(),
                        Err(e) => {
                            notes.push(unreadable(&rel, &e));
                            continue;
                        }
                    };
                let mut listing = cache::Listing::default();
                for name in entries {
                    let full = path.join(std::ffi::OsStr::from_bytes(name.as_bytes()));
                    if skip.iter().any(|s| full.starts_with(s)) {
                        continue;
                    }
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    // SAFETY: a valid descriptor, a NUL-terminated name and a stat buffer.
                    if unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0
                    {
                        continue;
                    }
                    let kind = st.st_mode & libc::S_IFMT;
                    let name = std::ffi::OsString::from_vec(name.into_bytes());
                    if matches(name.as_bytes()) {
                        listing.named.push((name, kind == libc::S_IFLNK));
                    } else if kind == libc::S_IFDIR {
                        listing.dirs.push(name);
                    }
                }
                let listing = Arc::new(listing);
                if let Some(before) = stamp {
                    let after = cache::stamp(dir.as_fd(), &mut devices);
                    cache::put(key, &path, read_at, before, after, listing.clone());
                }
                listing
            }
        };
        for (name, is_link) in &listing.named {
            let child_rel = rel.join(name);
            if before.get(root.join(&child_rel).as_path()) != Some(is_link) {
                let Ok(c) = fd::cstr(name.as_bytes()) else { continue };
                notes.push(remove_at(dir.as_fd(), &c, &child_rel));
            }
        }
        for name in &listing.dirs {
            let Ok(c) = fd::cstr(name.as_bytes()) else { continue };
            stack.push(Item::Dir { parent: dir.clone(), name: c, rel: rel.join(name) });
        }
    }
    #[cfg(target_os = "linux")]
    if let (Some(g), Some(id), true, true) = (generation, root_id, watching, notes.is_empty()) {
        super::watch::keep(sweep_key, root, id, g, Vec::new());
    }
    let _ = (sweep_key, watching, root_id);
    notes
}

/// Renames `name` in `dir` aside, then removes it; the note that says which happened.
#[cfg(unix)]
fn remove_at(dir: std::os::fd::BorrowedFd<'_>, name: &std::ffi::CStr, rel: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let shown = rel.display();
    let aside = aside_name(std::ffi::OsStr::from_bytes(name.to_bytes()));
    let Ok(to) = fd::cstr(aside.as_bytes()) else {
        return format!("{shown} was made by the command and is protected, but could not be removed");
    };
    if let Err(e) = fd::rename_in(dir, name, &to) {
        return format!("{shown} was made by the command and is protected, but could not be removed ({e})");
    }
    let mut budget = MAX_ENTRIES;
    match fd::remove_entry(dir, &to, 0, &mut budget) {
        Ok(()) => format!("removed {shown}: made by the command, and protected"),
        Err(e) => format!(
            "{shown} was made by the command and is protected: moved aside to {} but not removed ({e})",
            rel.with_file_name(&aside).display()
        ),
    }
}
