//! The keeper's bytes (built by this crate's build script from crates/corral-keeper) and how they
//! are run: from a sealed memory file, or, where the kernel forbids executing those
//! (`vm.memfd_noexec = 2`), from a private file that is removed once the program has started.

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::sync::OnceLock;

static KEEPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/corral-keeper"));

const MFD_CLOEXEC: libc::c_uint = 0x1;
const MFD_ALLOW_SEALING: libc::c_uint = 0x2;
const MFD_EXEC: libc::c_uint = 0x10;

/// The keeper in a sealed memory file, made once per process; `None` where memory files cannot
/// be made executable here.
fn memfd() -> Option<RawFd> {
    static FD: OnceLock<Option<OwnedFd>> = OnceLock::new();
    FD.get_or_init(|| {
        let name = c"corral-keeper";
        // SAFETY: raw calls on a NUL-terminated name and a descriptor of ours.
        let fd = unsafe {
            let mut fd =
                libc::syscall(libc::SYS_memfd_create, name.as_ptr(), MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
            // Before Linux 6.3 the flag is unknown and every memory file may be executed.
            if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                fd = libc::syscall(libc::SYS_memfd_create, name.as_ptr(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
            }
            if fd < 0 {
                return None;
            }
            OwnedFd::from_raw_fd(fd as RawFd)
        };
        let mut file = std::fs::File::from(fd);
        file.write_all(KEEPER).ok()?;
        let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        // SAFETY: fcntl on our own descriptor.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return None;
        }
        Some(OwnedFd::from(file))
    })
    .as_ref()
    .map(|f| f.as_raw_fd())
}

/// Where to find the keeper program, and what to remove once it started.
pub(super) enum Program {
    Memory(CString),
    File { path: CString, dir: std::path::PathBuf },
}

impl Program {
    pub(super) fn path(&self) -> &CString {
        match self {
            Program::Memory(p) | Program::File { path: p, .. } => p,
        }
    }

    /// Removes the private copy (a started program needs its file no more).
    pub(super) fn done(self) {
        if let Program::File { dir, .. } = self {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The memory file, unless `file` asks for the private copy.
pub(super) fn program(file: bool) -> io::Result<Program> {
    if KEEPER.is_empty() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "this build of corral carries no keeper"));
    }
    if !file {
        if let Some(fd) = memfd() {
            let path = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number");
            return Ok(Program::Memory(path));
        }
    }
    private_copy()
}

/// A copy in a new directory only this user can enter, under the temporary directory.
fn private_copy() -> io::Result<Program> {
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let dir = base.join(format!("corral-keeper-{}-{:016x}", std::process::id(), rand::random::<u64>()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        let file = dir.join("corral-keeper");
        let written = (|| {
            let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o700).open(&file)?;
            f.write_all(KEEPER)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o500))?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        let path = CString::new(file.into_os_string().into_encoded_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the temporary directory"))?;
        return Ok(Program::File { path, dir });
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free name for the keeper's private copy"))
}
