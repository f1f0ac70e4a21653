//! `python_template` values as Python literals, and where a placeholder may stand in the code.
//!
//! Pasting a value into Python source turns it into code: `'''{text}'''` with a text that closes
//! the literal runs whatever follows. So every value is written as a Python *literal* of the same
//! value ([`literal`]), which no value can end early, and a placeholder is refused where a
//! literal would not be read as one: inside a string literal ([`check`]).

use serde_json::Value;

use super::render::{flatten, Segment, Tok};

/// The JSON value as Python source that evaluates to the same value: a string as a single-quoted
/// `str` literal, an integer in decimal, another number as a float literal Python reads back to
/// the same `float`, `true`/`false`/`null` as `True`/`False`/`None`, an array as a `list`, an
/// object as a `dict` with `str` keys, nested the same way. A negative number at the top is
/// written in parentheses, `(-3)`, so that `{n}**2` still squares the value.
pub fn literal(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Number(n) if number(n).starts_with('-') => {
            out.push('(');
            push_literal(&mut out, v);
            out.push(')');
        }
        _ => push_literal(&mut out, v),
    }
    out
}

fn push_literal(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => push_str_literal(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_literal(out, item);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, item)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_str_literal(out, k);
                out.push_str(": ");
                push_literal(out, item);
            }
            out.push('}');
        }
    }
}

/// An integer in decimal; a float as Rust's shortest round-trip form (`1.0`, `0.1`, `1e300`,
/// `-0.0`, `5e-324`), which is also a Python float literal of the same `float`: it always has a
/// `.` or an `e`, so `1.0` stays a float. JSON has no NaN or infinity, so serde_json holds none;
/// were one ever there, it is written as the expression `float('nan')`/`float('inf')`.
fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    match n.as_f64() {
        Some(f) if f.is_finite() => format!("{f:?}"),
        Some(f) if f.is_nan() => "float('nan')".to_string(),
        Some(f) => (if f > 0.0 { "float('inf')" } else { "float('-inf')" }).to_string(),
        None => n.to_string(),
    }
}

/// `s` as a single-quoted Python `str` literal: `\` and `'` escaped, `\n`, `\r`, `\t` by name,
/// every other control or non-printable code point as `\xNN`, `\uNNNN` or `\UNNNNNNNN` (NUL as
/// `\x00`). The literal holds no raw line break, quote or backslash of the value, so it ends
/// where it should, and it stays inside a comment too.
pub fn push_str_literal(out: &mut String, s: &str) {
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('\'');
}

/// Python's `str.isprintable()`, as far as it matters here: ASCII controls, C1 controls, every
/// space but ' ', the line and paragraph separators, the format characters (bidi controls,
/// zero-width characters, BOM, tags...), private use areas, surrogates, noncharacters and the
/// unassigned planes 4 to 13 are escaped. Another unassigned code point is kept: Python reads it
/// back the same either way.
fn printable(c: char) -> bool {
    const NOT: &[(u32, u32)] = &[
        (0x00, 0x1F),
        (0x7F, 0xA0),
        (0xAD, 0xAD),
        (0x600, 0x605),
        (0x61C, 0x61C),
        (0x6DD, 0x6DD),
        (0x70F, 0x70F),
        (0x890, 0x891),
        (0x8E2, 0x8E2),
        (0x1680, 0x1680),
        (0x180E, 0x180E),
        (0x2000, 0x200F),
        (0x2028, 0x202F),
        (0x205F, 0x206F),
        (0x3000, 0x3000),
        (0xD800, 0xF8FF),
        (0xFDD0, 0xFDEF),
        (0xFEFF, 0xFEFF),
        (0xFFF9, 0xFFFB),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
        (0x13430, 0x1343F),
        (0x1BCA0, 0x1BCA3),
        (0x1D173, 0x1D17A),
        (0x40000, 0xDFFFF),
        (0xE0000, 0xE00FF),
        (0xE01F0, 0xEFFFF),
        (0xF0000, 0x10FFFF),
    ];
    let u = c as u32;
    (u & 0xFFFE) != 0xFFFE && !NOT.iter().any(|&(lo, hi)| (lo..=hi).contains(&u))
}

/// Where the placeholder `field` is refused: inside a Python string literal. Such a literal
/// would hold the value's literal *as text* (`'''{x}'''` reading `'''\'a\''''`), and any
/// `f`-string would run it; `print(len({text}))` is the way to write it. A placeholder in a `#`
/// comment is allowed: the literal holds no line break, so it cannot leave the comment.
/// `{{`/`}}` are literal braces and play no part.
pub fn check(segments: &[Segment]) -> Result<(), String> {
    #[derive(PartialEq)]
    enum At {
        Code,
        Comment,
        /// A string literal opened by `quote`, three of them when `triple`.
        Str {
            quote: char,
            triple: bool,
        },
    }
    let toks = flatten(segments);
    let mut at = At::Code;
    let mut i = 0;
    let is = |k: usize, c: char| matches!(toks.get(k), Some(Tok::C(x)) if *x == c);
    while i < toks.len() {
        match (&at, &toks[i]) {
            (At::Str { .. }, Tok::F(f)) => return Err(f.clone()),
            (_, Tok::F(_)) => {}
            (At::Code, Tok::C('#')) => at = At::Comment,
            (At::Code, Tok::C(q @ ('\'' | '"'))) => {
                let triple = is(i + 1, *q) && is(i + 2, *q);
                at = At::Str { quote: *q, triple };
                if triple {
                    i += 2;
                }
            }
            (At::Comment, Tok::C('\n')) => at = At::Code,
            (At::Str { .. }, Tok::C('\\')) => {
                if let Some(Tok::F(f)) = toks.get(i + 1) {
                    return Err(f.clone());
                }
                i += 1;
            }
            (At::Str { triple: false, .. }, Tok::C('\n')) => at = At::Code, // unterminated: a syntax error
            (&At::Str { quote, triple }, Tok::C(c)) if *c == quote => {
                if !triple {
                    at = At::Code;
                } else if is(i + 1, quote) && is(i + 2, quote) {
                    at = At::Code;
                    i += 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::templates::render::parse;
    use serde_json::json;

    #[test]
    fn values_are_python_literals() {
        assert_eq!(
            literal(&json!("it's \\ a\nb\r\t\u{0}\u{7f}\u{202e}\u{1F600}é")),
            "'it\\'s \\\\ a\\nb\\r\\t\\x00\\x7f\\u202e\u{1F600}é'"
        );
        assert_eq!(literal(&json!("\u{E0001}\u{10FFFF}")), "'\\U000e0001\\U0010ffff'");
        assert_eq!(literal(&json!(12)), "12");
        assert_eq!(literal(&json!(-3)), "(-3)");
        assert_eq!(literal(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(literal(&json!(1.0)), "1.0");
        assert_eq!(literal(&json!(1e300)), "1e300");
        assert_eq!(literal(&json!(-0.0)), "(-0.0)");
        assert_eq!(literal(&json!([true, false, null, -1, { "k": [] }])), "[True, False, None, -1, {'k': []}]");
    }

    #[test]
    fn a_placeholder_inside_a_string_literal_is_found() {
        let check = |t: &str| check(&parse(t).unwrap());
        for bad in [
            "print(len('''{x}'''.split()))",
            "print(\"{x}\")",
            "print('{x}')",
            "f'{{{x}}}'",
            "rb\"\"\"\n{x}\"\"\"",
            "'a\\'{x}'",
            "x = 1 # it's\ns = '{x}'",
        ] {
            assert_eq!(check(bad), Err("x".to_string()), "{bad}");
        }
        for ok in [
            "print(len({x}))",
            "print({x}) # '{x}'",
            "s = 'a' + {x} + \"b\"",
            "'''a'''{x}",
            "{{'{{'}}{x}",
            "d = {{}}\n'\\\\'{x}",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }
}
