//! The seccomp filter every sandboxed command runs under: system calls that change the sandbox
//! itself, look into other processes or reach the kernel's riskier surfaces are refused with
//! `EPERM`; `clone3` answers `ENOSYS` so C libraries fall back to `clone`, whose flags are checked.
//!
//! Three rules guard the host from what a command leaves behind: no mode change or creation with
//! the setuid or setgid bit (in a tree idmapped to root, such a file would be setuid-root on the
//! host), no `AF_UNIX` socket unless the sandbox allows them (a read-only mount does not stop
//! `connect()` on a host socket such as a container engine's), and no encryption policy or key
//! (fscrypt) to hide names from the protected-name walks.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use crate::error::{Code, Error, Result};

pub(super) fn arch() -> Result<TargetArch> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err(Error::config("LinuxSandbox: seccomp filters are built for x86_64 and aarch64 only."))
    }
}

/// `kexec_file_load`, which musl's aarch64 headers (and so the libc crate there) do not name.
#[cfg(target_arch = "x86_64")]
const SYS_KEXEC_FILE_LOAD: libc::c_long = 320;
#[cfg(target_arch = "aarch64")]
const SYS_KEXEC_FILE_LOAD: libc::c_long = 294;
// Other architectures get no filter at all (`arch()`); this only keeps them compiling.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = libc::SYS_kexec_load;

/// The refused system calls.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_mount_setattr,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    SYS_KEXEC_FILE_LOAD,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_userfaultfd,
];

/// `fchmodat2`, the same number on x86_64 and aarch64.
const SYS_FCHMODAT2: libc::c_long = 452;
/// `O_TMPFILE` less `O_DIRECTORY`: the flag that creates a file.
const O_TMPFILE_BIT: u64 = 0o2000_0000;

/// The calls that set a mode, each with the argument holding it and, for the `open` family, the
/// one holding the flags (the mode counts only with `O_CREAT` or `O_TMPFILE`).
fn mode_calls() -> Vec<(libc::c_long, u8, Option<u8>)> {
    let calls = vec![
        (libc::SYS_fchmod, 1, None),
        (libc::SYS_fchmodat, 2, None),
        (SYS_FCHMODAT2, 2, None),
        (libc::SYS_openat, 3, Some(2)),
        (libc::SYS_mknodat, 2, None),
    ];
    // The older calls that aarch64 never had.
    #[cfg(target_arch = "x86_64")]
    let calls = [
        calls,
        vec![
            (libc::SYS_chmod, 1, None),
            (libc::SYS_open, 2, Some(1)),
            (libc::SYS_creat, 1, None),
            (libc::SYS_mknod, 1, None),
        ],
    ]
    .concat();
    calls
}

/// `FS_IOC_SET_ENCRYPTION_POLICY`, `FS_IOC_ADD_ENCRYPTION_KEY`, `FS_IOC_REMOVE_ENCRYPTION_KEY`
/// and `FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS` (linux/fscrypt.h; the kernel reads the request as
/// 32 bits).
const FSCRYPT_IOCTLS: [u64; 4] = [0x800c_6613, 0xc050_6617, 0xc040_6618, 0xc040_6619];

pub(super) fn filter(allow_unix_sockets: bool) -> Result<Vec<BpfProgram>> {
    let bad =
        |e: &dyn std::fmt::Display| Error::new(Code::Io, format!("LinuxSandbox: cannot build the seccomp filter: {e}"));
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = REFUSED.iter().map(|&s| (s, Vec::new())).collect();
    // clone with any new-namespace flag (a new user namespace above all): each flag a rule.
    let mut clone_rules = Vec::new();
    for flag in [libc::CLONE_NEWUSER, libc::CLONE_NEWNS, libc::CLONE_NEWPID, libc::CLONE_NEWNET] {
        let c = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag as u64), flag as u64)
            .map_err(|e| bad(&e))?;
        clone_rules.push(SeccompRule::new(vec![c]).map_err(|e| bad(&e))?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    // The command is its namespace's init's image: clearing PR_SET_PDEATHSIG would let it outlive
    // C1, and with it the kill on a timeout or abort.
    let pdeathsig = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::PR_SET_PDEATHSIG as u64)
        .map_err(|e| bad(&e))?;
    rules.insert(libc::SYS_prctl, vec![SeccompRule::new(vec![pdeathsig]).map_err(|e| bad(&e))?]);
    let masked = |arg: u8, bits: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bits), bits).map_err(|e| bad(&e))
    };
    for (call, mode_arg, flags_arg) in mode_calls() {
        let mut call_rules = Vec::new();
        for bit in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
            match flags_arg {
                None => call_rules.push(SeccompRule::new(vec![masked(mode_arg, bit)?]).map_err(|e| bad(&e))?),
                Some(f) => {
                    for create in [libc::O_CREAT as u64, O_TMPFILE_BIT] {
                        let both = vec![masked(f, create)?, masked(mode_arg, bit)?];
                        call_rules.push(SeccompRule::new(both).map_err(|e| bad(&e))?);
                    }
                }
            }
        }
        rules.insert(call, call_rules);
    }
    // An encrypted directory lists other names when its key comes and goes, with no ctime change
    // and no inotify event: a command could hide a `.git` from the walks behind a key.
    let mut ioctl_rules = Vec::new();
    for request in FSCRYPT_IOCTLS {
        let c = SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request).map_err(|e| bad(&e))?;
        ioctl_rules.push(SeccompRule::new(vec![c]).map_err(|e| bad(&e))?);
    }
    rules.insert(libc::SYS_ioctl, ioctl_rules);
    if !allow_unix_sockets {
        let unix = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)
            .map_err(|e| bad(&e))?;
        rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![unix]).map_err(|e| bad(&e))?]);
    }
    let main = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch()?)
        .map_err(|e| bad(&e))?;
    let prog: BpfProgram = main.try_into().map_err(|e: seccompiler::BackendError| bad(&e))?;
    // clone3 and openat2 pass their flags and mode in memory a filter cannot read: ENOSYS makes
    // libc use clone and openat.
    let clone3: BTreeMap<i64, Vec<SeccompRule>> =
        [(libc::SYS_clone3, Vec::new()), (libc::SYS_openat2, Vec::new())].into_iter().collect();
    let c3 = SeccompFilter::new(clone3, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch()?)
        .map_err(|e| bad(&e))?;
    let c3: BpfProgram = c3.try_into().map_err(|e: seccompiler::BackendError| bad(&e))?;
    // Two filters, installed one after the other: the kernel runs both, and ENOSYS for clone3
    // wins over the main filter's Allow. On x86_64 a third refuses the x32 calls (the number
    // with bit 30 set), which would pass the others unchecked on a kernel with x32 enabled.
    let mut programs = vec![c3, prog];
    if cfg!(target_arch = "x86_64") {
        programs.push(no_x32());
    }
    Ok(programs)
}

/// `nr >= 0x40000000` (x32) → EPERM, anything else allowed, for x86_64's audit arch.
fn no_x32() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const ALLOW: u32 = 0x7fff_0000;
    const ERRNO: u32 = 0x0005_0000;
    let f = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        f(LD_W_ABS, 0, 0, 4),              // seccomp_data.arch
        f(JEQ_K, 0, 2, AUDIT_ARCH_X86_64), // another arch: allow (its own filter checks it)
        f(LD_W_ABS, 0, 0, 0),              // seccomp_data.nr
        f(JGE_K, 1, 0, 0x4000_0000),       // x32: refuse
        f(RET_K, 0, 0, ALLOW),
        f(RET_K, 0, 0, ERRNO | libc::EPERM as u32),
    ]
}
