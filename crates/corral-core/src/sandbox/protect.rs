//! `protect`: the paths inside a sandbox's writable trees that stay read-only for the command.
//! An entry without a `/` (the default `.git`) is a name matched at any depth — a vendored
//! repository's `vendor/lib/.git/hooks` is as dangerous as the top one — and an entry with one is
//! a path relative to the working directory (or absolute inside it).

use std::path::{Path, PathBuf};

use crate::error::{Code, Error, Result};

/// The most protected paths one command gets (each is a mount): past it the command is refused
/// rather than run with some left writable.
pub const MAX_PROTECTED: usize = 1024;

/// Whether a `protect` entry is a name matched at any depth.
pub fn is_name(entry: &str) -> bool {
    !entry.contains('/')
}

/// Whether some component of `path` below `root` is a symbolic link.
fn through_a_link(root: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else { return true };
    let mut at = root.to_path_buf();
    rel.components().any(|c| {
        at.push(c);
        at.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// What `protect` names under `root` when a command starts.
#[derive(Debug, Default, Clone)]
pub struct Protected {
    /// The paths to keep read-only (bind mounts), outer paths first: bare names found at any depth
    /// (without following symlinks or looking inside a match or a `skip` subtree) and the other
    /// entries resolved against `root`. A match that is a symbolic link is left out: a bind mount
    /// would follow it (a command could point `.git` at a host socket); the `.git` a command
    /// cannot replace is the real one, a mount point.
    pub paths: Vec<PathBuf>,
    /// Every entry a bare name matched, links included (and whether it is a link): what the
    /// sweep after the command compares against.
    pub names: Vec<(PathBuf, bool)>,
}

/// The existing paths `protect` names under `root` (`Protected`). A configured path that now goes
/// through a link refuses the run, and so does a directory that cannot be read: a command could
/// hide a `.git` that way (a path past the system's length limit). One that vanished meanwhile is
/// passed over.
pub fn protected_paths(root: &Path, protect: &[String], skip: &[PathBuf]) -> Result<Vec<PathBuf>> {
    Ok(protected(root, protect, skip)?.paths)
}

/// `protected_paths`, with the bare names' matches (links included) as well.
pub fn protected(root: &Path, protect: &[String], skip: &[PathBuf]) -> Result<Protected> {
    let names: Vec<&str> = protect.iter().map(String::as_str).filter(|e| is_name(e)).collect();
    let mut found: Vec<PathBuf> = Vec::new();
    for e in protect.iter().filter(|e| !is_name(e)) {
        let full = if Path::new(e).is_absolute() { PathBuf::from(e) } else { root.join(e) };
        if !full.starts_with(root) || full.symlink_metadata().is_err() {
            continue;
        }
        if through_a_link(root, &full) {
            return Err(Error::new(
                Code::Io,
                format!(
                    "The protected path '{}' now goes through a symbolic link; the command was not run. Restore it from outside the sandbox.",
                    e.chars().take(200).collect::<String>()
                ),
            ));
        }
        found.push(full);
    }
    let mut matched = Vec::new();
    if !names.is_empty() {
        matched = scan(root, &names, skip)?;
        let real: Vec<&PathBuf> =
            matched.iter().filter(|p| p.symlink_metadata().is_ok_and(|m| !m.file_type().is_symlink())).collect();
        if found.len() + real.len() > MAX_PROTECTED {
            return Err(too_many(&names));
        }
        found.extend(real.into_iter().cloned());
    }
    found.sort();
    found.dedup();
    found.sort_by_key(|p| p.components().count());
    matched.sort();
    let names = matched
        .into_iter()
        .map(|p| {
            let link = p.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink());
            (p, link)
        })
        .collect();
    Ok(Protected { paths: found, names })
}

fn too_many(names: &[&str]) -> Error {
    Error::new(
        Code::TooLarge,
        format!(
            "The working directory holds more than {MAX_PROTECTED} protected paths ({}); the command was not run.",
            names.join(", ")
        ),
    )
}

/// The shared state of a scan: directories not read yet, how many are being read, what was found,
/// and the first error.
#[derive(Default)]
struct Scan {
    todo: Vec<PathBuf>,
    busy: usize,
    found: Vec<PathBuf>,
    error: Option<Error>,
}

/// Every entry under `root` named one of `names` (never looked inside), leaving out
/// the `skip` subtrees. Directories are read on every core (a tree of 78,000 files has 5,000 of
/// them, and each command of a sandbox scans it); stops at the first directory that cannot be
/// read, or past `MAX_PROTECTED` matches.
fn scan(root: &Path, names: &[&str], skip: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let state = std::sync::Mutex::new(Scan { todo: vec![root.to_path_buf()], ..Default::default() });
    let more = std::sync::Condvar::new();
    #[cfg(unix)]
    let key = cache::walk_key(names, false, skip);
    #[cfg(not(unix))]
    let key = 0;
    // Where nothing that matters changed since a whole scan of this tree began, its result stands.
    #[cfg(target_os = "linux")]
    let generation = watch::generation(names);
    #[cfg(not(target_os = "linux"))]
    let generation: Option<u64> = None;
    #[cfg(target_os = "linux")]
    let root_id = generation.and_then(|_| watch::dir_id(root));
    #[cfg(target_os = "linux")]
    if let (Some(g), Some(id)) = (generation, root_id) {
        if let Some(found) = watch::kept(key, root, id, g) {
            return Ok(found.to_vec());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let root_id: Option<(u64, u64)> = None;
    let watching = std::sync::atomic::AtomicBool::new(generation.is_some() && root_id.is_some());
    let work = || {
        #[cfg(unix)]
        let mut devices = cache::Devices::default();
        #[cfg(not(unix))]
        let mut devices = ();
        loop {
            let dir = {
                let mut s = state.lock().unwrap();
                loop {
                    if s.error.is_some() {
                        return;
                    }
                    if let Some(d) = s.todo.pop() {
                        s.busy += 1;
                        break d;
                    }
                    if s.busy == 0 {
                        return;
                    }
                    s = more.wait(s).unwrap();
                }
            };
            let result = read_one(root, &dir, names, skip, key, &mut devices, &watching);
            let mut s = state.lock().unwrap();
            s.busy -= 1;
            match result {
                Ok((dirs, found)) => {
                    s.todo.extend(dirs);
                    s.found.extend(found);
                    if s.found.len() > MAX_PROTECTED && s.error.is_none() {
                        s.error = Some(too_many(names));
                    }
                }
                Err(e) => {
                    s.error.get_or_insert(e);
                }
            }
            drop(s);
            more.notify_all();
        }
    };
    std::thread::scope(|s| {
        for _ in 1..crate::worker_threads() {
            s.spawn(work);
        }
        work();
    });
    let s = state.into_inner().unwrap_or_else(|e| e.into_inner());
    match s.error {
        Some(e) => Err(e),
        None => {
            #[cfg(target_os = "linux")]
            if let (Some(g), Some(id), true) =
                (generation, root_id, watching.load(std::sync::atomic::Ordering::Relaxed))
            {
                watch::keep(key, root, id, g, s.found.clone());
            }
            Ok(s.found)
        }
    }
}

/// One directory of a scan: its subdirectories to read next, and its entries named in `names`
/// (links so named too; never entered).
fn read_one(
    root: &Path,
    dir: &Path,
    names: &[&str],
    skip: &[PathBuf],
    key: u64,
    #[cfg(unix)] devices: &mut cache::Devices,
    #[cfg(not(unix))] _devices: &mut (),
    watching: &std::sync::atomic::AtomicBool,
) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let _ = (key, watching);
    let unreadable = |e: std::io::Error| {
        let rel = dir.strip_prefix(root).map(|r| r.display().to_string()).unwrap_or_default();
        Error::new(
            Code::Io,
            format!(
                "Could not look through '{}' for protected paths ({e}); the command was not run. Move or remove that directory from outside the sandbox.",
                if rel.is_empty() { ".".to_string() } else { rel.chars().take(200).collect() }
            ),
        )
    };
    // The listing read before, while the directory is as it was then.
    // Watched before it is read; a scan with a directory that cannot be is not kept.
    #[cfg(target_os = "linux")]
    let stamp = if watching.load(std::sync::atomic::Ordering::Relaxed) {
        let (stamp, watched) = watch::look(dir, || cache::stamp_at(dir, devices));
        if !watched {
            watching.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        stamp
    } else {
        cache::stamp_at(dir, devices)
    };
    #[cfg(all(unix, not(target_os = "linux")))]
    let stamp = cache::stamp_at(dir, devices);
    #[cfg(unix)]
    if let Some(listing) = stamp.and_then(|s| cache::get(key, dir, s)) {
        return Ok((
            listing.dirs.iter().map(|n| dir.join(n)).collect(),
            listing.named.iter().map(|(n, _)| dir.join(n)).collect(),
        ));
    }
    #[cfg(unix)]
    let read_at = cache::clock();
    let (mut dirs, mut found) = (Vec::new(), Vec::new());
    #[cfg(unix)]
    let mut listing = cache::Listing::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // Removed while the walk ran (a build cleaning up): nothing left to protect.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((dirs, found)),
        Err(e) => return Err(unreadable(e)),
    };
    for entry in entries {
        let entry = entry.map_err(unreadable)?;
        let name = entry.file_name();
        let kind = match entry.file_type() {
            Ok(kind) => kind,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(unreadable(e)),
        };
        let named = names.iter().any(|n| name.as_encoded_bytes() == n.as_bytes());
        // Most entries are files with other names: nothing to build or compare for them.
        if !named && !kind.is_dir() {
            continue;
        }
        let path = entry.path();
        if skip.iter().any(|s| path.starts_with(s)) {
            continue;
        }
        #[cfg(unix)]
        if named {
            listing.named.push((name, kind.is_symlink()));
        } else {
            listing.dirs.push(name);
        }
        if named {
            found.push(path);
        } else {
            dirs.push(path);
        }
    }
    #[cfg(unix)]
    if let Some(before) = stamp {
        // Read by path: kept only if the path names the same directory, unchanged, after the read.
        cache::put(key, dir, read_at, before, cache::stamp_at(dir, devices), std::sync::Arc::new(listing));
    }
    Ok((dirs, found))
}

#[cfg(not(unix))]
/// The entries named by `protect`'s bare names under `root` now, links included (git follows a
/// `.git` link), that are not in `before` (what the command found when it started): what a command
/// made. `before` is sorted (`Protected::names`). A directory that cannot be read is an error, as
/// at the start.
pub fn made_since(root: &Path, protect: &[String], skip: &[PathBuf], before: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let names: Vec<&str> = protect.iter().map(String::as_str).filter(|e| is_name(e)).collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let mut made: Vec<PathBuf> =
        scan(root, &names, skip)?.into_iter().filter(|p| before.binary_search(p).is_err()).collect();
    made.sort();
    Ok(made)
}

#[cfg(not(unix))]
/// Removes what `made_since` found, and says so for the result's note: `removed lib/.git: made by
/// the command, and protected`. Each entry is first renamed aside in its directory (at once no
/// tool takes it for what it was named), then removed without following any link, through
/// descriptors opened beneath `root`; one that cannot be removed whole is named with where it
/// was left.
pub fn remove_made(root: &Path, made: &[PathBuf]) -> Vec<String> {
    let mut notes = Vec::new();
    for path in made {
        let Ok(rel) = path.strip_prefix(root) else { continue };
        let shown = rel.display().to_string();
        match remove::remove_beneath(root, rel) {
            Ok(()) => notes.push(format!("removed {shown}: made by the command, and protected")),
            Err(remove::Left { aside: Some(aside), error }) => notes.push(format!(
                "{shown} was made by the command and is protected: moved aside to {} but not removed ({error})",
                aside.display()
            )),
            Err(remove::Left { aside: None, error }) => notes
                .push(format!("{shown} was made by the command and is protected, but could not be removed ({error})")),
        }
    }
    notes
}

/// One writable tree as a command found it: its bare `protect` names and what they matched.
#[derive(Debug, Clone)]
pub struct Watch {
    root: PathBuf,
    names: Vec<String>,
    skip: Vec<PathBuf>,
    before: Vec<(PathBuf, bool)>,
}

impl Watch {
    /// `protect`'s bare names in `root` (a command's writable tree), with what `protected` found
    /// matched (names it was also given are left out of the comparison).
    pub fn new(root: &Path, protect: &[String], skip: Vec<PathBuf>, found: Vec<(PathBuf, bool)>) -> Watch {
        let names: Vec<String> = protect.iter().filter(|e| is_name(e)).cloned().collect();
        let before = found
            .into_iter()
            .filter(|(p, _)| {
                p.file_name()
                    .is_some_and(|n| names.iter().any(|x| n.as_encoded_bytes().eq_ignore_ascii_case(x.as_bytes())))
            })
            .collect();
        Watch { root: root.to_path_buf(), names, skip, before }
    }
}

/// [`sweep`] on the blocking pool, for an async caller; a sweep that did not finish is a note.
/// Where the watches have nothing queued and say every tree is as the last sweep left it, with
/// nothing found, the answer is a few system calls: given here, with no hand-over to another
/// thread.
pub async fn sweep_blocking(watch: Vec<Watch>) -> Vec<String> {
    #[cfg(target_os = "linux")]
    if watch::quiet()
        && watch.iter().all(|w| w.names.is_empty() || remove::finds_nothing(&w.root, &w.names, &w.skip, &w.before))
    {
        return Vec::new();
    }
    tokio::task::spawn_blocking(move || sweep(&watch))
        .await
        .unwrap_or_else(|_| vec!["the sweep for protected names the command made did not finish".to_string()])
}

/// After a command: removes every protected name it made under each watched tree, and says what
/// was done (or could not be looked through) for the result's note.
pub fn sweep(watch: &[Watch]) -> Vec<String> {
    let mut notes = Vec::new();
    for w in watch.iter().filter(|w| !w.names.is_empty()) {
        #[cfg(unix)]
        notes.extend(remove::sweep_tree(&w.root, &w.names, &w.skip, &w.before));
        #[cfg(not(unix))]
        {
            let before: Vec<PathBuf> = w.before.iter().map(|(p, _)| p.clone()).collect();
            match made_since(&w.root, &w.names, &w.skip, &before) {
                Ok(made) => notes.extend(remove_made(&w.root, &made)),
                Err(_) => notes.push(format!(
                    "a directory the command left could not be looked through for protected names ({}) it may have made; the next command will not run until it can be",
                    w.names.join(", ")
                )),
            }
        }
    }
    notes
}

/// The most names one kind of sweep note lists before it says how many more there are.
const NOTE_NAMES: usize = 5;

/// Adds `notes` to a result's note: the removed names as one line (`removed a/.git, b/.git and
/// 1,098 more: made by the command, and protected`), then at most `NOTE_NAMES` of the others
/// and how many more.
pub fn add_notes(r: &mut crate::shell::ExecResult, notes: Vec<String>) {
    if notes.is_empty() {
        return;
    }
    const REMOVED: &str = ": made by the command, and protected";
    let (removed, other): (Vec<String>, Vec<String>) =
        notes.into_iter().partition(|n| n.starts_with("removed ") && n.ends_with(REMOVED));
    let mut lines = Vec::new();
    if !removed.is_empty() {
        let names: Vec<&str> =
            removed.iter().take(NOTE_NAMES).map(|n| &n["removed ".len()..n.len() - REMOVED.len()]).collect();
        let more = removed.len().saturating_sub(NOTE_NAMES);
        let list = if more > 0 {
            format!("{} and {} more", names.join(", "), crate::tools::fmt_count(more))
        } else {
            names.join(", ")
        };
        lines.push(format!("removed {list}{REMOVED}"));
    }
    lines.extend(other.iter().take(NOTE_NAMES).cloned());
    if other.len() > NOTE_NAMES {
        lines.push(format!("and {} more such notes", crate::tools::fmt_count(other.len() - NOTE_NAMES)));
    }
    let text = lines.join("; ");
    r.note = Some(match r.note.take() {
        Some(n) if !n.is_empty() => format!("{n}; {text}"),
        _ => text,
    });
}

#[path = "protect_remove.rs"]
mod remove;

#[cfg(unix)]
#[path = "protect_cache.rs"]
mod cache;

#[cfg(target_os = "linux")]
#[path = "protect_watch.rs"]
mod watch;

/// The directories between `root` and each of `paths` (below `root`, above the path), outer ones
/// first: mounted onto themselves they cannot be renamed, so a command cannot carry a protected
/// path away from where the next run looks for it.
pub fn pins(root: &Path, paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in paths {
        let mut a = p.parent();
        while let Some(dir) = a.filter(|d| d.starts_with(root) && *d != root) {
            out.push(dir.to_path_buf());
            a = dir.parent();
        }
    }
    out.sort();
    out.dedup();
    out.sort_by_key(|p| p.components().count());
    out
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn names_match_at_any_depth_and_paths_only_where_they_point() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for p in [".git/hooks", "vendor/lib/.git/hooks", "a/b/c/.git", "secrets", "hidden/.git"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        // A worktree's `.git` is a file.
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: x").unwrap();
        // A match is not looked into; a symlink is not followed, and a link named .git is not a match.
        std::os::unix::fs::symlink(root.join("vendor"), root.join("link")).unwrap();
        std::fs::create_dir_all(root.join("planted")).unwrap();
        std::os::unix::fs::symlink("/var/run", root.join("planted/.git")).unwrap();
        let got =
            protected_paths(root, &[".git".into(), "secrets".into(), "docs/x".into()], &[root.join("hidden")]).unwrap();
        let rel: Vec<String> = got.iter().map(|p| p.strip_prefix(root).unwrap().display().to_string()).collect();
        assert_eq!(rel.len(), 5, "{rel:?}");
        for want in [".git", "secrets", "wt/.git", "vendor/lib/.git", "a/b/c/.git"] {
            assert!(rel.contains(&want.to_string()), "{want} in {rel:?}");
        }
        assert!(protected_paths(root, &[], &[]).unwrap().is_empty());
        // A configured path that now goes through a link refuses the run.
        std::fs::rename(root.join("a"), root.join("a2")).unwrap();
        std::os::unix::fs::symlink(root.join("a2"), root.join("a")).unwrap();
        let e = protected_paths(root, &["a/b/c/.git".into()], &[]).unwrap_err();
        assert!(e.message.contains("symbolic link"), "{}", e.message);
    }

    #[test]
    fn a_wide_tree_is_scanned_whole_on_every_core_and_too_many_matches_refuse_the_run() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        // 400 directories three deep, a `.git` in every seventh, files everywhere.
        let mut want = Vec::new();
        for i in 0..400 {
            let dir = root.join(format!("p{}/q{}/r{i}", i % 5, i % 11));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..5 {
                std::fs::write(dir.join(format!("f{f}.c")), "x").unwrap();
            }
            if i % 7 == 0 {
                std::fs::create_dir(dir.join(".git")).unwrap();
                want.push(dir.join(".git"));
            }
        }
        want.sort();
        for _ in 0..5 {
            let mut got = protected_paths(root, &[".git".into()], &[]).unwrap();
            got.sort();
            assert_eq!(got, want);
        }
        for i in 0..=MAX_PROTECTED {
            std::fs::create_dir_all(root.join(format!("many/{i}/.git"))).unwrap();
        }
        let e = protected_paths(root, &[".git".into()], &[]).unwrap_err();
        assert_eq!(e.code, Code::TooLarge, "{}", e.message);
    }
}
