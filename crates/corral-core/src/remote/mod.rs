//! Interfaces implemented by the caller, driven through one request/answer channel.
//!
//! A caller's file-system provider, shell, sandbox adapter, checkpoint store, tool store, exec
//! stub and option functions all reach the core the same way: the core sends a JSON request
//! `{ op, ... }` through a [`Dispatch`] and reads the answer. The binding's only part is the
//! channel (a JavaScript callback); what each request holds, what each answer must look like, and
//! the errors for an answer of the wrong shape are decided here, so `cargo test` covers them with
//! a dispatch written in Rust.
//!
//! The answer of a call is `{ "ok": value }` or `{ "err": { "code", "message" } }` (an error the
//! caller meant for the model, such as `NotFound`); anything else the caller throws travels as a
//! foreign error and is handed back to the caller unchanged.

mod fs;
mod shell;
mod stores;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::cancel::Cancel;
use crate::error::{Code, Error, Result};

pub use fs::RemoteFs;
pub use shell::{RemoteSandbox, RemoteShell, RemoteStub};
pub use stores::{RemoteCheckpointStore, RemoteToolStore};

/// What a call answered with: a JSON value, or bytes (a file's contents, sent as they are).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Value(Value),
    Bytes(Vec<u8>),
}

/// The channel to the caller's code. `call` sends one request and returns the answer as sent:
/// `{ ok } | { err }` as JSON, or the bytes of an `ok` that was bytes.
#[async_trait]
pub trait Dispatch: Send + Sync {
    async fn call(&self, request: Value) -> Result<Reply>;
}

/// The kind of a JSON value, for the message about an answer of the wrong shape.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An answer that is not what the interface promises.
pub(crate) fn bad_answer(interface: &str, op: &str, got: &Value) -> Error {
    Error::new(
        Code::Io,
        format!("The {interface}'s {op} returned {}, which is not what {interface} promises.", kind_of(got)),
    )
}

/// `{ ok } | { err: { code, message } }` as the value or the error it carries. An `err` whose
/// code the core does not know is an `Io` error.
pub fn decode(answer: Value) -> Result<Value> {
    let Value::Object(mut m) = answer else { return Ok(Value::Null) };
    if let Some(err) = m.remove("err") {
        let code = err.get("code").and_then(Value::as_str).and_then(Code::parse).unwrap_or(Code::Io);
        let message =
            err.get("message").and_then(Value::as_str).unwrap_or("A callback of the caller failed.").to_string();
        return Err(Error::new(code, message));
    }
    Ok(m.remove("ok").unwrap_or(Value::Null))
}

/// One caller's object behind a dispatch: sends `{ op, ...fields }` and numbers the runs it can
/// cancel.
#[derive(Clone)]
pub struct Remote {
    dispatch: Arc<dyn Dispatch>,
    next_id: Arc<AtomicU64>,
}

impl Remote {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        Remote { dispatch, next_id: Arc::new(AtomicU64::new(1)) }
    }

    /// Sends `request` as it is and decodes the answer.
    pub async fn send(&self, request: Value) -> Result<Value> {
        match self.dispatch.call(request).await? {
            Reply::Value(v) => decode(v),
            Reply::Bytes(_) => {
                Err(Error::new(Code::Io, "A callback of the caller returned bytes where a value belongs."))
            }
        }
    }

    /// `{ op, ...fields }`, answered.
    pub async fn op(&self, op: &str, fields: Value) -> Result<Value> {
        self.send(with_op(op, fields)).await
    }

    /// `{ op, ...fields }`, answered with bytes (a string answer is taken as its UTF-8 bytes).
    pub async fn op_bytes(&self, interface: &str, op: &str, fields: Value) -> Result<Vec<u8>> {
        match self.dispatch.call(with_op(op, fields)).await? {
            Reply::Bytes(b) => Ok(b),
            Reply::Value(v) => match decode(v)? {
                Value::String(s) => Ok(s.into_bytes()),
                other => Err(bad_answer(interface, op, &other)),
            },
        }
    }

    /// A new id for a run the caller may be asked to abort.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends `{ op, id, ...fields }`; when `cancel` fires first, sends `{ op: 'abort', id }` so the
    /// caller can stop its own work, then waits for the run to settle.
    pub async fn op_cancellable(&self, op: &str, id: u64, fields: Value, cancel: Option<&Cancel>) -> Result<Value> {
        let mut request = with_op(op, fields);
        request["id"] = json!(id);
        let call = self.send(request);
        let Some(c) = cancel else { return call.await };
        tokio::pin!(call);
        tokio::select! {
            v = &mut call => v,
            _ = c.cancelled() => {
                let _ = self.op("abort", json!({ "id": id })).await;
                call.await
            }
        }
    }
}

fn with_op(op: &str, fields: Value) -> Value {
    let mut request = json!({ "op": op });
    if let Value::Object(f) = fields {
        request.as_object_mut().expect("an object").extend(f);
    }
    request
}

/// One function of an options object, by the index its tag carries (`{ "$js": "function",
/// "index": n }`): the request is `{ index, args }`.
pub struct RemoteFunction {
    remote: Remote,
    index: usize,
}

#[async_trait]
impl crate::options::Callable for RemoteFunction {
    async fn call(&self, args: Vec<Value>) -> Result<Value> {
        self.remote.send(json!({ "index": self.index, "args": args })).await
    }
}

/// The functions of an options object, as the options' readers ask for them.
pub fn functions(dispatch: Option<Arc<dyn Dispatch>>) -> impl Fn(usize) -> Option<Arc<dyn crate::options::Callable>> {
    let remote = dispatch.map(Remote::new);
    move |index| {
        remote.clone().map(|remote| Arc::new(RemoteFunction { remote, index }) as Arc<dyn crate::options::Callable>)
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! A dispatch written in Rust: answers each request with a closure and records it.

    use super::*;
    use std::sync::Mutex;

    type Answer = Box<dyn Fn(&Value) -> Result<Reply> + Send + Sync>;

    pub struct Scripted {
        pub answer: Answer,
        pub requests: Mutex<Vec<Value>>,
    }

    impl Scripted {
        pub fn new(answer: impl Fn(&Value) -> Result<Reply> + Send + Sync + 'static) -> Arc<Self> {
            Arc::new(Scripted { answer: Box::new(answer), requests: Mutex::new(Vec::new()) })
        }
        pub fn requests(&self) -> Vec<Value> {
            self.requests.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl Dispatch for Scripted {
        async fn call(&self, request: Value) -> Result<Reply> {
            self.requests.lock().unwrap().push(request.clone());
            (self.answer)(&request)
        }
    }

    pub fn ok(v: Value) -> Result<Reply> {
        Ok(Reply::Value(json!({ "ok": v })))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[tokio::test]
    async fn an_err_answer_becomes_the_core_error_with_its_code() {
        let d =
            Scripted::new(|_| Ok(Reply::Value(json!({ "err": { "code": "NotFound", "message": "no such file: a" } }))));
        let e = Remote::new(d).op("stat", json!({})).await.unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (Code::NotFound, "no such file: a"));
    }

    #[tokio::test]
    async fn an_err_answer_with_an_unknown_code_is_an_io_error() {
        let d = Scripted::new(|_| Ok(Reply::Value(json!({ "err": { "code": "Whatever", "message": "m" } }))));
        assert_eq!(Remote::new(d).op("x", json!({})).await.unwrap_err().code, Code::Io);
    }

    #[tokio::test]
    async fn a_request_carries_its_op_and_fields() {
        let d = Scripted::new(|_| ok(json!(1)));
        let v = Remote::new(d.clone()).op("readFile", json!({ "path": "a.txt" })).await.unwrap();
        assert_eq!(v, json!(1));
        assert_eq!(d.requests(), vec![json!({ "op": "readFile", "path": "a.txt" })]);
    }

    /// A caller whose runs go on until it is asked to abort them.
    #[derive(Default)]
    struct UntilAborted {
        aborted: tokio::sync::Notify,
        requests: std::sync::Mutex<Vec<Value>>,
    }

    #[async_trait]
    impl Dispatch for UntilAborted {
        async fn call(&self, r: Value) -> Result<Reply> {
            self.requests.lock().unwrap().push(r.clone());
            if r["op"] == "abort" {
                self.aborted.notify_one();
                return ok(Value::Null);
            }
            self.aborted.notified().await;
            ok(json!("stopped"))
        }
    }

    #[tokio::test]
    async fn a_cancel_sends_abort_with_the_run_id_and_waits_for_the_run() {
        let d = Arc::new(UntilAborted::default());
        let remote = Remote::new(d.clone());
        let cancel = Cancel::new();
        let id = remote.next_id();
        let c = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            c.cancel();
        });
        let v = remote.op_cancellable("run", id, json!({}), Some(&cancel)).await.unwrap();
        assert_eq!(v, json!("stopped"));
        let ops: Vec<Value> = d.requests.lock().unwrap().iter().map(|r| json!([r["op"], r["id"]])).collect();
        assert_eq!(ops, vec![json!(["run", id]), json!(["abort", id])]);
    }

    #[tokio::test]
    async fn functions_are_called_with_their_index_and_arguments() {
        let d = Scripted::new(|r| ok(r["args"][0].clone()));
        let fns = functions(Some(d.clone() as Arc<dyn Dispatch>));
        let f = fns(3).unwrap();
        assert_eq!(f.call(vec![json!("x")]).await.unwrap(), json!("x"));
        assert_eq!(d.requests(), vec![json!({ "index": 3, "args": ["x"] })]);
        assert!(functions(None)(0).is_none());
    }
}
