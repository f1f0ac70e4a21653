//! A caller's `WorkspaceCheckpointStore` and tool store.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{bad_answer, Dispatch, Remote};
use crate::checkpoints::CheckpointStore;
use crate::error::Result;
use crate::options::truthy;
use crate::registry::ToolStore;
use crate::templates::WorkspaceToolSpec;

/// `{ op: 'load' | 'save' | 'delete', sessionId, data? }`.
pub struct RemoteCheckpointStore(Remote);

impl RemoteCheckpointStore {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        RemoteCheckpointStore(Remote::new(dispatch))
    }
}

#[async_trait]
impl CheckpointStore for RemoteCheckpointStore {
    async fn load(&self, session_id: &str) -> Result<Option<Value>> {
        let v = self.0.op("load", json!({ "sessionId": session_id })).await?;
        Ok((!v.is_null()).then_some(v))
    }
    async fn save(&self, session_id: &str, data: Value) -> Result<()> {
        self.0.op("save", json!({ "sessionId": session_id, "data": data })).await.map(|_| ())
    }
    async fn delete(&self, session_id: &str) -> Result<()> {
        self.0.op("delete", json!({ "sessionId": session_id })).await.map(|_| ())
    }
}

/// `{ op: 'get' | 'put' | 'delete' | 'list', workspaceId, name?, spec? }`.
pub struct RemoteToolStore(Remote);

impl RemoteToolStore {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        RemoteToolStore(Remote::new(dispatch))
    }
}

#[async_trait]
impl ToolStore for RemoteToolStore {
    async fn get(&self, workspace: &str, name: &str) -> Result<Option<Value>> {
        let v = self.0.op("get", json!({ "workspaceId": workspace, "name": name })).await?;
        Ok((!v.is_null()).then_some(v))
    }
    async fn put(&self, workspace: &str, spec: &WorkspaceToolSpec) -> Result<()> {
        self.0.op("put", json!({ "workspaceId": workspace, "spec": spec.to_json() })).await.map(|_| ())
    }
    async fn delete(&self, workspace: &str, name: &str) -> Result<bool> {
        let v = self.0.op("delete", json!({ "workspaceId": workspace, "name": name })).await?;
        Ok(truthy(&v))
    }
    async fn list(&self, workspace: &str) -> Result<Vec<Value>> {
        match self.0.op("list", json!({ "workspaceId": workspace })).await? {
            Value::Array(a) => Ok(a),
            Value::Null => Ok(Vec::new()),
            other => Err(bad_answer("tool store", "list", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::error::Code;

    #[tokio::test]
    async fn a_checkpoint_store_answering_nothing_has_no_document() {
        let d = Scripted::new(|r| if r["sessionId"] == "s1" { ok(json!({ "turns": [] })) } else { ok(Value::Null) });
        let s = RemoteCheckpointStore::new(d.clone());
        assert_eq!(s.load("s1").await.unwrap(), Some(json!({ "turns": [] })));
        assert_eq!(s.load("s2").await.unwrap(), None);
        s.save("s1", json!({ "x": 1 })).await.unwrap();
        assert_eq!(d.requests()[2], json!({ "op": "save", "sessionId": "s1", "data": { "x": 1 } }));
    }

    #[tokio::test]
    async fn a_tool_store_list_that_is_not_an_array_is_an_error_and_delete_is_truthy() {
        let s = RemoteToolStore::new(Scripted::new(|r| match r["op"].as_str() {
            Some("list") => ok(json!("nope")),
            _ => ok(json!(1)),
        }));
        let e = s.list("w").await.unwrap_err();
        assert_eq!(e.code, Code::Io);
        assert!(e.message.contains("list returned a string"), "{}", e.message);
        assert!(s.delete("w", "t").await.unwrap());
    }
}
