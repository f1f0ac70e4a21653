//! Which process made a container, said so that `prune()` can prove the process is gone.
//!
//! `<boot id>/<pid namespace>/<pid>/<start time>/<token>`: the boot id names this machine and
//! boot, the pid namespace says in whose numbering the pid is, the start time (clock ticks after
//! boot) tells a reused pid from the original, and a random per-process token makes the label
//! this process's own. A container is the leftover of a dead process only when the boot and the
//! pid namespace are this process's, and no process with that pid and start time runs. Anything
//! else — another machine, another pid namespace (a container sharing the daemon), an older
//! label — is never taken for dead.

use std::sync::OnceLock;

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn boot_id() -> Option<String> {
    read_trimmed("/proc/sys/kernel/random/boot_id")
}

/// This process's pid namespace, as `/proc/self/ns/pid` names it (`pid:[4026531836]`).
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|p| p.to_str().map(|s| s.trim_start_matches("pid:").to_string()))
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks after boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// This process's label.
pub fn label() -> &'static str {
    static LABEL: OnceLock<String> = OnceLock::new();
    LABEL.get_or_init(|| {
        let pid = std::process::id();
        format!(
            "{}/{}/{pid}/{}/{:016x}",
            boot_id().unwrap_or_else(|| "-".into()),
            pid_namespace().unwrap_or_else(|| "-".into()),
            start_time(pid).map_or_else(|| "-".into(), |t| t.to_string()),
            rand::random::<u64>()
        )
    })
}

/// Whether the process `label` names is provably gone: same boot, same pid namespace, and no
/// process with that pid started at that time.
pub fn provably_dead(label: &str) -> bool {
    let parts: Vec<&str> = label.split('/').collect();
    let [boot, ns, pid, start, token] = parts.as_slice() else { return false };
    let (Some(my_boot), Some(my_ns)) = (boot_id(), pid_namespace()) else { return false };
    if *boot != my_boot || *ns != my_ns || token.len() != 16 {
        return false;
    }
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    if pid == 0 || label == self::label() {
        return false;
    }
    start_time(pid) != Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_process_of_this_boot_and_pid_namespace_is_dead() {
        let me = label();
        assert!(!provably_dead(me), "this process");
        let parts: Vec<&str> = me.split('/').collect();
        let with = |i: usize, v: &str| {
            let mut p = parts.clone();
            p[i] = v;
            p.join("/")
        };
        // A child that has exited: its pid no longer runs (or runs with another start time).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id().to_string();
        let start = start_time(child.id()).unwrap_or(0).to_string();
        child.wait().unwrap();
        let gone = with(2, &pid);
        let gone = gone
            .split('/')
            .enumerate()
            .map(|(i, s)| if i == 3 { start.as_str() } else { s })
            .collect::<Vec<_>>()
            .join("/");
        assert!(provably_dead(&gone), "{gone}");
        // This process's pid with another start time: the pid was reused.
        assert!(provably_dead(&with(3, "1")));
        // Another pid namespace, another boot, the old `host/pid` form, a bad token: never.
        assert!(!provably_dead(&with(1, "[4026530000]")));
        assert!(!provably_dead(&with(0, "00000000-0000-0000-0000-000000000000")));
        assert!(!provably_dead("somehost/999999"));
        assert!(!provably_dead(&with(4, "x")));
    }
}
