//! A kept container's network namespace, entered from this process (API.md "Agents inside
//! corral", `kind: 'docker'`): a harness session's container runs with `NetworkMode: none`, and its
//! proxy endpoint and port forwarders are sockets made inside that namespace by one thread of
//! this process that entered it (`setns`), so no Docker network is made and nothing inside the
//! container holds them. Entering needs root and the container's processes in this machine's
//! process tree (a local engine).

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc;
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::oneshot;

use crate::sandbox::session::ports::{finish_connect, Inside};

enum Op {
    Connect,
    Listen,
}

type Job = (Op, u16, oneshot::Sender<io::Result<(OwnedFd, u16)>>);

/// The network namespace of one container; the thread in it ends when this is dropped.
pub struct NetNs {
    jobs: Mutex<mpsc::Sender<Job>>,
}

/// Whether process `pid` of this machine belongs to container `id` (its cgroup path names the
/// container, under cgroup v1 and v2 alike).
fn belongs(pid: i64, id: &str) -> bool {
    id.len() >= 12 && std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(id))
}

impl NetNs {
    /// Enters the network namespace of `pid`, the container `id`'s first process as the engine
    /// reported it. The pid is taken only if this machine's process of that number is in the
    /// container's cgroup before and after its namespace is opened (an engine in a VM reports
    /// pids of its own machine, which name unrelated processes here).
    pub fn enter(pid: i64, id: &str) -> io::Result<NetNs> {
        let foreign = || {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "the container's processes are not in this machine's process tree (the engine runs elsewhere)",
            )
        };
        if pid <= 0 || !belongs(pid, id) {
            return Err(foreign());
        }
        let ns = File::open(format!("/proc/{pid}/ns/net"))?;
        if !belongs(pid, id) {
            return Err(foreign());
        }
        let (jobs, rx) = mpsc::channel::<Job>();
        let (ready, entered) = mpsc::channel();
        std::thread::Builder::new().name("corral-netns".into()).spawn(move || {
            // SAFETY: a plain system call on a descriptor this thread owns; it changes only this
            // thread's network namespace, and this thread runs nothing else.
            let r = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            drop(ns);
            if r != 0 {
                let _ = ready.send(Err(io::Error::last_os_error()));
                return;
            }
            let _ = ready.send(Ok(()));
            while let Ok((op, port, reply)) = rx.recv() {
                let _ = reply.send(socket(op, port));
            }
        })?;
        entered
            .recv()
            .map_err(|_| io::Error::other("the thread entering the container's network namespace ended"))??;
        Ok(NetNs { jobs: Mutex::new(jobs) })
    }

    async fn ask(&self, op: Op, port: u16) -> io::Result<(OwnedFd, u16)> {
        let (tx, rx) = oneshot::channel();
        let gone = || io::Error::new(io::ErrorKind::BrokenPipe, "the container's network namespace was left");
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).send((op, port, tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

/// A socket made in this thread's network namespace: a listener on `127.0.0.1:port`, or a
/// non-blocking connection to it, started here and finished by the caller (a port whose backlog
/// is full never holds this thread).
fn socket(op: Op, port: u16) -> io::Result<(OwnedFd, u16)> {
    let at = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match op {
        Op::Listen => {
            let l = TcpListener::bind(at)?;
            l.set_nonblocking(true)?;
            let port = l.local_addr()?.port();
            Ok((OwnedFd::from(l), port))
        }
        Op::Connect => {
            use socket2::{Domain, Socket, Type};
            let s = Socket::new(Domain::IPV4, Type::STREAM.nonblocking().cloexec(), None)?;
            match s.connect(&at.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(e),
            }
            Ok((OwnedFd::from(s), port))
        }
    }
}

#[async_trait]
impl Inside for NetNs {
    async fn connect(&self, port: u16) -> io::Result<OwnedFd> {
        let (fd, _) = self.ask(Op::Connect, port).await?;
        finish_connect(fd).await
    }

    async fn listen(&self, port: u16) -> io::Result<(OwnedFd, u16)> {
        self.ask(Op::Listen, port).await
    }
}

#[cfg(test)]
mod tests {
    use super::NetNs;

    #[test]
    fn a_pid_outside_the_container_is_never_entered() {
        // This process is in no container of that id: an engine elsewhere reports such pids.
        let e = NetNs::enter(i64::from(std::process::id()), "0123456789abcdef0123456789abcdef").err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
        assert_eq!(NetNs::enter(0, "0123456789abcdef").err().unwrap().kind(), std::io::ErrorKind::Unsupported);
        assert_eq!(NetNs::enter(-1, "0123456789abcdef").err().unwrap().kind(), std::io::ErrorKind::Unsupported);
    }
}
