//! Redaction at the boundary (API.md "Secrets stay out of the model"): every secret in text a
//! tool gives the model becomes a marker `[secret:<rule>#<n>]`, and a marker the model writes back
//! in an edit becomes its value again where the file holds it.
//!
//! The secrets: values given to the redactor, the values of this process's environment variables
//! with a secret-like name (read when the redactor is made), the values other parts of corral
//! register while they live (the broker's injected headers, `register`), their encoded forms
//! (base64, percent-encoding), and, with the default rules, text matching `rules::RULES`.
//! Text without a secret is returned as it was (borrowed: byte for byte). A multi-line secret
//! becomes one marker per line, so line numbers stay true.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use aho_corasick::AhoCorasick;
use base64::Engine;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::options::Reader;

pub mod rules;
pub mod stream;

/// Where a secret value came from: rules' and given values are restored into a file that holds
/// them; the broker's and the environment's never are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Rule,
    Given,
    Env,
    Broker,
}

impl Source {
    fn restorable(self) -> bool {
        matches!(self, Source::Rule | Source::Given)
    }
}

/// A secret found: start, end, where its value came from, and the rule named in its marker.
type Found = (usize, usize, Source, &'static str);

/// The markers one session was given: each value's marker and back.
#[derive(Default)]
struct Markers {
    by_value: HashMap<String, String>,
    by_marker: HashMap<String, (String, Source)>,
    next: usize,
    /// The values given a marker, as literals: a value shown once is a secret wherever it shows
    /// up again in the session (one line of a key block alone, an error that quotes it). Made
    /// again when a value is added.
    issued: Option<Issued>,
}

/// A literal secret (a value or one of its encoded forms), its source and the rule it is named by.
type Literal = (String, Source, &'static str);

/// The values one session was given markers for, and their matcher.
type Issued = Arc<(AhoCorasick, Vec<Literal>)>;

/// Every literal secret of a redactor at one generation of the registry, and their matcher.
struct Literals {
    generation: u64,
    list: Vec<Literal>,
    matcher: Option<AhoCorasick>,
    /// The longest, in bytes.
    longest: usize,
}

/// What `createRedactor({ values, rules, allow })` makes.
pub struct Redactor {
    /// Its own literal secrets: given values and the environment's, with their encoded forms.
    own: Vec<Literal>,
    /// Those and the registered values', built again only when the registry changes.
    current: RwLock<Option<Arc<Literals>>>,
    rules: bool,
    allow: Vec<String>,
    sessions: Mutex<HashMap<String, Markers>>,
}

impl std::fmt::Debug for Redactor {
    /// Never its values.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("rules", &self.rules).finish_non_exhaustive()
    }
}

/// Values registered by parts of corral while they live (the broker's injected values).
struct Registered {
    generation: u64,
    sets: Vec<Weak<Vec<String>>>,
}

fn registry() -> &'static Mutex<Registered> {
    static R: OnceLock<Mutex<Registered>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Registered { generation: 1, sets: Vec::new() }))
}

/// Registers values every redactor in this process treats as secrets (never restored into a
/// file) for as long as the returned handle lives.
pub fn register(values: Vec<String>) -> Arc<Vec<String>> {
    let set = Arc::new(values);
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.sets.retain(|w| w.strong_count() > 0);
    r.sets.push(Arc::downgrade(&set));
    r.generation += 1;
    set
}

/// The registry's generation: it changes whenever a set of values is registered or ends.
fn generation() -> u64 {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    let before = r.sets.len();
    r.sets.retain(|w| w.strong_count() > 0);
    if r.sets.len() != before {
        r.generation += 1;
    }
    r.generation
}

/// The registered values alive now.
fn registered() -> Vec<String> {
    let r = registry().lock().unwrap_or_else(|p| p.into_inner());
    r.sets.iter().filter_map(Weak::upgrade).flat_map(|s| s.as_ref().clone()).collect()
}

/// Whether an environment variable's name says it holds a secret: its last `_`-separated word.
pub fn secret_name(name: &str) -> bool {
    let last = name.rsplit('_').next().unwrap_or("").to_ascii_uppercase();
    matches!(last.as_str(), "KEY" | "TOKEN" | "SECRET" | "PASSWORD" | "PASSWD" | "CREDENTIAL" | "CREDENTIALS")
}

/// Whether an environment variable's value is taken as a secret: 8 characters or more, and not
/// an absolute path, a URL without credentials, a number, `true` or `false`.
pub fn secret_value(v: &str) -> bool {
    let v = v.trim();
    if v.chars().count() < 8 || v.starts_with('/') || v.parse::<f64>().is_ok() {
        return false;
    }
    if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") {
        return false;
    }
    if let Some((scheme, rest)) = v.split_once("://") {
        let plain_scheme =
            !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if plain_scheme && !authority.contains('@') {
            return false;
        }
    }
    true
}

/// A value and the forms it may show up in: as it is, base64 (standard and URL-safe, padded or
/// not) and percent-encoded.
pub(crate) fn forms(v: &str) -> Vec<String> {
    let mut out = vec![v.to_string()];
    for e in [
        base64::engine::general_purpose::STANDARD.encode(v),
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(v),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v),
        crate::text::percent_encode(v),
    ] {
        if e.len() >= 8 && !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// What a redactor is made with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedactorOptions {
    pub values: Vec<String>,
    /// The default rule set (`rules: 'default'`); `false` turns it off.
    pub rules: bool,
    pub allow: Vec<String>,
}

impl RedactorOptions {
    /// `createRedactor`'s options, or `redact: { values, rules, allow }` (`what` names which).
    pub fn from_options(what: &'static str, v: &Value) -> Result<RedactorOptions> {
        let r = Reader::new(what, v, &["values", "rules", "allow"])?;
        let rules = match r.get("rules") {
            None => true,
            Some(Value::String(s)) if s == "default" => true,
            Some(Value::Bool(false)) => false,
            Some(_) => return Err(r.err("rules must be 'default' or false.")),
        };
        Ok(RedactorOptions {
            values: r.strings("values")?.unwrap_or_default(),
            rules,
            allow: r.strings("allow")?.unwrap_or_default(),
        })
    }
}

/// Environment variables: (name, value).
type Env = Vec<(String, String)>;

/// The secret-named environment variables of this process now, with their values.
fn env_secrets() -> Env {
    let mut env: Vec<(String, String)> = std::env::vars().filter(|(k, v)| secret_name(k) && secret_value(v)).collect();
    env.sort();
    env
}

/// The redactor of every surface made without one of its own (`redact: true`, the default): one
/// per process, so a marker the shell tool gave is restored by the file tools of the same
/// session; made again when the environment's secrets have changed since.
pub fn shared() -> Arc<Redactor> {
    static SHARED: Mutex<Option<(Env, Arc<Redactor>)>> = Mutex::new(None);
    let env = env_secrets();
    let mut s = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    match s.as_ref() {
        Some((seen, r)) if *seen == env => r.clone(),
        _ => {
            let r = Arc::new(Redactor::with_env(RedactorOptions { rules: true, ..Default::default() }, env.clone()));
            *s = Some((env, r.clone()));
            r
        }
    }
}

/// The `redact` option of a surface (`createFsTools`, `createShellTool`, `toolsFor`, the
/// adapters): absent or `true` is the shared redactor, `false` none, `{ values, rules, allow }` a
/// redactor of its own, and a `Redactor` (tagged as an object; the binding gives its handle as
/// `given`) that one.
pub fn from_option(r: &Reader<'_>, given: Option<Arc<Redactor>>) -> Result<Option<Arc<Redactor>>> {
    let wrong = || r.err("redact must be true, false, { values, rules, allow } or a Redactor from createRedactor().");
    match r.get("redact") {
        None | Some(Value::Bool(true)) => Ok(Some(given.unwrap_or_else(shared))),
        Some(Value::Bool(false)) => Ok(None),
        Some(v) if crate::options::is_js_object(v) => given.map(Some).ok_or_else(wrong),
        Some(v @ Value::Object(_)) if !crate::options::is_function(v) => {
            let o = RedactorOptions::from_options("redact", v).map_err(|e| r.err(e.message))?;
            Ok(Some(Arc::new(Redactor::new(o))))
        }
        Some(_) => Err(wrong()),
    }
}

impl Redactor {
    /// A redactor with `options`, the secret-named environment variables of this process as they
    /// are now, and the values registered while it runs.
    pub fn new(options: RedactorOptions) -> Redactor {
        Self::with_env(options, env_secrets())
    }

    pub(crate) fn with_env(options: RedactorOptions, env: Vec<(String, String)>) -> Redactor {
        let mut own = Vec::new();
        for v in options.values.iter().filter(|v| !v.is_empty()) {
            for f in forms(v) {
                own.push((f, Source::Given, "value"));
            }
        }
        for (_, v) in &env {
            for f in forms(v.trim()) {
                own.push((f, Source::Env, "env"));
            }
        }
        Redactor {
            own,
            current: RwLock::new(None),
            rules: options.rules,
            allow: options.allow,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The literal secrets now (the redactor's own and the registered values'), with their
    /// matcher: kept, and built again only when the registry has changed.
    fn literals(&self) -> Arc<Literals> {
        let generation = generation();
        if let Some(l) = self.current.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            if l.generation == generation {
                return l.clone();
            }
        }
        let mut list = self.own.clone();
        for v in registered().iter().filter(|v| v.len() >= 4) {
            for f in forms(v) {
                list.push((f, Source::Broker, "broker"));
            }
        }
        list.retain(|(v, _, _)| !self.allow.iter().any(|a| a == v));
        // Every match, overlapping ones too: two values that overlap are merged into one secret.
        let matcher =
            (!list.is_empty()).then(|| AhoCorasick::new(list.iter().map(|(v, _, _)| v.as_bytes())).ok()).flatten();
        let longest = list.iter().map(|(v, _, _)| v.len()).max().unwrap_or(0);
        let l = Arc::new(Literals { generation, list, matcher, longest });
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(l.clone());
        l
    }

    /// Every secret in `text`: (start, end, source, rule), in order, none overlapping (at one
    /// place the longer wins).
    fn find(&self, text: &str, session: &str) -> Vec<Found> {
        self.find_open(text, session).0
    }

    /// `find`, and whether a key block begins in `text` that does not end there.
    fn find_open(&self, text: &str, session: &str) -> (Vec<Found>, bool) {
        let mut open = false;
        let mut found: Vec<Found> = Vec::new();
        if let Some(issued) = self.issued(session) {
            let (matcher, values) = issued.as_ref();
            for hit in matcher.find_overlapping_iter(text.as_bytes()) {
                let (_, source, rule) = &values[hit.pattern().as_usize()];
                found.push((hit.start(), hit.end(), *source, rule));
            }
        }
        let lits = self.literals();
        if let Some(m) = &lits.matcher {
            for hit in m.find_overlapping_iter(text.as_bytes()) {
                let (_, source, rule) = &lits.list[hit.pattern().as_usize()];
                found.push((hit.start(), hit.end(), *source, rule));
            }
        }
        if self.rules {
            let (tokens, unended) = rules::tokens_and_open(text.as_bytes());
            open = unended;
            for (start, end, rule) in tokens {
                let token = &text.as_bytes()[start..end];
                if !self.allow.iter().any(|a| a.as_bytes() == token) {
                    found.push((start, end, Source::Rule, rule));
                }
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut out: Vec<Found> = Vec::with_capacity(found.len());
        for f in found {
            // Spans are on character boundaries: values and tokens are whole strings.
            if !(text.is_char_boundary(f.0) && text.is_char_boundary(f.1)) {
                continue;
            }
            match out.last_mut() {
                // Two secrets that overlap are one: none of either is shown. What can be written
                // back is what both sources allow.
                Some(l) if f.0 < l.1 => {
                    if f.1 > l.1 {
                        l.1 = f.1;
                        if !f.2.restorable() {
                            l.2 = f.2;
                        }
                    }
                }
                _ => out.push(f),
            }
        }
        (out, open)
    }

    /// What this redactor finds in one session now, taken once for many short texts (a search's
    /// lines): `may_hold` says, without a lock, whether a text could hold a secret at all.
    pub fn quick(&self, session: &str) -> Quick {
        Quick { literals: self.literals(), issued: self.issued(session), rules: self.rules }
    }

    /// Whether a secret in `text` could span lines: a `-----BEGIN` in it (any case) with the rules
    /// on, or a literal value with a line break.
    pub fn spans_lines(&self, text: &[u8]) -> bool {
        let begin =
            self.rules && memchr::memmem::find_iter(text, b"-----").any(|i| rules::pem_mark_at(text, i, b"begin"));
        begin || self.has_multi_line_value()
    }

    /// `text`, a run of whole lines of a longer text, redacted as `redact` does; `None` when a
    /// secret in it could go on past it (a key block that begins in it and does not end there, or
    /// a multi-line value to look for): then only the longer text can be redacted.
    pub fn redact_lines<'a>(&self, text: &'a str, session: &str) -> Option<Cow<'a, str>> {
        if self.has_multi_line_value() {
            return None;
        }
        let (found, open) = self.find_open(text, session);
        (!open).then(|| self.replaced(text, &found, session))
    }

    /// Whether a literal value to look for spans lines.
    fn has_multi_line_value(&self) -> bool {
        self.literals().list.iter().any(|(v, _, _)| v.contains('\n'))
    }

    /// `text` with the secrets `found` in it replaced by their markers; borrowed when there is none.
    fn replaced<'a>(&self, text: &'a str, found: &[Found], session: &str) -> Cow<'a, str> {
        if found.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(self.replace(text, found, 0, text.len(), session))
    }

    /// `text` with each secret replaced by its marker in `session`; borrowed when there is none.
    pub fn redact<'a>(&self, text: &'a str, session: &str) -> Cow<'a, str> {
        self.replaced(text, &self.find(text, session), session)
    }

    /// The values this session was given markers for, as a matcher (made when first needed after
    /// a value was added).
    fn issued(&self, session: &str) -> Option<Issued> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let m = sessions.get_mut(session)?;
        if m.by_marker.is_empty() {
            return None;
        }
        if m.issued.as_ref().is_some_and(|i| i.1.is_empty()) {
            return None;
        }
        if m.issued.is_none() {
            // (A short piece of a multi-line value is too common a text to be a secret alone.)
            let values: Vec<Literal> = m
                .by_marker
                .iter()
                .filter(|(_, (value, _))| value.len() >= 8)
                .map(|(marker, (value, source))| (value.clone(), *source, rule_in(marker)))
                .collect();
            let matcher = AhoCorasick::new(values.iter().map(|(v, _, _)| v.as_bytes())).ok()?;
            m.issued = Some(Arc::new((matcher, values)));
        }
        m.issued.clone()
    }

    /// `text[from..to]` with the secrets `found` in `text` (none crossing `from` or `to`)
    /// replaced by their markers.
    fn replace(&self, text: &str, found: &[Found], from: usize, to: usize, session: &str) -> String {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let markers = sessions.entry(session.to_string()).or_default();
        let mut out = String::with_capacity(to - from);
        let mut at = from;
        for &(start, end, source, rule) in found.iter().filter(|f| f.0 >= from && f.1 <= to) {
            out.push_str(&text[at..start]);
            // Each line of a multi-line secret is its own marker.
            let mut first = true;
            for line in text[start..end].split('\n') {
                if !first {
                    out.push('\n');
                }
                first = false;
                let (line, cr) = match line.strip_suffix('\r') {
                    Some(l) => (l, "\r"),
                    None => (line, ""),
                };
                if !line.is_empty() {
                    out.push_str(&marker(markers, line, source, rule));
                }
                out.push_str(cr);
            }
            at = end;
        }
        out.push_str(&text[at..to]);
        out
    }

    /// `text` (what the model wrote) with each marker this redactor gave `session` replaced by its
    /// value, where `current` (the file's content now) holds that value and the value may be
    /// written (not the broker's nor the environment's). Any other marker stays text.
    pub fn restore<'a>(&self, text: &'a str, session: &str, current: &str) -> Cow<'a, str> {
        if !text.contains("[secret:") {
            return Cow::Borrowed(text);
        }
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let Some(markers) = sessions.get(session) else { return Cow::Borrowed(text) };
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut changed = false;
        for (i, m) in markers_in(text) {
            out.push_str(&text[at..i]);
            match markers.by_marker.get(m) {
                Some((value, source)) if source.restorable() && current.contains(value.as_str()) => {
                    out.push_str(value);
                    changed = true;
                }
                _ => out.push_str(m),
            }
            at = i + m.len();
        }
        out.push_str(&text[at..]);
        if changed {
            Cow::Owned(out)
        } else {
            Cow::Borrowed(text)
        }
    }

    /// Every string in `v` redacted (an image's bytes are left as they are: they are not text).
    pub fn redact_json(&self, v: Value, session: &str) -> Value {
        match v {
            Value::String(s) => match self.redact(&s, session) {
                Cow::Borrowed(_) => Value::String(s),
                Cow::Owned(o) => Value::String(o),
            },
            Value::Array(a) => Value::Array(a.into_iter().map(|v| self.redact_json(v, session)).collect()),
            Value::Object(m) => {
                let image = m.get("type").and_then(Value::as_str) == Some("image");
                Value::Object(
                    m.into_iter()
                        .map(|(k, v)| {
                            let v = if image && k == "data" { v } else { self.redact_json(v, session) };
                            (k, v)
                        })
                        .collect(),
                )
            }
            v => v,
        }
    }

    /// `e` with its message redacted (a caller's own error, rethrown as it was, is left alone).
    pub fn redact_error(&self, mut e: Error, session: &str) -> Error {
        if e.foreign.is_none() {
            if let Cow::Owned(m) = self.redact(&e.message, session) {
                e.message = m;
            }
        }
        e
    }

    /// A marker in `text` (what the model wrote) that this session was given for a value `current`
    /// holds but that is never written into the workspace (the environment's, the broker's): a
    /// whole-file write with it would replace the secret by the marker's text.
    pub fn unwritable<'t>(&self, text: &'t str, session: &str, current: &str) -> Option<&'t str> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let markers = sessions.get(session)?;
        markers_in(text).map(|(_, m)| m).find(|m| {
            markers
                .by_marker
                .get(*m)
                .is_some_and(|(value, source)| !source.restorable() && current.contains(value.as_str()))
        })
    }

    /// The longest text a secret may span, for streams: what they hold back at their end.
    pub fn window(&self) -> usize {
        let rules = if self.rules { 16 * 1024 + 256 } else { 0 };
        self.literals().longest.max(rules)
    }
}

/// A redactor's matchers at one moment (see `Redactor::quick`).
pub struct Quick {
    literals: Arc<Literals>,
    issued: Option<Issued>,
    rules: bool,
}

impl Quick {
    /// False when `text` holds no value, no value shown before and no place a rule's token could
    /// begin: it is then shown as it is.
    pub fn may_hold(&self, text: &[u8]) -> bool {
        (self.rules && rules::compiled().prefixes.is_match(text))
            || self.literals.matcher.as_ref().is_some_and(|m| m.is_match(text))
            || self.issued.as_ref().is_some_and(|i| i.0.is_match(text))
    }
}

/// Every text in `text` shaped like a marker (`[secret:` to the next `]`), with where it starts.
fn markers_in(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let i = at + text[at..].find("[secret:")?;
        let len = text[i..].find(']')? + 1;
        at = i + len;
        Some((i, &text[i..i + len]))
    })
}

/// The rule a marker names (`[secret:<rule>#<n>]`), as the static name the rules and sources use.
fn rule_in(marker: &str) -> &'static str {
    let name = marker.trim_start_matches("[secret:").split('#').next().unwrap_or("");
    rules::RULES.iter().map(|r| r.name).chain(["value", "env", "broker"]).find(|n| *n == name).unwrap_or("secret")
}

/// The marker of `value` in one session, made on first sight.
fn marker(m: &mut Markers, value: &str, source: Source, rule: &str) -> String {
    if let Some(k) = m.by_value.get(value) {
        return k.clone();
    }
    m.next += 1;
    m.issued = None;
    let k = format!("[secret:{rule}#{}]", m.next);
    m.by_value.insert(value.to_string(), k.clone());
    m.by_marker.insert(k.clone(), (value.to_string(), source));
    k
}

#[cfg(test)]
mod tests;
