//! Where a placeholder may stand in a `shell_template`, found when the spec is defined.
//!
//! A value is quoted by `shlex.quote` rules, which makes it one literal word only where bash
//! reads quotes as quotes: in an unquoted position of a command. Elsewhere the quoting is not
//! read, or the word is read again as code: between quotes (`"{x}"` puts `'$(id)'` inside double
//! quotes, where `$(id)` runs), in a here-document body, in a comment (a line break in the value
//! ends it), inside backticks or `${…}`, right after `\` or `$`, and in arithmetic (`$((…))`,
//! `((…))`, `let`, `[[ … -eq … ]]`, array subscripts), where bash evaluates `a[$(id)]` in a
//! value. So the template is lexed as bash lexes it and a placeholder in any of those places
//! makes the spec invalid, naming the placeholder ([`Refusal::message`]). A placeholder inside
//! `$(…)` or `<(…)` that is itself unquoted is a word of that inner command, and stays allowed.
//!
//! Both here-document forms are refused: with an unquoted delimiter bash expands the body, and
//! with a quoted one (`<<'EOF'`) the value's quotes would be kept as text and a line of the value
//! equal to the delimiter would end the document early, the rest running as commands. A
//! here-string (`<<< {x}`) is the way to feed a value on stdin.
//!
//! A value can also reach arithmetic through a variable (`n={x}; echo $((n))`). The scan follows
//! the plain cases: a variable assigned from a placeholder (`n={x}`, `local n={x}`, `for n in
//! {x}`, `read n <<< {x}`, `n=$(… {x} …)`) may not be named in an arithmetic context or be
//! declared an integer (`declare -i`), and positional parameters may not be named in one when the
//! template has placeholders. What `read`, `mapfile`, `printf -v`, `getopts` set counts as holding
//! a value (it may come from `echo {x} | while read n`), and so does the name in `${!v}`. Values
//! that travel further (through files, the environment of a child shell, another function's
//! variables) are out of the reach of a template check.
//!
//! The lexer is the shell-syntax module's (`lex.rs`, `quotes.rs`); the command-level rules are in
//! `commands.rs`.

use super::{Scan, Tok};

/// Why a placeholder's place is refused; [`Refusal::message`] says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    Quotes,
    HeredocBody,
    QuotedHeredocBody,
    HeredocDelimiter,
    /// The context, e.g. `$((…))`.
    Arithmetic(String),
    ParamExpansion,
    Backticks,
    AfterBackslash,
    AfterDollar,
    Comment,
    /// The command that takes a variable name there.
    VariableName(String),
    /// The command that runs its arguments.
    Evaluated(String),
    /// The variable (or `$1`) that carries the value into arithmetic.
    ReachesArithmetic(String),
    /// The integer variable the value is assigned to.
    IntegerVariable(String),
    /// Quotes and expansions nested deeper than [`MAX_DEPTH`] (the scan recurses; no real
    /// template nests so deep).
    TooDeep,
}

/// How deep quotes, substitutions and expansions may nest in a template.
pub const MAX_DEPTH: usize = 64;

/// A placeholder refused where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub why: Why,
}

impl Refusal {
    pub(super) fn new(field: &str, why: Why) -> Refusal {
        Refusal { field: field.to_string(), why }
    }

    pub fn message(&self) -> String {
        let x = format!("{{{}}}", self.field);
        let code = "and that context runs values as code";
        match &self.why {
            Why::Quotes => format!("write {x} without quotes: values are quoted for you."),
            Why::Arithmetic(ctx) => format!(
                "{x} is in an arithmetic context ({ctx}), {code} (a value like a[$(id)] runs id)."
            ),
            Why::HeredocBody => format!(
                "{x} is in the body of a here-document whose delimiter is unquoted, {code} ($(…) in a value runs); feed it through a here-string instead (<<< {x})."
            ),
            Why::QuotedHeredocBody => format!(
                "{x} is in the body of a here-document, where its quotes stay as text and a line of the value equal to the delimiter would end the document and run the rest as code; feed it through a here-string instead (<<< {x})."
            ),
            Why::HeredocDelimiter => format!("{x} is a here-document delimiter; write the delimiter in the template."),
            Why::ParamExpansion => format!(
                "{x} is inside ${{…}}, whose subscripts and offsets run values as code; assign it to a variable first (v={x})."
            ),
            Why::Backticks => format!(
                "{x} is inside backticks, which end at the first backquote of a value and run the rest as code; write $(…) instead."
            ),
            Why::AfterBackslash => format!(
                "{x} follows a backslash, which would cancel the value's opening quote and run the rest as code."
            ),
            Why::AfterDollar => format!(
                "{x} follows a $ (or $name), which would make the value part of an expansion ($'…', $name…) and run it as code."
            ),
            Why::Comment => format!(
                "{x} is in a comment, where a line break in the value would end the comment and run the rest as code."
            ),
            Why::VariableName(cmd) => format!(
                "{x} is a variable name for {cmd}, and a name's subscript (a[$(id)]) runs values as code."
            ),
            Why::Evaluated(cmd) => format!("{x} is an argument of {cmd}, which runs its arguments as code."),
            Why::ReachesArithmetic(var) => format!(
                "{x} reaches an arithmetic context through {var}, {code} (a value like a[$(id)] runs id)."
            ),
            Why::TooDeep => format!("the template nests quotes and expansions more than {MAX_DEPTH} deep."),
            Why::IntegerVariable(var) => format!(
                "{x} is assigned to {var}, an integer variable (declare -i), {code} (a value like a[$(id)] runs id)."
            ),
        }
    }
}

/// Checks a shell template: `Err` names the first placeholder in a place where its quoting would
/// not hold.
pub fn check(t: Vec<Tok>) -> Result<(), Refusal> {
    let mut s = Scan { t, ..Scan::default() };
    s.list(false, None)?;
    s.heredoc_bodies()?;
    s.finish()
}
