//! A session's commands name paths inside its root (`/workspace`, `/tmp`, `/home/agent`), which
//! the keeper shows from host directories (`corral_keeper::root`). The plan is made with the host
//! paths — where the checks and the protected-name scan look — then its paths are turned into the
//! ones the command's view has.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use corral_keeper::child::Plan;

use crate::error::{Error, Result};

pub(super) struct Session {
    pub keeper: crate::sandbox::session::Keeper,
    /// (host directory, path inside).
    pub binds: Vec<(PathBuf, PathBuf)>,
}

/// The host path behind `inside` (itself when no bind holds it).
pub(super) fn host_path(binds: &[(PathBuf, PathBuf)], inside: &Path) -> PathBuf {
    binds
        .iter()
        .filter_map(|(host, at)| inside.strip_prefix(at).ok().map(|rest| (host, at, rest)))
        .max_by_key(|(_, at, _)| at.components().count())
        .map_or_else(|| inside.to_path_buf(), |(host, _, rest)| host.join(rest))
}

/// The path inside behind the host path `p` (itself when no bind holds it).
fn inside(binds: &[(PathBuf, PathBuf)], p: &CString) -> Result<CString> {
    let path = Path::new(std::ffi::OsStr::from_bytes(p.as_bytes()));
    let mapped = binds
        .iter()
        .filter_map(|(host, at)| path.strip_prefix(host).ok().map(|rest| (host, at, rest)))
        .max_by_key(|(host, _, _)| host.components().count())
        .map_or_else(
            || path.to_path_buf(),
            |(_, at, rest)| if rest.as_os_str().is_empty() { at.clone() } else { at.join(rest) },
        );
    CString::new(mapped.as_os_str().as_bytes()).map_err(|_| Error::config("LinuxSandbox: a NUL byte in a path"))
}

/// Turns a plan made with host paths into the session's view: its paths as the command sees
/// them, `/tmp` the session's, nothing covered by a tmpfs of the view (the root is the keeper's).
pub(super) fn translate(plan: &mut Plan, binds: &[(PathBuf, PathBuf)]) -> Result<()> {
    let each = |list: &mut Vec<CString>| -> Result<()> {
        for p in list.iter_mut() {
            *p = inside(binds, p)?;
        }
        Ok(())
    };
    plan.cwd = inside(binds, &plan.cwd)?;
    each(&mut plan.writable)?;
    each(&mut plan.protect)?;
    each(&mut plan.pins)?;
    each(&mut plan.hide_inner_dirs)?;
    each(&mut plan.hide_inner_files)?;
    plan.writable_parents.clear();
    plan.writable_covered = vec![false; plan.writable.len()];
    plan.hide_dirs.clear();
    plan.hide_files.clear();
    plan.session_tmp = binds.iter().any(|(_, at)| at == Path::new("/tmp"));
    Ok(())
}
