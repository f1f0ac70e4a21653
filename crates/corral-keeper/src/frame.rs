//! Frames on a blocking `AF_UNIX` stream socket: a little-endian `u32` length, the bytes, and up
//! to `MAX_FDS` descriptors attached to the frame's first byte.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::wire::{MAX_FDS, MAX_FRAME};

fn cmsg_space() -> usize {
    // SAFETY: a pure size computation.
    unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<libc::c_int>()) as u32) as usize }
}

/// Sends one frame with `fds` (which stay open on this side).
pub fn send(sock: libc::c_int, payload: &[u8], fds: &[libc::c_int]) -> io::Result<()> {
    if fds.len() > MAX_FDS || payload.len() > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a keeper frame is too large"));
    }
    let mut data = Vec::with_capacity(4 + payload.len());
    data.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    data.extend_from_slice(payload);
    let mut control = vec![0u8; cmsg_space()];
    let mut sent;
    // SAFETY: a msghdr over live buffers; the control buffer has room for MAX_FDS descriptors.
    unsafe {
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let len = std::mem::size_of_val(fds);
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(len as u32) as _;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(len as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<libc::c_int>(), fds.len());
        }
        loop {
            let n = libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL);
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            sent = n as usize;
            break;
        }
    }
    while sent < data.len() {
        // SAFETY: writing from a live buffer.
        let n = unsafe { libc::send(sock, data[sent..].as_ptr().cast(), data.len() - sent, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        sent += n as usize;
    }
    Ok(())
}

fn read_exact(sock: libc::c_int, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        // SAFETY: reading into a live buffer.
        let n = unsafe { libc::recv(sock, buf[got..].as_mut_ptr().cast(), buf.len() - got, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Ok(false);
        }
        got += n as usize;
    }
    Ok(true)
}

/// Receives one frame and its descriptors (close-on-exec); `None` at the end of the stream.
pub fn recv(sock: libc::c_int) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let mut control = vec![0u8; cmsg_space()];
    let mut fds = Vec::new();
    let got;
    // SAFETY: a msghdr over live buffers; each received descriptor is owned at once.
    unsafe {
        let mut iov = libc::iovec { iov_base: header.as_mut_ptr().cast(), iov_len: 4 };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        let n = loop {
            let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break n;
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "too many descriptors in a keeper frame"));
        }
        got = n as usize;
    }
    if got == 0 {
        return Ok(None);
    }
    if got < 4 && !read_exact(sock, &mut header[got..])? {
        return Ok(None);
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "a keeper frame is too large"));
    }
    let mut payload = vec![0u8; len];
    if !read_exact(sock, &mut payload)? {
        return Ok(None);
    }
    Ok(Some((payload, fds)))
}
