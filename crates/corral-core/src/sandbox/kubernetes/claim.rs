//! A sandbox of kubernetes-sigs/agent-sandbox, claimed from a warm pool: the `SandboxClaim`
//! made, watched until `Ready`, its pod found, its `shutdownTime` moved forward while in use,
//! and deleted on close; `prune` deletes the claims a dead process of this machine left.

use std::time::{Duration, SystemTime};

use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use serde_json::{json, Value};

use super::client::{scrub, Connection};
use crate::error::{Code, Error, Result};

/// The label every claim of corral's carries, so `prune` lists only corral's.
pub(super) const MANAGED_BY: &str = "app.kubernetes.io/managed-by=corral";
/// The annotation naming the process that made a claim (`sandbox::owner::label`).
const OWNER: &str = "corral.dev/owner";
/// The label naming this machine's boot, so another machine's claims are never listed.
const BOOT: &str = "corral.dev/boot-id";
/// Ready reasons after which a claim never becomes ready (agent-sandbox's controller gives up on
/// them, or the pod reached an end).
const TERMINAL: &[&str] = &[
    "InvalidMetadata",
    "EnvVarsInjectionRejected",
    "VolumeClaimTemplatesError",
    "ClaimExpired",
    "SandboxExpired",
    "PodFailed",
    "PodSucceeded",
];
/// Reasons that name a missing object of the caller's configuration.
const MISSING: &[&str] = &["WarmPoolNotFound", "TemplateNotFound"];

fn resource(group: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, "v1beta1", kind), plural)
}

fn claims(c: &Connection) -> Api<DynamicObject> {
    Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &resource("extensions.agents.x-k8s.io", "SandboxClaim", "sandboxclaims"),
    )
}

fn sandboxes(c: &Connection) -> Api<DynamicObject> {
    Api::namespaced_with(c.client.clone(), &c.namespace, &resource("agents.x-k8s.io", "Sandbox", "sandboxes"))
}

fn pools(c: &Connection) -> Api<DynamicObject> {
    Api::namespaced_with(
        c.client.clone(),
        &c.namespace,
        &resource("extensions.agents.x-k8s.io", "SandboxWarmPool", "sandboxwarmpools"),
    )
}

/// What the API server said, as a corral error: an unreachable server, a refused credential or a
/// missing resource type is a `ConfigurationError` naming it; no message names a token.
pub(crate) fn api_error(c: &Connection, what: &str, e: kube::Error) -> Error {
    // A credential plugin's failure carries its command line, environment and output: only its
    // kind is said.
    if auth_failed(&e) {
        return Error::config(format!(
            "KubernetesSandbox: the credential could not be obtained while {what} (an exec credential plugin or a token file of the kubeconfig failed)."
        ));
    }
    match &e {
        kube::Error::Api(s) if s.code == 401 => Error::config(format!(
            "KubernetesSandbox: the API server {} refused the credential (401 Unauthorized) while {what}.",
            c.server
        )),
        kube::Error::Api(s) if s.code == 403 => Error::config(format!(
            "KubernetesSandbox: the credential may not do this (403 Forbidden) while {what}: {}",
            scrub(&s.message)
        )),
        kube::Error::Api(s) => Error::new(
            Code::Io,
            format!("KubernetesSandbox: the API server answered {} while {what}: {}", s.code, scrub(&s.message)),
        ),
        kube::Error::HyperError(_) | kube::Error::Service(_) => Error::config(format!(
            "KubernetesSandbox: the API server {} cannot be reached while {what}: {}",
            c.server,
            scrub(&e.to_string())
        )),
        _ => Error::new(Code::Io, format!("KubernetesSandbox: {what}: {}", scrub(&e.to_string()))),
    }
}

/// Whether the error comes from getting the credential (kube's auth layer), however wrapped.
fn auth_failed(e: &kube::Error) -> bool {
    if matches!(e, kube::Error::Auth(_)) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<kube::client::AuthError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// This machine's boot id, as a label value (none where the system names no boot).
fn boot_label() -> Option<String> {
    let boot = super::super::owner::label().split('/').next().unwrap_or("-");
    (boot != "-").then(|| boot.to_string())
}

fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as i64;
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|d| d.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00Z".to_string())
}

/// A claimed sandbox: the claim's name and the pod commands run in.
#[derive(Debug, Clone)]
pub(crate) struct Claimed {
    pub claim: String,
    pub pod: String,
}

/// The `Ready` condition of a claim: `(status, reason, message)`.
fn ready(obj: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = obj.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))?;
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some((s("status"), s("reason"), s("message")))
}

/// Whether the claim is ready (its sandbox's name), still pending, or never will be.
fn state(obj: &DynamicObject, pool: &str, namespace: &str) -> Result<Option<String>> {
    let sandbox = obj.data.pointer("/status/sandbox/name").and_then(Value::as_str).filter(|s| !s.is_empty());
    match ready(obj) {
        Some((status, _, _)) if status == "True" => Ok(sandbox.map(str::to_string)),
        Some((_, reason, message)) if MISSING.contains(&reason.as_str()) => Err(Error::config(format!(
            "KubernetesSandbox: the claim cannot be served: {reason} ({message}); warmPool \"{pool}\" in namespace \"{namespace}\"."
        ))),
        Some((_, reason, message)) if TERMINAL.contains(&reason.as_str()) => Err(Error::new(
            Code::Io,
            format!("KubernetesSandbox: the sandbox claim failed: {reason} ({message})."),
        )),
        _ => Ok(None),
    }
}

fn last_reason(obj: Option<&DynamicObject>) -> String {
    match obj.and_then(ready) {
        Some((status, reason, message)) => format!("Ready is {status}, reason {reason}: {message}"),
        None => "no Ready condition yet".to_string(),
    }
}

/// What `claim` needs to know.
pub(super) struct ClaimSpec<'a> {
    pub pool: &'a str,
    pub shutdown_after: Duration,
    pub ready_timeout: Duration,
}

/// Makes a claim on the warm pool and waits until it is ready; the pod its sandbox runs in.
pub(super) async fn claim(c: &Connection, spec: &ClaimSpec<'_>) -> Result<Claimed> {
    // A missing pool is said at once, not after the ready timeout (a credential that may not read
    // pools goes on to the claim, whose condition says the same).
    match tokio::time::timeout(super::CALL_TIMEOUT, pools(c).get_opt(spec.pool)).await.unwrap_or_else(|_| {
        Err(kube::Error::Service(format!("no answer within {} s", super::CALL_TIMEOUT.as_secs()).into()))
    }) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(Error::config(format!(
                "KubernetesSandbox: there is no SandboxWarmPool \"{}\" in namespace \"{}\".",
                spec.pool, c.namespace
            )))
        }
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        Err(e) => return Err(api_error(c, "reading the warm pool", e)),
    }
    let label = super::super::owner::label();
    let mut labels = serde_json::Map::new();
    labels.insert("app.kubernetes.io/managed-by".into(), json!("corral"));
    if let Some(boot) = boot_label() {
        labels.insert(BOOT.into(), json!(boot));
    }
    let body = json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxClaim",
        "metadata": {
            "generateName": "corral-",
            "labels": labels,
            "annotations": { OWNER: label },
        },
        "spec": {
            "warmPoolRef": { "name": spec.pool },
            "lifecycle": { "shutdownTime": rfc3339(SystemTime::now() + spec.shutdown_after), "shutdownPolicy": "Delete" },
        },
    });
    let obj: DynamicObject = serde_json::from_value(body).map_err(|e| Error::new(Code::Io, e.to_string()))?;
    let api = claims(c);
    let made = super::bounded("creating the SandboxClaim", async {
        api.create(&PostParams::default(), &obj).await.map_err(|e| api_error(c, "creating the SandboxClaim", e))
    })
    .await?;
    let name = made.metadata.name.clone().unwrap_or_default();
    let waited = tokio::time::timeout(spec.ready_timeout, wait_ready(c, &api, &name, made, spec)).await;
    let sandbox = match waited {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            let _ = release(c, &name).await;
            return Err(e);
        }
        Err(_) => {
            let last =
                tokio::time::timeout(super::CALL_TIMEOUT, api.get_opt(&name)).await.ok().and_then(|r| r.ok()).flatten();
            let _ = release(c, &name).await;
            return Err(Error::new(
                Code::Timeout,
                format!(
                    "KubernetesSandbox: the claim {name} on warm pool \"{}\" was not ready within readyTimeoutMs ({} ms); {}.",
                    spec.pool,
                    spec.ready_timeout.as_millis(),
                    last_reason(last.as_ref())
                ),
            ));
        }
    };
    let read = tokio::time::timeout(super::CALL_TIMEOUT, sandboxes(c).get_opt(&sandbox)).await;
    let read = read.unwrap_or_else(|_| Err(kube::Error::Service("no answer within 60 s".into())));
    let pod = match read {
        Ok(Some(sb)) => {
            sb.metadata.annotations.as_ref().and_then(|a| a.get("agents.x-k8s.io/pod-name")).cloned().unwrap_or(sandbox)
        }
        Ok(None) => sandbox,
        Err(e) => {
            let _ = release(c, &name).await;
            return Err(api_error(c, "reading the Sandbox", e));
        }
    };
    Ok(Claimed { claim: name, pod })
}

/// Watches the claim until it is ready (its sandbox's name) or never will be; a watch the server
/// ends or expires (410 Gone) starts again from the claim as it is now.
async fn wait_ready(
    c: &Connection,
    api: &Api<DynamicObject>,
    name: &str,
    made: DynamicObject,
    spec: &ClaimSpec<'_>,
) -> Result<String> {
    let mut current = made;
    loop {
        if let Some(sandbox) = state(&current, spec.pool, &c.namespace)? {
            return Ok(sandbox);
        }
        let version = current.metadata.resource_version.clone().unwrap_or_else(|| "0".to_string());
        let params = WatchParams::default().fields(&format!("metadata.name={name}")).timeout(290);
        let mut events = api.watch(&params, &version).await.map_err(|e| api_error(c, "watching the claim", e))?.boxed();
        let mut restart = false;
        while let Some(event) = events.try_next().await.map_err(|e| api_error(c, "watching the claim", e))? {
            match event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    if let Some(sandbox) = state(&o, spec.pool, &c.namespace)? {
                        return Ok(sandbox);
                    }
                    current = o;
                }
                WatchEvent::Deleted(_) => {
                    return Err(Error::new(
                        Code::Io,
                        format!("KubernetesSandbox: the claim {name} was deleted before it was ready."),
                    ))
                }
                WatchEvent::Bookmark(b) => current.metadata.resource_version = Some(b.metadata.resource_version),
                WatchEvent::Error(s) if s.code == 410 => {
                    restart = true;
                    break;
                }
                WatchEvent::Error(s) => {
                    return Err(Error::new(
                        Code::Io,
                        format!("KubernetesSandbox: watching the claim: {}", scrub(&s.message)),
                    ))
                }
            }
        }
        if restart || events.next().await.is_none() {
            current = api.get_opt(name).await.map_err(|e| api_error(c, "reading the claim", e))?.ok_or_else(|| {
                Error::new(Code::Io, format!("KubernetesSandbox: the claim {name} was deleted before it was ready."))
            })?;
        }
    }
}

/// Moves the claim's `shutdownTime` to `after` from now.
pub(super) async fn extend(c: &Connection, claim: &str, after: Duration) -> Result<()> {
    let patch = json!({ "spec": { "lifecycle": { "shutdownTime": rfc3339(SystemTime::now() + after) } } });
    claims(c)
        .patch(claim, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| api_error(c, "moving the claim's shutdownTime", e))
}

/// Deletes the claim (its sandbox and pod go with it); one already gone is no error.
pub(super) async fn release(c: &Connection, claim: &str) -> Result<()> {
    super::bounded("deleting the claim", async {
        match claims(c).delete(claim, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(api_error(c, "deleting the claim", e)),
        }
    })
    .await
}

/// Deletes the claims of this machine's boot whose owner process provably no longer runs; how
/// many.
pub(super) async fn prune(c: &Connection) -> Result<usize> {
    // Without a boot id no claim of this machine can be told from another's: none is taken.
    let Some(boot) = boot_label() else { return Ok(0) };
    let params = ListParams::default().labels(&format!("{MANAGED_BY},{BOOT}={boot}"));
    let list = super::bounded("listing claims", async {
        claims(c).list(&params).await.map_err(|e| api_error(c, "listing claims", e))
    })
    .await?;
    let mut n = 0;
    for obj in list.items {
        let owner = obj.metadata.annotations.as_ref().and_then(|a| a.get(OWNER)).cloned().unwrap_or_default();
        let Some(name) = obj.metadata.name.as_deref() else { continue };
        if super::super::owner::provably_dead(&owner) && release(c, name).await.is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_with(ready: Value, sandbox: Option<&str>) -> DynamicObject {
        let mut status = json!({ "conditions": [ready] });
        if let Some(s) = sandbox {
            status["sandbox"] = json!({ "name": s });
        }
        serde_json::from_value(
            json!({ "apiVersion": "v", "kind": "SandboxClaim", "metadata": { "name": "c" }, "status": status }),
        )
        .unwrap()
    }

    #[test]
    fn a_claim_is_ready_only_with_ready_true_and_its_sandbox_named() {
        let ok = claim_with(json!({ "type": "Ready", "status": "True", "reason": "DependenciesReady" }), Some("sb-1"));
        assert_eq!(state(&ok, "p", "ns").unwrap().as_deref(), Some("sb-1"));
        let pending = claim_with(json!({ "type": "Ready", "status": "False", "reason": "DependenciesNotReady" }), None);
        assert_eq!(state(&pending, "p", "ns").unwrap(), None);
        let unnamed = claim_with(json!({ "type": "Ready", "status": "True" }), None);
        assert_eq!(state(&unnamed, "p", "ns").unwrap(), None);
    }

    #[test]
    fn a_terminal_reason_fails_at_once_naming_it_and_a_missing_pool_is_a_configuration_error() {
        let failed =
            claim_with(json!({ "type": "Ready", "status": "False", "reason": "PodFailed", "message": "oom" }), None);
        let e = state(&failed, "p", "ns").unwrap_err();
        assert_eq!(e.code, Code::Io);
        assert!(e.message.contains("PodFailed") && e.message.contains("oom"), "{}", e.message);
        let missing = claim_with(json!({ "type": "Ready", "status": "False", "reason": "WarmPoolNotFound" }), None);
        let e = state(&missing, "pool-x", "ns").unwrap_err();
        assert_eq!(e.code, Code::Configuration);
        assert!(e.message.contains("pool-x"), "{}", e.message);
    }

    #[test]
    fn shutdown_times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(86_400 + 61)), "1970-01-02T00:01:01Z");
    }
}
