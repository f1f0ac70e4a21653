//! The one reader of options objects. Each constructor's options (`createFsTools`,
//! `createShellTool`, `NodeWorkspace`, `MemoryWorkspace`, `WorkspaceCheckpoints`, `SandboxShell`,
//! `SubprocessSandbox`, the broker) are parsed into a typed struct next to the code they configure,
//! through a [`Reader`]: it refuses a key it does not know (naming the nearest valid one), checks
//! every type and bounds every number, so that no `1e300` reaches arithmetic. The binding only
//! converts JavaScript values; the facade only tags what JSON cannot hold (a function is
//! `{ "$js": "function" }`, another object that is not plain data `{ "$js": "object" }`).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Reads one options object for `what` (the constructor's name, as messages show it).
pub struct Reader<'a> {
    what: &'static str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Reader<'a> {
    /// `undefined`/`null` is no options; anything but an object is refused, and so is any key not
    /// in `known`.
    pub fn new(what: &'static str, v: &'a Value, known: &[&str]) -> Result<Self> {
        let map = match v {
            Value::Null => None,
            Value::Object(m) => Some(m),
            _ => return Err(Error::config(format!("{what}: options must be an object."))),
        };
        if let Some(m) = map {
            for key in m.keys() {
                if !known.contains(&key.as_str()) {
                    return Err(unknown_key(what, key, known));
                }
            }
        }
        Ok(Reader { what, map })
    }

    /// A message about this options object.
    pub fn err(&self, message: impl std::fmt::Display) -> Error {
        Error::config(format!("{}: {message}", self.what))
    }

    /// The value of `key`; `null` counts as absent.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    pub fn bool(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.err(format!("{key} must be a boolean."))),
        }
    }

    /// An integer in `range`; fractions, strings and numbers out of range are refused.
    pub fn int(&self, key: &str, default: u64, range: RangeInclusive<u64>) -> Result<u64> {
        let Some(v) = self.get(key) else { return Ok(default) };
        int_in(v, &range).ok_or_else(|| {
            self.err(format!("{key} must be an integer from {} to {}, not {}.", range.start(), range.end(), shown(v)))
        })
    }

    pub fn string(&self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.err(format!("{key} must be a string."))),
        }
    }

    /// A string that must be there and not empty.
    pub fn required_string(&self, key: &str) -> Result<String> {
        match self.string(key)? {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(self.err(format!("{key} must be a non-empty string."))),
        }
    }

    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| self.err(format!("{key} must be an array of strings."))),
            Some(_) => Err(self.err(format!("{key} must be an array of strings."))),
        }
    }

    /// Names (`ignore`, `deny`): non-empty strings without a NUL.
    pub fn names(&self, key: &str, default: Vec<String>) -> Result<Vec<String>> {
        let names = self.strings(key)?.unwrap_or(default);
        if names.iter().any(|n| n.is_empty() || n.contains('\0')) {
            return Err(self.err(format!("{key} entries must be non-empty names.")));
        }
        Ok(names)
    }

    /// An object of string values (an environment).
    pub fn string_map(&self, key: &str) -> Result<BTreeMap<String, String>> {
        match self.get(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect::<Option<BTreeMap<_, _>>>()
                .ok_or_else(|| self.err(format!("{key} must be an object of string values."))),
            Some(_) => Err(self.err(format!("{key} must be an object of string values."))),
        }
    }

    /// Whether `key` holds a function (the facade's tag for one).
    pub fn is_function(&self, key: &str) -> bool {
        self.get(key).is_some_and(is_function)
    }
}

impl Reader<'_> {
    /// `inheritEnv`: `true` (everything), or a list of names.
    pub fn inherit_env(&self, key: &str) -> Result<crate::shell::exec::InheritEnv> {
        use crate::shell::exec::InheritEnv;
        match self.get(key) {
            None | Some(Value::Bool(false)) => Ok(InheritEnv::None),
            Some(Value::Bool(true)) => Ok(InheritEnv::All),
            Some(_) => self
                .strings(key)
                .map_err(|_| self.err(format!("{key} must be true or an array of variable names.")))
                .map(|names| InheritEnv::List(names.unwrap_or_default())),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The providers' and sandboxes' options (the tools', checkpoints' and broker's live with them)

/// The options of a directory that commands run in: `NodeWorkspace({ root, env?, inheritEnv? })`
/// and `SandboxShell(adapter, { cwd, env?, inheritEnv? })`.
pub struct DirOptions {
    /// `root` or `cwd`.
    pub dir: String,
    pub env: BTreeMap<String, String>,
    pub inherit: crate::shell::exec::InheritEnv,
}

fn dir_options(what: &'static str, v: &Value, key: &str, missing: &str) -> Result<DirOptions> {
    let r = Reader::new(what, v, &[key, "env", "inheritEnv"])?;
    let dir = r.string(key)?.ok_or_else(|| r.err(missing))?;
    Ok(DirOptions { dir, env: r.string_map("env")?, inherit: r.inherit_env("inheritEnv")? })
}

pub fn node_workspace(v: &Value) -> Result<DirOptions> {
    dir_options("NodeWorkspace", v, "root", "root must be a path to an existing directory.")
}

pub fn sandbox_shell(v: &Value) -> Result<DirOptions> {
    dir_options("SandboxShell", v, "cwd", "cwd must be an absolute path.")
}

/// `MemoryWorkspace({ files?, exec? })`: the files, and whether an exec stub was given.
pub struct MemoryWorkspaceOptions {
    pub files: BTreeMap<String, String>,
    pub exec: bool,
}

pub fn memory_workspace(v: &Value) -> Result<MemoryWorkspaceOptions> {
    let r = Reader::new("MemoryWorkspace", v, &["files", "exec"])?;
    let files = r.string_map("files").map_err(|_| r.err("files must be an object of path to content (strings)."))?;
    let exec = match r.get("exec") {
        None => false,
        Some(f) if is_function(f) => true,
        Some(_) => return Err(r.err("exec must be a function.")),
    };
    Ok(MemoryWorkspaceOptions { files, exec })
}

/// `SubprocessSandbox({ image, network?, broker?, networkName?, dockerHost? })` (the broker is
/// attached by the binding).
/// A sandbox's `network`: `'none'` (the default), `'default'` where `with_default`, or
/// `{ allow: [hosts] }` (the hosts as given; the sandbox checks them).
pub fn network(r: &Reader<'_>, with_default: bool) -> Result<crate::sandbox::Network> {
    use crate::sandbox::Network;
    let shape = || {
        r.err(if with_default {
            "network must be 'none', 'default' or { allow: [hosts] }."
        } else {
            "network must be 'none' or { allow: [hosts] }."
        })
    };
    Ok(match r.get("network") {
        None => Network::None,
        Some(Value::String(s)) if s == "none" => Network::None,
        Some(Value::String(s)) if s == "default" && with_default => Network::Default,
        Some(Value::Object(o)) if o.keys().all(|k| k == "allow") => match o.get("allow") {
            Some(Value::Array(hosts)) => Network::Allow(
                hosts
                    .iter()
                    .map(|h| h.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| r.err("network.allow must be an array of host names."))?,
            ),
            _ => return Err(shape()),
        },
        Some(_) => return Err(shape()),
    })
}

pub fn subprocess_sandbox(v: &Value) -> Result<crate::sandbox::SubprocessSandboxOptions> {
    let r = Reader::new(
        "SubprocessSandbox",
        v,
        &["image", "network", "broker", "networkName", "dockerHost", "limits", "reuse", "tls", "protect"],
    )?;
    let network = network(&r, true)?;
    if r.get("broker").is_some_and(|b| !b.is_object()) {
        return Err(r.err("broker must come from createCredentialBroker()."));
    }
    Ok(crate::sandbox::SubprocessSandboxOptions {
        image: r.required_string("image")?,
        network,
        broker: None,
        network_name: r.string("networkName")?,
        docker_host: r.string("dockerHost")?,
        limits: crate::sandbox::limits::Limits::from_option(r.get("limits"), "SubprocessSandbox limits")?,
        reuse: match r.get("reuse") {
            None => crate::sandbox::Reuse::Command,
            Some(Value::String(s)) if s == "command" => crate::sandbox::Reuse::Command,
            Some(Value::String(s)) if s == "session" => crate::sandbox::Reuse::Session,
            Some(_) => return Err(r.err("reuse must be 'command' or 'session'.")),
        },
        tls: match r.get("tls") {
            None => None,
            Some(t) => {
                let t = Reader::new("SubprocessSandbox tls", t, &["ca", "cert", "key"])?;
                Some(crate::sandbox::DockerTls { ca: t.string("ca")?, cert: t.string("cert")?, key: t.string("key")? })
            }
        },
        protect: {
            let list = r.strings("protect")?.unwrap_or_else(|| vec![".git".into()]);
            if list.iter().any(|p| p.is_empty() || p.contains('\0')) {
                return Err(r.err("protect entries must be non-empty paths."));
            }
            list
        },
    })
}

/// `new WorkspaceToolRegistry({ store?, onDispatch? })`: the keys and what each may be (the
/// binding turns the store into a handle; a store written in JS is checked for its methods there).
pub fn tool_registry(v: &Value) -> Result<()> {
    if v.is_null() {
        return Ok(());
    }
    let r = Reader::new("WorkspaceToolRegistry", v, &["store", "onDispatch"])?;
    if r.get("onDispatch").is_some_and(|f| !is_function(f)) {
        return Err(r.err("onDispatch must be a function."));
    }
    if r.get("store").is_some_and(|s| !s.is_object() && !s.is_null()) {
        return Err(
            r.err("store must be a MemoryToolStore, a SqliteToolStore or an object with get, put, delete and list.")
        );
    }
    Ok(())
}

/// `defineTool({ name, description?, parameters? | inputSchema?, needsApproval?, execute })`: the
/// tool's data with its defaults (`description` empty, parameters an object without
/// properties); the binding attaches `execute` and `needsApproval`.
pub fn define_tool(v: &Value) -> Result<Value> {
    let bad = || Error::config("defineTool: a tool needs a string name and an execute function.");
    let spec = v.as_object().ok_or_else(bad)?;
    let name = spec.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(bad)?;
    if !spec.get("execute").is_some_and(is_function) {
        return Err(bad());
    }
    let description = match spec.get("description") {
        None | Some(Value::Null) => "",
        Some(Value::String(d)) => d,
        Some(_) => return Err(Error::config(format!("defineTool {name}: description must be a string."))),
    };
    // The schema object itself stays on the JavaScript side (it may be more than plain data):
    // this says which key holds it, or gives the default.
    let from = ["parameters", "inputSchema"].into_iter().find(|k| spec.get(*k).is_some_and(|p| !p.is_null()));
    if let Some(k) = from {
        if !spec[k].is_object() {
            return Err(Error::config(format!("defineTool {name}: {k} must be a JSON Schema object.")));
        }
    }
    Ok(json!({
        "name": name,
        "description": description,
        "parametersFrom": from,
        "parameters": json!({ "type": "object", "properties": {} }),
    }))
}

/// `createCredentialBroker({ rules, allow?, allowPrivate?, host?, port?, ca? })`: a rule's header
/// value is a string or a function (sync or async) called per request.
pub fn broker(v: &Value, fns: Functions<'_>) -> Result<crate::broker::BrokerConfig> {
    use crate::broker::{FixedHeader, HeaderSource};
    let r = Reader::new("createCredentialBroker", v, &["rules", "allow", "allowPrivate", "host", "port", "ca"])?;
    let mut rules = Vec::new();
    match r.get("rules") {
        None => {}
        Some(Value::Object(hosts)) => {
            for (host, headers) in hosts {
                let Value::Object(headers) = headers else {
                    return Err(r.err(format!("rules['{host}'] must be an object of header name to value.")));
                };
                let mut list: Vec<(String, Arc<dyn HeaderSource>)> = Vec::new();
                for (name, value) in headers {
                    let source: Arc<dyn HeaderSource> = match value {
                        Value::String(s) => FixedHeader::arc(s),
                        f => Arc::new(CallableHeader(function_of(f, fns).ok_or_else(|| {
                            r.err(format!("rule '{host}' header '{name}' must be a string or a function."))
                        })?)),
                    };
                    list.push((name.clone(), source));
                }
                rules.push((host.clone(), list));
            }
        }
        Some(_) => return Err(r.err("rules must be an object of host to headers.")),
    }
    let ca = match r.get("ca") {
        Some(Value::String(pem)) => vec![pem.clone()],
        _ => r.strings("ca")?.unwrap_or_default(),
    };
    Ok(crate::broker::BrokerConfig {
        rules,
        allow: r.strings("allow")?.unwrap_or_default(),
        allow_private: r.strings("allowPrivate")?.unwrap_or_default(),
        host: r.string("host")?,
        port: match r.get("port") {
            None => None,
            Some(_) => Some(r.int("port", 0, 0..=65535)? as u16),
        },
        extra_ca_pem: ca,
    })
}

/// A header whose value a function gives, per request.
struct CallableHeader(Arc<dyn Callable>);

#[async_trait]
impl crate::broker::HeaderSource for CallableHeader {
    async fn value(&self) -> Result<String> {
        match self.0.call(Vec::new()).await? {
            Value::String(s) => Ok(s),
            _ => Err(Error::new(crate::error::Code::Io, "A header function must return a string.")),
        }
    }
}

/// A function of the caller's (a JavaScript function, in the binding), called with its arguments
/// as JSON. The facade tags a function option as `{ "$js": "function", "index": n }`.
#[async_trait]
pub trait Callable: Send + Sync {
    async fn call(&self, args: Vec<Value>) -> Result<Value>;
}

impl std::fmt::Debug for dyn Callable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Callable(..)")
    }
}

/// The functions of one options object, by the index their tags carry.
pub type Functions<'a> = &'a dyn Fn(usize) -> Option<Arc<dyn Callable>>;

/// The function a tagged option names.
pub fn function_of(v: &Value, fns: Functions<'_>) -> Option<Arc<dyn Callable>> {
    if !is_function(v) {
        return None;
    }
    fns(v.get("index")?.as_u64()? as usize)
}

/// JavaScript's truthiness of a value a function returned.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// Whether a value is the facade's tag for a JavaScript function.
pub fn is_function(v: &Value) -> bool {
    v.get("$js").and_then(Value::as_str) == Some("function")
}

/// A JavaScript RegExp, as the facade tags it: its source and flags.
pub fn regexp_of(v: &Value) -> Option<(&str, &str)> {
    if v.get("$js").and_then(Value::as_str) != Some("regexp") {
        return None;
    }
    Some((v.get("source")?.as_str()?, v.get("flags")?.as_str()?))
}

/// Whether a value is the facade's tag for a JavaScript object that is not plain data.
pub fn is_js_object(v: &Value) -> bool {
    v.get("$js").and_then(Value::as_str) == Some("object")
}

fn int_in(v: &Value, range: &RangeInclusive<u64>) -> Option<u64> {
    let f = v.as_f64()?;
    if f.fract() != 0.0 || f < *range.start() as f64 || f > *range.end() as f64 {
        return None;
    }
    Some(f as u64)
}

fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!("{}…", &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)])
    } else {
        s
    }
}

fn unknown_key(what: &str, key: &str, known: &[&str]) -> Error {
    match did_you_mean(key, known) {
        Some(near) => Error::config(format!("{what}: unknown option '{key}'; did you mean {near}?")),
        None => Error::config(format!("{what}: unknown option '{key}'. Valid options: {}.", known.join(", "))),
    }
}

/// The known key nearest to `key`: the same but for case, or within a small edit distance.
pub fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = key.to_lowercase();
    if let Some(k) = known.iter().find(|k| k.to_lowercase() == lower) {
        return Some(k);
    }
    let limit = (key.chars().count() / 3).clamp(1, 3);
    known
        .iter()
        .map(|k| (edit_distance(&lower, &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KNOWN: [&str; 3] = ["maxResults", "maxReadLines", "readOnly"];

    #[test]
    fn an_unknown_key_is_a_configuration_error_naming_the_nearest_valid_key() {
        let e = Reader::new("createFsTools", &json!({ "maxResult": 3 }), &KNOWN).err().unwrap();
        assert_eq!(e.code, crate::error::Code::Configuration);
        assert_eq!(e.message, "createFsTools: unknown option 'maxResult'; did you mean maxResults?");
        let e = Reader::new("createFsTools", &json!({ "readonly": true }), &KNOWN).err().unwrap();
        assert!(e.message.ends_with("did you mean readOnly?"), "{}", e.message);
        let e = Reader::new("createFsTools", &json!({ "colour": 1 }), &KNOWN).err().unwrap();
        assert!(e.message.contains("Valid options: maxResults, maxReadLines, readOnly."), "{}", e.message);
    }

    #[test]
    fn numbers_are_integers_within_their_bounds() {
        let v = json!({ "maxResults": 1e300, "maxReadLines": 2.5, "readOnly": null });
        let r = Reader::new("x", &v, &KNOWN).unwrap();
        let e = r.int("maxResults", 200, 1..=1_000_000).unwrap_err();
        assert_eq!(e.message, "x: maxResults must be an integer from 1 to 1000000, not 1e+300.");
        assert!(r.int("maxReadLines", 1, 1..=10).is_err());
        assert!(!r.bool("readOnly", false).unwrap(), "null is absent");
        let v = json!({ "maxResults": 7 });
        let r = Reader::new("x", &v, &KNOWN).unwrap();
        assert_eq!(r.int("maxResults", 200, 1..=1_000_000).unwrap(), 7);
        assert_eq!(r.int("maxReadLines", 2000, 1..=10_000).unwrap(), 2000);
    }

    #[test]
    fn options_that_are_not_an_object_are_refused() {
        assert!(Reader::new("x", &json!(3), &KNOWN).is_err());
        assert!(Reader::new("x", &json!([]), &KNOWN).is_err());
        assert!(Reader::new("x", &Value::Null, &KNOWN).is_ok());
    }
}
