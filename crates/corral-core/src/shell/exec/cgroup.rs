//! A command's own control group, so that a timeout or an abort kills every process it started,
//! including those that left its process group (`setsid`, `setpgrp`, a daemonizing server).
//!
//! Where the cgroup v1 `pids` hierarchy (or a cgroup v2 directory with `cgroup.kill`) is writable
//! — as root on most Linux machines — each command gets a fresh group: the child moves itself into
//! it between fork and exec (one `write` of `0` to `cgroup.procs`, async-signal-safe), and its
//! descendants inherit it. Killing then means: every pid listed in the group gets SIGKILL, until
//! the group is empty. Elsewhere `create` returns `None` and only the process group is killed; the
//! shell tool's note then says so.

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::CString;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    /// v1's pids hierarchy, and a hybrid host's v2 tree beside it.
    const V1_PIDS: &str = "/sys/fs/cgroup/pids";
    const UNIFIED: &str = "/sys/fs/cgroup/unified";

    /// The parents tried, in order: v1's pids hierarchy, a hybrid host's v2 tree, and on a host
    /// with cgroup v2 alone this process's own group (`v2_parent`).
    fn parents() -> impl Iterator<Item = &'static str> {
        [V1_PIDS, UNIFIED].into_iter().chain(v2_parent())
    }

    /// Every hierarchy a group of this process may be made in (`parents`, and the memory
    /// controller LinuxSandbox's `memoryBytes` uses): the owner guard empties them all.
    pub fn hierarchies() -> Vec<&'static str> {
        parents().chain(["/sys/fs/cgroup/memory"]).collect()
    }

    /// On a host with cgroup v2 alone (`/sys/fs/cgroup` is the tree's top): this process's own
    /// group (`0::<path>` in `/proc/self/cgroup`). Commands' groups are made below it, so they
    /// stay within the limits and the accounting of the unit or container Node runs in. Checked
    /// once to take a process (a child moved into a group made there): where a group can be made
    /// but not joined (a threaded subtree, a namespace that hides the mover's own group), every
    /// command's start would fail, so none is made and only the process group is killed, as
    /// without cgroups. The check blocks for as long as one move takes, once per process.
    fn v2_parent() -> Option<&'static str> {
        static PARENT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        PARENT
            .get_or_init(|| {
                if !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                    return None;
                }
                let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
                let own = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
                if !own.starts_with('/') || own.split('/').any(|c| c == "..") {
                    return None;
                }
                let parent = format!("/sys/fs/cgroup{}", own.trim_end_matches('/'));
                takes_processes(&parent).then_some(parent)
            })
            .as_deref()
    }

    /// Whether a group made under `parent` takes a process: a child (`sh` waiting on its input)
    /// is moved into one, then ended.
    fn takes_processes(parent: &str) -> bool {
        let Some(group) = Cgroup::create_in(parent) else { return false };
        let Ok(mut child) = std::process::Command::new("/bin/sh")
            .args(["-c", "read _"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
        else {
            return false;
        };
        let moved = std::fs::write(group.dir.join("cgroup.procs"), child.id().to_string()).is_ok();
        let _ = child.kill();
        let _ = child.wait();
        moved
    }

    /// Groups whose removal failed while processes were still in them (a command's background
    /// process, a prepared process): tried again whenever a group is made, so that one left
    /// empty later is removed then. At most `LEFT_MAX`; past it the oldest are left to the
    /// owner guard, which removes them when this process ends.
    static LEFT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    const LEFT_MAX: usize = 256;

    fn sweep_left() {
        LEFT.lock().unwrap_or_else(|p| p.into_inner()).retain(|dir| !removed(dir));
    }

    /// Removes group directory `dir`: whether it is gone (removed now, or before).
    fn removed(dir: &std::path::Path) -> bool {
        std::fs::remove_dir(dir).map_or_else(|e| e.kind() == std::io::ErrorKind::NotFound, |()| true)
    }

    pub struct Cgroup {
        dir: PathBuf,
        procs: CString,
    }

    impl Cgroup {
        /// A new, empty group for one command, or `None` where none can be made.
        pub fn create() -> Option<Cgroup> {
            parents().find_map(Cgroup::create_in)
        }

        /// A new group under `parent` (a cgroup directory), or `None`.
        pub fn create_in(parent: &str) -> Option<Cgroup> {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let base = PathBuf::from(parent);
            if !base.join("cgroup.procs").exists() {
                return None;
            }
            sweep_left();
            let dir = base.join(format!("corral-{}-{n}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            let procs = dir.join("cgroup.procs");
            match CString::new(procs.to_string_lossy().as_bytes()) {
                Ok(procs) => Some(Cgroup { dir, procs }),
                Err(_) => {
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
            }
        }

        /// Writes one of the group's control files (`pids.max`, `memory.limit_in_bytes`).
        pub fn set(&self, file: &str, value: &str) -> bool {
            std::fs::write(self.dir.join(file), value).is_ok()
        }

        /// Reads one of the group's control files.
        pub fn get(&self, file: &str) -> Option<String> {
            std::fs::read_to_string(self.dir.join(file)).ok()
        }

        /// The path the child writes `0` to, moving itself into the group before exec.
        pub fn procs_path(&self) -> CString {
            self.procs.clone()
        }

        fn pids(&self) -> Vec<i32> {
            std::fs::read_to_string(self.dir.join("cgroup.procs"))
                .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
                .unwrap_or_default()
        }

        /// Kills every process in the group, again until none is left (a fork may land between a
        /// read of the list and the kills). True when the group ended up empty.
        pub async fn kill_all(&self) -> bool {
            for _ in 0..100 {
                let pids = self.pids();
                if pids.is_empty() {
                    return true;
                }
                for pid in pids {
                    // SAFETY: kill(2) with a pid read from the group.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            self.pids().is_empty()
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            // Fails while processes remain (a normal exit leaves background processes running,
            // as Node does): tried again later (`LEFT`).
            if !removed(&self.dir) {
                let mut left = LEFT.lock().unwrap_or_else(|p| p.into_inner());
                if left.len() >= LEFT_MAX {
                    left.remove(0);
                }
                left.push(std::mem::take(&mut self.dir));
            }
        }
    }

    /// The group made for a launcher's next command (LinuxSandbox's keeper), so that the process
    /// it prepares for that command joins it while it waits: a move into a group can wait for an
    /// RCU grace period (milliseconds) when the last move is not recent, as between an agent's
    /// commands. One at a time; the command that takes it sets its limits, as on a fresh group.
    #[derive(Default)]
    pub struct Ahead(std::sync::Mutex<Option<Cgroup>>);

    impl Ahead {
        /// The group made ahead, if any.
        pub fn take(&self) -> Option<Cgroup> {
            self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
        }

        /// Makes the next command's group and keeps it: its `cgroup.procs`.
        pub fn make(&self) -> Option<CString> {
            let group = Cgroup::create()?;
            let procs = group.procs_path();
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(group);
            Some(procs)
        }

        /// The group made ahead, if any: its directory and the processes in it.
        #[cfg(test)]
        pub fn made(&self) -> Option<(PathBuf, Vec<i32>)> {
            let slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
            slot.as_ref().map(|g| (g.dir.clone(), g.pids()))
        }
    }

    /// In the child, between fork and exec: moves the calling process into the group. Only
    /// async-signal-safe calls (open, write, close).
    pub fn join_in_child(procs: &CString) -> std::io::Result<()> {
        // SAFETY: a NUL-terminated path; raw syscalls only.
        unsafe {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let r = libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
            if r != 1 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
pub use imp::{hierarchies, join_in_child, Ahead, Cgroup};
