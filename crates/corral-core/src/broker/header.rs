//! The headers rules and transformations set: which names they may set, and where a value
//! comes from (a string, a function called per request, or Basic credentials).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{FixedHeader, HeaderSource};
use crate::error::{Code, Error, Result};
use crate::options::{function_of, Callable, Functions};

/// Headers that describe one connection and are never forwarded, in either direction.
pub(crate) const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Beyond the hop-by-hop headers (never forwarded at all): headers that frame or route the
/// request, which neither a rule nor a transformation may set.
const RESERVED_HEADERS: [&str; 3] = ["host", "content-length", "expect"];

/// A header name a rule or a transformation sets (`what` names where, in errors).
pub(crate) fn header_name(name: &str, what: &str) -> Result<http::HeaderName> {
    let header = http::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| Error::config(format!("{what}: \"{name}\" is not a valid header name")))?;
    if RESERVED_HEADERS.contains(&header.as_str()) || HOP_BY_HOP.contains(&header.as_str()) {
        return Err(Error::config(format!("{what}: the {header} header cannot be set by a rule")));
    }
    Ok(header)
}

/// A header value as rules and transformations take it: a string, a function (sync or async,
/// called per request) or `{ basic: { username, password } }` (sent as `Basic base64(u:p)`).
pub(crate) fn header_source(value: &Value, fns: Functions<'_>, what: &str) -> Result<Arc<dyn HeaderSource>> {
    if let Value::String(s) = value {
        return Ok(FixedHeader::arc(s));
    }
    if let Some(basic) = value.get("basic") {
        let part = |k: &str| basic.get(k).and_then(Value::as_str);
        let (Some(user), Some(password)) = (part("username"), part("password")) else {
            return Err(Error::config(format!("{what}: basic must be {{ username, password }} with strings.")));
        };
        if user.contains(':') {
            return Err(Error::config(format!("{what}: a Basic username cannot contain ':'.")));
        }
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        return Ok(FixedHeader::arc(format!("Basic {token}")));
    }
    match function_of(value, fns) {
        Some(f) => Ok(Arc::new(CallableHeader(f))),
        None => {
            Err(Error::config(format!("{what} must be a string, a function or {{ basic: {{ username, password }} }}.")))
        }
    }
}

/// A header whose value a function gives, per request.
struct CallableHeader(Arc<dyn Callable>);

#[async_trait]
impl HeaderSource for CallableHeader {
    async fn value(&self) -> Result<String> {
        match self.0.call(Vec::new()).await? {
            Value::String(s) => Ok(s),
            _ => Err(Error::new(Code::Io, "A header function must return a string.")),
        }
    }
}
