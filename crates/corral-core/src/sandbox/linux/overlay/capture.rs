//! Reads a finished command's upper layer against the host tree below it: what it wrote, made,
//! deleted (whiteouts; opaque directories hide what was below them), as a list of operations in
//! the order they apply (parents before children). Reads only, but for opening up directories
//! the command closed to their owner (`Opened`).

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What goes to the host at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File { mode: u32 },
    Link { target: OsString },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The layer's file or link at `path` goes to the host; `existed`: the host has a file or
    /// link there (the change is a modification).
    Put { path: PathBuf, entry: Entry, existed: bool },
    /// A directory the host does not have; `empty`: nothing else of the change lies below it.
    MakeDir { path: PathBuf, mode: u32, empty: bool },
    /// A host directory's permission bits.
    ModeDir { path: PathBuf, mode: u32 },
    /// The host's file or link at `path` goes.
    Remove { path: PathBuf },
    /// The host's directory at `path` goes (what it held is removed by the operations before).
    RemoveDir { path: PathBuf },
    /// Something the layer holds that has no place in a working tree.
    Refuse { path: PathBuf, reason: &'static str },
}

impl Op {
    pub fn path(&self) -> &Path {
        match self {
            Op::Put { path, .. }
            | Op::MakeDir { path, .. }
            | Op::ModeDir { path, .. }
            | Op::Remove { path }
            | Op::RemoveDir { path }
            | Op::Refuse { path, .. } => path,
        }
    }
}

fn xattr(path: &Path, name: &std::ffi::CStr) -> Option<Vec<u8>> {
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = [0u8; 16];
    // SAFETY: NUL-terminated strings and a buffer of the size given.
    let n = unsafe { libc::lgetxattr(p.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (n >= 0).then(|| buf[..n as usize].to_vec())
}

/// An overlay's opaque directory: nothing of the layer below shows through it.
fn opaque(path: &Path) -> bool {
    [c"user.overlay.opaque", c"trusted.overlay.opaque"].iter().any(|n| xattr(path, n).as_deref() == Some(b"y"))
}

/// An overlay's whiteout: a character device 0/0, or (an upper layer on an overlay itself) an
/// empty file marked as one.
fn whiteout(path: &Path, m: &std::fs::Metadata) -> bool {
    (m.file_type().is_char_device() && m.rdev() == 0)
        || (m.is_file()
            && m.len() == 0
            && [c"user.overlay.whiteout", c"trusted.overlay.whiteout"].iter().any(|n| xattr(path, n).is_some()))
}

fn names(dir: &Path) -> io::Result<Vec<OsString>> {
    let mut v = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<Vec<_>>>()?;
    v.sort();
    Ok(v)
}

fn same_content(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else { return false };
    let (mut ba, mut bb) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let Ok(n) = fa.read(&mut ba) else { return false };
        if n == 0 {
            return fb.read(&mut bb[..1]).is_ok_and(|m| m == 0);
        }
        if fb.read_exact(&mut bb[..n]).is_err() || ba[..n] != bb[..n] {
            return false;
        }
    }
}

/// What a command's overlay had below its upper layer: the host tree, and over it (newest
/// first) the upper layers of commands whose changes are still pending, merged as the overlay
/// merged them (whiteouts hide, opaque directories stop the layers below).
pub struct Lower {
    pub layers: Vec<PathBuf>,
    pub host: PathBuf,
}

impl Lower {
    pub fn host(host: &Path) -> Lower {
        Lower { layers: Vec::new(), host: host.to_path_buf() }
    }

    /// Where `rel` is found, and its status (a link not followed); `None` when the merged tree
    /// has nothing there.
    pub fn find(&self, rel: &Path) -> Option<(PathBuf, std::fs::Metadata)> {
        for layer in &self.layers {
            let mut stop = false;
            let mut at = layer.clone();
            let comps: Vec<_> = rel.components().collect();
            for (i, c) in comps.iter().enumerate() {
                at.push(c);
                let Ok(m) = std::fs::symlink_metadata(&at) else { break };
                if whiteout(&at, &m) {
                    return None;
                }
                if i + 1 == comps.len() {
                    return Some((at, m));
                }
                if !m.is_dir() {
                    return None; // a file or a link here hides the layers below
                }
                if opaque(&at) {
                    stop = true;
                }
            }
            if stop {
                return None;
            }
        }
        let at = self.host.join(rel);
        std::fs::symlink_metadata(&at).ok().map(|m| (at, m))
    }

    /// The names the merged directory `rel` holds, sorted.
    pub fn names(&self, rel: &Path) -> Vec<OsString> {
        let mut seen = std::collections::BTreeSet::new();
        let mut hidden = std::collections::BTreeSet::new();
        for layer in &self.layers {
            let dir = layer.join(rel);
            let Ok(m) = std::fs::symlink_metadata(&dir) else { continue };
            if !m.is_dir() {
                return seen.into_iter().collect();
            }
            for n in names(&dir).unwrap_or_default() {
                let p = dir.join(&n);
                let whited = std::fs::symlink_metadata(&p).is_ok_and(|m| whiteout(&p, &m));
                if whited {
                    hidden.insert(n);
                } else if !hidden.contains(&n) {
                    seen.insert(n);
                }
            }
            if opaque(&dir) {
                return seen.into_iter().collect();
            }
        }
        for n in names(&self.host.join(rel)).unwrap_or_default() {
            if !hidden.contains(&n) {
                seen.insert(n);
            }
        }
        seen.into_iter().collect()
    }
}

/// The layer's directories a command left closed to their owner (`chmod 555 out` after writing
/// `out/f`, `chmod 300 out`): as an unprivileged user this process could neither read them nor
/// move a file out of them (the command's root could: it is root over this user's files only
/// in its own namespace). Each is opened (`u+rwx`) the first time a capture meets it, after its
/// mode as the command left it is written to the layer's `modes` journal (`<octal> <path>\0`),
/// which every later capture reads: the change is the command's mode, whoever reads it.
struct Opened {
    journal: PathBuf,
    modes: std::collections::HashMap<PathBuf, u32>,
}

impl Opened {
    fn load(upper: &Path) -> Opened {
        let journal = upper.with_file_name(std::ffi::OsStr::from_bytes(JOURNAL.to_bytes()));
        let mut modes = std::collections::HashMap::new();
        for entry in std::fs::read(&journal).unwrap_or_default().split(|b| *b == 0) {
            let Some(space) = entry.iter().position(|b| *b == b' ') else { continue };
            let Some(mode) = std::str::from_utf8(&entry[..space]).ok().and_then(|m| u32::from_str_radix(m, 8).ok())
            else {
                continue;
            };
            modes.entry(PathBuf::from(std::ffi::OsStr::from_bytes(&entry[space + 1..]))).or_insert(mode & 0o7777);
        }
        Opened { journal, modes }
    }

    /// The mode the command left on the layer's directory `rel` (status `m`), which is open to
    /// this user when this returns.
    fn mode(&mut self, upper: &Path, rel: &Path, m: &std::fs::Metadata) -> io::Result<u32> {
        if let Some(mode) = self.modes.get(rel) {
            return Ok(*mode);
        }
        let mode = m.mode() & 0o7777;
        // SAFETY: no arguments.
        if mode & 0o700 == 0o700 || unsafe { libc::geteuid() } == 0 {
            return Ok(mode); // open already, or root, whom no mode stops
        }
        // The journal first: a crash between the two leaves the mode known, never lost.
        let mut line = format!("{mode:o} ").into_bytes();
        line.extend_from_slice(rel.as_os_str().as_bytes());
        line.push(0);
        {
            use std::io::Write;
            let mut j = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.journal)?;
            j.write_all(&line)?;
            j.sync_data()?;
        }
        // Reached from the layer's top through no link, and the directory that was read (a
        // process of the command's that outlived it could have moved another in its place).
        let top = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(upper)?;
        let dir: std::os::fd::OwnedFd = match rel.as_os_str().is_empty() {
            true => top.into(),
            false => crate::fs::local::open_no_links(top.as_fd(), rel, libc::O_PATH | libc::O_DIRECTORY)?,
        };
        let now = std::fs::File::from(dir);
        let st = now.metadata()?;
        if (st.dev(), st.ino()) != (m.dev(), m.ino()) {
            return Err(io::Error::other("the command's layer changed while it was read"));
        }
        crate::fs::local::chmod_fd(now.as_fd(), mode | 0o700)?;
        self.modes.insert(rel.to_path_buf(), mode);
        Ok(mode)
    }
}

/// The name of a layer's journal of the modes `Opened` changed, beside its upper directory.
pub const JOURNAL: &std::ffi::CStr = c"modes";

/// How deep a changeset's directories may nest (each level is a frame of the walk).
pub const MAX_DEPTH: usize = 512;

fn too_deep() -> io::Error {
    io::Error::other(format!("they nest directories more than {MAX_DEPTH} deep"))
}

/// The operations that make `lower` what the overlay of `upper` on it showed.
pub fn capture(upper: &Path, lower: &Lower) -> io::Result<Vec<Op>> {
    let mut ops = Vec::new();
    let mut opened = Opened::load(upper);
    opened.mode(upper, Path::new(""), &std::fs::symlink_metadata(upper)?)?;
    walk(upper, lower, Path::new(""), true, &mut ops, &mut opened)?;
    Ok(ops)
}

fn walk(
    upper: &Path,
    lower: &Lower,
    rel: &Path,
    lower_dir: bool,
    ops: &mut Vec<Op>,
    opened: &mut Opened,
) -> io::Result<()> {
    if rel.components().count() > MAX_DEPTH {
        return Err(too_deep());
    }
    let here = upper.join(rel);
    let names = names(&here)?;
    if lower_dir && !rel.as_os_str().is_empty() && opaque(&here) {
        // Everything the tree below has here and the layer does not name is gone.
        for h in lower.names(rel) {
            if names.binary_search(&h).is_err() {
                remove(lower, &rel.join(h), ops)?;
            }
        }
    }
    for name in names {
        let r = rel.join(&name);
        let u = upper.join(&r);
        let um = std::fs::symlink_metadata(&u)?;
        let found = if lower_dir { lower.find(&r) } else { None };
        let hm = found.as_ref().map(|(_, m)| m.clone());
        let below = found.map(|(p, _)| p);
        if whiteout(&u, &um) {
            if hm.is_some() {
                remove(lower, &r, ops)?;
            }
            continue;
        }
        let kind = um.file_type();
        let host_is_dir = hm.as_ref().is_some_and(|h| h.is_dir());
        if kind.is_dir() {
            let mode = opened.mode(upper, &r, &um)?;
            if host_is_dir {
                if hm.as_ref().is_some_and(|h| h.mode() & 0o7777 != mode) {
                    ops.push(Op::ModeDir { path: r.clone(), mode });
                }
                walk(upper, lower, &r, true, ops, opened)?;
            } else {
                if hm.is_some() {
                    remove(lower, &r, ops)?;
                }
                let at = ops.len();
                ops.push(Op::MakeDir { path: r.clone(), mode, empty: false });
                walk(upper, lower, &r, false, ops, opened)?;
                let empty = ops.len() == at + 1;
                ops[at] = Op::MakeDir { path: r, mode, empty };
            }
            continue;
        }
        let entry = if kind.is_file() {
            let mode = um.mode() & 0o7777;
            let same = hm.as_ref().is_some_and(|h| {
                h.is_file()
                    && h.mode() & 0o7777 == mode
                    && h.len() == um.len()
                    && below.as_ref().is_some_and(|b| same_content(&u, b))
            });
            if same {
                continue;
            }
            Entry::File { mode }
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&u)?.into_os_string();
            let same = hm.as_ref().is_some_and(|h| h.file_type().is_symlink())
                && below.as_ref().is_some_and(|b| std::fs::read_link(b).is_ok_and(|t| t.into_os_string() == target));
            if same {
                continue;
            }
            Entry::Link { target }
        } else {
            ops.push(Op::Refuse { path: r, reason: "not a file, link or directory" });
            continue;
        };
        if host_is_dir {
            remove(lower, &r, ops)?;
        }
        ops.push(Op::Put { path: r, entry, existed: hm.is_some() && !host_is_dir });
    }
    Ok(())
}

/// Removes what the tree below has at `rel`: a directory's entries first (deepest first), then it.
fn remove(lower: &Lower, rel: &Path, ops: &mut Vec<Op>) -> io::Result<()> {
    if rel.components().count() > MAX_DEPTH {
        return Err(too_deep());
    }
    let is_dir = lower.find(rel).is_some_and(|(_, m)| m.is_dir());
    if !is_dir {
        ops.push(Op::Remove { path: rel.to_path_buf() });
        return Ok(());
    }
    for name in lower.names(rel) {
        remove(lower, &rel.join(name), ops)?;
    }
    ops.push(Op::RemoveDir { path: rel.to_path_buf() });
    Ok(())
}
