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

/// A broker that injects the test credential for 127.0.0.1, scrubbing or not.
async fn injecting_broker(scrub: bool) -> Arc<Broker> {
    Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow_private: strings(&["127.0.0.1"]),
        no_scrub: !scrub,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// What a GET of `up` through an injecting broker answers.
async fn through_broker(up: SocketAddr, scrub: bool) -> Answer {
    let broker = injecting_broker(scrub).await;
    let answer = send(broker.local_addr(), get(&format!("http://127.0.0.1:{}/echo", up.port()))).await;
    broker.close().await;
    answer
}

async fn echoed(scrub: bool) -> Answer {
    through_broker(echoing_upstream().await, scrub).await
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

/// The `authorization` header of a request head.
fn auth_of(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
        .unwrap_or("none")
        .trim()
        .to_string()
}

/// `bytes` compressed: `gzip`, `zlib` (what `deflate` means) or `raw` (deflate without zlib's
/// wrapping, as some servers send it).
fn compress(how: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let level = flate2::Compression::default();
    match how {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        }
        "zlib" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        }
        _ => {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), level);
            e.write_all(bytes).unwrap();
            e.finish().unwrap()
        }
    }
}

/// The echo an upstream that compresses sends: the credential on every line.
fn echo_text(auth: &str) -> String {
    format!("{{\"you sent\": \"{auth}\"}}\n").repeat(300)
}

/// An upstream that echoes the credential in a body compressed `how` though identity was asked,
/// labelled `coding`, the compressed bytes sent in two pieces.
async fn compressing_upstream(coding: &'static str, how: &'static str) -> SocketAddr {
    raw_upstream(move |head| {
        let body = compress(how, echo_text(&auth_of(head)).as_bytes());
        // The first piece a single byte: too short to tell zlib from raw deflate by.
        let (first, rest) = body.split_at(1);
        let (a, b) = rest.split_at(rest.len() / 2);
        vec![
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{coding}content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .into_bytes(),
            first.to_vec(),
            a.to_vec(),
            b.to_vec(),
        ]
    })
    .await
}

#[tokio::test]
async fn an_echo_compressed_though_identity_was_asked_is_decoded_and_scrubbed() {
    for (coding, how) in [
        ("content-encoding: gzip\r\n", "gzip"),
        ("content-encoding: deflate\r\n", "zlib"),
        ("content-encoding: deflate\r\n", "raw"),
        ("content-encoding: X-GZIP\r\n", "gzip"),
        ("content-encoding: identity\r\ncontent-encoding: gzip\r\n", "gzip"),
    ] {
        let answer = through_broker(compressing_upstream(coding, how).await, true).await;
        assert_eq!(answer.status, StatusCode::OK, "{coding}/{how}");
        assert!(answer.headers.get("content-encoding").is_none(), "{coding}/{how}: {:?}", answer.headers);
        assert!(answer.headers.get("content-length").is_none(), "{coding}/{how}");
        assert_eq!(answer.text(), echo_text("[secret]"), "{coding}/{how}");
    }
}

#[tokio::test]
async fn an_echo_compressed_twice_on_two_header_lines_never_reaches_the_client() {
    let up = raw_upstream(|head| {
        let body = compress("gzip", &compress("gzip", echo_text(&auth_of(head)).as_bytes()));
        let mut out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: gzip\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(&body);
        vec![out]
    })
    .await;
    let answer = through_broker(up, true).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY, "{:?}", answer.body);
    assert!(!answer.text().contains(SECRET));
}

#[tokio::test]
async fn an_echo_in_a_coding_the_broker_cannot_read_never_reaches_the_client() {
    // Labelled br, sent as plain text: passed on, the credential would reach the sandbox.
    let up = raw_upstream(|head| {
        let body = echo_text(&auth_of(head));
        vec![format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: br\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()]
    })
    .await;
    let answer = through_broker(up, true).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert!(answer.text().contains("\"br\""), "{}", answer.text());
    assert!(!answer.text().contains(SECRET));
}

#[tokio::test]
async fn a_compressed_body_cut_short_aborts_the_response() {
    let up = raw_upstream(|head| {
        let body = compress("gzip", echo_text(&auth_of(head)).as_bytes());
        let cut = &body[..body.len() - 12];
        let mut out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n",
            cut.len()
        )
        .into_bytes();
        out.extend_from_slice(cut);
        out.extend_from_slice(b"\r\n0\r\n\r\n");
        vec![out]
    })
    .await;
    let answer = through_broker(up, true).await;
    assert!(answer.body.is_err(), "a cut body looked complete: {:?}", answer.body);
}

#[tokio::test]
async fn trailers_that_echo_the_credential_never_reach_the_client_and_the_body_comes_whole() {
    // The broker drops the `Trailer` declaration (hop by hop), so no trailer is sent on; were
    // one sent, it would be scrubbed as headers are.
    let up = raw_upstream(|head| {
        let auth = auth_of(head);
        let body = format!("body says {auth}");
        vec![format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\nconnection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\nx-sum: {auth}\r\n\r\n",
            body.len()
        )
        .into_bytes()]
    })
    .await;
    let broker = injecting_broker(true).await;
    let request = format!(
        "GET http://127.0.0.1:{}/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTE: trailers\r\nConnection: close\r\n\r\n",
        up.port()
    );
    let answer = raw(broker.local_addr(), request.as_bytes()).await;
    broker.close().await;
    assert!(!answer.contains(SECRET), "{answer}");
    assert!(answer.contains("body says ") && answer.contains("[secret]"), "{answer}");
}
