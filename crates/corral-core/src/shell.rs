//! The shell provider interface (API.md `ShellProvider`).

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::Result;

pub type Cancel = tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Workspace-relative working directory; the root when `None`.
    pub cwd: Option<String>,
    pub timeout_ms: Option<u64>,
    /// Extra variables for this command, over the provider's own.
    pub env: BTreeMap<String, String>,
    /// Standard input; closed when `None` (never inherited).
    pub stdin: Option<String>,
    pub cancel: Option<Cancel>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecResult {
    pub stdout: String,
    pub stderr: String,
    /// `None` when the process was killed by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub aborted: bool,
    /// The signal's name (`SIGKILL`) when the process was killed by one.
    pub signal: Option<String>,
}

/// Resolves (does not fail) for a non-zero exit, a timeout or an abort; fails only when the
/// command could not be started.
#[async_trait]
pub trait ShellProvider: Send + Sync {
    /// `sh`, `bash`, `cmd.exe`, … when the provider knows which shell runs its commands.
    fn shell(&self) -> Option<String> {
        None
    }
    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult>;
}
