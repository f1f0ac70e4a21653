//! What a person is asked before a command runs (`corral mcp`'s elicitation, or any host that puts
//! a tool call to its user): the text comes from here, so every surface asks the same question.
//!
//! Control characters (a carriage return, or padding that pushes the rest out of sight) and
//! bidirectional overrides are written as escapes, so what is shown is what runs.

use serde_json::Value;

use super::process::Processes;
use super::rules::{check_command, CommandPattern};
use super::ShellProvider;

/// The most of a command's standard input, or of text for a running process, a prompt shows.
pub const TEXT_SHOWN: usize = 2000;

/// `text` as it is shown to a person: invisible and reordering characters as `\u{…}` escapes;
/// newlines kept with `keep_newlines`, else written `\n`.
pub fn visible(text: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = matches!(c as u32, 0x00..=0x09 | 0x0b..=0x1f | 0x7f..=0x9f | 0x61c | 0x200e | 0x200f | 0x202a..=0x202e | 0x2066..=0x2069);
        if c == '\n' {
            out.push_str(if keep_newlines { "\n" } else { "\\n" });
        } else if hidden {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The first `TEXT_SHOWN` characters of `text` as shown, with a line that says how much more
/// there is.
fn shown_text(text: &str, what: &str) -> String {
    let total = text.chars().count();
    let head: String = text.chars().take(TEXT_SHOWN).collect();
    let cut =
        if total > TEXT_SHOWN { format!(" (the first {TEXT_SHOWN} of {total} characters)") } else { String::new() };
    format!("\n\n{what}{cut}:\n{}", visible(&head, true))
}

/// The question for one call of `tool` with `args`, in the workspace named `root_name`: a shell
/// command (in the background or not, with its standard input), or text for a background
/// process's input (naming the command it goes to). `None` for a call no prompt is made for here.
pub fn prompt(tool: &str, args: &Value, root_name: &str, procs: Option<&Processes>) -> Option<String> {
    let text = |k: &str| args.get(k).and_then(Value::as_str);
    if tool == "process_input" {
        let id = text("id")?;
        let command = procs.and_then(|p| p.command_of(id)).unwrap_or_default();
        return Some(format!(
            "Write this to the standard input of the background command {id} in {root_name}?\n\n{}{}",
            visible(&command, false),
            shown_text(text("text").unwrap_or_default(), "the text")
        ));
    }
    let command = text("command")?;
    let background = args.get("run_in_background").and_then(Value::as_bool) == Some(true);
    let mut out = if background {
        format!(
            "Run this command in the background in {root_name}? (Text later written to its standard input is put to you too.)\n\n{}",
            visible(command, false)
        )
    } else {
        format!("Run this command in {root_name}?\n\n{}", visible(command, false))
    };
    if let Some(stdin) = text("stdin") {
        out.push_str(&shown_text(stdin, "with this on its standard input"));
    }
    Some(out)
}

/// What `corral mcp` does with a tool call (`McpPolicy::decide`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    /// Put the tool's approval prompt to the user.
    Ask,
    /// Answer with this text instead of running.
    Refuse(String),
}

/// Who approves a command in `corral mcp`: one matching `--allow` runs without asking, one
/// matching `--deny` is refused (the shell tool's own `deny`), any other is asked; with
/// `--client-approves` every command not denied runs (the client asks its user before each call).
pub struct McpPolicy {
    allow: Vec<CommandPattern>,
    allow_text: Vec<String>,
    deny_text: Vec<String>,
    client_approves: bool,
}

impl McpPolicy {
    pub fn new(allow: Vec<String>, deny: Vec<String>, client_approves: bool) -> McpPolicy {
        McpPolicy {
            allow: allow.iter().cloned().map(CommandPattern::Str).collect(),
            allow_text: allow,
            deny_text: deny,
            client_approves,
        }
    }

    /// Whether `command` is put to the user: not with `--client-approves`, not when `--allow`
    /// lets it run (the shell tool's own matching, in `shell`'s dialect and workspace).
    pub async fn needs_approval(&self, shell: &dyn ShellProvider, command: &str) -> bool {
        if self.client_approves {
            return false;
        }
        if self.allow.is_empty() {
            return true;
        }
        let name = shell.shell();
        let dir = shell.host_dir(None);
        check_command(command, Some(&self.allow), &[], name.as_deref(), dir.as_deref()).await.is_err()
    }

    /// What the shell tool's description adds: what runs without asking, what is asked, what is
    /// refused (`can_ask`: the client declared elicitation).
    pub fn note(&self, can_ask: bool) -> String {
        let list = |p: &[String]| p.iter().map(|x| format!("`{x}`")).collect::<Vec<_>>().join(", ");
        let denied = if self.deny_text.is_empty() {
            String::new()
        } else {
            format!(" Refused without asking: {}.", list(&self.deny_text))
        };
        if self.client_approves {
            let not = if denied.is_empty() { "" } else { " not refused" };
            return format!(
                "Every command{not} runs without asking here: the MCP client asks its user before each call.{denied}"
            );
        }
        let others = if can_ask {
            "is put to the user first and runs only if they approve"
        } else {
            "is refused: this client cannot ask its user for approval"
        };
        let allowed = if self.allow_text.is_empty() {
            format!("Every command {others}.")
        } else {
            format!(
                "These commands run without asking: {} (extra arguments only when they stay inside the workspace, with no $, {{ or }} and no shell operator outside quotes); any other command {others}.",
                list(&self.allow_text)
            )
        };
        allowed + &denied
    }

    /// What becomes of a tool call whose tool says it `needed` approval: it runs, the user is
    /// asked, or it is answered with a text instead of running (a client that cannot ask).
    pub fn decide(needed: bool, can_ask: bool, tool: &str, args: &Value) -> Decision {
        if !needed {
            return Decision::Run;
        }
        if can_ask {
            return Decision::Ask;
        }
        let command = match args.get("command").and_then(Value::as_str) {
            Some(c) => c.to_string(),
            None => format!("{tool} {args}"),
        };
        Decision::Refuse(McpPolicy::cannot_ask(&command))
    }

    /// After the user was asked: `None` when the call runs (accepted with `run: true`), else the
    /// text it is answered with (`error`: why the question got no answer).
    pub fn answered(accepted: bool, error: Option<&str>) -> Option<String> {
        match (accepted, error) {
            (_, Some(e)) => Some(format!("Not run: the user declined or could not be asked ({e}).")),
            (true, None) => None,
            (false, None) => Some("Not run: the user declined to run this command.".to_string()),
        }
    }

    /// The result text for a call that needs approval from a client that cannot ask, naming the
    /// two ways out (`command`: the command, or the tool call as text).
    pub fn cannot_ask(command: &str) -> String {
        let quoted = format!("'{}'", command.replace('\'', "'\"'\"'"));
        format!(
            "Not run: this command needs approval and this client cannot ask for it. To let it run, start corral mcp with --allow {quoted}, or with --client-approves if your client asks its user before each tool call."
        )
    }
}

/// Commands that run code the workspace holds (a script, a build file, a test suite).
const SCRIPT_RUNNERS: &[&str] = &[
    "npm",
    "npx",
    "pnpm",
    "yarn",
    "bun",
    "deno",
    "node",
    "make",
    "cargo",
    "go",
    "python",
    "python3",
    "pytest",
    "tox",
    "nox",
    "uv",
    "poetry",
    "gradle",
    "./gradlew",
    "gradlew",
    "mvn",
    "./mvnw",
    "rake",
    "bundle",
    "ruby",
    "perl",
    "php",
    "composer",
    "just",
    "sh",
    "bash",
    "zsh",
    "dotnet",
    "swift",
    "mix",
    "dune",
    "jest",
    "vitest",
    "tsx",
    "ts-node",
];

/// What `corral mcp` serves for its `--tools`, `--sandbox`, `--image` and `--read-only` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpPlan {
    /// The file tools added after the six (`--tools all`: every extra one).
    pub include: Vec<&'static str>,
    /// Where commands run: `None` with `--read-only` (no shell tool), else `"none"` (the
    /// workspace itself), `"linux"` or `"docker"`.
    pub sandbox: Option<&'static str>,
    /// The shell runs commands in the background too (`--tools all`).
    pub background: bool,
}

impl McpPlan {
    /// The plan for the flags (`None`: not given), or why they do not make one.
    pub fn from_flags(
        tools: Option<&str>,
        sandbox: Option<&str>,
        image: Option<&str>,
        read_only: bool,
    ) -> Result<McpPlan, String> {
        let all = match tools.unwrap_or("default") {
            "default" => false,
            "all" => true,
            other => return Err(format!("--tools must be default or all, not '{other}'")),
        };
        let sandbox = match sandbox.unwrap_or("none") {
            "none" => "none",
            "linux" => "linux",
            "docker" if image.is_none() => return Err("--sandbox docker needs --image IMAGE".to_string()),
            "docker" => "docker",
            other => return Err(format!("--sandbox must be none, linux or docker, not '{other}'")),
        };
        Ok(McpPlan {
            include: if all { crate::tools::EXTRA_TOOLS.to_vec() } else { Vec::new() },
            sandbox: (!read_only).then_some(sandbox),
            background: all && !read_only,
        })
    }
}

/// `corral mcp`'s start-up warning (for its standard error, never the tool's description): an
/// `--allow` entry for a script runner lets the model run anything when it can also write the
/// files that runner reads (`npm test` after `apply_patch` rewrote `package.json`). `None`
/// without a shell (`--read-only`: `McpPlan::sandbox` is `None`) or in a sandbox, or when no
/// entry runs scripts.
pub fn allow_warning(allow: &[String], sandbox: Option<&str>) -> Option<String> {
    if sandbox != Some("none") {
        return None;
    }
    let runners: Vec<&String> =
        allow.iter().filter(|p| p.split_whitespace().next().is_some_and(|w| SCRIPT_RUNNERS.contains(&w))).collect();
    let first = runners.first()?;
    let list = runners.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ");
    Some(format!(
        "corral mcp: warning: --allow {list} runs code the model can change: with the file tools it can rewrite what {first} reads (package.json, a Makefile, a test) and then call {first}, which then runs anything, unasked, on this machine. Add --read-only, or run commands in a sandbox (--sandbox linux, or --sandbox docker --image IMAGE), or leave such commands to be approved each time."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mcp_flags_make_one_plan_or_say_what_is_wrong() {
        let plan = McpPlan::from_flags(None, None, None, false).unwrap();
        assert_eq!(plan, McpPlan { include: vec![], sandbox: Some("none"), background: false });
        let all = McpPlan::from_flags(Some("all"), Some("linux"), None, false).unwrap();
        assert_eq!((all.include.len(), all.sandbox, all.background), (6, Some("linux"), true));
        // --read-only: no shell, and no background.
        let ro = McpPlan::from_flags(Some("all"), None, None, true).unwrap();
        assert_eq!((ro.sandbox, ro.background, ro.include.len()), (None, false, 6));
        for (tools, sandbox, image, why) in [
            (Some("most"), None, None, "--tools must be default or all, not 'most'"),
            (None, Some("vm"), None, "--sandbox must be none, linux or docker, not 'vm'"),
            (None, Some("docker"), None, "--sandbox docker needs --image IMAGE"),
        ] {
            assert_eq!(McpPlan::from_flags(tools, sandbox, image, false).unwrap_err(), why);
        }
        assert_eq!(McpPlan::from_flags(None, Some("docker"), Some("alpine"), false).unwrap().sandbox, Some("docker"));
    }

    #[test]
    fn a_script_runner_allowed_beside_the_file_tools_is_warned_about_unless_read_only_or_sandboxed() {
        let allow = vec!["git status".to_string(), "npm test".to_string()];
        let w = allow_warning(&allow, Some("none")).unwrap();
        assert!(w.contains("'npm test'") && w.contains("--read-only") && w.contains("--sandbox linux"), "{w}");
        assert!(!w.contains("git status"), "{w}");
        assert_eq!(allow_warning(&allow, None), None);
        assert_eq!(allow_warning(&allow, Some("linux")), None);
        assert_eq!(allow_warning(&["git status".to_string()], Some("none")), None);
    }

    #[test]
    fn hidden_characters_are_shown_as_escapes_and_long_input_is_cut_with_a_count() {
        let p = prompt(
            "shell",
            &serde_json::json!({ "command": "ls\rrm -rf x\u{202e}", "stdin": "y".repeat(2500) }),
            "proj",
            None,
        )
        .unwrap();
        assert!(p.starts_with("Run this command in proj?\n\nls\\u{d}rm -rf x\\u{202e}"), "{p}");
        assert!(p.contains("(the first 2000 of 2500 characters)"), "{p}");
        let bg =
            prompt("shell", &serde_json::json!({ "command": "sh", "run_in_background": true }), "proj", None).unwrap();
        assert!(bg.contains("in the background") && bg.contains("standard input is put to you too"), "{bg}");
        let input =
            prompt("process_input", &serde_json::json!({ "id": "p1", "text": "touch x; echo done\n" }), "proj", None)
                .unwrap();
        assert!(
            input.contains("standard input of the background command p1") && input.contains("touch x; echo done"),
            "{input}"
        );
    }
}
