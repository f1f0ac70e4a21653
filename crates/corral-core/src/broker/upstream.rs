//! Opening upstream connections: one resolution, the address check, a connect to the very
//! address that passed it, and the rustls client configuration of the path form.

use std::io::BufReader;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::host::{is_public_ip, parse_ip};
use crate::error::{Error, Result};

pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why no connection was opened. Each variant renders as a short reason naming the host,
/// never a header value.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Every address the host resolved to is non-public and the host is not in `allowPrivate`.
    NonPublic(IpAddr),
    /// A session's network policy allows none of the host's addresses.
    Policy(IpAddr),
    Resolve(String),
    Connect(String),
    Timeout,
    Tls(String),
}

impl Refused {
    pub(crate) fn status(&self) -> http::StatusCode {
        match self {
            Refused::NonPublic(_) | Refused::Policy(_) => http::StatusCode::FORBIDDEN,
            Refused::Timeout => http::StatusCode::GATEWAY_TIMEOUT,
            _ => http::StatusCode::BAD_GATEWAY,
        }
    }

    pub(crate) fn reason(&self, host: &str, port: u16) -> String {
        match self {
            Refused::NonPublic(ip) => {
                format!("{host} resolves to the non-public address {ip}; list the host in allowPrivate to reach it")
            }
            Refused::Policy(ip) => format!("the network policy does not allow {host} at {ip}"),
            Refused::Resolve(e) => format!("cannot resolve {host}: {e}"),
            Refused::Connect(e) => format!("cannot connect to {host}:{port}: {e}"),
            Refused::Timeout => format!("connecting to {host}:{port} timed out"),
            Refused::Tls(e) => format!("TLS with {host}:{port} failed: {e}"),
        }
    }
}

/// Which addresses a connection may go to.
pub(crate) enum Check<'a> {
    /// Public addresses, or any with `allowPrivate`'s `true`.
    Public(bool),
    /// A session's policy.
    Policy(&'a super::NetworkPolicy),
}

/// Resolves `host` once, keeps the addresses that pass `check`, and connects to those, in
/// order, until one answers. No other lookup happens, so a DNS answer cannot change between the
/// check and the connect.
pub(crate) async fn connect_tcp(host: &str, port: u16, check: Check<'_>) -> Result<TcpStream, Refused> {
    let addrs: Vec<SocketAddr> = match parse_ip(host) {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port))).await {
            Err(_) => return Err(Refused::Timeout),
            Ok(Err(e)) => return Err(Refused::Resolve(io_reason(&e))),
            Ok(Ok(it)) => it.collect(),
        },
    };
    let Some(first) = addrs.first().copied() else {
        return Err(Refused::Resolve("no address".into()));
    };
    let passes = |ip: IpAddr| match &check {
        Check::Public(private_ok) => *private_ok || is_public_ip(ip.to_canonical()),
        Check::Policy(p) => p.permits(host, ip),
    };
    let checked: Vec<SocketAddr> = addrs.into_iter().filter(|a| passes(a.ip())).collect();
    if checked.is_empty() {
        return Err(match check {
            Check::Public(_) => Refused::NonPublic(first.ip()),
            Check::Policy(_) => Refused::Policy(first.ip()),
        });
    }
    let attempt = async {
        let mut last = Refused::Connect("no address".into());
        for addr in checked {
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => last = Refused::Connect(io_reason(&e)),
            }
        }
        Err(last)
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Ok(r) => r,
        Err(_) => Err(Refused::Timeout),
    }
}

pub(crate) async fn connect_tls(
    config: &Arc<ClientConfig>,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, Refused> {
    let name = match parse_ip(host) {
        Some(ip) => ServerName::IpAddress(ip.into()),
        None => ServerName::try_from(host.to_string()).map_err(|e| Refused::Tls(e.to_string()))?,
    };
    let connector = TlsConnector::from(config.clone());
    match tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp)).await {
        Err(_) => Err(Refused::Timeout),
        Ok(Err(e)) => Err(Refused::Tls(e.to_string())),
        Ok(Ok(s)) => Ok(s),
    }
}

/// The certificates of a PEM text; none, or one that does not parse, is a `ConfigurationError`
/// that starts with `what`.
pub(crate) fn pem_certs(pem: &str, what: &str) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>> {
    let mut reader = BufReader::new(pem.as_bytes());
    let certs = rustls_pemfile::certs(&mut reader)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(format!("{what} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::config(format!("{what} holds no PEM certificate")));
    }
    Ok(certs)
}

/// The client configuration of the path form: the webpki roots plus `extra_ca_pem`, HTTP/1.1.
pub(crate) fn tls_config(extra_ca_pem: &[String]) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    client_config(roots, extra_ca_pem)
}

/// An HTTP/1.1 client configuration trusting `roots` plus `extra_ca_pem` (the broker's `ca`).
pub(crate) fn client_config(mut roots: RootCertStore, extra_ca_pem: &[String]) -> Result<Arc<ClientConfig>> {
    for (i, pem) in extra_ca_pem.iter().enumerate() {
        for cert in pem_certs(pem, &format!("createCredentialBroker: ca[{i}]"))? {
            roots.add(cert).map_err(|e| {
                Error::config(format!("createCredentialBroker: ca[{i}] holds an unusable certificate: {e}"))
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("TLS setup failed: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// An I/O error's kind ("connection refused"), without OS details that could vary.
fn io_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(_) => e.kind().to_string(),
        None => e.to_string(),
    }
}
