//! A command started by another process than this one (LinuxSandbox's keeper): the runner gets
//! its pipes, a future of its wait status, and a way to kill it, and treats it as its own child.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;

/// What the runner asks for.
pub struct LaunchRequest {
    /// `sh -c <command>`.
    pub argv: Vec<String>,
    /// The command's whole environment.
    pub env: BTreeMap<String, String>,
    /// Whether the command reads a pipe (else `/dev/null`).
    pub stdin: bool,
    /// Control groups' `cgroup.procs` the command's first process joins before anything else.
    pub cgroups: Vec<CString>,
    /// The groups made for the launcher's next command (`cgroup::Ahead`): a process prepared for
    /// it joins them while it waits.
    pub ahead: Vec<CString>,
}

/// What the launcher gives back once the command's exec succeeded.
pub struct Launched {
    /// The first process (the leader of the command's process group).
    pub pid: u32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The first process's wait status when it ends; an error when the launcher is gone.
    pub exit: Pin<Box<dyn Future<Output = std::io::Result<i32>> + Send>>,
    /// Kills the command's process group (safe to call after it ended).
    pub kill: std::sync::Arc<dyn Fn() + Send + Sync>,
}

pub type LaunchFuture = Pin<Box<dyn Future<Output = std::io::Result<Launched>> + Send>>;

/// Starts one command; fails as `spawn` does (the errno of the step that refused).
pub type Launcher = Box<dyn FnOnce(LaunchRequest) -> LaunchFuture + Send + Sync>;
