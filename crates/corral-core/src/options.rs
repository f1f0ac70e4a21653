//! The one reader of options objects, a leaf of the crate: it depends on nothing but errors.
//! Each constructor's options (`createFsTools`, `createShellTool`, `NodeWorkspace`,
//! `MemoryWorkspace`, `WorkspaceCheckpoints`, `SandboxShell`, `SubprocessSandbox`, the broker)
//! are parsed into a typed struct next to the code they configure, through a [`Reader`]: it refuses a key it does not know (naming the nearest valid one), checks
//! every type and bounds every number, so that no `1e300` reaches arithmetic. The binding only
//! converts JavaScript values; the facade only tags what JSON cannot hold (a function is
//! `{ "$js": "function" }`, another object that is not plain data `{ "$js": "object" }`).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

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
