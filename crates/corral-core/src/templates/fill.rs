//! Writing the arguments into a parsed template: each value quoted as one shell word, as a Python
//! literal, or pasted as it is.

use serde_json::Value;

use super::render::Segment;

/// How a value is written into the rendered text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// `shell_template`: the value's text quoted by `shlex.quote` rules, one shell word.
    ShellWord,
    /// `python_template`: the value as a Python literal of the same value (see `python.rs`).
    PythonLiteral,
    /// `substitution: 'raw'`: the value's text pasted as it is (the peer's behaviour).
    Raw,
}

/// Why a template could not be rendered for these arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// The template needs this argument and it was not given.
    Missing(String),
    /// This argument's text holds a NUL, which no command line can carry (it would cut the
    /// command short where the NUL stands).
    Nul(String),
}

/// A value as it is substituted as text: a string as it is, anything else as its JSON text.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Fills the fields from `args`, each value written as `fill` says.
pub fn render(segments: &[Segment], args: &Value, fill: Fill) -> Result<String, RenderError> {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Text(t) => out.push_str(t),
            Segment::Field(name) => {
                let v = args.get(name).ok_or_else(|| RenderError::Missing(name.clone()))?;
                if fill == Fill::PythonLiteral {
                    out.push_str(&super::python::literal(v));
                    continue;
                }
                let text = text_of(v);
                if text.contains('\0') {
                    return Err(RenderError::Nul(name.clone()));
                }
                out.push_str(&if fill == Fill::ShellWord { super::quote::quote(&text) } else { text });
            }
        }
    }
    Ok(out)
}
