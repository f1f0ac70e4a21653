//! The unix implementation: every operation resolves its path with `beneath` and acts on the
//! descriptor of the directory it found, so a component swapped for a link while it runs cannot
//! take it outside the root or into a denied directory.

use std::ffi::CStr;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::beneath::{self, cstr, fstatat, kind, openat, permissions, Found, Last, Refused};
use super::{dangling, escape, LocalFs};
use crate::error::{Code, Error, Result};
use crate::fs::{DirEntry, EntryType, Stat};
use crate::path::{check_denied, normalize};

/// How often an operation starts over when its last component changed under it.
const MAX_ATTEMPTS: usize = 64;

fn type_of(mode: libc::mode_t) -> EntryType {
    match mode & libc::S_IFMT {
        libc::S_IFLNK => EntryType::Symlink,
        libc::S_IFDIR => EntryType::Directory,
        libc::S_IFREG => EntryType::File,
        _ => EntryType::Other,
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// An operation that found its last component changed (`ELOOP`: it became a link) starts over.
fn changed(e: &io::Error) -> bool {
    errno(e) == libc::ELOOP
}

fn not_a_file(rel: &str) -> Error {
    Error::new(Code::NotAFile, format!("Not a regular file: {rel} (a pipe, socket or device)"))
}

fn is_a_directory(rel: &str) -> Error {
    Error::new(Code::IsADirectory, format!("Is a directory: {rel}"))
}

impl LocalFs {
    fn root_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }

    fn refused(&self, rel: &str, r: Refused) -> Error {
        match r {
            Refused::Escape => escape(rel),
            Refused::Dangling => dangling(rel),
            Refused::Loop => Error::new(Code::Io, format!("Too many levels of links: {rel}")),
            Refused::Denied(real) if real == rel => {
                check_denied(&real, &self.deny).err().unwrap_or_else(|| Error::new(Code::Denied, "Access denied"))
            }
            Refused::Denied(real) => Error::new(
                Code::Denied,
                format!("Access denied: {rel} (it leads to {real}, which holds a denied name)"),
            ),
            Refused::Io(e) => Error::io(rel, &e),
        }
    }

    /// Normalizes and resolves a path; errors name the workspace path.
    fn found(&self, path: &str, last: Last) -> Result<(String, Found)> {
        let rel = normalize(path, self.flavor)?;
        let found = beneath::resolve(self.root_fd(), &self.inner.path, &rel, last, &self.deny)
            .map_err(|r| self.refused(&rel, r))?;
        Ok((rel, found))
    }

    /// Runs `op` on the resolved path, starting over (a bounded number of times) while the last
    /// component keeps changing under it.
    fn attempt<T>(&self, path: &str, last: Last, op: impl Fn(&str, &Found) -> io::Result<T>) -> Result<T> {
        for _ in 0..MAX_ATTEMPTS {
            let (rel, found) = self.found(path, last)?;
            match op(&rel, &found) {
                Err(e) if changed(&e) => continue,
                r => return r.map_err(|e| Error::io(&rel, &e)),
            }
        }
        Err(Error::new(Code::Io, format!("The path kept changing while it was used: {path}")))
    }

    /// Opens a regular file for reading (anything else is refused without reading): resolution
    /// and metadata only, the file's bytes not yet read.
    pub(super) fn open_regular_sync(&self, path: &str) -> Result<OpenedFile> {
        let fd = self.attempt(path, Last::Follow, |_, f| {
            let Some(name) = &f.name else { return Err(io::Error::from_raw_os_error(libc::EISDIR)) };
            // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
            openat(f.dir.as_fd(), name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)
        })?;
        let rel = normalize(path, self.flavor)?;
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(|e| Error::io(&rel, &e))?;
        if meta.is_dir() {
            return Err(is_a_directory(&rel));
        }
        if !meta.is_file() {
            return Err(not_a_file(&rel));
        }
        Ok(OpenedFile { rel, file, size: meta.len() })
    }

    pub(super) fn write_bytes_sync(&self, path: &str, content: &[u8]) -> Result<()> {
        let rel = normalize(path, self.flavor)?;
        if rel == "." {
            return Err(Error::new(Code::IsADirectory, "Is a directory: . (the workspace root)"));
        }
        for _ in 0..MAX_ATTEMPTS {
            let (rel, found) = self.found(path, Last::CreateParents)?;
            let Some(name) = &found.name else { return Err(is_a_directory(&rel)) };
            let mode = match fstatat(found.dir.as_fd(), Some(name)) {
                Ok(st) => match kind(&st) {
                    libc::S_IFDIR => return Err(is_a_directory(&rel)),
                    libc::S_IFLNK => continue,
                    libc::S_IFREG if st.st_mode & 0o222 == 0 => {
                        return Err(Error::new(Code::ReadOnly, format!("File is read-only: {rel}")))
                    }
                    libc::S_IFREG => Some(st.st_mode & 0o7777),
                    _ => return Err(not_a_file(&rel)),
                },
                Err(e) if errno(&e) == libc::ENOENT => None,
                Err(e) => return Err(Error::io(&rel, &e)),
            };
            return replace_at(found.dir.as_fd(), name, content, mode).map_err(|e| Error::io(&rel, &e));
        }
        Err(Error::new(Code::Io, format!("The path kept changing while it was written: {rel}")))
    }

    pub(super) fn stat_sync(&self, path: &str) -> Result<Option<Stat>> {
        let (rel, found) = match self.found(path, Last::Follow) {
            Ok(f) => f,
            Err(e) if e.code == Code::OutsideWorkspace => {
                // A link that dangles or leads out of the root is reported as the link it is.
                if let Ok((_, own)) = self.found(path, Last::NoFollow) {
                    if let Ok(st) = fstatat(own.dir.as_fd(), own.name.as_deref()) {
                        if kind(&st) == libc::S_IFLNK {
                            return Ok(Some(Stat {
                                kind: EntryType::Symlink,
                                size: st.st_size as u64,
                                modified_ms: Some(mtime_ms(&st)),
                            }));
                        }
                    }
                }
                return Err(e);
            }
            Err(e) if e.code == Code::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match fstatat(found.dir.as_fd(), found.name.as_deref()) {
            Ok(st) => {
                Ok(Some(Stat { kind: type_of(st.st_mode), size: st.st_size as u64, modified_ms: Some(mtime_ms(&st)) }))
            }
            Err(e) if matches!(errno(&e), libc::ENOENT | libc::ENOTDIR) => Ok(None),
            Err(e) => Err(Error::io(&rel, &e)),
        }
    }

    /// The directory at `path`, opened beneath the root, with its normalized path.
    pub(super) fn open_dir_sync(&self, path: &str) -> Result<(OwnedFd, String)> {
        let dir = self.attempt(path, Last::Follow, |_, f| open_dir(f))?;
        Ok((dir, normalize(path, self.flavor)?))
    }

    /// Lists a directory opened with `open_dir_sync`.
    pub(super) fn list_opened(dir: OwnedFd, rel: &str) -> Result<Vec<DirEntry>> {
        list_dir(dir).map_err(|e| Error::io(rel, &e))
    }

    pub(crate) fn mkdir_sync(&self, path: &str) -> Result<()> {
        let (rel, found) = self.found(path, Last::CreateDirs)?;
        if found.name.is_some() {
            return Err(Error::new(Code::NotAFile, format!("{rel} exists and is not a directory.")));
        }
        Ok(())
    }

    pub(super) fn rm_sync(&self, path: &str, recursive: bool) -> Result<()> {
        let (rel, found) = self.found(path, Last::NoFollow)?;
        let Some(name) = &found.name else {
            return Err(Error::new(Code::Denied, "Refused: the workspace root itself cannot be removed."));
        };
        let dir = found.dir.as_fd();
        let st = fstatat(dir, Some(name)).map_err(|e| Error::io(&rel, &e))?;
        let r = if kind(&st) == libc::S_IFDIR {
            if recursive {
                remove_tree(dir, name).and_then(|_| unlinkat(dir, name, libc::AT_REMOVEDIR))
            } else {
                unlinkat(dir, name, libc::AT_REMOVEDIR)
            }
        } else {
            // A link is removed itself; its target is left alone.
            unlinkat(dir, name, 0)
        };
        r.map_err(|e| Error::io(&rel, &e))
    }

    /// What is at `path` itself, reached through no link at all (a path below a link is
    /// missing as such): the checkpoints of a command's changes see files, links and directories
    /// alike.
    pub(crate) fn entry_sync(&self, path: &str) -> Result<super::HostEntry> {
        let rel = normalize(path, self.flavor)?;
        let (parent, name) = match rel.rsplit_once('/') {
            Some((p, n)) => (p, n),
            None => ("", rel.as_str()),
        };
        let missing = |e: &io::Error| matches!(errno(e), libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::EXDEV);
        let dir = match parent {
            "" => self.root_fd().try_clone_to_owned().map_err(|e| Error::io(&rel, &e))?,
            p => match beneath::open_no_links(self.root_fd(), Path::new(p), beneath::DIR_ONLY) {
                Ok(d) => d,
                Err(e) if missing(&e) => return Ok(super::HostEntry::Missing),
                Err(e) => return Err(Error::io(&rel, &e)),
            },
        };
        let name = cstr(name).map_err(|e| Error::io(&rel, &e))?;
        let st = match fstatat(dir.as_fd(), Some(&name)) {
            Ok(st) => st,
            Err(e) if missing(&e) => return Ok(super::HostEntry::Missing),
            Err(e) => return Err(Error::io(&rel, &e)),
        };
        Ok(match kind(&st) {
            libc::S_IFREG => super::HostEntry::File { size: st.st_size as u64, mode: permissions(&st) },
            libc::S_IFDIR => super::HostEntry::Dir { mode: permissions(&st) },
            libc::S_IFLNK => {
                let target = beneath::readlinkat(dir.as_fd(), &name).map_err(|e| Error::io(&rel, &e))?;
                super::HostEntry::Link(target)
            }
            _ => super::HostEntry::Other,
        })
    }

    /// Puts a link at `path` (replacing a file or link there, never what a link there leads to,
    /// in one rename); parents are made.
    pub(crate) fn symlink_sync(&self, path: &str, target: &[u8]) -> Result<()> {
        let rel = normalize(path, self.flavor)?;
        if let Some((parent, _)) = rel.rsplit_once('/') {
            self.mkdir_sync(parent)?;
        }
        let (rel, found) = self.found(&rel, Last::NoFollow)?;
        let Some(name) = &found.name else { return Err(is_a_directory(&rel)) };
        let dir = found.dir.as_fd();
        let tmp = cstr(&format!(".corral-{:016x}.tmp", rand::random::<u64>())).map_err(|e| Error::io(&rel, &e))?;
        let target =
            std::ffi::CString::new(target).map_err(|_| Error::new(Code::InvalidArguments, "a NUL byte in a link"))?;
        // SAFETY: NUL-terminated strings and a descriptor of ours.
        let r = unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), tmp.as_ptr()) };
        if r < 0 {
            return Err(Error::io(&rel, &io::Error::last_os_error()));
        }
        // SAFETY: as above.
        if unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: as above.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
            return Err(Error::io(&rel, &e));
        }
        Ok(())
    }

    pub(super) fn get_mode_sync(&self, path: &str) -> Result<u32> {
        let st = self.attempt(path, Last::Follow, |_, f| {
            let st = fstatat(f.dir.as_fd(), f.name.as_deref())?;
            if kind(&st) == libc::S_IFLNK {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            Ok(st)
        })?;
        Ok(permissions(&st))
    }

    pub(super) fn chmod_sync(&self, path: &str, mode: u32) -> Result<()> {
        self.attempt(path, Last::Follow, |_, f| {
            // The inode itself, however its mode closes it to reading (a directory left `-wx`).
            #[cfg(target_os = "linux")]
            {
                let fd = match &f.name {
                    Some(name) => openat(f.dir.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?,
                    None => openat(f.dir.as_fd(), c".", libc::O_PATH | libc::O_DIRECTORY, 0)?,
                };
                if kind(&fstatat(fd.as_fd(), None)?) == libc::S_IFLNK {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP)); // as O_NOFOLLOW says below
                }
                match beneath::chmod_fd(fd.as_fd(), mode & 0o7777) {
                    Err(e) if errno(&e) == libc::ENOENT => {} // no /proc: through a descriptor open for reading
                    r => return r,
                }
            }
            let fd = match &f.name {
                Some(name) => openat(f.dir.as_fd(), name, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)?,
                None => openat(f.dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0)?,
            };
            // SAFETY: a valid descriptor.
            let r = unsafe { libc::fchmod(fd.as_raw_fd(), (mode & 0o7777) as libc::mode_t) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }

    /// Where a path really leads; the parts that do not exist yet are appended as they are (a
    /// file about to be written in a directory about to be made).
    pub(super) fn real_relative_sync(&self, path: &str) -> Result<String> {
        let rel = normalize(path, self.flavor)?;
        let mut missing: Vec<&str> = Vec::new();
        let mut prefix = rel.as_str();
        loop {
            match self.found(prefix, Last::Follow) {
                Ok((_, f)) => {
                    let mut real = f.comps;
                    real.extend(missing.iter().rev().map(|m| m.to_string()));
                    return Ok(if real.is_empty() { ".".to_string() } else { real.join("/") });
                }
                Err(e) if e.code == Code::NotFound && prefix != "." => {
                    let (parent, name) = prefix.rsplit_once('/').unwrap_or((".", prefix));
                    missing.push(name);
                    prefix = parent;
                }
                Err(e) => return Err(Error { message: e.message.replace(prefix, &rel), ..e }),
            }
        }
    }

    /// The host path of a directory to walk, and its resolved workspace path.
    pub(super) fn host_dir(&self, path: &str) -> Result<(PathBuf, String)> {
        let (_, found) = self.found(path, Last::Follow)?;
        let real = found.real();
        let host = if real == "." { self.inner.path.clone() } else { self.inner.path.join(&real) };
        Ok((host, real))
    }

    /// Opens a file found by a walk (`real` is its resolved workspace path), following no link:
    /// a directory swapped for a link since the walk listed it is not entered.
    pub(super) fn open_walked(&self, real: &str) -> io::Result<std::fs::File> {
        let fd = beneath::open_no_links(self.root_fd(), Path::new(real), libc::O_RDONLY | libc::O_NONBLOCK)?;
        Ok(std::fs::File::from(fd))
    }

    /// Walks the tree below `real` (a resolved workspace directory) on this thread, each
    /// directory opened from its parent's descriptor without following a link: every name it
    /// gives was read from a directory really below the root, whatever is swapped meanwhile.
    /// `enter(name, rel)` says whether to go into a directory (`rel`: its path below `real`);
    /// `file(rel)` is told of each regular file and stops the walk with false. Links, devices,
    /// FIFOs and sockets are left out. Returns the entries seen and the directories that could
    /// not be read.
    pub(crate) fn walk_confined(
        &self,
        real: &str,
        enter: &mut dyn FnMut(&str, &str) -> bool,
        file: &mut dyn FnMut(&str) -> bool,
    ) -> (usize, usize) {
        // The root is held as a path descriptor: listing needs one opened for reading.
        let start = if real == "." {
            openat(self.root_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC, 0)
        } else {
            beneath::open_no_links(self.root_fd(), Path::new(real), libc::O_RDONLY | libc::O_DIRECTORY)
        };
        let (mut seen, mut unreadable) = (0, 0);
        let Ok(start) = start else { return (0, 1) };
        // Listings kept from earlier walks stand where a directory's stamp says nothing changed
        // (`listings`).
        #[cfg(target_os = "linux")]
        let mut devices = super::stamp::Devices::default();
        let mut stack: Vec<(Pending, String)> = vec![(Pending::Dir(start), String::new())];
        let mut entries = Entries::default();
        while let Some((pending, rel)) = stack.pop() {
            let dir = match pending {
                Pending::Dir(dir) => dir,
                #[cfg(target_os = "linux")]
                Pending::Files(records) => {
                    #[cfg(test)]
                    super::listings::HITS.with(|h| h.set(h.get() + 1));
                    for (child, t) in records_of(&records).filter(|(n, _)| *n != c"." && *n != c"..") {
                        seen += 1;
                        if t == libc::DT_REG && !file(&format!("{rel}/{}", child.to_string_lossy())) {
                            return (seen, unreadable);
                        }
                    }
                    continue;
                }
            };
            #[cfg(target_os = "linux")]
            let listed = entries.list(dir.as_fd(), &mut devices);
            #[cfg(not(target_os = "linux"))]
            let listed = entries.read(dir.as_fd());
            if listed.is_err() {
                unreadable += 1;
                continue;
            }
            for (cname, d_type) in entries.iter() {
                if cname == c"." || cname == c".." {
                    continue;
                }
                seen += 1;
                let name = cname.to_string_lossy();
                let path = if rel.is_empty() { name.to_string() } else { format!("{rel}/{name}") };
                let kind = match d_type {
                    libc::DT_DIR => libc::S_IFDIR,
                    libc::DT_REG => libc::S_IFREG,
                    libc::DT_UNKNOWN => match fstatat(dir.as_fd(), Some(cname)) {
                        Ok(st) => kind(&st),
                        Err(_) => continue,
                    },
                    _ => continue,
                };
                if kind == libc::S_IFREG {
                    if !file(&path) {
                        return (seen, unreadable);
                    }
                } else if kind == libc::S_IFDIR && enter(&name, &path) {
                    // A directory of files alone whose listing is kept and stands (its stamp, read
                    // through its parent, is what it was): its files are known without opening it,
                    // and come in their turn, as if it had been opened.
                    #[cfg(target_os = "linux")]
                    if let Some(records) =
                        super::stamp::stamp_in(dir.as_fd(), cname, &devices).and_then(super::listings::kept)
                    {
                        let files_only = records_of(&records)
                            .all(|(n, t)| n == c"." || n == c".." || !matches!(t, libc::DT_DIR | libc::DT_UNKNOWN));
                        if files_only {
                            stack.push((Pending::Files(records), path));
                            continue;
                        }
                    }
                    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                    match openat(dir.as_fd(), cname, flags, 0) {
                        Ok(child) => stack.push((Pending::Dir(child), path)),
                        // Swapped for a link or a file since it was listed: not a directory now.
                        Err(e) if matches!(errno(&e), libc::ELOOP | libc::ENOTDIR | libc::ENOENT) => {}
                        Err(_) => unreadable += 1,
                    }
                }
            }
        }
        (seen, unreadable)
    }

    /// For each path a walk found (resolved workspace paths, best grouped by directory): whether
    /// it is still a regular file below the root, reached without a link. Each directory is
    /// opened once, without following links, and its files are looked up in it.
    pub(super) fn walked_present(&self, reals: &[&str]) -> Vec<bool> {
        // Many paths are checked on several threads, each a run of them (a run reopens its first
        // directory).
        const PER_THREAD: usize = 2048;
        let threads = crate::worker_threads();
        if threads > 1 && reals.len() >= 2 * PER_THREAD {
            let chunk = reals.len().div_ceil(threads);
            return std::thread::scope(|s| {
                let parts: Vec<_> =
                    reals.chunks(chunk).map(|c| (c.len(), s.spawn(move || self.walked_present_run(c)))).collect();
                // A run that failed shows none of its paths.
                parts.into_iter().flat_map(|(n, p)| p.join().unwrap_or_else(|_| vec![false; n])).collect()
            });
        }
        self.walked_present_run(reals)
    }

    fn walked_present_run(&self, reals: &[&str]) -> Vec<bool> {
        let mut dir: Option<(&str, io::Result<OwnedFd>)> = None;
        reals
            .iter()
            .map(|real| {
                let (parent, name) = real.rsplit_once('/').unwrap_or((".", real));
                if dir.as_ref().is_none_or(|(d, _)| *d != parent) {
                    let fd = if parent == "." {
                        beneath::dup(self.root_fd())
                    } else {
                        beneath::open_no_links(self.root_fd(), Path::new(parent), beneath::DIR_ONLY)
                    };
                    dir = Some((parent, fd));
                }
                let Some((_, Ok(fd))) = &dir else { return false };
                let Ok(name) = beneath::cstr(name) else { return false };
                beneath::fstatat(fd.as_fd(), Some(&name)).is_ok_and(|st| beneath::kind(&st) == libc::S_IFREG)
            })
            .collect()
    }
}

/// A directory a confined walk has still to look through: opened, or (a directory of files alone
/// whose kept listing stands) its records.
enum Pending {
    Dir(OwnedFd),
    #[cfg(target_os = "linux")]
    Files(std::sync::Arc<Vec<u8>>),
}

/// Each name and `d_type` of `dirent64` records one after another.
#[cfg(target_os = "linux")]
fn records_of(buf: &[u8]) -> impl Iterator<Item = (&CStr, u8)> + '_ {
    // A record: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), then the name and NUL.
    let mut at = 0;
    std::iter::from_fn(move || {
        let rec = buf.get(at..)?;
        if rec.len() < 19 {
            return None;
        }
        let len = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
        if len < 20 || len > rec.len() {
            return None;
        }
        at += len;
        let name = CStr::from_bytes_until_nul(&rec[19..len]).ok()?;
        Some((name, rec[18]))
    })
}

/// A directory's entries as the kernel lists them (`getdents64` on Linux, `readdir` elsewhere),
/// read into one buffer that serves every directory of a walk: names and their `d_type`.
#[derive(Default)]
struct Entries {
    /// `dirent64` records one after another (Linux), or name and type pairs (elsewhere).
    buf: Vec<u8>,
    #[cfg(target_os = "linux")]
    chunk: Vec<u64>,
    /// A kept listing standing for `buf` (`listings`).
    #[cfg(target_os = "linux")]
    kept: Option<std::sync::Arc<Vec<u8>>>,
}

impl Entries {
    /// Reads the entries of the directory `fd` (opened for reading), or takes the kept listing
    /// of it where its stamp says nothing changed since (`listings`; `devices`: the file systems
    /// the walk has met).
    #[cfg(target_os = "linux")]
    fn list(&mut self, fd: BorrowedFd<'_>, devices: &mut super::stamp::Devices) -> io::Result<()> {
        self.kept = None;
        let listed = super::listings::list(fd, devices, || {
            self.read(fd)?;
            Ok(std::mem::take(&mut self.buf))
        })?;
        match listed {
            super::listings::Listed::Read(records) => self.buf = records,
            super::listings::Listed::Kept(records) => self.kept = Some(records),
        }
        Ok(())
    }

    /// Reads every entry of the directory `fd` (opened for reading), replacing the last ones.
    #[cfg(target_os = "linux")]
    fn read(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        // One system call lists a few hundred entries; a small directory takes two (the second
        // says the end), where `opendir` and its iterator add four more of their own.
        const CHUNK_BYTES: usize = 32 * 1024;
        self.buf.clear();
        self.chunk.resize(CHUNK_BYTES / 8, 0);
        loop {
            // SAFETY: a valid descriptor and a writable buffer of the given length (8-aligned, as
            // the records inside it are).
            let n = unsafe {
                libc::syscall(libc::SYS_getdents64, fd.as_raw_fd(), self.chunk.as_mut_ptr().cast::<u8>(), CHUNK_BYTES)
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n == 0 {
                return Ok(());
            }
            // SAFETY: the kernel wrote `n` bytes at the start of the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(self.chunk.as_ptr().cast::<u8>(), n as usize) };
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The entries read last: each name and its `d_type` (`DT_UNKNOWN` where the file system
    /// does not say).
    #[cfg(target_os = "linux")]
    fn iter(&self) -> impl Iterator<Item = (&CStr, u8)> + '_ {
        records_of(self.kept.as_deref().map_or(&self.buf, |k| k.as_slice()))
    }

    #[cfg(not(target_os = "linux"))]
    fn read(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.buf.clear();
        let mut dir = nix::dir::Dir::from_fd(beneath::dup(fd)?).map_err(io::Error::from)?;
        for entry in dir.iter() {
            let entry = entry.map_err(io::Error::from)?;
            let d_type = match entry.file_type() {
                Some(nix::dir::Type::Directory) => libc::DT_DIR,
                Some(nix::dir::Type::File) => libc::DT_REG,
                Some(_) => libc::DT_LNK,
                None => libc::DT_UNKNOWN,
            };
            self.buf.push(d_type);
            self.buf.extend_from_slice(entry.file_name().to_bytes_with_nul());
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn iter(&self) -> impl Iterator<Item = (&CStr, u8)> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let d_type = *self.buf.get(at)?;
            let name = CStr::from_bytes_until_nul(&self.buf[at + 1..]).ok()?;
            at += 2 + name.to_bytes().len();
            Some((name, d_type))
        })
    }
}

/// A regular file opened for reading.
pub(super) struct OpenedFile {
    rel: String,
    file: std::fs::File,
    pub size: u64,
}

/// The most a read reserves up front from the size the file had when it was opened (a file that
/// grows or shrinks meanwhile is read as it is, the buffer growing as it goes).
const RESERVE_BYTES: u64 = 64 * 1024 * 1024;

impl OpenedFile {
    pub(super) fn read_all(mut self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size.min(RESERVE_BYTES) as usize);
        self.file.read_to_end(&mut out).map_err(|e| Error::io(&self.rel, &e))?;
        Ok(out)
    }

    /// The file's bytes when there are at most `limit` of them, read no further than one past it
    /// (a file a command grows while it is read never makes this process hold more); `None`
    /// when there are more.
    pub(super) fn read_within(self, limit: u64) -> Result<Option<Vec<u8>>> {
        if self.size > limit {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(self.size as usize);
        (&self.file).take(limit + 1).read_to_end(&mut out).map_err(|e| Error::io(&self.rel, &e))?;
        Ok((out.len() as u64 <= limit).then_some(out))
    }
}

/// Opens the found directory for listing.
fn open_dir(f: &Found) -> io::Result<OwnedFd> {
    match &f.name {
        Some(name) => openat(f.dir.as_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0),
        None => openat(f.dir.as_fd(), c".", libc::O_RDONLY | libc::O_DIRECTORY, 0),
    }
}

fn list_dir(fd: OwnedFd) -> io::Result<Vec<DirEntry>> {
    let dir_fd = fd.try_clone()?;
    let mut dir = nix::dir::Dir::from_fd(fd).map_err(io::Error::from)?;
    let mut out = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            Some(nix::dir::Type::Directory) => EntryType::Directory,
            Some(nix::dir::Type::File) => EntryType::File,
            Some(nix::dir::Type::Symlink) => EntryType::Symlink,
            Some(_) => EntryType::Other,
            None => fstatat(dir_fd.as_fd(), Some(name)).map(|st| type_of(st.st_mode)).unwrap_or(EntryType::Other),
        };
        out.push(DirEntry { name: name.to_string_lossy().into_owned(), kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid descriptor and a NUL-terminated name.
    if unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Empties the directory `name` in `dir`, entering no link.
fn remove_tree(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    let sub = openat(dir, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0)?;
    for entry in list_dir(sub.try_clone()?)? {
        let child = cstr(&entry.name)?;
        if entry.kind == EntryType::Directory {
            remove_tree(sub.as_fd(), &child)?;
            unlinkat(sub.as_fd(), &child, libc::AT_REMOVEDIR)?;
        } else {
            unlinkat(sub.as_fd(), &child, 0)?;
        }
    }
    Ok(())
}

/// Writes `content` to a new temp file in `dir`, flushes it, gives it `mode` (the old file's) and
/// renames it over `name`: readers see the old content or the new, never a mix.
fn replace_at(dir: BorrowedFd<'_>, name: &CStr, content: &[u8], mode: Option<libc::mode_t>) -> io::Result<()> {
    use rand::Rng;
    let mut made = None;
    for _ in 0..16 {
        let suffix: u64 = rand::thread_rng().gen();
        // A fixed-length name: a target whose own name is near the 255-byte limit still works.
        let tmp = cstr(&format!(".corral-{suffix:016x}.tmp"))?;
        match openat(dir, &tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW, 0o666) {
            Ok(fd) => {
                made = Some((tmp, fd));
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    let (tmp, fd) = made.ok_or_else(|| io::Error::new(io::ErrorKind::AlreadyExists, "cannot create a temp file"))?;
    let mut file = std::fs::File::from(fd);
    let result = (|| -> io::Result<()> {
        file.write_all(content)?;
        if let Some(mode) = mode {
            // SAFETY: a valid descriptor.
            if unsafe { libc::fchmod(file.as_raw_fd(), mode) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        file.sync_all()?;
        // SAFETY: a valid descriptor and NUL-terminated names, both relative to it.
        if unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = unlinkat(dir, &tmp, 0);
    }
    result
}

/// The modification time of a `stat`, in milliseconds since the Unix epoch.
#[allow(clippy::unnecessary_cast)] // the field types differ between platforms
fn mtime_ms(st: &libc::stat) -> i64 {
    st.st_mtime as i64 * 1000 + st.st_mtime_nsec as i64 / 1_000_000
}
