//! The attacks, run for real. Each is first run as the old renderer ran it (values shlex-quoted
//! with no place check, or pasted into Python) to show that it is a real attack: the marker file
//! appears. Then through a spec as it is now: refused when the spec is defined, and the template
//! written the right way runs with the same value and no marker appears.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::fill::{render, Fill};
use super::super::render::parse;
use super::super::*;

const MARKER: &str = "pwned";

/// Runs a command line with `sh -c` in `dir`, as a ShellProvider would; its stdout.
fn run_in(dir: &Path, line: &str, stdin: &str) -> String {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes()); // it may not read it
    String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
}

fn python3() -> bool {
    let found = Command::new("python3").args(["-c", "pass"]).status().is_ok_and(|s| s.success());
    if !found {
        println!("skipped: python3 is not installed");
    }
    found
}

fn spec_of(kind: &str, template: &str, field: &str, raw: bool) -> Value {
    let key = if kind == "shell_template" { "command" } else { "code" };
    let mut payload = json!({ key: template });
    if raw {
        payload["substitution"] = json!("raw");
    }
    json!({ "name": "t", "parameters": { "type": "object", "properties": { field: {} } }, "handler_kind": kind, "handler_payload": payload })
}

/// The command line the renderer before this check produced.
fn old_line(kind: &str, template: &str, args: &Value) -> String {
    let segments = parse(template).unwrap();
    if kind == "shell_template" {
        format!("bash -c {}", quote(&render(&segments, args, Fill::ShellWord).unwrap()))
    } else {
        format!("python3 -c {}", quote(&render(&segments, args, Fill::Raw).unwrap()))
    }
}

/// The attack runs with the old rendering, is refused now with `message`, and `fixed` runs the
/// same value without running it; returns what `fixed` printed.
fn refused_and_fixed(kind: &str, template: &str, field: &str, value: &str, message: &str, fixed: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join(MARKER);
    let args = json!({ field: value });
    run_in(dir.path(), &old_line(kind, template, &args), "");
    assert!(marker.exists(), "the attack on {template:?} should work without the check");
    std::fs::remove_file(&marker).unwrap();

    let e = WorkspaceToolSpec::from_json(&spec_of(kind, template, field, false)).unwrap_err();
    assert_eq!(e.code, Code::Configuration);
    assert!(e.message.contains(message), "{template:?}: {}", e.message);

    let tool = TemplateTool::new(WorkspaceToolSpec::from_json(&spec_of(kind, fixed, field, false)).unwrap()).unwrap();
    let out = run_in(dir.path(), &tool.command(&args).unwrap(), "");
    assert!(!marker.exists(), "{fixed:?} ran the value {value:?}");
    out
}

#[test]
fn shell_attacks_are_refused_and_their_fixed_templates_keep_values_literal() {
    let sh = "shell_template";
    let subst = "$(touch pwned)";
    let subscript = "a[$(touch pwned)]";
    let out = refused_and_fixed(
        sh,
        "grep -rn \"{pattern}\" .",
        "pattern",
        subst,
        "write {pattern} without quotes: values are quoted for you.",
        "grep -rn {pattern} . ; echo done",
    );
    assert_eq!(out, "done\n");
    let out = refused_and_fixed(
        sh,
        "cat <<EOF\n{x}\nEOF",
        "x",
        subst,
        "{x} is in the body of a here-document",
        "cat <<< {x}",
    );
    assert_eq!(out, format!("{subst}\n"));
    let out = refused_and_fixed(
        sh,
        "[[ {n} -eq 1 ]] && echo one",
        "n",
        subscript,
        "{n} is in an arithmetic context ([[ … -eq … ]])",
        "[[ {n} == 1 ]] || echo other",
    );
    assert_eq!(out, "other\n");
    refused_and_fixed(sh, "echo $(( {n} + 1 ))", "n", subst, "arithmetic context ($((…)))", "expr {n} + 1");
    refused_and_fixed(
        sh,
        "(( {n} )) && echo yes",
        "n",
        subscript,
        "arithmetic context (((…)))",
        "test {n} -ne 0 && echo yes",
    );
    let out = refused_and_fixed(
        sh,
        "arr[{i}]=1; echo ok",
        "i",
        subst,
        "arithmetic context (an array subscript)",
        "arr=({i}); printf '%s\\n' \"${{arr[0]}}\"",
    );
    assert_eq!(out, format!("{subst}\n"));
    let out = refused_and_fixed(sh, "echo `echo {x}`", "x", "`;touch pwned;`", "inside backticks", "echo $(echo {x})");
    assert_eq!(out, "`;touch pwned;`\n");
    refused_and_fixed(sh, "ls # {x}", "x", "a\ntouch pwned #", "in a comment", "ls {x} 2>/dev/null; true");
}

#[test]
fn a_shell_value_with_a_nul_is_invalid_arguments() {
    let tool =
        TemplateTool::new(WorkspaceToolSpec::from_json(&spec_of("shell_template", "echo {x}", "x", false)).unwrap())
            .unwrap();
    let e = tool.command(&json!({ "x": "a\u{0}b" })).unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    assert!(e.message.contains("'x' contains a NUL"), "{}", e.message);
}

#[test]
fn the_python_attack_is_refused_and_values_are_literals_that_end_nothing() {
    if !python3() {
        return;
    }
    let text = "''' + str(__import__('os').system('touch pwned')) + '''";
    let out = refused_and_fixed(
        "python_template",
        "print(len('''{text}'''.split()))",
        "text",
        text,
        "write {text} without quotes",
        "print(len({text}.split()))",
    );
    assert_eq!(out, format!("{}\n", text.split_whitespace().count()));

    let dir = tempfile::tempdir().unwrap();
    let tool = TemplateTool::new(
        WorkspaceToolSpec::from_json(&spec_of(
            "python_template",
            "import sys\nsys.stdout.write({x}) # {x}",
            "x",
            false,
        ))
        .unwrap(),
    )
    .unwrap();
    for value in [
        "a\nimport os; os.system('touch pwned')",
        "\\",
        "'",
        "\"\"\"",
        "\u{0}\r\t\u{7f}\u{85}\u{2028}\u{202e}é😀",
        "{x} {{ }}",
    ] {
        let out = run_in(dir.path(), &tool.command(&json!({ "x": value })).unwrap(), "");
        assert_eq!(out, value);
    }
    assert!(!dir.path().join(MARKER).exists());
}

#[test]
fn raw_substitution_pastes_values_as_the_peer_does() {
    let dir = tempfile::tempdir().unwrap();
    let raw = WorkspaceToolSpec::from_json(&spec_of("shell_template", "echo \"{x}\"", "x", true)).unwrap();
    assert!(raw.needs_approval_by_default());
    let line = TemplateTool::new(raw).unwrap().command(&json!({ "x": "$(touch pwned)" })).unwrap();
    run_in(dir.path(), &line, "");
    assert!(dir.path().join(MARKER).exists(), "raw pastes the value as code, as the peer does");
    if python3() {
        let raw = WorkspaceToolSpec::from_json(&spec_of("python_template", "print({x})", "x", true)).unwrap();
        let line = TemplateTool::new(raw).unwrap().command(&json!({ "x": "6 * 7" })).unwrap();
        assert_eq!(run_in(dir.path(), &line, ""), "42\n");
    }
}

/// Any JSON value, with strings full of quotes, backslashes, controls and odd code points.
fn json_value() -> impl Strategy<Value = Value> {
    let special = prop::sample::select(vec![
        '\'',
        '"',
        '\\',
        '\n',
        '\r',
        '\t',
        '\0',
        '{',
        '}',
        '#',
        '\u{7f}',
        '\u{85}',
        '\u{a0}',
        '\u{2028}',
        '\u{202e}',
        '\u{feff}',
        '\u{e000}',
        '\u{fffe}',
        '\u{e0100}',
        '\u{10ffff}',
        'é',
        '😀',
    ]);
    let string = prop::collection::vec(prop_oneof![any::<char>(), special], 0..12).prop_map(String::from_iter);
    let float = prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        prop::sample::select(vec![1.0, -0.0, 0.1, 1e300, -1e300, 5e-324, 1e16, 1.5e-7, 123456789.0]),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        float.prop_map(Value::from),
        string.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((string.clone(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

const BATCH: usize = 16;

/// Python that compares each rendered literal with the same value read from JSON on stdin, type
/// for type (`1.0` stays a float, `-0.0` keeps its sign), and prints the indexes that differ.
fn batch_checker() -> String {
    let fields = (0..BATCH).map(|i| format!("{{v{i}}}")).collect::<Vec<_>>().join(", ");
    [
        "import json, math, sys",
        &format!("got = [{fields}]"),
        "want = json.load(sys.stdin)",
        "def same(a, b):",
        "    if type(a) is not type(b): return False",
        "    if isinstance(a, list): return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))",
        "    if isinstance(a, dict): return list(a) == list(b) and all(same(a[k], b[k]) for k in a)",
        "    if isinstance(a, float): return a == b and math.copysign(1, a) == math.copysign(1, b)",
        "    return a == b",
        "print(json.dumps([i for i in range(len(want)) if not same(got[i], want[i])]))",
    ]
    .join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    /// 8 batches of 16 values, one python3 per batch: each value's literal reads back as itself.
    #[test]
    fn python_literals_read_back_as_the_same_value(values in prop::collection::vec(json_value(), BATCH)) {
        if !python3() {
            return Ok(());
        }
        let spec = json!({ "name": "t", "handler_kind": "python_template", "handler_payload": { "code": batch_checker() } });
        let tool = TemplateTool::new(WorkspaceToolSpec::from_json(&spec).unwrap()).unwrap();
        let args = Value::Object(values.iter().enumerate().map(|(i, v)| (format!("v{i}"), v.clone())).collect());
        let dir = tempfile::tempdir().unwrap();
        let out = run_in(dir.path(), &tool.command(&args).unwrap(), &Value::Array(values.clone()).to_string());
        prop_assert_eq!(out.trim(), "[]", "{:?}", values);
    }
}
