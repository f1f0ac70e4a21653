//! Against a real PostgreSQL each test starts (scripts/pg-test.sh: initdb in a temp directory, a
//! free loopback port). They are `#[ignore]`d: scripts/test.sh runs them with `--ignored` where
//! PostgreSQL is installed and reports them skipped where it is not.

use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::registry::{Registry, ToolStore};

struct Server {
    dir: tempfile::TempDir,
    url: String,
}

impl Server {
    /// A fresh server; a test run where PostgreSQL is missing fails, it does not pass.
    fn start(test: &str) -> Server {
        Server::start_with(test, None)
    }

    /// With `tls`: a directory holding server.crt and server.key, which the server speaks TLS with.
    fn start_with(test: &str, tls: Option<&std::path::Path>) -> Server {
        let dir = tempfile::Builder::new().prefix("corral-pg-").tempdir_in("/var/tmp").expect("a temp dir");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pg-test.sh");
        let mut cmd = Command::new("bash");
        cmd.arg(script).arg("start").arg(dir.path());
        if let Some(tls) = tls {
            cmd.env("PG_TEST_TLS", tls);
        }
        let out = cmd.output().expect("bash runs");
        assert_ne!(out.status.code(), Some(3), "{test} needs PostgreSQL, and it is not installed");
        assert!(out.status.success(), "pg-test.sh start: {}", String::from_utf8_lossy(&out.stderr));
        Server { url: String::from_utf8(out.stdout).unwrap().trim().to_string(), dir }
    }

    fn run(&self, what: &str) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pg-test.sh");
        let out = Command::new("bash").arg(script).arg(what).arg(self.dir.path()).output().unwrap();
        assert!(out.status.success(), "pg-test.sh {what}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn store(&self, extra: Value) -> PostgresToolStore {
        let mut o = json!({ "connectionString": self.url });
        o.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        PostgresToolStore::new(PostgresOptions::from_json(&o).unwrap()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.run("stop");
    }
}

fn spec(name: &str, command: &str) -> Value {
    json!({ "name": name, "handler_kind": "shell_template", "handler_payload": { "command": command } })
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn the_store_contract_holds_on_postgresql() {
    let pg = Server::start("the_store_contract_holds_on_postgresql");
    let registry = Registry::new(Arc::new(pg.store(json!({}))));
    assert!(registry.list("w").await.unwrap().is_empty());
    for name in ["b", "a", "Z", "_x", "a-1"] {
        registry.upsert("w", &spec(name, "echo 1"), None).await.unwrap();
    }
    registry.upsert("w", &spec("a", "echo 2"), None).await.unwrap();
    registry.upsert("other", &spec("a", "echo 3"), None).await.unwrap();
    let names: Vec<String> = registry.list("w").await.unwrap().into_iter().map(|s| s.name).collect();
    // Code-unit order whatever the database's collation.
    assert_eq!(names, ["Z", "_x", "a", "a-1", "b"]);
    assert_eq!(registry.get("w", "a").await.unwrap().unwrap().to_json()["handler_payload"]["command"], "echo 2");
    assert_eq!(registry.get("other", "a").await.unwrap().unwrap().to_json()["handler_payload"]["command"], "echo 3");
    assert!(registry.delete("w", "a").await.unwrap());
    assert!(!registry.delete("w", "a").await.unwrap());
    assert!(registry.get("w", "a").await.unwrap().is_none());
    // A spec reads back with its keys in the order they were written.
    let ordered = json!({ "name": "p", "parameters": { "type": "object", "properties": { "alpha": { "type": "string" }, "b": { "type": "string" } } }, "handler_kind": "shell_template", "handler_payload": { "command": "echo {alpha} {b}" } });
    registry.upsert("w", &ordered, None).await.unwrap();
    let back = registry.get("w", "p").await.unwrap().unwrap().to_json();
    let keys: Vec<&String> = back["parameters"]["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["alpha", "b"]);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn stores_that_start_together_migrate_once_and_a_named_schema_holds_the_table() {
    let pg = Server::start("stores_that_start_together_migrate_once");
    let stores: Vec<PostgresToolStore> =
        (0..6).map(|_| pg.store(json!({ "schema": "tools_a", "poolSize": 2 }))).collect();
    let firsts = futures::future::join_all(stores.iter().map(|s| s.list("w"))).await;
    for r in firsts {
        assert!(r.unwrap().is_empty());
    }
    assert_eq!(stores[0].version().await.unwrap(), MIGRATIONS.len() as i32);
    let (client, conn) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let n: i64 = client.query_one("SELECT count(*) FROM tools_a.schema_version", &[]).await.unwrap().get(0);
    assert_eq!(n, MIGRATIONS.len() as i64);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn concurrent_upserts_and_deletes_end_with_exact_counts() {
    let pg = Server::start("concurrent_upserts_and_deletes_end_with_exact_counts");
    let registry = Arc::new(Registry::new(Arc::new(pg.store(json!({ "poolSize": 4 })))));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let r = registry.clone();
        tasks.push(tokio::spawn(async move {
            r.upsert("w", &spec(&format!("t{i}"), "echo"), None).await.unwrap();
            if i % 4 == 0 {
                assert!(r.delete("w", &format!("t{i}")).await.unwrap());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(registry.list("w").await.unwrap().len(), 75);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn a_stopped_server_is_an_error_within_the_bound_and_the_call_after_the_restart_succeeds() {
    let pg = Server::start("a_stopped_server_is_an_error_within_the_bound");
    let store = pg.store(json!({}));
    store.put("w", &crate::templates::WorkspaceToolSpec::from_json(&spec("a", "echo")).unwrap()).await.unwrap();
    pg.run("stop");
    let started = std::time::Instant::now();
    let e = store.list("w").await.unwrap_err();
    assert!(started.elapsed() < CALL_TIMEOUT + std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(e.code, Code::Io);
    assert!(e.message.starts_with("PostgresToolStore (127.0.0.1:"), "{}", e.message);
    pg.run("resume");
    // The pool drops what broke; a later call reconnects.
    let mut last = None;
    for _ in 0..3 {
        match store.list("w").await {
            Ok(v) => {
                last = Some(v);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    assert_eq!(last.expect("a call after the restart succeeds").len(), 1);
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn a_wrong_password_or_host_is_a_clear_error_without_the_password() {
    let pg = Server::start("a_wrong_password_or_host_is_a_clear_error");
    let wrong = pg.url.replacen("corral:", "corral:WrongPassw0rd", 1);
    let store =
        PostgresToolStore::new(PostgresOptions::from_json(&json!({ "connectionString": wrong })).unwrap()).unwrap();
    let e = store.list("w").await.unwrap_err();
    assert!(e.message.contains("password authentication failed"), "{}", e.message);
    assert!(!e.message.contains("WrongPassw0rd"), "{}", e.message);
    let closed = format!("postgres://corral:Secr3tValue@127.0.0.1:{}/corral", free_port());
    let store =
        PostgresToolStore::new(PostgresOptions::from_json(&json!({ "connectionString": closed })).unwrap()).unwrap();
    let e = store.list("w").await.unwrap_err();
    assert!(e.message.contains("cannot connect"), "{}", e.message);
    assert!(!e.message.contains("Secr3tValue"), "{}", e.message);
}

/// A CA and a server certificate it signed for `localhost` only: `(ca.pem path, cert dir)`.
fn certs(dir: &std::path::Path, ca_name: &str) -> std::path::PathBuf {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let mut leaf_params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf_params.distinguished_name.push(DnType::CommonName, "localhost");
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("server.crt"), leaf.pem()).unwrap();
    std::fs::write(dir.join("server.key"), leaf_key.serialize_pem()).unwrap();
    dir.to_path_buf()
}

#[tokio::test]
#[ignore = "needs PostgreSQL: scripts/test.sh runs it where PostgreSQL is installed"]
async fn tls_is_used_and_checked_as_the_connection_string_asks() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = certs(&tmp.path().join("ours"), "corral test CA");
    let other = certs(&tmp.path().join("other"), "another CA");
    let pg = Server::start_with("tls_is_used_and_checked", Some(&ours));
    let list = |url: String| async move {
        let store =
            PostgresToolStore::new(PostgresOptions::from_json(&json!({ "connectionString": url })).unwrap()).unwrap();
        store.list("w").await
    };
    let ca = |dir: &std::path::Path| dir.join("ca.pem").display().to_string();
    let by_name = pg.url.replacen("127.0.0.1", "localhost", 1);
    // The chain and the name check out.
    list(format!("{by_name}?sslmode=verify-full&sslrootcert={}", ca(&ours))).await.unwrap();
    // The name does not: the certificate is for localhost, the connection names 127.0.0.1.
    let e = list(format!("{}?sslmode=verify-full&sslrootcert={}", pg.url, ca(&ours))).await.unwrap_err();
    assert!(e.message.contains("cannot connect"), "{}", e.message);
    // verify-ca checks the chain only.
    list(format!("{}?sslmode=verify-ca&sslrootcert={}", pg.url, ca(&ours))).await.unwrap();
    // Another CA's roots: refused.
    let e = list(format!("{by_name}?sslmode=verify-full&sslrootcert={}", ca(&other))).await.unwrap_err();
    assert!(e.message.contains("cannot connect"), "{}", e.message);
    // require encrypts without checking.
    list(format!("{}?sslmode=require", pg.url)).await.unwrap();
    // And require means TLS: a server without it is refused.
    let plain = Server::start("tls_is_used_and_checked (plain)");
    let e = list(format!("{}?sslmode=require", plain.url)).await.unwrap_err();
    assert!(e.message.contains("cannot connect"), "{}", e.message);
    list(plain.url.clone()).await.unwrap();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn options_are_checked_when_the_store_is_made() {
    for (o, says) in [
        (json!({}), "connectionString is required"),
        (json!({ "connectionString": "" }), "connectionString is required"),
        (json!({ "connectionString": "postgres://u@h/d", "schema": "a;drop" }), "schema must be"),
        (json!({ "connectionString": "postgres://u@h/d", "poolSize": 0 }), "poolSize"),
        (json!({ "connectionString": "postgres://u@h/d", "pool": 2 }), "unknown option 'pool'"),
    ] {
        let e = PostgresOptions::from_json(&o).err().unwrap_or_else(|| panic!("{o} passed"));
        assert_eq!(e.code, Code::Configuration);
        assert!(e.message.contains(says), "{}", e.message);
    }
}
