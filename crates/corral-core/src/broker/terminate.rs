//! TLS termination (`tls: 'terminate'`): HTTPS to a host with a rule or a transformation is
//! decrypted by the broker, so its headers can be set, and sent on over a new TLS connection that
//! the broker verifies. Each broker has its own CA, made at start; its key stays in this process.
//! Commands trust the CA through a bundle file (the system roots plus the CA) that the usual
//! variables name (`NODE_EXTRA_CA_CERTS`, `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`,
//! `GIT_SSL_CAINFO`). Leaf certificates are made per host on first use.
//!
//! "System roots" is the operating system's trust store — the host's `SSL_CERT_FILE` when set,
//! else the distribution's bundle — not a built-in list, so a machine whose egress re-signs TLS
//! with its own CA keeps working inside.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::host::parse_ip;
use crate::error::{Code, Error, Result};

/// The variables that name the bundle.
pub const BUNDLE_VARS: [&str; 5] =
    ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"];

/// Where distributions keep their trust store, in the order they are looked for.
const SYSTEM_BUNDLES: [&str; 5] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/usr/local/etc/openssl/cert.pem",
];

/// The system trust store as PEM text: the host's `SSL_CERT_FILE`, else the first distribution
/// bundle found; `None` when there is none.
pub(crate) fn system_roots_pem() -> Option<String> {
    let given = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    given
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
        .find_map(|p| std::fs::read_to_string(p).ok().filter(|t| t.contains("-----BEGIN CERTIFICATE-----")))
}

/// One broker's CA, its leaf certificates and the bundle file commands trust.
pub(crate) struct Terminator {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    /// The directory holding the bundle, removed when the broker goes.
    dir: PathBuf,
    bundle: PathBuf,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    /// Upstream TLS for terminated hosts: the system roots (or the built-in list where the
    /// machine has none) plus the broker's `ca`.
    pub upstream: Arc<ClientConfig>,
}

impl Drop for Terminator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_err(e: impl std::fmt::Display) -> Error {
    Error::new(Code::Io, format!("The credential broker could not set up TLS termination: {e}"))
}

/// A directory for the bundle that sandboxed commands can read: `/var/tmp` where it is writable
/// (LinuxSandbox gives commands a private `/tmp`), else the temporary directory.
fn bundle_dir() -> Result<PathBuf> {
    let bases = [PathBuf::from("/var/tmp"), std::env::temp_dir()];
    let mut last = None;
    for base in bases.iter().filter(|b| b.is_dir()) {
        let dir = base.join(format!("corral-broker-ca-{:016x}", rand::random::<u64>()));
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
        match builder.create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(e),
        }
    }
    Err(tls_err(last.map_or("no temporary directory".to_string(), |e| e.to_string())))
}

impl Terminator {
    /// A new CA, and the bundle file; `extra_ca_pem` is trusted upstream besides the system roots.
    pub fn new(extra_ca_pem: &[String]) -> Result<Terminator> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, format!("corral credential broker CA {:08x}", rand::random::<u32>()));
        params.distinguished_name.push(DnType::OrganizationName, "corral");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(365);
        let key = KeyPair::generate().map_err(tls_err)?;
        let cert = params.self_signed(&key).map_err(tls_err)?;
        let ca_pem = cert.pem();
        let system = system_roots_pem();
        let dir = bundle_dir()?;
        let bundle = dir.join("ca-bundle.pem");
        let text = format!("{}{}\n{ca_pem}", system.as_deref().unwrap_or(""), if system.is_some() { "\n" } else { "" });
        if let Err(e) = std::fs::write(&bundle, text) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(tls_err(e));
        }
        let upstream = match upstream_config(system.as_deref(), extra_ca_pem) {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        Ok(Terminator {
            issuer: Issuer::new(params, key),
            ca_pem,
            dir,
            bundle,
            leaves: Mutex::new(HashMap::new()),
            upstream,
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn bundle(&self) -> &Path {
        &self.bundle
    }

    /// The server configuration presenting a certificate for `host`, made on first use.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = leaves.get(host) {
            return Ok(c.clone());
        }
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        params.subject_alt_names = vec![match parse_ip(host) {
            Some(ip) => SanType::IpAddress(ip),
            None => SanType::DnsName(host.to_string().try_into().map_err(tls_err)?),
        }];
        params.distinguished_name.push(DnType::CommonName, host);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(90);
        let key = KeyPair::generate().map_err(tls_err)?;
        let leaf = params.signed_by(&key, &self.issuer).map_err(tls_err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        leaves.insert(host.to_string(), config.clone());
        Ok(config)
    }
}

/// The client configuration for terminated hosts' upstreams.
fn upstream_config(system: Option<&str>, extra_ca_pem: &[String]) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    match system {
        Some(pem) => {
            let mut reader = std::io::BufReader::new(pem.as_bytes());
            let certs: Vec<CertificateDer<'static>> =
                rustls_pemfile::certs(&mut reader).filter_map(|c| c.ok()).collect();
            roots.add_parsable_certificates(certs);
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    super::upstream::client_config(roots, extra_ca_pem)
}
