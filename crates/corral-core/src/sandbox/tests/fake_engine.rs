//! A fake Docker Engine API server on a unix socket, recording every call, and the cases the
//! local engine (20.10, no bridge) cannot show: egress on Engine >= 25.0.5, Docker Desktop,
//! rootless, a remote daemon, a reused network that is or is not internal.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

use super::{arc, env, RecordingBroker};
use crate::error::Code;
use crate::sandbox::*;
use crate::shell::{Cancel, ShellProvider};

#[derive(Debug, Clone)]
pub(super) struct Config {
    pub api_version: String,
    pub version: String,
    pub operating_system: String,
    pub rootless: bool,
    /// name → internal
    pub networks: Vec<(String, bool)>,
    pub exit_code: i64,
    /// What `GET /containers/{id}/json` says in `State.OOMKilled`.
    pub oom_killed: bool,
    /// An image without `sh`: start fails as the Engine says it.
    pub no_shell: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            api_version: "1.47".into(),
            version: "28.0.4".into(),
            operating_system: "Ubuntu 24.04.2 LTS".into(),
            rootless: false,
            networks: Vec::new(),
            exit_code: 0,
            oom_killed: false,
            no_shell: false,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct Call {
    pub method: String,
    /// With its version prefix and query.
    pub path: String,
    pub body: Value,
}

#[derive(Debug)]
struct Net {
    id: String,
    name: String,
    body: Value,
}

struct State {
    config: Config,
    calls: Vec<Call>,
    networks: Vec<Net>,
    containers: usize,
}

pub(super) struct FakeEngine {
    _dir: tempfile::TempDir,
    pub socket: PathBuf,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn reply(status: u16, body: Value) -> Response<Full<Bytes>> {
    let bytes = if body.is_null() { Bytes::new() } else { Bytes::from(body.to_string()) };
    Response::builder().status(status).header("content-type", "application/json").body(Full::new(bytes)).unwrap()
}

fn frames(parts: &[(u8, &[u8])]) -> Bytes {
    let mut v = Vec::new();
    for (stream, p) in parts {
        v.extend_from_slice(&[*stream, 0, 0, 0]);
        v.extend_from_slice(&(p.len() as u32).to_be_bytes());
        v.extend_from_slice(p);
    }
    Bytes::from(v)
}

fn ipam(n: usize) -> Value {
    json!({ "Driver": "default", "Config": [{ "Subnet": format!("172.{}.0.0/16", 30 + n), "Gateway": format!("172.{}.0.1", 30 + n) }] })
}

fn handle(state: &Mutex<State>, method: &Method, full_path: &str, body: Value) -> Response<Full<Bytes>> {
    let mut s = state.lock().unwrap();
    s.calls.push(Call { method: method.to_string(), path: full_path.to_string(), body: body.clone() });
    let (path, _query) = full_path.split_once('?').unwrap_or((full_path, ""));
    if path == "/_ping" {
        return Response::builder()
            .status(200)
            .header("Api-Version", s.config.api_version.clone())
            .body(Full::new(Bytes::from_static(b"OK")))
            .unwrap();
    }
    // Versioned paths only, like the real daemon for everything but /_ping.
    let Some(rest) = path.strip_prefix("/v") else { return reply(404, json!({"message": "page not found"})) };
    let Some((_, path)) = rest.split_once('/') else { return reply(404, json!({"message": "page not found"})) };
    let path = format!("/{path}");
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method.as_str(), seg.as_slice()) {
        ("GET", ["version"]) => reply(200, json!({ "Version": s.config.version, "ApiVersion": s.config.api_version })),
        ("GET", ["info"]) => {
            let mut sec = vec!["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"];
            if s.config.rootless {
                sec.push("name=rootless");
            }
            reply(200, json!({ "OperatingSystem": s.config.operating_system, "SecurityOptions": sec }))
        }
        ("GET", ["networks", name]) => match s.networks.iter().find(|n| n.name == *name || n.id == *name) {
            Some(n) => reply(200, n.body.clone()),
            None => reply(404, json!({ "message": format!("network {name} not found") })),
        },
        ("POST", ["networks", "create"]) => {
            let name = body["Name"].as_str().unwrap_or_default().to_string();
            if s.networks.iter().any(|n| n.name == name) {
                return reply(409, json!({ "message": format!("network with name {name} already exists") }));
            }
            let id = format!("net{}", s.networks.len() + 1);
            let internal = body["Internal"].as_bool().unwrap_or(false);
            let ip = ipam(s.networks.len());
            let body = json!({ "Name": name, "Id": id, "Driver": "bridge", "Internal": internal,
                "EnableIPv6": body["EnableIPv6"], "Labels": body["Labels"], "IPAM": ip });
            s.networks.push(Net { id: id.clone(), name, body });
            reply(201, json!({ "Id": id, "Warning": "" }))
        }
        ("DELETE", ["networks", id]) => {
            let before = s.networks.len();
            s.networks.retain(|n| n.id != *id && n.name != *id);
            if s.networks.len() < before {
                reply(204, Value::Null)
            } else {
                reply(404, json!({ "message": "no such network" }))
            }
        }
        ("POST", ["containers", "create"]) => {
            s.containers += 1;
            reply(201, json!({ "Id": format!("c{}", s.containers), "Warnings": [] }))
        }
        ("POST", ["containers", _, "attach"]) => Response::builder()
            .status(200)
            .header("content-type", "application/vnd.docker.raw-stream")
            .body(Full::new(frames(&[(1, b"fake-"), (2, b"warn\n"), (1, b"out\n")])))
            .unwrap(),
        ("POST", ["containers", _, "start"]) if s.config.no_shell => reply(
            400,
            json!({ "message": "OCI runtime create failed: container_linux.go:380: starting container process caused: exec: \"sh\": executable file not found in $PATH: unknown" }),
        ),
        ("POST", ["containers", _, "start"]) | ("POST", ["containers", _, "kill"]) => reply(204, Value::Null),
        ("POST", ["containers", _, "wait"]) => reply(200, json!({ "StatusCode": s.config.exit_code, "Error": null })),
        ("GET", ["containers", id, "json"]) => reply(
            200,
            json!({ "Id": id, "State": { "Status": "exited", "OOMKilled": s.config.oom_killed, "ExitCode": s.config.exit_code } }),
        ),
        ("DELETE", ["containers", _]) => reply(204, Value::Null),
        _ => reply(404, json!({ "message": format!("fake engine: no route for {method} {path}") })),
    }
}

impl FakeEngine {
    pub async fn start(config: Config) -> FakeEngine {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("docker.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let networks = config
            .networks
            .iter()
            .enumerate()
            .map(|(i, (name, internal))| Net {
                id: format!("existing{i}"),
                name: name.clone(),
                body: json!({ "Name": name, "Id": format!("existing{i}"), "Driver": "bridge", "Internal": internal, "IPAM": ipam(10 + i) }),
            })
            .collect();
        let state = Arc::new(Mutex::new(State { config, calls: Vec::new(), networks, containers: 0 }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { break };
                let st = st.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let st = st.clone();
                        async move {
                            let method = req.method().clone();
                            let path = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                            let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            Ok::<_, Infallible>(handle(&st, &method, &path, body))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        FakeEngine { _dir: dir, socket, state, task }
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The calls whose unversioned path starts with `prefix`.
    pub fn calls_to(&self, method: &str, prefix: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method && unversioned(&c.path).starts_with(prefix)).collect()
    }

    pub fn network_names(&self) -> Vec<String> {
        self.state.lock().unwrap().networks.iter().map(|n| n.name.clone()).collect()
    }
}

fn unversioned(path: &str) -> &str {
    match path.strip_prefix("/v") {
        Some(rest) => rest.find('/').map(|i| &rest[i..]).unwrap_or(path),
        None => path,
    }
}

fn sandbox(
    engine: &FakeEngine,
    network: Network,
    broker: Option<Arc<RecordingBroker>>,
    name: Option<&str>,
) -> SubprocessSandbox {
    SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "node:20-alpine".into(),
        network,
        broker: broker.map(|b| b as Arc<dyn EgressBroker>),
        network_name: name.map(str::to_string),
        docker_host: Some(engine.host()),
        limits: Default::default(),
        reuse: Default::default(),
        tls: None,
        protect: Vec::new(),
        overlay: false,
    })
    .unwrap()
}

fn request(cwd: &str, command: &str) -> SandboxRequest {
    SandboxRequest {
        command: command.into(),
        cwd: cwd.into(),
        env: env(&[("GIVEN", "yes"), ("HTTP_PROXY", "http://mine.example:1"), ("NO_PROXY", "*")]),
        timeout_ms: 10_000,
        stdin: None,
        mount: None,
        on_output: None,
        capture_bytes: None,
        input: None,
        record: None,
        changes_dir: None,
        pending: None,
    }
}

fn env_of(create: &Call) -> BTreeMap<String, String> {
    create.body["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let (k, v) = v.as_str().unwrap().split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect()
}

#[tokio::test]
async fn egress_on_a_new_engine_creates_an_internal_network_and_routes_through_the_broker() {
    let engine = FakeEngine::start(Config::default()).await;
    let broker = arc(RecordingBroker::default());
    let sb = sandbox(
        &engine,
        Network::Allow(vec!["API.github.com".into(), "*.npmjs.org".into()]),
        Some(broker.clone()),
        None,
    );
    assert_eq!(sb.network(), &Network::Allow(vec!["api.github.com".into(), "*.npmjs.org".into()]));
    assert!(sb.network_name().starts_with("lousho-egress-"), "{}", sb.network_name());

    let r = sb.run(request("/tmp", "npm ci"), None).await.unwrap();
    assert_eq!((r.stdout.as_str(), r.stderr.as_str(), r.exit_code), ("fake-out\n", "warn\n", Some(0)));
    let r = sb.run(request("/tmp", "npm test"), None).await.unwrap();
    assert_eq!(r.exit_code, Some(0));

    // API negotiated: the daemon offers 1.47, the client speaks at most 1.43.
    assert!(
        engine.calls().iter().all(|c| c.path == "/_ping" || c.path.starts_with("/v1.43/")),
        "{:#?}",
        engine.calls()
    );
    assert_eq!(engine.calls_to("GET", "/_ping").len(), 1);

    // One internal network, made once with the documented options and label.
    let made = engine.calls_to("POST", "/networks/create");
    assert_eq!(made.len(), 1, "{made:#?}");
    let b = &made[0].body;
    assert_eq!(b["Name"], json!(sb.network_name()));
    assert_eq!(b["Internal"], json!(true));
    assert_eq!(b["EnableIPv6"], json!(false));
    assert_eq!(b["Driver"], json!("bridge"));
    assert_eq!(b["Labels"], json!({ "com.lousho.sandbox": "egress" }));

    // The broker listens once, on the gateway, serving only the subnet, with the allow list.
    assert_eq!(
        broker.listen_calls(),
        vec![(
            "172.30.0.1".to_string(),
            "172.30.0.0/16".to_string(),
            vec!["api.github.com".to_string(), "*.npmjs.org".to_string()]
        )]
    );

    // Containers join that network with the proxy variables merged over the request's env.
    let creates = engine.calls_to("POST", "/containers/create");
    assert_eq!(creates.len(), 2);
    let c = &creates[0].body;
    assert_eq!(c["HostConfig"]["NetworkMode"], json!(sb.network_name()));
    assert_eq!(c["HostConfig"]["AutoRemove"], json!(false));
    assert_eq!(c["HostConfig"]["Mounts"], json!([{ "Type": "bind", "Source": "/tmp", "Target": "/tmp" }]));
    assert_eq!(c["WorkingDir"], json!("/tmp"));
    assert_eq!(c["Image"], json!("node:20-alpine"));
    assert_eq!(c["Entrypoint"], json!(["sh", "-c"]));
    assert_eq!(c["Cmd"], json!(["npm ci"]));
    assert_eq!(c["OpenStdin"], json!(false));
    let e = env_of(&creates[0]);
    let proxy = "http://172.30.0.1:3128";
    assert_eq!(
        e,
        env(&[
            ("GIVEN", "yes"),
            ("HTTP_PROXY", proxy),
            ("HTTPS_PROXY", proxy),
            ("http_proxy", proxy),
            ("https_proxy", proxy),
            ("NO_PROXY", "172.30.0.1"),
            ("no_proxy", "172.30.0.1"),
        ])
    );
    // Every container is removed after its run.
    assert_eq!(engine.calls_to("DELETE", "/containers/").len(), 2);
    assert!(engine.calls_to("DELETE", "/containers/c1").iter().all(|c| c.path.contains("force=1")));

    // close(): the listener stops and the network this sandbox made is removed.
    sb.close().await.unwrap();
    assert_eq!(broker.unlisten_calls(), vec![proxy.to_string()]);
    assert_eq!(engine.calls_to("DELETE", "/networks/").len(), 1);
    assert!(engine.network_names().is_empty());
    // A second close() has nothing left to do.
    sb.close().await.unwrap();
    assert_eq!(broker.unlisten_calls().len(), 1);
}

#[tokio::test]
async fn an_existing_internal_network_is_reused_and_kept() {
    let engine =
        FakeEngine::start(Config { networks: vec![("agents-egress".into(), true)], ..Config::default() }).await;
    let broker = arc(RecordingBroker::default());
    let sb = sandbox(&engine, Network::Allow(vec!["example.com".into()]), Some(broker.clone()), Some("agents-egress"));
    let r = sb.run(request("/tmp", "true"), None).await.unwrap();
    assert_eq!(r.exit_code, Some(0));
    assert!(engine.calls_to("POST", "/networks/create").is_empty());
    assert_eq!(broker.listen_calls(), vec![("172.40.0.1".into(), "172.40.0.0/16".into(), vec!["example.com".into()])]);
    let creates = engine.calls_to("POST", "/containers/create");
    assert_eq!(creates[0].body["HostConfig"]["NetworkMode"], json!("agents-egress"));
    sb.close().await.unwrap();
    assert_eq!(broker.unlisten_calls(), vec!["http://172.40.0.1:3128".to_string()]);
    // Not made here, so not removed here.
    assert!(engine.calls_to("DELETE", "/networks/").is_empty());
    assert_eq!(engine.network_names(), vec!["agents-egress".to_string()]);
}

#[tokio::test]
async fn egress_is_refused_where_it_cannot_be_enforced_and_no_container_starts() {
    let cases: Vec<(&str, Config, Option<&str>, Option<&str>)> = vec![
        ("Docker Desktop", Config { operating_system: "Docker Desktop".into(), ..Config::default() }, None, None),
        ("rootless", Config { rootless: true, ..Config::default() }, None, None),
        (
            "Engine 25.0.4",
            Config { version: "25.0.4".into(), api_version: "1.44".into(), ..Config::default() },
            None,
            None,
        ),
        (
            "Engine 20.10",
            Config { version: "20.10.24+dfsg1".into(), api_version: "1.41".into(), ..Config::default() },
            None,
            None,
        ),
        ("unknown version", Config { version: "dev".into(), ..Config::default() }, None, None),
        (
            "a reused network that is not internal",
            Config { networks: vec![("shared".into(), false)], ..Config::default() },
            Some("shared"),
            None,
        ),
        ("a remote daemon", Config::default(), None, Some("tcp://127.0.0.1:2375")),
        ("a daemon over ssh", Config::default(), None, Some("ssh://me@build-box")),
    ];
    for (what, config, name, remote) in cases {
        let engine = FakeEngine::start(config).await;
        let broker = arc(RecordingBroker::default());
        let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
            image: "img".into(),
            network: Network::Allow(vec!["example.com".into()]),
            broker: Some(broker.clone() as Arc<dyn EgressBroker>),
            network_name: name.map(str::to_string),
            docker_host: Some(remote.map(str::to_string).unwrap_or_else(|| engine.host())),
            limits: Default::default(),
            reuse: Default::default(),
            tls: None,
            protect: Vec::new(),
            overlay: false,
        })
        .unwrap();
        for _ in 0..2 {
            let e = sb.run(request("/tmp", "true"), None).await.unwrap_err();
            assert_eq!(e.code, Code::EgressUnsupported, "{what}: {}", e.message);
            assert_eq!(e.code.as_str(), "LOUSHO_SANDBOX_EGRESS_UNSUPPORTED");
        }
        assert!(engine.calls_to("POST", "/containers/").is_empty(), "{what}: {:#?}", engine.calls());
        assert!(engine.calls_to("POST", "/networks/create").is_empty(), "{what}");
        assert!(broker.listen_calls().is_empty(), "{what}");
        if remote.is_some() {
            assert!(engine.calls().is_empty(), "{what}");
        }
        sb.close().await.unwrap();
        assert!(broker.unlisten_calls().is_empty(), "{what}");
    }
}

#[tokio::test]
async fn the_other_policies_need_no_network_setup() {
    let engine =
        FakeEngine::start(Config { api_version: "1.41".into(), version: "20.10.24".into(), ..Config::default() }).await;
    let broker = arc(RecordingBroker::default());
    for (network, broker, mode) in [
        (Network::None, None, "none"),
        (Network::Default, None, "default"),
        // No broker: fails closed.
        (Network::Allow(vec!["example.com".into()]), None, "none"),
        // A broker but no allow list: no egress either.
        (Network::None, Some(broker.clone()), "none"),
    ] {
        let sb = sandbox(&engine, network, broker, None);
        let before = engine.calls_to("POST", "/containers/create").len();
        sb.run(request("/tmp", "true"), None).await.unwrap();
        let creates = engine.calls_to("POST", "/containers/create");
        assert_eq!(creates.len(), before + 1);
        let c = creates.last().unwrap();
        assert_eq!(c.body["HostConfig"]["NetworkMode"], json!(mode));
        // The request env exactly, nothing added.
        assert_eq!(env_of(c), request("/tmp", "").env);
    }
    assert!(engine.calls().iter().all(|c| c.path == "/_ping" || c.path.starts_with("/v1.41/")));
    assert!(engine.calls_to("GET", "/version").is_empty() && engine.calls_to("GET", "/info").is_empty());
    assert!(engine.calls_to("GET", "/networks").is_empty() && engine.calls_to("POST", "/networks").is_empty());
    assert!(broker.listen_calls().is_empty());
}

#[tokio::test]
async fn exit_codes_stdin_and_an_already_cancelled_run() {
    let engine = FakeEngine::start(Config { exit_code: 3, ..Config::default() }).await;
    let sb = sandbox(&engine, Network::None, None, None);
    let mut req = request("/tmp", "cat");
    req.stdin = Some("input".into());
    let r = sb.run(req, None).await.unwrap();
    assert_eq!(r.exit_code, Some(3));
    let c = &engine.calls_to("POST", "/containers/create")[0];
    assert_eq!((c.body["OpenStdin"].clone(), c.body["StdinOnce"].clone()), (json!(true), json!(true)));
    assert!(engine.calls_to("POST", "/containers/c1/attach")[0].path.contains("stdin=1"));

    let n = engine.calls().len();
    let cancel = Cancel::new();
    cancel.cancel();
    let r = sb.run(request("/tmp", "true"), Some(cancel)).await.unwrap();
    assert!(r.aborted && r.exit_code.is_none());
    assert_eq!(engine.calls().len(), n, "an aborted signal starts no container");
}

#[tokio::test]
async fn a_missing_daemon_is_an_error_not_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "img".into(),
        docker_host: Some(format!("unix://{}/nothing.sock", dir.path().display())),
        ..Default::default()
    })
    .unwrap();
    let e = sb.run(request("/tmp", "true"), None).await.unwrap_err();
    assert_eq!(e.code, Code::Io);
    assert!(e.message.contains("Cannot connect to the Docker daemon"), "{}", e.message);
    // A tcp:// host where nothing listens (a port just closed on loopback) is the same error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "img".into(),
        docker_host: Some(format!("tcp://{closed}")),
        ..Default::default()
    })
    .unwrap();
    let e = sb.run(request("/tmp", "true"), None).await.unwrap_err();
    assert_eq!(e.code, Code::Io);
    assert!(e.message.contains("Cannot connect to the Docker daemon at tcp://127.0.0.1:"), "{}", e.message);
    // An ssh:// host is refused: this client speaks to a unix socket, a named pipe or TCP.
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "img".into(),
        docker_host: Some("ssh://me@build-box".into()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(sb.run(request("/tmp", "true"), None).await.unwrap_err().code, Code::Configuration);
}

#[test]
fn construction_checks_the_options() {
    let opts = |network: Network, name: Option<&str>, image: &str| SubprocessSandboxOptions {
        image: image.into(),
        network,
        network_name: name.map(str::to_string),
        docker_host: Some("unix:///var/run/docker.sock".into()),
        ..Default::default()
    };
    for bad in ["https://api.github.com", "api.github.com:443", "not a host", "*"] {
        let e =
            SubprocessSandbox::new(opts(Network::Allow(vec!["ok.com".into(), bad.into()]), None, "img")).unwrap_err();
        assert_eq!(e.code, Code::Configuration, "{bad}");
        assert!(e.message.contains(bad), "{}", e.message);
    }
    assert_eq!(
        SubprocessSandbox::new(opts(Network::None, Some("bad name"), "img")).unwrap_err().code,
        Code::Configuration
    );
    assert_eq!(SubprocessSandbox::new(opts(Network::None, Some("-x"), "img")).unwrap_err().code, Code::Configuration);
    assert_eq!(SubprocessSandbox::new(opts(Network::None, None, " ")).unwrap_err().code, Code::Configuration);
    let mut o = opts(Network::None, None, "img");
    o.docker_host = Some("docker.sock".into());
    assert_eq!(SubprocessSandbox::new(o).unwrap_err().code, Code::Configuration);
    let sb = SubprocessSandbox::new(opts(
        Network::Allow(vec!["Example.COM".into(), "*.Npmjs.org".into()]),
        Some("mine"),
        "img",
    ))
    .unwrap();
    assert_eq!(sb.network(), &Network::Allow(vec!["example.com".into(), "*.npmjs.org".into()]));
    assert_eq!(sb.network_name(), "mine");
    let a = SubprocessSandbox::new(opts(Network::None, None, "img")).unwrap();
    let b = SubprocessSandbox::new(opts(Network::None, None, "img")).unwrap();
    assert_ne!(a.network_name(), b.network_name());
}

#[tokio::test]
async fn sandbox_shell_over_the_fake_engine() {
    let engine = FakeEngine::start(Config::default()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let shell = SandboxShell::new(
        arc(sandbox(&engine, Network::None, None, None)),
        dir.path(),
        env(&[("A", "1")]),
        Default::default(),
    )
    .unwrap();
    let r = shell
        .exec(
            "pwd",
            crate::shell::ExecOptions { cwd: Some("sub".into()), timeout_ms: Some(5000), ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(r.stdout, "fake-out\n");
    let c = &engine.calls_to("POST", "/containers/create")[0];
    let sub = real.join("sub").to_str().unwrap().to_string();
    assert_eq!(c.body["WorkingDir"], json!(sub));
    // The container sees the whole of SandboxShell's cwd, at the same path, starting in sub/.
    let root = real.to_str().unwrap();
    assert_eq!(c.body["HostConfig"]["Mounts"][0]["Source"], json!(root));
    assert_eq!(c.body["HostConfig"]["Mounts"][0]["Target"], json!(root));
    assert_eq!(env_of(c), env(&[("A", "1")]));
}

#[tokio::test]
async fn limits_become_the_containers_memory_pids_and_ulimits_and_an_oom_kill_is_named_in_the_note() {
    let engine = FakeEngine::start(Config { exit_code: 137, oom_killed: true, ..Config::default() }).await;
    let limits = crate::sandbox::limits::Limits::from_option(
        Some(&json!({ "memoryBytes": 64 << 20, "pids": 50, "cpuSeconds": 30, "fileSizeBytes": 1 << 20, "openFiles": 256 })),
        "SubprocessSandbox limits",
    )
    .unwrap();
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "img".into(),
        docker_host: Some(engine.host()),
        limits,
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = sb.run(request(dir.path().to_str().unwrap(), "hog"), None).await.unwrap();
    assert_eq!(r.exit_code, Some(137));
    assert!(r.note.as_deref().is_some_and(|n| n.contains("memory")), "{r:?}");
    let c = &engine.calls_to("POST", "/containers/create")[0];
    let host = &c.body["HostConfig"];
    assert_eq!(host["Memory"], json!(64 << 20));
    assert_eq!(host["MemorySwap"], json!(64 << 20), "no swap beyond the limit");
    assert_eq!(host["PidsLimit"], json!(50));
    assert_eq!(
        host["Ulimits"],
        json!([
            { "Name": "cpu", "Soft": 30, "Hard": 31 },
            { "Name": "fsize", "Soft": 1 << 20, "Hard": 1 << 20 },
            { "Name": "nofile", "Soft": 256, "Hard": 256 }
        ])
    );
    // Without limits, no inspection and no note: the default pids cap only.
    let engine = FakeEngine::start(Config { exit_code: 137, oom_killed: true, ..Config::default() }).await;
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "img".into(),
        docker_host: Some(engine.host()),
        ..Default::default()
    })
    .unwrap();
    let r = sb.run(request(dir.path().to_str().unwrap(), "hog"), None).await.unwrap();
    assert_eq!(r.note, None);
    assert!(engine.calls_to("GET", "/containers/c1/json").is_empty());
    let c = &engine.calls_to("POST", "/containers/create")[0];
    assert!(c.body["HostConfig"].get("Memory").is_none());
}

#[tokio::test]
async fn an_image_without_sh_is_a_result_with_exit_code_127_and_a_message_and_no_container_is_left() {
    let engine = FakeEngine::start(Config { no_shell: true, ..Config::default() }).await;
    let sb = SubprocessSandbox::new(SubprocessSandboxOptions {
        image: "scratch-app".into(),
        docker_host: Some(engine.host()),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sb.run(request(dir.path().to_str().unwrap(), "ls"), None),
    )
    .await
    .expect("never a hang")
    .unwrap();
    assert_eq!(r.exit_code, Some(127), "{r:?}");
    assert!(r.stderr.contains("scratch-app has no sh"), "{r:?}");
    assert_eq!(engine.calls_to("DELETE", "/containers/c1").len(), 1, "the container is removed");
}
