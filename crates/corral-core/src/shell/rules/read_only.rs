//! `readOnlyCommands`: a `needsApproval` predicate over the parsed command.

use super::*;

/// A predicate for `needsApproval` built from commands that only read: a command line needs no
/// approval when it starts with one of `commands` (word for word: `git status` allows
/// `git status --short`, not `git stash`) and has no shell operator, substitution, redirection,
/// expansion, option-producing glob or argument outside the working directory. Anything else
/// needs approval.
#[derive(Debug, Clone)]
pub struct ReadOnlyCommands {
    commands: Vec<String>,
}

impl ReadOnlyCommands {
    pub fn new(commands: Vec<String>) -> Result<Self> {
        for c in &commands {
            let words: Vec<&str> = c.split(' ').collect();
            if c.trim().is_empty() || words.iter().any(|w| w.is_empty()) || find_operator(c, false).is_some() {
                return Err(Error::config(format!(
                    "readOnlyCommands: '{}' is not a plain command (words separated by single spaces, no shell operators).",
                    show(c)
                )));
            }
        }
        Ok(ReadOnlyCommands { commands })
    }

    /// Whether `command` needs approval.
    pub fn needs_approval(&self, command: &str) -> bool {
        !self
            .commands
            .iter()
            .any(|c| prefix_match(command, c).is_some() && string_refusal(command, c, false, None).is_none())
    }
}
