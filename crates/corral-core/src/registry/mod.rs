//! The workspace tool registry: each workspace's tool specs, validated before any store sees
//! them, kept in a store (in memory, in an embedded SQLite file, or one written in JS), and merged
//! over the built-in tools. A workspace never sees, changes or deletes another's tools: every
//! operation is keyed by the workspace id the caller was authenticated as.

pub mod admin;
pub mod options;
mod postgres;
mod sqlite;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use crate::error::{Code, Error, Result};
use crate::templates::schema::off_the_async_threads;
use crate::templates::{valid_name, WorkspaceToolSpec};
pub use postgres::{PostgresOptions, PostgresToolStore};
pub use sqlite::SqliteToolStore;

/// Where specs live. Names are valid and specs checked before a store is called.
#[async_trait]
pub trait ToolStore: Send + Sync {
    async fn get(&self, workspace: &str, name: &str) -> Result<Option<Value>>;
    async fn put(&self, workspace: &str, spec: &WorkspaceToolSpec) -> Result<()>;
    async fn delete(&self, workspace: &str, name: &str) -> Result<bool>;
    async fn list(&self, workspace: &str) -> Result<Vec<Value>>;
}

/// Specs in memory, for tests and single-process hosts.
#[derive(Default)]
pub struct MemoryToolStore(Mutex<BTreeMap<(String, String), Value>>);

#[async_trait]
impl ToolStore for MemoryToolStore {
    async fn get(&self, workspace: &str, name: &str) -> Result<Option<Value>> {
        Ok(self.0.lock().unwrap().get(&(workspace.to_string(), name.to_string())).cloned())
    }
    async fn put(&self, workspace: &str, spec: &WorkspaceToolSpec) -> Result<()> {
        self.0.lock().unwrap().insert((workspace.to_string(), spec.name.clone()), spec.to_json());
        Ok(())
    }
    async fn delete(&self, workspace: &str, name: &str) -> Result<bool> {
        Ok(self.0.lock().unwrap().remove(&(workspace.to_string(), name.to_string())).is_some())
    }
    async fn list(&self, workspace: &str) -> Result<Vec<Value>> {
        let map = self.0.lock().unwrap();
        Ok(map.iter().filter(|((w, _), _)| w == workspace).map(|(_, v)| v.clone()).collect())
    }
}

fn check_workspace(workspace: &str) -> Result<()> {
    if workspace.is_empty() || workspace.len() > 256 {
        return Err(Error::new(Code::InvalidArguments, "A workspace id must be a string of 1 to 256 characters."));
    }
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    if !valid_name(name) {
        return Err(Error::new(
            Code::InvalidArguments,
            format!(
                "Invalid tool name '{}': 1 to 64 letters, digits, '_' or '-'.",
                name.chars().take(80).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// A spec read back from a store, checked again (a JS store or an old database may hold anything).
fn from_store(v: Value) -> Result<WorkspaceToolSpec> {
    WorkspaceToolSpec::from_json(&v)
        .map_err(|e| Error::new(Code::Io, format!("The tool store returned an invalid spec: {}", e.message)))
}

pub struct Registry {
    store: Arc<dyn ToolStore>,
}

/// Where each tool of a merged list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    Builtin(usize),
    Workspace(String),
}

impl Registry {
    pub fn new(store: Arc<dyn ToolStore>) -> Registry {
        Registry { store }
    }

    /// `new WorkspaceToolRegistry({ store? })`: an in-memory store when none is given.
    pub fn with_store(store: Option<Arc<dyn ToolStore>>) -> Registry {
        Registry::new(store.unwrap_or_else(|| Arc::new(MemoryToolStore::default())))
    }

    /// Checks the spec (the `name` given wins over the spec's own when `Some`) and stores it.
    pub async fn upsert(&self, workspace: &str, spec: &Value, name: Option<&str>) -> Result<WorkspaceToolSpec> {
        check_workspace(workspace)?;
        let mut spec = spec.clone();
        if let (Some(n), Value::Object(m)) = (name, &mut spec) {
            m.insert("name".into(), Value::from(n));
        }
        let spec = off_the_async_threads(move || WorkspaceToolSpec::from_json(&spec)).await?;
        self.store.put(workspace, &spec).await?;
        Ok(spec)
    }

    pub async fn get(&self, workspace: &str, name: &str) -> Result<Option<WorkspaceToolSpec>> {
        check_workspace(workspace)?;
        if !valid_name(name) {
            return Ok(None);
        }
        match self.store.get(workspace, name).await? {
            Some(v) => off_the_async_threads(move || from_store(v)).await.map(Some),
            None => Ok(None),
        }
    }

    /// The workspace's specs, sorted by name.
    pub async fn list(&self, workspace: &str) -> Result<Vec<WorkspaceToolSpec>> {
        check_workspace(workspace)?;
        let stored = self.store.list(workspace).await?;
        let mut specs: Vec<WorkspaceToolSpec> =
            off_the_async_threads(move || stored.into_iter().map(from_store).collect::<Result<_>>()).await?;
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(specs)
    }

    pub async fn delete(&self, workspace: &str, name: &str) -> Result<bool> {
        check_workspace(workspace)?;
        check_name(name)?;
        self.store.delete(workspace, name).await
    }
}

/// The tools of a workspace: the built-ins in their order, a workspace tool of the same name in
/// the built-in's place, then the other workspace tools by name.
pub fn merge(builtins: &[String], workspace: &[String]) -> Vec<Merged> {
    let mut out: Vec<Merged> = builtins
        .iter()
        .enumerate()
        .map(|(i, b)| if workspace.contains(b) { Merged::Workspace(b.clone()) } else { Merged::Builtin(i) })
        .collect();
    let mut rest: Vec<&String> = workspace.iter().filter(|w| !builtins.contains(w)).collect();
    rest.sort();
    out.extend(rest.into_iter().map(|w| Merged::Workspace(w.clone())));
    out
}

#[cfg(test)]
mod tests;
