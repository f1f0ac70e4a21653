//! The proxy itself: one hyper HTTP/1.1 server connection per accepted socket, serving
//! absolute-form `http://` requests, `CONNECT` tunnels and the path form
//! `/__broker/<host>/<path>`.
//!
//! Nothing here logs, and no response the broker writes itself ever contains a header value:
//! error bodies are built only from the host, the port and a reason.

use std::convert::Infallible;
use std::fmt::Display;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::uri::Authority;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::host::{normalize_host, parse_ip, HostPattern};
use super::upstream::{connect_tcp, connect_tls, Check};
use super::HeaderSource;
use super::NetworkPolicy;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type ProxyBody = BoxBody<Bytes, BoxError>;

/// Largest request head (request line plus headers) accepted; a larger one gets hyper's 431.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) use super::header::HOP_BY_HOP;

pub(crate) struct Rule {
    pub pattern: HostPattern,
    pub headers: Vec<(HeaderName, Arc<dyn HeaderSource>)>,
}

/// What every listener of one broker shares.
pub(crate) struct Shared {
    pub rules: Vec<Rule>,
    pub transformations: super::transform::Transformations,
    /// `tls: 'terminate'`: the CA and leaf certificates.
    pub terminator: Option<super::terminate::Terminator>,
    pub allow_private: Vec<HostPattern>,
    pub tls: Arc<ClientConfig>,
    /// Cancelled by `close()` (or when the broker is dropped): every task below stops.
    pub token: CancellationToken,
    /// Every accept loop, connection, tunnel and upstream connection driver.
    pub tracker: TaskTracker,
    /// Responses are scrubbed of the values injected into their requests (`scrub.rs`).
    pub scrub: bool,
    /// Every value injected so far, registered with the redactors while the broker lives.
    pub injected: super::scrub::Injected,
}

/// One listening address: its own allowlist (rule hosts plus its `allow`), or a session's gate.
pub(crate) struct Listener {
    pub shared: Arc<Shared>,
    pub allow: Vec<HostPattern>,
    pub local: SocketAddr,
    pub gate: Option<Arc<Gate>>,
}

/// A session's network policy, which decides every connection of the listeners that share it,
/// and the tunnels it let open: a new policy closes those it refuses.
pub struct Gate {
    policy: std::sync::RwLock<NetworkPolicy>,
    tunnels: std::sync::Mutex<Vec<OpenTunnel>>,
}

struct OpenTunnel {
    host: String,
    ip: std::net::IpAddr,
    stop: CancellationToken,
}

impl Gate {
    pub fn new(policy: NetworkPolicy) -> Arc<Gate> {
        Arc::new(Gate { policy: std::sync::RwLock::new(policy), tunnels: Default::default() })
    }

    pub fn policy(&self) -> NetworkPolicy {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies `policy` at once: later connections follow it, and open tunnels it refuses close.
    pub fn set(&self, policy: NetworkPolicy) {
        let mut tunnels = self.tunnels.lock().unwrap_or_else(|p| p.into_inner());
        tunnels.retain(|t| {
            if !t.stop.is_cancelled() && policy.permits(&t.host, t.ip) {
                return true;
            }
            t.stop.cancel();
            false
        });
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = policy;
    }

    /// Whether a connection to `ip` for `host` passes the policy now.
    fn permits(&self, host: &str, ip: std::net::IpAddr) -> bool {
        self.policy.read().unwrap_or_else(|p| p.into_inner()).permits(host, ip)
    }

    /// Records an open tunnel; its token is cancelled when a new policy refuses it. `None` when
    /// the policy changed since the connection was checked and refuses it now (checked under
    /// the same lock `set` takes, so no change falls between).
    fn track(&self, host: &str, ip: std::net::IpAddr, parent: &CancellationToken) -> Option<CancellationToken> {
        let mut tunnels = self.tunnels.lock().unwrap_or_else(|p| p.into_inner());
        if !self.permits(host, ip) {
            return None;
        }
        let stop = parent.child_token();
        // Tunnels that ended cancel their own token (`tunnel`).
        tunnels.retain(|t| !t.stop.is_cancelled());
        tunnels.push(OpenTunnel { host: host.to_string(), ip, stop: stop.clone() });
        Some(stop)
    }
}

impl Listener {
    fn rule(&self, host: &str) -> Option<&Rule> {
        self.shared.rules.iter().filter(|r| r.pattern.matches(host)).max_by_key(|r| r.pattern.specificity())
    }

    fn allowed(&self, host: &str) -> bool {
        match &self.gate {
            // A session's policy decides; a rule opens no host of its own.
            Some(gate) => gate.policy.read().unwrap_or_else(|p| p.into_inner()).may_resolve(host),
            None => self.rule(host).is_some() || self.allow.iter().any(|p| p.matches(host)),
        }
    }

    /// Opens a connection to `host:port` under this listener's address check.
    async fn connect(&self, host: &str, port: u16) -> Result<TcpStream, super::upstream::Refused> {
        match &self.gate {
            Some(gate) => {
                let policy = gate.policy();
                connect_tcp(host, port, Check::Policy(&policy)).await
            }
            None => connect_tcp(host, port, Check::Public(self.private_ok(host))).await,
        }
    }

    fn private_ok(&self, host: &str) -> bool {
        self.shared.allow_private.iter().any(|p| p.matches(host))
    }

    /// An absolute-form request naming this listener's own address is served as if it had been
    /// sent to it directly (a client whose NO_PROXY missed the broker).
    fn is_self(&self, host: &str, port: u16) -> bool {
        port == self.local.port()
            && (parse_ip(host) == Some(self.local.ip()) || (host == "localhost" && self.local.ip().is_loopback()))
    }
}

/// One accepted client connection.
struct Client {
    listener: Arc<Listener>,
    /// A connection the broker decrypted (its requests go on over TLS it verifies).
    terminated: bool,
    /// The upstream connection this client's previous request used, kept for its next request
    /// to the same host, port and scheme. Never shared between clients.
    idle: tokio::sync::Mutex<Option<Idle>>,
}

struct Idle {
    key: (String, u16, bool),
    /// The address the connection went to (a session's policy is checked again on reuse).
    ip: Option<std::net::IpAddr>,
    sender: SendRequest<Incoming>,
}

/// Serves one accepted socket until the client goes away or the broker closes.
pub(crate) async fn serve_connection(listener: Arc<Listener>, stream: TcpStream) {
    let token = listener.shared.token.clone();
    let client = Arc::new(Client { listener, terminated: false, idle: tokio::sync::Mutex::new(None) });
    let service = service_fn(move |req| {
        let client = client.clone();
        async move { Ok::<_, Infallible>(handle(client, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(MAX_HEAD_BYTES)
        // A client that sends its whole request and then shuts its side (or exits) still has
        // that request delivered: without this, the EOF ends the connection mid-body.
        .half_close(true)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::select! {
        _ = conn => {}
        _ = token.cancelled() => {}
    }
}

/// The methods the broker forwards, in the standard's spelling.
const FORWARDED_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

async fn handle(client: Arc<Client>, req: Request<Incoming>) -> Response<ProxyBody> {
    let listener = &client.listener;
    if req.method() == Method::CONNECT {
        return tunnel(listener, req).await;
    }
    // Only methods whose meaning is known are forwarded, spelled exactly as the standard does:
    // TRACE echoes the request, injected credentials included, back to the command, and servers
    // that compare methods case-insensitively (or know an alias such as TRACK or DEBUG) would do
    // the same for `trace` or `Track`.
    if !FORWARDED_METHODS.contains(&req.method().as_str()) {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the broker forwards only {} (and CONNECT)", FORWARDED_METHODS.join(", ")),
        );
    }
    let uri = req.uri().clone();
    let Some(scheme) = uri.scheme_str() else {
        return local(&client, req).await;
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("only http:// URLs can be proxied, not {scheme}://; an https:// URL goes through CONNECT"),
        );
    }
    let Some(authority) = uri.authority() else {
        return refuse(StatusCode::BAD_REQUEST, "the URL has no host");
    };
    let Some((host, port)) = split_authority(authority, 80) else {
        return refuse(StatusCode::BAD_REQUEST, "the URL's host is not a valid host name or address");
    };
    if listener.is_self(&host, port) {
        return local(&client, req).await;
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
    forward(&client, req, Target { host, port, tls: false }, path).await
}

/// A request sent to the broker directly: only the path form is served.
async fn local(client: &Client, req: Request<Incoming>) -> Response<ProxyBody> {
    let Some(rest) = req.uri().path().strip_prefix("/__broker/") else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "this is a proxy: send absolute-form http:// requests, CONNECT, or /__broker/<host>/<path>",
        );
    };
    let (segment, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let parsed = segment.parse::<Authority>().ok().and_then(|a| split_authority(&a, 443));
    let Some((host, port)) = parsed else {
        return refuse(StatusCode::BAD_REQUEST, "expected /__broker/<host>/<path> with a valid host name or address");
    };
    let path = match req.uri().query() {
        Some(q) => format!("{tail}?{q}"),
        None => tail.to_string(),
    };
    forward(client, req, Target { host, port, tls: true }, path).await
}

struct Target {
    host: String,
    port: u16,
    tls: bool,
}

/// The upstream TLS configuration for `target`: a terminated host's (the system roots) or the
/// path form's.
fn client_tls(listener: &Listener, terminated: bool) -> &Arc<ClientConfig> {
    match (&listener.shared.terminator, terminated) {
        (Some(t), true) => &t.upstream,
        _ => &listener.shared.tls,
    }
}

impl Target {
    fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// Host (normalised) and port of an authority; `None` for user information or a bad host.
fn split_authority(authority: &Authority, default_port: u16) -> Option<(String, u16)> {
    if authority.as_str().contains('@') {
        return None;
    }
    let host = normalize_host(authority.host())?;
    let port = match authority.port() {
        Some(p) => p.as_u16(),
        None if authority.as_str().ends_with(':') => return None,
        None => default_port,
    };
    if port == 0 {
        return None;
    }
    Some((host, port))
}

async fn forward(client: &Client, req: Request<Incoming>, target: Target, path: String) -> Response<ProxyBody> {
    let listener = &client.listener;
    let (host, port) = (target.host.as_str(), target.port);
    if !listener.allowed(host) {
        return refuse(StatusCode::FORBIDDEN, format!("{host} is not on the allowlist"));
    }
    let rule = listener.rule(host);
    // Transformations match the request as the client sent it, and apply after the rules.
    let view =
        super::transform::RequestView { host, method: req.method().as_str(), path: &path, headers: req.headers() };
    let transformed = listener.shared.transformations.matching(&view);

    // Values are fetched per request, before any connection is opened.
    let mut injected = Vec::new();
    let mut scrub_values = Vec::new();
    let rule_headers = rule.map(|r| r.headers.as_slice()).unwrap_or(&[]);
    let sources =
        rule_headers.iter().map(|h| (h, true)).chain(transformed.iter().flat_map(|t| t.set.iter()).map(|h| (h, false)));
    for ((name, source), from_rule) in sources {
        let Ok(value) = source.value().await else {
            return refuse(StatusCode::BAD_GATEWAY, format!("the {name} header for {host} could not be produced"));
        };
        let Ok(mut value) = HeaderValue::from_str(&value) else {
            return refuse(
                StatusCode::BAD_GATEWAY,
                format!("the {name} header for {host} is not a valid header value"),
            );
        };
        // A rule's header is a credential; a transformation's is when its name says so (a value
        // such as `anthropic-beta: tools-2024-04-04` is not a secret to hide).
        if from_rule || super::scrub::credential_header(name.as_str()) {
            scrub_values.extend(listener.shared.injected.note(value.to_str().unwrap_or_default()));
        }
        value.set_sensitive(true);
        injected.push((name.clone(), value));
    }
    let scrubber = if listener.shared.scrub { super::scrub::Scrubber::new(scrub_values) } else { None };

    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // hyper already answered any `Expect: 100-continue` on the client side.
    parts.headers.remove(header::EXPECT);
    if rule.is_some() {
        parts.headers.remove(header::AUTHORIZATION);
    }
    for (name, _) in &injected {
        parts.headers.remove(name);
    }
    // A later source of the same header (a transformation after a rule) replaces the earlier.
    for (name, value) in injected {
        parts.headers.insert(name, value);
    }
    // A response to scrub is asked for without a content coding, so its text can be read.
    if scrubber.is_some() {
        parts.headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    }
    let Ok(host_header) = HeaderValue::from_str(&target.host_header()) else {
        return refuse(StatusCode::BAD_REQUEST, "invalid host");
    };
    parts.headers.insert(header::HOST, host_header);
    parts.uri = match path.parse() {
        Ok(uri) => uri,
        Err(_) => return refuse(StatusCode::BAD_REQUEST, "invalid path"),
    };
    parts.version = Version::HTTP_11;
    let mut request = Request::from_parts(parts, body);

    // The client's previous upstream connection, if it went to the same place and is idle.
    let key = (host.to_string(), port, target.tls);
    let idle = client.idle.lock().await.take().filter(|idle| {
        idle.key == key
            && match (&listener.gate, idle.ip) {
                (Some(gate), Some(ip)) => gate.permits(host, ip),
                (Some(_), None) => false,
                (None, _) => true,
            }
    });
    if let Some(mut idle) = idle {
        let ready = tokio::time::timeout(Duration::from_secs(1), idle.sender.ready()).await;
        if matches!(ready, Ok(Ok(()))) {
            match idle.sender.try_send_request(request).await {
                Ok(response) => return relay(client, idle, response, scrubber).await,
                Err(mut e) => match e.take_message() {
                    // Never written: the request goes on a new connection instead.
                    Some(unsent) => request = unsent,
                    None => return upstream_failed(host, port, &e.into_error()),
                },
            }
        }
    }

    let tcp = match listener.connect(host, port).await {
        Ok(tcp) => tcp,
        Err(r) => return refuse(r.status(), r.reason(host, port)),
    };
    let ip = tcp.peer_addr().ok().map(|a| a.ip());
    let sender = if target.tls {
        match connect_tls(client_tls(listener, client.terminated), host, tcp).await {
            Ok(tls) => handshake(&listener.shared, tls).await,
            Err(r) => return refuse(r.status(), r.reason(host, port)),
        }
    } else {
        handshake(&listener.shared, tcp).await
    };
    let mut idle = match sender {
        Ok(sender) => Idle { key, ip, sender },
        Err(e) => return upstream_failed(host, port, &e),
    };
    match idle.sender.send_request(request).await {
        Ok(response) => relay(client, idle, response, scrubber).await,
        Err(e) => upstream_failed(host, port, &e),
    }
}

/// Passes an upstream response on, and keeps its connection for the client's next request.
/// With a scrubber, the values injected into the request are replaced in the response.
async fn relay(
    client: &Client,
    idle: Idle,
    response: Response<Incoming>,
    scrubber: Option<Arc<super::scrub::Scrubber>>,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // A body that fails later aborts the client's connection, so a truncated response never
    // looks complete.
    let body = match scrubber {
        Some(s) => {
            s.headers(&mut parts.headers);
            match s.body(&mut parts.headers, body) {
                Ok(body) => body,
                // The connection goes with the body left unread.
                Err(why) => return refuse(StatusCode::BAD_GATEWAY, why),
            }
        }
        None => body.map_err(|e| Box::new(e) as BoxError).boxed(),
    };
    *client.idle.lock().await = Some(idle);
    Response::from_parts(parts, body)
}

fn upstream_failed(host: &str, port: u16, e: &hyper::Error) -> Response<ProxyBody> {
    refuse(
        StatusCode::BAD_GATEWAY,
        format!("{host}:{port} failed before sending a complete response head ({})", hyper_reason(e)),
    )
}

/// A new upstream HTTP/1.1 connection; its driver stops with the broker.
async fn handshake<I>(shared: &Shared, io: I) -> Result<SendRequest<Incoming>, hyper::Error>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        hyper::client::conn::http1::Builder::new().max_buf_size(1024 * 1024).handshake(TokioIo::new(io)).await?;
    let token = shared.token.clone();
    shared.tracker.spawn(async move {
        tokio::select! {
            _ = conn => {}
            _ = token.cancelled() => {}
        }
    });
    Ok(sender)
}

async fn tunnel(listener: &Arc<Listener>, mut req: Request<Incoming>) -> Response<ProxyBody> {
    let target = req.uri().authority().filter(|a| a.port().is_some()).and_then(|a| split_authority(a, 0));
    let Some((host, port)) = target else {
        return refuse(StatusCode::BAD_REQUEST, "CONNECT needs a host:port target");
    };
    if !listener.allowed(&host) {
        return refuse(StatusCode::FORBIDDEN, format!("{host} is not on the allowlist"));
    }
    if let Some(term) = &listener.shared.terminator {
        if listener.rule(&host).is_some() || listener.shared.transformations.has_host(&host) {
            return terminate(listener, term, req, host, port);
        }
    }
    let mut upstream = match listener.connect(&host, port).await {
        Ok(tcp) => tcp,
        Err(r) => return refuse(r.status(), r.reason(&host, port)),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    // A tunnel a session's policy let open has a token of its own, cancelled when it ends.
    let (token, own) = match (&listener.gate, upstream.peer_addr()) {
        (Some(gate), Ok(peer)) => match gate.track(&host, peer.ip(), &listener.shared.token) {
            Some(t) => (t, true),
            None => return refuse(StatusCode::FORBIDDEN, format!("the network policy does not allow {host} now")),
        },
        (Some(_), Err(_)) => return refuse(StatusCode::BAD_GATEWAY, format!("{host}:{port} closed at once")),
        (None, _) => (listener.shared.token.clone(), false),
    };
    listener.shared.tracker.spawn(async move {
        let pipe = async move {
            if let Ok(upgraded) = on_upgrade.await {
                let mut client = TokioIo::new(upgraded);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        };
        tokio::select! {
            _ = pipe => {}
            _ = token.cancelled() => {}
        }
        if own {
            token.cancel();
        }
    });
    Response::new(Empty::new().map_err(|never| match never {}).boxed())
}

/// Answers a CONNECT to a host with a rule or a transformation by decrypting it: the client's TLS
/// ends here with a certificate the broker's CA signed, and each request read from it is sent on
/// as the path form's are (headers set, the upstream's TLS verified).
fn terminate(
    listener: &Arc<Listener>,
    term: &super::terminate::Terminator,
    mut req: Request<Incoming>,
    host: String,
    port: u16,
) -> Response<ProxyBody> {
    let config = match term.server_config(&host) {
        Ok(c) => c,
        Err(_) => return refuse(StatusCode::BAD_GATEWAY, format!("no certificate could be made for {host}")),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let client = Arc::new(Client { listener: listener.clone(), terminated: true, idle: tokio::sync::Mutex::new(None) });
    let token = listener.shared.token.clone();
    listener.shared.tracker.spawn(async move {
        let serve = async move {
            let Ok(upgraded) = on_upgrade.await else { return };
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            let Ok(Ok(tls)) = tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(TokioIo::new(upgraded))).await
            else {
                return;
            };
            let service = service_fn(move |req: Request<Incoming>| {
                let (client, host) = (client.clone(), host.clone());
                async move {
                    let response = if !FORWARDED_METHODS.contains(&req.method().as_str()) {
                        refuse(
                            StatusCode::METHOD_NOT_ALLOWED,
                            format!("the broker forwards only {}", FORWARDED_METHODS.join(", ")),
                        )
                    } else {
                        let path = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string();
                        forward(&client, req, Target { host, port, tls: true }, path).await
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_header_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(tls), service)
                .await;
        };
        tokio::select! {
            _ = serve => {}
            _ = token.cancelled() => {}
        }
    });
    Response::new(Empty::new().map_err(|never| match never {}).boxed())
}

/// Removes `Connection`, every header it names, and the fixed hop-by-hop set.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// The broker's own answer: short plain text naming the host and the reason.
fn refuse(status: StatusCode, reason: impl Display) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("corral broker: {reason}\n")));
    let mut response = Response::new(body.map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn hyper_reason(e: &hyper::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}
