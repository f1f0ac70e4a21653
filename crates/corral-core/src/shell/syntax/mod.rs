//! The one reader of a command line: bash's syntax, as bash lexes it. Every rule that looks at a
//! command line consumes what this module reads: the shell tool's `allow` and `deny`
//! (`shell::rules`), `readOnlyCommands`' table, and the `shell_template` check of workspace tools
//! (`placeholders.rs`), which runs the same scan over a template whose placeholders stand as
//! [`Tok::F`].
//!
//! - `lex.rs`: command lists, words and operators; `quotes.rs`: quotes, `$'…'`, expansions,
//!   comments, here-documents; `commands.rs`: the builtins a template check knows.
//! - `reading.rs`: [`read`], the plain reading of a line — its simple commands (at any depth: in
//!   `$(…)`, `(…)`, `<(…)` and backticks too), each one's words with quotes removed, and the
//!   constructs whose effect the words alone do not show (expansions, redirections, comments…),
//!   each marked where it stands. A construct the reader cannot be certain of (an unterminated
//!   quote, a trailing backslash) is marked as such.
//!
//! `cmd.exe` has a dialect of its own; `shell::rules::words` reads it.

mod commands;
mod lex;
pub mod placeholders;
mod quotes;
mod reading;
// The differential test runs bash and dash.
#[cfg(all(test, unix))]
mod tests;

pub use placeholders::{check, Refusal, Why, MAX_DEPTH};
pub use reading::{read, Arg, Command, Construct, Mark, Reading};

/// A line as characters, and a template's placeholders among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    C(char),
    F(String),
}

/// Stands in a word's text for an expansion, and for a placeholder.
const EXPANSION: char = '\u{1}';
const FIELD: char = '\u{2}';

type R<T = ()> = Result<T, Refusal>;

/// A here-document waiting for its body (which starts at the next line).
struct Heredoc {
    delimiter: String,
    strip_tabs: bool,
    quoted: bool,
}

#[derive(Default)]
struct Scan {
    t: Vec<Tok>,
    i: usize,
    heredocs: Vec<Heredoc>,
    arith_depth: usize,
    /// How deep the scan is in nested lists, quotes and expansions.
    depth: usize,
    /// Variables assigned from a placeholder: (variable, placeholder).
    tainted: Vec<(String, String)>,
    /// Variables set by `read`, `mapfile`, `printf -v`…: their values may come from a placeholder.
    read_vars: Vec<String>,
    /// Variables declared integers.
    int_vars: Vec<String>,
    /// The text of every arithmetic context, checked last for tainted variables.
    arith: Vec<String>,
    first_field: Option<String>,
    /// What a plain reading of the line records (`reading.rs`).
    rec: reading::Rec,
}

/// A word as the command checks see it: its text with quotes removed (an expansion is
/// [`EXPANSION`], a placeholder [`FIELD`]) and its placeholders with their offsets in that text
/// (`None` for one inside an expansion of the word).
#[derive(Debug, Default)]
struct Word {
    pub text: String,
    pub fields: Vec<(String, Option<usize>)>,
    pub quoted: bool,
    pub redirect: bool,
    /// Has an unquoted `*`, `?` or `[` (which sh expands to file names), and starts with one.
    pub glob: bool,
    pub glob_start: bool,
    /// Holds an expansion or a substitution: its text is not what the program gets.
    pub expanded: bool,
    /// The file of a `<` redirection.
    pub input: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Subject,
    In,
    Pattern,
    Body,
}

/// One command list being scanned: the top, or the inside of `$(…)`, `(…)`, `<(…)`, `a=(…)`.
struct List {
    /// Set inside quotes, `${…}`, backticks or arithmetic: any placeholder is refused so.
    strict: Option<Why>,
    words: Vec<Word>,
    cur: Word,
    in_word: bool,
    redirect_next: bool,
    /// Where `[[` stands in `words`, while in a conditional expression.
    cond: Option<usize>,
    case: Vec<Case>,
    fields: Vec<String>,
    /// The next word is the file of a `<`.
    input_next: bool,
    /// Where the current simple command starts.
    start: usize,
}

impl List {
    fn push(&mut self, c: char) {
        self.cur.text.push(c);
        self.in_word = true;
    }
}

fn refuse(field: &str, strict: &Option<Why>, why: Why) -> Refusal {
    Refusal::new(field, strict.clone().unwrap_or(why))
}

impl Scan {
    fn c(&self, k: usize) -> Option<char> {
        match self.t.get(self.i + k) {
            Some(Tok::C(c)) => Some(*c),
            _ => None,
        }
    }

    fn tok(&self) -> Option<Tok> {
        self.t.get(self.i).cloned()
    }

    /// Runs `scan` one nesting level deeper; refused past [`MAX_DEPTH`].
    fn nested<T>(&mut self, scan: impl FnOnce(&mut Scan) -> R<T>) -> R<T> {
        if self.depth >= MAX_DEPTH {
            return Err(Refusal::new("", Why::TooDeep));
        }
        self.depth += 1;
        let r = scan(self);
        self.depth -= 1;
        r
    }
}
