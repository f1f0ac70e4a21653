//! The owner guard: every process a command starts ends with the process that started it, however
//! that process ends (`process.exit`, a signal, SIGKILL).
//!
//! One small `/bin/sh` process per host process, started with the first command: its standard
//! input is a pipe whose only writer is this process, so it reads end-of-file exactly when this
//! process is gone. Each command's process group is registered when it starts (`+PGID`) and
//! released once the group is empty (`-PGID`). At end-of-file the guard kills every registered
//! group, then empties every control group this process made (`corral-<pid>-*` under the
//! hierarchies `cgroup.rs` uses), which also takes the processes that left their group (`setsid`)
//! — where no control group can be made (an unprivileged user on most machines), the process
//! group is what is killed. A LinuxSandbox command's first process is its registered group's
//! leader; its pid namespace's init carries a parent-death signal bound to it, so the whole
//! namespace goes with it.
//!
//! All state is kept with shell built-ins (a marker file per group in a private directory), so the
//! guard forks nothing while this process runs.

#[cfg(unix)]
mod imp {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, ChildStdin, Command, Stdio};
    use std::sync::{Mutex, OnceLock};

    /// `$1`: this process's id; the other arguments: the control-group hierarchies to empty.
    const SCRIPT: &str = r#"
trap '' HUP INT QUIT TERM PIPE
owner=$1; shift
d=$(mktemp -d "${TMPDIR:-/tmp}/corral-guard.XXXXXX") || exit 1
while read -r op g; do
  case $g in ''|*[!0-9]*) continue ;; esac
  case $op in
    +) echo 1 > "$d/$g" ;;
    -) : > "$d/$g" ;;
  esac
done
for f in "$d"/*; do
  [ -s "$f" ] && kill -KILL "-${f##*/}" 2>/dev/null
done
round=0
while [ $round -lt 200 ]; do
  round=$((round + 1))
  left=
  for h in "$@"; do
    for g in "$h"/corral-"$owner"-*; do
      [ -d "$g" ] || continue
      [ -e "$g/cgroup.kill" ] && echo 1 > "$g/cgroup.kill" 2>/dev/null
      while read -r p; do
        left=1
        kill -KILL "$p" 2>/dev/null
      done < "$g/cgroup.procs"
    done
  done
  [ -n "$left" ] || break
  sleep 0.01 2>/dev/null || sleep 1
done
for h in "$@"; do
  for g in "$h"/corral-"$owner"-*; do
    [ -d "$g" ] && rmdir "$g" 2>/dev/null
  done
done
rm -rf "$d"
"#;

    struct Guard {
        input: ChildStdin,
        // Held so the guard is never reaped as a stranger's child; it ends after this process.
        #[allow(dead_code)]
        child: Child,
    }

    fn guard() -> Option<&'static Mutex<Guard>> {
        static GUARD: OnceLock<Option<Mutex<Guard>>> = OnceLock::new();
        GUARD
            .get_or_init(|| {
                let mut cmd = Command::new("/bin/sh");
                cmd.arg("-c").arg(SCRIPT).arg("corral-guard").arg(std::process::id().to_string());
                #[cfg(target_os = "linux")]
                cmd.args(super::super::cgroup::hierarchies());
                // Its own group: a command that kills its group, or a terminal's ^C, leaves it be.
                let mut child = cmd
                    .process_group(0)
                    .env_clear()
                    .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .ok()?;
                let input = child.stdin.take()?;
                // Never blocks this process: a guard that stopped reading (a command stopped it)
                // loses lines, not the process's threads.
                {
                    use std::os::fd::AsRawFd;
                    let fd = input.as_raw_fd();
                    // SAFETY: fcntl on a descriptor this process owns.
                    unsafe { libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK) };
                }
                Some(Mutex::new(Guard { input, child }))
            })
            .as_ref()
    }

    fn send(line: String) {
        if let Some(g) = guard() {
            let mut g = g.lock().unwrap_or_else(|e| e.into_inner());
            let _ = g.input.write_all(line.as_bytes());
        }
    }

    /// A command's process group, to be killed if this process ends before it does.
    pub fn register(pgid: u32) {
        send(format!("+ {pgid}\n"));
    }

    /// Forgets `pgid` once no process of it is left; a group that still has members (a daemon a
    /// finished command left running) stays registered.
    pub fn release_if_empty(pgid: u32) {
        let Ok(id) = i32::try_from(pgid) else { return };
        // SAFETY: kill(2) with signal 0 only checks whether the group exists.
        let gone =
            unsafe { libc::kill(-id, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            send(format!("- {pgid}\n"));
        }
    }

    /// Whether the guard runs (false where `/bin/sh` could not be started).
    pub fn running() -> bool {
        guard().is_some()
    }
}

#[cfg(unix)]
pub use imp::{register, release_if_empty, running};

#[cfg(not(unix))]
pub fn register(_pgid: u32) {}
#[cfg(not(unix))]
pub fn release_if_empty(_pgid: u32) {}
#[cfg(not(unix))]
pub fn running() -> bool {
    false
}

/// For the tests that kill a command's owner: a child process of the test binary runs one test
/// (the owner), and the test looks for the command's processes by a tag in their command lines.
#[cfg(all(test, target_os = "linux"))]
pub mod owner_tests {
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};

    /// Set in the owner child: how it ends (`exit` or `kill`, when the test kills it).
    pub const OWNER: &str = "CORRAL_TEST_OWNER_ENDS_BY";
    /// The tag the owner's commands carry.
    pub const TAG: &str = "CORRAL_TEST_OWNER_TAG";
    /// What the owner prints once its commands run.
    const READY: &str = "corral-owner-ready";

    /// The pids of the processes whose command line holds `tag`.
    pub fn with_tag(tag: &str) -> Vec<i32> {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if std::fs::read(e.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(tag)) {
                out.push(pid);
            }
        }
        out
    }

    /// Waits up to `secs` for `n` processes tagged `tag`.
    pub fn wait_for(tag: &str, n: usize, secs: u64) -> bool {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if with_tag(tag).len() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Runs the test `name` of this binary as the owner, ending as `how`, once it printed
    /// `corral-owner-ready`; then returns the command lines of the tagged processes still alive 10 s later
    /// (killed before return).
    pub fn survivors(name: &str, how: &str, env: &[(&str, &str)]) -> Vec<String> {
        let tag = format!("{}", 1000 + rand::random::<u32>() % 1_000_000);
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([name, "--exact", "--ignored", "--nocapture", "--test-threads=1"]).env(OWNER, how).env(TAG, &tag);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child =
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::inherit()).spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let ready = BufReader::new(out).lines().map_while(Result::ok).any(|l| l.ends_with(READY));
        assert!(ready, "the owner never started its commands");
        if how == "kill" {
            let _ = child.kill();
        }
        let _ = child.wait();
        let end = Instant::now() + Duration::from_secs(10);
        let mut left = with_tag(&tag);
        while !left.is_empty() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(50));
            left = with_tag(&tag);
        }
        let lines = left
            .iter()
            .map(|p| {
                String::from_utf8_lossy(&std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default())
                    .replace('\0', " ")
            })
            .collect();
        for pid in &left {
            // SAFETY: kill(2) of a process this test started.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        lines
    }

    /// In the owner: starts a foreground command and a background one on `shell`, each with a
    /// `setsid` process and one in its group, all tagged, then says `corral-owner-ready` and ends.
    pub async fn own_commands_then_end(shell: std::sync::Arc<dyn crate::shell::ShellProvider>) -> ! {
        use crate::shell::ExecOptions;
        let tag = std::env::var(TAG).unwrap();
        let (a, b) = (shell.clone(), shell);
        let fg = format!("setsid sleep 7{tag} & sleep 8{tag}");
        let bg = format!("setsid sleep 5{tag} & sleep 6{tag}; wait");
        tokio::spawn(async move { a.exec(&fg, ExecOptions { timeout_ms: Some(600_000), ..Default::default() }).await });
        tokio::spawn(async move {
            b.exec(&bg, ExecOptions { timeout_ms: Some(600_000), end_with_shell: true, ..Default::default() }).await
        });
        assert!(wait_for(&tag, 4, 30), "the commands did not start");
        ready_then_end()
    }

    /// In the owner: says `corral-owner-ready` and ends as told (after a moment: a command is
    /// registered with the guard just after it starts, which the test cannot see).
    pub fn ready_then_end() -> ! {
        use std::io::Write;
        std::thread::sleep(Duration::from_millis(300));
        println!("\n{READY}");
        let _ = std::io::stdout().flush();
        if std::env::var(OWNER).as_deref() == Ok("exit") {
            std::process::exit(0);
        }
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
}
