//! `scrub: true` (the default): a value the broker injected (a rule's or a transformation's
//! header, and its encoded and credential forms) that comes back in a response — an upstream that
//! echoes request headers, a debug endpoint — is replaced by `[secret]` in the response's headers
//! and textual body (and trailers), where the broker reads the traffic (the path form and the hosts
//! it terminates TLS for; never inside a CONNECT tunnel). A response without such a value passes
//! unchanged; a textual body compressed with gzip or deflate is decoded first.
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

    /// The response's body scrubbed, when it is text: sent as it comes, chunked, holding back
    /// only a tail that could begin a value (sent when the upstream pauses or ends); a body
    /// compressed with gzip or deflate (though identity was asked for) is decoded first and sent
    /// decoded. Other bodies pass as they are. `Err`: a textual body in a coding the broker cannot
    /// read, which must not reach the client unscrubbed.
    pub fn body(self: &Arc<Self>, headers: &mut HeaderMap, body: Incoming) -> Result<ProxyBody, String> {
        // An empty body (a HEAD response's, a 204's) keeps its headers as they are.
        if !textual(headers) || hyper::body::Body::is_end_stream(&body) {
            return Ok(body.map_err(|e| Box::new(e) as BoxError).boxed());
        }
        // Every coding named, on every line: one the broker reads, or none.
        let codings: Vec<String> = headers
            .get_all(header::CONTENT_ENCODING)
            .iter()
            .flat_map(|v| {
                String::from_utf8_lossy(v.as_bytes())
                    .split(',')
                    .map(|c| c.trim().to_ascii_lowercase())
                    .collect::<Vec<_>>()
            })
            .filter(|c| !c.is_empty() && c != "identity")
            .collect();
        let coding = codings.join(", ");
        let decoder = match coding.as_str() {
            "" => None,
            "gzip" | "x-gzip" => Some(Decoder::Gzip(flate2::write::MultiGzDecoder::new(Vec::new()))),
            "deflate" => Some(Decoder::Sniffing(Vec::new())),
            other => {
                return Err(format!(
                    "the response came compressed as {other:?}, which the broker cannot read to keep the credential it injected out of it"
                ))
            }
        };
        // Its length and coding change: sent chunked, as text.
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::CONTENT_ENCODING);
        let state = Scrubbing {
            scrubber: self.clone(),
            body,
            held: Vec::new(),
            decoder,
            input: Bytes::new(),
            trailers: None,
            done: false,
        };
        let stream = futures::stream::unfold(state, |mut s| async move {
            loop {
                if s.done {
                    return None;
                }
                // Compressed input is decoded a piece at a time: what one piece expands to is
                // bounded, however far the whole body expands. Plain input is taken whole.
                if !s.input.is_empty() {
                    let n = if s.decoder.is_some() { DECODE_PIECE } else { s.input.len() };
                    let piece = s.input.split_to(s.input.len().min(n));
                    match s.decoder.as_mut().map(|d| d.write(&piece)) {
                        Some(Ok(plain)) => s.held.extend_from_slice(&plain),
                        Some(Err(e)) => return s.fail(e),
                        None => s.held.extend_from_slice(&piece),
                    }
                    let out = s.push();
                    if !out.is_empty() {
                        return Some((Ok(Frame::data(Bytes::from(out))), s));
                    }
                    continue;
                }
                if let Some(trailers) = s.trailers.take() {
                    s.done = true;
                    return Some((Ok(Frame::trailers(trailers)), s));
                }
                let next = if s.held.is_empty() {
                    s.body.frame().await
                } else {
                    match tokio::time::timeout(PAUSE, s.body.frame()).await {
                        Ok(next) => next,
                        // The upstream paused: what is held goes out.
                        Err(_) => {
                            return Some((Ok(s.flush()), s));
                        }
                    }
                };
                match next {
                    Some(Err(e)) => {
                        s.done = true;
                        return Some((Err(Box::new(e) as BoxError), s));
                    }
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(data) => s.input = data,
                        // Trailers are scrubbed too, and go after what is held.
                        Err(frame) => {
                            if let Ok(mut trailers) = frame.into_trailers() {
                                s.scrubber.headers(&mut trailers);
                                s.trailers = Some(trailers);
                            }
                            if let Err(e) = s.end() {
                                return s.fail(e);
                            }
                            if !s.held.is_empty() {
                                return Some((Ok(s.flush()), s));
                            }
                        }
                    },
                    None => {
                        if let Err(e) = s.end() {
                            return s.fail(e);
                        }
                        s.done = true;
                        if s.held.is_empty() {
                            return None;
                        }
                        return Some((Ok(s.flush()), s));
                    }
                }
            }
        });
        Ok(BodyExt::boxed(StreamBody::new(stream)))
    }
}

/// How much compressed input is decoded at once: deflate expands at most about 1,032 times, so
/// one piece gives at most about half a megabyte.
const DECODE_PIECE: usize = 512;

/// A response body's content coding, being decoded.
enum Decoder {
    Gzip(flate2::write::MultiGzDecoder<Vec<u8>>),
    /// `deflate` before its first two bytes came: zlib-wrapped as the standard says, or raw as
    /// some servers send it, told by them.
    Sniffing(Vec<u8>),
    Zlib(flate2::write::ZlibDecoder<Vec<u8>>),
    Raw(flate2::write::DeflateDecoder<Vec<u8>>),
}

impl Decoder {
    /// What `input` decodes to.
    fn write(&mut self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Write;
        if let Decoder::Sniffing(first) = self {
            first.extend_from_slice(input);
            if first.len() < 2 {
                return Ok(Vec::new());
            }
            return self.decide();
        }
        match self {
            Decoder::Gzip(d) => d.write_all(input).map(|_| std::mem::take(d.get_mut())),
            Decoder::Zlib(d) => d.write_all(input).map(|_| std::mem::take(d.get_mut())),
            Decoder::Raw(d) => d.write_all(input).map(|_| std::mem::take(d.get_mut())),
            Decoder::Sniffing(_) => unreachable!("decided above"),
        }
    }

    /// Becomes the decoder the first bytes call for, and decodes them.
    fn decide(&mut self) -> std::io::Result<Vec<u8>> {
        let Decoder::Sniffing(first) = self else { return Ok(Vec::new()) };
        let first = std::mem::take(first);
        // A zlib header: compression method 8 and a check that divides by 31.
        let zlib =
            first.len() >= 2 && first[0] & 0x0f == 8 && (u16::from(first[0]) << 8 | u16::from(first[1])) % 31 == 0;
        *self = match zlib {
            true => Decoder::Zlib(flate2::write::ZlibDecoder::new(Vec::new())),
            false => Decoder::Raw(flate2::write::DeflateDecoder::new(Vec::new())),
        };
        self.write(&first)
    }

    /// The rest, at the body's end (an error where the compressed stream is cut short).
    fn finish(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = match self {
            Decoder::Sniffing(first) if first.is_empty() => return Ok(Vec::new()),
            Decoder::Sniffing(_) => self.decide()?,
            _ => Vec::new(),
        };
        match self {
            Decoder::Gzip(d) => d.try_finish().map(|_| out.append(d.get_mut()))?,
            Decoder::Zlib(d) => d.try_finish().map(|_| out.append(d.get_mut()))?,
            Decoder::Raw(d) => d.try_finish().map(|_| out.append(d.get_mut()))?,
            Decoder::Sniffing(_) => {}
        }
        Ok(out)
    }
}

/// A body being scrubbed: what is held back, the compressed input not yet decoded, trailers to
/// send after it, and whether it has ended.
struct Scrubbing {
    scrubber: Arc<Scrubber>,
    body: Incoming,
    held: Vec<u8>,
    decoder: Option<Decoder>,
    input: Bytes,
    trailers: Option<HeaderMap>,
    done: bool,
}

type Step = Option<(Result<Frame<Bytes>, BoxError>, Scrubbing)>;

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

    /// Everything held, scrubbed, as one frame (the upstream paused or ended).
    fn flush(&mut self) -> Frame<Bytes> {
        Frame::data(Bytes::from(self.scrubber.replace(&std::mem::take(&mut self.held))))
    }

    /// The upstream's body ended: what the decoder still holds joins what is held.
    fn end(&mut self) -> std::io::Result<()> {
        if let Some(d) = self.decoder.as_mut() {
            let rest = d.finish()?;
            self.held.extend_from_slice(&rest);
        }
        Ok(())
    }

    /// A body that cannot be decoded ends in an error (the client's connection is aborted, so
    /// a cut response never looks complete).
    fn fail(mut self, e: std::io::Error) -> Step {
        self.done = true;
        let e: BoxError = format!("the response's compressed body could not be decoded: {e}").into();
        Some((Err(e), self))
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
