//! What each tool is to a model: its name, description and JSON Schema, and the check of a
//! call's arguments against that schema.

use std::sync::OnceLock;

use serde_json::{json, Value};

use super::options::FsToolOptions;
use super::{
    edit, files, glob, grep, list, patch, read, write, ALL_TOOLS, EXTRA_TOOLS, EXTRA_WRITING_TOOLS, READ_TOOLS,
};
use crate::error::{Code, Error, Result};

pub struct ToolSpec {
    pub name: &'static str,
    pub description: String,
    pub parameters: Value,
}

pub fn parameters(name: &str) -> Value {
    match name {
        "read_file" => read::parameters(),
        "write_file" => write::parameters(),
        "edit_file" => edit::parameters(),
        "list_dir" => list::parameters(),
        "glob" => glob::parameters(),
        "grep" => grep::parameters(),
        "apply_patch" => patch::parameters(),
        "move_file" | "delete_file" | "make_dir" | "file_info" | "read_files" => files::parameters(name),
        _ => json!({}),
    }
}

pub fn description(name: &str, o: &FsToolOptions) -> String {
    match name {
        "read_file" => read::description(o),
        "write_file" => write::description(o),
        "edit_file" => edit::description(o),
        "list_dir" => list::description(o),
        "glob" => glob::description(o),
        "grep" => grep::description(o),
        "apply_patch" => patch::description(o),
        "move_file" | "delete_file" | "make_dir" | "file_info" | "read_files" => files::description(name, o),
        _ => String::new(),
    }
}

/// What `workspacePrompt` says of the file tools (`root`: the workspace's name, never a path).
pub fn info(o: &FsToolOptions, root: Option<&str>) -> Value {
    json!({
        "kind": "files",
        "root": root,
        "readOnly": o.read_only,
        "maxReadLines": o.max_read_lines,
        "maxResults": o.max_results,
        "maxOutputChars": o.max_output_chars,
        "deny": o.deny,
        "protect": o.protect,
    })
}

/// The tools `createFsTools` creates with these options, in their documented order.
/// What an MCP client is told of a tool (`annotations`): the reading tools only read; every other
/// tool (the writing file tools, the shell, a workspace's own) may change or destroy.
pub fn mcp_annotations(name: &str) -> Value {
    // Reading a background process's output or listing them changes nothing either.
    let reads = ["process_output", "process_list"].contains(&name);
    if reads || READ_TOOLS.contains(&name) || (EXTRA_TOOLS.contains(&name) && !EXTRA_WRITING_TOOLS.contains(&name)) {
        serde_json::json!({ "readOnlyHint": true })
    } else {
        serde_json::json!({ "readOnlyHint": false, "destructiveHint": true })
    }
}

pub fn specs(o: &FsToolOptions) -> Vec<ToolSpec> {
    let six: &[&'static str] = if o.read_only { &READ_TOOLS } else { &ALL_TOOLS };
    let extra = EXTRA_TOOLS
        .iter()
        .filter(|n| !(o.read_only && EXTRA_WRITING_TOOLS.contains(n)))
        .filter_map(|n| o.include.iter().position(|i| i == n).map(|at| (at, *n)));
    let mut extra: Vec<(usize, &'static str)> = extra.collect();
    extra.sort();
    six.iter()
        .copied()
        .chain(extra.into_iter().map(|(_, n)| n))
        .map(|n| ToolSpec { name: n, description: description(n, o), parameters: parameters(n) })
        .collect()
}

fn validator(name: &str) -> Option<&'static jsonschema::Validator> {
    static CELLS: OnceLock<Vec<(&'static str, jsonschema::Validator)>> = OnceLock::new();
    let all = CELLS.get_or_init(|| {
        ALL_TOOLS
            .iter()
            .chain(&EXTRA_TOOLS)
            .map(|n| (*n, jsonschema::validator_for(&parameters(n)).expect("tool schemas are valid")))
            .collect()
    });
    all.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
}

/// Checks arguments against a schema; the error names the argument and what is wrong.
pub fn check_args(tool: &str, schema: &jsonschema::Validator, args: &Value) -> Result<()> {
    if let Some(err) = schema.iter_errors(args).next() {
        let at = err.instance_path().to_string();
        let arg = at.trim_start_matches('/');
        let msg = if arg.is_empty() {
            format!("Invalid arguments for {tool}: {err}")
        } else {
            format!("Invalid arguments for {tool}: '{arg}' {err}")
        };
        return Err(Error::new(Code::InvalidArguments, msg));
    }
    Ok(())
}

pub fn validate(name: &str, args: &Value) -> Result<()> {
    let v = validator(name).ok_or_else(|| Error::new(Code::InvalidArguments, format!("Unknown tool: {name}")))?;
    check_args(name, v, args)
}
