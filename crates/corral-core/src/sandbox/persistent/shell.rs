//! A session as a shell provider: its commands run in the session's sandbox, in a directory
//! named as commands see it (`/workspace/src`, `/tmp`; a relative one is under `/workspace`), and
//! run as long as they run (no timeout unless one is given), so the process tools can run them in
//! the background: what a harness session's `run` and `spawn` use.

use async_trait::async_trait;

use super::{SessionSandbox, WORKSPACE};
use crate::error::Result;
use crate::sandbox::run_guarded;
use crate::shell::{ExecOptions, ExecResult, ShellProvider};

#[async_trait]
impl ShellProvider for SessionSandbox {
    fn shell(&self) -> Option<String> {
        Some("sh".to_string())
    }

    fn host_dir(&self, cwd: Option<&str>) -> Option<std::path::PathBuf> {
        let inside = self.inside_dir(cwd).ok()?;
        self.host_path(&inside)
    }

    fn takes_input(&self) -> bool {
        true
    }

    fn runs_in_background(&self) -> bool {
        true
    }

    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult> {
        let cwd = self.inside_dir(options.cwd.as_deref())?;
        let mut req = self.request(command, &cwd, &options.env)?;
        req.timeout_ms = options.timeout_ms.unwrap_or(0);
        req.stdin = options.stdin;
        req.on_output = options.on_output;
        req.capture_bytes = options.capture_bytes;
        req.input = options.input;
        run_guarded(self.sandbox.clone(), req, options.cancel).await
    }
}

impl SessionSandbox {
    /// A working directory as commands see it: `None` is `/workspace`, a relative path is under
    /// it, an absolute one is taken as given (resolved lexically).
    pub fn inside_dir(&self, cwd: Option<&str>) -> Result<String> {
        match cwd {
            None => Ok(WORKSPACE.to_string()),
            Some(c) if c.starts_with('/') => Ok(super::lexical(c)),
            Some(c) => Ok(super::lexical(&format!("{WORKSPACE}/{c}"))),
        }
    }
}
