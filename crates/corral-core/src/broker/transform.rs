//! Request transformations: headers set on requests that match a host, a path, methods, query
//! parameters and headers, outside the sandbox (the values never enter it). They apply after the
//! rules, on every request the broker reads (plain `http://` through the proxy, the path form,
//! and hosts whose TLS it terminates); a CONNECT tunnel it does not terminate passes untouched.
//!
//! `setTransformations` replaces the list; `addTransformations` replaces a transformation with
//! the same match and header names, and appends the others, so adding twice changes nothing.

use std::sync::Arc;

use http::{HeaderMap, HeaderName};
use serde_json::Value;

use super::host::HostPattern;
use super::HeaderSource;
use crate::error::{Error, Result};
use crate::options::Functions;
use crate::search::jsregex::JsRegex;

/// How a path, a key or a value is matched.
#[derive(Clone)]
pub enum Matcher {
    Exact(String),
    StartsWith(String),
    /// A JavaScript regular expression (its source), through the core's translation.
    Regex(Arc<JsRegex>),
}

impl Matcher {
    fn from_value(v: &Value, what: &str) -> Result<Matcher> {
        let bad =
            || Error::config(format!("{what} must be {{ exact }}, {{ startsWith }} or {{ regex }} with a string."));
        let o = v.as_object().filter(|o| o.len() == 1).ok_or_else(bad)?;
        let (kind, text) = o.iter().next().ok_or_else(bad)?;
        let text = text.as_str().ok_or_else(bad)?;
        Ok(match kind.as_str() {
            "exact" => Matcher::Exact(text.to_string()),
            "startsWith" => Matcher::StartsWith(text.to_string()),
            "regex" => Matcher::Regex(Arc::new(
                JsRegex::new(text, "").map_err(|e| Error::config(format!("{what}: {}", e.message)))?,
            )),
            _ => return Err(bad()),
        })
    }

    /// Whether `s` matches; a regular expression that cannot tell in its step budget does not.
    fn matches(&self, s: &str) -> bool {
        match self {
            Matcher::Exact(e) => s == e,
            Matcher::StartsWith(p) => s.starts_with(p.as_str()),
            Matcher::Regex(re) => re.is_match(s).unwrap_or(false),
        }
    }

    /// The same matcher over lower-cased text (header names).
    fn lowercased(self) -> Matcher {
        match self {
            Matcher::Exact(e) => Matcher::Exact(e.to_ascii_lowercase()),
            Matcher::StartsWith(p) => Matcher::StartsWith(p.to_ascii_lowercase()),
            re => re,
        }
    }
}

/// A query parameter or a header that must be present: its key and value each as given.
#[derive(Clone)]
pub struct KeyValue {
    key: Option<Matcher>,
    value: Option<Matcher>,
}

impl KeyValue {
    fn from_value(v: &Value, what: &str, lower_keys: bool) -> Result<KeyValue> {
        let o =
            v.as_object().ok_or_else(|| Error::config(format!("{what} entries are {{ key?, value? }} objects.")))?;
        if let Some(k) = o.keys().find(|k| *k != "key" && *k != "value") {
            return Err(Error::config(format!("{what}: unknown field {k:?}.")));
        }
        let key = o.get("key").map(|k| Matcher::from_value(k, &format!("{what} key"))).transpose()?;
        let key = if lower_keys { key.map(Matcher::lowercased) } else { key };
        let value = o.get("value").map(|k| Matcher::from_value(k, &format!("{what} value"))).transpose()?;
        Ok(KeyValue { key, value })
    }

    fn matches(&self, key: &str, value: &str) -> bool {
        self.key.as_ref().is_none_or(|m| m.matches(key)) && self.value.as_ref().is_none_or(|m| m.matches(value))
    }
}

/// One transformation.
#[derive(Clone)]
pub struct Transformation {
    host: HostPattern,
    path: Option<Matcher>,
    methods: Option<Vec<String>>,
    query: Vec<KeyValue>,
    headers: Vec<KeyValue>,
    /// The headers set, in order.
    pub(crate) set: Vec<(HeaderName, Arc<dyn HeaderSource>)>,
    /// What `add` compares: the match as given and the header names.
    identity: String,
}

/// What a request looks like to a transformation.
pub(crate) struct RequestView<'a> {
    pub host: &'a str,
    pub method: &'a str,
    /// The path and query as sent (`/v1/messages?beta=true`).
    pub path: &'a str,
    pub headers: &'a HeaderMap,
}

/// `%XX` decoded (a bad escape stays as it is); `+` stays `+`.
fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `path` holds `.` or `..` segments, or a percent-encoded dot or slash.
fn ambiguous(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    lower.contains("%2e")
        || lower.contains("%2f")
        || lower.contains("%5c")
        || path.split('/').any(|seg| seg == "." || seg == "..")
}

impl Transformation {
    /// `{ match: { host, path?, method?, queryString?, headers? }, transform: { headers } }`;
    /// header values as in rules.
    pub fn from_value(v: &Value, fns: Functions<'_>, what: &str) -> Result<Transformation> {
        let bad = |m: &str| Error::config(format!("{what}: {m}"));
        let o = v.as_object().ok_or_else(|| bad("a transformation is { match, transform }."))?;
        if let Some(k) = o.keys().find(|k| *k != "match" && *k != "transform") {
            return Err(bad(&format!("unknown field {k:?}.")));
        }
        let m = o.get("match").and_then(Value::as_object).ok_or_else(|| bad("match must be an object with a host."))?;
        const MATCH: [&str; 5] = ["host", "path", "method", "queryString", "headers"];
        if let Some(k) = m.keys().find(|k| !MATCH.contains(&k.as_str())) {
            return Err(bad(&format!("unknown field match.{k}.")));
        }
        let host = m.get("host").and_then(Value::as_str).ok_or_else(|| bad("match.host must be a host name."))?;
        let host = HostPattern::parse_named(host, &format!("{what}: match.host"))?;
        let path = m.get("path").map(|p| Matcher::from_value(p, &format!("{what}: match.path"))).transpose()?;
        let methods = match m.get("method") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|x| x.as_str().map(str::to_ascii_uppercase))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad("match.method must be an array of method names."))?,
            ),
            Some(_) => return Err(bad("match.method must be an array of method names.")),
        };
        let list = |key: &str, lower: bool| -> Result<Vec<KeyValue>> {
            match m.get(key) {
                None => Ok(Vec::new()),
                Some(Value::Array(a)) => {
                    a.iter().map(|kv| KeyValue::from_value(kv, &format!("{what}: match.{key}"), lower)).collect()
                }
                Some(_) => Err(bad(&format!("match.{key} must be an array."))),
            }
        };
        let (query, headers) = (list("queryString", false)?, list("headers", true)?);
        let t = o.get("transform").and_then(Value::as_object).ok_or_else(|| bad("transform must be { headers }."))?;
        if let Some(k) = t.keys().find(|k| *k != "headers") {
            return Err(bad(&format!("unknown field transform.{k}.")));
        }
        let given =
            t.get("headers").and_then(Value::as_object).ok_or_else(|| bad("transform.headers must be an object."))?;
        let mut set = Vec::new();
        for (name, value) in given {
            let header = super::header::header_name(name, &format!("{what}: transform.headers"))?;
            if set.iter().any(|(n, _)| *n == header) {
                return Err(bad(&format!("the {header} header is given twice.")));
            }
            let source = super::header::header_source(value, fns, &format!("{what}: transform.headers.{name}"))?;
            set.push((header, source));
        }
        let mut names: Vec<&str> = set.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        let identity = format!("{}\n{}", Value::Object(m.clone()), names.join(","));
        Ok(Transformation { host, path, methods, query, headers, set, identity })
    }

    pub(crate) fn matches(&self, r: &RequestView<'_>) -> bool {
        if !self.host.matches(r.host) {
            return false;
        }
        if self.methods.as_ref().is_some_and(|ms| !ms.iter().any(|m| m == r.method)) {
            return false;
        }
        let (path, query) = match r.path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (r.path, None),
        };
        // A path with dot segments (plain or percent-encoded) or an encoded slash could name
        // another path upstream than the one matched: no path matcher matches it.
        if self.path.is_some() && ambiguous(path) {
            return false;
        }
        if self.path.as_ref().is_some_and(|m| !m.matches(path)) {
            return false;
        }
        if !self.query.is_empty() {
            let pairs: Vec<(String, String)> = query
                .unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (percent_decode(k), percent_decode(v)),
                    None => (percent_decode(p), String::new()),
                })
                .collect();
            if !self.query.iter().all(|kv| pairs.iter().any(|(k, v)| kv.matches(k, v))) {
                return false;
            }
        }
        self.headers
            .iter()
            .all(|kv| r.headers.iter().any(|(name, value)| value.to_str().is_ok_and(|v| kv.matches(name.as_str(), v))))
    }
}

/// The broker's transformations, changed at run time.
#[derive(Default)]
pub(crate) struct Transformations(std::sync::RwLock<Vec<Arc<Transformation>>>);

impl Transformations {
    pub fn set(&self, list: Vec<Transformation>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = list.into_iter().map(Arc::new).collect();
    }

    pub fn add(&self, list: Vec<Transformation>) {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        for t in list {
            match current.iter().position(|c| c.identity == t.identity) {
                Some(i) => current[i] = Arc::new(t),
                None => current.push(Arc::new(t)),
            }
        }
    }

    /// Those that match, in order.
    pub fn matching(&self, r: &RequestView<'_>) -> Vec<Arc<Transformation>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).iter().filter(|t| t.matches(r)).cloned().collect()
    }

    /// Whether a transformation names a host `host` matches.
    pub fn has_host(&self, host: &str) -> bool {
        self.0.read().unwrap_or_else(|p| p.into_inner()).iter().any(|t| t.host.matches(host))
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.read().unwrap().len()
    }
}

/// A list of transformations (`transformations`, `setTransformations`, `addTransformations`).
pub fn from_list(v: &Value, fns: Functions<'_>, what: &str) -> Result<Vec<Transformation>> {
    match v {
        Value::Array(a) => {
            a.iter().enumerate().map(|(i, t)| Transformation::from_value(t, fns, &format!("{what}[{i}]"))).collect()
        }
        _ => Err(Error::config(format!("{what} must be an array of {{ match, transform }}."))),
    }
}
