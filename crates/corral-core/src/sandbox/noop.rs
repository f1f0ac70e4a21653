//! `NoopSandbox`: runs commands on the host, like NodeWorkspace (no isolation at all).

use std::path::Path;

use async_trait::async_trait;

use super::{SandboxAdapter, SandboxRequest};
use crate::error::Result;
use crate::shell::exec::{run_shell_command_with, Isolation};
use crate::shell::{Cancel, ExecResult};

/// Runs each command on the host with the platform shell (`run_shell_command`), in the request's
/// cwd with exactly the request's env.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSandbox;

impl NoopSandbox {
    pub fn new() -> Self {
        NoopSandbox
    }
}

#[async_trait]
impl SandboxAdapter for NoopSandbox {
    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        let timeout = (req.timeout_ms > 0).then_some(req.timeout_ms);
        let isolation = Isolation { capture_bytes: req.capture_bytes, input: req.input, ..Isolation::default() };
        run_shell_command_with(
            &req.command,
            Path::new(&req.cwd),
            &req.env,
            req.stdin,
            timeout,
            cancel,
            req.on_output,
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

    fn runs_on_host(&self) -> bool {
        true
    }
}
