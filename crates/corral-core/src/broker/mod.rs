//! The credential broker (spec "Credential broker", issue 6): a local HTTP/1.1 forward proxy
//! that adds auth headers to requests for the hosts it is given, so a command only ever sees
//! the proxy's address, and that lets requests out only to an allowlist.
//!
//! - Allowlist: rule hosts plus `allow` (a [`Broker::listen`] listener: rule hosts plus its own
//!   `allow`). Any other host gets a 403 before a connection is opened.
//! - A host is resolved once; addresses that are not public (see [`is_public_ip`]) are dropped
//!   unless the host is in `allow_private`, and the connection goes to an address that passed.
//! - Plain-HTTP absolute-form requests and the path form `/__broker/<host>/<path>` (forwarded
//!   to `https://<host>/<path>` over rustls) to a rule host get the rule's headers, fetched per
//!   request; the client's own `Authorization` and any header of the same name are replaced.
//! - `CONNECT` is checked against the allowlist, then bytes pass untouched.
//! - Header values never reach `env`, an error response or a log (the broker logs nothing).
//! - Bad input gets hyper's 400/431 or the broker's 400; an upstream that fails before its
//!   response head is complete gets a 502. One that fails inside its body (the head already
//!   passed on) has the client's connection aborted, so the cut body never looks complete.
//! - A client's keep-alive connection reuses its previous upstream connection for its next
//!   request to the same host, port and scheme; upstream connections are never shared between
//!   clients.

mod config;
pub use config::ListenOptions;
mod header;
mod policy;
pub(crate) mod terminate;
pub use policy::NetworkPolicy;
pub(crate) mod host;
pub(crate) mod proxy;
mod scrub;
pub mod transform;
pub(crate) mod upstream;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http::HeaderName;
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use host::parse_ip;
pub use host::{is_public_ip, validate_host_pattern, HostPattern};
pub use proxy::Gate;
use proxy::{Listener, Rule, Shared};

use crate::error::{Code, Error, Result};

/// Produces one header value, called once per forwarded request. In the binding this is a JS
/// string or a (possibly async) function.
#[async_trait]
pub trait HeaderSource: Send + Sync {
    async fn value(&self) -> Result<String>;
    /// The value, when it never changes (known before any request).
    fn fixed(&self) -> Option<&str> {
        None
    }
}

/// A header value that never changes. Its `Debug` output hides the value.
#[derive(Clone)]
pub struct FixedHeader(String);

impl FixedHeader {
    pub fn new(value: impl Into<String>) -> Self {
        FixedHeader(value.into())
    }
    /// Shorthand for a rule entry: `("authorization".into(), FixedHeader::arc("Bearer …"))`.
    pub fn arc(value: impl Into<String>) -> Arc<dyn HeaderSource> {
        Arc::new(FixedHeader::new(value))
    }
}

impl fmt::Debug for FixedHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FixedHeader(<redacted>)")
    }
}

#[async_trait]
impl HeaderSource for FixedHeader {
    async fn value(&self) -> Result<String> {
        Ok(self.0.clone())
    }
    fn fixed(&self) -> Option<&str> {
        Some(&self.0)
    }
}

/// A rule's headers: (header name, where its value comes from).
pub type RuleHeaders = Vec<(String, Arc<dyn HeaderSource>)>;

/// The options of `createCredentialBroker`.
#[derive(Clone, Default)]
pub struct BrokerConfig {
    /// Host pattern → headers to add (name, source). Rule hosts are allowed implicitly.
    pub rules: Vec<(String, RuleHeaders)>,
    /// More hosts reachable, without added headers.
    pub allow: Vec<String>,
    /// Hosts that may resolve to non-public addresses (loopback, private, link-local, …).
    /// This lifts only the address check: the host must still be allowed.
    pub allow_private: Vec<String>,
    /// The listening address: an IP literal or `localhost`; default `127.0.0.1`.
    pub host: Option<String>,
    /// Default 0: an ephemeral port.
    pub port: Option<u16>,
    /// Extra trusted CA certificates (PEM) for the upstream TLS of the path form.
    pub extra_ca_pem: Vec<String>,
    /// Request transformations, applied after the rules (`transform.rs`).
    pub transformations: Vec<transform::Transformation>,
    /// `tls: 'terminate'`: HTTPS to a host with a rule or a transformation is decrypted here
    /// (`terminate.rs`).
    pub terminate_tls: bool,
    /// `scrub: false`: responses are passed on without replacing injected values (`scrub.rs`).
    pub no_scrub: bool,
}

impl fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules: Vec<(&String, Vec<&String>)> =
            self.rules.iter().map(|(h, hs)| (h, hs.iter().map(|(n, _)| n).collect())).collect();
        f.debug_struct("BrokerConfig")
            .field("rules", &rules)
            .field("allow", &self.allow)
            .field("allow_private", &self.allow_private)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("extra_ca_pem", &self.extra_ca_pem.len())
            .finish()
    }
}

/// A running broker. Every listener and connection stops on [`Broker::close`], or when the last
/// reference is dropped.
pub struct Broker {
    shared: Arc<Shared>,
    local: SocketAddr,
    url: String,
    closed: AtomicBool,
    /// The listeners `listen` added, by URL, each stoppable on its own (`unlisten`).
    /// The task that accepts on it is awaited on `unlisten`, so the port is closed when it returns.
    extra: std::sync::Mutex<
        std::collections::HashMap<String, (tokio_util::sync::CancellationToken, tokio::task::JoinHandle<()>)>,
    >,
}

impl Broker {
    /// Validates the options (a URL, a port or a malformed name as a host is a
    /// `ConfigurationError`), then listens on `host:port`.
    pub async fn start(config: BrokerConfig) -> Result<Arc<Broker>> {
        let mut rules: Vec<Rule> = Vec::new();
        for (pattern, headers) in &config.rules {
            let pattern = HostPattern::parse(pattern)?;
            if rules.iter().any(|r| r.pattern == pattern) {
                return Err(Error::config(format!("rules name the host {pattern} twice")));
            }
            let mut parsed: Vec<(HeaderName, Arc<dyn HeaderSource>)> = Vec::new();
            for (name, source) in headers {
                let header = header::header_name(name, &format!("rules[\"{pattern}\"]"))?;
                if parsed.iter().any(|(n, _)| *n == header) {
                    return Err(Error::config(format!("rules[\"{pattern}\"]: the {header} header is given twice")));
                }
                parsed.push((header, source.clone()));
            }
            rules.push(Rule { pattern, headers: parsed });
        }
        let allow = parse_patterns(&config.allow)?;
        let allow_private = parse_patterns(&config.allow_private)?;
        let ip = match config.host.as_deref() {
            None | Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(h) => parse_ip(h)
                .ok_or_else(|| Error::config(format!("host must be an IP address or localhost, not \"{h}\"")))?,
        };
        let tls = upstream::tls_config(&config.extra_ca_pem)?;
        let listener = bind(SocketAddr::new(ip, config.port.unwrap_or(0)))?;
        let local = listener.local_addr().map_err(|e| Error::new(Code::Io, e.to_string()))?;
        let transformations = transform::Transformations::default();
        transformations.set(config.transformations.clone());
        let terminator =
            if config.terminate_tls { Some(terminate::Terminator::new(&config.extra_ca_pem)?) } else { None };
        let shared = Arc::new(Shared {
            rules,
            transformations,
            terminator,
            allow_private,
            tls,
            token: CancellationToken::new(),
            tracker: TaskTracker::new(),
            scrub: !config.no_scrub,
            injected: Default::default(),
        });
        // Fixed values are secrets to every redactor from the start (a function's when it gives one).
        for (_, headers) in &config.rules {
            for (_, source) in headers {
                if let Some(v) = source.fixed() {
                    shared.injected.note_fixed(v);
                }
            }
        }
        let stop = shared.token.clone();
        drop(accept_loop(
            Arc::new(Listener { shared: shared.clone(), allow, local, gate: None }),
            listener,
            None,
            stop,
        ));
        Ok(Arc::new(Broker {
            shared,
            local,
            url: format!("http://{local}"),
            closed: AtomicBool::new(false),
            extra: Default::default(),
        }))
    }

    /// `setTransformations`: replaces every transformation.
    pub fn set_transformations(&self, list: Vec<transform::Transformation>) {
        self.shared.transformations.set(list);
    }

    /// `addTransformations`: replaces those with the same match and header names, appends the
    /// rest.
    pub fn add_transformations(&self, list: Vec<transform::Transformation>) {
        self.shared.transformations.add(list);
    }

    /// With `tls: 'terminate'`: the CA certificate (PEM) commands trust for terminated hosts.
    pub fn ca(&self) -> Option<String> {
        self.shared.terminator.as_ref().map(|t| t.ca_pem().to_string())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The address of the main listener.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY`, and their lower-case forms. `NO_PROXY` holds
    /// the broker's own address and the loopback names, so the path form is sent to it directly.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut no_proxy = vec![self.local.ip().to_string()];
        for name in ["localhost", "127.0.0.1", "::1"] {
            if !no_proxy.iter().any(|n| n == name) {
                no_proxy.push(name.to_string());
            }
        }
        let no_proxy = no_proxy.join(",");
        let mut env = BTreeMap::new();
        for (key, value) in [("HTTP_PROXY", &self.url), ("HTTPS_PROXY", &self.url), ("NO_PROXY", &no_proxy)] {
            env.insert(key.to_string(), value.clone());
            env.insert(key.to_ascii_lowercase(), value.clone());
        }
        if let Some(t) = &self.shared.terminator {
            for key in terminate::BUNDLE_VARS {
                env.insert(key.to_string(), t.bundle().to_string_lossy().into_owned());
            }
        }
        env
    }

    /// `http://127.0.0.1:PORT/__broker/<host>`: requests under it go to `https://<host>/…`
    /// with the rule's headers added. `host` may carry a port (`example.com:8443`).
    pub fn base_url(&self, host: &str) -> String {
        format!("{}/__broker/{}", self.url, host.trim().trim_end_matches('/'))
    }

    /// Adds a listener on `host` (an IP address) and an ephemeral port that serves only peers in
    /// the `clients` subnet (CIDR, or one address) — any other peer is dropped before a byte is
    /// read — with the rule hosts plus `allow` as its allowlist. Returns its URL.
    pub async fn listen(&self, host: &str, clients: &str, allow: Vec<String>) -> Result<String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::config("The credential broker is closed."));
        }
        let ip = parse_ip(host)
            .ok_or_else(|| Error::config(format!("listen: host must be an IP address, not \"{host}\"")))?;
        let clients_net = match clients.parse::<IpNet>() {
            Ok(net) => net,
            Err(_) => match parse_ip(clients) {
                Some(ip) => IpNet::from(ip),
                None => {
                    return Err(Error::config(format!(
                        "listen: clients must be a subnet such as 172.18.0.0/16, not \"{clients}\""
                    )))
                }
            },
        };
        let allow = parse_patterns(&allow)?;
        let listener = bind(SocketAddr::new(ip, 0))?;
        let local = listener.local_addr().map_err(|e| Error::new(Code::Io, e.to_string()))?;
        let stop = self.shared.token.child_token();
        let task = accept_loop(
            Arc::new(Listener { shared: self.shared.clone(), allow, local, gate: None }),
            listener,
            Some(clients_net.trunc()),
            stop.clone(),
        );
        let url = format!("http://{local}");
        self.extra.lock().unwrap().insert(url.clone(), (stop, task));
        Ok(url)
    }

    /// Serves `socket` (a listener a session's keeper made inside the session's network
    /// namespace, so only the session's commands reach it) under `gate`'s policy, with this
    /// broker's rules. Returns a key for `unlisten`.
    pub fn serve_session(&self, socket: std::net::TcpListener, gate: Arc<Gate>) -> Result<String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::config("The credential broker is closed."));
        }
        let io = |e: std::io::Error| Error::new(Code::Io, format!("serve_session: {e}"));
        socket.set_nonblocking(true).map_err(io)?;
        let local = socket.local_addr().map_err(io)?;
        let socket = TcpListener::from_std(socket).map_err(io)?;
        let stop = self.shared.token.child_token();
        let listener = Listener { shared: self.shared.clone(), allow: Vec::new(), local, gate: Some(gate) };
        let task = accept_loop(Arc::new(listener), socket, None, stop.clone());
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let key = format!("session:{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.extra.lock().unwrap().insert(key.clone(), (stop, task));
        Ok(key)
    }

    /// Stops a listener `listen` added (its URL); the broker's own listener is not affected.
    /// Returns once the listening socket is closed: a connection made after it is refused.
    pub async fn unlisten(&self, url: &str) -> Result<()> {
        let entry = self.extra.lock().unwrap().remove(url);
        match entry {
            Some((stop, task)) => {
                stop.cancel();
                let _ = task.await;
                Ok(())
            }
            None => Err(Error::config(format!("unlisten: no listener at {url}"))),
        }
    }

    /// Stops every listener and drops every open connection and tunnel; returns once all of
    /// them are gone. Idempotent.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.shared.token.cancel();
        self.shared.tracker.close();
        self.shared.tracker.wait().await;
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shared.token.cancel();
    }
}

impl fmt::Debug for Broker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Broker").field("url", &self.url).finish_non_exhaustive()
    }
}

fn parse_patterns(list: &[String]) -> Result<Vec<HostPattern>> {
    list.iter().map(|s| HostPattern::parse(s)).collect()
}

/// Pending connections the kernel queues before `accept` (capped by `somaxconn`). Tokio's
/// `TcpListener::bind` uses 128, which a burst of a few hundred clients overflows: the extra
/// SYNs are dropped and those clients stall for a 1 s retransmission.
const BACKLOG: u32 = 4096;

fn bind(addr: SocketAddr) -> Result<TcpListener> {
    let listen = || -> std::io::Result<TcpListener> {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(BACKLOG)
    };
    listen().map_err(|e| Error::new(Code::Io, format!("The credential broker cannot listen on {addr}: {}", e.kind())))
}

fn accept_loop(
    listener: Arc<Listener>,
    socket: TcpListener,
    clients: Option<IpNet>,
    stop: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let shared = listener.shared.clone();
    shared.clone().tracker.spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = stop.cancelled() => break,
                accepted = socket.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    if let Some(net) = &clients {
                        if !net.contains(&peer.ip().to_canonical()) {
                            // Reset, not a graceful close: nothing was read and nothing is sent.
                            let _ = stream.set_zero_linger();
                            drop(stream);
                            continue;
                        }
                    }
                    let _ = stream.set_nodelay(true);
                    shared.tracker.spawn(proxy::serve_connection(listener.clone(), stream));
                }
                // Out of descriptors and the like: wait a little instead of spinning.
                Err(_) => tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                },
            }
        }
    })
}
