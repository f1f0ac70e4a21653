//! The shell provider interface (`ShellProvider` in index.d.ts).

pub mod approval;
pub mod changes;
pub mod exec;
pub mod process;
pub mod progress;
pub mod rules;
pub mod spill;
pub mod syntax;
pub mod tool;
mod wire;

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::error::Result;

pub use crate::cancel::Cancel;

/// One of a command's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
    pub fn parse(s: &str) -> Option<Stream> {
        match s {
            "stdout" => Some(Stream::Stdout),
            "stderr" => Some(Stream::Stderr),
            _ => None,
        }
    }
}

/// Takes a command's output while it runs (for progress), as the bytes come.
pub trait OutputSink: Send + Sync {
    fn output(&self, stream: Stream, chunk: &[u8]);
}

/// An output sink, as options carry it.
#[derive(Clone)]
pub struct Sink(pub std::sync::Arc<dyn OutputSink>);

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sink(..)")
    }
}

impl PartialEq for Sink {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Sink {}

/// Standard input that comes while a command runs (a background process's `process_input`):
/// chunks through a channel, taken once by the runner; the channel's end closes the input.
#[derive(Clone, Default)]
pub struct Input(std::sync::Arc<std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<Vec<u8>>>>>);

/// How many writes may wait for a command that does not read its input.
pub const INPUT_QUEUE: usize = 64;

impl Input {
    /// A new input and the sender that feeds it (dropping the sender closes it). Bounded: a
    /// command that does not read makes further writes fail instead of growing a queue.
    pub fn channel() -> (Input, tokio::sync::mpsc::Sender<Vec<u8>>) {
        let (tx, rx) = tokio::sync::mpsc::channel(INPUT_QUEUE);
        (Input(std::sync::Arc::new(std::sync::Mutex::new(Some(rx)))), tx)
    }

    /// The receiving end, for the one runner that feeds the command.
    pub fn take(&self) -> Option<tokio::sync::mpsc::Receiver<Vec<u8>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Input(..)")
    }
}

impl PartialEq for Input {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Input {}

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
    /// Where the output goes while the command runs, for a provider that can stream it.
    pub on_output: Option<Sink>,
    /// The most bytes of each stream held in memory (its start and its end); the provider's
    /// own cap when `None`. The tools set it from what they can return (`capture_for`).
    pub capture_bytes: Option<usize>,
    /// Input while the command runs, for a provider that `takes_input` (instead of `stdin`).
    pub input: Option<Input>,
    /// When the command's shell exits, kill everything it left running (its process group and
    /// control group): a background process ends whole. (Every command, this or not, ends when
    /// this process ends: `exec/guard.rs`.)
    pub end_with_shell: bool,
    /// The tool call's session, turn and id (the shell tool fills them from its `ctx`): a
    /// SandboxShell with checkpoints records a command's changes under them.
    pub session_id: Option<String>,
    pub turn: Option<u32>,
    pub tool_call_id: Option<String>,
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
    /// After a timeout or an abort: whether every process the command started is known to be
    /// dead (its control group emptied, its container removed), not only its process group.
    pub every_process_killed: bool,
    /// What an adapter says about the run (a limit that stopped it); the shell tool passes it on.
    pub note: Option<String>,
    /// Overlay mode: what the command changed in its working directory.
    pub changes: Option<crate::shell::changes::Changes>,
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
    /// The host directory a command with this `cwd` runs in, when it is on this machine (the
    /// shell rules expand globs against it); `None` for a remote or programmed shell.
    fn host_dir(&self, _cwd: Option<&str>) -> Option<std::path::PathBuf> {
        None
    }
    /// Whether `ExecOptions::input` reaches the command while it runs.
    fn takes_input(&self) -> bool {
        false
    }
    /// Whether a command can run in the background: its output streams to `on_output` while it
    /// runs and its cancel stops all of it (`run_in_background` is refused otherwise).
    fn runs_in_background(&self) -> bool {
        false
    }
}

/// The programmed answer of a `MemoryWorkspace` command (a JS function in the binding).
#[async_trait]
pub trait ExecStub: Send + Sync {
    /// Missing fields of the answer default to `''`, `0` and `false`.
    async fn answer(&self, command: &str, options: &ExecOptions) -> Result<serde_json::Value>;
}

/// A command as `MemoryWorkspace.commands` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCommand {
    pub command: String,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    pub timeout_ms: Option<u64>,
}

/// `MemoryWorkspace`'s shell: answers with a programmed stub and records every command. Without a
/// stub every command answers exit code 127.
pub struct StubShell {
    stub: Option<std::sync::Arc<dyn ExecStub>>,
    commands: std::sync::Mutex<Vec<RecordedCommand>>,
}

impl StubShell {
    pub fn new(stub: Option<std::sync::Arc<dyn ExecStub>>) -> Self {
        StubShell { stub, commands: std::sync::Mutex::new(Vec::new()) }
    }
    pub fn commands(&self) -> Vec<RecordedCommand> {
        self.commands.lock().unwrap().clone()
    }
}

#[async_trait]
impl ShellProvider for StubShell {
    async fn exec(&self, command: &str, options: ExecOptions) -> Result<ExecResult> {
        self.commands.lock().unwrap().push(RecordedCommand {
            command: command.to_string(),
            cwd: options.cwd.clone(),
            env: options.env.clone(),
            timeout_ms: options.timeout_ms,
        });
        if options.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Ok(ExecResult { aborted: true, exit_code: None, ..Default::default() });
        }
        match &self.stub {
            None => Ok(ExecResult {
                exit_code: Some(127),
                stderr: format!("{command}: no exec stub is programmed for this MemoryWorkspace\n"),
                ..Default::default()
            }),
            Some(stub) => ExecResult::from_json(&stub.answer(command, &options).await?),
        }
    }
}
