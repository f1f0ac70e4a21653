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
        parts.iter().find_map(|p| self.part_refusal(p))
    }

    fn part_refusal(&self, p: &Simple) -> Option<String> {
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
        if let Some(leave) = sh.chain(plain).chain(inputs).find_map(|w| leaving_word(w)) {
            return Some(format!("an argument leaves the working directory ({leave})"));
        }
        None
    }
}

/// A word as sh passes it to the program, and whether it holds an unquoted wildcard.
#[derive(Debug, Default, Clone)]
pub(super) struct Word {
    pub text: String,
    /// Has an unquoted `*`, `?` or `[`.
    pub glob: bool,
    /// Starts with one.
    pub glob_start: bool,
    /// Has a quote or an escape (so it is no file-descriptor number before `<`).
    quoted: bool,
}

/// One simple command of a line.
#[derive(Debug, Default)]
pub(super) struct Simple {
    pub words: Vec<Word>,
    /// The files of its `< FILE` redirections.
    pub inputs: Vec<Word>,
    /// Its text in the line.
    pub raw: String,
}

/// The simple commands of `line`, split on `&&`, `||`, `;` and `|`, or why the line needs
/// approval whatever its commands. With `cmd` (cmd.exe), any operator character needs approval
/// and the line is one command split as a program splits its arguments.
pub(super) fn simple_commands(line: &str, cmd: bool) -> std::result::Result<Vec<Simple>, String> {
    if cmd {
        if let Some(op) = find_operator(line, true) {
            return Err(format!("shell operator {op}"));
        }
        let words: Vec<Word> = words_plain(line)
            .into_iter()
            .map(|text| Word {
                glob: text.contains(['*', '?', '[']),
                glob_start: text.starts_with(['*', '?', '[']),
                text,
                quoted: true,
            })
            .collect();
        if words.is_empty() {
            return Err("an empty command".to_string());
        }
        return Ok(vec![Simple { words, inputs: Vec::new(), raw: line.to_string() }]);
    }
    let mut lx = Lexer { line, out: Vec::new(), cur: Simple::default(), word: None, input_next: false, start: 0 };
    let mut chars = line.char_indices().peekable();
    let mut last_op = "";
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        match c {
            ' ' | '\t' => lx.end_word(),
            '\n' | '\r' => return Err("a line break".to_string()),
            '\\' => match chars.next() {
                Some((_, n)) if n != '\n' && n != '\r' => lx.word().push(n, true),
                _ => return Err("a trailing backslash or an escaped line break".to_string()),
            },
            '\'' => {
                lx.word().quoted = true;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, '\n' | '\r')) => return Err("a line break".to_string()),
                        Some((_, n)) => lx.word().text.push(n),
                        None => return Err("an unterminated quote".to_string()),
                    }
                }
            }
            '"' => {
                lx.word().quoted = true;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '$')) => return Err("`$` inside double quotes, which the shell expands".to_string()),
                        Some((_, '`')) => return Err("a command substitution (`` ` ``)".to_string()),
                        Some((_, '\n' | '\r')) => return Err("a line break".to_string()),
                        Some((_, '\\')) => match chars.peek().map(|&(_, n)| n) {
                            Some(e @ ('"' | '\\')) => {
                                chars.next();
                                lx.word().text.push(e);
                            }
                            Some('$' | '`' | '\n' | '\r') | None => {
                                return Err("an escape inside double quotes".to_string())
                            }
                            Some(_) => lx.word().text.push('\\'),
                        },
                        Some((_, n)) => lx.word().text.push(n),
                        None => return Err("an unterminated quote".to_string()),
                    }
                }
            }
            '$' => return Err("`$`, which the shell expands".to_string()),
            '`' => return Err("a command substitution (`` ` ``)".to_string()),
            '(' | ')' => return Err(format!("`{c}` (a subshell or substitution)")),
            '{' | '}' => return Err(format!("an unquoted `{c}`, which bash expands")),
            '>' => return Err("an output redirection (`>`)".to_string()),
            '#' if lx.word.is_none() => return Err("a comment (`#`)".to_string()),
            '<' => {
                if matches!(next, Some('<' | '>' | '&' | '(')) {
                    return Err(format!("`<{}`", next.unwrap_or(' ')));
                }
                if lx.input_next {
                    return Err("`<` without a file".to_string());
                }
                match &lx.word {
                    // `2<file`: the digits name a file descriptor, not an argument.
                    Some(w) if !w.quoted && w.text.chars().all(|d| d.is_ascii_digit()) => lx.word = None,
                    _ => lx.end_word(),
                }
                lx.input_next = true;
            }
            ';' | '&' | '|' => {
                let op = match (c, next) {
                    (';', Some(';')) => return Err("`;;`".to_string()),
                    (';', _) => ";",
                    ('&', Some('&')) => "&&",
                    ('|', Some('|')) => "||",
                    ('|', Some('&')) => return Err("`|&`".to_string()),
                    ('|', _) => "|",
                    _ => return Err("`&`, which runs a command in the background".to_string()),
                };
                if op.len() == 2 {
                    chars.next();
                }
                lx.end_command(i, op)?;
                lx.start = i + op.len();
                last_op = op;
            }
            c => lx.word().push(c, false),
        }
    }
    lx.end_word();
    if lx.cur.words.is_empty() && lx.cur.inputs.is_empty() && !lx.input_next {
        if lx.out.is_empty() {
            return Err("an empty command".to_string());
        }
        if last_op != ";" {
            return Err(format!("`{last_op}` with no command after it"));
        }
        return Ok(lx.out);
    }
    lx.end_command(line.len(), "")?;
    Ok(lx.out)
}

struct Lexer<'a> {
    line: &'a str,
    out: Vec<Simple>,
    cur: Simple,
    word: Option<Word>,
    /// The next word is the file of a `<`.
    input_next: bool,
    /// Where the current simple command starts in `line`.
    start: usize,
}

impl Lexer<'_> {
    fn word(&mut self) -> &mut Word {
        self.word.get_or_insert_with(Word::default)
    }

    fn end_word(&mut self) {
        if let Some(w) = self.word.take() {
            if std::mem::take(&mut self.input_next) {
                self.cur.inputs.push(w);
            } else {
                self.cur.words.push(w);
            }
        }
    }

    fn end_command(&mut self, at: usize, op: &str) -> std::result::Result<(), String> {
        self.end_word();
        if self.input_next {
            return Err("`<` without a file".to_string());
        }
        if self.cur.words.is_empty() {
            return Err(format!("`{op}` with no command before it"));
        }
        let mut part = std::mem::take(&mut self.cur);
        part.raw = self.line[self.start..at].to_string();
        self.out.push(part);
        Ok(())
    }
}

impl Word {
    fn push(&mut self, c: char, escaped: bool) {
        if escaped {
            self.quoted = true;
        } else if matches!(c, '*' | '?' | '[') {
            // `''*` expands like `*`: nothing before the wildcard keeps it from starting with `-`.
            self.glob_start |= self.text.is_empty();
            self.glob = true;
        }
        self.text.push(c);
    }
}
