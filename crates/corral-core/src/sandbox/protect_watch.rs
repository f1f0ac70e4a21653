//! Knowing that nothing changed without looking: an inotify watch on every directory the
//! protected-name walks read, so a command in a tree where nothing that matters has changed since
//! the last walk pays for no walk at all (a tree of 78,000 files has 5,000 directories, and each
//! command walks it before and after).
//!
//! What matters to a walk is the set of subdirectories of each directory it read and the entries
//! named one of its names: an event that adds, removes, renames or changes the mode of a directory
//! (one closed to reading must refuse the next run as before), or an entry with one
//! of the names (in any case), or that moves, removes or unmounts a watched directory, starts a new
//! *generation* and is noted with the directory it happened in; an overflow of the queue, a change
//! of the mount table, or an event about a directory no walk is known to have read changes
//! everything. A walk's result is kept with the generation it started in, and is given again while
//! nothing has changed since in its tree (a build in another workspace does not throw it away).
//!
//! Why that is sound: every directory a walk reads is watched before it is read, and the kernel
//! queues an event within the system call that makes the change, so a change after a directory was
//! read is in the queue before the call that made it returns; the queue is read whole before the
//! generation is compared. A change made before a directory was read is in what was read. Files
//! created and removed (a build's output) start no generation. The edges, each with its test:
//! - A watch is put through a descriptor of the directory the walk checked (opened without
//!   following links), never by a second lookup of its path, which a swap could point elsewhere.
//! - An existing watch counts only while the path still names the inode it was put on, and an
//!   overflow drops every watch: the `IN_IGNORED` of a removed directory may be lost with the
//!   other events, and ext4 gives a directory made again at that path the same inode number.
//! - A kept result stands only for the root directory it walked (device and inode): renaming a
//!   directory above the root makes no event in the tree.
//! - A mount over a directory makes no inotify event: the mount table is watched for that
//!   (`/proc/self/mountinfo`, whose poll says when it changed).
//!
//! Where inotify cannot be had, or the tree has more directories than a quarter of this user's
//! watches (other programs need theirs), every walk reads as before.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// The events that can change what a walk reads.
const MASK: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ATTRIB
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// Events about the watched directory itself, or the queue: always a new generation.
const ALWAYS: u32 =
    libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED | libc::IN_UNMOUNT | libc::IN_Q_OVERFLOW;

/// The most watches used, whatever the limit allows.
const MAX_WATCHES: usize = 65_536;

/// The most changes noted: past that, the oldest are forgotten and the results kept from before
/// them are walked again.
const MAX_CHANGES: usize = 4096;

struct Watcher {
    fd: OwnedFd,
    /// `/proc/self/mountinfo`, polled for changes of the mount table.
    mounts: OwnedFd,
    /// Each watched directory: its watch and the inode it was put on.
    watched: HashMap<PathBuf, (i32, u64, u64)>,
    /// The paths each watch was put through (one inode may be reached by two).
    paths: HashMap<i32, Vec<PathBuf>>,
    budget: usize,
    generation: u64,
    /// The changes noted since `floor`, oldest first: the generation each began and the directory
    /// it happened in.
    changes: std::collections::VecDeque<(u64, PathBuf)>,
    /// Changes of generations up to this one may be missing from `changes` (dropped as old).
    floor: u64,
    /// The last generation that changed everything.
    everything: u64,
    /// The names of every walk so far, in lower case: an entry so named matters.
    names: HashSet<Vec<u8>>,
    /// The last whole result of each walk (by its key and root), with the generation it began in.
    kept: HashMap<(u64, PathBuf), Kept>,
}

/// The generation a walk began in, the root it walked (device and inode), and its result.
type Kept = (u64, (u64, u64), Arc<Vec<PathBuf>>);

static WATCHER: LazyLock<Mutex<Option<Watcher>>> = LazyLock::new(|| Mutex::new(Watcher::new()));

impl Watcher {
    fn new() -> Option<Watcher> {
        // SAFETY: plain system calls; the descriptor is owned from here on.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(8192);
        // SAFETY: a NUL-terminated path.
        let m = unsafe { libc::open(c"/proc/self/mountinfo".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        // Without a way to see mounts change, no result is given again.
        if m < 0 {
            return None;
        }
        let mounts = unsafe { OwnedFd::from_raw_fd(m) };
        let mut w = Watcher {
            fd,
            mounts,
            watched: HashMap::new(),
            paths: HashMap::new(),
            budget: (limit / 4).min(MAX_WATCHES),
            generation: 0,
            changes: std::collections::VecDeque::new(),
            floor: 0,
            everything: 0,
            names: HashSet::new(),
            kept: HashMap::new(),
        };
        // The first poll reports the table as changed: take that now.
        w.mounts_changed();
        Some(w)
    }

    fn mounts_changed(&mut self) -> bool {
        let mut p = libc::pollfd { fd: self.mounts.as_raw_fd(), events: libc::POLLPRI, revents: 0 };
        // SAFETY: one valid pollfd; a zero timeout.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n != 0 || p.revents != 0
    }

    /// Reads every queued event, noting each that matters.
    fn drain(&mut self) {
        if self.mounts_changed() {
            self.change_everything();
        }
        let mut overflowed = false;
        let mut buf = [0u64; 1024];
        loop {
            // SAFETY: a valid descriptor and a writable buffer of the given size.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), std::mem::size_of_val(&buf)) };
            if n < 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) => break,
                    // Events may be left unread: nothing kept can be trusted.
                    _ => {
                        self.change_everything();
                        break;
                    }
                }
            }
            if n == 0 {
                self.change_everything();
                break;
            }
            // SAFETY: the kernel wrote `n` bytes of whole events.
            let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
            let mut at = 0;
            while at + 16 <= bytes.len() {
                let word = |i: usize| u32::from_ne_bytes(bytes[at + i..at + i + 4].try_into().unwrap_or_default());
                let (wd, mask, len) = (word(0) as i32, word(4), word(12) as usize);
                let name = bytes.get(at + 16..at + 16 + len).unwrap_or_default();
                let name = &name[..name.iter().position(|b| *b == 0).unwrap_or(name.len())];
                at += 16 + len;
                if mask & libc::IN_Q_OVERFLOW != 0 {
                    // Events were dropped, `IN_IGNORED` among them: no watch can be trusted to
                    // be alive (a directory removed and made again gets the same inode number
                    // on ext4), so every one is put again by the next walk.
                    overflowed = true;
                }
                if mask & ALWAYS != 0 || mask & libc::IN_ISDIR != 0 || self.names.contains(&name.to_ascii_lowercase()) {
                    self.change_in(wd);
                }
                if mask & libc::IN_IGNORED != 0 {
                    self.watched.retain(|_, (w, _, _)| *w != wd);
                    self.paths.remove(&wd);
                }
            }
        }
        if overflowed {
            self.reset();
        }
    }

    /// Notes a change in the directory of the watch `wd`: everything, where no walk is known to
    /// have read it.
    fn change_in(&mut self, wd: i32) {
        let Some(dirs) = self.paths.get(&wd).filter(|d| !d.is_empty()) else {
            self.change_everything();
            return;
        };
        self.generation += 1;
        for d in dirs {
            self.changes.push_back((self.generation, d.clone()));
        }
        while self.changes.len() > MAX_CHANGES {
            if let Some((g, _)) = self.changes.pop_front() {
                self.floor = g;
            }
        }
    }

    fn change_everything(&mut self) {
        self.generation += 1;
        self.everything = self.generation;
        #[cfg(test)]
        tests::EVERYTHING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether anything that matters to a walk of `root` that began in `since` may have changed.
    fn changed_since(&self, since: u64, root: &Path) -> bool {
        self.everything > since
            || self.floor > since
            || self.changes.iter().rev().take_while(|(g, _)| *g > since).any(|(_, d)| d.starts_with(root))
    }

    /// Drops every watch (closing the instance removes them) and everything kept: the trees walked
    /// from now on are watched afresh.
    fn reset(&mut self) {
        // SAFETY: plain system call; the descriptor is owned from here on.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw >= 0 {
            self.fd = unsafe { OwnedFd::from_raw_fd(raw) };
        }
        self.watched.clear();
        self.paths.clear();
        self.kept.clear();
        self.changes.clear();
        self.change_everything();
        self.floor = self.generation;
    }
}

/// Whether the watches can be asked at once, with nothing queued to read: no other thread holds
/// them, no inotify event waits, and the mount table did not change. A caller on an async
/// runtime's thread asks this before `generation`, whose draining of a long queue (after an
/// `rm -rf` of a watched tree) it must not do there.
pub fn quiet() -> bool {
    let Ok(guard) = WATCHER.try_lock() else { return false };
    let Some(w) = guard.as_ref() else { return false };
    let mut p = [
        libc::pollfd { fd: w.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: w.mounts.as_raw_fd(), events: libc::POLLPRI, revents: 0 },
    ];
    // SAFETY: two valid pollfds; a zero timeout.
    unsafe { libc::poll(p.as_mut_ptr(), 2, 0) == 0 }
}

/// The generation now, after reading every queued event, with `names` counted as names that
/// matter from here on; `None` where there is no watcher.
pub fn generation(names: &[&str]) -> Option<u64> {
    let mut guard = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    let w = guard.as_mut()?;
    let mut added = false;
    for n in names {
        added |= w.names.insert(n.as_bytes().to_ascii_lowercase());
    }
    w.drain();
    if added {
        // Events about a name not counted before may have been passed over.
        w.change_everything();
    }
    Some(w.generation)
}

/// What `watch` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    /// The directory was watched already, on the inode given.
    Already,
    /// A watch was put on it just now: look at the directory again before trusting what is known
    /// of it (a change between that look and the watch would be in neither).
    Added,
    /// It cannot be watched (no watcher, no watches left, a path swapped meanwhile).
    No,
}

/// Makes sure `dir` is watched, before it is read. `(dev, ino)` is the directory the walk has
/// (its `lstat`, or its open descriptor); a watch put on another inode at that path is put again,
/// and one that lands on another inode than the walk's counts for nothing.
fn watch(dir: &Path, dev: u64, ino: u64) -> Watched {
    let mut guard = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(w) = guard.as_mut() else { return Watched::No };
    if let Some((_, d, i)) = w.watched.get(dir) {
        if (*d, *i) == (dev, ino) {
            return Watched::Already;
        }
    }
    if w.watched.len() >= w.budget {
        // Full: the trees walked from now on are watched afresh.
        w.reset();
        return Watched::No;
    }
    // The directory is opened first (no link followed) and checked to be the walk's, and the
    // watch is put on that very inode through its descriptor: a path looked up twice could name
    // two directories if one is swapped in between.
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else { return Watched::No };
    // SAFETY: a NUL-terminated path; the descriptor is owned from here on.
    let raw = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Watched::No;
    }
    let opened = unsafe { OwnedFd::from_raw_fd(raw) };
    if fd_id(opened.as_fd()) != Some((dev, ino)) {
        return Watched::No;
    }
    let Ok(by_fd) = CString::new(format!("/proc/self/fd/{}", opened.as_raw_fd())) else { return Watched::No };
    // SAFETY: a valid descriptor and a NUL-terminated path (the descriptor's link, followed).
    let wd = unsafe { libc::inotify_add_watch(w.fd.as_raw_fd(), by_fd.as_ptr(), MASK & !libc::IN_DONT_FOLLOW) };
    if wd < 0 {
        return Watched::No;
    }
    // A path another inode was watched through stays noted for it: wherever that directory is
    // now, a change in it is still taken for a change at the old path (more walks, never fewer).
    w.watched.insert(dir.to_path_buf(), (wd, dev, ino));
    let through = w.paths.entry(wd).or_default();
    if !through.iter().any(|p| p == dir) {
        through.push(dir.to_path_buf());
    }
    Watched::Added
}

/// What a walk may trust of the directory `dir`: `look()`'s stamp of it, taken after the
/// directory is watched (`watch`; with a new watch it is looked at again, so a change between the
/// first look and the watch is in the second), and whether it is watched on that very inode. A
/// walk with a directory that is not may not be kept.
pub fn look(dir: &Path, mut look: impl FnMut() -> Option<super::cache::Stamp>) -> (Option<super::cache::Stamp>, bool) {
    let first = look();
    let Some(now) = first.map(|s| s.dev_ino()) else { return (first, false) };
    match watch(dir, now.0, now.1) {
        Watched::Already => (first, true),
        Watched::Added => {
            let again = look();
            (again, again.map(|s| s.dev_ino()) == Some(now))
        }
        Watched::No => (first, false),
    }
}

/// The device and inode of the directory at `path` (a link is not followed: `None`).
pub fn dir_id(path: &Path) -> Option<(u64, u64)> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a stat buffer.
    let ok = unsafe { libc::lstat(c.as_ptr(), &mut st) } == 0;
    if ok {
        dir_of(&st)
    } else {
        None
    }
}

/// The device and inode of the open directory `fd`.
pub fn fd_id(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u64, u64)> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and a stat buffer.
    let ok = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == 0;
    if ok {
        dir_of(&st)
    } else {
        None
    }
}

/// The device and inode `st` gives, where it is a directory's.
#[allow(clippy::unnecessary_cast)]
fn dir_of(st: &libc::stat) -> Option<(u64, u64)> {
    (st.st_mode & libc::S_IFMT == libc::S_IFDIR).then_some((st.st_dev as u64, st.st_ino as u64))
}

/// The result a whole walk `key` of `root` gave, if nothing that matters has changed in the tree
/// since it began (up to `generation`, the one `generation()` gave just now) and `root` is the
/// directory it walked (`(dev, ino)` now: renaming a directory above the root, or a link on the
/// way to it, makes no event in the tree).
pub fn kept(key: u64, root: &Path, root_id: (u64, u64), generation: u64) -> Option<Arc<Vec<PathBuf>>> {
    let guard = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    let w = guard.as_ref()?;
    match w.kept.get(&(key, root.to_path_buf())) {
        Some((g, id, found)) if *g <= generation && *id == root_id && !w.changed_since(*g, root) => {
            #[cfg(test)]
            tests::HITS.with(|h| h.set(h.get() + 1));
            Some(found.clone())
        }
        _ => None,
    }
}

/// Keeps the result of a whole walk of the directory `root_id` (as it was when the walk began)
/// that began in `generation`, every directory of it watched.
pub fn keep(key: u64, root: &Path, root_id: (u64, u64), generation: u64, found: Vec<PathBuf>) {
    let mut guard = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    let Some(w) = guard.as_mut() else { return };
    if w.kept.len() >= 1024 {
        w.kept.clear();
    }
    w.kept.insert((key, root.to_path_buf()), (generation, root_id, Arc::new(found)));
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::super::{protected, sweep, Watch};

    thread_local! {
        /// How many walks this thread made were answered from a kept result.
        pub(super) static HITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// How many times everything kept was thrown away (a mount, an overflow, a new name).
    pub(super) static EVERYTHING: AtomicUsize = AtomicUsize::new(0);

    fn hits() -> usize {
        HITS.with(|h| h.get())
    }

    fn git_names(root: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = protected(root, &[".git".to_string()], &[])
            .unwrap()
            .names
            .into_iter()
            .map(|(p, _)| p.strip_prefix(root).unwrap().to_path_buf())
            .collect();
        v.sort();
        v
    }

    /// Calls `walk` (which asserts what it finds) until it was answered `hits` times from kept
    /// results: the first walks may begin while the mount table changes, or a new name is
    /// counted, which throws away every result.
    fn until_kept(hits_wanted: usize, what: &str, mut walk: impl FnMut()) {
        let (started, everything, mut walks) = (std::time::Instant::now(), EVERYTHING.load(Ordering::Relaxed), 0);
        while started.elapsed() < std::time::Duration::from_secs(30) {
            let before = hits();
            walk();
            if hits() >= before + hits_wanted {
                return;
            }
            walks += 1;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!(
            "{what} was never answered from the kept result in {walks} walks; everything kept was thrown \
             away {} times meanwhile",
            EVERYTHING.load(Ordering::Relaxed) - everything
        );
    }

    /// A tree of a few directories, scanned until its result is kept.
    fn settled_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for sub in ["a/b/c", "a/e", "f"] {
            std::fs::create_dir_all(d.path().join(sub)).unwrap();
        }
        std::fs::create_dir_all(d.path().join("f/.git")).unwrap();
        until_kept(1, "a tree where nothing changes", || {
            assert_eq!(git_names(d.path()), vec![PathBuf::from("f/.git")])
        });
        d
    }

    /// The tests take turns: one's changes start generations that would hide another's lost event.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn watched() -> Option<std::sync::MutexGuard<'static, ()>> {
        let turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        if super::generation(&[".git"]).is_none() {
            eprintln!("skipped: no inotify here");
            return None;
        }
        Some(turn)
    }

    #[test]
    fn a_git_made_anywhere_after_a_kept_scan_is_found_by_the_next() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        // In a directory made since, two levels down (made before its parent was watched).
        std::fs::create_dir_all(d.path().join("a/b/c/new/deeper/.git")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/b/c/new/deeper/.git"), PathBuf::from("f/.git")]);
        let d = settled_tree();
        // A file named .git in a directory that was there (no directory event at all).
        std::fs::write(d.path().join("a/e/.git"), "gitdir: /elsewhere\n").unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/e/.git"), PathBuf::from("f/.git")]);
        let d = settled_tree();
        // In another case, and as a link.
        std::os::unix::fs::symlink("/tmp", d.path().join("a/.GIT")).unwrap();
        std::os::unix::fs::symlink("/tmp", d.path().join("a/b/.git")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/b/.git"), PathBuf::from("f/.git")]);
    }

    #[test]
    fn a_directory_made_in_another_tree_leaves_this_trees_result_kept_and_that_tree_walked_again() {
        let Some(_turn) = watched() else { return };
        let (mine, other) = (settled_tree(), settled_tree());
        // `other` shares the start of `mine`'s path as a string, not as a directory.
        let sibling = PathBuf::from(format!("{}x", mine.path().display()));
        std::fs::create_dir_all(sibling.join("a")).unwrap();
        until_kept(1, "a sibling tree", || assert!(git_names(&sibling).is_empty()));
        std::fs::create_dir_all(other.path().join("a/b/.git")).unwrap();
        std::fs::create_dir_all(sibling.join("a/.git")).unwrap();
        let before = hits();
        assert_eq!(git_names(mine.path()), vec![PathBuf::from("f/.git")]);
        assert_eq!(hits(), before + 1, "a change in another tree threw away this tree's result");
        assert_eq!(git_names(other.path()), vec![PathBuf::from("a/b/.git"), PathBuf::from("f/.git")]);
        assert_eq!(git_names(&sibling), vec![PathBuf::from("a/.git")]);
        std::fs::remove_dir_all(&sibling).unwrap();
    }

    #[test]
    fn a_tree_moved_in_from_outside_or_a_directory_swapped_is_read_again() {
        let Some(_turn) = watched() else { return };
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("pkg/sub/.git")).unwrap();
        let d = settled_tree();
        std::fs::rename(outside.path().join("pkg"), d.path().join("a/pkg")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/pkg/sub/.git"), PathBuf::from("f/.git")]);
        // A watched directory replaced by another at the same path.
        let d = settled_tree();
        let other = d.path().join("other");
        std::fs::create_dir_all(other.join("x/.git")).unwrap();
        std::fs::remove_dir_all(d.path().join("a/b")).unwrap();
        std::fs::rename(&other, d.path().join("a/b")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/b/x/.git"), PathBuf::from("f/.git")]);
    }

    #[test]
    fn a_git_whose_event_was_lost_to_a_full_queue_is_found() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        let queued = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(16384);
        if queued > 200_000 {
            eprintln!("skipped: the queue holds {queued} events, too many to fill here");
            return;
        }
        // Files fill the queue (their events matter to no walk); the .git's event is then lost,
        // and only the overflow says something happened.
        let many = d.path().join("a/e");
        for i in 0..queued + 100 {
            std::fs::write(many.join(format!("f{i}")), "").unwrap();
        }
        std::fs::create_dir(d.path().join("a/b/c/.git")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/b/c/.git"), PathBuf::from("f/.git")]);
    }

    #[test]
    fn a_git_under_a_directory_mounted_over_after_a_kept_scan_is_found() {
        let Some(_turn) = watched() else { return };
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mounting needs root");
            return;
        }
        let d = settled_tree();
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(src.path().join("m/.git")).unwrap();
        let (s, t) = (
            std::ffi::CString::new(src.path().to_str().unwrap()).unwrap(),
            std::ffi::CString::new(d.path().join("a/e").to_str().unwrap()).unwrap(),
        );
        // A bind mount makes no inotify event in the directory it covers.
        // SAFETY: two NUL-terminated paths; the mount is undone below.
        if unsafe { libc::mount(s.as_ptr(), t.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) } != 0 {
            eprintln!("skipped: cannot bind-mount here ({})", std::io::Error::last_os_error());
            return;
        }
        let found = git_names(d.path());
        // SAFETY: the path mounted on above.
        unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
        assert_eq!(found, vec![PathBuf::from("a/e/m/.git"), PathBuf::from("f/.git")]);
    }

    #[test]
    fn a_sweep_kept_as_finding_nothing_still_removes_a_git_made_since() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        let protect = [".git".to_string()];
        let found = protected(d.path(), &protect, &[]).unwrap().names;
        let w = Watch::new(d.path(), &protect, Vec::new(), found);
        until_kept(1, "an unchanged tree's sweep", || assert!(sweep(std::slice::from_ref(&w)).is_empty()));
        std::fs::create_dir_all(d.path().join("a/b/.git/hooks")).unwrap();
        let notes = sweep(std::slice::from_ref(&w));
        assert_eq!(notes, vec!["removed a/b/.git: made by the command, and protected".to_string()]);
        assert!(!d.path().join("a/b/.git").exists());
    }

    /// The sweep after a sandboxed command answers a tree the watches say is as the last sweep left
    /// it on the caller's own thread (no hand-over to the blocking pool), and still removes a
    /// `.git` made since.
    #[test]
    fn an_unchanged_trees_sweep_is_answered_on_the_callers_thread_and_a_git_made_since_still_goes() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        let protect = [".git".to_string()];
        let found = protected(d.path(), &protect, &[]).unwrap().names;
        let w = Watch::new(d.path(), &protect, Vec::new(), found);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // Kept once on this thread; then the async sweep's answer comes from it, here.
        until_kept(1, "an unchanged tree's sweep", || assert!(sweep(std::slice::from_ref(&w)).is_empty()));
        until_kept(1, "the async sweep of an unchanged tree, on this thread", || {
            assert!(rt.block_on(super::super::sweep_blocking(vec![w.clone()])).is_empty())
        });
        std::fs::create_dir_all(d.path().join("a/b/.git/hooks")).unwrap();
        let notes = rt.block_on(super::super::sweep_blocking(vec![w.clone()]));
        assert_eq!(notes, vec!["removed a/b/.git: made by the command, and protected".to_string()]);
        assert!(!d.path().join("a/b/.git").exists());
    }

    /// Renames a plain file back and forth until the event queue is full (events that matter to
    /// no walk and make no inode).
    fn fill_queue(dir: &Path) {
        let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(16384);
        let (x, y) = (dir.join("x"), dir.join("y"));
        std::fs::write(&x, "").unwrap();
        for _ in 0..queued / 4 + 100 {
            std::fs::rename(&x, &y).unwrap();
            std::fs::rename(&y, &x).unwrap();
        }
    }

    #[test]
    fn a_directory_made_again_while_the_queue_was_full_is_watched_again() {
        use std::os::unix::fs::MetadataExt;
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        let protect = [".git".to_string()];
        let w = Watch::new(d.path(), &protect, Vec::new(), protected(d.path(), &protect, &[]).unwrap().names);
        assert!(sweep(std::slice::from_ref(&w)).is_empty());
        // A command fills the queue, then removes a watched directory and makes it again: its
        // IN_IGNORED is lost, and ext4 gives the new directory the old inode number.
        let c = d.path().join("a/b/c");
        let old = std::fs::metadata(&c).unwrap().ino();
        fill_queue(&d.path().join("a/e"));
        std::fs::remove_dir(&c).unwrap();
        std::fs::create_dir(&c).unwrap();
        let same = std::fs::metadata(&c).unwrap().ino() == old;
        assert!(sweep(std::slice::from_ref(&w)).is_empty());
        assert_eq!(git_names(d.path()), vec![PathBuf::from("f/.git")]);
        // The next command makes a .git there: the sweep must remove it.
        std::fs::create_dir_all(c.join(".git/hooks")).unwrap();
        let notes = sweep(std::slice::from_ref(&w));
        assert_eq!(
            notes,
            vec!["removed a/b/c/.git: made by the command, and protected".to_string()],
            "inode reused: {same}"
        );
        std::fs::create_dir_all(c.join(".git")).unwrap();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("a/b/c/.git"), PathBuf::from("f/.git")]);
    }

    /// Each recorded watch whose kernel watch is on another inode than the one recorded (or on
    /// none), below `root`.
    fn watches_on_other_inodes(root: &Path) -> Vec<PathBuf> {
        use std::os::fd::AsRawFd;
        let guard = super::WATCHER.lock().unwrap_or_else(|p| p.into_inner());
        let w = guard.as_ref().unwrap();
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", w.fd.as_raw_fd())).unwrap();
        let real: std::collections::HashMap<i32, u64> = info
            .lines()
            .filter(|l| l.starts_with("inotify wd:"))
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (
                    i32::from_str_radix(f[1].trim_start_matches("wd:"), 16).unwrap(),
                    u64::from_str_radix(f[2].trim_start_matches("ino:"), 16).unwrap(),
                )
            })
            .collect();
        w.watched
            .iter()
            .filter(|(p, (wd, _, ino))| p.starts_with(root) && real.get(wd) != Some(ino))
            .map(|(p, _)| p.clone())
            .collect()
    }

    #[test]
    fn a_directory_swapped_while_it_is_watched_never_counts_as_watched_on_the_wrong_inode() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        let protect = [".git".to_string()];
        let p = d.path().join("a/b/c");
        let started = std::time::Instant::now();
        let mut rounds = 0;
        while started.elapsed() < std::time::Duration::from_secs(4) {
            let q = d.path().join(format!("a/b/n{rounds}"));
            std::fs::create_dir(&q).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let swapper = {
                let (stop, p, q) = (stop.clone(), p.clone(), q.clone());
                std::thread::spawn(move || {
                    let (a, b) = (
                        std::ffi::CString::new(p.to_str().unwrap()).unwrap(),
                        std::ffi::CString::new(q.to_str().unwrap()).unwrap(),
                    );
                    while !stop.load(Ordering::Relaxed) {
                        // SAFETY: two NUL-terminated paths.
                        unsafe {
                            libc::renameat2(
                                libc::AT_FDCWD,
                                a.as_ptr(),
                                libc::AT_FDCWD,
                                b.as_ptr(),
                                libc::RENAME_EXCHANGE,
                            )
                        };
                    }
                })
            };
            let _ = protected(d.path(), &protect, &[]);
            stop.store(true, Ordering::Relaxed);
            swapper.join().unwrap();
            let wrong = watches_on_other_inodes(d.path());
            assert!(
                wrong.is_empty(),
                "after {rounds} rounds, recorded as watched on an inode no watch is on: {wrong:?}"
            );
            rounds += 1;
        }
        assert!(rounds > 20, "the race ran ({rounds} rounds)");
    }

    #[test]
    fn a_tree_put_at_the_root_path_by_renaming_a_directory_above_it_is_walked() {
        let Some(_turn) = watched() else { return };
        let top = tempfile::tempdir().unwrap();
        let root = top.path().join("ws/proj");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let protect = [".git".to_string()];
        let w = Watch::new(&root, &protect, Vec::new(), Vec::new());
        until_kept(2, "an unchanged tree's walk and sweep", || {
            assert!(protected(&root, &protect, &[]).unwrap().names.is_empty());
            assert!(sweep(std::slice::from_ref(&w)).is_empty());
        });
        // Renaming `ws` makes no event in the watched tree; another tree now has the root's path.
        std::fs::rename(top.path().join("ws"), top.path().join("ws-old")).unwrap();
        std::fs::create_dir_all(root.join("a/b/.git/hooks")).unwrap();
        assert_eq!(git_names(&root), vec![PathBuf::from("a/b/.git")]);
        assert_eq!(
            sweep(std::slice::from_ref(&w)),
            vec!["removed a/b/.git: made by the command, and protected".to_string()]
        );
    }

    #[test]
    fn a_directory_whose_mode_changed_is_walked_again() {
        let Some(_turn) = watched() else { return };
        let d = settled_tree();
        std::fs::set_permissions(d.path().join("a/b"), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let before = hits();
        assert_eq!(git_names(d.path()), vec![PathBuf::from("f/.git")]);
        assert_eq!(hits(), before, "a walk after a directory's mode changed was answered from the kept result");
    }
}
