//! The connection to a Kubernetes API server: which configuration (in-cluster, `KUBECONFIG`,
//! `~/.kube/config`, or a path the caller gives), the credential it names (a bearer token, a
//! token file, an exec plugin, a client certificate), and TLS through corral's own rustls
//! configuration: the cluster's certificate authority from the configuration, else the public
//! roots corral ships. No message here names a token or a key.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Config;
use tower::{BoxError, ServiceBuilder};

use crate::error::{Error, Result};

/// How long opening a connection to the API server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the configuration comes from (`kubeconfig`, `context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Source {
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
}

/// A client and the namespace its configuration names.
#[derive(Clone)]
pub(crate) struct Connection {
    pub client: kube::Client,
    pub namespace: String,
    /// The API server's address, for messages.
    pub server: String,
}

fn config_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::config(format!("KubernetesSandbox: {what}: {}", scrub(&e.to_string())))
}

/// A message from the client library with anything that looks like a credential cut out: the
/// value after `Bearer`, `token`, `password` or `secret` (as `: `, `=` or a space), on its first
/// line only (a parser's message may quote the configuration below it).
pub(crate) fn scrub(message: &str) -> String {
    let first = message.lines().next().unwrap_or("");
    let lower = first.to_ascii_lowercase();
    let mut out = String::with_capacity(first.len());
    let mut at = 0;
    while let Some((i, key)) = ["bearer ", "token", "password", "secret"]
        .iter()
        .filter_map(|k| lower[at..].find(k).map(|i| (at + i, *k)))
        .min_by_key(|(i, _)| *i)
    {
        let mut value = i + key.len();
        while value < first.len() && matches!(first.as_bytes()[value], b':' | b'=' | b' ' | b'"' | b'\'') {
            value += 1;
        }
        let end = first[value..]
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
            .map_or(first.len(), |e| value + e);
        out.push_str(&first[at..value]);
        if end > value {
            out.push_str("[redacted]");
        }
        at = end.max(value);
    }
    out.push_str(&first[at..]);
    out
}

/// In a pod with a service account (`KUBERNETES_SERVICE_HOST` and the account's token).
fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::path::Path::new("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()
}

/// The configuration: `source.kubeconfig` when given; else the in-cluster service account
/// (unless a `context` is asked for, which only a kubeconfig has), then `KUBECONFIG`, then
/// `~/.kube/config`.
async fn load(source: &Source) -> Result<Config> {
    let options = KubeConfigOptions { context: source.context.clone(), ..Default::default() };
    if let Some(path) = &source.kubeconfig {
        let file =
            Kubeconfig::read_from(path).map_err(|e| config_error(&format!("cannot read kubeconfig {path}"), e))?;
        return Config::from_custom_kubeconfig(file, &options)
            .await
            .map_err(|e| config_error(&format!("kubeconfig {path}"), e));
    }
    if source.context.is_none() && in_cluster() {
        return Config::incluster().map_err(|e| config_error("the in-cluster service account", e));
    }
    Config::from_kubeconfig(&options).await.map_err(|e| {
        config_error("no usable configuration (no in-cluster service account, KUBECONFIG or ~/.kube/config)", e)
    })
}

fn pem_items(pem: &[u8], what: &str) -> Result<Vec<rustls_pemfile::Item>> {
    rustls_pemfile::read_all(&mut std::io::Cursor::new(pem))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| Error::config(format!("KubernetesSandbox: the {what} is not PEM")))
}

/// A `*-data` field (base64 of PEM) or the file a path field names.
fn data_or_file(data: Option<&str>, file: Option<&str>, what: &str) -> Result<Option<Vec<u8>>> {
    use base64::Engine;
    if let Some(d) = data {
        let clean: String = d.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(clean)
            .map(Some)
            .map_err(|_| Error::config(format!("KubernetesSandbox: the {what} data is not base64")));
    }
    match file {
        Some(f) => std::fs::read(f)
            .map(Some)
            .map_err(|e| Error::config(format!("KubernetesSandbox: cannot read the {what} file {f}: {e}"))),
        None => Ok(None),
    }
}

/// The client certificate and key the configuration names, if any.
fn identity(
    config: &Config,
) -> Result<Option<(Vec<rustls::pki_types::CertificateDer<'static>>, rustls::pki_types::PrivateKeyDer<'static>)>> {
    use secrecy::ExposeSecret;
    let a = &config.auth_info;
    let cert =
        data_or_file(a.client_certificate_data.as_deref(), a.client_certificate.as_deref(), "client certificate")?;
    let key_data = a.client_key_data.as_ref().map(|k| k.expose_secret().to_string());
    let key = data_or_file(key_data.as_deref(), a.client_key.as_deref(), "client key")?;
    let (Some(cert), Some(key)) = (cert, key) else { return Ok(None) };
    let certs: Vec<_> = pem_items(&cert, "client certificate")?
        .into_iter()
        .filter_map(|i| match i {
            rustls_pemfile::Item::X509Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    let key = pem_items(&key, "client key")?
        .into_iter()
        .find_map(|i| match i {
            rustls_pemfile::Item::Pkcs1Key(k) => Some(rustls::pki_types::PrivateKeyDer::Pkcs1(k)),
            rustls_pemfile::Item::Pkcs8Key(k) => Some(rustls::pki_types::PrivateKeyDer::Pkcs8(k)),
            rustls_pemfile::Item::Sec1Key(k) => Some(rustls::pki_types::PrivateKeyDer::Sec1(k)),
            _ => None,
        })
        .ok_or_else(|| Error::config("KubernetesSandbox: the client key holds no private key"))?;
    if certs.is_empty() {
        return Err(Error::config("KubernetesSandbox: the client certificate holds no certificate"));
    }
    Ok(Some((certs, key)))
}

/// TLS for the API server: the configuration's certificate authority (else the public roots),
/// its client certificate, ring as the provider. `insecure-skip-tls-verify` is refused.
fn tls(config: &Config) -> Result<rustls::ClientConfig> {
    if config.accept_invalid_certs {
        return Err(Error::config(
            "KubernetesSandbox: the configuration sets insecure-skip-tls-verify; corral verifies the API server's certificate (give its certificate-authority instead).",
        ));
    }
    let mut roots = rustls::RootCertStore::empty();
    match &config.root_cert {
        Some(certs) => {
            for der in certs {
                roots.add(rustls::pki_types::CertificateDer::from(der.clone())).map_err(|e| {
                    Error::config(format!("KubernetesSandbox: the cluster's certificate authority is not usable: {e}"))
                })?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("KubernetesSandbox: TLS: {e}")))?
        .with_root_certificates(roots);
    // hyper-rustls sets the ALPN protocols itself (HTTP/1.1 only: exec upgrades need it).
    Ok(match identity(config)? {
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| Error::config(format!("KubernetesSandbox: the client certificate is not usable: {e}")))?,
        None => builder.with_no_client_auth(),
    })
}

/// Connects (lazily: nothing is sent until the first request).
pub(crate) async fn connect(source: &Source, namespace: Option<&str>) -> Result<Connection> {
    let config = load(source).await?;
    let server = config.cluster_url.to_string();
    let tls = tls(&config)?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    let builder = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_or_http();
    let builder = match &config.tls_server_name {
        Some(name) => {
            let name = rustls::pki_types::ServerName::try_from(name.clone())
                .map_err(|e| Error::config(format!("KubernetesSandbox: tls-server-name: {e}")))?;
            builder.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => builder,
    };
    let https = builder.enable_http1().wrap_connector(http);
    let hyper_client: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(https);
    // An exec plugin's failure carries its command line, environment and output: only its kind
    // is said.
    let auth = config.auth_layer().map_err(|_| {
        Error::config(
            "KubernetesSandbox: the credential could not be obtained (an exec credential plugin or a token file of the kubeconfig failed).",
        )
    })?;
    let headers = config.extra_headers_layer().map_err(|e| config_error("the configuration's headers", e))?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .service(hyper_client);
    let namespace = namespace.map(str::to_string).unwrap_or_else(|| config.default_namespace.clone());
    Ok(Connection { client: kube::Client::new(service, namespace.clone()), namespace, server })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_in_a_message_is_cut_out() {
        assert_eq!(
            scrub("sent Authorization: Bearer abc.def-ghi and failed"),
            "sent Authorization: Bearer [redacted] and failed"
        );
        assert_eq!(scrub("\"Bearer xyz\""), "\"Bearer [redacted]\"");
        assert_eq!(scrub("bad token: s3cr3t, then"), "bad token: [redacted], then");
        assert_eq!(scrub("password=hunter2 client-secret=abc"), "password=[redacted] client-secret=[redacted]");
        assert_eq!(scrub("line one\ntoken: on the second line"), "line one");
        assert_eq!(scrub("nothing here"), "nothing here");
    }
}
