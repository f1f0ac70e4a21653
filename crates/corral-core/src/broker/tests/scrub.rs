//! `scrub`: an upstream that echoes the request's credentials back (in a header and in a body
//! sent in chunks that split the value) reaches the client with `[secret]` in their place.

use super::*;

/// An upstream that answers each request with its `authorization` header echoed: in `x-echo`,
/// and in a chunked text body whose chunks split the value in two.
async fn echoing_upstream() -> SocketAddr {
    raw_upstream(|head| {
        let auth = head
            .lines()
            .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
            .unwrap_or("none")
            .trim()
            .to_string();
        let encoding = head.to_lowercase().lines().any(|l| l == "accept-encoding: identity");
        let body = format!("you sent {auth} (identity asked: {encoding}) end");
        let (a, b) = body.split_at(body.find(SECRET).map_or(4, |i| i + 5));
        vec![
            format!(
                "HTTP/1.1 200 OK\r\nx-echo: {auth}\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n{a}\r\n",
                a.len()
            )
            .into_bytes(),
            format!("{:x}\r\n{b}\r\n0\r\n\r\n", b.len()).into_bytes(),
        ]
    })
    .await
}

async fn echoed(scrub: bool) -> Answer {
    let up = echoing_upstream().await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow_private: strings(&["127.0.0.1"]),
        no_scrub: !scrub,
        ..Default::default()
    })
    .await
    .unwrap();
    let answer = send(broker.local_addr(), get(&format!("http://127.0.0.1:{}/echo", up.port()))).await;
    broker.close().await;
    answer
}

#[tokio::test]
async fn an_echoed_credential_comes_back_as_secret_in_headers_and_a_split_body() {
    let answer = echoed(true).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["x-echo"], "[secret]");
    assert_eq!(answer.text(), "you sent [secret] (identity asked: true) end");
    assert!(answer.headers.get("content-length").is_none());
}

#[tokio::test]
async fn scrub_false_passes_the_response_as_it_came() {
    let answer = echoed(false).await;
    assert_eq!(answer.headers["x-echo"].to_str().unwrap(), format!("Bearer {SECRET}"));
    assert_eq!(answer.text(), format!("you sent Bearer {SECRET} (identity asked: false) end"));
}

#[tokio::test]
async fn a_response_without_an_injected_value_is_unchanged() {
    let up = upstream(None).await;
    let broker = loopback_broker().await;
    let answer = send(broker.local_addr(), get(&format!("http://127.0.0.1:{}/plain", up.port()))).await;
    assert_eq!(answer.text(), "target=/plain body=");
    assert_eq!(answer.headers["x-upstream"], "yes");
    broker.close().await;
}

#[tokio::test]
async fn a_live_brokers_values_are_secrets_to_every_redactor() {
    // A value of this test's own (other tests' brokers hold SECRET while they run).
    const OWN: &str = "only-this-broker-7f3a9c";
    let rules = vec![("example.com".to_string(), vec![("x-key".to_string(), FixedHeader::arc(OWN))])];
    let broker = Broker::start(BrokerConfig { rules, ..Default::default() }).await.unwrap();
    let r = crate::redact::Redactor::new(crate::redact::RedactorOptions::default());
    let shown = r.redact(&format!("token: {OWN}"), "s").into_owned();
    assert!(shown.starts_with("token: [secret:broker#"), "{shown}");
    broker.close().await;
    drop(broker);
    // (A session that was shown it keeps it a secret.)
    assert_eq!(r.redact(&format!("token: {OWN}"), "t"), format!("token: {OWN}"));
}
