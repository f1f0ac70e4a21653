//! Workspace-defined tools (`WorkspaceToolSpec`): a spec a workspace registers, checked once when
//! it is registered, and the template tool it becomes. `shell_template` fills `{name}`
//! placeholders with the arguments, each quoted by POSIX `shlex.quote` rules, and runs the result
//! as `bash -c <rendered>`; `python_template` fills them with Python literals of the values and
//! runs `python3 -c <rendered>`. Both run through a `ShellProvider`, so a sandbox's caps, fence
//! and env rules apply, with the shell tool's defaults and result.
//!
//! A value must never become code. The quoting (or the literal) holds only where the template's
//! language reads it as such, so a placeholder anywhere else makes the spec invalid when it is
//! defined: the shell-syntax module (`shell::syntax`) for bash, `python.rs` for Python. A
//! placeholder the schema does not declare is refused too. `handler_payload.substitution: 'raw'`
//! pastes values as they are (the peer's behaviour): no context check, and the tool needs approval
//! unless the caller says otherwise.

pub mod fill;
pub mod python;
pub mod quote;
pub mod render;
pub mod schema;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Code, Error, Result};
use fill::{Fill, RenderError};
pub use quote::{quote, quote_cmd};
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
                if let Some(why) = schema::pattern_refusal(p) {
                    return Err(invalid(why));
                }
                schema::validator(p).map_err(|e| invalid(format!("parameters is not a valid JSON Schema: {e}")))?;
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
        spec.checked_template()?;
        Ok(spec)
    }

    /// Whether `handler_payload.substitution` is `'raw'`: values pasted as they are, as the peer
    /// does. Absent means quoted (shell) or literals (Python); any other value is invalid.
    pub fn raw(&self) -> bool {
        self.handler_payload.get("substitution").and_then(Value::as_str) == Some("raw")
    }

    /// Whether the tool asks before it runs when the caller does not say: a raw tool does, since
    /// its values are code.
    pub fn needs_approval_by_default(&self) -> bool {
        self.raw()
    }

    /// The template parsed and checked: placeholders are plain names the schema declares (when it
    /// lists `properties`), and each stands where its quoting holds (not checked for `raw`).
    fn checked_template(&self) -> Result<Vec<Segment>> {
        match self.handler_payload.get("substitution") {
            None => {}
            Some(Value::String(s)) if s == "raw" => {}
            Some(other) => {
                return Err(invalid(format!(
                    "handler_payload.substitution must be 'raw' or absent, not {}.",
                    other.to_string().chars().take(40).collect::<String>()
                )))
            }
        }
        let segments = render::parse(self.template_source()?).map_err(invalid)?;
        if let Some(Value::Object(props)) = self.parameters.get("properties") {
            if let Some(f) = render::fields(&segments).find(|f| !props.contains_key(*f)) {
                return Err(invalid(format!("the placeholder {{{f}}} is not declared in parameters.properties.")));
            }
        }
        if !self.raw() {
            match self.handler_kind {
                HandlerKind::ShellTemplate => {
                    crate::shell::syntax::check(render::flatten(&segments)).map_err(|r| invalid(r.message()))?;
                }
                HandlerKind::PythonTemplate => python::check(&segments).map_err(|f| {
                    invalid(format!("write {{{f}}} without quotes: values are quoted for you (as Python literals)."))
                })?,
            }
        }
        Ok(segments)
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

/// `createTemplateTool(spec, { shell, timeoutMs?, maxOutputChars?, needsApproval? })`'s options
/// for `spec`, as the shell tool's: 120 s, 30,000 characters per stream, and approval as
/// [`WorkspaceToolSpec::needs_approval_by_default`] when the caller does not say: none for a quoted
/// template (an operator registered the tool and its arguments cannot become code), asked for a
/// `substitution: 'raw'` one.
pub fn tool_options_for(
    spec: &WorkspaceToolSpec,
    v: &Value,
    fns: crate::options::Functions<'_>,
    redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
) -> Result<crate::shell::tool::ShellToolOptions> {
    use crate::options::{function_of, Reader};
    use crate::shell::tool::{Approval, ShellToolOptions, DEFAULT_TIMEOUT_MS, MAX_OUTPUT_CHARS};
    let r = Reader::new("createTemplateTool", v, &["shell", "timeoutMs", "maxOutputChars", "needsApproval", "redact"])?;
    let timeout = r.int("timeoutMs", DEFAULT_TIMEOUT_MS, 1..=86_400_000)?;
    let approval = match r.get("needsApproval") {
        None => Approval::Always(spec.needs_approval_by_default()),
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
        redactor: crate::redact::from_option(&r, redactor)?,
        ..ShellToolOptions::default()
    })
}

/// The options of a tool whose spec is not at hand: as [`tool_options_for`] with a quoted spec
/// (no approval by default). A raw spec needs [`tool_options_for`], which asks by default.
#[deprecated(note = "use tool_options_for(&spec, …): a substitution: 'raw' spec needs approval by default")]
pub fn tool_options(v: &Value, fns: crate::options::Functions<'_>) -> Result<crate::shell::tool::ShellToolOptions> {
    let quoted = WorkspaceToolSpec {
        name: String::new(),
        description: String::new(),
        parameters: Value::Null,
        handler_kind: HandlerKind::ShellTemplate,
        handler_payload: Value::Object(Map::new()),
    };
    tool_options_for(&quoted, v, fns, None)
}

/// A spec made runnable: its template parsed and its arguments' schema compiled.
pub struct TemplateTool {
    pub spec: WorkspaceToolSpec,
    segments: Vec<Segment>,
    validator: std::sync::Arc<jsonschema::Validator>,
}

impl TemplateTool {
    /// Checks the spec's template again (a spec can be built without `from_json`) and compiles
    /// its schema.
    pub fn new(spec: WorkspaceToolSpec) -> Result<TemplateTool> {
        let segments = spec.checked_template()?;
        if let Some(why) = schema::pattern_refusal(&spec.parameters) {
            return Err(invalid(why));
        }
        let validator = schema::validator(&spec.parameters)
            .map_err(|e| invalid(format!("parameters is not a valid JSON Schema: {e}")))?;
        Ok(TemplateTool { spec, segments, validator })
    }

    /// The command line to run for these arguments through this platform's shell (`sh`, or
    /// `cmd.exe` on Windows): checked against `parameters` first (`InvalidArguments`, nothing
    /// runs), then rendered.
    pub fn command(&self, args: &Value) -> Result<String> {
        self.command_for(args, None)
    }

    /// The command line for the shell that runs it (`ShellProvider::shell`; none named is the
    /// platform's): through `cmd.exe` the rendered program text is quoted for cmd.exe and the C
    /// runtime instead of for sh, so a value cannot end the command there either.
    pub fn command_for(&self, args: &Value, shell: Option<&str>) -> Result<String> {
        crate::tools::check_args(&self.spec.name, &self.validator, args)?;
        let fill = match self.spec.handler_kind {
            _ if self.spec.raw() => Fill::Raw,
            HandlerKind::ShellTemplate => Fill::ShellWord,
            HandlerKind::PythonTemplate => Fill::PythonLiteral,
        };
        let name = &self.spec.name;
        let rendered = fill::render(&self.segments, args, fill).map_err(|e| {
            Error::new(
                Code::InvalidArguments,
                match e {
                    RenderError::Missing(f) => {
                        format!("Invalid arguments for {name}: the template needs '{f}', which was not given.")
                    }
                    RenderError::Nul(f) => {
                        format!("Invalid arguments for {name}: '{f}' contains a NUL character, which a command line cannot carry.")
                    }
                },
            )
        })?;
        let program = match self.spec.handler_kind {
            HandlerKind::ShellTemplate => "bash",
            HandlerKind::PythonTemplate => "python3",
        };
        if !crate::shell::rules::is_cmd_shell(shell) {
            return Ok(format!("{program} -c {}", quote(&rendered)));
        }
        let text = quote_cmd(&rendered).ok_or_else(|| {
            Error::new(
                Code::InvalidArguments,
                format!("{name}: its command has a line break or two '%', which cmd.exe (this host's shell) reads however they are quoted: it ends a command at a line break and expands %NAME%. Run it through a SandboxShell, whose shell is sh."),
            )
        })?;
        Ok(format!("{program} -c {text}"))
    }
}

#[cfg(test)]
mod tests;
