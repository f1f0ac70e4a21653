//! Where a placeholder may and may not stand, template by template: the refusals name the
//! placeholder and say why, and the allowed places stay allowed.

use serde_json::json;

use super::super::render::parse;
use super::super::*;
use crate::shell::syntax::Why;

/// The refusal of a shell template, or `None`.
fn shell(t: &str) -> Option<(String, Why)> {
    crate::shell::syntax::check(super::super::render::flatten(&parse(t).unwrap())).err().map(|r| (r.field, r.why))
}

fn arith(ctx: &str) -> Why {
    Why::Arithmetic(ctx.to_string())
}

#[test]
fn shell_placeholders_where_the_quoting_would_not_hold_are_refused() {
    use Why::*;
    let var = |s: &str| VariableName(s.to_string());
    let cases: Vec<(&str, &str, Why)> = vec![
        ("grep -rn \"{pattern}\" .", "pattern", Quotes),
        ("echo '{x}'", "x", Quotes),
        ("echo a'b{x}c'", "x", Quotes),
        ("echo $'a{x}'", "x", Quotes),
        ("echo $\"{x}\"", "x", Quotes),
        ("echo \"$(echo {x})\"", "x", Quotes),
        ("echo \"`echo {x}`\"", "x", Quotes),
        ("echo \"$(case a in a) echo {x};; esac)\"", "x", Quotes),
        ("echo \"a\\\"{x}\"", "x", Quotes),
        ("echo `echo {x}`", "x", Backticks),
        ("cat <<EOF\n{x}\nEOF", "x", HeredocBody),
        ("cat <<EOF\nsay {x} now\nEOF\necho {x}", "x", HeredocBody),
        ("cat <<EOF\na\\\nEOF\n{x}\nEOF", "x", HeredocBody),
        ("cat <<A <<B\na\nA\n{x}\nB", "x", HeredocBody),
        ("echo \"$(cat <<EOF\n{x}\nEOF\n)\"", "x", HeredocBody),
        ("cat <<'EOF'\n{x}\nEOF", "x", QuotedHeredocBody),
        ("cat <<-\"EOF\"\n\t{x}\n\tEOF", "x", QuotedHeredocBody),
        ("cat <<{x}\nhi\n", "x", HeredocDelimiter),
        ("[[ {n} -eq 1 ]]", "n", arith("[[ … -eq … ]]")),
        ("[[ 1 -ne {n} ]]", "n", arith("[[ … -ne … ]]")),
        ("if [[ -n a && {n} -lt 2 ]]; then echo; fi", "n", arith("[[ … -lt … ]]")),
        ("[[ ( {n} -le 2 ) ]] && echo", "n", arith("[[ … -le … ]]")),
        ("[[ {n} -gt 2 || 1 -ge {m} ]]", "n", arith("[[ … -gt … ]]")),
        ("echo $(( {n} + 1 ))", "n", arith("$((…))")),
        ("(( {n} ))", "n", arith("((…))")),
        ("for (( i = 0; i < {n}; i++ )); do echo $i; done", "n", arith("((…))")),
        ("echo $[{n} + 1]", "n", arith("$[…]")),
        ("echo $(( $(echo {n}) + 1 ))", "n", arith("$((…))")),
        ("arr[{i}]=1", "i", arith("an array subscript")),
        ("a=([{i}]=1)", "i", arith("an array subscript")),
        ("let x={n}", "n", arith("let")),
        ("local -i n={n}", "n", arith("an integer variable (local -i)")),
        ("echo ${{arr[{i}]}}", "i", ParamExpansion),
        ("echo ${{x:-{y}}}", "y", ParamExpansion),
        ("echo ${{s:{n}}}", "n", ParamExpansion),
        ("echo \\{x}", "x", AfterBackslash),
        ("echo ${x}", "x", AfterDollar),
        ("echo $HOME{x}", "x", AfterDollar),
        ("echo hi # {x}", "x", Comment),
        ("# {x}\necho", "x", Comment),
        ("eval echo {x}", "x", Evaluated("eval".into())),
        ("trap {x} EXIT", "x", Evaluated("trap".into())),
        ("unset {x}", "x", var("unset")),
        ("declare {x}=1", "x", var("declare")),
        ("export -{x} A", "x", var("export")),
        ("printf -v {x} %s 1", "x", var("printf -v")),
        ("read -r {x}", "x", var("read")),
        ("echo a | read -a {x}", "x", var("read")),
        ("[ -v {x} ]", "x", var("[ -v")),
        ("[[ -v {x} ]]", "x", var("[[ -v ]]")),
        ("n={x}; echo $((n + 1))", "x", ReachesArithmetic("$n".into())),
        ("n={x}\n(( n > 2 )) && echo big", "x", ReachesArithmetic("$n".into())),
        ("for v in {x}; do echo $(( $v * 2 )); done", "x", ReachesArithmetic("$v".into())),
        ("read n <<< {x}; echo $((n))", "x", ReachesArithmetic("$n".into())),
        ("n=$(echo {x}); [[ $n -eq 1 ]]", "x", ReachesArithmetic("$n".into())),
        ("local n={x}; echo ${{s:n}}", "x", ReachesArithmetic("$n".into())),
        ("f() {{ echo $(( $1 + 1 )); }}; f {x}", "x", ReachesArithmetic("a positional parameter ($1…)".into())),
        ("declare -i n; n={x}", "x", IntegerVariable("n".into())),
        ("declare -n ref={x}", "x", var("declare -n")),
        ("wait -p {x}", "x", var("wait -p")),
        ("getopts ab {x}", "x", var("getopts")),
        ("v={x}; echo ${{!v}}", "x", ReachesArithmetic("$v".into())),
        ("echo {x} | while read -r n; do echo $((n * 2)); done", "x", ReachesArithmetic("$n".into())),
        ("mapfile -t lines <<< {x}; echo $(( lines[0] ))", "x", ReachesArithmetic("$lines".into())),
        ("printf -v n %s {x}; (( n ))", "x", ReachesArithmetic("$n".into())),
    ];
    for (t, field, why) in cases {
        assert_eq!(shell(t), Some((field.to_string(), why)), "{t:?}");
    }
}

#[test]
fn shell_placeholders_in_plain_words_stay_allowed() {
    for t in [
        "grep -rn {pattern} .",
        "grep -e {pattern} -- {file} > out.txt 2>&1",
        "echo {x} \"$HOME\" '{{literal}}' {{a,b}}{x}",
        "echo $(echo {x}) <(sort {a}) a#{x} $# {x}",
        "cat <<< {x}",
        "cat <<EOF\nhello $HOME \"quoted\" 'single'\nEOF\necho {x}",
        "cat <<'EOF'\n$(not run)\nEOF\necho {x}",
        "case {x} in a) echo {x};; *) echo no;; esac",
        "echo $(case a in (a) echo {x};; esac) {y}",
        "[[ {x} == abc && {y} =~ ^a ]]",
        "[[ $(echo {x}) == y ]]",
        "[ {x} -eq 1 ]",
        "test -n {x}",
        "v={x}; echo \"$v\" ${{#v}}",
        "export FOO={x}; local v={x}; cmd",
        "f() {{ echo {x}; }}; f",
        "x=1; echo $((x + 1)) {y}",
        "printf '%s\\n' {x}",
        "for f in {x}; do echo \"$f\"; done",
        "read -p {prompt} name; echo \"$name\"",
        "echo {a}{b} && echo {c} || echo {d}; echo {e} | cat",
        "if test {x}; then echo {y}; fi",
        "(cd {dir} && ls)",
        "arr=({x} {y}); echo \"${{arr[@]}}\"",
    ] {
        assert_eq!(shell(t), None, "{t:?}");
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    for open in ["$(", "\"$(", "${{x:-", "$(( (", "`"] {
        let t = format!("echo {}{{x}}", open.repeat(200_000));
        assert_eq!(shell(&t).map(|(_, why)| why).filter(|w| *w == Why::TooDeep).is_some(), open != "`", "{open}");
    }
    assert_eq!(shell(&format!("echo {}{{x}}{}", "$(".repeat(60), ")".repeat(60))), None);
}

fn spec_json(kind: &str, payload: serde_json::Value, props: &[&str]) -> serde_json::Value {
    let props: serde_json::Map<String, serde_json::Value> = props.iter().map(|p| (p.to_string(), json!({}))).collect();
    json!({ "name": "t", "parameters": { "type": "object", "properties": props }, "handler_kind": kind, "handler_payload": payload })
}

fn refusal(kind: &str, payload: serde_json::Value, props: &[&str]) -> String {
    let e = WorkspaceToolSpec::from_json(&spec_json(kind, payload, props)).unwrap_err();
    assert_eq!(e.code, Code::Configuration, "{}", e.message);
    e.message
}

#[test]
fn the_refusal_is_a_configuration_error_naming_the_placeholder() {
    assert_eq!(
        refusal("shell_template", json!({ "command": "grep -rn \"{pattern}\" ." }), &["pattern"]),
        "Invalid workspace tool spec: write {pattern} without quotes: values are quoted for you."
    );
    let m = refusal("shell_template", json!({ "command": "echo $(( {n} + 1 ))" }), &["n"]);
    assert!(m.contains("{n} is in an arithmetic context ($((…)))") && m.contains("runs values as code"), "{m}");
    let m = refusal("shell_template", json!({ "command": "cat <<EOF\n{x}\nEOF" }), &["x"]);
    assert!(m.contains("{x} is in the body of a here-document") && m.contains("runs values as code"), "{m}");
    let m = refusal("python_template", json!({ "code": "print(len(\"{text}\"))" }), &["text"]);
    assert!(m.contains("write {text} without quotes: values are quoted for you"), "{m}");
}

#[test]
fn python_placeholders_inside_string_literals_are_refused() {
    for code in [
        "print(len('''{text}'''.split()))",
        "print(\"{text}\")",
        "print(f'{{{text}}}')",
        "print(F\"\"\"{{{text}}}\"\"\")",
        "x = rb'{text}'",
        "x = Br\"{text}\"",
        "x = u'{text}'",
        "x = fR'{text}'",
        "x = '''\n{text}\n'''",
    ] {
        let m = refusal("python_template", json!({ "code": code }), &["text"]);
        assert!(m.contains("{text}"), "{code}: {m}");
    }
    for code in ["print(len({text}))", "print({text}) # {text} is 'quoted'", "d = {{'k': {text}}}"] {
        WorkspaceToolSpec::from_json(&spec_json("python_template", json!({ "code": code }), &["text"])).unwrap();
    }
}

#[test]
fn a_placeholder_the_schema_does_not_declare_is_refused() {
    let m = refusal("shell_template", json!({ "command": "echo {x} {y}" }), &["x"]);
    assert!(m.contains("{y} is not declared in parameters.properties"), "{m}");
    refusal("python_template", json!({ "code": "print({y})" }), &["x"]);
    // no `properties` in the schema: nothing to check against
    WorkspaceToolSpec::from_json(
        &json!({ "name": "t", "handler_kind": "shell_template", "handler_payload": { "command": "echo {y}" } }),
    )
    .unwrap();
}

#[test]
fn substitution_is_raw_or_absent_and_raw_skips_the_place_checks() {
    for bad in [json!("quoted"), json!(null), json!(true), json!("RAW")] {
        let m = refusal("shell_template", json!({ "command": "echo {x}", "substitution": bad }), &["x"]);
        assert!(m.contains("substitution must be 'raw'"), "{m}");
    }
    for (kind, payload) in [
        ("shell_template", json!({ "command": "grep -rn \"{x}\" .", "substitution": "raw" })),
        ("python_template", json!({ "code": "print('''{x}''')", "substitution": "raw" })),
    ] {
        let s = WorkspaceToolSpec::from_json(&spec_json(kind, payload, &["x"])).unwrap();
        assert!(s.raw() && s.needs_approval_by_default());
    }
    // raw still refuses an undeclared placeholder
    refusal("shell_template", json!({ "command": "echo {y}", "substitution": "raw" }), &["x"]);
}

#[test]
fn a_raw_tool_needs_approval_unless_the_caller_says_otherwise() {
    use crate::shell::tool::Approval;
    let raw = WorkspaceToolSpec::from_json(&spec_json(
        "shell_template",
        json!({ "command": "echo {x}", "substitution": "raw" }),
        &["x"],
    ))
    .unwrap();
    let quoted =
        WorkspaceToolSpec::from_json(&spec_json("shell_template", json!({ "command": "echo {x}" }), &["x"])).unwrap();
    let approval = |s: &WorkspaceToolSpec, o: serde_json::Value| match tool_options_for(s, &o, &|_| None, None)
        .unwrap()
        .approval
    {
        Approval::Always(b) => b,
        Approval::Predicate(_) => panic!("a predicate"),
    };
    assert!(approval(&raw, json!({})));
    assert!(!approval(&raw, json!({ "needsApproval": false })));
    assert!(!approval(&quoted, json!({})));
    assert!(approval(&quoted, json!({ "needsApproval": true })));
    assert!(approval(&raw, json!(null)));
}
