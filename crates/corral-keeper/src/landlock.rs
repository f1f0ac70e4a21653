//! Landlock, the second layer under the mount view: even where a mount would let a write
//! through, the kernel's LSM allows writes only beneath the writable trees, `/tmp` and the
//! device nodes the view provides; everything else is read and execute only.
//!
//! The ruleset is built in the command's process with raw syscalls: the paths it names exist only
//! in its view (its private `/tmp`), so they cannot be opened before. The library prepares the
//! masks for the kernel's ABI; the paths are the plan's own.

use std::ffi::CString;
use std::io;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// What the child applies: the rights the ruleset handles, for this kernel's ABI.
#[derive(Debug)]
pub struct Plan {
    /// The rights the ruleset handles.
    pub handled: u64,
}

/// The kernel's Landlock ABI version, or `None` without Landlock.
pub fn abi() -> Option<u32> {
    // SAFETY: a raw syscall that only asks.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then_some(v as u32)
}

impl Plan {
    /// The rights to handle on a kernel with `abi`: every filesystem right it knows but
    /// `LANDLOCK_ACCESS_FS_REFER`'s (ABI 2) cross-directory rule, which is granted below anyway.
    pub fn new(abi: u32) -> Plan {
        let mut handled = (1u64 << 13) - 1; // ABI 1: execute … make_sym
        if abi >= 2 {
            handled |= 1 << 13; // refer
        }
        if abi >= 3 {
            handled |= TRUNCATE;
        }
        if abi >= 5 {
            handled |= IOCTL_DEV;
        }
        Plan { handled }
    }

    /// Restricts this process and its descendants: read and execute everywhere, every right
    /// beneath the `writable` directories and `/tmp`, read and write on the `devices`. Raw
    /// syscalls only; needs `no_new_privs`.
    pub fn apply(&self, writable: &[CString], devices: &[CString]) -> io::Result<()> {
        let attr = RulesetAttr { handled_access_fs: self.handled };
        // SAFETY: a ruleset_attr of the size given.
        let rs = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if rs < 0 {
            return Err(io::Error::last_os_error());
        }
        let rs = rs as libc::c_int;
        let result = (|| {
            let read = EXECUTE | READ_FILE | READ_DIR;
            add(rs, c"/", read & self.handled)?;
            for w in writable.iter().map(CString::as_c_str).chain([c"/tmp"]) {
                add(rs, w, self.handled)?;
            }
            for d in devices {
                add(rs, d, (READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV) & self.handled)?;
            }
            // SAFETY: a ruleset descriptor from above.
            let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, rs, 0u32) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })();
        // SAFETY: our own descriptor.
        unsafe { libc::close(rs) };
        result
    }
}

/// Adds a path-beneath rule for `path` with `access`.
fn add(ruleset: libc::c_int, path: &std::ffi::CStr, access: u64) -> io::Result<()> {
    // SAFETY: a NUL-terminated path; O_PATH opens without reading.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let attr = PathBeneathAttr { allowed_access: access, parent_fd: fd };
    // SAFETY: a packed path_beneath_attr and a descriptor of ours.
    let r = unsafe {
        libc::syscall(libc::SYS_landlock_add_rule, ruleset, RULE_PATH_BENEATH, &attr as *const PathBeneathAttr, 0u32)
    };
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
