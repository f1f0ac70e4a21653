//! The connection string, and TLS as it asks: `sslmode=disable` or `prefer` (the default) connect
//! in the clear; `require` encrypts (and checks the chain when `sslrootcert` names roots, as
//! libpq does); `verify-ca` checks the chain; `verify-full` the chain and the host name. Roots
//! are `sslrootcert`'s, else the system's (Mozilla's where the system has none). rustls, ring.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

pub struct Parsed {
    pub config: tokio_postgres::Config,
    pub tls: Option<MakeRustlsConnect>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Clear,
    Require,
    VerifyCa,
    VerifyFull,
}

fn bad(why: impl std::fmt::Display) -> Error {
    Error::config(format!(
        "PostgresToolStore: connectionString is not a PostgreSQL connection string ({why}); expected postgres://user:password@host:port/database[?sslmode=verify-full]."
    ))
}

/// Takes `sslmode` and `sslrootcert` out of the string (tokio-postgres knows neither
/// `verify-*` nor `sslrootcert`) and parses the rest.
pub fn parse(s: &str) -> Result<Parsed> {
    let (rest, mode, rootcert) = take_tls_params(s)?;
    let mut config: tokio_postgres::Config =
        rest.parse().map_err(|e: tokio_postgres::Error| bad(parse_error(&e.to_string())))?;
    if config.get_hosts().is_empty() {
        return Err(bad("it names no host"));
    }
    if config.get_user().is_none() {
        return Err(bad("it names no user"));
    }
    if mode == Mode::Clear {
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
        return Ok(Parsed { config, tls: None });
    }
    config.ssl_mode(tokio_postgres::config::SslMode::Require);
    let roots = match &rootcert {
        Some(path) => Some(roots_from_file(path)?),
        None if mode == Mode::Require => None,
        None => Some(system_roots()),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("PostgresToolStore: TLS: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Lenient { provider, chain: None }),
        Some(roots) => {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| Error::config(format!("PostgresToolStore: TLS roots: {e}")))?;
            if mode == Mode::VerifyFull {
                webpki
            } else {
                Arc::new(Lenient { provider, chain: Some(webpki) })
            }
        }
    };
    let tls = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
    Ok(Parsed { config, tls: Some(MakeRustlsConnect::new(tls)) })
}

/// The parser's message, built again without any text of the connection string but an option's
/// name: `unknown option \`password:secret\`` names the key `password`, and a character the
/// parser did not expect is named by its position only.
fn parse_error(text: &str) -> String {
    if let Some(rest) = text.split("unknown option `").nth(1) {
        let key: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').take(40).collect();
        return if key.is_empty() {
            "an option is malformed (write key=value)".to_string()
        } else {
            format!("the option '{key}' is malformed or unknown (write {key}=value)")
        };
    }
    if let Some(rest) = text.split("invalid value for option `").nth(1) {
        let key: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').take(40).collect();
        return format!("the value of '{key}' is invalid");
    }
    if let Some(rest) = text.split("unexpected character at byte ").nth(1) {
        let at: String = rest.chars().take_while(char::is_ascii_digit).collect();
        return format!("it is malformed at byte {at}");
    }
    if text.contains("unexpected EOF") {
        return "it ends in the middle of an option".to_string();
    }
    "it is malformed".to_string()
}

fn mode_of(v: &str) -> Result<Mode> {
    Ok(match v {
        "disable" | "allow" | "prefer" => Mode::Clear,
        "require" => Mode::Require,
        "verify-ca" => Mode::VerifyCa,
        "verify-full" => Mode::VerifyFull,
        _ => {
            return Err(bad("its sslmode is none of disable, prefer, require, verify-ca, verify-full"));
        }
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The string without its TLS parameters, the mode and the root file.
fn take_tls_params(s: &str) -> Result<(String, Mode, Option<String>)> {
    let (mut mode, mut rootcert) = (Mode::Clear, None);
    if s.starts_with("postgres://") || s.starts_with("postgresql://") {
        let Some((base, query)) = s.split_once('?') else { return Ok((s.to_string(), mode, None)) };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "sslmode" => mode = mode_of(&percent_decode(v))?,
                "sslrootcert" => rootcert = Some(percent_decode(v)),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        return Ok((rest, mode, rootcert));
    }
    // key=value form: values may be quoted with '…' and use \' and \\ inside.
    let mut kept = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            // Named by its key only: `password:secret` is the key `password` written wrong.
            let name: String = key.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').take(40).collect();
            return Err(bad(if name.is_empty() {
                "an option has no value (write key=value)".to_string()
            } else {
                format!("the option '{name}' has no value (write {name}=value)")
            }));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let (mut raw, mut value) = (String::new(), String::new());
        if chars.peek() == Some(&'\'') {
            raw.push(chars.next().unwrap_or('\''));
            let mut closed = false;
            while let Some(c) = chars.next() {
                raw.push(c);
                match c {
                    '\\' => {
                        if let Some(n) = chars.next() {
                            raw.push(n);
                            value.push(n);
                        }
                    }
                    '\'' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                return Err(bad("a quoted value is not closed"));
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                raw.push(c);
                value.push(c);
                chars.next();
            }
        }
        match key.as_str() {
            "sslmode" => mode = mode_of(&value)?,
            "sslrootcert" => rootcert = Some(value),
            _ => kept.push(format!("{key}={raw}")),
        }
    }
    Ok((kept.join(" "), mode, rootcert))
}

fn roots_from_file(path: &str) -> Result<RootCertStore> {
    let pem = std::fs::read(path)
        .map_err(|e| Error::config(format!("PostgresToolStore: cannot read sslrootcert {path}: {e}")))?;
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| Error::config(format!("PostgresToolStore: sslrootcert {path}: {e}")))?;
        roots.add(cert).map_err(|e| Error::config(format!("PostgresToolStore: sslrootcert {path}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::config(format!("PostgresToolStore: sslrootcert {path} holds no PEM certificate.")));
    }
    Ok(roots)
}

/// The system's bundle (`SSL_CERT_FILE`, else where Debian, Fedora, Alpine and macOS keep it).
fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let given = std::env::var("SSL_CERT_FILE").ok();
    let places = given.iter().map(String::as_str).chain([
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/cert.pem",
    ]);
    for place in places {
        if let Ok(pem) = std::fs::read(place) {
            for cert in rustls_pemfile::certs(&mut pem.as_slice()).flatten() {
                let _ = roots.add(cert);
            }
            if !roots.is_empty() {
                return roots;
            }
        }
    }
    if roots.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    roots
}

/// `require` without roots (`chain: None`: encrypted, the server not checked, libpq's meaning)
/// and `verify-ca` (the chain to a root checked, the host name not). The handshake's signatures
/// are checked by the provider either way.
#[derive(Debug)]
struct Lenient {
    provider: Arc<rustls::crypto::CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_key_is_named_by_its_key_and_no_text_of_its_value_is_shown() {
        for s in [
            "host=db user=u password:hunter2hunter2hunter2",
            "host=db user=u password=ok dbname:hunter2hunter2",
            "postgres://u:hunter2hunter2@db:notaport/x",
        ] {
            let e = parse(s).err().expect("malformed");
            assert!(!e.message.contains("hunter2"), "{}", e.message);
            assert!(!e.message.contains("notaport"), "{}", e.message);
        }
        let e = parse("host=db user=u password:hunter2").err().unwrap();
        assert!(e.message.contains("'password'"), "{}", e.message);
        let e = parse("host=db user=u sslmode=hunter2hunter2").err().unwrap();
        assert!(!e.message.contains("hunter2") && e.message.contains("sslmode"), "{}", e.message);
    }

    #[test]
    fn tls_parameters_are_taken_from_both_forms_and_the_rest_parses() {
        let (rest, mode, root) =
            take_tls_params("postgres://u:p@h:5/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x")
                .unwrap();
        assert_eq!(
            (rest.as_str(), mode, root.as_deref()),
            ("postgres://u:p@h:5/db?application_name=x", Mode::VerifyFull, Some("/tmp/ca.pem"))
        );
        let (rest, mode, root) = take_tls_params("host=h user=u password='a b\\'c' sslmode=require dbname=d").unwrap();
        assert_eq!((rest.as_str(), mode, root), ("host=h user=u password='a b\\'c' dbname=d", Mode::Require, None));
        let c: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(c.get_password(), Some(&b"a b'c"[..]));
        assert_eq!(take_tls_params("postgres://u@h/d").unwrap().1, Mode::Clear);
    }

    #[test]
    fn a_malformed_string_is_a_configuration_error_that_does_not_show_the_password() {
        for s in [
            "postgres://u:s3cretpw@h/d?sslmode=bogus",
            "host=h password=s3cretpw sslmode",
            "nonsense",
            "postgres://:s3cretpw@/d",
            "host=h user=u password='s3cretpw",
        ] {
            let e = parse(s).err().unwrap_or_else(|| panic!("{s} parsed"));
            assert_eq!(e.code, crate::error::Code::Configuration, "{s}");
            assert!(!e.message.contains("s3cretpw"), "{}", e.message);
        }
        assert!(parse("postgres://u:p@h/d?sslmode=verify-full").unwrap().tls.is_some());
        assert!(parse("postgres://u:p@h/d").unwrap().tls.is_none());
        let e = parse("postgres://u:p@h/d?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem").err().unwrap();
        assert!(e.message.contains("cannot read sslrootcert"), "{}", e.message);
    }
}
