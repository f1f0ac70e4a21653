//! Which process made a container, said so that `prune()` can prove the process is gone.
//!
//! `<boot id>/<pid namespace>/<pid>/<start time>/<token>`: the boot id names this machine and
//! boot, the pid namespace says in whose numbering the pid is, the start time (clock ticks after
//! boot) tells a reused pid from the original, and a random per-process token makes the label
//! this process's own. A container is the leftover of a dead process only when the boot and the
//! pid namespace are this process's, and no process with that pid and start time runs. Anything
//! else — another machine, another pid namespace (a container sharing the daemon), an older
//! label — is never taken for dead. On Windows the fields are the machine's GUID, its host name,
//! the pid and its creation time (`os` below).

use std::sync::OnceLock;

#[cfg(not(windows))]
mod os {
    fn read_trimmed(path: &str) -> Option<String> {
        std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
    }

    pub fn boot_id() -> Option<String> {
        read_trimmed("/proc/sys/kernel/random/boot_id")
    }

    /// This process's pid namespace, as `/proc/self/ns/pid` names it (`pid:[4026531836]`).
    pub fn pid_namespace() -> Option<String> {
        std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|p| p.to_str().map(|s| s.trim_start_matches("pid:").to_string()))
    }

    /// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks after boot.
    pub fn start_time(pid: u32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        rest.split_whitespace().nth(19)?.parse().ok()
    }

    /// Whether process `pid`, started at `start`, still runs.
    pub fn runs(pid: u32, start: u64) -> bool {
        start_time(pid) == Some(start)
    }
}

/// Windows names no boot and has no pid namespaces, but a process's creation time is a wall-clock
/// time (100 ns units), so a pid and that time name one process of a machine, in any boot. The
/// machine is its `MachineGuid` and, as a container has a name of its own while it may share its
/// image's GUID, its host name in place of the pid namespace.
#[cfg(windows)]
mod os {
    use windows_sys::Win32::Foundation::{CloseHandle, GetLastError, ERROR_INVALID_PARAMETER, FILETIME, STILL_ACTIVE};
    use windows_sys::Win32::System::Registry::{
        RegGetValueW, HKEY_LOCAL_MACHINE, RRF_RT_REG_SZ, RRF_SUBKEY_WOW6464KEY,
    };
    use windows_sys::Win32::System::SystemInformation::{ComputerNameDnsHostname, GetComputerNameExW, GetTickCount64};
    use windows_sys::Win32::System::Threading::{
        GetCurrentProcess, GetExitCodeProcess, GetProcessTimes, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };

    fn wide(s: &str) -> Vec<u16> {
        s.encode_utf16().chain(std::iter::once(0)).collect()
    }

    /// A label field: no `/`, not empty.
    fn field(units: &[u16]) -> Option<String> {
        let s = String::from_utf16_lossy(units).trim().to_lowercase().replace('/', "-");
        (!s.is_empty()).then_some(s)
    }

    /// The machine's GUID (`HKLM\SOFTWARE\Microsoft\Cryptography\MachineGuid`) and when it
    /// booted, in tens of seconds (machines cloned with one GUID and name boot apart). A boot time
    /// read across a boundary, or after the clock was set, differs: then nothing is taken for
    /// dead, never the reverse.
    pub fn boot_id() -> Option<String> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
        // SAFETY: a raw call without arguments.
        let up = unsafe { GetTickCount64() };
        Some(format!("{}-{}", machine_guid()?, now.checked_sub(up)? / 10_000))
    }

    fn machine_guid() -> Option<String> {
        let (key, value) = (wide("SOFTWARE\\Microsoft\\Cryptography"), wide("MachineGuid"));
        let mut buf = [0u16; 128];
        let mut size = std::mem::size_of_val(&buf) as u32;
        // SAFETY: NUL-terminated names and a buffer of the size given.
        let r = unsafe {
            RegGetValueW(
                HKEY_LOCAL_MACHINE,
                key.as_ptr(),
                value.as_ptr(),
                RRF_RT_REG_SZ | RRF_SUBKEY_WOW6464KEY,
                std::ptr::null_mut(),
                buf.as_mut_ptr().cast(),
                &mut size,
            )
        };
        if r != 0 {
            return None;
        }
        let n = (size as usize / 2).min(buf.len());
        field(buf[..n].split(|c| *c == 0).next().unwrap_or(&[]))
    }

    /// The machine's host name.
    pub fn pid_namespace() -> Option<String> {
        let mut buf = [0u16; 256];
        let mut size = buf.len() as u32;
        // SAFETY: a buffer of the size given.
        if unsafe { GetComputerNameExW(ComputerNameDnsHostname, buf.as_mut_ptr(), &mut size) } == 0 {
            return None;
        }
        field(&buf[..(size as usize).min(buf.len())])
    }

    fn created(handle: windows_sys::Win32::Foundation::HANDLE) -> Option<u64> {
        let zero = FILETIME { dwLowDateTime: 0, dwHighDateTime: 0 };
        let (mut c, mut e, mut k, mut u) = (zero, zero, zero, zero);
        // SAFETY: a process handle and four FILETIMEs to fill.
        if unsafe { GetProcessTimes(handle, &mut c, &mut e, &mut k, &mut u) } == 0 {
            return None;
        }
        Some((u64::from(c.dwHighDateTime) << 32) | u64::from(c.dwLowDateTime))
    }

    /// This process's creation time (`pid` is always this process's own here).
    pub fn start_time(_pid: u32) -> Option<u64> {
        // SAFETY: the pseudo-handle of this process needs no closing.
        created(unsafe { GetCurrentProcess() })
    }

    /// Whether process `pid`, created at `start`, may still run. Only a pid Windows says is no
    /// process, or one it says was created at another time or has ended, is not running: a
    /// process this one may not open (another user's), or whose times it cannot read, counts as
    /// running.
    pub fn runs(pid: u32, start: u64) -> bool {
        // SAFETY: the handle is closed below; the calls only read.
        unsafe {
            let h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
            if h.is_null() {
                return GetLastError() != ERROR_INVALID_PARAMETER;
            }
            let mut code = 0u32;
            let other = created(h).is_some_and(|t| t != start);
            let ended = GetExitCodeProcess(h, &mut code) != 0 && code != STILL_ACTIVE as u32;
            CloseHandle(h);
            !(other || ended)
        }
    }
}

use os::{boot_id, pid_namespace, start_time};

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
    !os::runs(pid, start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(unix)]
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
