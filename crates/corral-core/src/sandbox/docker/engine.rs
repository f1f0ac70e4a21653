//! A small Docker Engine API client: HTTP/1.1 with hyper over the daemon's unix socket (a named
//! pipe on Windows), one connection per request, the API version negotiated with `GET /_ping`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::error::{Code, Error, Result};

/// The newest API version this client speaks; a daemon that offers less is used at its own.
pub(crate) const CLIENT_API_VERSION: (u32, u32) = (1, 43);
/// The oldest it accepts (`Mounts`, wait conditions, internal networks).
pub(crate) const MIN_API_VERSION: (u32, u32) = (1, 30);
/// What a daemon that names no version in `/_ping` is assumed to speak (the Docker CLI's rule).
const FALLBACK_API_VERSION: (u32, u32) = (1, 24);

#[cfg(not(windows))]
pub(crate) const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";
#[cfg(windows)]
pub(crate) const DEFAULT_DOCKER_HOST: &str = "npipe:////./pipe/docker_engine";

/// Where the daemon is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DockerHost {
    /// A local daemon's socket.
    Unix(PathBuf),
    /// A local daemon's named pipe on Windows (`npipe:////./pipe/docker_engine`): Docker Desktop.
    Pipe(String),
    /// A daemon on TCP (`tcp://host:port`; `https://` asks for TLS), as a rule on another machine.
    Tcp { host: String, port: u16, https: bool },
    /// `tcp://`, `ssh://`, `http(s)://`: not a local socket, so (as far as egress is concerned) a
    /// daemon on another machine; this client does not speak to it.
    Remote(String),
}

impl std::fmt::Display for DockerHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DockerHost::Unix(p) => write!(f, "unix://{}", p.display()),
            DockerHost::Pipe(name) => write!(f, "npipe://{}", name.replace('\\', "/")),
            DockerHost::Tcp { host, port, https } => {
                let host = if host.contains(':') { format!("[{host}]") } else { host.clone() };
                write!(f, "{}://{host}:{port}", if *https { "https" } else { "tcp" })
            }
            DockerHost::Remote(h) => f.write_str(h),
        }
    }
}

impl DockerHost {
    /// `unix:///path` (or a bare absolute path) or another scheme; anything else is a
    /// `ConfigurationError`.
    pub(crate) fn parse(s: &str) -> Result<DockerHost> {
        let s = s.trim();
        if let Some(path) = s.strip_prefix("unix://") {
            if path.starts_with('/') {
                return Ok(DockerHost::Unix(PathBuf::from(path)));
            }
            return Err(Error::config(format!("dockerHost \"{s}\": a unix:// host needs an absolute socket path")));
        }
        if s.starts_with('/') {
            return Ok(DockerHost::Unix(PathBuf::from(s)));
        }
        if let Some(pipe) = s.strip_prefix("npipe://") {
            // npipe:////./pipe/docker_engine names \\.\pipe\docker_engine.
            let name = pipe.replace('/', "\\");
            if name.starts_with("\\\\") {
                return Ok(DockerHost::Pipe(name));
            }
            return Err(Error::config(format!(
                "dockerHost \"{s}\": an npipe:// host names a pipe such as npipe:////./pipe/docker_engine"
            )));
        }
        if let Some((scheme, rest)) = s.split_once("://") {
            if matches!(scheme, "tcp" | "http" | "https") {
                return tcp_host(s, rest, scheme == "https");
            }
            if !rest.is_empty() && matches!(scheme, "ssh" | "fd") {
                return Ok(DockerHost::Remote(s.to_string()));
            }
        }
        Err(Error::config(format!("dockerHost \"{s}\" is not a Docker host such as unix:///var/run/docker.sock")))
    }

    /// The host to use: the option, else `DOCKER_HOST`, else the default socket.
    pub(crate) fn resolve(option: Option<&str>) -> Result<DockerHost> {
        match option {
            Some(s) => DockerHost::parse(s),
            None => match std::env::var("DOCKER_HOST") {
                Ok(s) if !s.trim().is_empty() => DockerHost::parse(&s),
                _ => DockerHost::parse(DEFAULT_DOCKER_HOST),
            },
        }
    }
}

/// `host:port` of a `tcp://`/`https://` Docker host (the port 2375 by default, 2376 for https).
fn tcp_host(s: &str, rest: &str, https: bool) -> Result<DockerHost> {
    let bad = || Error::config(format!("dockerHost \"{s}\": a TCP host is tcp://HOST:PORT"));
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err(bad());
    }
    let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
        let (h, after) = v6.split_once(']').ok_or_else(bad)?;
        (h.to_string(), after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (rest.to_string(), None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)?,
        None if https => 2376,
        None => 2375,
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok(DockerHost::Tcp { host, port, https })
}

/// An answer whose body was read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The daemon's `{"message": …}`, or the body as text.
    pub(crate) fn message(&self) -> String {
        match self.json().get("message").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None => String::from_utf8_lossy(&self.body).trim().to_string(),
        }
    }
}

/// A container's attached streams: a hijacked connection (HTTP 101) that also takes stdin, or a
/// plain response body (a daemon or proxy that does not upgrade).
pub(crate) enum Attached {
    Raw(TokioIo<hyper::upgrade::Upgraded>),
    Body(Incoming),
}

pub(crate) struct DockerClient {
    /// `Unix`, `Pipe` or `Tcp`.
    endpoint: DockerHost,
    /// For `Tcp`: TLS with this configuration, or plain TCP.
    tls: Option<Arc<rustls::ClientConfig>>,
    version: OnceCell<String>,
}

impl std::fmt::Debug for DockerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerClient").field("endpoint", &self.endpoint).field("tls", &self.tls.is_some()).finish()
    }
}

fn io_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(Code::Io, format!("Docker Engine: {what}: {e}"))
}

fn parse_api_version(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// HTTP/1.1 over one connection to the daemon; upgrades (attach) stay possible.
async fn handshake<T>(io: T) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(io)).await.map_err(|e| io_error("handshake", e))?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    Ok(sender)
}

impl DockerClient {
    /// A client for a local endpoint (a unix socket, or a named pipe on Windows), or a TCP one.
    pub(crate) fn at(endpoint: DockerHost) -> Self {
        DockerClient { endpoint, tls: None, version: OnceCell::new() }
    }

    /// A client that speaks TLS with `config` to a TCP endpoint.
    pub(crate) fn with_tls(mut self, config: Arc<rustls::ClientConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// The daemon's unix socket, when it is one.
    pub(crate) fn socket(&self) -> Option<&Path> {
        match &self.endpoint {
            DockerHost::Unix(p) => Some(p),
            _ => None,
        }
    }

    async fn sender(&self) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>> {
        let unreachable = |e: std::io::Error| {
            Error::new(
                Code::Io,
                format!("Cannot connect to the Docker daemon at {}: {e}. Is the docker daemon running?", self.endpoint),
            )
        };
        match &self.endpoint {
            #[cfg(unix)]
            DockerHost::Unix(path) => {
                handshake(tokio::net::UnixStream::connect(path).await.map_err(unreachable)?).await
            }
            #[cfg(windows)]
            DockerHost::Pipe(name) => {
                handshake(tokio::net::windows::named_pipe::ClientOptions::new().open(name).map_err(unreachable)?).await
            }
            DockerHost::Tcp { host, port, .. } => {
                let tcp = tokio::net::TcpStream::connect((host.as_str(), *port)).await.map_err(unreachable)?;
                let _ = tcp.set_nodelay(true);
                let Some(config) = &self.tls else { return handshake(tcp).await };
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|e| Error::config(format!("dockerHost {}: {e}", self.endpoint)))?;
                let tls = tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp).await.map_err(|e| {
                    Error::new(
                        Code::Io,
                        format!(
                            "The TLS handshake with the Docker daemon at {} failed: {e}. Check tls.ca (the CA that signed the daemon's certificate) and tls.cert/tls.key (a client certificate that CA accepts).",
                            self.endpoint
                        ),
                    )
                })?;
                handshake(tls).await
            }
            other => {
                Err(Error::new(Code::Io, format!("The Docker daemon at {other} cannot be reached from this platform.")))
            }
        }
    }

    fn request(method: Method, path: &str, body: Option<&Value>) -> Result<Request<Full<Bytes>>> {
        let mut b = Request::builder().method(method).uri(path).header(header::HOST, "docker");
        let body = match body {
            Some(v) => {
                b = b.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(serde_json::to_vec(v).map_err(|e| io_error("request", e))?)
            }
            None => Bytes::new(),
        };
        b.body(Full::new(body)).map_err(|e| io_error("request", e))
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> Result<Reply> {
        let what = format!("{} {}", req.method(), req.uri().path());
        let mut sender = self.sender().await?;
        let resp = sender.send_request(req).await.map_err(|e| io_error(&what, e))?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(|e| io_error(&what, e))?.to_bytes();
        Ok(Reply { status, body })
    }

    /// The API version used for every versioned path: the daemon's (from `/_ping`), lowered to
    /// [`CLIENT_API_VERSION`]. Negotiated once.
    pub(crate) async fn api_version(&self) -> Result<&str> {
        self.version
            .get_or_try_init(|| async {
                let mut sender = self.sender().await?;
                let resp = sender.send_request(Self::request(Method::GET, "/_ping", None)?).await.map_err(|e| {
                    let hint = if self.tls.is_some() {
                        " (over TLS, a daemon started with --tlsverify also wants a client certificate its CA signed: tls.cert and tls.key)"
                    } else {
                        ""
                    };
                    io_error("GET /_ping", format!("{e}{hint}"))
                })?;
                let status = resp.status();
                let offered =
                    resp.headers().get("api-version").and_then(|v| v.to_str().ok()).and_then(parse_api_version);
                let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                if status == StatusCode::BAD_REQUEST && String::from_utf8_lossy(&body).contains("HTTPS") {
                    return Err(Error::new(
                        Code::Io,
                        format!(
                            "The Docker daemon at {} speaks TLS: give tls {{ ca, cert, key }}, or set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH.",
                            self.endpoint
                        ),
                    ));
                }
                if !status.is_success() {
                    return Err(io_error("GET /_ping", status));
                }
                let v = offered.unwrap_or(FALLBACK_API_VERSION).min(CLIENT_API_VERSION);
                if v < MIN_API_VERSION {
                    return Err(Error::new(
                        Code::Io,
                        format!(
                            "Docker Engine API {}.{} is too old: SubprocessSandbox needs {}.{} or later",
                            v.0, v.1, MIN_API_VERSION.0, MIN_API_VERSION.1
                        ),
                    ));
                }
                Ok(format!("{}.{}", v.0, v.1))
            })
            .await
            .map(String::as_str)
    }

    async fn versioned(&self, path: &str) -> Result<String> {
        Ok(format!("/v{}{}", self.api_version().await?, path))
    }

    /// A versioned call; any status is returned.
    pub(crate) async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Reply> {
        let path = self.versioned(path).await?;
        self.send(Self::request(method, &path, body)?).await
    }

    /// A versioned call that must succeed; its JSON body (`Null` when empty).
    pub(crate) async fn json(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value> {
        let what = format!("{method} {}", path.split('?').next().unwrap_or(path));
        let reply = self.call(method, path, body).await?;
        if !reply.status.is_success() {
            return Err(Error::new(
                Code::Io,
                format!("Docker Engine: {what}: {} ({})", reply.message(), reply.status.as_u16()),
            ));
        }
        Ok(reply.json())
    }

    /// `POST /containers/{id}/attach`, asking for the connection to be hijacked.
    pub(crate) async fn attach(&self, id: &str, stdin: bool) -> Result<Attached> {
        let path = format!("/containers/{id}/attach?stream=1&stdout=1&stderr=1&stdin={}", u8::from(stdin));
        self.hijack("attach", &path, None).await
    }

    /// `POST /exec/{id}/start` (attached, no TTY), asking for the connection to be hijacked.
    pub(crate) async fn start_exec(&self, id: &str) -> Result<Attached> {
        self.hijack(
            "exec start",
            &format!("/exec/{id}/start"),
            Some(&serde_json::json!({ "Detach": false, "Tty": false })),
        )
        .await
    }

    /// A versioned POST whose connection carries the streams afterwards: hijacked (HTTP 101),
    /// or the response body of a daemon or proxy that does not upgrade.
    async fn hijack(&self, what: &str, path: &str, body: Option<&Value>) -> Result<Attached> {
        let path = self.versioned(path).await?;
        let mut req = Self::request(Method::POST, &path, body)?;
        req.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("Upgrade"));
        req.headers_mut().insert(header::UPGRADE, header::HeaderValue::from_static("tcp"));
        let mut sender = self.sender().await?;
        let resp = sender.send_request(req).await.map_err(|e| io_error(what, e))?;
        let status = resp.status();
        if status == StatusCode::SWITCHING_PROTOCOLS {
            let io = hyper::upgrade::on(resp).await.map_err(|e| io_error(what, e))?;
            return Ok(Attached::Raw(TokioIo::new(io)));
        }
        if status.is_success() {
            return Ok(Attached::Body(resp.into_body()));
        }
        let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let reply = Reply { status, body };
        Err(Error::new(Code::Io, format!("Docker Engine: {what}: {} ({})", reply.message(), status.as_u16())))
    }
}

/// Splits Docker's multiplexed stream (8-byte headers: stream, 0, 0, 0, big-endian length)
/// into stdout and stderr.
#[derive(Debug, Default)]
pub(crate) struct Demux {
    pending: Vec<u8>,
}

impl Demux {
    /// Feeds bytes; calls `sink(stream, payload)` for each complete frame.
    pub(crate) fn push(&mut self, data: &[u8], sink: &mut dyn FnMut(u8, &[u8])) {
        self.pending.extend_from_slice(data);
        let mut at = 0;
        while self.pending.len() - at >= 8 {
            let h = &self.pending[at..at + 8];
            let len = u32::from_be_bytes([h[4], h[5], h[6], h[7]]) as usize;
            if self.pending.len() - at - 8 < len {
                break;
            }
            let stream = h[0];
            sink(stream, &self.pending[at + 8..at + 8 + len]);
            at += 8 + len;
        }
        self.pending.drain(..at);
    }
}

/// Whether `GET /info` says the engine is rootless (its root is the user who runs it).
pub(crate) fn rootless(info: &serde_json::Value) -> bool {
    info.get("SecurityOptions").and_then(serde_json::Value::as_array).is_some_and(|opts| {
        opts.iter().filter_map(serde_json::Value::as_str).any(|o| o.split(',').any(|p| p == "name=rootless"))
    })
}

/// The leading numbers of an engine version (`20.10.24+dfsg1` → `[20, 10, 24]`).
pub(crate) fn engine_version(s: &str) -> Option<(u32, u32, u32)> {
    let mut parts = s.trim().trim_start_matches('v').split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_hosts() {
        assert_eq!(
            DockerHost::parse("unix:///var/run/docker.sock").unwrap(),
            DockerHost::Unix("/var/run/docker.sock".into())
        );
        assert_eq!(DockerHost::parse("/tmp/d.sock").unwrap(), DockerHost::Unix("/tmp/d.sock".into()));
        assert_eq!(
            DockerHost::parse("tcp://10.0.0.2:2375").unwrap(),
            DockerHost::Tcp { host: "10.0.0.2".into(), port: 2375, https: false }
        );
        assert_eq!(
            DockerHost::parse("https://docker.example:2377").unwrap(),
            DockerHost::Tcp { host: "docker.example".into(), port: 2377, https: true }
        );
        assert_eq!(
            DockerHost::parse("tcp://[::1]").unwrap(),
            DockerHost::Tcp { host: "::1".into(), port: 2375, https: false }
        );
        assert_eq!(DockerHost::parse("tcp://h:1").unwrap().to_string(), "tcp://h:1");
        for bad in ["tcp://", "tcp://h:0", "tcp://h:99999", "tcp://u@h:1", "tcp://h:1/path", "tcp://:1"] {
            assert_eq!(DockerHost::parse(bad).unwrap_err().code, Code::Configuration, "{bad}");
        }
        assert!(matches!(DockerHost::parse("ssh://me@box").unwrap(), DockerHost::Remote(_)));
        assert_eq!(
            DockerHost::parse("npipe:////./pipe/docker_engine").unwrap(),
            DockerHost::Pipe(r"\\.\pipe\docker_engine".into())
        );
        for bad in ["", "unix://relative", "docker.sock", "ftp://x"] {
            assert_eq!(DockerHost::parse(bad).unwrap_err().code, Code::Configuration, "{bad}");
        }
    }

    #[test]
    fn versions() {
        assert_eq!(engine_version("20.10.24+dfsg1"), Some((20, 10, 24)));
        assert_eq!(engine_version("25.0.5"), Some((25, 0, 5)));
        assert_eq!(engine_version("28.0.4-1"), Some((28, 0, 4)));
        assert_eq!(engine_version("26"), Some((26, 0, 0)));
        assert_eq!(engine_version("dev"), None);
        assert_eq!(parse_api_version("1.41"), Some((1, 41)));
        assert_eq!(parse_api_version("x"), None);
    }

    #[test]
    fn demux_splits_frames_across_reads() {
        let mut frames = Vec::new();
        for (s, p) in [(1u8, &b"hello "[..]), (2, b"err"), (1, b"world"), (1, b"")] {
            frames.extend_from_slice(&[s, 0, 0, 0]);
            frames.extend_from_slice(&(p.len() as u32).to_be_bytes());
            frames.extend_from_slice(p);
        }
        let mut d = Demux::default();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        for chunk in frames.chunks(3) {
            d.push(chunk, &mut |s, p| if s == 2 { err.extend_from_slice(p) } else { out.extend_from_slice(p) });
        }
        assert_eq!(out, b"hello world");
        assert_eq!(err, b"err");
    }
}
