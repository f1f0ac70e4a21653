//! Local process execution and `LocalShell`, the `ShellProvider` of `NodeWorkspace`.
//!
//! A command runs as `sh -c <command>` (`cmd.exe /d /s /c "<command>"` on Windows) with a minimal
//! environment (`env`), a confined working directory, stdin fed or closed, in its own process
//! group (`process`), its output captured with a cap (`capture`). A timeout, a cancel or dropping
//! the future kills the whole group (`taskkill /T /F` on Windows), and on Linux every process of
//! the command's control group (`cgroup`), so grandchildren die too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::error::{Code, Error, Result};
use crate::path::{normalize, shown, Flavor};
use crate::shell::{ExecOptions, ExecResult, ShellProvider};

mod capture;
pub mod cgroup;
mod env;
pub mod guard;
#[cfg(windows)]
mod job;
#[cfg(unix)]
pub mod launch;
mod options;
mod process;
#[cfg(target_os = "linux")]
mod spawn;

pub(crate) use capture::{read_into, Capture};
#[cfg(all(test, unix))]
use env::is_base_name;
pub use env::{base_env, set_var, InheritEnv};
pub use options::DirOptions;
pub use process::{run_shell_command, run_shell_command_with, Isolation};

/// Most bytes kept in memory per stream: the first half and the last half; the middle of a
/// larger output is dropped (and said so in the text).
pub const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;

/// The shell that runs commands on this platform.
pub const SHELL_NAME: &str = if cfg!(windows) { "cmd.exe" } else { "sh" };

/// Runs commands on the host, in a directory confined to `root`.
#[derive(Debug, Clone)]
pub struct LocalShell {
    root: PathBuf,
    env: BTreeMap<String, String>,
    inherit: InheritEnv,
}

impl LocalShell {
    /// `root` must already be the canonical (real, absolute) path of an existing directory. It is
    /// kept in its plain form on Windows (`C:\…` rather than `\\?\C:\…`, where both name it):
    /// what commands, adapters and messages see.
    pub fn new(root: PathBuf, env: BTreeMap<String, String>, inherit: InheritEnv) -> Self {
        let root = dunce::simplified(&root).to_path_buf();
        LocalShell { root, env, inherit }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The environment of a command: the base, the inherited names, the shell's `env`, then
    /// the call's `extra`.
    pub fn command_env(&self, extra: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = base_env(&self.inherit);
        for (k, v) in self.env.iter().chain(extra) {
            set_var(&mut env, k, v);
        }
        env
    }

    /// The host directory a workspace-relative `cwd` names: normalized, then resolved through
    /// links, and still inside the root. A missing directory is an error.
    pub fn resolve_cwd(&self, cwd: Option<&str>) -> Result<PathBuf> {
        let Some(cwd) = cwd else { return Ok(self.root.clone()) };
        let rel = normalize(cwd, Flavor::native())?;
        if rel == "." {
            return Ok(self.root.clone());
        }
        let real = dunce::canonicalize(self.root.join(&rel)).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                Error::new(Code::NotFound, format!("Working directory not found: {}", shown(cwd)))
            }
            _ => Error::io(cwd, &e),
        })?;
        if !real.starts_with(&self.root) {
            return Err(Error::new(
                Code::OutsideWorkspace,
                format!("Path is outside the workspace: {} (it leads outside the root through a link)", shown(cwd)),
            ));
        }
        if !real.is_dir() {
            return Err(Error::new(
                Code::InvalidArguments,
                format!("Working directory is not a directory: {}", shown(cwd)),
            ));
        }
        Ok(real)
    }
}

#[async_trait]
impl ShellProvider for LocalShell {
    fn shell(&self) -> Option<String> {
        Some(SHELL_NAME.to_string())
    }

    fn host_dir(&self, cwd: Option<&str>) -> Option<PathBuf> {
        self.resolve_cwd(cwd).ok()
    }

    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult> {
        let cwd = self.resolve_cwd(options.cwd.as_deref())?;
        let env = self.command_env(&options.env);
        let isolation = Isolation {
            capture_bytes: options.capture_bytes,
            input: options.input,
            end_with_shell: options.end_with_shell,
            ..Isolation::default()
        };
        run_shell_command_with(
            command,
            &cwd,
            &env,
            options.stdin,
            options.timeout_ms,
            options.cancel,
            options.on_output,
            isolation,
        )
        .await
    }

    fn takes_input(&self) -> bool {
        true
    }

    fn runs_in_background(&self) -> bool {
        true
    }
}

#[cfg(all(test, unix))]
mod tests;
