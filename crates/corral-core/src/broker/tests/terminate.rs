//! TLS termination (`tls: 'terminate'`): a client that trusts the broker's CA talks HTTPS to a
//! host with a transformation; the broker sets the header and verifies the upstream itself.

use serde_json::json;

use super::*;
use crate::broker::transform::{from_list, Transformation};

const REAL: &str = "sk-terminated-real-value";

fn key_transformation(host: &str) -> Vec<Transformation> {
    from_list(
        &json!([{
            "match": { "host": host, "headers": [{ "key": { "exact": "x-api-key" }, "value": { "exact": "placeholder" } }] },
            "transform": { "headers": { "x-api-key": REAL } }
        }]),
        &|_| None,
        "transformations",
    )
    .unwrap()
}

/// TLS through a CONNECT tunnel to `target`, trusting `root` (PEM) only.
async fn tls_through(
    proxy: SocketAddr,
    target: &str,
    root: &str,
) -> std::result::Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let (stream, head) = connect_tunnel(proxy, target).await;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(head);
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in crate::broker::upstream::pem_certs(root, "root").unwrap() {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let host = target.rsplit_once(':').unwrap().0;
    let name = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(host.to_string()).unwrap(),
    };
    TlsConnector::from(Arc::new(config)).connect(name, stream).await.map_err(|e| e.to_string())
}

async fn terminating(transformations: Vec<Transformation>, upstream_ca: Vec<String>) -> Arc<Broker> {
    Broker::start(BrokerConfig {
        allow: strings(&["127.0.0.1", "localhost"]),
        allow_private: strings(&["127.0.0.1", "localhost"]),
        transformations,
        terminate_tls: true,
        extra_ca_pem: upstream_ca,
        ..Default::default()
    })
    .await
    .unwrap()
}

fn api_request(port: u16) -> Request<Full<Bytes>> {
    Request::post("/v1/messages?beta=true")
        .header("host", format!("127.0.0.1:{port}"))
        .header("x-api-key", "placeholder")
        .body(Full::from("{}"))
        .unwrap()
}

#[tokio::test]
async fn https_to_a_host_with_a_transformation_is_decrypted_and_its_header_set_outside() {
    let ca = test_ca();
    let up = upstream(Some(ca.acceptor.clone())).await;
    let broker = terminating(key_transformation("127.0.0.1"), vec![ca.pem.clone()]).await;
    let broker_ca = broker.ca().expect("a CA with tls: 'terminate'");
    let target = format!("127.0.0.1:{}", up.port());
    let tls = tls_through(broker.local_addr(), &target, &broker_ca).await.expect("the broker's certificate");
    let answer = send_on(tls, api_request(up.port())).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.text(), "target=/v1/messages?beta=true body={}");
    let seen = up.seen().pop().unwrap();
    let keys: Vec<_> = seen.headers.get_all("x-api-key").iter().collect();
    assert_eq!(keys, [REAL]);
    // The client never sees the value, and the client could not have used the upstream's
    // certificate chain through this tunnel: the broker's CA signed what it got.
    assert!(!answer.headers.iter().any(|(_, v)| v.to_str().unwrap_or("").contains(REAL)));
    assert!(tls_through(broker.local_addr(), &target, &ca.pem).await.is_err(), "the upstream's own chain");
    broker.close().await;
}

#[tokio::test]
async fn an_upstream_the_broker_cannot_verify_gets_a_502_not_the_request() {
    let ca = test_ca();
    let up = upstream(Some(ca.acceptor.clone())).await;
    // No upstream CA: the test CA is in neither the system roots nor `ca`.
    let broker = terminating(key_transformation("127.0.0.1"), Vec::new()).await;
    let target = format!("127.0.0.1:{}", up.port());
    let tls = tls_through(broker.local_addr(), &target, &broker.ca().unwrap()).await.unwrap();
    let answer = send_on(tls, api_request(up.port())).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{:?}", answer.body);
    assert!(answer.text().contains("TLS"), "{}", answer.text());
    assert!(up.seen().is_empty(), "the request reached an unverified upstream");
    broker.close().await;
}

#[tokio::test]
async fn a_host_without_rule_or_transformation_is_tunnelled_untouched() {
    let ca = test_ca();
    let up = upstream(Some(ca.acceptor.clone())).await;
    let broker = terminating(key_transformation("127.0.0.1"), vec![ca.pem.clone()]).await;
    // `localhost` is allowed but has no transformation: its own certificate comes through.
    let target = format!("localhost:{}", up.port());
    assert!(tls_through(broker.local_addr(), &target, &broker.ca().unwrap()).await.is_err());
    let tls = tls_through(broker.local_addr(), &target, &ca.pem).await.expect("the upstream's own chain");
    let mut req = api_request(up.port());
    req.headers_mut().insert("host", format!("localhost:{}", up.port()).parse().unwrap());
    let answer = send_on(tls, req).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(up.seen().pop().unwrap().headers["x-api-key"], "placeholder");
    broker.close().await;
}

#[tokio::test]
async fn the_bundle_holds_the_ca_and_the_system_roots_never_the_key_and_goes_with_the_broker() {
    let broker = terminating(Vec::new(), Vec::new()).await;
    let env = broker.env();
    let bundle = std::path::PathBuf::from(&env["SSL_CERT_FILE"]);
    for var in crate::broker::terminate::BUNDLE_VARS {
        assert_eq!(env[var], env["SSL_CERT_FILE"], "{var}");
    }
    assert!(!bundle.starts_with("/tmp"), "a LinuxSandbox command could not read {bundle:?}");
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert!(text.contains(broker.ca().unwrap().trim()));
    assert!(!text.contains("PRIVATE KEY"));
    if let Some(system) = crate::broker::terminate::system_roots_pem() {
        assert!(text.starts_with(system.trim_end()), "the system roots come first");
    }
    // Without termination: no CA, no bundle variables.
    let plain = Broker::start(BrokerConfig::default()).await.unwrap();
    assert!(plain.ca().is_none() && !plain.env().contains_key("SSL_CERT_FILE"));
    plain.close().await;
    broker.close().await;
    drop(broker);
    let deadline = Instant::now() + TIMEOUT;
    while bundle.exists() {
        assert!(Instant::now() < deadline, "the bundle outlived its broker");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
