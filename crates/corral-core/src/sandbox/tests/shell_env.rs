//! SandboxShell: the environment rules (NoopSandbox on the host, any other adapter), the cwd,
//! and the cancel reaching the adapter (or not being waited on).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{arc, env};
use crate::error::{Code, Result};
use crate::sandbox::*;
use crate::shell::exec::InheritEnv;
use crate::shell::{Cancel, ExecOptions, ExecResult, ShellProvider};

/// Records each request; answers `ok`, or waits (honouring the cancel or not).
#[derive(Default)]
struct RecordingAdapter {
    requests: Mutex<Vec<SandboxRequest>>,
    sleep: Option<Duration>,
    honour_cancel: bool,
    saw_cancel: Mutex<bool>,
}

#[async_trait]
impl SandboxAdapter for RecordingAdapter {
    async fn run(&self, req: SandboxRequest, cancel: Option<Cancel>) -> Result<ExecResult> {
        self.requests.lock().unwrap().push(req);
        if let Some(d) = self.sleep {
            let c = cancel.clone().unwrap_or_default();
            if self.honour_cancel {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = c.cancelled() => {
                        *self.saw_cancel.lock().unwrap() = true;
                        return Ok(ExecResult { aborted: true, stdout: "stopped\n".into(), ..Default::default() });
                    }
                }
            } else {
                tokio::time::sleep(d).await;
            }
        }
        Ok(ExecResult { stdout: "ok\n".into(), exit_code: Some(0), ..Default::default() })
    }
}

impl RecordingAdapter {
    fn last(&self) -> SandboxRequest {
        self.requests.lock().unwrap().last().cloned().unwrap()
    }
}

fn opts() -> ExecOptions {
    ExecOptions { timeout_ms: Some(20_000), ..Default::default() }
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

#[tokio::test]
async fn noop_sandbox_gets_the_host_base_plus_the_given_variables() {
    std::env::set_var("CORRAL_SBX_SECRET_N", "n-secret");
    std::env::set_var("CORRAL_SBX_LISTED_N", "listed");
    let dir = tempfile::tempdir().unwrap();
    let noop: Arc<dyn SandboxAdapter> = arc(NoopSandbox::new());
    let shell = SandboxShell::new(noop.clone(), dir.path(), env(&[("GIVEN", "yes")]), InheritEnv::None).unwrap();
    assert_eq!(shell.shell().as_deref(), Some("sh"));
    let mut o = opts();
    o.env.insert("CALL".into(), "c".into());
    let out = shell.exec("env", o).await.unwrap().stdout;
    let host_path = std::env::var("PATH").unwrap();
    assert!(lines(&out).contains(&format!("PATH={host_path}").as_str()), "{out}");
    if let Ok(home) = std::env::var("HOME") {
        assert!(lines(&out).contains(&format!("HOME={home}").as_str()), "{out}");
    }
    assert!(lines(&out).contains(&"GIVEN=yes") && lines(&out).contains(&"CALL=c"), "{out}");
    assert!(!out.contains("n-secret") && !out.contains("CORRAL_SBX_LISTED_N"), "{out}");

    let listed =
        SandboxShell::new(noop.clone(), dir.path(), env(&[]), InheritEnv::List(vec!["CORRAL_SBX_LISTED_N".into()]))
            .unwrap();
    let out = listed.exec("env", opts()).await.unwrap().stdout;
    assert!(lines(&out).contains(&"CORRAL_SBX_LISTED_N=listed") && !out.contains("n-secret"), "{out}");

    // inheritEnv: true restores the whole host environment, on the host only.
    let all = SandboxShell::new(noop, dir.path(), env(&[("CORRAL_SBX_SECRET_N", "mine")]), InheritEnv::All).unwrap();
    let out = all.exec("env", opts()).await.unwrap().stdout;
    assert!(lines(&out).contains(&"CORRAL_SBX_LISTED_N=listed"), "{out}");
    assert!(lines(&out).contains(&"CORRAL_SBX_SECRET_N=mine"), "the shell's env wins: {out}");
}

#[tokio::test]
async fn any_other_adapter_gets_only_the_given_variables() {
    std::env::set_var("CORRAL_SBX_SECRET_R", "r-secret");
    std::env::set_var("CORRAL_SBX_LISTED_R", "listed");
    let dir = tempfile::tempdir().unwrap();
    let adapter = arc(RecordingAdapter::default());
    let shell = SandboxShell::new(
        adapter.clone(),
        dir.path(),
        env(&[("GIVEN", "yes"), ("OVER", "shell")]),
        InheritEnv::List(vec!["CORRAL_SBX_LISTED_R".into(), "CORRAL_SBX_MISSING_R".into()]),
    )
    .unwrap();
    let mut o = opts();
    o.env.insert("OVER".into(), "call".into());
    let r = shell.exec("env", o).await.unwrap();
    assert_eq!(r.stdout, "ok\n");
    let req = adapter.last();
    assert_eq!(req.env, env(&[("GIVEN", "yes"), ("OVER", "call"), ("CORRAL_SBX_LISTED_R", "listed")]));
    assert_eq!(req.command, "env");
    assert_eq!(req.timeout_ms, 20_000);
    assert_eq!(req.stdin, None);
    assert_eq!(req.cwd, std::fs::canonicalize(dir.path()).unwrap().to_str().unwrap());

    // inheritEnv: true never gives a sandbox the host environment: not even PATH or HOME.
    let all = SandboxShell::new(adapter.clone(), dir.path(), env(&[("GIVEN", "yes")]), InheritEnv::All).unwrap();
    all.exec("env", ExecOptions { stdin: Some("in".into()), ..Default::default() }).await.unwrap();
    let req = adapter.last();
    assert_eq!(req.env, env(&[("GIVEN", "yes")]));
    assert_eq!(req.timeout_ms, DEFAULT_SANDBOX_TIMEOUT_MS);
    assert_eq!(req.stdin.as_deref(), Some("in"));
}

#[tokio::test]
async fn the_cwd_is_confined_to_the_shells_cwd() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let adapter = arc(RecordingAdapter::default());
    let shell = SandboxShell::new(adapter.clone(), dir.path(), env(&[]), InheritEnv::None).unwrap();
    assert_eq!(shell.cwd(), real);
    let mut o = opts();
    o.cwd = Some("a/./b/..".into());
    shell.exec("pwd", o).await.unwrap();
    assert_eq!(adapter.last().cwd, real.join("a").to_str().unwrap());
    for (cwd, code) in [
        ("..", Code::OutsideWorkspace),
        ("/etc", Code::OutsideWorkspace),
        ("out", Code::OutsideWorkspace),
        ("nope", Code::NotFound),
    ] {
        let mut o = opts();
        o.cwd = Some(cwd.into());
        assert_eq!(shell.exec("pwd", o).await.unwrap_err().code, code, "{cwd}");
    }
    assert_eq!(adapter.requests.lock().unwrap().len(), 1);
    std::fs::write(dir.path().join("file"), "").unwrap();
    for bad in ["relative/dir".to_string(), dir.path().join("file").display().to_string()] {
        assert_eq!(
            SandboxShell::new(adapter.clone(), &bad, env(&[]), InheritEnv::None).unwrap_err().code,
            Code::Configuration
        );
    }
    // A path that exists only inside the sandbox is taken as it is.
    let remote = SandboxShell::new(adapter.clone(), dir.path().join("missing"), env(&[]), InheritEnv::None).unwrap();
    assert_eq!(remote.cwd(), dir.path().join("missing"));
}

#[tokio::test]
async fn the_cancel_reaches_the_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let adapter =
        arc(RecordingAdapter { sleep: Some(Duration::from_secs(30)), honour_cancel: true, ..Default::default() });
    let shell = SandboxShell::new(adapter.clone(), dir.path(), env(&[]), InheritEnv::None).unwrap();
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let start = Instant::now();
    let r = shell.exec("sleep 30", ExecOptions { cancel: Some(cancel), ..opts() }).await.unwrap();
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(r.aborted);
    assert_eq!(r.stdout, "stopped\n", "the adapter's own result is kept");
    assert!(*adapter.saw_cancel.lock().unwrap());

    // An already-cancelled token reaches no adapter at all.
    let cancel = Cancel::new();
    cancel.cancel();
    let r = shell.exec("true", ExecOptions { cancel: Some(cancel), ..opts() }).await.unwrap();
    assert!(r.aborted);
    assert_eq!(adapter.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_adapter_that_ignores_the_cancel_is_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let adapter =
        arc(RecordingAdapter { sleep: Some(Duration::from_secs(30)), honour_cancel: false, ..Default::default() });
    let shell = SandboxShell::new(adapter.clone(), dir.path(), env(&[]), InheritEnv::None).unwrap();
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let start = Instant::now();
    let r = shell.exec("sleep 30", ExecOptions { cancel: Some(cancel), ..opts() }).await.unwrap();
    let took = start.elapsed();
    assert!(r.aborted && r.exit_code.is_none(), "{r:?}");
    assert!(took < Duration::from_millis(1600), "{took:?}");
}

#[tokio::test]
async fn noop_sandbox_timeout_and_cancel_kill_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let shell = SandboxShell::new(arc(NoopSandbox::new()), dir.path(), env(&[]), InheritEnv::None).unwrap();
    let start = Instant::now();
    let r = shell.exec("echo a; sleep 30", ExecOptions { timeout_ms: Some(300), ..Default::default() }).await.unwrap();
    assert!(r.timed_out && r.stdout == "a\n" && r.signal.as_deref() == Some("SIGKILL"), "{r:?}");
    let cancel = Cancel::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let r = shell.exec("sleep 30", ExecOptions { cancel: Some(cancel), ..opts() }).await.unwrap();
    assert!(r.aborted && !r.timed_out, "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(5));
    let r =
        shell.exec("printf %s \"$(cat)\"; exit 4", ExecOptions { stdin: Some("fed".into()), ..opts() }).await.unwrap();
    assert_eq!((r.stdout.as_str(), r.exit_code), ("fed", Some(4)));
}
