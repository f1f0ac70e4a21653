//! The options of the JavaScript facade's own functions: the SDK adapters, the registry's
//! `toolsFor` and the admin handler. What they hold stays in JavaScript (an SDK module, a shell
//! provider, a callback), so the facade sends their shape, `{ key: kind }` with kind one of
//! `function`, `array`, `object`, `string`, `number`, `boolean`, `null`, and the core checks the
//! names and kinds: a misspelled key is a `ConfigurationError` naming the nearest valid one.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::options::Reader;

/// What a key may hold.
#[derive(Clone, Copy)]
enum Kind {
    Function,
    Array,
    Object,
    String,
    Number,
    /// An object, a function or a module: anything but a primitive.
    Value,
    /// `needsApproval`: a boolean or a function.
    Approval,
    /// `turn` of an adapter: a number, or a function that gives one at each change.
    Turn,
    /// `redact`: a boolean, options or a Redactor (the core reads which).
    Redact,
}

impl Kind {
    fn accepts(self, kind: &str) -> bool {
        match self {
            Kind::Function => kind == "function",
            Kind::Array => kind == "array",
            Kind::Object => kind == "object",
            Kind::String => kind == "string",
            Kind::Number => kind == "number",
            Kind::Value => matches!(kind, "object" | "function" | "array"),
            Kind::Approval => matches!(kind, "boolean" | "function"),
            Kind::Turn => matches!(kind, "number" | "function"),
            Kind::Redact => matches!(kind, "boolean" | "object"),
        }
    }
    fn what(self) -> &'static str {
        match self {
            Kind::Function => "a function",
            Kind::Array => "an array",
            Kind::Object => "an object",
            Kind::String => "a string",
            Kind::Number => "a number",
            Kind::Value => "an object",
            Kind::Approval => "a boolean or a function",
            Kind::Turn => "a number or a function",
            Kind::Redact => "true, false, { values, rules, allow } or a Redactor",
        }
    }
}

type Spec = &'static [(&'static str, Kind, &'static str)];

/// Each function's options: key, kind, and what the key is, for the message.
fn spec(what: &str) -> Option<(&'static str, Spec, &'static [&'static str])> {
    const SESSION: (&str, Kind, &str) = ("sessionId", Kind::String, "the session the tools' calls belong to");
    const TURN: (&str, Kind, &str) = ("turn", Kind::Number, "the turn the tools' calls belong to");
    const SHELL: (&str, Kind, &str) = ("shell", Kind::Value, "a ShellProvider");
    const ALLOW: (&str, Kind, &str) = ("allow", Kind::Array, "the commands that may run");
    const DENY: (&str, Kind, &str) = ("deny", Kind::Array, "the commands that never run");
    const ROOT: (&str, Kind, &str) = ("root", Kind::String, "the workspace's absolute path in the sandbox");
    // The file tools' options for an adapter's reads and writes (checked by the core's `files`
    // reader), and the session and turn its changes are recorded under.
    const FILES: (&str, Kind, &str) = ("files", Kind::Object, "the file tools' options for its reads and writes");
    const FILES_SESSION: (&str, Kind, &str) = ("sessionId", Kind::String, "the session its changes belong to");
    const FILES_TURN: (&str, Kind, &str) = ("turn", Kind::Turn, "the turn its changes belong to");
    Some(match what {
        "toAiSdkTools" => ("toAiSdkTools", &[("ai", Kind::Value, "the 'ai' package"), SESSION, TURN], &[]),
        "toOpenAIAgentsTools" => {
            ("toOpenAIAgentsTools", &[("agents", Kind::Value, "the '@openai/agents' package"), SESSION, TURN], &[])
        }
        "toAiSdkSandbox" => (
            "toAiSdkSandbox",
            &[
                SHELL,
                ALLOW,
                DENY,
                ROOT,
                ("description", Kind::String, "the text the model reads about the sandbox"),
                FILES,
                FILES_SESSION,
                FILES_TURN,
            ],
            &[],
        ),
        "corralSandboxClient" => (
            "corralSandboxClient",
            &[("fs", Kind::Value, "an FsProvider"), SHELL, ALLOW, DENY, FILES, FILES_SESSION, FILES_TURN],
            &["fs"],
        ),
        "createEditor" => ("createEditor", &[ROOT, FILES, FILES_SESSION, FILES_TURN], &[]),
        "toolsFor" => (
            "toolsFor",
            &[
                ("shell", Kind::Value, "a ShellProvider"),
                ("builtins", Kind::Array, "an array of tools"),
                ("timeoutMs", Kind::Number, "milliseconds"),
                ("maxOutputChars", Kind::Number, "characters"),
                ("needsApproval", Kind::Approval, "whether each call needs approval"),
                ("redact", Kind::Redact, "what becomes a marker in the workspace tools' results"),
            ],
            // A workspace without tools of its own needs no shell; createTemplateTool says so
            // for one that has them.
            &[],
        ),
        "createWorkspaceToolsHandler" => (
            "createWorkspaceToolsHandler",
            &[
                ("registry", Kind::Object, "a WorkspaceToolRegistry"),
                ("authenticate", Kind::Function, "authenticate(token, req)"),
            ],
            &["authenticate"],
        ),
        _ => return None,
    })
}

/// Checks the shape of the options of the facade function `what`; `null` is no options.
pub fn check(what: &str, shape: &Value) -> Result<()> {
    let (name, spec, required) =
        spec(what).ok_or_else(|| Error::config(format!("{what}: the core knows no options of this name.")))?;
    let keys: Vec<&str> = spec.iter().map(|(k, _, _)| *k).collect();
    let r = Reader::new(name, shape, &keys)?;
    for (key, kind, about) in spec {
        let got = r.get(key).and_then(Value::as_str);
        match got {
            None | Some("null") if required.contains(key) => {
                return Err(r.err(format!("{key} ({about}) is required.")));
            }
            None | Some("null") => {}
            Some(k) if !kind.accepts(k) => return Err(r.err(format!("{key} must be {} ({about}).", kind.what()))),
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_misspelled_key_names_the_nearest_valid_one() {
        let e = check("toAiSdkTools", &json!({ "sesionId": "string" })).unwrap_err();
        assert_eq!(e.message, "toAiSdkTools: unknown option 'sesionId'; did you mean sessionId?");
        let e = check("toolsFor", &json!({ "shell": "object", "builtin": "array" })).unwrap_err();
        assert!(e.message.contains("did you mean builtins?"), "{}", e.message);
    }

    #[test]
    fn a_key_of_the_wrong_kind_says_what_it_must_be() {
        let e = check("createWorkspaceToolsHandler", &json!({ "authenticate": "string" })).unwrap_err();
        assert_eq!(
            e.message,
            "createWorkspaceToolsHandler: authenticate must be a function (authenticate(token, req))."
        );
        let e = check("toOpenAIAgentsTools", &json!({ "turn": "string" })).unwrap_err();
        assert!(e.message.contains("turn must be a number"), "{}", e.message);
    }

    #[test]
    fn a_required_key_is_required_and_valid_shapes_pass() {
        let e = check("createWorkspaceToolsHandler", &json!({ "registry": "object" })).unwrap_err();
        assert!(e.message.contains("authenticate (authenticate(token, req)) is required"), "{}", e.message);
        check("toolsFor", &json!({ "shell": "object", "needsApproval": "boolean", "timeoutMs": "number" })).unwrap();
        assert!(check("toolsFor", &json!({ "needsApproval": "string" })).is_err());
        check("toAiSdkTools", &Value::Null).unwrap();
        check("createWorkspaceToolsHandler", &json!({ "authenticate": "function", "registry": "null" })).unwrap();
        assert!(check("createWorkspaceToolsHandler", &Value::Null).is_err());
    }
}
