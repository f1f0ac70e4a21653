//! The shell tool's `allow` and `deny` rules (spec: "The shell tool needs approval by default").
//!
//! - A string pattern matches a line that is exactly the pattern or starts with it followed by a
//!   space. In `allow` it lets the command run only when no argument leaves the working directory
//!   (a `..` segment, `~`, an absolute path — quoted, escaped, inside `--flag=value` or `-o…`, or
//!   a glob that can expand to `..`) and the shell expands nothing in it (`$` outside single
//!   quotes, unquoted `{` or `}`).
//! - A `Rule` without `args` matches exactly its command line; with `args` it matches a line that
//!   starts with the command (exactly, or followed by a space) when `args(rest)` is true.
//! - In `allow`, a line matched only by a string must have no shell operator as the shell reads
//!   it: quoted operators are arguments (API.md, "Quoted operators"); `$(` and backquotes count
//!   inside double quotes; under `cmd.exe` double quotes protect `& | < >`, not `%` or `^`. A
//!   line matched by a rule must not contain an operator character at all.
//! - A regex is tested against the whole line.
//! - `deny` strings and rules are checked against each part of the line (`deny_parts`: the
//!   quote-blind `;`/`&`/`|` split, and every simple command the shell-syntax reader finds), deny
//!   regexes against the whole line. Deny wins over allow.
//! - A line the reader cannot be certain of is allowed by no pattern.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{Code, Error, Result};
use crate::shell::syntax::{Construct, Reading};

/// The `args` check of a `CommandRule`: called with the text after the command and its
/// separating space (`""` when there is none).
#[async_trait]
pub trait ArgsPredicate: Send + Sync {
    async fn test(&self, rest: &str) -> Result<bool>;
}

/// An `args` check written in JavaScript: its result is read with JavaScript's truthiness.
struct CallableArgs(Arc<dyn crate::options::Callable>);

#[async_trait]
impl ArgsPredicate for CallableArgs {
    async fn test(&self, rest: &str) -> Result<bool> {
        Ok(crate::options::truthy(&self.0.call(vec![serde_json::Value::from(rest)]).await?))
    }
}

/// A regular expression tested against the whole command line (a JS `RegExp` in the binding).
pub trait LineMatcher: Send + Sync {
    /// Whether the pattern matches; `None` when it cannot tell (the backtracking engine ran out
    /// of steps). Either way the rules fail closed: such a deny pattern refuses, such an allow
    /// pattern allows nothing.
    fn is_match(&self, line: &str) -> Option<bool>;
    /// How the pattern reads in a message, e.g. `/\bsudo\b/`.
    fn describe(&self) -> String;
}

/// A JavaScript RegExp in an allow or deny list, tested with JavaScript semantics.
impl LineMatcher for crate::search::jsregex::JsRegex {
    fn is_match(&self, line: &str) -> Option<bool> {
        crate::search::jsregex::JsRegex::is_match(self, line).ok()
    }
    fn describe(&self) -> String {
        format!("/{}/{}", self.source(), self.flags())
    }
}

#[derive(Clone)]
pub enum CommandPattern {
    Str(String),
    Rule { command: String, args: Option<Arc<dyn ArgsPredicate>> },
    Regex(Arc<dyn LineMatcher>),
}

impl CommandPattern {
    /// One `allow`/`deny` entry of `createShellTool`'s options: a string, a `{ command, args? }`
    /// rule (args a function) or a RegExp.
    pub fn from_option(v: &serde_json::Value, which: &str, fns: crate::options::Functions<'_>) -> Result<Self> {
        use crate::options::{function_of, regexp_of};
        let bad = |m: String| Error::config(format!("createShellTool: {m}"));
        if let Some(s) = v.as_str() {
            return Ok(CommandPattern::Str(s.to_string()));
        }
        if let Some((source, flags)) = regexp_of(v) {
            let re = crate::search::jsregex::JsRegex::new(source, flags)
                .map_err(|e| bad(format!("{which}: {}", e.message)))?;
            return Ok(CommandPattern::Regex(Arc::new(re)));
        }
        if let Some(command) = v.get("command").and_then(serde_json::Value::as_str) {
            let args = match v.get("args").filter(|a| !a.is_null()) {
                None => None,
                Some(a) => {
                    let f = function_of(a, fns)
                        .ok_or_else(|| bad(format!("{which} rule '{}': args must be a function.", show(command))))?;
                    Some(Arc::new(CallableArgs(f)) as Arc<dyn ArgsPredicate>)
                }
            };
            return Ok(CommandPattern::Rule { command: command.to_string(), args });
        }
        Err(bad(format!("{which} entries must be strings, {{ command, args? }} rules or RegExps.")))
    }

    /// The pattern as a message shows it.
    pub fn describe(&self) -> String {
        match self {
            CommandPattern::Str(s) => format!("'{}'", show(s)),
            CommandPattern::Rule { command, args: None } => format!("'{}'", show(command)),
            CommandPattern::Rule { command, args: Some(_) } => format!("'{} …' (arguments checked)", show(command)),
            CommandPattern::Regex(m) => m.describe(),
        }
    }
}

impl fmt::Debug for CommandPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandPattern::Str(s) => f.debug_tuple("Str").field(s).finish(),
            CommandPattern::Rule { command, args } => f
                .debug_struct("Rule")
                .field("command", command)
                .field("args", &args.as_ref().map(|_| "<predicate>"))
                .finish(),
            CommandPattern::Regex(m) => f.debug_tuple("Regex").field(&m.describe()).finish(),
        }
    }
}

impl From<&str> for CommandPattern {
    fn from(s: &str) -> Self {
        CommandPattern::Str(s.to_string())
    }
}

/// Whether a shell name means `cmd.exe` (where `%` and `^` are operators too). A provider that
/// names no shell is treated as `cmd.exe` on Windows.
pub fn is_cmd_shell(shell: Option<&str>) -> bool {
    match shell {
        Some(s) => {
            let base = s.rsplit(['/', '\\']).next().unwrap_or(s).to_ascii_lowercase();
            base == "cmd.exe" || base == "cmd"
        }
        None => cfg!(windows),
    }
}

/// Text as a message shows it: control characters escaped, long text shortened.
fn show(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i >= 200 {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn refused(message: String) -> Error {
    Error::new(Code::CommandRefused, format!("Command refused: {message}"))
}

/// The text after `pattern` when `line` is exactly it (`""`) or starts with it and a space.
fn prefix_match<'a>(line: &'a str, pattern: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(pattern)?;
    if rest.is_empty() {
        Some("")
    } else {
        rest.strip_prefix(' ')
    }
}

/// The first shell operator in `line`, as a message names it.
fn find_operator(line: &str, cmd: bool) -> Option<&'static str> {
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let op = match c {
            '$' if chars.peek() == Some(&'(') => "'$('",
            ';' => "';'",
            '&' => "'&'",
            '|' => "'|'",
            '`' => "'`'",
            '<' => "'<'",
            '>' => "'>'",
            '\n' => "'\\n' (a newline)",
            '\r' => "'\\r' (a line break)",
            '%' if cmd => "'%'",
            '^' if cmd => "'^'",
            _ => continue,
        };
        return Some(op);
    }
    None
}

/// The first shell operator of a line as `cmd.exe` reads it: `&`, `|`, `<` and `>` outside
/// double quotes, `%` and `^` anywhere (quotes do not protect them), a line break anywhere.
fn cmd_operator(line: &str) -> Option<&'static str> {
    let mut quoted = false;
    for c in line.chars() {
        let op = match c {
            '"' => {
                quoted = !quoted;
                continue;
            }
            '%' => "'%'",
            '^' => "'^'",
            '\n' => "'\\n' (a newline)",
            '\r' => "'\\r' (a line break)",
            '&' if !quoted => "'&'",
            '|' if !quoted => "'|'",
            '<' if !quoted => "'<'",
            '>' if !quoted => "'>'",
            _ => continue,
        };
        return Some(op);
    }
    None
}

/// The first operator of a line as sh reads it (quoted operators are arguments; `$(` and a
/// backquote count inside double quotes too), as a message names it.
fn sh_operator(line: &str, reading: &Reading) -> Option<&'static str> {
    reading.marks.iter().find_map(|m| {
        Some(match &m.what {
            Construct::Operator(";") | Construct::CaseEnd(_) => "';'",
            Construct::Operator("&&") | Construct::Background => "'&'",
            Construct::Operator(_) | Construct::PipeBoth => "'|'",
            Construct::Backtick => "'`'",
            Construct::Substitution => "'$('",
            Construct::Input => "'<'",
            Construct::Redirect(r) if r.starts_with('<') => "'<'",
            Construct::Output | Construct::Redirect(_) => "'>'",
            Construct::Paren('(') => "'('",
            Construct::Paren(_) => "')'",
            Construct::LineBreak if line[m.at..].starts_with('\r') => "'\\r' (a line break)",
            Construct::LineBreak => "'\\n' (a newline)",
            _ => return None,
        })
    })
}

/// The first character of a line that makes the shell expand text: `$` (unquoted or between
/// double quotes) and unquoted braces as sh reads them; under `cmd.exe` any `$`, `{` or `}`.
fn expanding_char(line: &str, reading: &Reading, cmd: bool) -> Option<char> {
    if cmd {
        return line.chars().find(|c| matches!(c, '$' | '{' | '}'));
    }
    reading.marks.iter().find_map(|m| match m.what {
        Construct::Dollar | Construct::DollarInQuotes => Some('$'),
        Construct::Brace(c) => Some(c),
        _ => None,
    })
}

/// Why a string pattern does not allow a line it matches, or `None` when it does. The line is
/// judged as the shell reads it (API.md, "Quoted operators").
fn string_refusal(line: &str, reading: &Reading, pattern: &str, cmd: bool, cwd: Option<&Path>) -> Option<String> {
    let op = if cmd { cmd_operator(line) } else { sh_operator(line, reading) };
    if let Some(op) = op {
        return Some(format!("shell operator {op} is not allowed with pattern '{}'.", show(pattern)));
    }
    if let Some(c) = expanding_char(line, reading, cmd) {
        return Some(format!(
            "`{}` — `{c}` makes the shell expand text the check cannot see. Pattern '{}' allows the command only without `$`, `{{` or `}}` outside single quotes; a CommandRule or an anchored RegExp can allow more.",
            show(line),
            show(pattern)
        ));
    }
    if let Some(leave) = leaving_argument(line, reading, cmd) {
        return Some(format!(
            "`{}` — an argument leaves the working directory ({leave}). Allowed by pattern '{}' only with arguments inside the workspace.",
            show(line),
            show(pattern)
        ));
    }
    if !cmd {
        if let Some(why) = option_glob(reading, cwd) {
            return Some(format!(
                "`{}` — {why}, which the program would read as an option (`--checkpoint-action=…`). Write `./` before the glob (`./*`).",
                show(line)
            ));
        }
    }
    None
}

/// Whether a deny/allow rule matches one line (or part).
async fn rule_matches(line: &str, command: &str, args: &Option<Arc<dyn ArgsPredicate>>) -> Result<bool> {
    match args {
        None => Ok(line == command),
        Some(pred) => match prefix_match(line, command) {
            Some(rest) => pred.test(rest).await,
            None => Ok(false),
        },
    }
}

/// The parts of a line a deny string or rule is checked against, as two readings give them: the
/// line split on `;`, `&`, `|` and line breaks whatever the quotes (the reference's reading), and
/// every simple command the shell-syntax reader finds, at any depth (inside `$(…)`, `(…)` and
/// backticks too), as its text and as its words joined by spaces. A part either reading yields
/// is checked, so `deny` is never weaker than the quote-blind split.
fn deny_parts(line: &str, reading: &Reading) -> Vec<String> {
    let blind: Vec<String> =
        line.split([';', '&', '|', '\n', '\r']).map(str::trim).filter(|p| !p.is_empty()).map(String::from).collect();
    let mut parts = blind.clone();
    let mut add = |c: &crate::shell::syntax::Command| {
        let joined =
            |words: &[crate::shell::syntax::Arg]| words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
        for part in [joined(&c.words), joined(c.program_words()), c.raw.clone()] {
            if !part.is_empty() && !parts.contains(&part) {
                parts.push(part);
            }
        }
    };
    // The reader over the whole line (`reading`), and over each blind part too: where the two
    // disagree on where a here-document ends or what `$'…'` is (dash has none), one of them sees
    // the command.
    reading.commands.iter().for_each(&mut add);
    for part in &blind {
        crate::shell::syntax::read(part).commands.iter().for_each(&mut add);
    }
    parts
}

/// Checks a command line against `deny`, then `allow` (when given). `shell` is the provider's
/// shell name (`None` when it names none).
///
/// `cwd` is the host directory the command runs in, when it is on this machine: globs that start
/// with a wildcard are expanded against it (see `option_glob`).
pub async fn check_command(
    command: &str,
    allow: Option<&[CommandPattern]>,
    deny: &[CommandPattern],
    shell: Option<&str>,
    cwd: Option<&Path>,
) -> Result<()> {
    // One reading of the line serves deny and allow.
    let reading = crate::shell::syntax::read(command);
    if !deny.is_empty() {
        let parts = deny_parts(command, &reading);
        for pattern in deny {
            let hit = match pattern {
                CommandPattern::Regex(m) => match m.is_match(command) {
                    Some(hit) => hit,
                    None => {
                        return Err(refused(format!(
                            "the deny pattern {} ran out of backtracking steps on this command, so it may match; the command is refused to be safe.",
                            pattern.describe()
                        )))
                    }
                },
                CommandPattern::Str(s) => parts.iter().any(|part| prefix_match(part, s).is_some()),
                CommandPattern::Rule { command: c, args } => {
                    let mut hit = false;
                    for part in &parts {
                        if rule_matches(part, c, args).await? {
                            hit = true;
                            break;
                        }
                    }
                    hit
                }
            };
            if hit {
                return Err(refused(format!("it matches the deny pattern {}.", pattern.describe())));
            }
        }
    }

    let Some(allow) = allow else { return Ok(()) };
    let cmd = is_cmd_shell(shell);
    // A line the reader cannot be certain of is allowed by no pattern.
    if let Some(m) = reading.uncertain().filter(|_| !cmd) {
        return Err(refused(format!(
            "`{}` — {}: the shell may read its words otherwise than the check does.",
            show(command),
            m.what.describe()
        )));
    }
    // The reason a pattern that came close gave, reported when none allows the line.
    let mut near_miss: Option<String> = None;
    for pattern in allow {
        match pattern {
            CommandPattern::Regex(m) => {
                if m.is_match(command) == Some(true) {
                    return Ok(());
                }
            }
            CommandPattern::Str(s) => match prefix_match(command, s) {
                Some(_) => match string_refusal(command, &reading, s, cmd, cwd) {
                    None => return Ok(()),
                    Some(why) => {
                        near_miss.get_or_insert(why);
                    }
                },
                None => {
                    if let Some(op) = operator_after_prefix(command, s, cmd) {
                        near_miss
                            .get_or_insert(format!("shell operator {op} is not allowed with pattern '{}'.", show(s)));
                    }
                }
            },
            CommandPattern::Rule { command: c, args } => {
                let rest = match args {
                    None if command == c => Some(""),
                    None => None,
                    Some(_) => prefix_match(command, c),
                };
                match rest {
                    Some(rest) => {
                        if let Some(op) = find_operator(command, cmd) {
                            near_miss
                                .get_or_insert(format!("shell operator {op} is not allowed with rule '{}'.", show(c)));
                            continue;
                        }
                        match args {
                            None => return Ok(()),
                            Some(pred) => {
                                if pred.test(rest).await? {
                                    return Ok(());
                                }
                                near_miss.get_or_insert(format!(
                                    "the arguments `{}` are not accepted by the rule for '{}'.",
                                    show(rest),
                                    show(c)
                                ));
                            }
                        }
                    }
                    None => {
                        if let Some(op) = operator_after_prefix(command, c, cmd) {
                            near_miss
                                .get_or_insert(format!("shell operator {op} is not allowed with rule '{}'.", show(c)));
                        } else if args.is_none() && prefix_match(command, c).is_some() {
                            near_miss.get_or_insert(format!(
                                "`{}` is not on the allow list: the rule '{}' allows exactly that command, with no extra arguments.",
                                show(command),
                                show(c)
                            ));
                        }
                    }
                }
            }
        }
    }
    Err(refused(near_miss.unwrap_or_else(|| {
        let shown: Vec<String> = allow.iter().take(20).map(CommandPattern::describe).collect();
        let more = if allow.len() > 20 { format!(", and {} more", allow.len() - 20) } else { String::new() };
        format!("it is not on the allow list (allowed: {}{more}).", shown.join(", "))
    })))
}

/// An operator right after a pattern (`git status; …` against 'git status'), for the message.
fn operator_after_prefix(line: &str, pattern: &str, cmd: bool) -> Option<&'static str> {
    let rest = line.strip_prefix(pattern)?;
    let first: String = rest.trim_start_matches([' ', '\t']).chars().take(2).collect();
    if first.is_empty() {
        return None;
    }
    let op = find_operator(&first, cmd)?;
    if first.starts_with(['$', ';', '&', '|', '`', '<', '>', '\n', '\r']) || (cmd && first.starts_with(['%', '^'])) {
        Some(op)
    } else {
        None
    }
}

mod paths;
mod read_only;
mod read_only_table;
mod words;

use paths::*;
pub use read_only::ReadOnlyCommands;
use words::*;

#[cfg(test)]
mod read_only_line_tests;
#[cfg(test)]
mod read_only_tests;
#[cfg(test)]
mod tests;
