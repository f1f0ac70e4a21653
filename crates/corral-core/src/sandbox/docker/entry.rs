//! Commands of a harness session's container started by this machine's keeper, each in a pid
//! namespace of its own nested in the container's (API.md "Agents inside corral": a timeout or
//! abort kills all of that command and nothing else). The exec API cannot give a command its own
//! pid namespace, and the container is never granted `CAP_SYS_ADMIN` to make one; so, as root
//! with the engine on this machine, corral reads once what the container's first process was given
//! by its runtime (namespaces, control groups, user, groups, capabilities, LSM label, rlimits,
//! environment and seccomp programs) and the keeper starts every command with exactly that
//! (`corral_keeper::container`), plus `no_new_privs`.
//!
//! Everything is read through one descriptor of the first process's `/proc` directory, which
//! keeps naming that process (never a later one with its pid), and taken only while the process
//! is in the container's control group. It is read when the container starts, before any command
//! of the session runs, so nothing a command does changes what later commands get.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

use corral_keeper::child::{Plan, RlimitResource};
use corral_keeper::container::Container;

/// `PTRACE_SECCOMP_GET_FILTER` (linux/ptrace.h).
const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;

/// What every command of one container starts with.
pub struct Entry {
    /// The container's first process (a pidfd): once it ended, the container's pid namespace
    /// takes no process, and commands are refused.
    init: OwnedFd,
    /// The container's pid namespace, then the others in `container.ns`'s order.
    namespaces: Vec<OwnedFd>,
    container: Container,
    seccomp: Vec<Vec<libc::sock_filter>>,
    rlimits: Vec<(RlimitResource, libc::rlim_t, libc::rlim_t)>,
    /// The first process's environment (the image's and the engine's variables).
    pub env: BTreeMap<String, String>,
}

fn foreign() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "the container's processes are not in this machine's process tree (the engine runs elsewhere)",
    )
}

/// Opens `name` under the process directory `dir`.
fn open_at(dir: &File, name: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated name relative to a live directory descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor openat just made.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_at(dir: &File, name: &str) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    File::from(open_at(dir, name, libc::O_RDONLY)?).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Whether the process of `dir` is still running in container `id`'s control group.
fn in_container(dir: &File, id: &str) -> io::Result<bool> {
    Ok(id.len() >= 12 && String::from_utf8_lossy(&read_at(dir, "cgroup")?).contains(id))
}

/// A field of `/proc/<pid>/status`.
fn field<'a>(status: &'a str, name: &str) -> io::Result<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(str::trim)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("no {name} in the process's status")))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("the process's status has an unreadable {what}"))
}

/// The effective id of a `Uid:`/`Gid:` line (real, effective, saved, filesystem).
fn effective_id(status: &str, name: &str) -> io::Result<u32> {
    field(status, name)?.split_whitespace().nth(1).and_then(|v| v.parse().ok()).ok_or_else(|| bad(name))
}

fn caps(status: &str) -> io::Result<[u64; 5]> {
    let mut sets = [0u64; 5];
    for (set, name) in sets.iter_mut().zip(["CapBnd", "CapInh", "CapPrm", "CapEff", "CapAmb"]) {
        *set = u64::from_str_radix(field(status, name)?, 16).map_err(|_| bad(name))?;
    }
    Ok(sets)
}

/// The `cgroup.procs` files, on this machine, of the groups `cgroup` (a `/proc/<pid>/cgroup`
/// read from this machine's cgroup namespace) names: one per hierarchy, each found among this
/// machine's cgroup mounts. A hierarchy that cannot be found is an error (its limits or device
/// rules would not hold).
fn group_files(cgroup: &str, mountinfo: &str) -> io::Result<Vec<CString>> {
    // (controllers, or "" for cgroup2; mount point) of every cgroup mount whose root is the
    // hierarchy's.
    let mounts: Vec<(Vec<&str>, &str)> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (root, point, fstype) = (*left.get(3)?, *left.get(4)?, *right.first()?);
            if root != "/" {
                return None;
            }
            match fstype {
                "cgroup2" => Some((Vec::new(), point)),
                "cgroup" => {
                    let opts = right.get(2)?.split(',').filter(|o| !matches!(*o, "rw" | "ro")).collect();
                    Some((opts, point))
                }
                _ => None,
            }
        })
        .collect();
    let mut files = Vec::new();
    for line in cgroup.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = match (parts.next(), parts.next(), parts.next()) {
            (Some(n), Some(c), Some(p)) => (n, c, p),
            _ => return Err(bad("cgroup line")),
        };
        let wanted: Vec<&str> = controllers.split(',').filter(|c| !c.is_empty()).collect();
        let found = mounts.iter().find(|(opts, _)| {
            if wanted.is_empty() {
                opts.is_empty()
            } else {
                !opts.is_empty() && wanted.iter().all(|w| opts.contains(w))
            }
        });
        let Some((_, point)) = found else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the container's control group hierarchy '{controllers}' is not mounted on this machine"),
            ));
        };
        if path.split('/').any(|c| c == "..") {
            return Err(bad("cgroup path"));
        }
        let file = format!("{point}{path}/cgroup.procs").replace("//", "/");
        files.push(CString::new(file).map_err(|_| bad("cgroup path"))?);
    }
    Ok(files)
}

/// The seccomp programs of process `pid`, oldest first, read while it is stopped by ptrace.
fn seccomp_programs(pid: libc::pid_t) -> io::Result<Vec<Vec<libc::sock_filter>>> {
    // The request's C type is unsigned in glibc and signed in musl: every request is given as
    // an i64 and converted to whichever the target's libc declares.
    let ptrace = |req: i64, addr: usize, data: *mut libc::c_void| {
        // SAFETY: ptrace requests on a process this thread traces; `data` is null or a buffer
        // sized from the kernel's own count.
        unsafe { libc::ptrace(req as _, pid, addr, data) }
    };
    if ptrace(libc::PTRACE_SEIZE as i64, 0, std::ptr::null_mut()) < 0 {
        return Err(io::Error::last_os_error());
    }
    let read = (|| {
        if ptrace(libc::PTRACE_INTERRUPT as i64, 0, std::ptr::null_mut()) < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut status = 0;
        // SAFETY: waits for the stop of the process this thread traces.
        while unsafe { libc::waitpid(pid, &mut status, libc::__WALL) } < 0 {
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(io::Error::last_os_error());
            }
        }
        let mut programs = Vec::new();
        for index in 0.. {
            let n = ptrace(PTRACE_SECCOMP_GET_FILTER as i64, index, std::ptr::null_mut());
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::ENOENT) => break,
                    _ => return Err(io::Error::last_os_error()),
                }
            }
            let mut prog = vec![libc::sock_filter { code: 0, jt: 0, jf: 0, k: 0 }; n as usize];
            if ptrace(PTRACE_SECCOMP_GET_FILTER as i64, index, prog.as_mut_ptr().cast()) != n {
                return Err(io::Error::last_os_error());
            }
            programs.push(prog);
        }
        // Index 0 is the newest.
        programs.reverse();
        Ok(programs)
    })();
    ptrace(libc::PTRACE_DETACH as i64, 0, std::ptr::null_mut());
    read
}

impl Entry {
    /// Reads what process `pid` of this machine, the first process of container `id` as the
    /// engine reported it, was started with. Blocking (and it ptraces from this thread): call it
    /// on a thread of its own. `Unsupported` when the process is not this machine's or lives in
    /// a user namespace of its own (then commands cannot be started like it).
    pub fn take(pid: i64, id: &str) -> io::Result<Entry> {
        let pid = libc::pid_t::try_from(pid).ok().filter(|p| *p > 0).ok_or_else(foreign)?;
        let dir = File::open(format!("/proc/{pid}"))?;
        if !in_container(&dir, id)? {
            return Err(foreign());
        }
        if std::fs::metadata("/proc/self/ns/user")?.ino() != File::from(open_at(&dir, "ns/user", 0)?).metadata()?.ino()
        {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the container runs in a user namespace of its own (the engine remaps users)",
            ));
        }
        // SAFETY: a raw syscall; the descriptor is owned at once.
        let init = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if init < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor pidfd_open just made.
        let init = unsafe { OwnedFd::from_raw_fd(init as RawFd) };
        let mut namespaces = vec![open_at(&dir, "ns/pid", libc::O_RDONLY)?];
        let mut ns = Vec::new();
        // The mount namespace last: entering it moves the root.
        for (name, kind) in [
            ("ns/uts", libc::CLONE_NEWUTS),
            ("ns/ipc", libc::CLONE_NEWIPC),
            ("ns/net", libc::CLONE_NEWNET),
            ("ns/cgroup", libc::CLONE_NEWCGROUP),
            ("ns/mnt", libc::CLONE_NEWNS),
        ] {
            match open_at(&dir, name, libc::O_RDONLY) {
                Ok(fd) => {
                    namespaces.push(fd);
                    ns.push((0, kind));
                }
                // A kernel without cgroup namespaces.
                Err(e) if kind == libc::CLONE_NEWCGROUP && e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) => return Err(e),
            }
        }
        let status = String::from_utf8_lossy(&read_at(&dir, "status")?).into_owned();
        let groups = field(&status, "Groups")?
            .split_whitespace()
            .map(|g| g.parse().map_err(|_| bad("Groups")))
            .collect::<io::Result<Vec<u32>>>()?;
        let label = match read_at(&dir, "attr/current") {
            Ok(l) => {
                let l = String::from_utf8_lossy(&l).trim_end_matches(['\n', '\0']).to_string();
                match l.as_str() {
                    "" | "unconfined" => None,
                    // AppArmor names a profile and its mode: `docker-default (enforce)`.
                    _ if l.ends_with(')') && l.contains(" (") => {
                        Some(format!("exec {}", l.rsplit_once(" (").map_or(l.as_str(), |(p, _)| p)))
                    }
                    _ => Some(l),
                }
            }
            // No LSM that labels processes.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
            Err(e) => return Err(e),
        };
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let cgroups = group_files(&String::from_utf8_lossy(&read_at(&dir, "cgroup")?), &mountinfo)?;
        let env = read_at(&dir, "environ")?
            .split(|b| *b == 0)
            .filter_map(|e| {
                let e = String::from_utf8_lossy(e);
                e.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect();
        let mut rlimits = Vec::new();
        // RLIMIT_NLIMITS: every limit Linux has.
        for resource in 0..16 as RlimitResource {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: reads one limit of `pid` into a live struct.
            if unsafe { libc::prlimit(pid, resource, std::ptr::null(), &mut lim) } < 0 {
                return Err(io::Error::last_os_error());
            }
            rlimits.push((resource, lim.rlim_cur, lim.rlim_max));
        }
        let seccomp = match field(&status, "Seccomp")? {
            "0" => Vec::new(),
            "2" => seccomp_programs(pid)?,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the container's first process is in seccomp mode {other}"),
                ))
            }
        };
        // All of it was that process's, still in the container (the descriptor of its directory
        // would fail to read had it ended, and its pid was not free to be reused meanwhile).
        if !in_container(&dir, id)? {
            return Err(foreign());
        }
        let container = Container {
            pid_ns: 0,
            cgroups,
            ns,
            uid: effective_id(&status, "Uid")?,
            gid: effective_id(&status, "Gid")?,
            groups,
            umask: u32::from_str_radix(field(&status, "Umask")?, 8).map_err(|_| bad("Umask"))?,
            oom_score_adj: String::from_utf8_lossy(&read_at(&dir, "oom_score_adj")?)
                .trim()
                .parse()
                .map_err(|_| bad("oom_score_adj"))?,
            caps: caps(&status)?,
            label: label.map(|l| CString::new(l).map_err(|_| bad("LSM label"))).transpose()?,
        };
        Ok(Entry { init, namespaces, container, seccomp, rlimits, env })
    }

    /// Whether the container's first process still runs.
    pub fn running(&self) -> bool {
        let mut p = libc::pollfd { fd: self.init.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd on our own descriptor; readable once the process ended.
        unsafe { libc::poll(&mut p, 1, 0) == 0 }
    }

    /// The plan a command started in `cwd` (inside the container) runs under, and the
    /// descriptors `Keeper::spawn` sends with it.
    pub fn plan(&self, cwd: &str) -> io::Result<(Plan, Vec<RawFd>)> {
        let plan = Plan {
            cwd: CString::new(cwd).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?,
            rlimits: self.rlimits.clone(),
            seccomp: self.seccomp.clone(),
            container: Some(self.container.clone()),
            ..Default::default()
        };
        Ok((plan, self.namespaces.iter().map(AsRawFd::as_raw_fd).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::group_files;

    #[test]
    fn a_container_s_control_groups_are_found_in_every_hierarchy_or_refused() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
33 25 0:29 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
34 25 0:30 /sub /elsewhere rw,relatime - cgroup cgroup rw,devices
";
        let cgroup = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:name=systemd:/docker/abc\n0::/docker/abc\n";
        let files: Vec<String> =
            group_files(cgroup, mountinfo).unwrap().into_iter().map(|c| c.into_string().unwrap()).collect();
        assert_eq!(
            files,
            [
                "/sys/fs/cgroup/memory/docker/abc/cgroup.procs",
                "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cgroup.procs",
                "/sys/fs/cgroup/systemd/docker/abc/cgroup.procs",
                "/sys/fs/cgroup/unified/docker/abc/cgroup.procs",
            ]
        );
        // The devices hierarchy is mounted only from a subdirectory: not found, so refused.
        let e = group_files("5:devices:/docker/abc\n", mountinfo).unwrap_err();
        assert!(e.to_string().contains("devices"), "{e}");
        assert!(group_files("4:memory:/docker/../../x\n", mountinfo).is_err());
    }
}
