//! `workspacePrompt(tools)`: a short system-prompt section that tells the model what it works in
//! — the workspace's name (never the host path), the tools and their limits, the shell and the
//! commands it may run, and what it must leave alone. Built from what the tools themselves know
//! (their `info`), so it says the limits they enforce.

use serde_json::Value;

use crate::tools::fmt_count;

fn strs(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn first_sentence(d: &str) -> &str {
    match d.find(". ") {
        Some(i) => &d[..=i],
        None => d,
    }
}

/// `tools`: `[{ name, description, info? }]` in the order given; `name` overrides the
/// `workspacePrompt(tools, { name? })`.
pub fn workspace_prompt_for(tools: &[Value], options: &Value) -> crate::error::Result<String> {
    let r = crate::options::Reader::new("workspacePrompt", options, &["name"])?;
    Ok(workspace_prompt(tools, r.string("name")?.as_deref()))
}

/// workspace's name.
pub fn workspace_prompt(tools: &[Value], name: Option<&str>) -> String {
    let infos: Vec<&Value> = tools.iter().filter_map(|t| t.get("info")).filter(|i| !i.is_null()).collect();
    let files = infos.iter().find(|i| i["kind"] == "files");
    let root = name.map(str::to_string).or_else(|| files.and_then(|f| f["root"].as_str()).map(str::to_string));
    let mut out = String::from("## Workspace\n");
    match &root {
        Some(r) => out.push_str(&format!(
            "You work in the workspace `{r}` through the tools below. Every path is relative to its root; paths outside it are refused.\n"
        )),
        None => out.push_str(
            "You work in a workspace through the tools below. Every path is relative to its root; paths outside it are refused.\n",
        ),
    }
    if let Some(f) = files {
        let names: Vec<String> = tools
            .iter()
            .filter(|t| t.get("info").is_some_and(|i| i["kind"] == "files"))
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        out.push_str(&format!(
            "Files: {}. read_file shows up to {} lines a call, grep and glob up to {} results; output is cut at {} characters.{}\n",
            names.join(", "),
            fmt_count(f["maxReadLines"].as_u64().unwrap_or(0) as usize),
            fmt_count(f["maxResults"].as_u64().unwrap_or(0) as usize),
            fmt_count(f["maxOutputChars"].as_u64().unwrap_or(0) as usize),
            if f["readOnly"].as_bool() == Some(true) { " The files are read-only for you." } else { "" }
        ));
        let deny = strs(&f["deny"]);
        if !deny.is_empty() {
            out.push_str(&format!("Never read or written: {}.\n", deny.join(", ")));
        }
    }
    let mut protected: Vec<String> = files.map(|f| strs(&f["protect"])).unwrap_or_default();
    for s in infos.iter().filter(|i| i["kind"] == "shell") {
        let name = s["name"].as_str().unwrap_or("shell");
        let shell = s["shell"].as_str().map(|sh| format!(" with {sh}")).unwrap_or_default();
        let place = match s["cwd"].as_str() {
            Some(c) if !matches!(c, "" | "." | "./") => format!("in `{c}`"),
            _ => "in the workspace root".to_string(),
        };
        out.push_str(&format!(
            "Shell: `{name}` runs commands{shell} {place}, with {} ms to finish unless you ask for more (at most {} ms).",
            s["defaultTimeoutMs"], s["maxTimeoutMs"]
        ));
        match s["allow"].as_array() {
            Some(_) => {
                let allow = strs(&s["allow"]);
                if allow.is_empty() {
                    out.push_str(" No command is allowed.");
                } else {
                    out.push_str(&format!(" Only these commands run: {}; others are refused.", allow.join(", ")));
                }
            }
            None => out.push_str(" Commands may need approval before they run."),
        }
        let deny = strs(&s["deny"]);
        if !deny.is_empty() {
            out.push_str(&format!(" Always refused: {}.", deny.join(", ")));
        }
        out.push('\n');
        if let Some(dir) = s["spillDir"].as_str() {
            out.push_str(&format!("Long command output is saved in `{dir}`; read it there.\n"));
            protected.push(format!("{dir} (saved output)"));
        }
    }
    if !protected.is_empty() {
        out.push_str(&format!("Protected from writes: {}.\n", protected.join(", ")));
    }
    let others: Vec<String> = tools
        .iter()
        .filter(|t| t.get("info").is_none_or(|i| i.is_null()))
        .filter_map(|t| {
            let name = t["name"].as_str()?;
            let d = t["description"].as_str().unwrap_or("");
            Some(if d.is_empty() { format!("`{name}`") } else { format!("`{name}` ({})", first_sentence(d)) })
        })
        .collect();
    if !others.is_empty() {
        out.push_str(&format!("Other tools: {}.\n", others.join("; ")));
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_prompt_names_the_workspace_tools_limits_shell_and_protected_paths_never_the_host_path() {
        let files = json!({ "kind": "files", "root": "project", "readOnly": false, "maxReadLines": 2000, "maxResults": 200,
            "maxOutputChars": 50000, "deny": [".git"], "protect": ["dist/**"] });
        let shell = json!({ "kind": "shell", "name": "shell", "shell": "sh", "cwd": null, "allow": ["'npm test'"], "deny": ["'rm -rf'"],
            "defaultTimeoutMs": 120000, "maxTimeoutMs": 600000, "spillDir": ".corral/output" });
        let tools = vec![
            json!({ "name": "read_file", "description": "Read.", "info": files }),
            json!({ "name": "edit_file", "description": "Edit.", "info": files }),
            json!({ "name": "shell", "description": "Run.", "info": shell }),
            json!({ "name": "deploy", "description": "Deploys the app. Needs a token." }),
        ];
        let p = workspace_prompt(&tools, None);
        assert!(p.starts_with("## Workspace\nYou work in the workspace `project`"), "{p}");
        assert!(p.contains("Files: read_file, edit_file. read_file shows up to 2,000 lines"), "{p}");
        assert!(p.contains("Never read or written: .git."), "{p}");
        assert!(
            p.contains("Only these commands run: 'npm test'; others are refused. Always refused: 'rm -rf'."),
            "{p}"
        );
        assert!(p.contains("Protected from writes: dist/**, .corral/output (saved output)."), "{p}");
        assert!(p.contains("Other tools: `deploy` (Deploys the app.)."), "{p}");
        assert!(!p.contains('/') || !p.contains("/tmp"), "{p}");
        assert!(workspace_prompt(&tools, Some("named")).contains("`named`"));
    }
}
