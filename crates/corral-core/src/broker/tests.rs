//! The broker through its public API, all on loopback: local upstreams (plain HTTP, HTTPS with
//! a test CA, raw TCP) record what reaches them.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;

const SECRET: &str = "s3cr3t-T0KEN-never-leak";
const TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Local upstreams

#[derive(Clone, Debug)]
struct Seen {
    method: String,
    target: String,
    headers: HeaderMap,
    body: Bytes,
}

/// A hyper server on 127.0.0.1 that records every request and answers
/// `target=<request target> body=<request body>`, with hop-by-hop headers of its own.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    accepts: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    fn port(&self) -> u16 {
        self.addr.port()
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
    /// TCP connections accepted, whether or not a request followed.
    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

/// A loopback listener with a backlog large enough for the load test.
fn listen_local() -> TcpListener {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket.listen(4096).unwrap()
}

async fn upstream(tls: Option<TlsAcceptor>) -> Upstream {
    let listener = listen_local();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let accepts = Arc::new(AtomicUsize::new(0));
    let (seen2, accepts2) = (seen.clone(), accepts.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            accepts2.fetch_add(1, Ordering::SeqCst);
            let (seen, tls) = (seen2.clone(), tls.clone());
            tokio::spawn(async move {
                match tls {
                    Some(acceptor) => {
                        if let Ok(stream) = acceptor.accept(stream).await {
                            serve_recording(stream, seen).await
                        }
                    }
                    None => serve_recording(stream, seen).await,
                }
            });
        }
    });
    Upstream { addr, seen, accepts, task }
}

async fn serve_recording<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: I, seen: Arc<Mutex<Vec<Seen>>>) {
    let service = service_fn(move |req: Request<Incoming>| {
        let seen = seen.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            let target = parts.uri.to_string();
            let text = format!("target={target} body={}", String::from_utf8_lossy(&body));
            let close = parts.headers.contains_key("x-close");
            seen.lock().unwrap().push(Seen { method: parts.method.to_string(), target, headers: parts.headers, body });
            let response = Response::builder()
                .header("x-upstream", "yes")
                .header("connection", if close { "close" } else { "x-resp-hop" })
                .header("x-resp-hop", "1")
                .header("keep-alive", "timeout=5")
                .body(Full::new(Bytes::from(text)))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(io), service).await;
}

/// A TCP server that echoes every byte back; counts connections.
async fn echo_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepts = Arc::new(AtomicUsize::new(0));
    let count = accepts.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (addr, accepts)
}

/// An upstream that reads a request head and then misbehaves according to its path:
/// `/cut-head` stops inside the response head, `/cut-body` inside a 100-byte body,
/// `/garbage` answers something that is not HTTP.
async fn dying_upstream() -> SocketAddr {
    raw_upstream(|head| {
        let answer: &[u8] = if head.contains("/cut-head") {
            b"HTTP/1.1 200 OK\r\nContent-Le"
        } else if head.contains("/cut-body") {
            b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789"
        } else {
            b"garbage\r\n\r\n"
        };
        vec![answer.to_vec()]
    })
    .await
}

/// A TCP server on 127.0.0.1 that reads each request head and writes what `answer` makes of it,
/// part by part (each flushed), then closes the connection.
async fn raw_upstream(answer: impl Fn(&str) -> Vec<Vec<u8>> + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                for part in answer(&head) {
                    let _ = stream.write_all(&part).await;
                    let _ = stream.flush().await;
                }
                // Dropped here: the connection closes.
            });
        }
    });
    addr
}

struct TestCa {
    pem: String,
    der: CertificateDer<'static>,
    acceptor: TlsAcceptor,
}

/// A CA made for the test and a server certificate it signed for `localhost` and 127.0.0.1.
fn test_ca() -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "corral broker test CA");
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    leaf_params.distinguished_name.push(DnType::CommonName, "localhost");
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
    TestCa { pem: ca_cert.pem(), der: ca_cert.der().clone(), acceptor: TlsAcceptor::from(Arc::new(server)) }
}

// ---------------------------------------------------------------------------------------------
// Header sources

#[derive(Default)]
struct Counter(AtomicUsize);

#[async_trait]
impl HeaderSource for Counter {
    async fn value(&self) -> Result<String> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::task::yield_now().await;
        Ok(format!("call-{n}"))
    }
}

struct Failing;

#[async_trait]
impl HeaderSource for Failing {
    async fn value(&self) -> Result<String> {
        Err(Error::new(Code::Io, format!("the vault is locked, token was {SECRET}")))
    }
}

struct Newline;

#[async_trait]
impl HeaderSource for Newline {
    async fn value(&self) -> Result<String> {
        Ok(format!("Bearer {SECRET}\r\nX-Injected: yes"))
    }
}

// ---------------------------------------------------------------------------------------------
// Clients

type Rules = Vec<(String, RuleHeaders)>;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn auth_rule(host: &str) -> Rules {
    vec![(host.to_string(), vec![("authorization".to_string(), FixedHeader::arc(format!("Bearer {SECRET}")))])]
}

fn get(uri: &str) -> Request<Full<Bytes>> {
    Request::get(uri).header("host", "client-host").body(Full::default()).unwrap()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: std::result::Result<String, String>,
}

impl Answer {
    fn text(&self) -> &str {
        self.body.as_deref().expect("a complete body")
    }
}

/// Sends one request (absolute-form, origin-form or CONNECT, as its URI says) on `stream`.
async fn send_on<I: AsyncRead + AsyncWrite + Unpin + Send + 'static>(io: I, req: Request<Full<Bytes>>) -> Answer {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await.unwrap();
    tokio::spawn(conn);
    let response = tokio::time::timeout(TIMEOUT, sender.send_request(req)).await.expect("answer in time").unwrap();
    let (parts, body) = response.into_parts();
    let body = match tokio::time::timeout(TIMEOUT, body.collect()).await.expect("body in time") {
        Ok(c) => Ok(String::from_utf8_lossy(&c.to_bytes()).into_owned()),
        Err(e) => Err(e.to_string()),
    };
    Answer { status: parts.status, headers: parts.headers, body }
}

async fn send(proxy: SocketAddr, req: Request<Full<Bytes>>) -> Answer {
    send_on(TcpStream::connect(proxy).await.unwrap(), req).await
}

/// Writes raw bytes, reads until the broker closes (or 5 s), returns what came back.
async fn raw(proxy: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let _ = stream.write_all(bytes).await;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&buf[..n]),
            _ => break,
        }
        // One response is all these tests want.
        if let Some(end) = find(&out, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&out[..end]).to_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)))
                .unwrap_or(0);
            if out.len() >= end + 4 + len {
                break;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads a request or response head byte by byte, so nothing after it is consumed.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(TIMEOUT, stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Opens a CONNECT tunnel through the broker; returns the stream and the broker's status line.
async fn connect_tunnel(proxy: SocketAddr, target: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    (stream, head)
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} leaks the secret: {text}");
    assert!(!text.contains("s3cr3t"), "{what} leaks part of the secret: {text}");
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn broker_start_rejects_bad_options() {
    let bad_configs: Vec<(&str, BrokerConfig)> = vec![
        ("URL as rule host", BrokerConfig { rules: auth_rule("https://api.github.com"), ..Default::default() }),
        ("port in rule host", BrokerConfig { rules: auth_rule("api.github.com:443"), ..Default::default() }),
        ("path in allow", BrokerConfig { allow: strings(&["registry.npmjs.org/pkg"]), ..Default::default() }),
        ("wildcard in the middle", BrokerConfig { allow: strings(&["a.*.com"]), ..Default::default() }),
        ("URL in allowPrivate", BrokerConfig { allow_private: strings(&["http://localhost"]), ..Default::default() }),
        ("bad listen host", BrokerConfig { host: Some("example.com".into()), ..Default::default() }),
        ("bad CA", BrokerConfig { extra_ca_pem: strings(&["not a certificate"]), ..Default::default() }),
        (
            "bad header name",
            BrokerConfig {
                rules: vec![("api.github.com".into(), vec![("bad header".into(), FixedHeader::arc("x"))])],
                ..Default::default()
            },
        ),
        (
            "reserved header",
            BrokerConfig {
                rules: vec![("api.github.com".into(), vec![("Host".into(), FixedHeader::arc("x"))])],
                ..Default::default()
            },
        ),
        (
            "duplicate rule",
            BrokerConfig {
                rules: [auth_rule("API.github.com"), auth_rule("api.github.com")].concat(),
                ..Default::default()
            },
        ),
    ];
    for (what, config) in bad_configs {
        let err = Broker::start(config).await.expect_err(what);
        assert_eq!(err.code, Code::Configuration, "{what}: {err}");
        assert_no_secret(what, &err.message);
    }

    let broker =
        Broker::start(BrokerConfig { rules: auth_rule("api.github.com"), ..Default::default() }).await.unwrap();
    let addr = broker.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    assert_eq!(broker.url(), format!("http://127.0.0.1:{}", addr.port()));
    assert_eq!(broker.base_url("api.github.com"), format!("http://127.0.0.1:{}/__broker/api.github.com", addr.port()));
    broker.close().await;
}

#[tokio::test]
async fn broker_injects_headers_into_plain_http_and_replaces_authorization() {
    let up = upstream(None).await;
    let counter = Arc::new(Counter::default());
    let mut rules = auth_rule("127.0.0.1");
    rules[0].1.push(("X-Api-Key".into(), counter.clone()));
    let broker = Broker::start(BrokerConfig {
        rules,
        allow: strings(&["localhost"]),
        allow_private: strings(&["127.0.0.1", "localhost"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let url = format!("http://127.0.0.1:{}/repos/x?page=2", up.port());
    for _ in 0..2 {
        let req = Request::post(&url)
            .header("host", "somewhere.else")
            .header("authorization", "Bearer client-own")
            .header("x-api-key", "client-key")
            .header("x-client", "kept")
            .body(Full::from("payload"))
            .unwrap();
        let answer = send(broker.local_addr(), req).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.text(), "target=/repos/x?page=2 body=payload");
        assert_eq!(answer.headers["x-upstream"], "yes");
        assert!(answer.headers.get("x-resp-hop").is_none(), "a header the response's Connection names");
        assert!(answer.headers.get("keep-alive").is_none());
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 2);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.method, "POST");
        assert_eq!(s.target, "/repos/x?page=2", "origin-form upstream");
        assert_eq!(&s.body[..], b"payload");
        let auth: Vec<_> = s.headers.get_all("authorization").iter().collect();
        assert_eq!(auth, [format!("Bearer {SECRET}").as_str()], "replaced, not added");
        let keys: Vec<_> = s.headers.get_all("x-api-key").iter().collect();
        assert_eq!(keys, [format!("call-{}", i + 1).as_str()], "fetched per request");
        assert_eq!(s.headers["host"], format!("127.0.0.1:{}", up.port()));
        assert_eq!(s.headers["x-client"], "kept");
    }

    // An allowed host without a rule gets nothing added and keeps the client's own header.
    let req = Request::get(format!("http://LOCALHOST:{}/plain", up.port()))
        .header("authorization", "Bearer client-own")
        .body(Full::default())
        .unwrap();
    let answer = send(broker.local_addr(), req).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let last = up.seen().pop().unwrap();
    assert_eq!(last.target, "/plain");
    assert_eq!(last.headers["authorization"], "Bearer client-own");
    assert!(last.headers.get("x-api-key").is_none());
    assert_eq!(counter.0.load(Ordering::SeqCst), 2);
    broker.close().await;
}

#[tokio::test]
async fn broker_path_form_goes_over_https_with_the_headers() {
    let ca = test_ca();
    let up = upstream(Some(ca.acceptor.clone())).await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("localhost"),
        allow_private: strings(&["localhost", "127.0.0.1"]),
        extra_ca_pem: vec![ca.pem.clone()],
        ..Default::default()
    })
    .await
    .unwrap();
    let base = broker.base_url(&format!("localhost:{}", up.port()));
    assert_eq!(base, format!("{}/__broker/localhost:{}", broker.url(), up.port()));
    let path = format!("/__broker/localhost:{}/user/repos?per_page=5", up.port());
    let req = Request::get(&path)
        .header("host", broker.local_addr().to_string())
        .header("authorization", "Bearer client-own")
        .body(Full::default())
        .unwrap();
    let answer = send(broker.local_addr(), req).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.text(), "target=/user/repos?per_page=5 body=");
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    let auth: Vec<_> = seen[0].headers.get_all("authorization").iter().collect();
    assert_eq!(auth, [format!("Bearer {SECRET}").as_str()]);
    assert_eq!(seen[0].headers["host"], format!("localhost:{}", up.port()));

    // The same, sent absolute-form to the broker's own address (a client whose NO_PROXY missed it).
    let answer = send(broker.local_addr(), get(&format!("{base}/again"))).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.text(), "target=/again body=");

    // The path form needs the host on the allowlist: 127.0.0.1 is not, though it is the same server.
    let answer = send(broker.local_addr(), get(&format!("/__broker/127.0.0.1:{}/x", up.port()))).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(up.seen().len(), 2);
    broker.close().await;

    // Without the test CA the upstream is not trusted: 502, and the request is never sent.
    let untrusting = Broker::start(BrokerConfig {
        rules: auth_rule("localhost"),
        allow_private: strings(&["localhost"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let answer = send(untrusting.local_addr(), get(&format!("/__broker/localhost:{}/x", up.port()))).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert!(answer.text().contains("TLS") && answer.text().contains("localhost"), "{}", answer.text());
    assert_no_secret("TLS failure", answer.text());
    assert_eq!(up.seen().len(), 2);
    untrusting.close().await;
}

#[tokio::test]
async fn broker_refuses_other_hosts_before_connecting() {
    let up = upstream(None).await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("api.example.com"),
        allow: strings(&["*.example.org"]),
        allow_private: strings(&["127.0.0.1"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = broker.local_addr();
    for (url, host) in [
        (format!("http://127.0.0.1:{}/", up.port()), "127.0.0.1"),
        ("http://example.org/".to_string(), "example.org"),
        ("http://evil.test/steal".to_string(), "evil.test"),
        ("http://api.example.com.evil.test/".to_string(), "api.example.com.evil.test"),
        (format!("/__broker/127.0.0.1:{}/x", up.port()), "127.0.0.1"),
    ] {
        let answer = send(addr, get(&url)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{url}");
        assert!(answer.text().contains(host) && answer.text().contains("allowlist"), "{}", answer.text());
        assert_eq!(answer.headers["content-type"], "text/plain; charset=utf-8");
        assert_no_secret("403", answer.text());
    }
    let (_, head) = connect_tunnel(addr, &format!("127.0.0.1:{}", up.port())).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(up.accepts(), 0, "the upstream saw no connection at all");
    broker.close().await;
}

#[tokio::test]
async fn broker_refuses_non_public_addresses_without_allow_private() {
    let up = upstream(None).await;
    let (echo, echo_accepts) = echo_server().await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow: strings(&["localhost", "169.254.169.254", "::1", "10.1.2.3"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = broker.local_addr();
    for url in [
        format!("http://127.0.0.1:{}/", up.port()),
        format!("http://localhost:{}/", up.port()),
        format!("http://[::1]:{}/", up.port()),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://10.1.2.3/".to_string(),
        format!("/__broker/localhost:{}/x", up.port()),
    ] {
        let answer = send(addr, get(&url)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{url}");
        assert!(answer.text().contains("non-public") && answer.text().contains("allowPrivate"), "{}", answer.text());
        assert_no_secret("non-public refusal", answer.text());
    }
    let (_, head) = connect_tunnel(addr, &echo.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(up.accepts(), 0);
    assert_eq!(echo_accepts.load(Ordering::SeqCst), 0);
    broker.close().await;
}

#[tokio::test]
async fn broker_connect_tunnels_pass_bytes_untouched_and_are_checked() {
    let (echo, echo_accepts) = echo_server().await;
    let ca = test_ca();
    let tls_up = upstream(Some(ca.acceptor.clone())).await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("localhost"),
        allow: strings(&["127.0.0.1"]),
        allow_private: strings(&["127.0.0.1", "localhost"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let addr = broker.local_addr();

    // Raw bytes, not HTTP, come back exactly.
    let (mut tunnel, head) = connect_tunnel(addr, &echo.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let payload: Vec<u8> = (0..=255u8).chain(b"GET / HTTP/1.1\r\nAuthorization: x\r\n\r\n".iter().copied()).collect();
    tunnel.write_all(&payload).await.unwrap();
    let mut back = vec![0u8; payload.len()];
    tokio::time::timeout(TIMEOUT, tunnel.read_exact(&mut back)).await.unwrap().unwrap();
    assert_eq!(back, payload);
    assert_eq!(echo_accepts.load(Ordering::SeqCst), 1);

    // TLS through the tunnel: the broker adds nothing, even for a rule host.
    let (tunnel, head) = connect_tunnel(addr, &format!("localhost:{}", tls_up.port())).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tls =
        TlsConnector::from(Arc::new(client)).connect(ServerName::try_from("localhost").unwrap(), tunnel).await.unwrap();
    let req = Request::get("/through-tunnel")
        .header("host", "localhost")
        .header("authorization", "Bearer client-own")
        .body(Full::default())
        .unwrap();
    let answer = send_on(tls, req).await;
    assert_eq!(answer.status, StatusCode::OK);
    let seen = tls_up.seen();
    assert_eq!(seen[0].target, "/through-tunnel");
    assert_eq!(seen[0].headers["authorization"], "Bearer client-own");

    // Refused: a host off the allowlist, and a missing port.
    let (_, head) = connect_tunnel(addr, "evil.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let (_, head) = connect_tunnel(addr, "evil.test").await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    assert_eq!(echo_accepts.load(Ordering::SeqCst), 1);
    broker.close().await;
}

#[tokio::test]
async fn broker_strips_hop_by_hop_headers() {
    let up = upstream(None).await;
    let broker = Broker::start(BrokerConfig {
        allow: strings(&["127.0.0.1"]),
        allow_private: strings(&["127.0.0.1"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let request = format!(
        "POST http://127.0.0.1:{}/hop HTTP/1.1\r\n\
         Host: 127.0.0.1\r\n\
         Connection: close, X-Drop-Me\r\n\
         X-Drop-Me: 1\r\n\
         Keep-Alive: timeout=5\r\n\
         Proxy-Authorization: Basic Zm9vOmJhcg==\r\n\
         Proxy-Connection: keep-alive\r\n\
         TE: trailers\r\n\
         Trailer: X-Checksum\r\n\
         Upgrade: websocket\r\n\
         Transfer-Encoding: chunked\r\n\
         X-Keep: yes\r\n\
         \r\n\
         5\r\nhello\r\n0\r\n\r\n",
        up.port()
    );
    let answer = raw(broker.local_addr(), request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let lower = answer.to_lowercase();
    assert!(!lower.contains("x-resp-hop") && !lower.contains("keep-alive: timeout"), "{answer}");
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    let h = &seen[0].headers;
    for gone in
        ["connection", "x-drop-me", "keep-alive", "proxy-authorization", "proxy-connection", "te", "trailer", "upgrade"]
    {
        assert!(h.get(gone).is_none(), "{gone} was forwarded: {h:?}");
    }
    // The body is re-framed by the broker itself; the client's own Transfer-Encoding is not copied.
    assert!(h.get_all("transfer-encoding").iter().all(|v| v == "chunked"), "{h:?}");
    assert_eq!(h["x-keep"], "yes");
    assert_eq!(&seen[0].body[..], b"hello");
    broker.close().await;
}

#[tokio::test]
async fn broker_keeps_secrets_out_of_env_debug_and_error_responses() {
    let up = upstream(None).await;
    let dying = dying_upstream().await;
    let closed_port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let config = BrokerConfig {
        rules: vec![
            ("127.0.0.1".into(), vec![("authorization".into(), FixedHeader::arc(format!("Bearer {SECRET}")))]),
            ("localhost".into(), vec![("x-failing".into(), Arc::new(Failing) as Arc<dyn HeaderSource>)]),
            ("*.localhost".into(), vec![("authorization".into(), Arc::new(Newline) as Arc<dyn HeaderSource>)]),
        ],
        allow_private: strings(&["127.0.0.1", "localhost"]),
        ..Default::default()
    };
    assert_no_secret("BrokerConfig's Debug", &format!("{config:?}"));
    let broker = Broker::start(config).await.unwrap();
    assert_no_secret("Broker's Debug", &format!("{broker:?}"));

    let env = broker.env();
    let keys: Vec<_> = env.keys().map(String::as_str).collect();
    assert_eq!(keys, ["HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"]);
    assert_eq!(env["HTTP_PROXY"], broker.url());
    assert_eq!(env["https_proxy"], broker.url());
    assert!(env["NO_PROXY"].split(',').any(|h| h == "127.0.0.1"), "{}", env["NO_PROXY"]);
    for (k, v) in &env {
        assert_no_secret(k, v);
    }

    let addr = broker.local_addr();
    let cases: Vec<(String, StatusCode)> = vec![
        (format!("http://127.0.0.1:{closed_port}/"), StatusCode::BAD_GATEWAY),
        (format!("http://localhost:{}/", up.port()), StatusCode::BAD_GATEWAY),
        (format!("http://a.localhost:{}/", up.port()), StatusCode::BAD_GATEWAY),
        (format!("http://127.0.0.1:{}/cut-head", dying.port()), StatusCode::BAD_GATEWAY),
        (format!("/__broker/127.0.0.1:{}/plain-server-spoken-tls", up.port()), StatusCode::BAD_GATEWAY),
        ("http://other.test/".to_string(), StatusCode::FORBIDDEN),
        ("/not-the-broker-path".to_string(), StatusCode::BAD_REQUEST),
    ];
    for (url, status) in cases {
        let answer = send(addr, get(&url)).await;
        assert_eq!(answer.status, status, "{url}: {:?}", answer.body);
        assert_no_secret(&url, answer.text());
        for (name, value) in &answer.headers {
            assert_no_secret(name.as_str(), value.to_str().unwrap_or(""));
        }
    }
    assert_eq!(up.seen().len(), 0, "a failing or invalid header value stops the request");
    broker.close().await;
}

#[tokio::test]
async fn broker_listen_serves_only_its_clients_with_its_own_allowlist() {
    let up = upstream(None).await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow: strings(&["main-only.test"]),
        allow_private: strings(&["127.0.0.1", "localhost"]),
        ..Default::default()
    })
    .await
    .unwrap();
    for (host, clients, allow) in [
        ("gateway.test", "127.0.0.3/32", vec![]),
        ("127.0.0.2", "everyone", vec![]),
        ("127.0.0.2", "127.0.0.3/32", strings(&["http://x"])),
    ] {
        let err = broker.listen(host, clients, allow).await.unwrap_err();
        assert_eq!(err.code, Code::Configuration, "{host} {clients}: {err}");
    }
    let url = broker.listen("127.0.0.2", "127.0.0.3/32", strings(&["localhost"])).await.unwrap();
    let listener: SocketAddr = url.strip_prefix("http://").unwrap().parse().unwrap();
    assert_eq!(listener.ip().to_string(), "127.0.0.2");

    // From 127.0.0.1, outside `clients`: the connection is dropped and nothing is answered.
    let mut outsider = TcpStream::connect(listener).await.unwrap();
    assert_eq!(outsider.local_addr().unwrap().ip().to_string(), "127.0.0.1");
    let _ = outsider
        .write_all(format!("GET http://127.0.0.1:{}/outsider HTTP/1.1\r\nHost: x\r\n\r\n", up.port()).as_bytes())
        .await;
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(TIMEOUT, outsider.read(&mut buf)).await.expect("dropped promptly");
    assert!(matches!(read, Ok(0) | Err(_)), "an outsider got bytes: {read:?}");
    assert_eq!(up.accepts(), 0);

    // From 127.0.0.3, inside `clients`: served, with the rule's headers.
    let from_client = || async {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.3:0".parse().unwrap()).unwrap();
        socket.connect(listener).await.unwrap()
    };
    let answer = send_on(from_client().await, get(&format!("http://127.0.0.1:{}/insider", up.port()))).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(up.seen()[0].headers["authorization"], format!("Bearer {SECRET}"));

    // Its allowlist is the rule hosts plus its own `allow`, not the broker's `allow`.
    let answer = send_on(from_client().await, get(&format!("http://localhost:{}/listener-allow", up.port()))).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let answer = send_on(from_client().await, get("http://main-only.test/")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    let answer = send(broker.local_addr(), get(&format!("http://localhost:{}/", up.port()))).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "the main listener keeps its own allowlist");
    assert_eq!(up.seen().len(), 2);
    broker.close().await;
}

#[tokio::test]
async fn broker_close_stops_every_listener_and_connection() {
    let up = upstream(None).await;
    let (echo, _) = echo_server().await;
    let broker = Broker::start(BrokerConfig {
        allow: strings(&["127.0.0.1"]),
        allow_private: strings(&["127.0.0.1"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let main = broker.local_addr();
    let second: SocketAddr = broker
        .listen("127.0.0.2", "127.0.0.0/8", vec![])
        .await
        .unwrap()
        .strip_prefix("http://")
        .unwrap()
        .parse()
        .unwrap();

    // A keep-alive connection that has been used, and an open tunnel.
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(TcpStream::connect(main).await.unwrap())).await.unwrap();
    let conn = tokio::spawn(conn);
    let response = sender.send_request(get(&format!("http://127.0.0.1:{}/", up.port()))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.into_body().collect().await.unwrap();
    let (mut tunnel, head) = connect_tunnel(main, &echo.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tunnel.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    tunnel.read_exact(&mut buf).await.unwrap();

    tokio::time::timeout(TIMEOUT, broker.close()).await.expect("close returns");
    assert!(TcpStream::connect(main).await.is_err(), "the main listener is gone");
    assert!(TcpStream::connect(second).await.is_err(), "the second listener is gone");
    let read = tokio::time::timeout(TIMEOUT, tunnel.read(&mut buf)).await.expect("tunnel closed promptly");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let ended = tokio::time::timeout(TIMEOUT, conn).await.expect("kept-alive connection closed promptly");
    assert!(ended.is_ok());
    let err = broker.listen("127.0.0.2", "127.0.0.0/8", vec![]).await.unwrap_err();
    assert_eq!(err.code, Code::Configuration);
    broker.close().await; // twice is fine
}

#[tokio::test]
async fn broker_reuses_a_clients_upstream_connection_only_for_the_same_target() {
    let a = upstream(None).await;
    let b = upstream(None).await;
    let counter = Arc::new(Counter::default());
    let broker = Broker::start(BrokerConfig {
        rules: vec![("127.0.0.1".into(), vec![("x-n".into(), counter.clone() as Arc<dyn HeaderSource>)])],
        allow_private: strings(&["127.0.0.1"]),
        ..Default::default()
    })
    .await
    .unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(TcpStream::connect(broker.local_addr()).await.unwrap()))
            .await
            .unwrap();
    tokio::spawn(conn);
    let steps = [(&a, false), (&a, false), (&b, false), (&a, true), (&a, false)];
    for (i, (up, close)) in steps.iter().enumerate() {
        sender.ready().await.unwrap();
        let mut req = get(&format!("http://127.0.0.1:{}/step/{i}", up.port()));
        if *close {
            req.headers_mut().insert("x-close", "1".parse().unwrap());
        }
        let response = sender.send_request(req).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "step {i}");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], format!("target=/step/{i} body=").as_bytes());
    }
    // a, a (reused), b (new), a (new, and it closes), a (new): three connections to a.
    assert_eq!((a.accepts(), b.accepts()), (3, 1));
    let mut numbers: Vec<String> =
        [a.seen(), b.seen()].concat().iter().map(|s| s.headers["x-n"].to_str().unwrap().to_string()).collect();
    numbers.sort();
    assert_eq!(numbers, ["call-1", "call-2", "call-3", "call-4", "call-5"], "fetched per request, reused or not");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_unlisten_returns_once_the_port_refuses_connections() {
    let broker = Broker::start(BrokerConfig::default()).await.unwrap();
    // An address of the loopback range no other test listens on: a port freed here cannot be
    // taken at once by a listener of a test running beside this one.
    for round in 0..200 {
        let url = broker.listen("127.0.0.77", "127.0.0.0/8", vec![]).await.unwrap();
        let addr: SocketAddr = url.strip_prefix("http://").unwrap().parse().unwrap();
        broker.unlisten(&url).await.unwrap();
        // A fork of this process at that moment (LinuxSandbox's probe, in a test running beside
        // this one) holds a copy of the socket until the child exits: the port may answer for
        // that instant, never longer.
        let mut tries = 0;
        while TcpStream::connect(addr).await.is_ok() {
            tries += 1;
            assert!(tries < 40, "round {round}: {url} still accepted connections 2 s after unlisten returned");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(broker.unlisten("http://127.0.0.1:1").await.unwrap_err().code, Code::Configuration);
    broker.close().await;
}

#[tokio::test]
async fn broker_dropped_without_close_stops_listening() {
    let broker = Broker::start(BrokerConfig::default()).await.unwrap();
    let addr = broker.local_addr();
    drop(broker);
    let deadline = Instant::now() + TIMEOUT;
    while TcpStream::connect(addr).await.is_ok() {
        assert!(Instant::now() < deadline, "still listening after the broker was dropped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A broker whose one rule (an Authorization header) is for 127.0.0.1, which it may reach.
async fn loopback_broker() -> Arc<Broker> {
    Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow_private: strings(&["127.0.0.1"]),
        ..Default::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn broker_answers_bad_input_with_4xx_and_keeps_serving() {
    let up = upstream(None).await;
    let broker = loopback_broker().await;
    let addr = broker.local_addr();
    let many_headers: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    let cases: Vec<(&str, String, &str)> = vec![
        ("not HTTP", "THIS IS NOT HTTP\r\n\r\n".into(), "400"),
        ("bad header line", "GET http://127.0.0.1/ HTTP/1.1\r\nno colon here\r\n\r\n".into(), "400"),
        ("bad content-length", "POST http://127.0.0.1/ HTTP/1.1\r\nContent-Length: abc\r\n\r\n".into(), "400"),
        ("space in host", "GET http://exa mple.com/ HTTP/1.1\r\nHost: x\r\n\r\n".into(), "400"),
        (
            "oversized header",
            format!("GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(100_000)),
            "431",
        ),
        ("too many headers", format!("GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n{many_headers}\r\n"), "431"),
        (
            "ftp scheme",
            "GET ftp://example.com/f HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n".into(),
            "400",
        ),
        (
            "https absolute-form",
            "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n".into(),
            "400",
        ),
        ("numeric host trick", "GET http://0x7f.1/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(), "400"),
        ("decimal host trick", "GET http://2130706433/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(), "400"),
        ("port 0", "GET http://127.0.0.1:0/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(), "400"),
        ("user info", "GET http://user:pw@127.0.0.1/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(), "400"),
        (
            "CONNECT without port",
            "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n".into(),
            "400",
        ),
        ("bad broker host", "GET /__broker/bad%host/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".into(), "400"),
        (
            "user info in broker path",
            "GET /__broker/u@127.0.0.1/x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".into(),
            "400",
        ),
        ("empty broker host", "GET /__broker//x HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".into(), "400"),
        ("origin-form elsewhere", "GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".into(), "400"),
        ("asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n".into(), "400"),
    ];
    for (what, request, status) in cases {
        let answer = raw(addr, request.as_bytes()).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}")), "{what}: {answer:?}");
        assert_no_secret(what, &answer);
    }
    // Half a request, then the client goes away: nothing to answer, nothing breaks.
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\nHos").await.unwrap();
    drop(half);

    assert_eq!(up.seen().len(), 0);
    let answer = send(addr, get(&format!("http://127.0.0.1:{}/still-fine", up.port()))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.text(), "target=/still-fine body=");
    broker.close().await;
}

#[tokio::test]
async fn broker_answers_502_when_an_upstream_dies_and_keeps_serving() {
    let up = upstream(None).await;
    let dying = dying_upstream().await;
    let broker = loopback_broker().await;
    let addr = broker.local_addr();
    for path in ["cut-head", "garbage"] {
        let answer = send(addr, get(&format!("http://127.0.0.1:{}/{path}", dying.port()))).await;
        assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{path}");
        assert!(answer.text().contains(&format!("127.0.0.1:{}", dying.port())), "{}", answer.text());
        assert_no_secret(path, answer.text());
    }
    // Once the head has been passed on, the status cannot change: the client's connection is
    // aborted so the cut body never looks complete.
    let answer = send(addr, get(&format!("http://127.0.0.1:{}/cut-body", dying.port()))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(answer.body.is_err(), "a truncated body must not look complete: {:?}", answer.body);

    let answer = send(addr, get(&format!("http://127.0.0.1:{}/next", up.port()))).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.text(), "target=/next body=");
    broker.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_load_answers_hundreds_of_concurrent_requests_correctly() {
    const N: usize = 400;
    let up = upstream(None).await;
    let counter = Arc::new(Counter::default());
    let mut rules = auth_rule("127.0.0.1");
    rules[0].1.push(("x-request-number".into(), counter.clone()));
    let broker = Broker::start(BrokerConfig { rules, allow_private: strings(&["127.0.0.1"]), ..Default::default() })
        .await
        .unwrap();
    let (addr, port) = (broker.local_addr(), up.port());
    let started = Instant::now();
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            tokio::spawn(async move {
                let body = format!("payload-{i}");
                let req = Request::post(format!("http://127.0.0.1:{port}/item/{i}"))
                    .header("host", "x")
                    .body(Full::from(body))
                    .unwrap();
                (i, send(addr, req).await)
            })
        })
        .collect();
    for task in tasks {
        let (i, answer) = task.await.unwrap();
        assert_eq!(answer.status, StatusCode::OK, "request {i}");
        assert_eq!(answer.text(), format!("target=/item/{i} body=payload-{i}"));
    }
    let elapsed = started.elapsed();
    let seen = up.seen();
    assert_eq!(seen.len(), N);
    let mut numbers: Vec<String> = seen
        .iter()
        .map(|s| {
            assert_eq!(s.headers["authorization"], format!("Bearer {SECRET}"));
            s.headers["x-request-number"].to_str().unwrap().to_string()
        })
        .collect();
    numbers.sort();
    numbers.dedup();
    assert_eq!(numbers.len(), N, "one header fetch per request");
    eprintln!("{N} concurrent requests through the broker in {elapsed:?}");
    broker.close().await;
}

/// `cargo test -p corral-core --lib broker_bench -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: prints numbers, asserts nothing about speed"]
async fn broker_bench() {
    let up = upstream(None).await;
    let broker = loopback_broker().await;
    let url = format!("http://127.0.0.1:{}/bench", up.port());

    async fn keep_alive(to: SocketAddr) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(TcpStream::connect(to).await.unwrap())).await.unwrap();
        tokio::spawn(conn);
        sender
    }
    async fn one(sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>, url: &str) -> Duration {
        let started = Instant::now();
        sender.ready().await.unwrap();
        let response = sender.send_request(get(url)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.into_body().collect().await.unwrap();
        started.elapsed()
    }
    // Throughput: `clients` keep-alive connections sending as fast as they can for `secs`.
    async fn throughput(to: SocketAddr, url: &str, clients: usize, secs: u64) -> f64 {
        let done = Arc::new(AtomicUsize::new(0));
        let until = Instant::now() + Duration::from_secs(secs);
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (done, url) = (done.clone(), url.to_string());
                tokio::spawn(async move {
                    let mut sender = keep_alive(to).await;
                    while Instant::now() < until {
                        one(&mut sender, &url).await;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        done.load(Ordering::Relaxed) as f64 / secs as f64
    }
    fn percentile(sorted: &[Duration], p: f64) -> Duration {
        sorted[((sorted.len() - 1) as f64 * p) as usize]
    }

    let path = url.splitn(4, '/').nth(3).map(|p| format!("/{p}")).unwrap();
    // Latency: one keep-alive client each way, requests interleaved so machine noise hits both.
    let (mut direct, mut proxied) = (keep_alive(up.addr).await, keep_alive(broker.local_addr()).await);
    let (mut d, mut p) = (Vec::new(), Vec::new());
    for i in 0..3000 {
        let (dt, pt) = (one(&mut direct, &path).await, one(&mut proxied, &url).await);
        if i >= 200 {
            d.push(dt);
            p.push(pt);
        }
    }
    d.sort();
    p.sort();
    eprintln!(
        "latency p50  direct {:?}  via broker {:?}  (p99 {:?} / {:?})",
        percentile(&d, 0.5),
        percentile(&p, 0.5),
        percentile(&d, 0.99),
        percentile(&p, 0.99)
    );
    // A fresh client connection per request through the broker (no reuse possible).
    let mut fresh = Vec::new();
    for _ in 0..500 {
        fresh.push(one(&mut keep_alive(broker.local_addr()).await, &url).await);
    }
    fresh.sort();
    eprintln!("latency p50  via broker, new client connection each time {:?}", percentile(&fresh, 0.5));
    for round in 1..=2 {
        let direct_rps = throughput(up.addr, &path, 32, 3).await;
        let proxied_rps = throughput(broker.local_addr(), &url, 32, 3).await;
        eprintln!("throughput round {round} (32 keep-alive clients, 3 s)  direct {direct_rps:.0} req/s  via broker {proxied_rps:.0} req/s");
    }
    broker.close().await;
}

#[tokio::test]
async fn broker_refuses_trace_in_any_spelling_and_every_method_it_does_not_know() {
    let up = upstream(None).await;
    let broker = loopback_broker().await;
    let url = format!("http://127.0.0.1:{}/echo", up.port());
    for method in ["TRACE", "trace", "Trace", "TRACK", "track", "get", "PROPFIND", "BREW", "DEBUG"] {
        let req = Request::builder().method(method).uri(&url).body(Full::default()).unwrap();
        let answer = send(broker.local_addr(), req).await;
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert!(!answer.text().contains(SECRET), "{method}");
    }
    assert!(up.seen().is_empty(), "no refused method reached the upstream: {:?}", up.seen());
    for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let req = Request::builder().method(method).uri(&url).body(Full::default()).unwrap();
        assert_eq!(send(broker.local_addr(), req).await.status, StatusCode::OK, "{method}");
    }
    broker.close().await;
}

#[tokio::test]
async fn a_request_whose_client_shut_its_side_after_sending_it_is_delivered_whole() {
    let up = upstream(None).await;
    let broker = loopback_broker().await;
    let body = "b".repeat(2 << 20);
    let mut s = TcpStream::connect(broker.local_addr()).await.unwrap();
    let head = format!(
        "POST http://127.0.0.1:{}/half HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\r\n",
        up.port(),
        up.port(),
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    // The client is done sending: it shuts its write side at once, before any answer.
    s.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(TIMEOUT, s.read_to_end(&mut answer)).await.expect("answered");
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..answer.len().min(200)]));
    assert_eq!(up.seen().len(), 1);
    assert_eq!(up.seen()[0].body.len(), body.len(), "the whole body reached the upstream");
    broker.close().await;
}

mod scrub;
mod terminate;
mod transformations;
