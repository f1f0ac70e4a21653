//! `KubernetesSandbox`: commands in a pod of a kubernetes-sigs/agent-sandbox warm pool, and
//! `KubernetesWorkspace` (`sandbox.workspace()`), the pod's files through the same execs.
//!
//! The first use claims a sandbox (`claim.rs`); each command is one `pods/exec` over WebSocket
//! (`exec.rs`) running corral's wrapper, which writes its pid line, exports the command's
//! variables, enters its directory, sets the `limits` as `ulimit` values, starts a watchdog for
//! the timeout inside the pod and becomes `sh -c <command>`. A timeout or abort kills the
//! command's process group through a second exec, by the pid line (closing the stream does not
//! stop a command on a real kubelet).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::lead::{Lead, LEAD_LINE};
use super::limits::Limits;
use super::{SandboxAdapter, SandboxRequest};
use crate::error::{Code, Error, Result};
use crate::options::Reader;
use crate::shell::exec::{Capture, MAX_CAPTURE_BYTES};
use crate::shell::{Cancel, ExecResult, Stream};

mod claim;
pub mod client;
mod exec;
mod workspace;

pub use client::Source;
pub use workspace::KubernetesWorkspace;

/// `shutdownAfterMs` when not given: an hour.
pub const DEFAULT_SHUTDOWN_AFTER_MS: u64 = 3_600_000;
/// `readyTimeoutMs` when not given: two minutes.
pub const DEFAULT_READY_TIMEOUT_MS: u64 = 120_000;
/// `workdir` when not given.
pub const DEFAULT_WORKDIR: &str = "/workspace";
/// How long a command may still take to end once its group was killed.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(5);
/// How long the kill's own exec may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(15);

/// `KubernetesSandbox(options)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubernetesSandboxOptions {
    pub warm_pool: String,
    pub namespace: Option<String>,
    pub source: Source,
    pub container: Option<String>,
    pub workdir: String,
    pub shutdown_after: Duration,
    pub ready_timeout: Duration,
    pub limits: Limits,
}

impl KubernetesSandboxOptions {
    /// `{ warmPool, namespace?, kubeconfig?, context?, container?, workdir?, shutdownAfterMs?,
    /// readyTimeoutMs?, limits? }`.
    pub fn from_options(v: &Value) -> Result<KubernetesSandboxOptions> {
        let r = Reader::new(
            "KubernetesSandbox",
            v,
            &[
                "warmPool",
                "namespace",
                "kubeconfig",
                "context",
                "container",
                "workdir",
                "shutdownAfterMs",
                "readyTimeoutMs",
                "limits",
            ],
        )?;
        // Object names go into request paths: DNS-1123 names only (a container's is a label).
        let name = |key: &str, max: usize| -> Result<Option<String>> {
            let v = r.string(key)?;
            if v.as_deref().is_some_and(|s| !is_dns_name(s, max)) {
                return Err(r.err(format!(
                    "{key} must be a Kubernetes object name (lower-case letters, digits, '-' and '.', at most {max})."
                )));
            }
            Ok(v)
        };
        let warm_pool =
            name("warmPool", 253)?.ok_or_else(|| r.err("warmPool (the SandboxWarmPool to claim from) is required."))?;
        let workdir = r.string("workdir")?.unwrap_or_else(|| DEFAULT_WORKDIR.to_string());
        if !workdir.starts_with('/') || workdir.chars().any(char::is_control) || workdir.split('/').any(|s| s == "..") {
            return Err(r.err("workdir must be an absolute path in the pod, without '..' or control characters."));
        }
        // One spelling: no empty or `.` segments, no trailing `/` (the root stays `/`).
        let segments: Vec<&str> = workdir.split('/').filter(|s| !s.is_empty() && *s != ".").collect();
        let workdir = format!("/{}", segments.join("/"));
        Ok(KubernetesSandboxOptions {
            namespace: name("namespace", 63)?,
            source: Source { kubeconfig: r.string("kubeconfig")?, context: r.string("context")? },
            container: name("container", 63)?,
            workdir,
            shutdown_after: Duration::from_millis(r.int(
                "shutdownAfterMs",
                DEFAULT_SHUTDOWN_AFTER_MS,
                1_000..=31_536_000_000,
            )?),
            ready_timeout: Duration::from_millis(r.int("readyTimeoutMs", DEFAULT_READY_TIMEOUT_MS, 1..=86_400_000)?),
            limits: Limits::from_option(r.get("limits"), "KubernetesSandbox limits")?,
            warm_pool,
        })
    }
}

/// Whether `s` is a DNS-1123 name of at most `max` characters: lower-case letters, digits, '-'
/// and '.', starting and ending with a letter or digit.
fn is_dns_name(s: &str, max: usize) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-' || c == b'.')
}

/// The longest a REST call to the API server may take (watches and execs excepted).
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A REST call, bounded by `CALL_TIMEOUT`.
pub(crate) async fn bounded<T>(what: &str, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(CALL_TIMEOUT, call).await.unwrap_or_else(|_| {
        Err(Error::new(
            Code::Timeout,
            format!(
                "KubernetesSandbox: the API server did not answer within {} s while {what}.",
                CALL_TIMEOUT.as_secs()
            ),
        ))
    })
}

/// The pod a sandbox claimed, and how to reach it.
#[derive(Clone)]
pub(crate) struct Pod {
    pub conn: client::Connection,
    pub name: String,
    pub container: Option<String>,
    claim: String,
}

impl Pod {
    /// Runs `argv` to its end: exit code, stdout, stderr (each at most `limit` bytes).
    pub(crate) async fn collect(
        &self,
        argv: Vec<String>,
        stdin: exec::Stdin,
        limit: usize,
    ) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        exec::collect(&self.conn, &self.name, self.container.as_deref(), argv, stdin, limit).await
    }
}

pub(crate) struct Shared {
    options: KubernetesSandboxOptions,
    connection: tokio::sync::OnceCell<client::Connection>,
    /// The claimed pod. Held while a claim is made, so `close()` waits for one in flight.
    pod: tokio::sync::Mutex<Option<Pod>>,
    /// When the claim's `shutdownTime` was last moved forward.
    extended: Mutex<Instant>,
    closed: AtomicBool,
}

impl Shared {
    async fn connection(&self) -> Result<&client::Connection> {
        self.connection
            .get_or_try_init(|| client::connect(&self.options.source, self.options.namespace.as_deref()))
            .await
    }

    /// The claimed pod: claimed on first use (a failed claim is tried again by the next call);
    /// its `shutdownTime` moved forward once a quarter of `shutdownAfterMs` went by. The claim is
    /// made on a task of its own: a caller that gives up (an abort) never leaves a claim that no
    /// one deletes.
    pub(crate) async fn pod(self: &Arc<Self>) -> Result<Pod> {
        let this = self.clone();
        let pod = tokio::spawn(async move { this.claimed().await })
            .await
            .map_err(|_| Error::new(Code::Io, "KubernetesSandbox: the claim was stopped."))??;
        let due = {
            let mut last = self.extended.lock().unwrap();
            let due = last.elapsed() >= self.options.shutdown_after / 4;
            if due {
                *last = Instant::now();
            }
            due
        };
        if due {
            // In the background: a command never waits on it; a failure is tried again a
            // quarter later.
            let (conn, name, after) = (pod.conn.clone(), pod.claim.clone(), self.options.shutdown_after);
            tokio::spawn(async move {
                let _ = bounded("moving the claim's shutdownTime", claim::extend(&conn, &name, after)).await;
            });
        }
        Ok(pod)
    }

    async fn claimed(&self) -> Result<Pod> {
        let mut slot = self.pod.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::config("KubernetesSandbox: the sandbox was closed."));
        }
        if let Some(pod) = &*slot {
            return Ok(pod.clone());
        }
        let conn = self.connection().await?;
        let spec = claim::ClaimSpec {
            pool: &self.options.warm_pool,
            shutdown_after: self.options.shutdown_after,
            ready_timeout: self.options.ready_timeout,
        };
        let claimed = claim::claim(conn, &spec).await?;
        let container = match &self.options.container {
            Some(c) => Some(c.clone()),
            None => match bounded("reading the pod", first_container(conn, &claimed.pod)).await {
                Ok(c) => c,
                Err(e) => {
                    let _ = claim::release(conn, &claimed.claim).await;
                    return Err(e);
                }
            },
        };
        *self.extended.lock().unwrap() = Instant::now();
        let pod = Pod { conn: conn.clone(), name: claimed.pod, container, claim: claimed.claim };
        *slot = Some(pod.clone());
        Ok(pod)
    }

    /// After an exec found `pod` gone (its claim expired or was deleted): the next call claims
    /// anew.
    pub(crate) async fn forget(&self, pod: &str) {
        let mut slot = self.pod.lock().await;
        if slot.as_ref().is_some_and(|p| p.name == pod) {
            *slot = None;
        }
    }

    /// An error from an exec in `pod`: one that says the pod is gone forgets it.
    pub(crate) async fn check(&self, pod: &Pod, e: Error) -> Error {
        if e.code == Code::NotFound {
            self.forget(&pod.name).await;
        }
        e
    }
}

/// The name of the pod's first container.
async fn first_container(conn: &client::Connection, pod: &str) -> Result<Option<String>> {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(conn.client.clone(), &conn.namespace);
    let p = pods.get(pod).await.map_err(|e| claim::api_error(conn, &format!("reading pod {pod}"), e))?;
    Ok(p.spec.and_then(|s| s.containers.into_iter().next()).map(|c| c.name))
}

/// `new KubernetesSandbox(options)`.
pub struct KubernetesSandbox {
    shared: Arc<Shared>,
}

impl KubernetesSandbox {
    /// Checks the options; nothing is sent to the cluster before the first use.
    pub fn new(options: KubernetesSandboxOptions) -> KubernetesSandbox {
        KubernetesSandbox {
            shared: Arc::new(Shared {
                options,
                connection: Default::default(),
                pod: tokio::sync::Mutex::new(None),
                extended: Mutex::new(Instant::now()),
                closed: AtomicBool::new(false),
            }),
        }
    }

    pub fn options(&self) -> &KubernetesSandboxOptions {
        &self.shared.options
    }

    /// `sandbox.workspace()`: the pod's `workdir` as an `FsProvider`.
    pub fn workspace(&self) -> KubernetesWorkspace {
        KubernetesWorkspace::new(self.shared.clone())
    }

    /// `prune()`: deletes the claims of this machine whose owner process no longer runs; how many.
    pub async fn prune(&self) -> Result<usize> {
        let conn = self.shared.connection().await?;
        claim::prune(conn).await
    }
}

/// The prefix of the wrapper's own variables; a command's variable may not start with it.
const OWN: &str = "__corral_";

/// The wrapper each command runs as: `sh -c WRAPPER sh <dir> <command> <timeout s> NAME=VALUE…`.
/// Its own variables carry a prefix no command variable may have, and its watchdog starts before
/// the command's variables are exported, so neither can be changed by them (`IFS` included).
fn wrapper(limits: &Limits) -> String {
    let mut ulimits = String::new();
    let mut set = |flags: &[&str], value: Option<u64>| {
        if let Some(v) = value {
            // dash names the process count -p where others say -u.
            let tries: Vec<String> = flags.iter().map(|f| format!("ulimit -{f} {v} 2>/dev/null")).collect();
            ulimits.push_str(&format!(
                "{{ {} || {{ echo 'corral: cannot set ulimit -{} {v}' >&2; exit 125; }}; }}; ",
                tries.join(" || "),
                flags[0]
            ));
        }
    };
    set(&["v"], limits.memory_bytes.map(|b| b.div_ceil(1024)));
    set(&["u", "p"], limits.pids);
    set(&["t"], limits.cpu_seconds);
    // sh counts file sizes in blocks of 512 bytes.
    set(&["f"], limits.file_size_bytes.map(|b| b.div_ceil(512)));
    set(&["n"], limits.open_files);
    format!(
        r#"{LEAD_LINE}; {OWN}d=$1; {OWN}c=$2; {OWN}t=$3; shift 3; if [ "${OWN}t" -gt 0 ]; then (sleep "${OWN}t"; kill -0 "$$" 2>/dev/null && kill -9 "-$$") </dev/null >/dev/null 2>&1 & fi; for {OWN}kv do export "${OWN}kv" || exit 125; done; cd -- "${OWN}d" || exit 126; {ulimits}exec sh -c "${OWN}c""#
    )
}

/// Whether `name` can be exported by sh.
fn is_shell_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn argv(limits: &Limits, req: &SandboxRequest) -> Result<Vec<String>> {
    // The pod's own watchdog fires a little after the client's timeout: it is the backstop for a
    // client that lost the connection.
    let timeout_s = if req.timeout_ms == 0 { 0 } else { req.timeout_ms.div_ceil(1000) + 2 };
    let mut argv = vec![
        "sh".into(),
        "-c".into(),
        wrapper(limits),
        "sh".into(),
        req.cwd.clone(),
        req.command.clone(),
        timeout_s.to_string(),
    ];
    for (name, value) in &req.env {
        if !is_shell_name(name) || name.starts_with(OWN) {
            return Err(Error::new(
                Code::InvalidArguments,
                format!("KubernetesSandbox: the variable name \"{name}\" cannot be set by sh in the pod."),
            ));
        }
        argv.push(format!("{name}={value}"));
    }
    Ok(argv)
}

#[async_trait]
impl SandboxAdapter for KubernetesSandbox {
    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        let cancel = cancel.unwrap_or_default();
        let argv = argv(&self.shared.options.limits, &req)?;
        let pod = tokio::select! {
            p = self.shared.pod() => p?,
            _ = cancel.cancelled() => return Ok(ExecResult { aborted: true, every_process_killed: true, ..Default::default() }),
        };
        // The command's time starts once its pod is there (the claim has readyTimeoutMs).
        let deadline =
            (req.timeout_ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(req.timeout_ms));
        let cap = req.capture_bytes.unwrap_or(MAX_CAPTURE_BYTES);
        let out = Arc::new(Mutex::new(Capture::new(cap)));
        let err = Arc::new(Mutex::new(Capture::new(cap)));
        let lead = Arc::new(Mutex::new(Lead::default()));
        let on_data: exec::OnData = {
            let (out, err, lead, sink) = (out.clone(), err.clone(), lead.clone(), req.on_output.clone());
            Arc::new(Mutex::new(move |stream: Stream, data: &[u8]| {
                super::lead::deliver(stream, data, (&out, &err), Some(&lead), sink.as_ref())
            }))
        };
        let stdin = match (&req.stdin, req.input.as_ref().and_then(|i| i.take())) {
            (Some(text), _) => exec::Stdin::Bytes(text.clone().into_bytes()),
            (None, Some(rx)) => exec::Stdin::Channel(rx),
            (None, None) => exec::Stdin::None,
        };
        let timer = || async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let mut result = ExecResult::default();
        // An API server that never answers the upgrade is not waited on past the timeout or an
        // abort (if the command started meanwhile, no pid line of it is known to kill by).
        let started = tokio::select! {
            s = exec::start(&pod.conn, &pod.name, pod.container.as_deref(), argv, stdin, on_data) => s,
            _ = timer() => { result.timed_out = true; return Ok(result) }
            _ = cancel.cancelled() => { result.aborted = true; return Ok(result) }
        };
        let mut running = match started {
            Ok(r) => r,
            Err(e) => return Err(self.shared.check(&pod, e).await),
        };
        let finished = tokio::select! {
            r = running.finish() => Some(r),
            _ = timer() => { result.timed_out = true; None }
            _ = cancel.cancelled() => { result.aborted = true; None }
        };
        match finished {
            Some(Ok(code)) => result.exit_code = Some(code),
            Some(Err(e)) => {
                // The connection ended before the command did, and a kubelet keeps it running:
                // it is killed by its pid line (best effort: the API server may be gone too).
                let lead_pid = lead.lock().unwrap().pid();
                if let Some(script) = lead_pid.and_then(super::lead::kill_group_script) {
                    let kill = pod.collect(vec!["sh".into(), "-c".into(), script], exec::Stdin::None, 64 * 1024);
                    let _ = tokio::time::timeout(KILL_TIMEOUT, kill).await;
                }
                return Err(e);
            }
            None => {
                // The pid line may still be on its way: kill once it is here, or once the exec
                // ended without it (then the wrapper never ran the command).
                let never = CancellationToken::new();
                let lead_pid = tokio::select! {
                    p = super::lead::wait(&lead, &never) => p,
                    _ = running.finish() => lead.lock().unwrap().pid(),
                };
                if let Some(script) = lead_pid.and_then(super::lead::kill_group_script) {
                    let kill = pod.collect(vec!["sh".into(), "-c".into(), script], exec::Stdin::None, 64 * 1024);
                    let _ = tokio::time::timeout(KILL_TIMEOUT, kill).await;
                }
                let _ = tokio::time::timeout(DRAIN_AFTER_KILL, running.finish()).await;
                result.signal = Some("SIGKILL".to_string());
            }
        }
        drop(running);
        result.stdout = out.lock().unwrap().text();
        result.stderr = err.lock().unwrap().text();
        Ok(result)
    }

    /// Deletes the claim (the sandbox and its pod go with it); later calls are refused.
    async fn close(&self) -> Result<()> {
        self.shared.closed.store(true, Ordering::SeqCst);
        // Waits for a claim in flight, which then sees `closed` no more.
        let pod = self.shared.pod.lock().await.take();
        match pod {
            Some(pod) => claim::release(&pod.conn, &pod.claim).await,
            None => Ok(()),
        }
    }

    fn takes_input(&self) -> bool {
        true
    }

    fn runs_in_background(&self) -> bool {
        true
    }
}

/// The variables of a request in the order they are exported (for tests).
#[cfg(test)]
fn exported(argv: &[String]) -> std::collections::BTreeMap<String, String> {
    argv[7..].iter().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[test]
    fn options_need_a_warm_pool_and_take_the_documented_defaults() {
        let e = KubernetesSandboxOptions::from_options(&json!({})).unwrap_err();
        assert_eq!(e.code, Code::Configuration);
        assert!(e.message.contains("warmPool"), "{}", e.message);
        let o = KubernetesSandboxOptions::from_options(&json!({ "warmPool": "python" })).unwrap();
        assert_eq!(o.workdir, "/workspace");
        assert_eq!(o.shutdown_after, Duration::from_millis(3_600_000));
        assert_eq!(o.ready_timeout, Duration::from_millis(120_000));
        assert_eq!(o.namespace, None);
        let e = KubernetesSandboxOptions::from_options(&json!({ "warmPool": "p", "workdir": "rel" })).unwrap_err();
        assert!(e.message.contains("workdir"), "{}", e.message);
        let e = KubernetesSandboxOptions::from_options(&json!({ "warmPool": "p", "wormPool": 1 })).unwrap_err();
        assert_eq!(e.code, Code::Configuration);
    }

    #[test]
    fn object_names_are_dns_names_and_workdir_has_one_spelling() {
        for bad in ["Pool", "a/b", "a?b", "..", "-a", "a-", "", "a#b"] {
            let e = KubernetesSandboxOptions::from_options(&json!({ "warmPool": bad })).unwrap_err();
            assert!(e.message.contains("warmPool must be a Kubernetes object name"), "{bad}: {}", e.message);
        }
        assert!(KubernetesSandboxOptions::from_options(&json!({ "warmPool": "p", "namespace": "Agents" })).is_err());
        assert!(KubernetesSandboxOptions::from_options(&json!({ "warmPool": "python-3.12" })).is_ok());
        let workdir = |w: &str| {
            KubernetesSandboxOptions::from_options(&json!({ "warmPool": "p", "workdir": w })).map(|o| o.workdir)
        };
        assert_eq!(workdir("//").unwrap(), "/");
        assert_eq!(workdir("/a//b/./").unwrap(), "/a/b");
        assert!(workdir("/a\nb").is_err());
    }

    #[test]
    fn the_command_its_directory_and_variables_are_arguments_never_script_text() {
        let req = SandboxRequest {
            command: "echo \"$A\"; rm -rf '/'".into(),
            cwd: "/workspace/a b".into(),
            env: BTreeMap::from([("A".into(), "x'; reboot #".into())]),
            timeout_ms: 1500,
            ..Default::default()
        };
        let limits = Limits { cpu_seconds: Some(5), file_size_bytes: Some(1000), ..Default::default() };
        let a = argv(&limits, &req).unwrap();
        assert_eq!(&a[..2], ["sh", "-c"]);
        assert!(!a[2].contains("rm -rf") && !a[2].contains("reboot") && !a[2].contains("a b"));
        assert!(a[2].contains("ulimit -t 5 ") && a[2].contains("ulimit -f 2 "), "{}", a[2]);
        assert_eq!(a[4..7], ["/workspace/a b".to_string(), req.command.clone(), "4".to_string()]);
        assert_eq!(exported(&a), req.env);
        let bad = SandboxRequest { env: BTreeMap::from([("A-B".into(), "x".into())]), ..req };
        assert_eq!(argv(&limits, &bad).unwrap_err().code, Code::InvalidArguments);
    }
}
