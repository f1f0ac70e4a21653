//! The plain reading of a command line ([`read`]): the scan of `lex.rs` and `quotes.rs` run over
//! the line's characters, recording every simple command it finishes and every construct whose
//! effect the words do not show.

use super::{Scan, Tok, Word, EXPANSION};

/// A word as the shell passes it to the program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arg {
    /// Quotes and escapes removed; an expansion or substitution stands as `\u{1}` (`${…}` as its
    /// text), so `expanded` words are not what the program gets.
    pub text: String,
    /// Has a quote or an escape.
    pub quoted: bool,
    /// Has an unquoted `*`, `?` or `[`, and starts with one (`''*` starts with one too).
    pub glob: bool,
    pub glob_start: bool,
    pub expanded: bool,
}

/// One simple command.
#[derive(Debug, Clone, Default)]
pub struct Command {
    /// Its words: assignments and the name first, redirections left out.
    pub words: Vec<Arg>,
    /// The files of its `< FILE` redirections.
    pub inputs: Vec<Arg>,
    /// Its text in the line, trimmed.
    pub raw: String,
    /// Inside `$(…)`, `(…)`, `<(…)` or backticks.
    pub nested: bool,
    /// The operator that ends it: `;`, `&&`, `||`, `|`, `&`, `\n`, `(`, `)`, `;;`… (`""` at the
    /// end of its list).
    pub op: &'static str,
}

impl Command {
    /// Its words from the program on: reserved words (`!`, `{`, `if`, …) and assignments before
    /// it left out.
    pub fn program_words(&self) -> &[Arg] {
        let lead = self
            .words
            .iter()
            .take_while(|w| {
                (!w.quoted && super::commands::RESERVED.contains(&w.text.as_str()))
                    || super::commands::assignment(&w.text).is_some()
            })
            .count();
        &self.words[lead..]
    }
}

/// A construct of the line whose effect its words do not show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Construct {
    /// A newline or a carriage return, anywhere.
    LineBreak,
    /// A `\` that ends the line.
    TrailingBackslash,
    /// A quote (`'`, `"`, `$'`) that is not closed.
    Unterminated,
    /// A `$` outside double quotes (an expansion, `$'…'`, `$"…"`).
    Dollar,
    /// A `$` inside double quotes.
    DollarInQuotes,
    Backtick,
    /// `(` or `)`: a subshell, a substitution's or a function's parentheses, an array.
    Paren(char),
    /// An unquoted `{` or `}` (brace expansion, a group).
    Brace(char),
    /// `>`, `>>`, `&>`, `>|`.
    Output,
    /// Another redirection operator: `<<`, `<<<`, `<>`, `<&`, `<(`, `>(`.
    Redirect(&'static str),
    Comment,
    /// `;;`, `;&`, `;;&`.
    CaseEnd(&'static str),
    /// `|&`.
    PipeBoth,
    /// A lone `&`.
    Background,
    /// `;`, `&&`, `||` or `|` between commands.
    Operator(&'static str),
    /// A `<` that reads a file.
    Input,
    /// `$(…)`: a command substitution.
    Substitution,
    /// A reserved word where a command's name stands (`if`, `case`, `[[`, `!`…).
    Compound(String),
    /// A redirection with no file after it.
    MissingFile,
    /// `$'\c…'`, whose meaning the reader does not follow.
    UnknownEscape,
    /// Nested deeper than the reader follows.
    TooDeep,
}

impl Construct {
    /// How a message names it.
    pub fn describe(&self) -> String {
        match self {
            Construct::LineBreak => "a line break".into(),
            Construct::TrailingBackslash => "a trailing backslash".into(),
            Construct::Unterminated => "an unterminated quote".into(),
            Construct::Dollar => "`$`, which the shell expands".into(),
            Construct::DollarInQuotes => "`$` inside double quotes, which the shell expands".into(),
            Construct::Backtick => "a command substitution (`` ` ``)".into(),
            Construct::Paren(c) => format!("`{c}` (a subshell or substitution)"),
            Construct::Brace(c) => format!("an unquoted `{c}`, which bash expands"),
            Construct::Output => "an output redirection (`>`)".into(),
            Construct::Redirect(op) => format!("`{op}`"),
            Construct::Comment => "a comment (`#`)".into(),
            Construct::CaseEnd(op) => format!("`{op}`"),
            Construct::PipeBoth => "`|&`".into(),
            Construct::Background => "`&`, which runs a command in the background".into(),
            Construct::Operator(op) => format!("`{op}`"),
            Construct::Input => "an input redirection (`<`)".into(),
            Construct::Substitution => "a command substitution (`$(`)".into(),
            Construct::Compound(w) => format!("the compound command `{w}`"),
            Construct::MissingFile => "a redirection without a file".into(),
            Construct::UnknownEscape => "an escape in `$'…'` the check does not read".into(),
            Construct::TooDeep => "nesting deeper than the check reads".into(),
        }
    }

    /// Whether the line's words cannot be read with certainty (bash may read them otherwise, or
    /// refuse the line).
    pub fn uncertain(&self) -> bool {
        matches!(
            self,
            Construct::TrailingBackslash | Construct::Unterminated | Construct::UnknownEscape | Construct::TooDeep
        )
    }
}

/// A construct and where it starts in the line (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub at: usize,
    pub what: Construct,
}

/// What [`read`] finds in a line.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Every simple command, in the order they end (an inner command before the one holding it),
    /// empty ones included (`; ls` has one before the `;`).
    pub commands: Vec<Command>,
    /// In line order.
    pub marks: Vec<Mark>,
}

impl Reading {
    /// The first construct that makes the words uncertain.
    pub fn uncertain(&self) -> Option<&Mark> {
        self.marks.iter().find(|m| m.what.uncertain())
    }
}

/// What the scan records while it reads (token indices; [`read`] turns them into byte offsets).
#[derive(Debug, Default)]
pub(super) struct Rec {
    pub marks: Vec<(usize, Construct)>,
    pub commands: Vec<(Command, usize, usize)>,
    /// The bodies of backticks, read again as lines of their own.
    pub backticks: Vec<(usize, usize)>,
    /// How many command lists the scan is in.
    pub lists: usize,
    /// Set by an expansion, for the word being read.
    pub expanded: bool,
}

/// How deep backticks inside backticks are read.
const MAX_BACKTICK_DEPTH: usize = 8;

impl From<&Word> for Arg {
    fn from(w: &Word) -> Arg {
        Arg {
            text: w.text.clone(),
            quoted: w.quoted,
            glob: w.glob,
            glob_start: w.glob_start,
            expanded: w.expanded || w.text.contains(EXPANSION),
        }
    }
}

impl Scan {
    /// Records a construct at the scan's position.
    pub(super) fn mark(&mut self, what: Construct) {
        self.rec.marks.push((self.i, what));
    }

    /// Records a finished simple command of `words`, spanning `start..end`.
    pub(super) fn record(&mut self, words: &[Word], start: usize, end: usize, op: &'static str) {
        let command = Command {
            words: words.iter().filter(|w| !w.redirect).map(Arg::from).collect(),
            inputs: words.iter().filter(|w| w.redirect && w.input).map(Arg::from).collect(),
            raw: String::new(),
            nested: self.rec.lists > 1,
            op,
        };
        self.rec.commands.push((command, start, end));
    }
}

/// Reads `line` as bash does (see the module's doc).
pub fn read(line: &str) -> Reading {
    read_at(line, 0)
}

fn read_at(line: &str, depth: usize) -> Reading {
    let chars: Vec<char> = line.chars().collect();
    let offsets: Vec<usize> = line.char_indices().map(|(b, _)| b).collect();
    let byte = |k: usize| offsets.get(k).copied().unwrap_or(line.len());
    let mut s = Scan { t: chars.iter().map(|&c| Tok::C(c)).collect(), ..Scan::default() };
    // Without placeholders the scan refuses nothing but nesting past its depth.
    if s.list(false, None).and_then(|_| s.heredoc_bodies()).is_err() {
        s.mark(Construct::TooDeep);
    }
    let mut marks: Vec<Mark> = s.rec.marks.iter().map(|(k, what)| Mark { at: byte(*k), what: what.clone() }).collect();
    marks.extend(line.match_indices(['\n', '\r']).map(|(at, _)| Mark { at, what: Construct::LineBreak }));
    let mut commands = Vec::new();
    for (mut c, start, end) in std::mem::take(&mut s.rec.commands) {
        let (a, b) = (byte(start), byte(end.max(start)));
        c.raw = line[a..b].trim_matches([' ', '\t', '\n']).to_string();
        commands.push(c);
    }
    for &(start, end) in &s.rec.backticks {
        if depth >= MAX_BACKTICK_DEPTH {
            marks.push(Mark { at: byte(start), what: Construct::TooDeep });
            continue;
        }
        let body = unescape_backticks(&chars[start..end.max(start)]);
        let inner = read_at(&body, depth + 1);
        commands.extend(inner.commands.into_iter().map(|c| Command { nested: true, ..c }));
        marks.extend(inner.marks.into_iter().filter(|m| m.what.uncertain()).map(|m| Mark { at: byte(start), ..m }));
    }
    marks.sort_by_key(|m| m.at);
    Reading { commands, marks }
}

/// The text inside backticks as the shell runs it: `\\`, `` \` `` and `\$` lose their backslash.
fn unescape_backticks(body: &[char]) -> String {
    let mut out = String::new();
    let mut it = body.iter().peekable();
    while let Some(&c) = it.next() {
        if c == '\\' {
            if let Some(&&n) = it.peek() {
                if matches!(n, '\\' | '`' | '$') {
                    out.push(n);
                    it.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}
