//! What the protected-name walks read of each directory, kept between commands, so that a
//! sandbox's every command does not read its whole tree twice (a harness session's `/tmp` holds
//! an agent's installed packages: thousands of directories).
//!
//! A listing is used again only while its directory's stamp (device, inode and status-change
//! time) is what it was when it was read, and kept only where the stamp rules allow
//! (`fs::local::stamp`): a `.git` made since is always seen.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

/// The most listings kept; past it the cache starts over.
const MAX_LISTINGS: usize = 100_000;

pub use crate::fs::local::stamp::{clock, stamp, stamp_at, Devices, Stamp};

/// One directory's entries that a walk needs: its subdirectories, and the entries named one of
/// the walk's names (with whether each is a link).
#[derive(Debug, Default)]
pub struct Listing {
    pub dirs: Vec<OsString>,
    pub named: Vec<(OsString, bool)>,
}

/// Which walk a listing is for: its names (and how they compare) and the subtrees it leaves out.
pub fn walk_key(names: &[&str], folded: bool, skip: &[PathBuf]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (names, folded, skip).hash(&mut h);
    h.finish()
}

type Listings = HashMap<(u64, PathBuf), (Stamp, Arc<Listing>)>;
static CACHE: LazyLock<Mutex<Listings>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The listing of `dir` read before by the walk `key`, when `dir` is as it was then.
pub fn get(key: u64, dir: &Path, now: Stamp) -> Option<Arc<Listing>> {
    let cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    match cache.get(&(key, dir.to_path_buf())) {
        Some((s, l)) if *s == now => Some(l.clone()),
        _ => None,
    }
}

/// Keeps the listing of `dir`, read from the clock time `read_at` (`clock()`) when it had the
/// stamp `before`, if it still has it (`after`, taken after the read) and it had settled by then.
pub fn put(key: u64, dir: &Path, read_at: i128, before: Stamp, after: Option<Stamp>, listing: Arc<Listing>) {
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if !crate::fs::local::stamp::settled(read_at, before, after) {
        cache.remove(&(key, dir.to_path_buf()));
        return;
    }
    if cache.len() >= MAX_LISTINGS {
        cache.clear();
    }
    cache.insert((key, dir.to_path_buf()), (before, listing));
}
