//! The template language: Python's `str.format_map` restricted to plain names. `{name}` (a name
//! is `[A-Za-z_][A-Za-z0-9_]*`) is replaced by an argument; `{{` and `}}` are literal braces. An
//! attribute or index (`{a.b}`, `{a[0]}`), a position (`{0}`, `{}`), a format spec (`{x:>4}`), a
//! conversion (`{x!r}`) or an unbalanced brace makes the template invalid; that is found when a
//! spec is registered, never when it runs.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Text(String),
    Field(String),
}

/// Parses a template, or says what is wrong with it.
pub fn parse(t: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err("a single '}' in the template must be written '}}'.".to_string()),
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some('{') => return Err(format!("'{{' inside the placeholder '{{{field}'.")),
                        Some(c) => field.push(c),
                        None => {
                            return Err(format!(
                                "the placeholder '{{{field}' is not closed (a literal brace is '{{{{')."
                            ))
                        }
                    }
                }
                let plain = field.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !plain {
                    return Err(format!(
                        "the placeholder '{{{field}}}' is not a plain name: attributes, indexes, positions, format specs and conversions are not allowed."
                    ));
                }
                if !text.is_empty() {
                    out.push(Segment::Text(std::mem::take(&mut text)));
                }
                out.push(Segment::Field(field));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        out.push(Segment::Text(text));
    }
    Ok(out)
}

/// A value as it is substituted: a string as it is, anything else as its JSON text.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Fills the fields from `args`, each value quoted (`shlex.quote`) when `quoted`. `Err(name)`
/// for a field without an argument.
pub fn render(segments: &[Segment], args: &Value, quoted: bool) -> Result<String, String> {
    let mut out = String::new();
    for s in segments {
        match s {
            Segment::Text(t) => out.push_str(t),
            Segment::Field(name) => {
                let v = args.get(name).ok_or_else(|| name.clone())?;
                let text = text_of(v);
                out.push_str(&if quoted { super::quote(&text) } else { text });
            }
        }
    }
    Ok(out)
}
