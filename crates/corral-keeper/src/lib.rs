//! corral-keeper: the small program that starts LinuxSandbox's commands.
//!
//! The library (corral-core) carries this program's bytes and runs it from a sealed memory file
//! (`memfd`), or a private file where the kernel forbids executing those. It is started without
//! a fork of Node (`posix_spawn`), and forks each command itself: a fork of this small process
//! costs a fraction of a fork of Node, whose page tables are large. The library prepares every
//! path, map and filter (`child::Plan`) and sends it with the command's descriptors (`wire.rs`,
//! `frame.rs`); the command's processes make raw syscalls on it (`child.rs`).
//!
//! Linux only; elsewhere the library is empty and the program says so.

#[cfg(target_os = "linux")]
pub mod child;
#[cfg(target_os = "linux")]
pub mod container;
#[cfg(target_os = "linux")]
pub mod forward;
#[cfg(target_os = "linux")]
pub mod frame;
#[cfg(target_os = "linux")]
pub mod keeper;
#[cfg(target_os = "linux")]
pub mod landlock;
#[cfg(target_os = "linux")]
pub mod prepared;
#[cfg(target_os = "linux")]
pub mod root;
#[cfg(target_os = "linux")]
pub mod wire;

/// The descriptor the control socket is at when the keeper starts.
pub const CONTROL_FD: i32 = 3;

/// A pipe: (read end, write end), both close-on-exec.
#[cfg(target_os = "linux")]
pub fn pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut p = [-1; 2];
    // SAFETY: a two-element array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: descriptors pipe2 just made.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(p[0]), std::os::fd::OwnedFd::from_raw_fd(p[1])) })
}
