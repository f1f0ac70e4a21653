//! `readOnlyCommands`: a `needsApproval` predicate over the parsed command line.
//!
//! A line needs no approval only when every simple command in it is on the list (word for word:
//! `git status` allows `git status --short`, not `git stash`) and passes corral's read-only table
//! (`read_only_table`). Simple commands may be joined by `&&`, `||`, `;` and `|`: each is checked
//! on its own, none of them writes or runs a program, so neither can their sequence or pipe (a
//! pipe only feeds one's output to the next one's input, and no program on the table runs its
//! input). A substitution, an expansion (`$`, unquoted `{`/`}`), an output redirection, a
//! background `&`, a subshell, a comment, a newline, a glob that can expand to an option and an
//! argument outside the working directory all need approval. `< FILE` from inside the working
//! directory is allowed. On Windows (cmd.exe) any shell operator character needs approval.

use super::read_only_table as table;
use super::read_only_table::git::normalize;
use super::*;

/// A predicate for `needsApproval` built from commands that only read (see the module's doc).
#[derive(Debug, Clone)]
pub struct ReadOnlyCommands {
    /// The entries' words, git's harmless global options removed.
    entries: Vec<Vec<String>>,
}

/// Characters an entry may not contain: it is matched word for word, so it must read the same to
/// the shell and to the check.
const ENTRY_SPECIAL: &[char] =
    &['\'', '"', '\\', '$', '`', '{', '}', '*', '?', '[', ']', '~', '#', '(', ')', '\t', '%', '^'];

impl ReadOnlyCommands {
    pub fn new(commands: Vec<String>) -> Result<Self> {
        let mut entries = Vec::new();
        for c in &commands {
            let words: Vec<String> = c.split(' ').map(str::to_string).collect();
            if c.trim().is_empty()
                || words.iter().any(String::is_empty)
                || find_operator(c, true).is_some()
                || c.contains(ENTRY_SPECIAL)
            {
                return Err(Error::config(format!(
                    "readOnlyCommands: '{}' is not a plain command (words separated by single spaces, no shell operators, quotes or expansions).",
                    show(c)
                )));
            }
            let bad =
                |why: String| Error::config(format!("readOnlyCommands: '{}' has no read-only form: {why}.", show(c)));
            let norm = normalize(&words).map_err(bad)?;
            if let Some(why) = table::refusal(&norm, true) {
                let why = if why.contains("not in corral's read-only table") {
                    format!("{why} (it knows {})", table::known())
                } else {
                    why
                };
                return Err(bad(why));
            }
            entries.push(norm);
        }
        Ok(ReadOnlyCommands { entries })
    }

    /// Whether `command` needs approval.
    pub fn needs_approval(&self, command: &str) -> bool {
        self.refusal(command).is_some()
    }

    /// Why `command` needs approval, or `None` when it does not.
    pub(crate) fn refusal(&self, command: &str) -> Option<String> {
        self.refusal_in(command, is_cmd_shell(None))
    }

    pub(super) fn refusal_in(&self, command: &str, cmd: bool) -> Option<String> {
        let parts = match simple_commands(command, cmd) {
            Ok(parts) => parts,
            Err(why) => return Some(why),
        };
        parts.iter().find_map(|p| self.part_refusal(p, cmd))
    }

    fn part_refusal(&self, p: &Simple, cmd: bool) -> Option<String> {
        let texts: Vec<String> = p.words.iter().map(|w| w.text.clone()).collect();
        let norm = match normalize(&texts) {
            Ok(norm) => norm,
            Err(why) => return Some(why),
        };
        if !self.entries.iter().any(|e| norm.starts_with(e)) {
            return Some(format!("`{}` is not on the list", show(&texts.join(" "))));
        }
        if let Some(why) = table::refusal(&norm, false) {
            return Some(why);
        }
        let uniq = texts[0] == "uniq";
        for w in p.words.iter().skip(1) {
            if w.glob_start || (w.glob && (uniq || w.text.starts_with('-'))) {
                return Some(format!("the glob `{}` can expand to an option or to more operands", show(&w.text)));
            }
        }
        if let Some(w) = p.inputs.iter().find(|w| w.glob) {
            return Some(format!("the input `< {}` is a glob", show(&w.text)));
        }
        // Paths: as sh passes the words, and as a program splitting its own arguments could read
        // them. sed's script names no file, and its `/re/` addresses start with `/`.
        let script = table::sed_script_index(&texts);
        let sh = texts.iter().enumerate().filter(|(i, _)| Some(*i) != script).map(|(_, w)| w);
        let plain = words_plain(&p.raw.replace('<', " "));
        let plain_script = script.filter(|&i| plain.get(..=i) == texts.get(..=i));
        let plain = plain.iter().enumerate().filter(|(i, _)| Some(*i) != plain_script).map(|(_, w)| w);
        let inputs = p.inputs.iter().map(|w| &w.text);
        // Under cmd.exe a `'` is no quote: the words as Windows programs split them too.
        let windows = if cmd { words_cmd(&p.raw) } else { Vec::new() };
        if let Some(leave) = sh.chain(plain).chain(inputs).chain(windows.iter()).find_map(|w| leaving_word(w)) {
            return Some(format!("an argument leaves the working directory ({leave})"));
        }
        None
    }
}

/// One simple command of a line, as the shell-syntax reader gives it.
pub(super) type Simple = crate::shell::syntax::Command;

/// The simple commands of `line`, split on `&&`, `||`, `;` and `|`, or why the line needs
/// approval whatever its commands: the first construct the reader marks (see the module's doc).
/// With `cmd` (cmd.exe), any operator character needs approval and the line is one command split
/// as a program splits its arguments.
pub(super) fn simple_commands(line: &str, cmd: bool) -> std::result::Result<Vec<Simple>, String> {
    use crate::shell::syntax::{read, Arg, Construct};
    if cmd {
        if let Some(op) = find_operator(line, true) {
            return Err(format!("shell operator {op}"));
        }
        let words: Vec<Arg> = words_plain(line)
            .into_iter()
            .map(|text| Arg {
                glob: text.contains(['*', '?', '[']),
                glob_start: text.starts_with(['*', '?', '[']),
                text,
                quoted: true,
                expanded: false,
            })
            .collect();
        if words.is_empty() {
            return Err("an empty command".to_string());
        }
        return Ok(vec![Simple { words, raw: line.to_string(), ..Simple::default() }]);
    }
    let reading = read(line);
    // `&&`, `||`, `;`, `|` and `< FILE` are read-only's own; anything else needs approval.
    if let Some(m) = reading.marks.iter().find(|m| !matches!(m.what, Construct::Operator(_) | Construct::Input)) {
        return Err(m.what.describe());
    }
    let mut parts: Vec<Simple> = Vec::new();
    let mut before = "";
    let count = reading.commands.len();
    for (k, c) in reading.commands.into_iter().enumerate() {
        if c.words.is_empty() && c.inputs.is_empty() {
            if k + 1 < count {
                return Err(format!("`{}` with no command before it", c.op));
            }
            if parts.is_empty() {
                return Err("an empty command".to_string());
            }
            if before != ";" {
                return Err(format!("`{before}` with no command after it"));
            }
            continue;
        }
        if c.words.is_empty() {
            return Err("`<` without a command".to_string());
        }
        before = c.op;
        parts.push(c);
    }
    Ok(parts)
}
