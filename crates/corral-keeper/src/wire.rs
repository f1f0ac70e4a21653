//! The messages between the library (in Node) and the keeper, over one `AF_UNIX` stream socket.
//!
//! A frame is a little-endian `u32` length and that many bytes; the descriptors a frame carries
//! travel as `SCM_RIGHTS` with its first byte (`frame.rs`). Inside a frame: a tag byte, then the
//! fields in order (integers little-endian, byte strings as a `u32` length and the bytes).

use std::ffi::CString;
use std::io;

use crate::child::{Plan, RlimitResource};

/// The library asks the keeper to start a command.
pub const RUN: u8 = 1;
/// The library asks the keeper to signal a command's process group.
pub const KILL: u8 = 2;
/// The keeper says a command started (its first process's pid).
pub const STARTED: u8 = 3;
/// The keeper says a command could not start (an errno).
pub const FAILED: u8 = 4;
/// The keeper says a command's first process ended (its wait status).
pub const EXITED: u8 = 5;
/// The library makes the keeper a session's: its own network namespace (and, for a user other
/// than root, a user namespace mapping the user to itself), loopback up. Replied `READY`.
pub const SESSION: u8 = 6;
/// The library asks for a socket connected to `127.0.0.1:port` in the session's namespace.
pub const CONNECT: u8 = 7;
/// The library asks for a listener on `127.0.0.1:port` (0: any) in the session's namespace.
pub const LISTEN: u8 = 8;
/// The keeper answers `CONNECT` or `LISTEN` with a socket (the frame's descriptor) and its port,
/// and `SOCKETS` with the sockets (the frame's descriptors) and their number.
pub const SOCKET: u8 = 9;
/// The keeper is a session's.
pub const READY: u8 = 10;
/// Reply: the command started in a prepared process (`prepared.rs`); otherwise as `STARTED`.
pub const STARTED_PREPARED: u8 = 11;
/// The library asks for up to `MAX_FDS` TCP sockets made in the session's namespace, not yet
/// connected (a socket keeps the namespace it was made in: the library connects them itself).
pub const SOCKETS: u8 = 12;

/// The most descriptors one frame carries.
pub const MAX_FDS: usize = 32;
/// The largest frame either side accepts.
pub const MAX_FRAME: usize = 64 << 20;

/// One command to start. The descriptors sent with it are, in order: stdin (when `stdin`),
/// stdout, stderr, then those the plan names by index (`Plan::userns`, `Plan::trees`).
pub struct Run {
    pub id: u64,
    /// The program and its arguments; the program is looked up in `env`'s `PATH`.
    pub argv: Vec<CString>,
    /// `NAME=value` entries: the command's whole environment.
    pub env: Vec<CString>,
    /// Control groups' `cgroup.procs` files the command's first process joins.
    pub cgroups: Vec<CString>,
    /// The groups made for the next command (`cgroup.procs` files): the process prepared for it
    /// joins them while it waits, so that the move (slow where the kernel must wait for a grace
    /// period) is not on that command's path. Empty: it joins the command's groups when it comes.
    pub ahead: Vec<CString>,
    /// Whether a stdin descriptor is sent (else the command reads `/dev/null`).
    pub stdin: bool,
    /// Second copies of the plan's writable trees (indices, as `Plan::trees`): a detached tree
    /// is attached once, and these are for the process prepared for the next command
    /// (`prepared.rs`), which the keeper could not copy itself from a session's mount namespace.
    /// Needed only when the command starts in a fresh process: one that starts in a prepared
    /// process leaves the plan's trees to the next one. The library sends them when the last
    /// command did not start prepared (empty: none).
    pub spares: Vec<i32>,
    pub plan: Plan,
}

/// A message the keeper sends back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Started {
        id: u64,
        pid: i32,
        /// It ran in a process prepared before it was asked for (`prepared.rs`).
        prepared: bool,
    },
    Failed {
        id: u64,
        errno: i32,
    },
    Exited {
        id: u64,
        status: i32,
    },
    /// With one descriptor.
    Socket {
        id: u64,
        port: i32,
    },
    Ready {
        id: u64,
    },
}

#[derive(Default)]
pub struct Enc(pub Vec<u8>);

impl Enc {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.u32(v as u32)
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    pub fn cstr(&mut self, v: &CString) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    pub fn cstrs(&mut self, v: &[CString]) -> &mut Self {
        self.u32(v.len() as u32);
        for s in v {
            self.cstr(s);
        }
        self
    }
    pub fn opt_cstr(&mut self, v: &Option<CString>) -> &mut Self {
        match v {
            Some(s) => self.u8(1).cstr(s),
            None => self.u8(0),
        }
    }
}

pub struct Dec<'a> {
    buf: &'a [u8],
}

fn bad() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "a malformed keeper message")
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf }
    }
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(bad());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    pub fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| bad())?))
    }
    pub fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| bad())?))
    }
    pub fn i32(&mut self) -> io::Result<i32> {
        Ok(self.u32()? as i32)
    }
    pub fn bool(&mut self) -> io::Result<bool> {
        Ok(self.u8()? != 0)
    }
    pub fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn cstr(&mut self) -> io::Result<CString> {
        CString::new(self.bytes()?).map_err(|_| bad())
    }
    /// A count, checked against what is left (each item takes at least `min` bytes).
    pub fn count(&mut self, min: usize) -> io::Result<usize> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min.max(1)) > self.buf.len() {
            return Err(bad());
        }
        Ok(n)
    }
    pub fn cstrs(&mut self) -> io::Result<Vec<CString>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.cstr()).collect()
    }
    pub fn opt_cstr(&mut self) -> io::Result<Option<CString>> {
        Ok(if self.bool()? { Some(self.cstr()?) } else { None })
    }
    pub fn end(&self) -> io::Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(bad())
        }
    }
}

fn opt_i32(e: &mut Enc, v: Option<i32>) {
    match v {
        Some(n) => e.u8(1).i32(n),
        None => e.u8(0),
    };
}

fn read_opt_i32(d: &mut Dec) -> io::Result<Option<i32>> {
    Ok(if d.bool()? { Some(d.i32()?) } else { None })
}

/// The plan's part of a `RUN` frame. With `by_kind`, the descriptors' indices are left out (a
/// plan's key, `prepared.rs`, names them by what they are, not where they were sent).
pub fn encode_plan(e: &mut Enc, p: &Plan, by_kind: bool) {
    let index = |i: i32| if by_kind { 0 } else { i };
    e.u8(p.user_ns as u8);
    opt_i32(e, p.userns.map(index));
    e.u32(p.trees.len() as u32);
    for t in &p.trees {
        e.i32(index(*t));
    }
    e.u32(p.writable_ids.len() as u32);
    for (dev, ino) in &p.writable_ids {
        e.u64(*dev).u64(*ino);
    }
    e.u32(p.writable_covered.len() as u32);
    for c in &p.writable_covered {
        e.u8(*c as u8);
    }
    e.cstrs(&p.pins).bytes(&p.uid_map).bytes(&p.gid_map).cstrs(&p.devices).cstr(&p.cwd);
    e.cstrs(&p.writable).cstrs(&p.writable_parents).cstrs(&p.protect);
    e.cstrs(&p.hide_dirs).cstrs(&p.hide_files).cstrs(&p.hide_inner_dirs).cstrs(&p.hide_inner_files);
    e.u32(p.rlimits.len() as u32);
    // The C library's types: `c_int` resources in musl, `rlim_t` widths per target.
    #[allow(clippy::unnecessary_cast)]
    for (r, soft, hard) in &p.rlimits {
        e.u32(*r as u32).u64(*soft as u64).u64(*hard as u64);
    }
    e.opt_cstr(&p.memory_procs);
    e.u32(p.seccomp.len() as u32);
    for prog in &p.seccomp {
        e.u32(prog.len() as u32);
        for f in prog {
            e.u32(f.code as u32).u8(f.jt).u8(f.jf).u32(f.k);
        }
    }
    opt_i32(e, p.forward.map(i32::from));
    e.u8(p.shared_net as u8).u8(p.session_tmp as u8);
    match &p.landlock {
        Some(l) => e.u8(1).u64(l.handled),
        None => e.u8(0),
    };
    opt_i32(e, p.layer);
    e.cstr(&p.layer_dir);
    e.u32(p.lowers.len() as u32);
    for l in &p.lowers {
        e.i32(*l);
    }
    e.cstrs(&p.lower_dirs);
    match &p.container {
        Some(c) => {
            e.u8(1).i32(c.pid_ns).cstrs(&c.cgroups).u32(c.ns.len() as u32);
            for (fd, kind) in &c.ns {
                e.i32(*fd).i32(*kind);
            }
            e.u32(c.uid).u32(c.gid).u32(c.groups.len() as u32);
            for g in &c.groups {
                e.u32(*g);
            }
            e.u32(c.umask).i32(c.oom_score_adj);
            for set in c.caps {
                e.u64(set);
            }
            e.opt_cstr(&c.label);
        }
        None => {
            e.u8(0);
        }
    }
}

/// `GO`, to a prepared command's first process: the command's program and arguments and its
/// environment (its standard streams go with the frame).
pub fn go(argv: &[CString], env: &[CString]) -> Vec<u8> {
    let mut e = Enc::default();
    e.cstrs(argv).cstrs(env);
    e.0
}

pub fn read_go(buf: &[u8]) -> io::Result<(Vec<CString>, Vec<CString>)> {
    let mut d = Dec::new(buf);
    let (argv, env) = (d.cstrs()?, d.cstrs()?);
    d.end()?;
    Ok((argv, env))
}

impl Run {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.u8(RUN)
            .u64(self.id)
            .cstrs(&self.argv)
            .cstrs(&self.env)
            .cstrs(&self.cgroups)
            .cstrs(&self.ahead)
            .u8(self.stdin as u8);
        e.u32(self.spares.len() as u32);
        for s in &self.spares {
            e.i32(*s);
        }
        encode_plan(&mut e, &self.plan, false);
        e.0
    }

    /// Reads a `RUN` frame whose tag was already read.
    pub fn decode(d: &mut Dec) -> io::Result<Run> {
        let id = d.u64()?;
        let (argv, env, cgroups, ahead) = (d.cstrs()?, d.cstrs()?, d.cstrs()?, d.cstrs()?);
        let stdin = d.bool()?;
        let spares = (0..d.count(4)?).map(|_| d.i32()).collect::<io::Result<_>>()?;
        let user_ns = d.bool()?;
        let userns = read_opt_i32(d)?;
        let trees = (0..d.count(4)?).map(|_| d.i32()).collect::<io::Result<_>>()?;
        let writable_ids = (0..d.count(16)?).map(|_| Ok((d.u64()?, d.u64()?))).collect::<io::Result<_>>()?;
        let writable_covered = (0..d.count(1)?).map(|_| d.bool()).collect::<io::Result<_>>()?;
        let pins = d.cstrs()?;
        let (uid_map, gid_map) = (d.bytes()?.to_vec(), d.bytes()?.to_vec());
        let devices = d.cstrs()?;
        let cwd = d.cstr()?;
        let (writable, writable_parents, protect) = (d.cstrs()?, d.cstrs()?, d.cstrs()?);
        let (hide_dirs, hide_files) = (d.cstrs()?, d.cstrs()?);
        let (hide_inner_dirs, hide_inner_files) = (d.cstrs()?, d.cstrs()?);
        #[allow(clippy::unnecessary_cast)]
        let rlimits = (0..d.count(20)?)
            .map(|_| Ok((d.u32()? as RlimitResource, d.u64()? as libc::rlim_t, d.u64()? as libc::rlim_t)))
            .collect::<io::Result<_>>()?;
        let memory_procs = d.opt_cstr()?;
        let mut seccomp = Vec::new();
        for _ in 0..d.count(4)? {
            let prog = (0..d.count(10)?)
                .map(|_| {
                    let code = u16::try_from(d.u32()?).map_err(|_| bad())?;
                    Ok(libc::sock_filter { code, jt: d.u8()?, jf: d.u8()?, k: d.u32()? })
                })
                .collect::<io::Result<Vec<_>>>()?;
            seccomp.push(prog);
        }
        let forward = read_opt_i32(d)?.map(|p| u16::try_from(p).map_err(|_| bad())).transpose()?;
        let (shared_net, session_tmp) = (d.bool()?, d.bool()?);
        let landlock = if d.bool()? { Some(crate::landlock::Plan { handled: d.u64()? }) } else { None };
        let layer = read_opt_i32(d)?;
        let layer_dir = d.cstr()?;
        let lowers = (0..d.count(4)?).map(|_| d.i32()).collect::<io::Result<_>>()?;
        let lower_dirs = d.cstrs()?;
        let container = if d.bool()? {
            let pid_ns = d.i32()?;
            let cgroups = d.cstrs()?;
            let ns = (0..d.count(8)?).map(|_| Ok((d.i32()?, d.i32()?))).collect::<io::Result<_>>()?;
            let (uid, gid) = (d.u32()?, d.u32()?);
            let groups = (0..d.count(4)?).map(|_| d.u32()).collect::<io::Result<_>>()?;
            let (umask, oom_score_adj) = (d.u32()?, d.i32()?);
            let mut caps = [0u64; 5];
            for set in &mut caps {
                *set = d.u64()?;
            }
            let label = d.opt_cstr()?;
            Some(crate::container::Container {
                pid_ns,
                cgroups,
                ns,
                uid,
                gid,
                groups,
                umask,
                oom_score_adj,
                caps,
                label,
            })
        } else {
            None
        };
        d.end()?;
        let plan = Plan {
            user_ns,
            userns,
            trees,
            writable_ids,
            writable_covered,
            pins,
            uid_map,
            gid_map,
            devices,
            cwd,
            writable,
            writable_parents,
            protect,
            hide_dirs,
            hide_files,
            hide_inner_dirs,
            hide_inner_files,
            rlimits,
            memory_procs,
            seccomp,
            forward,
            shared_net,
            session_tmp,
            layer,
            layer_dir,
            lowers,
            lower_dirs,
            landlock,
            container,
        };
        Ok(Run { id, argv, env, cgroups, ahead, stdin, spares, plan })
    }
}

/// `SESSION`: `user_ns` with the maps to write (for a user other than root), the host
/// directories the session's root shows at `/workspace`, `/tmp` and `/home/agent`, and the host
/// paths it covers (`root.rs`).
pub fn session(
    id: u64,
    user_ns: bool,
    uid_map: &[u8],
    gid_map: &[u8],
    binds: &[(CString, CString)],
    cover: &[CString],
) -> Vec<u8> {
    let mut e = Enc::default();
    e.u8(SESSION).u64(id).u8(user_ns as u8).bytes(uid_map).bytes(gid_map).u32(binds.len() as u32);
    for (host, inside) in binds {
        e.cstr(host).cstr(inside);
    }
    e.cstrs(cover);
    e.0
}

/// Reads the binds and the covered paths of a `SESSION` frame (after its maps).
#[allow(clippy::type_complexity)]
pub fn session_root(d: &mut Dec) -> io::Result<(Vec<(CString, CString)>, Vec<CString>)> {
    let binds = (0..d.count(8)?).map(|_| Ok((d.cstr()?, d.cstr()?))).collect::<io::Result<_>>()?;
    let cover = d.cstrs()?;
    d.end()?;
    Ok((binds, cover))
}

/// `CONNECT` or `LISTEN` (`tag`) for `port`; `SOCKETS` for that many sockets.
pub fn socket(tag: u8, id: u64, port: u16) -> Vec<u8> {
    let mut e = Enc::default();
    e.u8(tag).u64(id).u32(port as u32);
    e.0
}

pub fn kill(id: u64, signal: i32) -> Vec<u8> {
    let mut e = Enc::default();
    e.u8(KILL).u64(id).i32(signal);
    e.0
}

impl Reply {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        match *self {
            Reply::Started { id, pid, prepared: false } => e.u8(STARTED).u64(id).i32(pid),
            Reply::Started { id, pid, prepared: true } => e.u8(STARTED_PREPARED).u64(id).i32(pid),
            Reply::Failed { id, errno } => e.u8(FAILED).u64(id).i32(errno),
            Reply::Exited { id, status } => e.u8(EXITED).u64(id).i32(status),
            Reply::Socket { id, port } => e.u8(SOCKET).u64(id).i32(port),
            Reply::Ready { id } => e.u8(READY).u64(id).i32(0),
        };
        e.0
    }

    pub fn decode(buf: &[u8]) -> io::Result<Reply> {
        let mut d = Dec::new(buf);
        let tag = d.u8()?;
        let (id, n) = (d.u64()?, d.i32()?);
        d.end()?;
        match tag {
            STARTED => Ok(Reply::Started { id, pid: n, prepared: false }),
            STARTED_PREPARED => Ok(Reply::Started { id, pid: n, prepared: true }),
            FAILED => Ok(Reply::Failed { id, errno: n }),
            EXITED => Ok(Reply::Exited { id, status: n }),
            SOCKET => Ok(Reply::Socket { id, port: n }),
            READY => Ok(Reply::Ready { id }),
            _ => Err(bad()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::container::Container;

    #[test]
    fn a_run_in_a_container_reads_back_as_it_was_written() {
        let container = Container {
            pid_ns: 3,
            cgroups: vec![CString::new("/sys/fs/cgroup/memory/docker/x/cgroup.procs").unwrap()],
            ns: vec![(4, libc::CLONE_NEWUTS), (5, libc::CLONE_NEWNS)],
            uid: 1000,
            gid: 1001,
            groups: vec![10, 20],
            umask: 0o022,
            oom_score_adj: -5,
            caps: [1, 2, 3, 4, 5],
            label: Some(CString::new("exec docker-default").unwrap()),
        };
        let plan = Plan {
            cwd: CString::new("/workspace").unwrap(),
            rlimits: vec![(7, 1024, 4096)],
            seccomp: vec![vec![libc::sock_filter { code: 6, jt: 0, jf: 0, k: 0x7fff_0000 }]],
            container: Some(container),
            ..Default::default()
        };
        let run = Run {
            id: 9,
            argv: vec![CString::new("sh").unwrap()],
            env: Vec::new(),
            cgroups: Vec::new(),
            ahead: run_cgroups(),
            stdin: true,
            spares: vec![6],
            plan,
        };
        let bytes = run.encode();
        let mut d = Dec::new(&bytes);
        assert_eq!(d.u8().unwrap(), RUN);
        let back = Run::decode(&mut d).unwrap();
        let c = back.plan.container.expect("the container's part");
        assert_eq!(
            (c.pid_ns, c.ns.clone(), c.uid, c.gid, c.groups.clone(), c.umask, c.oom_score_adj, c.caps),
            (
                3,
                vec![(4, libc::CLONE_NEWUTS), (5, libc::CLONE_NEWNS)],
                1000,
                1001,
                vec![10, 20],
                0o022,
                -5,
                [1, 2, 3, 4, 5]
            )
        );
        assert_eq!(c.cgroups, run_cgroups());
        assert_eq!(c.label.unwrap().to_str().unwrap(), "exec docker-default");
        assert_eq!(back.plan.cwd.to_str().unwrap(), "/workspace");
        assert_eq!(back.plan.seccomp[0][0].k, 0x7fff_0000);
        assert_eq!(back.spares, vec![6]);
        assert_eq!(back.ahead, run_cgroups());
        // A frame cut anywhere inside the container's part is refused, never read short.
        for cut in 1..40 {
            let mut d = Dec::new(&bytes[..bytes.len() - cut]);
            d.u8().unwrap();
            assert!(Run::decode(&mut d).is_err(), "cut {cut}");
        }
    }

    fn run_cgroups() -> Vec<CString> {
        vec![CString::new("/sys/fs/cgroup/memory/docker/x/cgroup.procs").unwrap()]
    }
}
