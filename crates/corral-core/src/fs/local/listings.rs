//! Directory listings kept between the file tools' walks: a directory whose stamp (device,
//! inode and status-change time) is what it was when it was listed lists the same entries, so a
//! walk of an unchanged tree (an agent's glob and grep, call after call) opens each directory and
//! looks at its stamp instead of listing it (on ext4, listing even a small directory hashes and
//! sorts every name). The rules that make that sound, and where listings are not kept, are the
//! stamp's (`stamp`): a directory changed in the last seconds, or on a file system that does not
//! keep its own change times, is listed every time.

use std::collections::HashMap;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, LazyLock, Mutex};

use super::stamp::{clock, settled, stamp, Devices, Stamp};

/// The most bytes of listings kept (past it, every one is dropped and the walks start again).
const MAX_BYTES: usize = 32 * 1024 * 1024;

/// A directory's listing as it was read (its `dirent64` records), with its stamp then.
type Listing = (Stamp, Arc<Vec<u8>>);

#[derive(Default)]
struct Kept {
    /// By device and inode.
    by_inode: HashMap<(u64, u64), Listing>,
    bytes: usize,
}

static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(Default::default);

#[cfg(test)]
thread_local! {
    /// How many listings this thread's walks took from the kept ones.
    pub(super) static HITS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The records of the directory `fd` (opened for reading): kept ones where its stamp says
/// nothing changed, else what `read` gives, kept for the next walk where the stamp allows.
/// `devices`: the file systems this walk has met.
pub(super) fn list(
    fd: BorrowedFd<'_>,
    devices: &mut Devices,
    read: impl FnOnce() -> std::io::Result<Vec<u8>>,
) -> std::io::Result<Listed> {
    let read_at = clock();
    let Some(before) = stamp(fd, devices) else { return read().map(Listed::Read) };
    if let Some(records) = kept(before) {
        #[cfg(test)]
        HITS.with(|h| h.set(h.get() + 1));
        return Ok(Listed::Kept(records));
    }
    let records = read()?;
    // A directory of a million names is read each time rather than crowd out every other.
    if records.len() <= MAX_BYTES / 8 && settled(read_at, before, stamp(fd, devices)) {
        let records = Arc::new(records);
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        if kept.bytes + records.len() > MAX_BYTES {
            kept.by_inode.clear();
            kept.bytes = 0;
        }
        kept.bytes += records.len();
        if let Some((_, old)) = kept.by_inode.insert(before.dev_ino(), (before, records.clone())) {
            kept.bytes -= old.len();
        }
        return Ok(Listed::Kept(records));
    }
    Ok(Listed::Read(records))
}

/// The records kept of the directory whose stamp is `now`, where nothing changed since they were
/// read (a walk that need not open the directory: `stamp::stamp_in`).
pub(super) fn kept(now: Stamp) -> Option<Arc<Vec<u8>>> {
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let (s, records) = kept.by_inode.get(&now.dev_ino())?;
    (*s == now).then(|| records.clone())
}

/// A directory's records: read now, or kept from a walk before.
pub(super) enum Listed {
    Read(Vec<u8>),
    Kept(Arc<Vec<u8>>),
}

#[cfg(test)]
mod tests {
    use super::HITS;
    use crate::fs::local::LocalFs;

    fn hits() -> usize {
        HITS.with(|h| h.get())
    }

    /// Every file path below the root a confined walk finds, sorted.
    fn files(fs: &LocalFs) -> Vec<String> {
        let mut out = Vec::new();
        fs.walk_confined(".", &mut |_, _| true, &mut |rel| {
            out.push(rel.to_string());
            true
        });
        out.sort();
        out
    }

    /// A walk stopped by a limit shows the same files whether the listings were read or kept: the
    /// files of a directory known from its kept listing come in the same turn as when it is opened.
    #[test]
    fn a_walk_finds_its_files_in_the_same_order_from_kept_listings() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..60 {
            let p = d.path().join(format!("d{}/e{}/f{i}.txt", i % 4, i % 3));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let fs = LocalFs::new(d.path().to_str().unwrap()).unwrap();
        let in_order = |fs: &LocalFs| {
            let mut out = Vec::new();
            fs.walk_confined(".", &mut |_, _| true, &mut |rel| {
                out.push(rel.to_string());
                true
            });
            out
        };
        let read = in_order(&fs);
        std::thread::sleep(std::time::Duration::from_millis(3100));
        let kept_now = in_order(&fs);
        let before = hits();
        let from_kept = in_order(&fs);
        assert_eq!((read.len(), &kept_now), (60, &read));
        assert_eq!(from_kept, read);
        let root = std::fs::File::open(d.path()).unwrap();
        if super::stamp(std::os::fd::AsFd::as_fd(&root), &mut Default::default()).is_some() {
            assert!(hits() > before, "no listing was kept");
        }
    }

    #[test]
    fn a_directory_of_files_kept_and_then_swapped_for_a_link_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "x").unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir_all(ws.join("in")).unwrap();
        std::fs::write(ws.join("in/x.txt"), "x").unwrap();
        let fs = LocalFs::new(ws.to_str().unwrap()).unwrap();
        let root = std::fs::File::open(&ws).unwrap();
        if super::stamp(std::os::fd::AsFd::as_fd(&root), &mut Default::default()).is_none() {
            eprintln!("skipped: the temporary directory's file system keeps no change times this kernel sets");
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(3100));
        assert_eq!(files(&fs), ["in/x.txt"]);
        let before = hits();
        assert_eq!(files(&fs), ["in/x.txt"]);
        assert_eq!(hits(), before + 2, "the root and `in`, its files known without opening it");
        std::fs::rename(ws.join("in"), ws.join("in.old")).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("in")).unwrap();
        assert_eq!(files(&fs), ["in.old/x.txt"]);
    }

    #[test]
    fn a_kept_listing_stands_only_while_its_directory_is_unchanged() {
        let d = tempfile::tempdir().unwrap();
        for f in ["a/b/c/one.txt", "a/b/two.txt", "a/three.txt", "d/four.txt"] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let fs = LocalFs::new(d.path().to_str().unwrap()).unwrap();
        let root = std::fs::File::open(d.path()).unwrap();
        if super::stamp(std::os::fd::AsFd::as_fd(&root), &mut Default::default()).is_none() {
            eprintln!("skipped: the temporary directory's file system keeps no change times this kernel sets");
            return;
        }
        let all = ["a/b/c/one.txt", "a/b/two.txt", "a/three.txt", "d/four.txt"];
        // Listed, but too recently changed to keep.
        assert_eq!(files(&fs), all);
        let before = hits();
        assert_eq!(files(&fs), all);
        assert_eq!(hits(), before, "a directory changed a moment ago was taken from a kept listing");
        // Settled: the next walk keeps every listing, the one after takes them.
        std::thread::sleep(std::time::Duration::from_millis(3100));
        assert_eq!(files(&fs), all);
        let before = hits();
        assert_eq!(files(&fs), all);
        assert_eq!(hits(), before + 5, "five unchanged directories");
        // Each kind of change, each in a directory that was kept.
        std::fs::write(d.path().join("a/b/c/new.txt"), "x").unwrap();
        std::fs::remove_file(d.path().join("a/three.txt")).unwrap();
        std::fs::rename(d.path().join("d/four.txt"), d.path().join("d/five.txt")).unwrap();
        std::fs::remove_dir_all(d.path().join("a/b")).unwrap();
        std::fs::create_dir_all(d.path().join("a/b/c")).unwrap();
        std::fs::write(d.path().join("a/b/c/six.txt"), "x").unwrap();
        // A file's own change (content, mode) changes no listing.
        std::fs::write(d.path().join("d/five.txt"), "longer").unwrap();
        let before = hits();
        assert_eq!(files(&fs), ["a/b/c/six.txt", "d/five.txt"]);
        assert_eq!(hits(), before + 1, "only the root was unchanged");
        std::fs::remove_dir_all(d.path().join("d")).unwrap();
        std::fs::create_dir(d.path().join("d")).unwrap();
        assert_eq!(files(&fs), ["a/b/c/six.txt"]);
    }
}
