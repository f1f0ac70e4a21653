use proptest::prelude::*;
use serde_json::json;

use super::fill::{render, Fill};
use super::render::{parse, Segment};
use super::*;

fn spec(kind: &str, command: &str) -> Value {
    json!({ "name": "t", "parameters": { "type": "object", "properties": { "x": {} } }, "handler_kind": kind, "handler_payload": { "command": command } })
}

/// Runs a rendered command line with `sh -c`, as a ShellProvider would.
fn run_sh(line: &str) -> String {
    let out = std::process::Command::new("sh").arg("-c").arg(line).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn plain_names_are_placeholders_and_doubled_braces_are_literal() {
    assert_eq!(
        parse("echo {a} {{b}} {_c1}").unwrap(),
        vec![
            Segment::Text("echo ".into()),
            Segment::Field("a".into()),
            Segment::Text(" {b} ".into()),
            Segment::Field("_c1".into())
        ]
    );
    for bad in ["{a.b}", "{0}", "{}", "{x:>4}", "{x!r}", "{a[0]}", "{a", "a}", "{ a}", "{{a}"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_spec_with_a_bad_placeholder_or_field_is_refused_when_it_is_registered() {
    for s in [
        spec("shell_template", "echo {x.y}"),
        spec("shell_template", "echo {0}"),
        spec("shell_template", "echo {x!r}"),
        spec("shell_template", "echo {x"),
        spec("other", "echo"),
        json!({ "name": "has space", "handler_kind": "shell_template", "handler_payload": { "command": "x" } }),
        json!({ "name": "n".repeat(65), "handler_kind": "shell_template", "handler_payload": { "command": "x" } }),
        json!({ "name": "t", "parameters": [], "handler_kind": "shell_template", "handler_payload": { "command": "x" } }),
        json!({ "name": "t", "parameters": { "type": 12 }, "handler_kind": "shell_template", "handler_payload": { "command": "x" } }),
        json!({ "name": "t", "handler_kind": "shell_template", "handler_payload": { "code": "x" } }),
        json!(["not", "an", "object"]),
    ] {
        let e = WorkspaceToolSpec::from_json(&s).unwrap_err();
        assert_eq!(e.code, Code::Configuration, "{s}");
    }
    let ok = WorkspaceToolSpec::from_json(
        &json!({ "name": "grep_repo", "handler_kind": "python_template", "handler_payload": { "code": "print({x})" } }),
    )
    .unwrap();
    assert_eq!((ok.description.as_str(), ok.parameters.clone()), ("", json!({})));
}

#[test]
fn injection_values_arrive_as_one_literal_argument() {
    let tool =
        TemplateTool::new(WorkspaceToolSpec::from_json(&spec("shell_template", "printf '%s|' {x}")).unwrap()).unwrap();
    for value in
        ["; rm -rf /tmp/nothing", "$(id)", "`id`", "a'b\"c", "line1\nline2", "a && b", "a | b", "", "*", "-n", "$HOME"]
    {
        let line = tool.command(&json!({ "x": value })).unwrap();
        assert!(line.starts_with("bash -c "), "{line}");
        assert_eq!(run_sh(&line), format!("{value}|"), "{value:?}");
    }
}

#[test]
fn values_that_are_not_strings_are_their_json_text_and_a_missing_one_is_invalid_arguments() {
    let tool = TemplateTool::new(WorkspaceToolSpec::from_json(&spec("shell_template", "echo {x}")).unwrap()).unwrap();
    assert_eq!(run_sh(&tool.command(&json!({ "x": 3 })).unwrap()), "3\n");
    assert_eq!(run_sh(&tool.command(&json!({ "x": [1, "a"] })).unwrap()), "[1,\"a\"]\n");
    assert_eq!(run_sh(&tool.command(&json!({ "x": null })).unwrap()), "null\n");
    assert_eq!(tool.command(&json!({})).unwrap_err().code, Code::InvalidArguments);
    let strict = TemplateTool::new(
        WorkspaceToolSpec::from_json(&json!({ "name": "t", "parameters": { "type": "object", "properties": { "x": { "type": "string" } }, "required": ["x"] }, "handler_kind": "shell_template", "handler_payload": { "command": "echo {x}" } })).unwrap(),
    )
    .unwrap();
    assert_eq!(strict.command(&json!({ "x": 1 })).unwrap_err().code, Code::InvalidArguments);
}

#[test]
fn python_templates_are_rendered_with_literals_and_run_as_python3_c() {
    let tool =
        TemplateTool::new(WorkspaceToolSpec::from_json(&spec("python_template", "print({x} * 2)")).unwrap()).unwrap();
    assert_eq!(tool.command(&json!({ "x": 21 })).unwrap(), "python3 -c 'print(21 * 2)'");
    assert_eq!(tool.command(&json!({ "x": "a'b" })).unwrap(), "python3 -c 'print('\"'\"'a\\'\"'\"'b'\"'\"' * 2)'");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn for_any_string_the_rendered_command_run_by_bash_prints_exactly_that_string(s in "\\PC{0,30}") {
        prop_assume!(!s.contains('\0'));
        let segments = parse("printf '%s' {x}").unwrap();
        let rendered = render(&segments, &json!({ "x": s }), Fill::ShellWord).unwrap();
        let line = format!("bash -c {}", quote(&rendered));
        prop_assert_eq!(run_sh(&line), s);
    }
}

mod attacks;
mod places;
