//! `network: { allow }` with a broker: the internal network containers join, the broker's
//! listener on its gateway, and the checks that refuse an engine where that cannot hold.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::Method;
use ipnet::IpNet;
use serde_json::{json, Value};

use super::engine::{engine_version, DockerClient, DockerHost};
use super::{SubprocessSandbox, EGRESS_LABEL, MIN_EGRESS_ENGINE};
use crate::error::{Code, Error, Result};
use crate::sandbox::{EgressBroker, Network};

/// The internal network, its broker listener and what containers get to use it.
#[derive(Debug, Clone)]
pub(super) struct Egress {
    pub(super) network: String,
    pub(super) id: String,
    pub(super) created: bool,
    pub(super) gateway: String,
    pub(super) proxy: String,
}

fn unsupported(why: impl Into<String>) -> Error {
    Error::new(
        Code::EgressUnsupported,
        format!("Allowlisted egress cannot be enforced here: {}. No container was started.", why.into()),
    )
}

impl SubprocessSandbox {
    /// The network for the next container: set up on the first run, then reused.
    async fn egress(&self, broker: &Arc<dyn EgressBroker>, allow: &[String]) -> Result<Egress> {
        let mut state = self.egress.lock().await;
        if let Some(e) = state.as_ref() {
            return Ok(e.clone());
        }
        match &self.host {
            DockerHost::Unix(_) => {}
            DockerHost::Pipe(_) => {
                return Err(unsupported(
                    "Docker on Windows (Docker Desktop) runs containers in a VM, so the host has no address on an internal network",
                ))
            }
            DockerHost::Remote(_) | DockerHost::Tcp { .. } => {
                return Err(unsupported(format!(
                    "the Docker daemon at {} is not reached through a local unix socket, so it may run on another machine where the broker cannot listen on the network's gateway",
                    self.host
                )))
            }
        }
        let client = self.client()?;
        let info = client.json(Method::GET, "/info", None).await?;
        let os = info.get("OperatingSystem").and_then(Value::as_str).unwrap_or("");
        if os.contains("Docker Desktop") {
            return Err(unsupported(
                "Docker Desktop runs containers in a VM, so the host has no address on an internal network",
            ));
        }
        if super::engine::rootless(&info) {
            return Err(unsupported("rootless Docker keeps its bridge in its own network namespace"));
        }
        let version = client.json(Method::GET, "/version", None).await?;
        let v = version.get("Version").and_then(Value::as_str).unwrap_or("");
        let (a, b, c) = MIN_EGRESS_ENGINE;
        match engine_version(v) {
            Some(parsed) if parsed >= MIN_EGRESS_ENGINE => {}
            _ => {
                return Err(unsupported(format!(
                    "Docker Engine {} is older than {a}.{b}.{c}, which forwards DNS from internal networks (CVE-2024-29018)",
                    if v.is_empty() { "of unknown version" } else { v }
                )))
            }
        }

        let (id, created) = self.find_or_create_network(client).await?;
        let net = client.json(Method::GET, &format!("/networks/{id}"), None).await?;
        let remove_created = |id: String| async move {
            if created {
                let _ = client.call(Method::DELETE, &format!("/networks/{id}"), None).await;
            }
        };
        let (gateway, subnet) = match ipv4_config(&net) {
            Some(gs) => gs,
            None => {
                remove_created(id).await;
                return Err(unsupported(format!("the network {} has no IPv4 subnet", self.network_name)));
            }
        };
        let proxy = match broker.listen(&gateway, &subnet, allow.to_vec()).await {
            Ok(url) => url,
            Err(e) => {
                remove_created(id).await;
                return Err(e);
            }
        };
        let e = Egress { network: self.network_name.clone(), id, created, gateway, proxy };
        *state = Some(e.clone());
        Ok(e)
    }

    /// Reuses the network of that name only if it is internal; otherwise creates it.
    async fn find_or_create_network(&self, client: &DockerClient) -> Result<(String, bool)> {
        let name = &self.network_name;
        for _ in 0..2 {
            let found = client.call(Method::GET, &format!("/networks/{name}"), None).await?;
            if found.status.is_success() {
                let net = found.json();
                let internal = net.get("Internal").and_then(Value::as_bool).unwrap_or(false);
                if !internal {
                    return Err(unsupported(format!(
                        "the existing network \"{name}\" is not internal (Internal: true), so it would let containers bypass the proxy"
                    )));
                }
                let id = net.get("Id").and_then(Value::as_str).unwrap_or(name).to_string();
                return Ok((id, false));
            }
            if found.status != http::StatusCode::NOT_FOUND {
                return Err(Error::new(Code::Io, format!("Docker Engine: GET /networks/{name}: {}", found.message())));
            }
            let body = json!({
                "Name": name,
                "Driver": "bridge",
                "Internal": true,
                "EnableIPv6": false,
                "CheckDuplicate": true,
                "Attachable": false,
                "Labels": { EGRESS_LABEL.0: EGRESS_LABEL.1 },
            });
            let made = client.call(Method::POST, "/networks/create", Some(&body)).await?;
            if made.status.is_success() {
                let id = made.json().get("Id").and_then(Value::as_str).unwrap_or(name).to_string();
                return Ok((id, true));
            }
            // Made meanwhile by someone else: look again.
            if made.status != http::StatusCode::CONFLICT {
                return Err(Error::new(
                    Code::Io,
                    format!("Docker Engine: creating network {name}: {}", made.message()),
                ));
            }
        }
        Err(Error::new(Code::Io, format!("Docker Engine: network {name} could not be created or found")))
    }

    /// `NetworkMode` and the variables merged over the request's env.
    pub(super) async fn network_plan(&self) -> Result<(String, BTreeMap<String, String>)> {
        if let Some((broker, allow)) = self.egress_wanted() {
            let e = self.egress(broker, allow).await?;
            return Ok((e.network, crate::sandbox::proxy_env(&e.proxy, &e.gateway)));
        }
        let mode = match self.network {
            Network::Default => "default",
            Network::None | Network::Allow(_) => "none",
        };
        Ok((mode.to_string(), BTreeMap::new()))
    }
}

/// The first IPv4 `(Gateway, Subnet)` of a network's IPAM config; a missing gateway is the
/// subnet's first host, as Docker assigns it.
fn ipv4_config(net: &Value) -> Option<(String, String)> {
    let configs = net.get("IPAM")?.get("Config")?.as_array()?;
    for c in configs {
        let Some(subnet) = c.get("Subnet").and_then(Value::as_str) else { continue };
        let Ok(IpNet::V4(v4)) = subnet.parse::<IpNet>() else { continue };
        let gateway = match c.get("Gateway").and_then(Value::as_str).filter(|g| !g.is_empty()) {
            Some(g) => g.split('/').next().unwrap_or(g).to_string(),
            None => v4.hosts().next()?.to_string(),
        };
        return Some((gateway, v4.trunc().to_string()));
    }
    None
}
