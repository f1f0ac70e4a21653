//! JavaScript regular expressions, run in Rust.
//!
//! The model writes a JavaScript regex (grep's `pattern`, a RegExp in a shell allow list) and
//! expects JavaScript's answers. The `regex` crate cannot parse JavaScript syntax, and its
//! defaults differ (`\w`, `\d` and `\b` are Unicode there, ASCII in JavaScript; `.` and `$`
//! treat line ends differently). So a small hand-written parser reads the JavaScript syntax
//! (including Annex B's lenient forms when neither `u` nor `v` is set) into a tree, and the tree
//! is written back out in the `regex` crate's syntax with every character set spelled out as
//! explicit ranges. Nothing of the crate's own notion of `\w`, `.`, `(?i)` or `(?m)` is used.
//!
//! * Patterns the `regex` crate can express run on it, in linear time.
//! * Backreferences and lookaround run on `fancy-regex`, a backtracking engine, with a step
//!   limit: past it, [`JsRegex::is_match`] returns [`Slow`] instead of running on.
//! * A group repeated more than once (`*`, `+`, `{n,}`, `{n,m}` or `{n}` with a bound above 1)
//!   that contains an unbounded repetition (`*`, `+`, `{n,}`) at any depth is refused, on both
//!   engines: `(a+)+`, `(\w+\s*)*`, `(?:x+y){2}`. `(a|b)*`, `(ab)+`, `a+b*`, `(a+)?` and `(a?)+`
//!   are allowed (a bounded inner repetition cannot blow up exponentially).
//!
//! Case-insensitive matching (`i`) is done here, not by the crate: every literal and set is
//! closed under JavaScript's canonicalization (`toUpperCase` without `u`, simple case folding
//! with `u`/`v`), so `/\w/i` stays ASCII while `/\w/iu` also matches `ſ` and `K` (U+212A).
//!
//! Without `u`/`v`, JavaScript sees a string as UTF-16 code units: `/^.$/` does not match an
//! emoji, `/^..$/` does, `/[\uD800-\uDFFF]/` finds astral characters. When a pattern can match a
//! lone surrogate (`.`, a negated class, a surrogate escape), a text with astral characters is
//! re-encoded for the match: each surrogate unit becomes a private character `U+100000 + unit`
//! that the translated pattern names, so such patterns keep JavaScript's answers.
//!
//! Known deviations, all rare: case-insensitive backreferences use fancy-regex's Unicode
//! folding; a backreference to a group that matched in an earlier iteration of a loop keeps that
//! value (JavaScript resets it each iteration); backreferences inside lookbehind are refused;
//! Unicode property names are matched loosely (`\p{letter}` is accepted although JavaScript
//! wants `\p{Letter}`) and follow the `regex` crate's Unicode version; `v`-mode properties of
//! strings (`\p{RGI_Emoji}`) are refused. The `y` flag anchors the match at the start of the
//! text, as `RegExp.prototype.test` does on a fresh sticky RegExp; `g` and `d` change nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use crate::error::{Code, Error, Result};

/// Steps fancy-regex may take for one `is_match` before giving up with [`Slow`].
pub const BACKTRACK_LIMIT: usize = 1_000_000;

/// How deep groups and classes may nest in a pattern.
const MAX_DEPTH: usize = 128;

const MAX_CP: u32 = 0x10FFFF;
const MAX_UNIT: u32 = 0xFFFF;
const SURR_LO: u32 = 0xD800;
const SURR_HI: u32 = 0xDFFF;
/// In a re-encoded text, the surrogate unit `u` is the character `SURR_BASE + u`.
const SURR_BASE: u32 = 0x100000;

/// The JavaScript line terminators, as the inside of a `regex` class.
const TERMINATORS: &str = r"\n\r\u{2028}\u{2029}";

/// The backtracking engine hit its step limit: the pattern is too slow on this text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slow;

impl fmt::Display for Slow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the regular expression took too many backtracking steps")
    }
}

impl std::error::Error for Slow {}

/// A compiled JavaScript regular expression. `Send + Sync`; share it with an `Arc`.
pub struct JsRegex {
    source: String,
    flags: String,
    engine: Engine,
    /// Without `u`/`v`, when the pattern can match a lone surrogate: texts with astral
    /// characters are re-encoded as UTF-16 units before matching.
    utf16: bool,
    prefilter: Option<regex::bytes::Regex>,
    /// The prefilter finds exactly the lines the pattern matches (see `prefilter_is_exact`).
    exact: bool,
}

enum Engine {
    Linear(regex::Regex),
    Backtracking(fancy_regex::Regex),
}

impl fmt::Debug for JsRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsRegex")
            .field("source", &self.source)
            .field("flags", &self.flags)
            .field("translated", &self.translated())
            .field("backtracking", &self.is_backtracking())
            .field("utf16", &self.utf16)
            .field("prefilter", &self.prefilter.as_ref().map(|r| r.as_str()))
            .field("exact", &self.exact)
            .finish()
    }
}

impl JsRegex {
    /// Compiles `pattern` with JavaScript `flags` (`d g i m s u v y`; `g` and `d` change nothing,
    /// `y` anchors at the start of the text). An invalid pattern, or one with nested
    /// repetition, is a [`Code::InvalidPattern`] error whose message says what to change.
    pub fn new(pattern: &str, flags: &str) -> Result<JsRegex> {
        Self::build(pattern, flags, false)
    }

    /// As `new`, for a regex whose match positions matter (`for_each_start`), not only whether it
    /// matches: with `m`, `^` and `$` are then zero-width lookarounds (the backtracking engine)
    /// rather than a terminator the match consumes.
    pub fn for_positions(pattern: &str, flags: &str) -> Result<JsRegex> {
        Self::build(pattern, flags, true)
    }

    fn build(pattern: &str, flags: &str, positional: bool) -> Result<JsRegex> {
        let f = Flags::parse(pattern, flags)?;
        let ast = Parser::parse(pattern, flags, f)?;
        check_nested_repetition(&ast.root).map_err(|()| {
            Error::new(
                Code::InvalidPattern,
                format!(
                    "Refused regular expression {}: a repeated group contains another repetition \
                     (nested repetition can take exponential time). Rewrite it without the outer \
                     repetition.",
                    show(pattern, flags)
                ),
            )
        })?;
        let utf16 = !f.unicode() && ast.can_match_surrogate;
        // With `y` the match starts at 0, so a leading `^` cannot consume a terminator before it.
        let backtracking = needs_backtracking(&ast.root, !f.y, true, f) || (positional && f.m);

        let mut em = Emitter { f, utf16, backtracking, prefilter: false, out: String::new() };
        if f.y {
            em.out.push_str(r"\A(?:");
        }
        em.node(&ast.root, !f.y, true);
        if f.y {
            em.out.push(')');
        }
        let translated = em.out;

        let too_big = |what: &str| {
            Error::new(
                Code::InvalidPattern,
                format!(
                    "Refused regular expression {}: it is too large to compile ({what}). Use \
                     smaller repetition counts or fewer alternatives.",
                    show(pattern, flags)
                ),
            )
        };
        let unsupported = |why: String| {
            Error::new(Code::InvalidPattern, format!("Unsupported regular expression {}: {why}", show(pattern, flags)))
        };
        let engine = if backtracking {
            let re =
                fancy_regex::RegexBuilder::new(&translated).backtrack_limit(BACKTRACK_LIMIT).build().map_err(|e| {
                    match e {
                        fancy_regex::Error::CompileError(ref c)
                            if matches!(**c, fancy_regex::CompileError::PatternTooComplex)
                                || c.to_string().contains("size limit") =>
                        {
                            too_big("size limit")
                        }
                        other => unsupported(other.to_string()),
                    }
                })?;
            Engine::Backtracking(re)
        } else {
            let re = regex::RegexBuilder::new(&translated).nest_limit(1000).build().map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => too_big("size limit"),
                other => unsupported(other.to_string()),
            })?;
            Engine::Linear(re)
        };

        let prefilter = prefilter::build(&ast, f, utf16);
        let exact = prefilter.is_some() && !backtracking && !utf16 && !f.y && prefilter::is_exact(&ast.root);

        Ok(JsRegex { source: pattern.to_string(), flags: flags.to_string(), engine, utf16, prefilter, exact })
    }

    /// Tests one piece of text (a line, or a whole command line) with JavaScript semantics.
    /// Only the backtracking engine can return [`Slow`].
    pub fn is_match(&self, text: &str) -> std::result::Result<bool, Slow> {
        if self.utf16 && has_astral(text) {
            thread_local! {
                static UNITS: RefCell<String> = const { RefCell::new(String::new()) };
            }
            UNITS.with(|buf| match buf.try_borrow_mut() {
                Ok(mut buf) => {
                    to_units(text, &mut buf);
                    let r = self.run(&buf);
                    if buf.capacity() > 1 << 20 {
                        *buf = String::new();
                    }
                    r
                }
                Err(_) => {
                    let mut own = String::new();
                    to_units(text, &mut own);
                    self.run(&own)
                }
            })
        } else {
            self.run(text)
        }
    }

    /// Calls `each` with the byte offset (in `text`) where each successive match starts, until it
    /// returns false or the matches end (compile with `for_positions` when `m` is set). Only the
    /// backtracking engine can return [`Slow`].
    pub fn for_each_start(&self, text: &str, mut each: impl FnMut(usize) -> bool) -> std::result::Result<(), Slow> {
        if self.utf16 && has_astral(text) {
            // Matched on the text as UTF-16 units; each start is mapped back to `text`.
            let mut units = String::new();
            to_units(text, &mut units);
            let mut back = utf16::OffsetsBack::new(text);
            return self.starts(&units, |at| each(back.original(at)));
        }
        self.starts(text, each)
    }

    fn starts(&self, text: &str, mut each: impl FnMut(usize) -> bool) -> std::result::Result<(), Slow> {
        match &self.engine {
            Engine::Linear(re) => {
                for m in re.find_iter(text) {
                    if !each(m.start()) {
                        break;
                    }
                }
            }
            Engine::Backtracking(re) => {
                for m in re.find_iter(text) {
                    if !each(m.map_err(|_| Slow)?.start()) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn run(&self, text: &str) -> std::result::Result<bool, Slow> {
        match &self.engine {
            Engine::Linear(re) => Ok(re.is_match(text)),
            Engine::Backtracking(re) => re.is_match(text).map_err(|_| Slow),
        }
    }

    /// Whether this runs on the backtracking engine (backreferences, lookaround, and a few
    /// anchors the linear engine cannot place: `^`/`$` inside a pattern with `m`, `\b` with
    /// both `u` and `i`).
    pub fn is_backtracking(&self) -> bool {
        matches!(self.engine, Engine::Backtracking(_))
    }

    /// A whole-buffer pre-filter for grep: a `regex::bytes::Regex` to run over a whole file's
    /// bytes. If it finds no match anywhere in them, no line of the file (lines split at `\n`,
    /// with or without their `\r`, each cut to a prefix such as its first 2,000 characters, and
    /// invalid UTF-8 decoded lossily to U+FFFD or not) can match. Every match it reports lies
    /// within one line. It over-approximates: anchors and lookaround whose meaning changes when
    /// a line is cut (`$`, `\b`, `\B`, lookaround) are left out of it and a backreference
    /// becomes "anything on the line", so a line it finds still has to be tested with
    /// [`JsRegex::is_match`]. `None` when it would match everywhere (the pattern can match an
    /// empty string).
    pub fn prefilter(&self) -> Option<&regex::bytes::Regex> {
        self.prefilter.as_ref()
    }

    /// Whether a prefilter match is a match of the pattern on the line it lies in, when that
    /// line (without its `\r`) is valid UTF-8, no longer than the cut grep applies, and the
    /// match ends before the line's `\r`. True for patterns of characters, classes, groups,
    /// alternation and repetition on the linear engine, with no class that holds `\n` or U+FFFD:
    /// nothing is widened then, so the prefilter is the pattern itself over bytes. grep then
    /// counts a line without running the pattern again.
    pub fn prefilter_is_exact(&self) -> bool {
        self.exact
    }

    /// The pattern as given.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The flags as given.
    pub fn flags(&self) -> &str {
        &self.flags
    }

    /// The pattern in the syntax of the engine that runs it (for debugging).
    pub fn translated(&self) -> &str {
        match &self.engine {
            Engine::Linear(re) => re.as_str(),
            Engine::Backtracking(re) => re.as_str(),
        }
    }
}

/// `/pattern/flags`, for messages.
mod ast;
mod emit;
mod flags;
mod fold;
mod parse;
mod prefilter;
mod sets;
mod utf16;

use ast::*;
use emit::*;
use flags::*;
use fold::*;
use parse::*;
use sets::*;
use utf16::*;

#[cfg(test)]
mod tests;
