//! A spec's `parameters`, compiled once per content. A JSON Schema's `pattern`s compile to
//! regular expressions, and a `\p{L}` class is a large automaton: one tenant's 200 such patterns
//! took seconds, again on every get, list and `toolsFor`, on the threads every tenant shares. So
//! patterns are bounded when a spec is checked (64 per spec, 1,024 characters each), a compiled
//! schema is kept by its exact JSON text (a JS store's specs hit it too), and the registry
//! compiles on the blocking pool.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::Value;

use crate::error::Result;

/// The most `pattern` keywords and `patternProperties` keys one spec's `parameters` may hold.
pub const MAX_PATTERNS: usize = 64;
/// The longest of them, in characters.
pub const MAX_PATTERN_CHARS: usize = 1024;
/// How many compiled schemas are kept (the least recently used goes first).
const KEEP: usize = 512;

#[derive(Default)]
struct Cache {
    by_text: HashMap<String, Arc<jsonschema::Validator>>,
    order: VecDeque<String>,
    /// How many times each text was compiled (tests read it: a cache that works compiles once).
    #[cfg(test)]
    compiles: HashMap<String, usize>,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Default::default);

/// Every `pattern` keyword value and `patternProperties` key anywhere in `v`.
fn patterns(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                match (k.as_str(), child) {
                    ("pattern", Value::String(p)) => out.push(p.clone()),
                    ("patternProperties", Value::Object(props)) => out.extend(props.keys().cloned()),
                    _ => {}
                }
                patterns(child, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| patterns(c, out)),
        _ => {}
    }
}

/// Why `parameters` holds too many or too long patterns, if it does.
pub fn pattern_refusal(parameters: &Value) -> Option<String> {
    let mut found = Vec::new();
    patterns(parameters, &mut found);
    if found.len() > MAX_PATTERNS {
        return Some(format!(
            "parameters holds {} patterns (pattern keywords and patternProperties keys); at most {MAX_PATTERNS} are allowed.",
            found.len()
        ));
    }
    found.iter().find(|p| p.chars().count() > MAX_PATTERN_CHARS).map(|p| {
        format!(
            "a pattern in parameters is {} characters long; at most {MAX_PATTERN_CHARS} are allowed.",
            p.chars().count()
        )
    })
}

/// The compiled schema of `parameters` (checked by `pattern_refusal` first): the cached one
/// when this exact text was compiled before. `Err` carries the compiler's words.
pub fn validator(parameters: &Value) -> std::result::Result<Arc<jsonschema::Validator>, String> {
    let text = parameters.to_string();
    {
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = cache.by_text.get(&text).cloned() {
            // Most recently used last: the oldest unused one goes first.
            if let Some(i) = cache.order.iter().position(|t| *t == text) {
                let t = cache.order.remove(i).unwrap_or_default();
                cache.order.push_back(t);
            }
            return Ok(v);
        }
    }
    // Compiled without the lock held: another schema need not wait for this one.
    let compiled = Arc::new(jsonschema::validator_for(parameters).map_err(|e| e.to_string())?);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    #[cfg(test)]
    {
        *cache.compiles.entry(text.clone()).or_default() += 1;
    }
    if !cache.by_text.contains_key(&text) {
        if cache.order.len() >= KEEP {
            if let Some(old) = cache.order.pop_front() {
                cache.by_text.remove(&old);
            }
        }
        cache.order.push_back(text.clone());
        cache.by_text.insert(text, compiled.clone());
    }
    Ok(compiled)
}

/// Runs `f` (which may compile schemas) on the blocking pool of the current runtime.
pub async fn off_the_async_threads<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(crate::error::Error::new(crate::error::Code::Io, format!("internal error: {e}"))),
    }
}

/// How many times `parameters` was compiled.
#[cfg(test)]
pub fn compiles_of(parameters: &Value) -> usize {
    CACHE.lock().unwrap().compiles.get(&parameters.to_string()).copied().unwrap_or(0)
}
