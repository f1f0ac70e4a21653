//! The loopback forwarder for `network: { allow }` with a broker. The command's network
//! namespace has only loopback; its proxy variables name `127.0.0.1:PORT` there. C2 (in the new
//! namespace) opens that listener and passes it to C1 (still in the host's namespace) over a
//! socket pair; C1 accepts on it and relays each connection to the broker's listener at the same
//! address on the host, and nowhere else. Raw syscalls only (C1 is a child forked from a
//! multi-threaded process): fixed tables, and buffers from one anonymous mapping.

use std::io;

/// The most connections relayed at once; more wait in the listener's backlog.
const MAX_PAIRS: usize = 64;
const BUF: usize = 16 * 1024;
/// After the command exits, how long what it already sent is still delivered to the broker.
const DRAIN_MS: u64 = 2000;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Milliseconds on the monotonic clock (a raw call: safe between fork and exit).
fn now_ms() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// `127.0.0.1:port`.
pub fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be() },
        sin_zero: [0; 8],
    }
}

/// A TCP listener on 127.0.0.1:`port` in this (the command's) network namespace.
pub fn listen(port: u16) -> io::Result<libc::c_int> {
    // SAFETY: raw socket calls on a sockaddr_in of the size given.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let addr = loopback(port);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) < 0 || libc::listen(fd, 128) < 0 {
            let e = io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

#[repr(C)]
struct FdMessage {
    header: libc::cmsghdr,
    fd: libc::c_int,
}

/// Sends `fd` over the unix socket `sock`.
pub fn send_fd(sock: libc::c_int, fd: libc::c_int) -> io::Result<()> {
    // SAFETY: a msghdr over stack buffers; CMSG_LEN computes the control message's length.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control: FdMessage = std::mem::zeroed();
        control.header.cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        control.header.cmsg_level = libc::SOL_SOCKET;
        control.header.cmsg_type = libc::SCM_RIGHTS;
        control.fd = fd;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = (&mut control as *mut FdMessage).cast();
        msg.msg_controllen = std::mem::size_of::<FdMessage>() as _;
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives a descriptor `send_fd` sent, or `None` when the other end closed without one.
pub fn recv_fd(sock: libc::c_int) -> Option<libc::c_int> {
    // SAFETY: as in send_fd; the received descriptor is checked before use.
    unsafe {
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut control: FdMessage = std::mem::zeroed();
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = (&mut control as *mut FdMessage).cast();
        msg.msg_controllen = std::mem::size_of::<FdMessage>() as _;
        loop {
            let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            if n <= 0 || control.header.cmsg_type != libc::SCM_RIGHTS || control.fd < 0 {
                return None;
            }
            return Some(control.fd);
        }
    }
}

/// Data read from one side, waiting to be written to the other.
#[derive(Clone, Copy, Default)]
struct Half {
    len: usize,
    off: usize,
    eof: bool,
}

#[derive(Clone, Copy)]
struct Pair {
    /// The command's connection (-1: a free slot) and the one to the broker.
    inner: libc::c_int,
    outer: libc::c_int,
    up: Half,
    down: Half,
}

const FREE: Pair =
    Pair { inner: -1, outer: -1, up: Half { len: 0, off: 0, eof: false }, down: Half { len: 0, off: 0, eof: false } };

/// Connects to the broker at 127.0.0.1:`port` (host namespace); the socket is then non-blocking.
fn connect_broker(port: u16) -> libc::c_int {
    // SAFETY: raw socket calls on a sockaddr_in of the size given.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return -1;
        }
        let addr = loopback(port);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::connect(fd, (&addr as *const libc::sockaddr_in).cast(), len) < 0 {
            libc::close(fd);
            return -1;
        }
        libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        fd
    }
}

fn close_pair(p: &mut Pair) {
    // SAFETY: our own descriptors.
    unsafe {
        libc::close(p.inner);
        libc::close(p.outer);
    }
    *p = FREE;
}

/// Moves bytes from `from` to `to` through `half`'s buffer; false when the pair is broken.
///
/// # Safety
/// `buf` points at `BUF` writable bytes.
unsafe fn pump(
    from: libc::c_int,
    to: libc::c_int,
    half: &mut Half,
    buf: *mut u8,
    readable: bool,
    writable: bool,
) -> bool {
    if readable && half.len == 0 && !half.eof {
        let n = libc::recv(from, buf.cast(), BUF, 0);
        if n > 0 {
            half.len = n as usize;
            half.off = 0;
        } else if n == 0 {
            half.eof = true;
            libc::shutdown(to, libc::SHUT_WR);
        } else if errno() != libc::EAGAIN && errno() != libc::EINTR {
            return false;
        }
    }
    if writable && half.len > 0 {
        let n = libc::send(to, buf.add(half.off).cast(), half.len - half.off, libc::MSG_NOSIGNAL);
        if n > 0 {
            half.off += n as usize;
            if half.off == half.len {
                half.len = 0;
                half.off = 0;
            }
        } else if n < 0 && errno() != libc::EAGAIN && errno() != libc::EINTR {
            return false;
        }
    }
    true
}

/// C1's loop: relays connections from `listener` to the broker at `port` until `child` exits;
/// then delivers what the command had already sent (for up to `DRAIN_MS`) and returns its wait
/// status.
pub fn relay(listener: libc::c_int, port: u16, child: libc::pid_t) -> libc::c_int {
    // SAFETY: raw syscalls on descriptors of ours; the mapping holds MAX_PAIRS * 2 buffers of BUF.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, child, 0) as libc::c_int;
        let size = MAX_PAIRS * 2 * BUF;
        let map = libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        let mut pairs = [FREE; MAX_PAIRS];
        let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; 2 + 2 * MAX_PAIRS];
        // Once the command has exited: its wait status, and until when what it sent is still
        // delivered (the bytes in flight to the broker; nothing goes back to it).
        let mut exited: Option<(libc::c_int, u64)> = None;
        loop {
            if exited.is_none() {
                let mut status = 0;
                if libc::waitpid(child, &mut status, libc::WNOHANG) == child {
                    exited = Some((status, now_ms() + DRAIN_MS));
                }
            }
            if let Some((status, until)) = exited {
                let sending = pairs.iter().any(|p| p.inner >= 0 && (p.up.len > 0 || !p.up.eof));
                if !sending || now_ms() >= until {
                    for p in pairs.iter_mut().filter(|p| p.inner >= 0) {
                        close_pair(p);
                    }
                    return status;
                }
            }
            let usable = map != libc::MAP_FAILED;
            let free = pairs.iter().any(|p| p.inner < 0);
            let accepting = usable && free && exited.is_none();
            fds[0] = libc::pollfd { fd: if exited.is_none() { pidfd } else { -1 }, events: libc::POLLIN, revents: 0 };
            fds[1] = libc::pollfd { fd: if accepting { listener } else { -1 }, events: libc::POLLIN, revents: 0 };
            for (i, p) in pairs.iter().enumerate() {
                let (mut ie, mut oe) = (0, 0);
                if p.inner >= 0 && exited.is_some() {
                    // Only the command's bytes still move, toward the broker.
                    if p.up.len == 0 && !p.up.eof {
                        ie |= libc::POLLIN;
                    }
                    if p.up.len > 0 {
                        oe |= libc::POLLOUT;
                    }
                } else if p.inner >= 0 {
                    if p.up.len == 0 && !p.up.eof {
                        ie |= libc::POLLIN;
                    }
                    if p.down.len > 0 {
                        ie |= libc::POLLOUT;
                    }
                    if p.down.len == 0 && !p.down.eof {
                        oe |= libc::POLLIN;
                    }
                    if p.up.len > 0 {
                        oe |= libc::POLLOUT;
                    }
                }
                // A side with nothing to wait for is left out, so a hang-up there cannot spin.
                fds[2 + 2 * i] = libc::pollfd { fd: if ie != 0 { p.inner } else { -1 }, events: ie, revents: 0 };
                fds[3 + 2 * i] = libc::pollfd { fd: if oe != 0 { p.outer } else { -1 }, events: oe, revents: 0 };
            }
            // Without a pidfd (a kernel before 5.3), look at the child every 50 ms.
            let timeout = match exited {
                Some((_, until)) => until.saturating_sub(now_ms()).min(50) as libc::c_int,
                None if pidfd < 0 => 50,
                None => -1,
            };
            if libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) < 0 && errno() != libc::EINTR {
                let mut status = 0;
                libc::waitpid(child, &mut status, 0);
                return status;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                for slot in pairs.iter_mut().filter(|p| p.inner < 0) {
                    let conn = libc::accept4(
                        listener,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                    );
                    if conn < 0 {
                        break;
                    }
                    let outer = connect_broker(port);
                    if outer < 0 {
                        libc::close(conn);
                        continue;
                    }
                    *slot = Pair { inner: conn, outer, ..FREE };
                }
            }
            let readable = |r: libc::c_short| r & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0;
            let writable = |r: libc::c_short| r & (libc::POLLOUT | libc::POLLHUP | libc::POLLERR) != 0;
            for (i, p) in pairs.iter_mut().enumerate() {
                if p.inner < 0 {
                    continue;
                }
                let (ri, ro) = (fds[2 + 2 * i].revents, fds[3 + 2 * i].revents);
                let up_buf = (map as *mut u8).add(2 * i * BUF);
                let down_buf = up_buf.add(BUF);
                let ok = pump(p.inner, p.outer, &mut p.up, up_buf, readable(ri), writable(ro))
                    && (exited.is_some() || pump(p.outer, p.inner, &mut p.down, down_buf, readable(ro), writable(ri)));
                let done = p.up.eof && p.down.eof && p.up.len == 0 && p.down.len == 0;
                if !ok || done {
                    close_pair(p);
                }
            }
        }
    }
}
