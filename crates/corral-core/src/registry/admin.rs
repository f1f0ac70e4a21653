//! The admin API's routing and answers, transport-neutral (the facade reads the HTTP request,
//! asks these functions what to do, and writes what they say):
//!
//! - 503 when there is no registry; 401 for no bearer token or one `authenticate` refuses;
//! - 404 for a path that is not `/admin/workspace-tools` or `/admin/workspace-tools/{name}`;
//! - 405 (with `Allow`) for another method;
//! - `GET /admin/workspace-tools` → 200 `[spec…]`; `GET …/{name}` → 200 spec or 404;
//!   `PUT …/{name}` → 200 with the stored spec (the path's name wins); `DELETE …/{name}` → 204,
//!   or 404 when unknown or another workspace's (never 403: the fence does not say what exists);
//! - 400 for malformed JSON, a body that is not a valid spec, a path segment that is not a valid
//!   name once percent-decoded (GET, PUT and DELETE alike); 413 over 1 MiB, answered at once.
//!
//! Errors are JSON `{ error, message }`.

use serde_json::{json, Value};

/// The largest request body read.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

pub const COLLECTION: &str = "/admin/workspace-tools";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    List,
    Get(String),
    Put(String),
    Delete(String),
}

/// An answer that is not a success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub error: &'static str,
    pub message: String,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
}

impl Refusal {
    pub fn new(status: u16, message: impl Into<String>) -> Refusal {
        let error = match status {
            400 => "BadRequest",
            401 => "Unauthorized",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            413 => "PayloadTooLarge",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        Refusal { status, error, message: message.into(), allow: None }
    }

    pub fn body(&self) -> Value {
        json!({ "error": self.error, "message": self.message })
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// What a request asks for.
pub fn route(method: &str, url: &str) -> Result<Route, Refusal> {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let not_found = || Refusal::new(404, format!("No such resource: {}", path.chars().take(200).collect::<String>()));
    if path == COLLECTION || path == format!("{COLLECTION}/") {
        return match method {
            "GET" => Ok(Route::List),
            _ => Err(Refusal {
                allow: Some("GET"),
                ..Refusal::new(405, format!("{method} is not allowed on {COLLECTION}; use GET."))
            }),
        };
    }
    let Some(raw) = path.strip_prefix(&format!("{COLLECTION}/")) else { return Err(not_found()) };
    if raw.is_empty() || raw.contains('/') {
        return Err(not_found());
    }
    if !matches!(method, "GET" | "PUT" | "DELETE") {
        return Err(Refusal {
            allow: Some("GET, PUT, DELETE"),
            ..Refusal::new(405, format!("{method} is not allowed on a workspace tool; use GET, PUT or DELETE."))
        });
    }
    // One segment that is not a valid name, once decoded, is a bad request for every method.
    let name = percent_decode(raw).filter(|n| crate::templates::valid_name(n)).ok_or_else(|| {
        Refusal::new(
            400,
            format!(
                "Invalid tool name '{}': 1 to 64 letters, digits, '_' or '-'.",
                raw.chars().take(80).collect::<String>()
            ),
        )
    })?;
    match method {
        "GET" => Ok(Route::Get(name)),
        "PUT" => Ok(Route::Put(name)),
        "DELETE" => Ok(Route::Delete(name)),
        _ => Err(Refusal {
            allow: Some("GET, PUT, DELETE"),
            ..Refusal::new(405, format!("{method} is not allowed on a workspace tool; use GET, PUT or DELETE."))
        }),
    }
}

/// A PUT body: a JSON object, else a 400 that says what is wrong.
pub fn parse_body(body: &[u8]) -> Result<Value, Refusal> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Refusal::new(413, "The body is larger than 1 MiB."));
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|e| Refusal::new(400, format!("The body is not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(Refusal::new(400, "The body must be a JSON object (a WorkspaceToolSpec)."));
    }
    Ok(v)
}

/// The bearer token of an `Authorization` header.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, token) = h.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty()).then(|| token.trim())
}

/// What to write back: the status, the JSON body (none for a 204), the `Allow` header of a 405,
/// and whether the connection is closed after it (a body over the limit is never read).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Option<Value>,
    pub allow: Option<&'static str>,
    pub close: bool,
}

impl From<Refusal> for Answer {
    fn from(r: Refusal) -> Answer {
        Answer { status: r.status, body: Some(r.body()), allow: r.allow, close: false }
    }
}

impl Answer {
    fn ok(status: u16, body: Option<Value>) -> Answer {
        Answer { status, body, allow: None, close: false }
    }
}

/// The first look at a request, before the caller authenticates it.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// Answer at once: no registry (503), or no bearer token (401).
    Answer(Answer),
    /// Authenticate `token`, then read at most `read_body` bytes of the body (0: read none)
    /// and ask [`answer`].
    Authenticate { token: String, read_body: usize },
}

pub fn start(configured: bool, method: &str, url: &str, authorization: Option<&str>) -> Start {
    if !configured {
        return Start::Answer(Refusal::new(503, "The workspace tool registry is not configured.").into());
    }
    let Some(token) = bearer(authorization) else {
        return Start::Answer(unauthorized().into());
    };
    let read_body = if matches!(route(method, url), Ok(Route::Put(_))) { MAX_BODY_BYTES } else { 0 };
    Start::Authenticate { token: token.to_string(), read_body }
}

/// A body over [`MAX_BODY_BYTES`]: answered at once, and the connection closed after it.
pub fn too_large() -> Answer {
    Answer { close: true, ..Refusal::new(413, "The body is larger than 1 MiB.").into() }
}

fn unauthorized() -> Refusal {
    Refusal::new(401, "A valid bearer token is required.")
}

/// The body of a request, as the caller read it.
pub enum Body {
    /// None was read.
    None,
    /// It passed [`MAX_BODY_BYTES`]; the rest was not read.
    TooLarge,
    Bytes(Vec<u8>),
}

/// The answer to a request `authenticate` has looked at (`workspace`: what it said, `None` for a
/// refusal). `Err` is a failure of the store, for the server's log (answered 500 there).
pub async fn answer(
    registry: &super::Registry,
    workspace: Option<&str>,
    method: &str,
    url: &str,
    body: Body,
) -> crate::error::Result<Answer> {
    use crate::error::Code;
    let Some(ws) = workspace.filter(|w| !w.is_empty()) else { return Ok(unauthorized().into()) };
    let route = match route(method, url) {
        Ok(r) => r,
        Err(r) => return Ok(r.into()),
    };
    let not_found = |name: &str| Refusal::new(404, format!("No workspace tool named {name}.")).into();
    Ok(match route {
        Route::List => {
            Answer::ok(200, Some(Value::Array(registry.list(ws).await?.iter().map(|s| s.to_json()).collect())))
        }
        Route::Get(name) => match registry.get(ws, &name).await? {
            Some(spec) => Answer::ok(200, Some(spec.to_json())),
            None => not_found(&name),
        },
        Route::Delete(name) => match registry.delete(ws, &name).await? {
            true => Answer::ok(204, None),
            false => not_found(&name),
        },
        Route::Put(name) => {
            let bytes = match body {
                Body::TooLarge => return Ok(too_large()),
                Body::None => Vec::new(),
                Body::Bytes(b) => b,
            };
            let spec = match parse_body(&bytes) {
                Ok(spec) => spec,
                Err(r) => return Ok(r.into()),
            };
            match registry.upsert(ws, &spec, Some(&name)).await {
                Ok(stored) => Answer::ok(200, Some(stored.to_json())),
                Err(e) if matches!(e.code, Code::Configuration | Code::InvalidArguments) => {
                    Refusal::new(400, e.message).into()
                }
                Err(e) => return Err(e),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_methods_and_names() {
        assert_eq!(route("GET", "/admin/workspace-tools"), Ok(Route::List));
        assert_eq!(route("GET", "/admin/workspace-tools?x=1"), Ok(Route::List));
        assert_eq!(route("PUT", "/admin/workspace-tools/grep_repo"), Ok(Route::Put("grep_repo".into())));
        assert_eq!(route("DELETE", "/admin/workspace-tools/a-b"), Ok(Route::Delete("a-b".into())));
        assert_eq!(route("POST", "/admin/workspace-tools").unwrap_err().allow, Some("GET"));
        assert_eq!(route("PATCH", "/admin/workspace-tools/x").unwrap_err().status, 405);
        assert_eq!(route("GET", "/admin/other").unwrap_err().status, 404);
        assert_eq!(route("GET", "/admin/workspace-tools/a/b").unwrap_err().status, 404);
        for method in ["GET", "PUT", "DELETE"] {
            for bad in ["has%20space", "%zz", "%2e%2e", "a%2Fb"] {
                assert_eq!(
                    route(method, &format!("/admin/workspace-tools/{bad}")).unwrap_err().status,
                    400,
                    "{method} {bad}"
                );
            }
        }
        assert_eq!(route("GET", "/admin/workspace-tools/a%5Fb"), Ok(Route::Get("a_b".into())));
    }

    #[test]
    fn bodies_and_bearers() {
        assert_eq!(parse_body(b"{").unwrap_err().status, 400);
        assert_eq!(parse_body(b"[]").unwrap_err().status, 400);
        assert_eq!(parse_body(&vec![b' '; MAX_BODY_BYTES + 1]).unwrap_err().status, 413);
        assert!(parse_body(b"{\"name\":\"x\"}").is_ok());
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(bearer(None), None);
    }

    #[tokio::test]
    async fn one_call_answers_an_authenticated_request_with_the_status_the_api_names() {
        let reg = super::super::Registry::with_store(None);
        let url = "/admin/workspace-tools/grep_repo";
        assert_eq!(
            start(false, "GET", url, Some("Bearer t")),
            Start::Answer(Refusal::new(503, "The workspace tool registry is not configured.").into())
        );
        assert!(matches!(start(true, "GET", url, None), Start::Answer(Answer { status: 401, .. })));
        assert_eq!(
            start(true, "PUT", url, Some("Bearer t")),
            Start::Authenticate { token: "t".into(), read_body: MAX_BODY_BYTES }
        );
        assert_eq!(start(true, "GET", url, Some("Bearer t")), Start::Authenticate { token: "t".into(), read_body: 0 });
        let put = |body: Body| answer(&reg, Some("ws"), "PUT", url, body);
        assert_eq!(answer(&reg, None, "GET", url, Body::None).await.unwrap().status, 401);
        assert_eq!(answer(&reg, Some("ws"), "GET", url, Body::None).await.unwrap().status, 404);
        let too_large = put(Body::TooLarge).await.unwrap();
        assert_eq!((too_large.status, too_large.close), (413, true));
        assert_eq!(put(Body::Bytes(b"{".to_vec())).await.unwrap().status, 400);
        assert_eq!(put(Body::Bytes(br#"{"description":5}"#.to_vec())).await.unwrap().status, 400);
        let spec = br#"{"handler_kind":"shell_template","handler_payload":{"command":"grep -rn x ."}}"#;
        let stored = put(Body::Bytes(spec.to_vec())).await.unwrap();
        assert_eq!(stored.status, 200, "{:?}", stored.body);
        assert_eq!(stored.body.unwrap()["name"], "grep_repo");
        let list = answer(&reg, Some("ws"), "GET", "/admin/workspace-tools", Body::None).await.unwrap();
        assert_eq!(list.body.unwrap().as_array().unwrap().len(), 1);
        assert_eq!(answer(&reg, Some("other"), "DELETE", url, Body::None).await.unwrap().status, 404);
        assert_eq!(answer(&reg, Some("ws"), "DELETE", url, Body::None).await.unwrap(), Answer::ok(204, None));
        assert_eq!(
            answer(&reg, Some("ws"), "POST", "/admin/workspace-tools", Body::None).await.unwrap().allow,
            Some("GET")
        );
    }
}
