//! Sandbox tests: SandboxShell's rules with NoopSandbox and a recording adapter, the Docker
//! client against a fake Engine API server (the egress cases a local engine cannot show), and —
//! when `CORRAL_DOCKER_HOST` names one (scripts/dockerd-test.sh) — a real Docker Engine.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;
use crate::error::Result;

mod fake_engine;
mod real_engine;
mod shell_env;

/// An [`EgressBroker`] that records its calls and answers `http://<host>:3128`.
#[derive(Default)]
pub(super) struct RecordingBroker {
    pub listens: Mutex<Vec<(String, String, Vec<String>)>>,
    pub unlistens: Mutex<Vec<String>>,
}

#[async_trait]
impl EgressBroker for RecordingBroker {
    async fn listen(&self, host: &str, clients: &str, allow: Vec<String>) -> Result<String> {
        self.listens.lock().unwrap().push((host.to_string(), clients.to_string(), allow));
        Ok(format!("http://{host}:3128"))
    }
    async fn unlisten(&self, url: &str) -> Result<()> {
        self.unlistens.lock().unwrap().push(url.to_string());
        Ok(())
    }
}

impl RecordingBroker {
    pub fn listen_calls(&self) -> Vec<(String, String, Vec<String>)> {
        self.listens.lock().unwrap().clone()
    }
    pub fn unlisten_calls(&self) -> Vec<String> {
        self.unlistens.lock().unwrap().clone()
    }
}

pub(super) fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub(super) fn arc<T>(v: T) -> Arc<T> {
    Arc::new(v)
}

#[test]
fn network_allow_hosts_are_validated_and_normalised() {
    for (given, want) in [
        ("api.github.com", "api.github.com"),
        ("API.GitHub.com.", "api.github.com"),
        ("*.npmjs.org", "*.npmjs.org"),
        ("*.NPMJS.org", "*.npmjs.org"),
        ("10.0.0.1", "10.0.0.1"),
        ("[::1]", "::1"),
        ("my_host-1.internal", "my_host-1.internal"),
    ] {
        assert_eq!(validate_host(given).unwrap(), want, "{given}");
    }
    for bad in [
        "",
        "https://api.github.com",
        "api.github.com/path",
        "api.github.com:443",
        "user@host.com",
        "*",
        "*.",
        "a.*.com",
        "**.x.com",
        "-bad.com",
        "bad-.com",
        "a..b",
        "has space.com",
        "1.2.3",
        "[1.2.3.4]",
        "ex\u{e4}mple.com",
    ] {
        assert_eq!(validate_host(bad).unwrap_err().code, crate::error::Code::Configuration, "{bad:?}");
    }
}
