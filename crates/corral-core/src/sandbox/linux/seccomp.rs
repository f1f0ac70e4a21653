//! The seccomp filter every sandboxed command runs under: system calls that change the sandbox
//! itself, look into other processes or reach the kernel's riskier surfaces are refused with
//! `EPERM`; `clone3` answers `ENOSYS` so C libraries fall back to `clone`, whose flags are checked.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use crate::error::{Code, Error, Result};

fn arch() -> Result<TargetArch> {
    if cfg!(target_arch = "x86_64") {
        Ok(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Ok(TargetArch::aarch64)
    } else {
        Err(Error::config("LinuxSandbox: seccomp filters are built for x86_64 and aarch64 only."))
    }
}

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
    libc::SYS_kexec_file_load,
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

pub(super) fn filter() -> Result<Vec<BpfProgram>> {
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
    let main = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch()?)
        .map_err(|e| bad(&e))?;
    let prog: BpfProgram = main.try_into().map_err(|e: seccompiler::BackendError| bad(&e))?;
    // clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc use clone.
    let clone3: BTreeMap<i64, Vec<SeccompRule>> = [(libc::SYS_clone3, Vec::new())].into_iter().collect();
    let c3 = SeccompFilter::new(clone3, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch()?)
        .map_err(|e| bad(&e))?;
    let c3: BpfProgram = c3.try_into().map_err(|e: seccompiler::BackendError| bad(&e))?;
    // Two filters, installed one after the other: the kernel runs both, and ENOSYS for clone3
    // wins over the main filter's Allow.
    Ok(vec![c3, prog])
}
