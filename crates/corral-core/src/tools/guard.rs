//! The guard every tool passes before it touches a file: the path confined and deny-checked
//! where it really leads, `protect` and the spill directory, the path's lock, and the size limits.

use std::sync::{Arc, OnceLock};

use super::options::FsToolOptions;
use super::{MAX_READ_BYTES, MAX_WRITE_BYTES};
use crate::error::{Code, Error, Result};
use crate::fs::FsProvider;
use crate::path::{check_denied, normalize, Flavor};
use crate::text::{fmt_num, format_bytes};

/// Normalizes a path argument and refuses denied names, also where a link really leads.
pub(crate) async fn checked_path(fs: &dyn FsProvider, o: &FsToolOptions, raw: &str) -> Result<String> {
    let p = normalize(raw, Flavor::native())?;
    check_denied(&p, &o.deny)?;
    if fs.caps().real_path && !o.deny.is_empty() {
        let real = fs.real_path(&p).await?;
        if real != p {
            check_denied(&real, &o.deny).map_err(|_| {
                Error::new(Code::Denied, format!("Access denied: {p} (it leads to {real}, which holds a denied name)"))
            })?;
        }
    }
    Ok(p)
}

/// Serializes `write_file` and `edit_file` calls on the same path of the same provider: parallel
/// tool calls would otherwise each read the old content and the last write would drop the others'
/// edits. The guard is held from the read to the write.
pub(crate) async fn lock_path(fs: &dyn FsProvider, path: &str) -> tokio::sync::OwnedMutexGuard<()> {
    use std::collections::HashMap;
    use std::sync::{Mutex, Weak};
    type Locks = Mutex<HashMap<(usize, String), Weak<tokio::sync::Mutex<()>>>>;
    static LOCKS: OnceLock<Locks> = OnceLock::new();
    let key = (provider_identity(fs), path.to_string());
    let lock = {
        let mut map = LOCKS.get_or_init(Default::default).lock().unwrap();
        map.retain(|_, w| w.strong_count() > 0);
        match map.get(&key).and_then(Weak::upgrade) {
            Some(l) => l,
            None => {
                let l = Arc::new(tokio::sync::Mutex::new(()));
                map.insert(key, Arc::downgrade(&l));
                l
            }
        }
    };
    lock.lock_owned().await
}

/// One value per provider: a directory on disk and every view of it share theirs.
fn provider_identity(fs: &dyn FsProvider) -> usize {
    match fs.as_local() {
        Some(local) => local.identity(),
        None => fs as *const dyn FsProvider as *const () as usize,
    }
}

/// Marks `dir` of this provider as the shell tool's spill directory.
pub fn protect_spill_dir(fs: &dyn FsProvider, dir: &str) {
    if let Some(g) = fs.guarded_dirs() {
        g.add(dir);
    }
}

/// Refuses a write to a path a `protect` glob or a spill directory covers, by its name and by
/// where it really leads.
pub(crate) async fn check_protected(fs: &dyn FsProvider, o: &FsToolOptions, path: &str) -> Result<()> {
    let spill = fs.guarded_dirs().map(|g| g.list()).unwrap_or_default();
    if o.protect_set.is_none() && spill.is_empty() {
        return Ok(());
    }
    let real = if fs.caps().real_path { fs.real_path(path).await? } else { path.to_string() };
    for p in [path, real.as_str()] {
        if let Some(set) = &o.protect_set {
            if let Some(i) = set.matches(p).first() {
                return Err(Error::new(
                    Code::Protected,
                    format!(
                        "{path} is protected (it matches '{}'): write_file and edit_file leave it alone.",
                        o.protect[*i]
                    ),
                ));
            }
        }
        if let Some(dir) = spill.iter().find(|d| p == d.as_str() || p.starts_with(&format!("{d}/"))) {
            return Err(Error::new(
                Code::Protected,
                format!("{path} is protected: {dir} holds the shell's saved outputs; read them, do not change them."),
            ));
        }
    }
    Ok(())
}

/// A size and its limit as a message shows them: rounded, or in exact bytes where rounding would
/// make them read as equal (`10,485,761 bytes` against `10,485,760`).
pub(crate) fn size_against(size: u64, limit: u64) -> (String, String) {
    let (s, l) = (format_bytes(size), format_bytes(limit));
    if s == l {
        (format!("{} bytes", fmt_num(size)), fmt_num(limit))
    } else {
        (s, l)
    }
}

/// Refuses a file over `MAX_READ_BYTES` for `what` ("read", "edit").
pub(crate) fn check_read_size(path: &str, size: u64, what: &str, hint: &str) -> Result<()> {
    if size > MAX_READ_BYTES {
        let (s, l) = size_against(size, MAX_READ_BYTES);
        return Err(Error::new(
            Code::TooLarge,
            format!("{path} is too large to {what} ({s}; the limit is {l}).{hint}"),
        ));
    }
    Ok(())
}

/// Refuses a file (to edit) or a result (to write) over `MAX_WRITE_BYTES`.
pub(crate) fn check_write_size(path: &str, size: u64, what: &str) -> Result<()> {
    if size > MAX_WRITE_BYTES {
        let (s, l) = size_against(size, MAX_WRITE_BYTES);
        return Err(Error::new(
            Code::TooLarge,
            format!(
                "{path}: {what} would be {s} (the limit is {l}); nothing was written. Write smaller files, or change this one with a command."
            ),
        ));
    }
    Ok(())
}
