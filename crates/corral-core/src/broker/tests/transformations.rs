//! Request transformations through the broker's public API: what reaches a local upstream.

use serde_json::json;

use super::*;
use crate::broker::transform::{from_list, Transformation};

const REAL: &str = "sk-real-value-never-inside";

fn list(v: serde_json::Value) -> Vec<Transformation> {
    from_list(&v, &|_| None, "transformations").unwrap()
}

fn api_key(host: &str) -> serde_json::Value {
    json!({
        "match": { "host": host, "path": { "startsWith": "/v1/" }, "headers": [{ "key": { "exact": "X-Api-Key" }, "value": { "exact": "placeholder" } }] },
        "transform": { "headers": { "x-api-key": REAL } }
    })
}

async fn broker_with(transformations: Vec<Transformation>) -> Arc<Broker> {
    Broker::start(BrokerConfig {
        allow: strings(&["127.0.0.1"]),
        allow_private: strings(&["127.0.0.1"]),
        transformations,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Sends `method path` to the upstream through the broker with `headers`; returns the headers
/// the upstream saw.
async fn through(broker: &Broker, up: &Upstream, method: &str, path: &str, headers: &[(&str, &str)]) -> HeaderMap {
    let mut req = Request::builder().method(method).uri(format!("http://127.0.0.1:{}{path}", up.port()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let answer = send(broker.local_addr(), req.body(Full::default()).unwrap()).await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    up.seen().pop().unwrap().headers
}

#[tokio::test]
async fn a_matching_request_gets_the_real_value_in_place_of_the_placeholder() {
    let up = upstream(None).await;
    let broker = broker_with(list(json!([api_key("127.0.0.1")]))).await;
    let seen = through(&broker, &up, "POST", "/v1/messages?beta=true", &[("x-api-key", "placeholder")]).await;
    let keys: Vec<_> = seen.get_all("x-api-key").iter().collect();
    assert_eq!(keys, [REAL], "replaced, not added");
    // Not matching: another path, another placeholder, no header at all.
    for (path, headers) in [
        ("/v2/messages", vec![("x-api-key", "placeholder")]),
        ("/v1/messages", vec![("x-api-key", "something-else")]),
        ("/v1/messages", vec![]),
    ] {
        let seen = through(&broker, &up, "GET", path, &headers).await;
        assert!(seen.get("x-api-key").is_none_or(|v| v != REAL), "{path} {headers:?} got the real value");
    }
    broker.close().await;
}

#[tokio::test]
async fn paths_methods_and_query_parameters_match_as_given() {
    let up = upstream(None).await;
    let broker = broker_with(list(json!([{
        "match": {
            "host": "127.0.0.1",
            "path": { "regex": "^/v1/(messages|complete)$" },
            "method": ["post"],
            "queryString": [{ "key": { "exact": "beta" }, "value": { "exact": "yes please" } }]
        },
        "transform": { "headers": { "x-set": "set" } }
    }])))
    .await;
    let set = |h: &HeaderMap| h.get("x-set").is_some();
    assert!(set(&through(&broker, &up, "POST", "/v1/messages?a=1&beta=yes%20please", &[]).await));
    assert!(set(&through(&broker, &up, "POST", "/v1/complete?beta=yes%20please", &[]).await));
    assert!(!set(&through(&broker, &up, "GET", "/v1/messages?beta=yes%20please", &[]).await), "method");
    assert!(!set(&through(&broker, &up, "POST", "/v1/messagesX?beta=yes%20please", &[]).await), "path");
    assert!(!set(&through(&broker, &up, "POST", "/v1/messages?beta=no", &[]).await), "query value");
    assert!(!set(&through(&broker, &up, "POST", "/v1/messages", &[]).await), "no query");
    // A path that could name another one upstream matches no path matcher.
    for path in [
        "/v1/../v1/messages?beta=yes%20please",
        "/v1/%2E%2E/v1/messages?beta=yes%20please",
        "/v1/x%2fy?beta=yes%20please",
    ] {
        assert!(!set(&through(&broker, &up, "POST", path, &[]).await), "{path}");
    }
    broker.close().await;
}

#[tokio::test]
async fn set_replaces_add_merges_and_adding_twice_changes_nothing() {
    let up = upstream(None).await;
    let broker = broker_with(Vec::new()).await;
    let header = |name: &str, value: &str| json!({ "match": { "host": "127.0.0.1" }, "transform": { "headers": { name: value } } });
    broker.add_transformations(list(json!([header("x-a", "1")])));
    broker.add_transformations(list(json!([header("x-a", "1")])));
    assert_eq!(broker.shared.transformations.len(), 1, "adding the same twice");
    broker.add_transformations(list(json!([header("x-b", "2")])));
    let seen = through(&broker, &up, "GET", "/", &[]).await;
    assert_eq!((seen["x-a"].to_str().unwrap(), seen["x-b"].to_str().unwrap()), ("1", "2"));
    // Same match and header names: replaced.
    broker.add_transformations(list(json!([header("x-a", "3")])));
    assert_eq!(broker.shared.transformations.len(), 2);
    assert_eq!(through(&broker, &up, "GET", "/", &[]).await["x-a"], "3");
    // set: only these.
    broker.set_transformations(list(json!([header("x-c", "4")])));
    let seen = through(&broker, &up, "GET", "/", &[]).await;
    assert!(seen.get("x-a").is_none() && seen.get("x-b").is_none());
    assert_eq!(seen["x-c"], "4");
    broker.set_transformations(Vec::new());
    assert!(through(&broker, &up, "GET", "/", &[]).await.get("x-c").is_none());
    broker.close().await;
}

#[tokio::test]
async fn rules_apply_first_then_transformations_and_basic_credentials_are_encoded() {
    let up = upstream(None).await;
    let broker = Broker::start(BrokerConfig {
        rules: auth_rule("127.0.0.1"),
        allow_private: strings(&["127.0.0.1"]),
        transformations: list(json!([{
            "match": { "host": "127.0.0.1" },
            "transform": { "headers": { "authorization": { "basic": { "username": "u", "password": "p:w" } } } }
        }])),
        ..Default::default()
    })
    .await
    .unwrap();
    let seen = through(&broker, &up, "GET", "/", &[("authorization", "Bearer client-own")]).await;
    let auth: Vec<_> = seen.get_all("authorization").iter().collect();
    // base64("u:p:w")
    assert_eq!(auth, ["Basic dTpwOnc="], "the transformation's value, after the rule's");
    broker.close().await;
}

#[tokio::test]
async fn a_transformation_opens_no_host_of_its_own() {
    let up = upstream(None).await;
    let broker = Broker::start(BrokerConfig {
        allow_private: strings(&["127.0.0.1"]),
        transformations: list(json!([api_key("127.0.0.1")])),
        ..Default::default()
    })
    .await
    .unwrap();
    let req = Request::get(format!("http://127.0.0.1:{}/v1/x", up.port())).body(Full::default()).unwrap();
    assert_eq!(send(broker.local_addr(), req).await.status, StatusCode::FORBIDDEN);
    assert!(up.seen().is_empty());
    broker.close().await;
}

#[test]
fn bad_transformations_are_configuration_errors() {
    for (v, says) in [
        (json!({}), "must be an array"),
        (json!([{ "match": {} , "transform": { "headers": {} } }]), "match.host"),
        (json!([{ "match": { "host": "http://x" }, "transform": { "headers": {} } }]), "match.host"),
        (json!([{ "match": { "host": "x", "path": { "glob": "/*" } }, "transform": { "headers": {} } }]), "exact"),
        (json!([{ "match": { "host": "x", "path": { "regex": "(" } }, "transform": { "headers": {} } }]), "match.path"),
        (json!([{ "match": { "host": "x", "method": "GET" }, "transform": { "headers": {} } }]), "match.method"),
        (json!([{ "match": { "host": "x" }, "transform": { "headers": { "host": "y" } } }]), "cannot be set"),
        (json!([{ "match": { "host": "x" }, "transform": { "headers": { "x-a": 3 } } }]), "must be a string"),
        (
            json!([{ "match": { "host": "x" }, "transform": { "headers": { "x-a": { "basic": { "username": "a:b", "password": "" } } } } }]),
            "cannot contain ':'",
        ),
        (json!([{ "match": { "host": "x", "hosts": [] }, "transform": { "headers": {} } }]), "unknown field"),
    ] {
        let e = from_list(&v, &|_| None, "transformations").err().expect("refused");
        assert_eq!(e.code, Code::Configuration, "{v}");
        assert!(e.message.contains(says), "{v}: {}", e.message);
    }
}
