//! TLS to a Docker daemon on TCP (`tcp://host:2376` with `--tlsverify`): the daemon's CA, and the
//! client certificate and key it asks for, from the `tls` option or, as the docker CLI reads
//! them, from `DOCKER_TLS_VERIFY` and `DOCKER_CERT_PATH` (`ca.pem`, `cert.pem`, `key.pem`).

use std::io::BufReader;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use crate::broker::upstream::pem_certs;
use crate::error::{Error, Result};

/// `tls: { ca, cert, key }`: each the PEM text itself or the path of a file holding it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DockerTls {
    /// The CA that signed the daemon's certificate; without it, the public web's roots.
    pub ca: Option<String>,
    /// The client certificate and its key, which a daemon with `--tlsverify` requires.
    pub cert: Option<String>,
    pub key: Option<String>,
}

impl DockerTls {
    /// From `DOCKER_TLS_VERIFY` (set and not `0`) and `DOCKER_CERT_PATH` (default `~/.docker`).
    pub(crate) fn from_env() -> Option<DockerTls> {
        std::env::var("DOCKER_TLS_VERIFY").ok().filter(|v| !v.is_empty() && v != "0")?;
        let dir = std::env::var_os("DOCKER_CERT_PATH")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
        let file = |name: &str| Some(dir.join(name).to_string_lossy().into_owned());
        Some(DockerTls { ca: file("ca.pem"), cert: file("cert.pem"), key: file("key.pem") })
    }

    /// The client configuration; a file that cannot be read or a PEM text that does not parse is a
    /// `ConfigurationError` naming it.
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>> {
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(ca) => {
                for cert in pem_certs(&pem("ca", ca)?, "SubprocessSandbox tls.ca")? {
                    roots.add(cert).map_err(|e| {
                        Error::config(format!("SubprocessSandbox tls.ca holds an unusable certificate: {e}"))
                    })?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::config(format!("TLS setup failed: {e}")))?
            .with_root_certificates(roots);
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = pem_certs(&pem("cert", cert)?, "SubprocessSandbox tls.cert")?;
                let key_pem = pem("key", key)?;
                let key = rustls_pemfile::private_key(&mut BufReader::new(key_pem.as_bytes()))
                    .map_err(|e| Error::config(format!("SubprocessSandbox tls.key is not valid PEM: {e}")))?
                    .ok_or_else(|| Error::config("SubprocessSandbox tls.key holds no PEM private key"))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    Error::config(format!("SubprocessSandbox tls.cert and tls.key do not make a client identity: {e}"))
                })?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => return Err(Error::config("SubprocessSandbox tls: cert and key go together; give both or neither.")),
        };
        Ok(Arc::new(config))
    }
}

/// A PEM text as given, or read from the file it names.
fn pem(name: &str, value: &str) -> Result<String> {
    if value.contains("-----BEGIN") {
        return Ok(value.to_string());
    }
    std::fs::read_to_string(value).map_err(|e| {
        Error::config(format!(
            "SubprocessSandbox tls.{name}: \"{value}\" is neither PEM text nor a readable file ({e})"
        ))
    })
}
