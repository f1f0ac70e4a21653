//! Background processes (`createShellTool(shell, { background: true })`): a command started with
//! `run_in_background` keeps running while the agent works; its output is read later, its input
//! written, and it is stopped by id. One implementation over every shell provider that streams
//! its output: the run is the provider's own `exec`, on a task of its own, with a cancel token
//! that stops it, a lifetime for its timeout, and (on the host) a guard that kills its process
//! group when this process dies. Bounded: 1 MiB of unread output per process (head and tail),
//! 16 running processes per session.

mod buffer;
pub mod tools;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc::error::TrySendError, mpsc::Sender, Notify};

use super::{Cancel, ExecOptions, ExecResult, Input, OutputSink, ShellProvider, Sink, Stream};
use crate::error::{Code, Error, Result};
use crate::redact::{stream::Stream as RedactStream, Redactor};
use buffer::Unread;

/// The most processes one session runs at once in one tool set.
pub const MAX_RUNNING_PER_SESSION: usize = 16;
/// How many ended processes a tool set remembers (with their unread output) for process_output
/// and process_list; the oldest go first.
pub const MAX_ENDED: usize = 64;
/// The longest `process_output` waits for something new.
pub const MAX_WAIT_MS: u64 = 30_000;
/// How long `process_stop` and `close` wait for a killed process to be reaped.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// What the SDKs' `run` keeps of each stream of a command (`Processes::run_to_end`): past it the
/// command is stopped and the call fails (their `spawn` streams output of any size).
pub const RUN_OUTPUT_BYTES: usize = 32 * 1024 * 1024;

/// How the SDKs' sandbox sessions (corral/ai-sdk, corral/openai-agents, the harness) stream a
/// command started by their `spawn`: they read all of its output, as it comes.
pub mod session_streams {
    /// What a process keeps of each stream between two reads (its `keepBytes`): a bound reached
    /// means output came faster than it could be read, which is reported, never spliced.
    pub const KEEP_BYTES: usize = 16 * 1024 * 1024;
    /// How long one read waits for output before it asks again (also how soon an exit is seen).
    pub const READ_WAIT_MS: u32 = 1000;
    /// Output the SDK's reader has not taken yet, queued a stream; past it the rest is dropped and
    /// a line says how much (the process never blocks on a reader).
    pub const QUEUE_BYTES: usize = 16 * 1024 * 1024;
}

/// The number in a process id (`p<n>`, as `start` names them).
fn number(id: &str) -> Option<u64> {
    id.strip_prefix('p').and_then(|n| n.parse().ok())
}

/// One background process.
struct Proc {
    id: String,
    session: String,
    command: String,
    out: Mutex<(Unread, Unread)>,
    changed: Notify,
    done: Mutex<Option<ExecResult>>,
    cancel: Cancel,
    input: Mutex<Option<Sender<Vec<u8>>>>,
    /// Its start needed approval: so does text written to its input.
    asked: AtomicBool,
    /// `process_output` with redaction: a redacting stream per output stream, so a secret split
    /// between two reads is never shown in part.
    redacting: Mutex<Option<[RedactStream; 2]>>,
}

impl Proc {
    fn running(&self) -> bool {
        self.done.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    fn has_news(&self) -> bool {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        !out.0.is_empty() || !out.1.is_empty()
    }

    /// The output not read before, and how the process ended if it has; `marker`: a cut middle
    /// is a line of text in the output.
    fn take(&self, marker: bool) -> Read {
        let ((stdout, stdout_cut), (stderr, stderr_cut)) = {
            let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
            (out.0.take(marker), out.1.take(marker))
        };
        // Read after the output: an ended process has nothing left to say after this read.
        let ended = self.done.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Read { id: self.id.clone(), stdout, stderr, cut: stdout_cut + stderr_cut, ended }
    }
}

/// One read of a background process: the output not read before, as bytes, and its end once it
/// has ended.
#[derive(Debug, Clone)]
pub struct Read {
    pub id: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// How many bytes came between reads past the process's bound and were left out.
    pub cut: u64,
    /// `None` while it runs.
    pub ended: Option<ExecResult>,
}

/// A command read to its end (`Processes::run_to_end`).
#[derive(Debug)]
pub struct RunOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub ended: ExecResult,
    /// The note a reader gets with the end (`Read::note`).
    pub note: Option<String>,
}

impl Read {
    /// The note a reader gets with the end: the lifetime reached, or what the adapter said; in
    /// overlay mode, what the process changed as its last line.
    pub fn note(&self) -> Option<String> {
        let r = self.ended.as_ref()?;
        let said = r.note.clone().or_else(|| {
            r.timed_out.then(|| "The process reached its lifetime (backgroundTimeoutMs) and was stopped.".to_string())
        });
        match (said, r.changes.as_ref().and_then(|c| c.note())) {
            (Some(said), Some(changes)) => Some(format!("{said}\n{changes}")),
            (said, changes) => said.or(changes),
        }
    }

    /// `{ id, running, stdout, stderr, exitCode?, signal?, note? }`, the output as text.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("running".into(), json!(self.ended.is_none()));
        m.insert("stdout".into(), json!(String::from_utf8_lossy(&self.stdout)));
        m.insert("stderr".into(), json!(String::from_utf8_lossy(&self.stderr)));
        if let Some(r) = &self.ended {
            m.insert("exitCode".into(), r.exit_code.map_or(Value::Null, Value::from));
            if let Some(s) = &r.signal {
                m.insert("signal".into(), json!(s));
            }
            if let Some(n) = self.note() {
                m.insert("note".into(), json!(n));
            }
        }
        Value::Object(m)
    }
}

/// What a process has not shown yet, taken and redacted under its redaction lock (two reads at once
/// pass their output through its streams in the order they took it); at its end, all of it.
fn redacted(p: &Proc, session: &str, redactor: &Arc<Redactor>) -> Value {
    let mut streams = p.redacting.lock().unwrap_or_else(|e| e.into_inner());
    let read = p.take(true);
    let mut v = read.to_json();
    let streams = streams.get_or_insert_with(|| [0, 1].map(|_| RedactStream::new(redactor.clone(), session)));
    for (stream, key) in streams.iter_mut().zip(["stdout", "stderr"]) {
        let mut text = stream.push(v[key].as_str().unwrap_or_default());
        if read.ended.is_some() {
            text.push_str(&stream.finish());
        }
        v[key] = Value::from(text);
    }
    if let Some(note) = v.get("note").and_then(Value::as_str) {
        v["note"] = Value::from(redactor.redact(note, session).into_owned());
    }
    v
}

/// The output of a background run, into its process's unread buffers.
struct ToProc(std::sync::Weak<Proc>);

impl OutputSink for ToProc {
    fn output(&self, stream: Stream, chunk: &[u8]) {
        if let Some(p) = self.0.upgrade() {
            {
                let mut out = p.out.lock().unwrap_or_else(|e| e.into_inner());
                match stream {
                    Stream::Stdout => out.0.push(chunk),
                    Stream::Stderr => out.1.push(chunk),
                }
            }
            p.changed.notify_waiters();
        }
    }
}

/// How a process starts: whether it gets an input channel, and its unread bound per stream.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// Its start needed approval: so does text written to its input.
    pub asked: bool,
    pub input: bool,
    pub keep_bytes: usize,
}

/// The background processes of one tool set; ids `p1`, `p2`, … in it.
pub struct Processes {
    next: AtomicU64,
    procs: Mutex<BTreeMap<u64, Arc<Proc>>>,
    /// Cancelled by `close`: every process stops.
    closed: Cancel,
    lifetime_ms: u64,
}

impl Processes {
    pub fn new(lifetime_ms: u64) -> Self {
        Processes { next: AtomicU64::new(1), procs: Mutex::new(BTreeMap::new()), closed: Cancel::new(), lifetime_ms }
    }

    /// The process `id` names, in any session (ids are unique across a tool set).
    fn by_id(&self, id: &str) -> Option<Arc<Proc>> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner()).get(&number(id)?).cloned()
    }

    /// `process_input`'s `needsApproval`: text for a process whose start needed approval, or for
    /// an id that names no process yet (it may name one that is being approved now: asked, never
    /// written unasked). Its session is not known here; the id names one process.
    pub fn input_needs_approval(&self, args: &Value) -> bool {
        let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
        let id = args.get("id").and_then(Value::as_str).unwrap_or_default();
        !text.is_empty() && self.by_id(id).is_none_or(|p| p.asked.load(Ordering::SeqCst))
    }

    /// The command a process runs, for an approval prompt.
    pub fn command_of(&self, id: &str) -> Option<String> {
        self.by_id(id).map(|p| p.command.clone())
    }

    fn find(&self, session: &str, id: &str) -> Result<Arc<Proc>> {
        match self.by_id(id) {
            Some(p) if p.session == session => Ok(p),
            _ => Err(Error::new(
                Code::NotFound,
                format!("No background process {id} in this session; process_list shows them."),
            )),
        }
    }

    /// Starts `command` (already checked against the tool's rules) and answers at once with its
    /// id.
    fn start(
        &self,
        shell: Arc<dyn ShellProvider>,
        command: &str,
        base: ExecOptions,
        session: &str,
        how: Start,
    ) -> Result<String> {
        if self.closed.is_cancelled() {
            return Err(Error::new(Code::CommandRefused, "The tool set was closed: no background process can start."));
        }
        if !shell.runs_in_background() {
            return Err(Error::new(
                Code::CommandRefused,
                "This shell provider cannot run commands in the background (NodeWorkspace, SandboxShell and a provider with spawn() can): run the command without run_in_background.",
            ));
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (input, tx) = if how.input && shell.takes_input() {
            let (i, tx) = Input::channel();
            (Some(i), Some(tx))
        } else {
            (None, None)
        };
        let proc = Arc::new(Proc {
            id: format!("p{n}"),
            session: session.to_string(),
            command: command.to_string(),
            out: Mutex::new((Unread::with_limit(how.keep_bytes), Unread::with_limit(how.keep_bytes))),
            changed: Notify::new(),
            done: Mutex::new(None),
            cancel: self.closed.child_token(),
            input: Mutex::new(tx),
            asked: AtomicBool::new(how.asked),
            redacting: Mutex::new(None),
        });
        let options = ExecOptions {
            timeout_ms: Some(self.lifetime_ms),
            cancel: Some(proc.cancel.clone()),
            on_output: Some(Sink(Arc::new(ToProc(Arc::downgrade(&proc))))),
            input,
            end_with_shell: true,
            capture_bytes: Some(0),
            stdin: None,
            ..base
        };
        {
            let mut procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
            // Counted and added under one lock: parallel starts cannot pass the limit together.
            let running = procs.values().filter(|p| p.session == session && p.running()).count();
            if running >= MAX_RUNNING_PER_SESSION {
                return Err(Error::new(
                    Code::CommandRefused,
                    format!("{MAX_RUNNING_PER_SESSION} background processes already run in this session: stop one first (process_stop)."),
                ));
            }
            // Ended processes are kept for a while (their last output may not be read yet), but
            // not without bound: those read to the end go first, then the oldest.
            let mut ended: Vec<(bool, u64)> =
                procs.iter().filter(|(_, p)| !p.running()).map(|(k, p)| (p.has_news(), *k)).collect();
            ended.sort();
            for (_, k) in ended.iter().take(ended.len().saturating_sub(MAX_ENDED - 1)) {
                procs.remove(k);
            }
            procs.insert(n, proc.clone());
        }
        let (p, command) = (proc.clone(), command.to_string());
        tokio::spawn(async move {
            let r = match shell.exec(&command, options).await {
                Ok(r) => r,
                Err(e) => ExecResult { stderr: e.message, ..ExecResult::default() },
            };
            if !r.stderr.is_empty() && r.exit_code.is_none() && !r.aborted && !r.timed_out && r.signal.is_none() {
                // Could not start: the error is its output.
                p.out.lock().unwrap_or_else(|e| e.into_inner()).1.push(r.stderr.as_bytes());
            }
            *p.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            p.input.lock().unwrap_or_else(|e| e.into_inner()).take();
            p.changed.notify_waiters();
        });
        Ok(proc.id.clone())
    }

    /// `process_output`: the output not read before; waits up to `wait_ms` for something new
    /// (output or the exit) when there is nothing yet.
    pub async fn output(&self, session: &str, id: &str, wait_ms: u64, cancel: Option<&Cancel>) -> Result<Value> {
        Ok(self.read(session, id, wait_ms, cancel, true).await?.to_json())
    }

    /// `process_output` for a model: as `output`, with each stream redacted as one text across reads
    /// (what could still begin a secret is held back until the next read, or the end).
    pub async fn output_redacted(
        &self,
        session: &str,
        id: &str,
        wait_ms: u64,
        cancel: Option<&Cancel>,
        redactor: &Arc<Redactor>,
    ) -> Result<Value> {
        let p = self.wait_news(session, id, wait_ms, cancel).await?;
        Ok(redacted(&p, session, redactor))
    }

    /// `process_stop` for a model: as `stop`, its last output redacted as `output_redacted` reads.
    pub async fn stop_redacted(&self, session: &str, id: &str, redactor: &Arc<Redactor>) -> Result<Value> {
        let p = self.halt(session, id).await?;
        Ok(redacted(&p, session, redactor))
    }

    /// The output not read before, as bytes; waits up to `wait_ms` (at most `MAX_WAIT_MS`) for
    /// something new (output or the exit) when there is nothing yet. `marker`: see `Proc::take`.
    pub async fn read(
        &self,
        session: &str,
        id: &str,
        wait_ms: u64,
        cancel: Option<&Cancel>,
        marker: bool,
    ) -> Result<Read> {
        Ok(self.wait_news(session, id, wait_ms, cancel).await?.take(marker))
    }

    /// The process, once it has something new (output or its end), or after `wait_ms` (at most
    /// `MAX_WAIT_MS`), or a cancel.
    async fn wait_news(&self, session: &str, id: &str, wait_ms: u64, cancel: Option<&Cancel>) -> Result<Arc<Proc>> {
        let p = self.find(session, id)?;
        if wait_ms > 0 && !p.has_news() && p.running() {
            let changed = p.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !p.has_news() && p.running() {
                let aborted = async {
                    match cancel {
                        Some(c) => c.cancelled().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep(Duration::from_millis(wait_ms.min(MAX_WAIT_MS))) => {}
                    _ = aborted => {}
                }
            }
        }
        Ok(p)
    }

    /// `process_input`: writes `text`, and with `close` ends the process's input.
    pub fn input(&self, session: &str, id: &str, text: &[u8], close: bool) -> Result<Value> {
        let p = self.find(session, id)?;
        let mut tx = p.input.lock().unwrap_or_else(|e| e.into_inner());
        let Some(sender) = tx.as_ref() else { return Err(no_input(&p)) };
        if !text.is_empty() {
            match sender.try_send(text.to_vec()) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    return Err(Error::new(
                        Code::InvalidArguments,
                        format!("Cannot write to {id}: it is not reading its input ({} writes wait). Read its output, or stop it.", super::INPUT_QUEUE),
                    ))
                }
                Err(TrySendError::Closed(_)) => {
                    return Err(Error::new(Code::InvalidArguments, format!("Cannot write to {id}: it has ended.")))
                }
            }
        }
        if close {
            tx.take();
        }
        Ok(json!({ "id": id, "written": text.len(), "closed": close }))
    }

    /// Writes `bytes` to the process's input, waiting while its queue is full (a stream's
    /// backpressure) or until it ends; `close` ends its input after them.
    pub async fn feed(&self, session: &str, id: &str, bytes: Vec<u8>, close: bool) -> Result<()> {
        let p = self.find(session, id)?;
        let sender = p.input.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(sender) = sender else {
            // Ending the input of a process that has ended asks for nothing.
            return if bytes.is_empty() && close && !p.running() { Ok(()) } else { Err(no_input(&p)) };
        };
        if !bytes.is_empty() && sender.send(bytes).await.is_err() {
            return Err(Error::new(Code::InvalidArguments, format!("Cannot write to {id}: it has ended.")));
        }
        if close {
            p.input.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        Ok(())
    }

    /// `process_stop`: kills the process (its whole group, or everything its sandbox holds) and
    /// returns its final output.
    pub async fn stop(&self, session: &str, id: &str) -> Result<Value> {
        Ok(self.halt(session, id).await?.take(true).to_json())
    }

    /// Kills the process and waits (bounded) for its end; its output stays for the next read.
    async fn halt(&self, session: &str, id: &str) -> Result<Arc<Proc>> {
        let p = self.find(session, id)?;
        p.cancel.cancel();
        wait_done(&p).await;
        Ok(p)
    }

    /// Reads process `id` to its end, each stream whole up to `RUN_OUTPUT_BYTES`: the SDKs'
    /// `run`. A stream past that, or output lost between two reads (more than the process keeps
    /// came at once), stops the process, and once it has ended the call fails (`TooLarge`). A
    /// cancel stops it too (the result is then its end as stopped).
    pub async fn run_to_end(&self, session: &str, id: &str, cancel: Option<&Cancel>) -> Result<RunOutput> {
        let mut out: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        let mut failure: Option<Error> = None;
        let mut cancelled = false;
        loop {
            let stopping = cancelled || failure.is_some();
            if !stopping && cancel.is_some_and(Cancel::is_cancelled) {
                cancelled = true;
                self.stop_only(session, id).await?;
            }
            let r = self.read(session, id, MAX_WAIT_MS, cancel.filter(|_| !stopping), false).await?;
            if failure.is_none() && !cancelled {
                if r.cut > 0 {
                    failure = Some(Error::new(
                        Code::TooLarge,
                        format!(
                            "{} bytes of the command's output were lost: it wrote faster than it could be read.",
                            r.cut
                        ),
                    ));
                }
                for (i, bytes) in [&r.stdout, &r.stderr].into_iter().enumerate() {
                    if failure.is_none() && out[i].len() + bytes.len() > RUN_OUTPUT_BYTES {
                        failure = Some(Error::new(
                            Code::TooLarge,
                            format!(
                                "The command wrote more than {} MiB to one stream: it was stopped (spawn streams output of any size).",
                                RUN_OUTPUT_BYTES >> 20
                            ),
                        ));
                    }
                    if failure.is_none() {
                        out[i].extend_from_slice(bytes);
                    }
                }
                if failure.is_some() {
                    self.stop_only(session, id).await?;
                }
            }
            let note = r.note();
            if let Some(ended) = r.ended {
                // Read to its end by its only reader: nothing of it is left to keep.
                self.forget(session, id);
                if let Some(e) = failure {
                    return Err(e);
                }
                let [stdout, stderr] = out;
                return Ok(RunOutput { stdout, stderr, ended, note });
            }
        }
    }

    /// Drops ended process `id` of `session` from the list.
    fn forget(&self, session: &str, id: &str) {
        let Some(n) = number(id) else { return };
        let mut procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
        if procs.get(&n).is_some_and(|p| p.session == session && !p.running()) {
            procs.remove(&n);
        }
    }

    /// `halt` for a caller that reads the output itself (the SDKs' streams).
    pub async fn stop_only(&self, session: &str, id: &str) -> Result<()> {
        self.halt(session, id).await.map(|_| ())
    }

    /// `process_list`: this session's processes, running or ended.
    pub fn list(&self, session: &str) -> Value {
        let procs = self.procs.lock().unwrap_or_else(|e| e.into_inner());
        let items: Vec<Value> = procs
            .values()
            .filter(|p| p.session == session)
            .map(|p| {
                let done = p.done.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let mut v = json!({ "id": p.id, "command": p.command, "running": done.is_none() });
                if let Some(r) = done {
                    v["exitCode"] = r.exit_code.map_or(Value::Null, Value::from);
                }
                v
            })
            .collect();
        Value::Array(items)
    }

    /// Stops every process of the tool set and waits (bounded) for them to end.
    pub async fn close(&self) {
        self.closed.cancel();
        let all: Vec<Arc<Proc>> = self.procs.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for p in all {
            wait_done(&p).await;
        }
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

fn no_input(p: &Proc) -> Error {
    let why = if p.running() {
        "its input was closed, or this shell cannot pass input to a running command"
    } else {
        "it has ended"
    };
    Error::new(Code::InvalidArguments, format!("Cannot write to {}: {why}.", p.id))
}

async fn wait_done(p: &Proc) {
    let _ = tokio::time::timeout(STOP_WAIT, async {
        loop {
            let changed = p.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !p.running() {
                return;
            }
            changed.await;
        }
    })
    .await;
}

#[cfg(all(test, unix))]
mod tests;
