//! The options of the registry's constructors: `WorkspaceToolRegistry` and `defineTool`.

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::options::{is_function, Reader};

/// `new WorkspaceToolRegistry({ store?, onDispatch? })`: the keys and what each may be (the
/// binding turns the store into a handle; a store written in JS is checked for its methods there).
pub fn tool_registry(v: &Value) -> Result<()> {
    if v.is_null() {
        return Ok(());
    }
    let r = Reader::new("WorkspaceToolRegistry", v, &["store", "onDispatch"])?;
    if r.get("onDispatch").is_some_and(|f| !is_function(f)) {
        return Err(r.err("onDispatch must be a function."));
    }
    if r.get("store").is_some_and(|s| !s.is_object() && !s.is_null()) {
        return Err(
            r.err("store must be a MemoryToolStore, a SqliteToolStore or an object with get, put, delete and list.")
        );
    }
    Ok(())
}

/// `defineTool({ name, description?, parameters? | inputSchema?, needsApproval?, execute })`: the
/// tool's data with its defaults (`description` empty, parameters an object without
/// properties); the binding attaches `execute` and `needsApproval`.
pub fn define_tool(v: &Value) -> Result<Value> {
    let bad = || Error::config("defineTool: a tool needs a string name and an execute function.");
    let spec = v.as_object().ok_or_else(bad)?;
    let name = spec.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).ok_or_else(bad)?;
    if !spec.get("execute").is_some_and(is_function) {
        return Err(bad());
    }
    let description = match spec.get("description") {
        None | Some(Value::Null) => "",
        Some(Value::String(d)) => d,
        Some(_) => return Err(Error::config(format!("defineTool {name}: description must be a string."))),
    };
    // The schema object itself stays on the JavaScript side (it may be more than plain data):
    // this says which key holds it, or gives the default.
    let from = ["parameters", "inputSchema"].into_iter().find(|k| spec.get(*k).is_some_and(|p| !p.is_null()));
    if let Some(k) = from {
        if !spec[k].is_object() {
            return Err(Error::config(format!("defineTool {name}: {k} must be a JSON Schema object.")));
        }
    }
    Ok(json!({
        "name": name,
        "description": description,
        "parametersFrom": from,
        "parameters": json!({ "type": "object", "properties": {} }),
    }))
}
