//! `scrub: true` (the default): a value the broker injected (a rule's or a transformation's
//! header, and its encoded and credential forms) that comes back in a response — an upstream that
//! echoes request headers, a debug endpoint — is replaced by `[secret]` in the response's headers
//! and textual body, where the broker reads the traffic (the path form and the hosts it terminates
//! TLS for; never inside a CONNECT tunnel). A response without such a value passes unchanged.
//!
//! Every injected value is also registered with the redactors of this process for as long as the
//! broker lives (`redact::register`), so a tool result that shows one gets a marker.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aho_corasick::{AhoCorasick, MatchKind};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};

/// What the proxy's bodies carry (as `proxy::ProxyBody`, which this module does not import).
type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = http_body_util::combinators::BoxBody<Bytes, BoxError>;

/// What replaces an injected value in a response.
pub const MARK: &[u8] = b"[secret]";

/// How long the upstream may pause before what the scrubber holds back is sent anyway (so a
/// stream of events is never delayed by more than this).
const PAUSE: Duration = Duration::from_millis(100);

/// The values one broker injected, registered with the redactors while it lives: every fixed
/// value, and the newest `RECENT` a function gave (a function may give a new one per request).
#[derive(Default)]
pub(crate) struct Injected {
    seen: Mutex<Seen>,
}

#[derive(Default)]
struct Seen {
    fixed: Vec<(String, Arc<Vec<String>>)>,
    recent: VecDeque<(String, Arc<Vec<String>>)>,
}

/// How many values given by functions stay registered.
const RECENT: usize = 256;

impl Injected {
    /// Notes a value known before any request (a string rule): registered for the broker's life.
    pub fn note_fixed(&self, value: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.fixed.iter().any(|(v, _)| v == value) {
            seen.fixed.push((value.to_string(), crate::redact::register(credential_parts(value))));
        }
    }

    /// Notes an injected header value; returns the literal forms a response is scrubbed of.
    pub fn note(&self, value: &str) -> Vec<String> {
        let parts = credential_parts(value);
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let known = seen.fixed.iter().chain(&seen.recent).any(|(v, _)| v == value);
            if !known {
                let handle = crate::redact::register(parts.clone());
                seen.recent.push_back((value.to_string(), handle));
                if seen.recent.len() > RECENT {
                    seen.recent.pop_front();
                }
            }
        }
        let mut out = Vec::new();
        for p in parts {
            for f in crate::redact::forms(&p) {
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
        out
    }
}

/// Whether a header's name says it carries a credential (`authorization`, `x-api-key`,
/// `cookie`, `x-auth-token`, `private-token`, …).
pub(crate) fn credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "password", "cookie", "session", "signature", "credential"]
        .iter()
        .any(|w| name.contains(w))
}

/// A header value and the credentials in it: `Bearer <token>`'s token, `Basic <b64>`'s
/// `user:password` and password (each 4 bytes or more).
fn credential_parts(value: &str) -> Vec<String> {
    let mut parts = vec![value.to_string()];
    if let Some((scheme, rest)) = value.split_once(' ') {
        let rest = rest.trim();
        parts.push(rest.to_string());
        if scheme.eq_ignore_ascii_case("basic") {
            use base64::Engine;
            if let Some(pair) =
                base64::engine::general_purpose::STANDARD.decode(rest).ok().and_then(|b| String::from_utf8(b).ok())
            {
                if let Some((_, password)) = pair.split_once(':') {
                    parts.push(password.to_string());
                }
                parts.push(pair);
            }
        }
    }
    parts.retain(|p| p.len() >= 4);
    parts.dedup();
    parts
}

/// The literal values to scrub from one response.
pub(crate) struct Scrubber {
    matcher: AhoCorasick,
    literals: Vec<Vec<u8>>,
}

impl Scrubber {
    pub fn new(values: Vec<String>) -> Option<Arc<Scrubber>> {
        if values.is_empty() {
            return None;
        }
        let literals: Vec<Vec<u8>> = values.into_iter().map(String::into_bytes).collect();
        let matcher = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&literals).ok()?;
        Some(Arc::new(Scrubber { matcher, literals }))
    }

    /// `bytes` with every value replaced by the mark.
    fn replace(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        self.matcher.replace_all_with_bytes(bytes, &mut out, |_, _, dst| {
            dst.extend_from_slice(MARK);
            true
        });
        out
    }

    /// How many bytes at the end of `bytes` could still be the start of a value.
    fn tail(&self, bytes: &[u8]) -> usize {
        let longest = self.literals.iter().map(Vec::len).max().unwrap_or(0);
        (1..=longest.min(bytes.len()))
            .rev()
            .find(|&k| {
                let end = &bytes[bytes.len() - k..];
                self.literals.iter().any(|l| l.starts_with(end))
            })
            .unwrap_or(0)
    }

    /// The response's headers scrubbed.
    pub fn headers(&self, headers: &mut HeaderMap) {
        for value in headers.values_mut() {
            if self.matcher.is_match(value.as_bytes()) {
                if let Ok(v) = HeaderValue::from_bytes(&self.replace(value.as_bytes())) {
                    *value = v;
                }
            }
        }
    }

    /// The response's body scrubbed, when it is text the broker can read (no content coding):
    /// sent as it comes, chunked, holding back only a tail that could begin a value (sent when the
    /// upstream pauses or ends). Other bodies pass as they are.
    pub fn body(self: &Arc<Self>, headers: &mut HeaderMap, body: Incoming) -> ProxyBody {
        let encoded = headers
            .get(header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
        // An empty body (a HEAD response's, a 204's) keeps its headers as they are.
        if encoded || !textual(headers) || hyper::body::Body::is_end_stream(&body) {
            return body.map_err(|e| Box::new(e) as BoxError).boxed();
        }
        // Its length may change: sent chunked.
        headers.remove(header::CONTENT_LENGTH);
        let state = Scrubbing { scrubber: self.clone(), body, held: Vec::new(), done: false };
        let stream = futures::stream::unfold(state, |mut s| async move {
            loop {
                if s.done {
                    return None;
                }
                let next = if s.held.is_empty() {
                    s.body.frame().await
                } else {
                    match tokio::time::timeout(PAUSE, s.body.frame()).await {
                        Ok(next) => next,
                        // The upstream paused: what is held goes out.
                        Err(_) => {
                            let out = s.scrubber.replace(&std::mem::take(&mut s.held));
                            return Some((Ok(Frame::data(Bytes::from(out))), s));
                        }
                    }
                };
                match next {
                    None => {
                        s.done = true;
                        if s.held.is_empty() {
                            return None;
                        }
                        let out = s.scrubber.replace(&std::mem::take(&mut s.held));
                        return Some((Ok(Frame::data(Bytes::from(out))), s));
                    }
                    Some(Err(e)) => {
                        s.done = true;
                        return Some((Err(Box::new(e) as BoxError), s));
                    }
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => {
                            s.held.extend_from_slice(&data);
                            let out = s.push();
                            if !out.is_empty() {
                                return Some((Ok(Frame::data(Bytes::from(out))), s));
                            }
                        }
                        // Trailers pass as they are (a value there is not read).
                        Err(frame) => return Some((Ok(frame), s)),
                    },
                }
            }
        });
        BodyExt::boxed(StreamBody::new(stream))
    }
}

/// A body being scrubbed: what is held back, and whether it has ended.
struct Scrubbing {
    scrubber: Arc<Scrubber>,
    body: Incoming,
    held: Vec<u8>,
    done: bool,
}

impl Scrubbing {
    /// What may go out of what is held: all but a tail that could begin a value, scrubbed.
    fn push(&mut self) -> Vec<u8> {
        let mut cut = self.held.len() - self.scrubber.tail(&self.held);
        // A value that reaches past the cut is held whole.
        for m in self.scrubber.matcher.find_iter(&self.held) {
            if m.start() < cut && m.end() > cut {
                cut = m.start();
            }
        }
        let out = self.scrubber.replace(&self.held[..cut]);
        self.held.drain(..cut);
        out
    }
}

/// Whether a response body is text: a `text/*`, JSON, XML, JavaScript, form or event-stream type,
/// or no type at all.
fn textual(headers: &HeaderMap) -> bool {
    let Some(t) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return true };
    let t = t.to_ascii_lowercase();
    t.starts_with("text/")
        || ["json", "xml", "javascript", "x-www-form-urlencoded", "event-stream", "graphql"]
            .iter()
            .any(|k| t.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_forms_of_bearer_and_basic_values_are_scrubbed_too() {
        let parts = credential_parts("Basic dXNlcjpzM2NyZXQtcGFzcw==");
        assert!(parts.contains(&"user:s3cret-pass".to_string()), "{parts:?}");
        assert!(parts.contains(&"s3cret-pass".to_string()));
        assert!(credential_parts("Bearer tok-123456").contains(&"tok-123456".to_string()));
    }

    #[test]
    fn a_value_split_between_chunks_is_held_until_it_is_whole() {
        let s = Scrubber::new(vec!["SECRET-VALUE".into()]).unwrap();
        assert_eq!(s.tail(b"data: SECR"), 4);
        assert_eq!(s.tail(b"data: nothing"), 0);
        assert_eq!(s.replace(b"a SECRET-VALUE b"), b"a [secret] b");
    }
}
