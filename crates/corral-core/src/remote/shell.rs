//! A caller's `ShellProvider`, exec stub and `SandboxAdapter`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{Dispatch, Remote};
use crate::error::Result;
use crate::sandbox::{SandboxAdapter, SandboxRequest};
use crate::shell::{Cancel, ExecOptions, ExecResult, ExecStub, ShellProvider, Sink, Stream};

/// `{ op: 'exec', id, command, options, stream }`, and `{ op: 'abort', id }` when the run is
/// cancelled. While a run wants its output (`stream: true`), the caller reports it with
/// [`RemoteShell::output`] under the run's id. A provider with `spawn` runs background commands:
/// `{ op: 'spawn', id, command, options }` answered when the process ends, `{ op: 'write', id,
/// text }` and `{ op: 'closeStdin', id }` for its input, `{ op: 'abort', id }` to kill it.
pub struct RemoteShell {
    remote: Remote,
    shell: Option<String>,
    sinks: Mutex<HashMap<u64, Sink>>,
    can_spawn: bool,
}

impl RemoteShell {
    pub fn new(dispatch: Arc<dyn Dispatch>, shell: Option<String>) -> Self {
        RemoteShell { remote: Remote::new(dispatch), shell, sinks: Mutex::new(HashMap::new()), can_spawn: false }
    }

    /// The provider has `spawn`: commands can run in the background, with input.
    pub fn with_spawn(mut self, can_spawn: bool) -> Self {
        self.can_spawn = can_spawn;
        self
    }

    /// A background run through the provider's `spawn`: its input forwarded as it comes, its
    /// lifetime kept here, a cancel passed on as `abort` (the provider's `kill()`).
    async fn spawn(&self, id: u64, command: &str, mut o: ExecOptions) -> Result<ExecResult> {
        let mut options = o.to_json();
        options.as_object_mut().map(|m| m.remove("timeoutMs"));
        let fields = json!({ "command": command, "options": options });
        let forward = o.input.take().and_then(|i| i.take()).map(|mut rx| {
            let remote = self.remote.clone();
            tokio::spawn(async move {
                while let Some(chunk) = rx.recv().await {
                    let text = String::from_utf8_lossy(&chunk).into_owned();
                    if remote.op("write", json!({ "id": id, "text": text })).await.is_err() {
                        return;
                    }
                }
                let _ = remote.op("closeStdin", json!({ "id": id })).await;
            })
        });
        // The lifetime: past it, the run is cancelled like a stop.
        let cancel = o.cancel.clone().unwrap_or_default();
        let lifetime = o.timeout_ms.map(|ms| {
            let c = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                c.cancel();
                true
            })
        });
        let v = self.remote.op_cancellable("spawn", id, fields, Some(&cancel)).await;
        if let Some(f) = forward {
            f.abort();
        }
        let timed_out = match lifetime {
            Some(t) if t.is_finished() => t.await.unwrap_or(false),
            Some(t) => {
                t.abort();
                false
            }
            None => false,
        };
        let mut r = ExecResult::from_json(&v?)?;
        r.timed_out |= timed_out;
        r.aborted |= cancel.is_cancelled() && !timed_out;
        Ok(r)
    }

    /// Output the caller's run `id` produced while it runs; ignored once the run has ended, and
    /// for a stream that is not `stdout` or `stderr`.
    pub fn output(&self, id: u64, stream: &str, chunk: &[u8]) {
        let sink = self.sinks.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
        if let (Some(sink), Some(stream)) = (sink, Stream::parse(stream)) {
            sink.0.output(stream, chunk);
        }
    }
}

/// Forgets a run's sink when the run ends, however it ends.
struct SinkGuard<'a>(&'a RemoteShell, u64);

impl Drop for SinkGuard<'_> {
    fn drop(&mut self) {
        self.0.sinks.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

#[async_trait]
impl ShellProvider for RemoteShell {
    fn shell(&self) -> Option<String> {
        self.shell.clone()
    }
    fn takes_input(&self) -> bool {
        self.can_spawn
    }
    fn runs_in_background(&self) -> bool {
        self.can_spawn
    }
    async fn exec(&self, command: &str, o: ExecOptions) -> Result<ExecResult> {
        let id = self.remote.next_id();
        let stream = o.on_output.is_some();
        let _guard = o.on_output.clone().map(|sink| {
            self.sinks.lock().unwrap_or_else(|e| e.into_inner()).insert(id, sink);
            SinkGuard(self, id)
        });
        if self.can_spawn && o.input.is_some() {
            return self.spawn(id, command, o).await;
        }
        let fields = json!({ "command": command, "options": o.to_json(), "stream": stream });
        let v = self.remote.op_cancellable("exec", id, fields, o.cancel.as_ref()).await?;
        ExecResult::from_json(&v)
    }
}

/// `MemoryWorkspace`'s programmed answer: `{ command, options }`, answered with a partial
/// `ExecResult`.
pub struct RemoteStub(Remote);

impl RemoteStub {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        RemoteStub(Remote::new(dispatch))
    }
}

#[async_trait]
impl ExecStub for RemoteStub {
    async fn answer(&self, command: &str, o: &ExecOptions) -> Result<Value> {
        self.0.send(json!({ "command": command, "options": o.to_json() })).await
    }
}

/// `{ op: 'run', id, request }`, `{ op: 'abort', id }` and `{ op: 'close' }`.
pub struct RemoteSandbox(Remote);

impl RemoteSandbox {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        RemoteSandbox(Remote::new(dispatch))
    }
}

#[async_trait]
impl SandboxAdapter for RemoteSandbox {
    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        let id = self.0.next_id();
        let v = self.0.op_cancellable("run", id, json!({ "request": req.to_json() }), cancel.as_ref()).await?;
        ExecResult::from_json(&v)
    }
    async fn close(&self) -> Result<()> {
        self.0.op("close", json!({})).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::Reply;
    use super::*;
    use crate::shell::OutputSink;

    #[derive(Default)]
    struct Collect(Mutex<Vec<(Stream, Vec<u8>)>>);
    impl OutputSink for Collect {
        fn output(&self, stream: Stream, chunk: &[u8]) {
            self.0.lock().unwrap().push((stream, chunk.to_vec()));
        }
    }

    #[tokio::test]
    async fn an_exec_answer_becomes_the_result_and_the_request_names_the_command() {
        let d = Scripted::new(|r| {
            assert_eq!(r["op"], "exec");
            ok(json!({ "stdout": "hi\n", "stderr": "", "exitCode": 0 }))
        });
        let shell = RemoteShell::new(d.clone(), Some("bash".into()));
        let r = shell.exec("echo hi", ExecOptions::default()).await.unwrap();
        assert_eq!((r.stdout.as_str(), r.exit_code), ("hi\n", Some(0)));
        assert_eq!(d.requests()[0]["command"], "echo hi");
        assert_eq!(d.requests()[0]["stream"], false);
        assert_eq!(shell.shell().as_deref(), Some("bash"));
    }

    #[tokio::test]
    async fn output_reported_under_a_runs_id_reaches_that_runs_sink_and_only_while_it_runs() {
        let collect = Arc::new(Collect::default());
        // The caller reports output during its run: a dispatch that calls back into the shell.
        struct Reporting(std::sync::Weak<RemoteShell>);
        #[async_trait]
        impl Dispatch for Reporting {
            async fn call(&self, r: Value) -> Result<Reply> {
                let id = r["id"].as_u64().unwrap();
                let shell = self.0.upgrade().unwrap();
                shell.output(id, "stderr", b"warn");
                shell.output(id, "nonsense", b"x");
                shell.output(id + 1000, "stdout", b"not mine");
                ok(json!({ "exitCode": 0 }))
            }
        }
        let reporting =
            Arc::new_cyclic(|w: &std::sync::Weak<RemoteShell>| RemoteShell::new(Arc::new(Reporting(w.clone())), None));
        let o = ExecOptions { on_output: Some(Sink(collect.clone())), ..Default::default() };
        reporting.exec("make", o).await.unwrap();
        assert_eq!(*collect.0.lock().unwrap(), vec![(Stream::Stderr, b"warn".to_vec())]);
        assert!(reporting.sinks.lock().unwrap().is_empty(), "the run's sink is forgotten when it ends");
    }

    #[tokio::test]
    async fn a_sandbox_run_sends_the_request_and_close_is_forwarded() {
        let d = Scripted::new(|r| if r["op"] == "run" { ok(json!({ "exitCode": 3 })) } else { ok(Value::Null) });
        let s = RemoteSandbox::new(d.clone());
        let req = SandboxRequest { command: "false".into(), cwd: "/workspace".into(), ..Default::default() };
        assert_eq!(s.run(req, None).await.unwrap().exit_code, Some(3));
        s.close().await.unwrap();
        let r = d.requests();
        assert_eq!(r[0]["request"]["command"], "false");
        assert_eq!(r[1], json!({ "op": "close" }));
    }

    /// A provider with `spawn`: the run goes on until it is aborted; writes are recorded.
    #[derive(Default)]
    struct Spawning {
        aborted: tokio::sync::Notify,
        requests: Mutex<Vec<Value>>,
    }

    #[async_trait]
    impl Dispatch for Spawning {
        async fn call(&self, r: Value) -> Result<Reply> {
            self.requests.lock().unwrap().push(r.clone());
            match r["op"].as_str() {
                Some("spawn") => {
                    self.aborted.notified().await;
                    ok(json!({ "exitCode": null, "signal": "SIGKILL" }))
                }
                Some("abort") => {
                    self.aborted.notify_one();
                    ok(Value::Null)
                }
                _ => ok(Value::Null),
            }
        }
    }

    #[tokio::test]
    async fn a_background_run_spawns_forwards_its_input_and_a_stop_kills_it() {
        let d = Arc::new(Spawning::default());
        let shell = RemoteShell::new(d.clone(), None).with_spawn(true);
        assert!(shell.runs_in_background() && shell.takes_input());
        let (input, tx) = crate::shell::Input::channel();
        let cancel = Cancel::new();
        let o = ExecOptions { input: Some(input), cancel: Some(cancel.clone()), ..Default::default() };
        tx.try_send(b"line\n".to_vec()).unwrap();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            c.cancel();
        });
        let r = shell.exec("serve", o).await.unwrap();
        assert!(r.aborted && !r.timed_out);
        let ops: Vec<Value> = d.requests.lock().unwrap().iter().map(|r| json!([r["op"], r.get("text")])).collect();
        assert_eq!(ops[0], json!(["spawn", null]));
        assert!(ops.contains(&json!(["write", "line\n"])), "{ops:?}");
        assert!(ops.contains(&json!(["abort", null])), "{ops:?}");
        // A provider without spawn cannot.
        assert!(!RemoteShell::new(d, None).runs_in_background());
    }

    #[tokio::test]
    async fn a_stub_gets_the_command_and_its_options() {
        let d = Scripted::new(|r| ok(json!({ "stdout": r["command"] })));
        let v = RemoteStub::new(d).answer("ls", &ExecOptions::default()).await.unwrap();
        assert_eq!(v, json!({ "stdout": "ls" }));
    }
}
