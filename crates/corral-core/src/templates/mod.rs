//! Workspace-defined tools (`WorkspaceToolSpec`): a spec a workspace registers, checked once when
//! it is registered, and the template tool it becomes. `shell_template` fills `{name}`
//! placeholders with the arguments, each quoted by POSIX `shlex.quote` rules, and runs the result
//! as `bash -c <rendered>`; `python_template` fills them unquoted and runs `python3 -c <rendered>`.
//! Both run through a `ShellProvider`, so a sandbox's caps, fence and env rules apply, with the
//! shell tool's defaults and result.

pub mod quote;
pub mod render;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Code, Error, Result};
pub use quote::quote;
use render::Segment;

/// The longest tool name.
pub const MAX_NAME_CHARS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerKind {
    ShellTemplate,
    PythonTemplate,
}

/// A workspace's tool definition, as stored and as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
    pub handler_kind: HandlerKind,
    pub handler_payload: Value,
}

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::config(format!("Invalid workspace tool spec: {message}"))
}

/// Whether a tool name is valid: `/^[A-Za-z0-9_-]{1,64}$/`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl WorkspaceToolSpec {
    /// Reads and checks a spec (a JSON object): every field's type, the name, that `parameters`
    /// is a JSON Schema object, and that the template is valid. Defaults: `description` '',
    /// `parameters` {}.
    pub fn from_json(v: &Value) -> Result<WorkspaceToolSpec> {
        let Value::Object(m) = v else { return Err(invalid("the spec must be a JSON object.")) };
        for key in m.keys() {
            if !["name", "description", "parameters", "handler_kind", "handler_payload"].contains(&key.as_str()) {
                return Err(invalid(format!("unknown field '{key}'.")));
            }
        }
        let name = match m.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(invalid("name must be a string.")),
        };
        if !valid_name(&name) {
            return Err(invalid(format!(
                "name '{}' must be 1 to {MAX_NAME_CHARS} letters, digits, '_' or '-'.",
                name.chars().take(80).collect::<String>()
            )));
        }
        let description = match m.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            _ => return Err(invalid("description must be a string.")),
        };
        let parameters = match m.get("parameters") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(p @ Value::Object(_)) => {
                jsonschema::validator_for(p)
                    .map_err(|e| invalid(format!("parameters is not a valid JSON Schema: {e}")))?;
                p.clone()
            }
            _ => return Err(invalid("parameters must be a JSON Schema object.")),
        };
        let handler_kind = match m.get("handler_kind").and_then(Value::as_str) {
            Some("shell_template") => HandlerKind::ShellTemplate,
            Some("python_template") => HandlerKind::PythonTemplate,
            Some(other) => {
                return Err(invalid(format!(
                    "unknown handler_kind '{other}'; it must be 'shell_template' or 'python_template'."
                )))
            }
            None => return Err(invalid("handler_kind must be 'shell_template' or 'python_template'.")),
        };
        let handler_payload = match m.get("handler_payload") {
            Some(p @ Value::Object(_)) => p.clone(),
            _ => return Err(invalid("handler_payload must be an object.")),
        };
        let spec = WorkspaceToolSpec { name, description, parameters, handler_kind, handler_payload };
        spec.template_source()?;
        render::parse(spec.template_source()?).map_err(invalid)?;
        Ok(spec)
    }

    /// The template: `handler_payload.command` (`code` first for `python_template`).
    fn template_source(&self) -> Result<&str> {
        let p = &self.handler_payload;
        let src = match self.handler_kind {
            HandlerKind::ShellTemplate => p.get("command"),
            HandlerKind::PythonTemplate => p.get("code").or_else(|| p.get("command")),
        };
        match src {
            Some(Value::String(s)) => Ok(s),
            _ => Err(invalid(match self.handler_kind {
                HandlerKind::ShellTemplate => "handler_payload.command must be a string.",
                HandlerKind::PythonTemplate => "handler_payload.code (or command) must be a string.",
            })),
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// `createTemplateTool(spec, { shell, timeoutMs?, maxOutputChars?, needsApproval? })`'s options,
/// as the shell tool's: 120 s, 30,000 characters per stream, and no approval by default (an
/// operator registered the tool; its arguments are quoted).
pub fn tool_options(v: &Value, fns: crate::options::Functions<'_>) -> Result<crate::shell::tool::ShellToolOptions> {
    use crate::options::{function_of, Reader};
    use crate::shell::tool::{Approval, ShellToolOptions, DEFAULT_TIMEOUT_MS, MAX_OUTPUT_CHARS};
    let r = Reader::new("createTemplateTool", v, &["shell", "timeoutMs", "maxOutputChars", "needsApproval"])?;
    let timeout = r.int("timeoutMs", DEFAULT_TIMEOUT_MS, 1..=86_400_000)?;
    let approval = match r.get("needsApproval") {
        None => Approval::Always(false),
        Some(Value::Bool(b)) => Approval::Always(*b),
        Some(f) => Approval::Predicate(
            function_of(f, fns).ok_or_else(|| r.err("needsApproval must be true, false or a predicate."))?,
        ),
    };
    Ok(ShellToolOptions {
        default_timeout_ms: timeout,
        max_timeout_ms: timeout,
        max_output_chars: r.int("maxOutputChars", MAX_OUTPUT_CHARS as u64, 1..=100_000_000)? as usize,
        approval,
        ..ShellToolOptions::default()
    })
}

/// A spec made runnable: its template parsed and its arguments' schema compiled.
pub struct TemplateTool {
    pub spec: WorkspaceToolSpec,
    segments: Vec<Segment>,
    validator: jsonschema::Validator,
}

impl TemplateTool {
    pub fn new(spec: WorkspaceToolSpec) -> Result<TemplateTool> {
        let segments = render::parse(spec.template_source()?).map_err(invalid)?;
        let validator = jsonschema::validator_for(&spec.parameters)
            .map_err(|e| invalid(format!("parameters is not a valid JSON Schema: {e}")))?;
        Ok(TemplateTool { spec, segments, validator })
    }

    /// The command line to run for these arguments: checked against `parameters` first
    /// (`InvalidArguments`, nothing runs), then rendered.
    pub fn command(&self, args: &Value) -> Result<String> {
        crate::tools::check_args(&self.spec.name, &self.validator, args)?;
        let quoted = self.spec.handler_kind == HandlerKind::ShellTemplate;
        let rendered = render::render(&self.segments, args, quoted).map_err(|missing| {
            Error::new(
                Code::InvalidArguments,
                format!(
                    "Invalid arguments for {}: the template needs '{missing}', which was not given.",
                    self.spec.name
                ),
            )
        })?;
        Ok(match self.spec.handler_kind {
            HandlerKind::ShellTemplate => format!("bash -c {}", quote(&rendered)),
            HandlerKind::PythonTemplate => format!("python3 -c {}", quote(&rendered)),
        })
    }
}

#[cfg(test)]
mod tests;
