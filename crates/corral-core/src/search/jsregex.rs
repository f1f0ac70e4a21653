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
            .finish()
    }
}

impl JsRegex {
    /// Compiles `pattern` with JavaScript `flags` (`d g i m s u v y`; `g` and `d` change nothing,
    /// `y` anchors at the start of the text). An invalid pattern, or one with nested
    /// repetition, is a [`Code::InvalidPattern`] error whose message says what to change.
    pub fn new(pattern: &str, flags: &str) -> Result<JsRegex> {
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
        let backtracking = needs_backtracking(&ast.root, !f.y, true, f);

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

        let mut pem = Emitter { f, utf16, backtracking: false, prefilter: true, out: String::new() };
        pem.node(&ast.root, true, true);
        let prefilter =
            regex::bytes::RegexBuilder::new(&pem.out).nest_limit(1000).build().ok().filter(|re| !re.is_match(b""));

        Ok(JsRegex { source: pattern.to_string(), flags: flags.to_string(), engine, utf16, prefilter })
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
fn show(pattern: &str, flags: &str) -> String {
    format!("/{pattern}/{flags}")
}

/// Whether `text` has a character outside the BMP (a 4-byte UTF-8 sequence).
fn has_astral(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |acc, &b| acc | (b >= 0xF0)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b >= 0xF0)
}

/// Re-encodes `text` so that each astral character becomes its two UTF-16 units, each unit `u`
/// written as the character `SURR_BASE + u`.
fn to_units(text: &str, out: &mut String) {
    out.clear();
    out.reserve(text.len() + 8);
    for c in text.chars() {
        let cp = c as u32;
        if cp <= MAX_UNIT {
            out.push(c);
        } else {
            let v = cp - 0x10000;
            let hi = SURR_LO + (v >> 10);
            let lo = 0xDC00 + (v & 0x3FF);
            out.push(char::from_u32(SURR_BASE + hi).expect("private-use plane"));
            out.push(char::from_u32(SURR_BASE + lo).expect("private-use plane"));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Flags

#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    i: bool,
    m: bool,
    s: bool,
    u: bool,
    v: bool,
    y: bool,
}

impl Flags {
    fn parse(pattern: &str, flags: &str) -> Result<Flags> {
        let mut f = Flags::default();
        let mut seen = String::new();
        for c in flags.chars() {
            let bad = || {
                Error::new(
                    Code::InvalidPattern,
                    format!(
                        "Invalid regular expression flags '{flags}' for /{pattern}/: use each of \
                         d, g, i, m, s, u, v, y at most once, and not both u and v."
                    ),
                )
            };
            if seen.contains(c) {
                return Err(bad());
            }
            seen.push(c);
            match c {
                'i' => f.i = true,
                'm' => f.m = true,
                's' => f.s = true,
                'u' => f.u = true,
                'v' => f.v = true,
                'y' => f.y = true,
                'g' | 'd' => {}
                _ => return Err(bad()),
            }
        }
        if f.u && f.v {
            return Err(Error::new(
                Code::InvalidPattern,
                format!(
                    "Invalid regular expression flags '{flags}' for /{pattern}/: u and v cannot \
                     be used together."
                ),
            ));
        }
        Ok(f)
    }

    /// `u` or `v`: the pattern is code points, with strict syntax.
    fn unicode(&self) -> bool {
        self.u || self.v
    }

    /// The largest character of the pattern's alphabet (code units without `u`/`v`).
    fn max(&self) -> u32 {
        if self.unicode() {
            MAX_CP
        } else {
            MAX_UNIT
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Character sets: sorted, disjoint, non-adjacent inclusive ranges of u32 (code points, or
// UTF-16 code units without `u`/`v`; lone surrogates included).

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Set {
    r: Vec<(u32, u32)>,
}

impl Set {
    fn single(c: u32) -> Set {
        Set { r: vec![(c, c)] }
    }

    fn range(lo: u32, hi: u32) -> Set {
        Set { r: vec![(lo, hi)] }
    }

    fn from_ranges(mut v: Vec<(u32, u32)>) -> Set {
        v.sort_unstable();
        let mut r: Vec<(u32, u32)> = Vec::with_capacity(v.len());
        for (lo, hi) in v {
            if let Some(last) = r.last_mut() {
                if lo <= last.1.saturating_add(1) {
                    last.1 = last.1.max(hi);
                    continue;
                }
            }
            r.push((lo, hi));
        }
        Set { r }
    }

    fn union(&self, o: &Set) -> Set {
        let mut v = self.r.clone();
        v.extend_from_slice(&o.r);
        Set::from_ranges(v)
    }

    fn add(&mut self, o: &Set) {
        *self = self.union(o);
    }

    fn complement(&self, max: u32) -> Set {
        let mut r = Vec::with_capacity(self.r.len() + 1);
        let mut next = 0u32;
        for &(lo, hi) in &self.r {
            if lo > max {
                break;
            }
            if lo > next {
                r.push((next, lo - 1));
            }
            next = hi.saturating_add(1);
        }
        if next <= max {
            r.push((next, max));
        }
        Set { r }
    }

    fn intersect(&self, o: &Set) -> Set {
        let (mut i, mut j) = (0, 0);
        let mut r = Vec::new();
        while i < self.r.len() && j < o.r.len() {
            let (a0, a1) = self.r[i];
            let (b0, b1) = o.r[j];
            let lo = a0.max(b0);
            let hi = a1.min(b1);
            if lo <= hi {
                r.push((lo, hi));
            }
            if a1 < b1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Set { r }
    }

    fn difference(&self, o: &Set) -> Set {
        self.intersect(&o.complement(MAX_CP))
    }

    fn contains(&self, c: u32) -> bool {
        self.r
            .binary_search_by(|&(lo, hi)| {
                if hi < c {
                    std::cmp::Ordering::Less
                } else if lo > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }

    fn intersects(&self, lo: u32, hi: u32) -> bool {
        self.r.iter().any(|&(a, b)| a <= hi && b >= lo)
    }

    fn is_empty(&self) -> bool {
        self.r.is_empty()
    }
}

fn digit_set() -> Set {
    Set::range('0' as u32, '9' as u32)
}

fn word_set() -> Set {
    Set::from_ranges(vec![(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
}

/// JavaScript's `\s`: WhiteSpace and LineTerminator.
fn space_set() -> Set {
    Set::from_ranges(vec![
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ])
}

fn terminator_set() -> Set {
    Set::from_ranges(vec![(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
}

// ---------------------------------------------------------------------------------------------
// Case folding

/// JavaScript's Canonicalize without `u`/`v`: `toUpperCase` if it gives one unit, except that a
/// non-ASCII unit never maps to ASCII.
fn canon_legacy(c: u32) -> u32 {
    let Some(ch) = char::from_u32(c) else { return c };
    let mut up = ch.to_uppercase();
    let (Some(first), None) = (up.next(), up.next()) else { return c };
    let u = first as u32;
    if (c >= 128 && u < 128) || u > MAX_UNIT {
        c
    } else {
        u
    }
}

/// The BMP units that share their canonical form with another unit, and those groups.
struct LegacyFold {
    /// (unit, group index), sorted by unit.
    units: Vec<(u32, usize)>,
    groups: Vec<Vec<u32>>,
}

fn legacy_fold() -> &'static LegacyFold {
    static TABLE: OnceLock<LegacyFold> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut by_canon: HashMap<u32, Vec<u32>> = HashMap::new();
        for c in 0..=MAX_UNIT {
            if (SURR_LO..=SURR_HI).contains(&c) {
                continue;
            }
            by_canon.entry(canon_legacy(c)).or_default().push(c);
        }
        let mut groups: Vec<Vec<u32>> = by_canon.into_values().filter(|g| g.len() > 1).collect();
        groups.sort();
        let mut units = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            for &c in g {
                units.push((c, gi));
            }
        }
        units.sort_unstable();
        LegacyFold { units, groups }
    })
}

/// `s` closed under the case equivalence of the mode: every character that canonicalizes like
/// a member of `s` is added.
fn case_closure(s: &Set, f: Flags) -> Set {
    if f.unicode() {
        use regex_syntax::hir::{ClassUnicode, ClassUnicodeRange};
        let scalars = s.difference(&Set::range(SURR_LO, SURR_HI));
        let surrogates = s.intersect(&Set::range(SURR_LO, SURR_HI));
        let mut cls = ClassUnicode::new(scalars.r.iter().map(|&(lo, hi)| {
            ClassUnicodeRange::new(char::from_u32(lo).expect("scalar value"), char::from_u32(hi).expect("scalar value"))
        }));
        cls.case_fold_simple();
        let folded = Set::from_ranges(cls.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect());
        folded.union(&surrogates)
    } else {
        let table = legacy_fold();
        let mut extra = Vec::new();
        for &(c, gi) in &table.units {
            if s.contains(c) {
                extra.extend(table.groups[gi].iter().map(|&m| (m, m)));
            }
        }
        if extra.is_empty() {
            s.clone()
        } else {
            s.union(&Set::from_ranges(extra))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tree

#[derive(Clone, Debug)]
enum Node {
    Empty,
    /// One character from the set (already closed under case folding with `i`).
    Set(Set),
    /// `^`
    Start,
    /// `$`
    End,
    /// `\b` (true) or `\B` (false).
    WordBoundary(bool),
    Look {
        behind: bool,
        negate: bool,
        node: Box<Node>,
    },
    /// A backreference to a group that may have matched before it.
    Backref(usize),
    /// A capturing (`Some(index)`) or non-capturing group.
    Group(Box<Node>, Option<usize>),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
}

struct Ast {
    root: Node,
    /// Some set in the pattern contains a surrogate unit or code point.
    can_match_surrogate: bool,
}

fn children(n: &Node) -> &[Node] {
    match n {
        Node::Look { node, .. } | Node::Group(node, _) | Node::Repeat { node, .. } => std::slice::from_ref(node),
        Node::Concat(v) | Node::Alt(v) => v,
        _ => &[],
    }
}

/// Matches only the empty string and captures nothing.
fn is_empty(n: &Node) -> bool {
    match n {
        Node::Empty => true,
        Node::Group(inner, None) => is_empty(inner),
        Node::Concat(v) => v.iter().all(is_empty),
        _ => false,
    }
}

fn has_unbounded(n: &Node) -> bool {
    matches!(n, Node::Repeat { max: None, .. }) || children(n).iter().any(has_unbounded)
}

/// Err when a group repeated more than once contains an unbounded repetition.
fn check_nested_repetition(n: &Node) -> std::result::Result<(), ()> {
    if let Node::Repeat { node, max, .. } = n {
        if max.is_none_or(|m| m > 1) && has_unbounded(node) {
            return Err(());
        }
    }
    children(n).iter().try_for_each(check_nested_repetition)
}

/// Whether the linear engine cannot express the tree. `lead`/`trail`: nothing in the pattern
/// can come before / after this node in a match, so a `^`/`$` with `m` there may consume the
/// line terminator next to it instead of looking at it.
fn needs_backtracking(n: &Node, lead: bool, trail: bool, f: Flags) -> bool {
    match n {
        Node::Empty | Node::Set(_) => false,
        Node::Start => f.m && !lead,
        Node::End => f.m && !trail,
        // With `u` and `i`, JavaScript's word characters include U+017F and U+212A.
        Node::WordBoundary(_) => f.unicode() && f.i,
        Node::Look { .. } | Node::Backref(_) => true,
        Node::Group(node, _) => needs_backtracking(node, lead, trail, f),
        Node::Alt(v) => v.iter().any(|c| needs_backtracking(c, lead, trail, f)),
        Node::Concat(v) => {
            v.iter().enumerate().any(|(k, c)| needs_backtracking(c, lead && k == 0, trail && k + 1 == v.len(), f))
        }
        Node::Repeat { node, .. } => needs_backtracking(node, false, false, f),
    }
}

// ---------------------------------------------------------------------------------------------
// The parser

fn is_syntax_char(c: u32) -> bool {
    matches!(
        char::from_u32(c),
        Some('^' | '$' | '\\' | '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|')
    )
}

fn hex_val(c: u32) -> Option<u32> {
    char::from_u32(c).and_then(|c| c.to_digit(16))
}

fn is_octal(c: Option<u32>) -> bool {
    matches!(c, Some(d) if (0x30..=0x37).contains(&d))
}

fn is_digit(c: Option<u32>) -> bool {
    matches!(c, Some(d) if (0x30..=0x39).contains(&d))
}

fn ch(c: char) -> u32 {
    c as u32
}

/// An item inside a class: one character (may start or end a range) or a set (`\d`, `\p{..}`).
enum ClassAtom {
    Char(u32),
    Set(Set),
}

/// A `v`-mode class value: single characters and strings (from `\q{..}`).
#[derive(Default)]
struct ClassV {
    set: Set,
    strings: Vec<Vec<u32>>,
    /// JavaScript's static MayContainStrings, which decides whether `[^..]` is allowed.
    may_strings: bool,
}

struct Parser<'a> {
    s: Vec<u32>,
    i: usize,
    f: Flags,
    pattern: &'a str,
    flags: &'a str,
    /// Group names found by the pre-scan, in order, with their group numbers.
    names: Vec<(Vec<u32>, usize)>,
    ngroups: usize,
    /// Capturing groups opened so far.
    opened: usize,
    /// Capturing groups open around the current position.
    open: Vec<usize>,
    lookbehind: usize,
    depth: usize,
    can_match_surrogate: bool,
    seen_names: Vec<Vec<u32>>,
}

impl<'a> Parser<'a> {
    fn parse(pattern: &'a str, flags: &'a str, f: Flags) -> Result<Ast> {
        let s: Vec<u32> = if f.unicode() {
            pattern.chars().map(|c| c as u32).collect()
        } else {
            pattern.encode_utf16().map(u32::from).collect()
        };
        let mut p = Parser {
            s,
            i: 0,
            f,
            pattern,
            flags,
            names: Vec::new(),
            ngroups: 0,
            opened: 0,
            open: Vec::new(),
            lookbehind: 0,
            depth: 0,
            can_match_surrogate: false,
            seen_names: Vec::new(),
        };
        p.prescan();
        let root = p.disjunction()?;
        if p.i < p.s.len() {
            // Only a `)` stops a top-level disjunction early.
            return Err(p.err("unmatched ')'"));
        }
        Ok(Ast { root, can_match_surrogate: p.can_match_surrogate })
    }

    fn err(&self, why: &str) -> Error {
        Error::new(
            Code::InvalidPattern,
            format!("Invalid regular expression {}: {why}", show(self.pattern, self.flags)),
        )
    }

    fn unsupported(&self, why: &str) -> Error {
        Error::new(
            Code::InvalidPattern,
            format!("Unsupported regular expression {}: {why}", show(self.pattern, self.flags)),
        )
    }

    fn peek(&self) -> Option<u32> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, k: usize) -> Option<u32> {
        self.s.get(self.i + k).copied()
    }

    fn at(&self, lit: &str) -> bool {
        lit.chars().enumerate().all(|(k, c)| self.s.get(self.i + k) == Some(&(c as u32)))
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c as u32) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Counts capturing groups and collects group names, so that `\N` and `\k<name>` can be
    /// told apart from octal and identity escapes before the groups are reached.
    fn prescan(&mut self) {
        let mut i = 0;
        let mut class_depth = 0usize;
        while i < self.s.len() {
            let c = self.s[i];
            if c == ch('\\') {
                i += 2;
                continue;
            }
            if class_depth > 0 {
                if c == ch(']') {
                    class_depth -= 1;
                } else if c == ch('[') && self.f.v {
                    class_depth += 1;
                }
                i += 1;
                continue;
            }
            if c == ch('[') {
                class_depth = 1;
            } else if c == ch('(') {
                if self.s.get(i + 1) != Some(&ch('?')) {
                    self.ngroups += 1;
                } else if self.s.get(i + 2) == Some(&ch('<'))
                    && !matches!(self.s.get(i + 3), Some(&c) if c == ch('=') || c == ch('!'))
                {
                    self.ngroups += 1;
                    if let Some((name, _)) = self.group_name(i + 3) {
                        self.names.push((name, self.ngroups));
                    }
                }
            }
            i += 1;
        }
    }

    /// Reads a group name starting at `k` up to and including its `>`: the name (as code
    /// points) and the index after `>`.
    fn group_name(&self, mut k: usize) -> Option<(Vec<u32>, usize)> {
        let mut name = Vec::new();
        loop {
            let c = *self.s.get(k)?;
            if c == ch('>') {
                k += 1;
                break;
            }
            let (cp, next) = if c == ch('\\') {
                if self.s.get(k + 1) != Some(&ch('u')) {
                    return None;
                }
                self.unicode_escape_at(k + 2, true, true)?
            } else if (0xD800..=0xDBFF).contains(&c)
                && matches!(self.s.get(k + 1), Some(&l) if (0xDC00..=0xDFFF).contains(&l))
            {
                let l = self.s[k + 1];
                (0x10000 + ((c - 0xD800) << 10) + (l - 0xDC00), k + 2)
            } else {
                (c, k + 1)
            };
            let chr = char::from_u32(cp)?;
            let ok = if name.is_empty() {
                chr.is_alphabetic() || chr == '$' || chr == '_'
            } else {
                chr.is_alphanumeric()
                    || chr == '$'
                    || chr == '_'
                    || chr == '\u{200C}'
                    || chr == '\u{200D}'
                    || is_mark(chr)
            };
            if !ok {
                return None;
            }
            name.push(cp);
            k = next;
        }
        if name.is_empty() {
            None
        } else {
            Some((name, k))
        }
    }

    /// After `\u` at `k`: `XXXX` (joining an escaped surrogate pair when `pairs`), or
    /// `{X..}` when `braces`. The code point and the index after it.
    fn unicode_escape_at(&self, k: usize, braces: bool, pairs: bool) -> Option<(u32, usize)> {
        let hex4 = |k: usize| -> Option<u32> {
            let mut v = 0;
            for d in 0..4 {
                v = v * 16 + hex_val(*self.s.get(k + d)?)?;
            }
            Some(v)
        };
        if let Some(v) = hex4(k) {
            if pairs
                && (0xD800..=0xDBFF).contains(&v)
                && self.s.get(k + 4) == Some(&ch('\\'))
                && self.s.get(k + 5) == Some(&ch('u'))
            {
                if let Some(lo) = hex4(k + 6) {
                    if (0xDC00..=0xDFFF).contains(&lo) {
                        return Some((0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00), k + 10));
                    }
                }
            }
            return Some((v, k + 4));
        }
        if braces && self.s.get(k) == Some(&ch('{')) {
            let mut j = k + 1;
            let mut v: u32 = 0;
            let mut digits = 0;
            while let Some(d) = self.s.get(j).and_then(|&c| hex_val(c)) {
                v = v.saturating_mul(16).saturating_add(d);
                digits += 1;
                j += 1;
            }
            if digits > 0 && self.s.get(j) == Some(&ch('}')) && v <= MAX_CP {
                return Some((v, j + 1));
            }
        }
        None
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.unsupported(&format!("groups and classes nest more than {MAX_DEPTH} deep")));
        }
        Ok(())
    }

    fn disjunction(&mut self) -> Result<Node> {
        let mut alts = vec![self.alternative()?];
        while self.eat('|') {
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 { alts.pop().expect("one") } else { Node::Alt(alts) })
    }

    fn alternative(&mut self) -> Result<Node> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == ch('|') || c == ch(')') {
                break;
            }
            let t = self.term()?;
            if !matches!(t, Node::Empty) {
                items.push(t);
            }
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().expect("one"),
            _ => Node::Concat(items),
        })
    }

    fn term(&mut self) -> Result<Node> {
        let c = self.peek().expect("caller checked");
        if c == ch('^') || c == ch('$') {
            self.i += 1;
            self.no_quantifier()?;
            return Ok(if c == ch('^') { Node::Start } else { Node::End });
        }
        if c == ch('\\') && matches!(self.peek_at(1), Some(b) if b == ch('b') || b == ch('B')) {
            let pos = self.peek_at(1) == Some(ch('b'));
            self.i += 2;
            self.no_quantifier()?;
            return Ok(Node::WordBoundary(pos));
        }
        if self.at("(?=") || self.at("(?!") || self.at("(?<=") || self.at("(?<!") {
            let behind = self.at("(?<");
            let negate = self.at("(?!") || self.at("(?<!");
            self.i += if behind { 4 } else { 3 };
            self.enter()?;
            if behind {
                self.lookbehind += 1;
            }
            let node = self.disjunction()?;
            if behind {
                self.lookbehind -= 1;
            }
            self.depth -= 1;
            if !self.eat(')') {
                return Err(self.err("unterminated group"));
            }
            let look = Node::Look { behind, negate, node: Box::new(node) };
            // Annex B lets a lookahead be quantified when neither `u` nor `v` is set.
            if behind || self.f.unicode() {
                self.no_quantifier()?;
                return Ok(look);
            }
            return self.quantified(look);
        }
        let atom = self.atom()?;
        self.quantified(atom)
    }

    /// At `{`: a well-formed `{n}`, `{n,}` or `{n,m}`: (min, max, index after `}`).
    fn braced(&self) -> Option<(u32, Option<u32>, usize)> {
        let mut k = self.i;
        if self.s.get(k) != Some(&ch('{')) {
            return None;
        }
        k += 1;
        let number = |k: &mut usize| -> Option<u32> {
            let start = *k;
            let mut v: u32 = 0;
            while let Some(&d) = self.s.get(*k) {
                if !(0x30..=0x39).contains(&d) {
                    break;
                }
                v = v.saturating_mul(10).saturating_add(d - 0x30);
                *k += 1;
            }
            (*k > start).then_some(v)
        };
        let min = number(&mut k)?;
        let max = if self.s.get(k) == Some(&ch(',')) {
            k += 1;
            number(&mut k)
        } else {
            Some(min)
        };
        if self.s.get(k) != Some(&ch('}')) {
            return None;
        }
        Some((min, max, k + 1))
    }

    /// A quantifier right after an assertion is "nothing to repeat".
    fn no_quantifier(&self) -> Result<()> {
        match self.peek() {
            Some(c) if c == ch('*') || c == ch('+') || c == ch('?') => Err(self.err("nothing to repeat")),
            Some(c) if c == ch('{') && self.braced().is_some() => Err(self.err("nothing to repeat")),
            _ => Ok(()),
        }
    }

    fn quantified(&mut self, atom: Node) -> Result<Node> {
        let Some(c) = self.peek() else { return Ok(atom) };
        let (min, max) = if c == ch('*') {
            self.i += 1;
            (0, None)
        } else if c == ch('+') {
            self.i += 1;
            (1, None)
        } else if c == ch('?') {
            self.i += 1;
            (0, Some(1))
        } else if c == ch('{') {
            match self.braced() {
                Some((min, max, end)) => {
                    if matches!(max, Some(m) if m < min) {
                        return Err(self.err("numbers out of order in {} quantifier"));
                    }
                    self.i = end;
                    (min, max)
                }
                None if self.f.unicode() => return Err(self.err("incomplete quantifier")),
                None => return Ok(atom),
            }
        } else {
            return Ok(atom);
        };
        let greedy = !self.eat('?');
        if let Node::Look { .. } = atom {
            // A zero-width assertion repeated: zero times is nothing, once or more is once.
            return Ok(if min == 0 { Node::Empty } else { atom });
        }
        if is_empty(&atom) {
            // fancy-regex refuses to repeat nothing; repeating nothing matches nothing.
            return Ok(Node::Empty);
        }
        Ok(Node::Repeat { node: Box::new(atom), min, max, greedy })
    }

    fn atom(&mut self) -> Result<Node> {
        let c = self.peek().expect("caller checked");
        let lone = |p: &mut Self| -> Result<Node> {
            if p.f.unicode() {
                Err(p.err("lone quantifier brackets"))
            } else {
                Ok(p.literal(c))
            }
        };
        match char::from_u32(c) {
            Some('.') => {
                self.i += 1;
                let all = Set::range(0, self.f.max());
                let set = if self.f.s { all } else { all.difference(&terminator_set()) };
                Ok(self.set_node(set))
            }
            Some('(') => self.group(),
            Some('[') => {
                self.i += 1;
                self.enter()?;
                let set = if self.f.v { self.class_v_top()? } else { self.class()? };
                self.depth -= 1;
                Ok(set)
            }
            Some('\\') => self.atom_escape(),
            Some('*' | '+' | '?') => Err(self.err("nothing to repeat")),
            Some('{') => {
                if self.braced().is_some() {
                    return Err(self.err("nothing to repeat"));
                }
                self.i += 1;
                lone(self)
            }
            Some('}' | ']') => {
                self.i += 1;
                lone(self)
            }
            _ => {
                self.i += 1;
                Ok(self.literal(c))
            }
        }
    }

    /// A set as a node: closed under case folding with `i`; notes a surrogate in it.
    fn set_node(&mut self, set: Set) -> Node {
        let set = if self.f.i { case_closure(&set, self.f) } else { set };
        self.note_surrogates(&set);
        Node::Set(set)
    }

    fn note_surrogates(&mut self, set: &Set) {
        if set.intersects(SURR_LO, SURR_HI) {
            self.can_match_surrogate = true;
        }
    }

    fn literal(&mut self, c: u32) -> Node {
        self.set_node(Set::single(c))
    }

    fn group(&mut self) -> Result<Node> {
        // At `(`; lookaround was handled by `term`.
        self.i += 1;
        let mut capture = None;
        if self.eat('?') {
            if self.eat(':') {
            } else if self.peek() == Some(ch('<')) {
                let Some((name, end)) = self.group_name(self.i + 1) else {
                    return Err(self.err("invalid capture group name"));
                };
                if self.seen_names.contains(&name) {
                    return Err(self.err("duplicate capture group name"));
                }
                self.seen_names.push(name);
                self.i = end;
                capture = Some(());
            } else {
                let why = match self.peek().and_then(char::from_u32) {
                    Some('i' | 'm' | 's' | 'x' | 'u' | '-') => {
                        "invalid group (inline flags such as (?i) are not JavaScript syntax; \
                         use the i flag, grep's ignore_case, instead)"
                    }
                    Some('P') => {
                        "invalid group ((?P<name>...) is Python syntax; JavaScript writes \
                         (?<name>...))"
                    }
                    _ => "invalid group",
                };
                return Err(self.err(why));
            }
        } else {
            capture = Some(());
        }
        let index = capture.map(|()| {
            self.opened += 1;
            self.opened
        });
        if let Some(ix) = index {
            self.open.push(ix);
        }
        self.enter()?;
        let node = self.disjunction()?;
        self.depth -= 1;
        if index.is_some() {
            self.open.pop();
        }
        if !self.eat(')') {
            return Err(self.err("unterminated group"));
        }
        Ok(Node::Group(Box::new(node), index))
    }

    /// A backreference to group `n` (which exists).
    fn backref(&mut self, n: usize) -> Result<Node> {
        // A group that encloses the reference has no value yet, and JavaScript matches an
        // unset group's reference as empty.
        if self.open.contains(&n) {
            return Ok(Node::Empty);
        }
        // Lookbehind runs right to left in JavaScript, so a group after the reference may
        // already have matched there; fancy-regex cannot follow that.
        if self.lookbehind > 0 {
            return Err(self.unsupported("a backreference inside a lookbehind is not supported"));
        }
        // A group that opens later has not matched yet either.
        if n > self.opened {
            return Ok(Node::Empty);
        }
        Ok(Node::Backref(n))
    }

    fn atom_escape(&mut self) -> Result<Node> {
        // At `\`.
        let Some(c) = self.peek_at(1) else { return Err(self.err("\\ at end of pattern")) };
        let u = self.f.unicode();
        match char::from_u32(c) {
            Some('d' | 'D' | 's' | 'S' | 'w' | 'W') => {
                self.i += 2;
                let set = self.class_escape_set(c);
                Ok(self.set_node(set))
            }
            Some('p' | 'P') if u => {
                self.i += 2;
                let set = self.property(c == ch('P'))?;
                Ok(self.set_node(set))
            }
            Some('k') if u || !self.names.is_empty() => {
                self.i += 2;
                if !self.eat('<') {
                    return Err(self.err("invalid named reference"));
                }
                let Some((name, end)) = self.group_name(self.i) else {
                    return Err(self.err("invalid named reference"));
                };
                self.i = end;
                let Some(&(_, n)) = self.names.iter().find(|(nm, _)| *nm == name) else {
                    return Err(self.err("invalid named capture referenced"));
                };
                self.backref(n)
            }
            Some('1'..='9') => {
                let mut k = self.i + 1;
                let mut v: usize = 0;
                while let Some(&d) = self.s.get(k) {
                    if !(0x30..=0x39).contains(&d) {
                        break;
                    }
                    v = v.saturating_mul(10).saturating_add((d - 0x30) as usize);
                    k += 1;
                }
                if v <= self.ngroups {
                    self.i = k;
                    return self.backref(v);
                }
                if u {
                    return Err(self.err("invalid escape (no such group)"));
                }
                self.i += 1;
                let cp = self.legacy_octal_or_digit();
                let node = self.set_node(Set::single(cp));
                Ok(node)
            }
            _ => {
                self.i += 1;
                let cp = self.char_escape(false)?;
                let node = self.set_node(Set::single(cp));
                Ok(node)
            }
        }
    }

    /// After `\`, at a digit, without `u`/`v`: `\8`, `\9` are the digits; otherwise a legacy
    /// octal escape of up to three digits (at most 0o377).
    fn legacy_octal_or_digit(&mut self) -> u32 {
        let d = self.peek().expect("digit");
        self.i += 1;
        if d >= ch('8') {
            return d;
        }
        let mut v = d - 0x30;
        if is_octal(self.peek()) {
            v = v * 8 + (self.peek().expect("octal") - 0x30);
            self.i += 1;
            if d <= ch('3') && is_octal(self.peek()) {
                v = v * 8 + (self.peek().expect("octal") - 0x30);
                self.i += 1;
            }
        }
        v
    }

    /// A CharacterEscape after `\` (the index is on the escaped character): one character.
    /// `\c` without a letter (legacy mode) stands for the backslash itself and leaves the `c`.
    fn char_escape(&mut self, in_class: bool) -> Result<u32> {
        let u = self.f.unicode();
        let c = self.peek().expect("caller checked");
        let simple = match char::from_u32(c) {
            Some('t') => Some(0x09),
            Some('n') => Some(0x0A),
            Some('v') => Some(0x0B),
            Some('f') => Some(0x0C),
            Some('r') => Some(0x0D),
            _ => None,
        };
        if let Some(v) = simple {
            self.i += 1;
            return Ok(v);
        }
        match char::from_u32(c) {
            Some('c') => match self.peek_at(1) {
                Some(l) if char::from_u32(l).is_some_and(|l| l.is_ascii_alphabetic()) => {
                    self.i += 2;
                    Ok(l % 32)
                }
                Some(l) if in_class && !u && (is_digit(Some(l)) || l == ch('_')) => {
                    self.i += 2;
                    Ok(l % 32)
                }
                _ if u => Err(self.err("invalid unicode escape (\\c must be followed by a letter)")),
                _ => Ok(ch('\\')),
            },
            Some('0') if !is_digit(self.peek_at(1)) => {
                self.i += 1;
                Ok(0)
            }
            Some('0'..='9') => {
                if u {
                    return Err(self.err(if in_class { "invalid class escape" } else { "invalid decimal escape" }));
                }
                Ok(self.legacy_octal_or_digit())
            }
            Some('x') => {
                let h = (self.peek_at(1).and_then(hex_val), self.peek_at(2).and_then(hex_val));
                if let (Some(a), Some(b)) = h {
                    self.i += 3;
                    return Ok(a * 16 + b);
                }
                if u {
                    return Err(self.err("invalid escape (\\x needs two hex digits)"));
                }
                self.i += 1;
                Ok(ch('x'))
            }
            Some('u') => {
                // Surrogate pairs written as two escapes join only with `u`/`v`; without, the
                // pattern is units anyway.
                let found = self.unicode_escape_at(self.i + 1, u, u);
                match found {
                    Some((v, end)) => {
                        self.i = end;
                        Ok(v)
                    }
                    None if u => Err(self.err("invalid Unicode escape")),
                    None => {
                        self.i += 1;
                        Ok(ch('u'))
                    }
                }
            }
            Some('k') if !u && !self.names.is_empty() => Err(self.err("invalid named reference")),
            Some('-') if in_class => {
                self.i += 1;
                Ok(c)
            }
            _ => {
                if u && !(is_syntax_char(c) || c == ch('/')) {
                    return Err(self.err(&format!(
                        "invalid escape \\{} (with the u or v flag only syntax characters may \
                         be escaped)",
                        char::from_u32(c).unwrap_or('?')
                    )));
                }
                self.i += 1;
                Ok(c)
            }
        }
    }

    /// `\d \D \s \S \w \W` (the letter is given, the index is past it).
    fn class_escape_set(&self, c: u32) -> Set {
        let max = self.f.max();
        let word = || {
            // With `u`/`v` and `i`, the word characters include those that fold to one.
            if self.f.unicode() && self.f.i {
                case_closure(&word_set(), self.f)
            } else {
                word_set()
            }
        };
        match char::from_u32(c) {
            Some('d') => digit_set(),
            Some('D') => digit_set().complement(max),
            Some('s') => space_set(),
            Some('S') => space_set().complement(max),
            Some('w') => word(),
            _ => word().complement(max),
        }
    }

    /// `\p{..}` / `\P{..}`, with `u` or `v` (the index is past the `p`).
    fn property(&mut self, negate: bool) -> Result<Set> {
        if !self.eat('{') {
            return Err(self.err("invalid property name"));
        }
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == ch('}') {
                break;
            }
            let ok = char::from_u32(c).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '=');
            if !ok {
                return Err(self.err("invalid property name"));
            }
            self.i += 1;
        }
        if !self.eat('}') || self.i - 1 == start {
            return Err(self.err("invalid property name"));
        }
        let name: String = self.s[start..self.i - 1].iter().map(|&c| char::from_u32(c).expect("ascii")).collect();
        if let Some((key, _)) = name.split_once('=') {
            if !matches!(key, "General_Category" | "gc" | "Script" | "sc" | "Script_Extensions" | "scx") {
                return Err(self.err(&format!("invalid property name {name}")));
            }
        }
        const STRING_PROPERTIES: [&str; 7] = [
            "Basic_Emoji",
            "Emoji_Keycap_Sequence",
            "RGI_Emoji_Modifier_Sequence",
            "RGI_Emoji_Flag_Sequence",
            "RGI_Emoji_Tag_Sequence",
            "RGI_Emoji_ZWJ_Sequence",
            "RGI_Emoji",
        ];
        if STRING_PROPERTIES.contains(&name.as_str()) {
            return Err(if self.f.v && !negate {
                self.unsupported(&format!("the property of strings \\p{{{name}}} is not supported"))
            } else {
                self.err(&format!("invalid property name {name}"))
            });
        }
        let set = property_set(&name).ok_or_else(|| self.err(&format!("invalid property name {name}")))?;
        // With `v` and `i`, the property is folded before it is complemented.
        let set = if self.f.v && self.f.i { case_closure(&set, self.f) } else { set };
        Ok(if negate { set.complement(MAX_CP) } else { set })
    }

    /// A class without `v` (the index is past `[`).
    fn class(&mut self) -> Result<Node> {
        let negate = self.eat('^');
        let mut set = Set::default();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated character class"));
            };
            if c == ch(']') {
                self.i += 1;
                break;
            }
            let a = self.class_atom()?;
            if self.peek() == Some(ch('-')) && self.peek_at(1).is_some_and(|n| n != ch(']')) {
                self.i += 1;
                let b = self.class_atom()?;
                match (a, b) {
                    (ClassAtom::Char(x), ClassAtom::Char(y)) => {
                        if x > y {
                            return Err(self.err("range out of order in character class"));
                        }
                        set.add(&Set::range(x, y));
                    }
                    (a, b) => {
                        if self.f.unicode() {
                            return Err(self.err(
                                "invalid character class (a range cannot start or end with a \
                                 class escape such as \\d)",
                            ));
                        }
                        for atom in [a, ClassAtom::Char(ch('-')), b] {
                            match atom {
                                ClassAtom::Char(x) => set.add(&Set::single(x)),
                                ClassAtom::Set(s) => set.add(&s),
                            }
                        }
                    }
                }
            } else {
                match a {
                    ClassAtom::Char(x) => set.add(&Set::single(x)),
                    ClassAtom::Set(s) => set.add(&s),
                }
            }
        }
        let set = if self.f.i { case_closure(&set, self.f) } else { set };
        let set = if negate { set.complement(self.f.max()) } else { set };
        self.note_surrogates(&set);
        Ok(Node::Set(set))
    }

    fn class_atom(&mut self) -> Result<ClassAtom> {
        let c = self.peek().ok_or_else(|| self.err("unterminated character class"))?;
        if c != ch('\\') {
            self.i += 1;
            return Ok(ClassAtom::Char(c));
        }
        let Some(e) = self.peek_at(1) else {
            return Err(self.err("\\ at end of pattern"));
        };
        let u = self.f.unicode();
        match char::from_u32(e) {
            Some('b') => {
                self.i += 2;
                Ok(ClassAtom::Char(0x08))
            }
            Some('d' | 'D' | 's' | 'S' | 'w' | 'W') => {
                self.i += 2;
                Ok(ClassAtom::Set(self.class_escape_set(e)))
            }
            Some('p' | 'P') if u => {
                self.i += 2;
                Ok(ClassAtom::Set(self.property(e == ch('P'))?))
            }
            Some('B') if u => Err(self.err("invalid class escape")),
            _ => {
                self.i += 1;
                Ok(ClassAtom::Char(self.char_escape(true)?))
            }
        }
    }

    // --- `v` mode classes ------------------------------------------------------------------

    /// A top-level `v` class (the index is past `[`), as a node.
    fn class_v_top(&mut self) -> Result<Node> {
        let v = self.class_v()?;
        let set = if self.f.i { case_closure(&v.set, self.f) } else { v.set };
        self.note_surrogates(&set);
        if v.strings.is_empty() {
            return Ok(Node::Set(set));
        }
        let mut alts: Vec<Node> = Vec::new();
        let mut strings = v.strings;
        // Longer strings first, as JavaScript tries them (it changes nothing for is_match).
        strings.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for s in strings {
            let items: Vec<Node> = s
                .iter()
                .map(|&c| {
                    let one = Set::single(c);
                    Node::Set(if self.f.i { case_closure(&one, self.f) } else { one })
                })
                .collect();
            alts.push(match items.len() {
                0 => Node::Empty,
                _ => Node::Concat(items),
            });
        }
        if !set.is_empty() {
            alts.push(Node::Set(set));
        }
        Ok(Node::Group(Box::new(Node::Alt(alts)), None))
    }

    /// The contents of a `v` class up to and including its `]` (the index is past `[`).
    fn class_v(&mut self) -> Result<ClassV> {
        let negate = self.eat('^');
        let mut acc = ClassV::default();
        if self.eat(']') {
            return self.finish_v(acc, negate);
        }
        let (first, was_range) = self.v_operand_or_range()?;
        if self.at("&&") || self.at("--") {
            if was_range {
                return Err(self.err("invalid set operation in character class"));
            }
            let inter = self.at("&&");
            acc = first;
            loop {
                if self.eat(']') {
                    break;
                }
                let op = if inter { "&&" } else { "--" };
                if !self.at(op) {
                    return Err(self.err("invalid set operation in character class"));
                }
                self.i += 2;
                if inter && self.peek() == Some(ch('&')) {
                    return Err(self.err("invalid character in character class"));
                }
                let rhs = self.v_operand()?;
                acc = if inter { v_intersect(acc, rhs) } else { v_subtract(acc, rhs) };
            }
        } else {
            acc = first;
            loop {
                if self.eat(']') {
                    break;
                }
                if self.peek().is_none() {
                    return Err(self.err("unterminated character class"));
                }
                if self.at("&&") || self.at("--") {
                    return Err(self.err("invalid set operation in character class"));
                }
                let (next, _) = self.v_operand_or_range()?;
                acc.set.add(&next.set);
                acc.strings.extend(next.strings);
                acc.may_strings |= next.may_strings;
            }
        }
        self.finish_v(acc, negate)
    }

    fn finish_v(&self, mut acc: ClassV, negate: bool) -> Result<ClassV> {
        acc.strings.sort();
        acc.strings.dedup();
        if negate {
            if acc.may_strings {
                return Err(self.err("negated character class may contain strings"));
            }
            acc.set = acc.set.complement(MAX_CP);
        }
        Ok(acc)
    }

    /// An operand or a range, and whether it was a range.
    fn v_operand_or_range(&mut self) -> Result<(ClassV, bool)> {
        let start = self.i;
        let Some(&c) = self.s.get(start) else {
            return Err(self.err("unterminated character class"));
        };
        if c == ch('[') || (c == ch('\\') && self.is_set_escape(start)) {
            return Ok((self.v_operand()?, false));
        }
        // One character, which a lone `-` turns into the start of a range.
        let lo = self.v_char()?;
        let mut set = Set::single(lo);
        let mut range = false;
        if self.peek() == Some(ch('-')) && self.peek_at(1) != Some(ch('-')) {
            self.i += 1;
            let hi = self.v_char()?;
            if lo > hi {
                return Err(self.err("range out of order in character class"));
            }
            set = Set::range(lo, hi);
            range = true;
        }
        let set = if self.f.i { case_closure(&set, self.f) } else { set };
        Ok((ClassV { set, ..ClassV::default() }, range))
    }

    fn is_set_escape(&self, k: usize) -> bool {
        matches!(
            self.s.get(k + 1).and_then(|&c| char::from_u32(c)),
            Some('d' | 'D' | 's' | 'S' | 'w' | 'W' | 'p' | 'P' | 'q')
        )
    }

    /// A nested class, `\q{..}`, a class escape, or one character.
    fn v_operand(&mut self) -> Result<ClassV> {
        let Some(c) = self.peek() else {
            return Err(self.err("unterminated character class"));
        };
        let fold = |p: &Self, s: Set| if p.f.i { case_closure(&s, p.f) } else { s };
        if c == ch('[') {
            self.i += 1;
            self.enter()?;
            let v = self.class_v()?;
            self.depth -= 1;
            return Ok(v);
        }
        if c == ch('\\') {
            match self.peek_at(1).and_then(char::from_u32) {
                Some('q') => {
                    self.i += 2;
                    if !self.eat('{') {
                        return Err(self.err("invalid escape"));
                    }
                    let mut acc = ClassV::default();
                    let mut cur: Vec<u32> = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.err("unterminated character class")),
                            Some(x) if x == ch('}') => {
                                self.i += 1;
                                break;
                            }
                            Some(x) if x == ch('|') => {
                                self.i += 1;
                                acc.may_strings |= cur.len() != 1;
                                push_string(&mut acc, std::mem::take(&mut cur));
                            }
                            Some(_) => cur.push(self.v_char()?),
                        }
                    }
                    acc.may_strings |= cur.len() != 1;
                    push_string(&mut acc, cur);
                    acc.set = fold(self, acc.set);
                    return Ok(acc);
                }
                Some(e @ ('d' | 'D' | 's' | 'S' | 'w' | 'W')) => {
                    self.i += 2;
                    let set = match e {
                        // Complements of folded sets, as `v` defines them.
                        'D' | 'S' | 'W' => {
                            let pos = self.class_escape_set(ch(e.to_ascii_lowercase()));
                            fold(self, pos).complement(MAX_CP)
                        }
                        _ => fold(self, self.class_escape_set(ch(e))),
                    };
                    return Ok(ClassV { set, ..ClassV::default() });
                }
                Some(e @ ('p' | 'P')) => {
                    self.i += 2;
                    let set = self.property(e == 'P')?;
                    return Ok(ClassV { set, ..ClassV::default() });
                }
                _ => {}
            }
        }
        let c = self.v_char()?;
        Ok(ClassV { set: fold(self, Set::single(c)), ..ClassV::default() })
    }

    /// A ClassSetCharacter.
    fn v_char(&mut self) -> Result<u32> {
        let Some(c) = self.peek() else {
            return Err(self.err("unterminated character class"));
        };
        if c == ch('\\') {
            let Some(e) = self.peek_at(1) else { return Err(self.err("\\ at end of pattern")) };
            if e == ch('b') {
                self.i += 2;
                return Ok(0x08);
            }
            if char::from_u32(e).is_some_and(|e| "&-!#%,:;<=>@`~".contains(e)) {
                self.i += 2;
                return Ok(e);
            }
            self.i += 1;
            return self.char_escape(true);
        }
        if char::from_u32(c).is_some_and(|c| "()[]{}/-|".contains(c)) {
            return Err(self.err(&format!(
                "invalid character '{}' in character class (escape it with \\ under the v flag)",
                char::from_u32(c).unwrap_or('?')
            )));
        }
        if char::from_u32(c).is_some_and(|c| "&!#$%*+,.:;<=>?@^`~".contains(c)) && self.peek_at(1) == Some(c) {
            return Err(self.err("invalid set operation in character class"));
        }
        self.i += 1;
        Ok(c)
    }
}

fn push_string(acc: &mut ClassV, s: Vec<u32>) {
    if s.len() == 1 {
        acc.set.add(&Set::single(s[0]));
    } else {
        acc.strings.push(s);
    }
}

fn v_intersect(a: ClassV, b: ClassV) -> ClassV {
    let strings = a.strings.iter().filter(|s| b.strings.contains(s)).cloned().collect();
    ClassV { set: a.set.intersect(&b.set), strings, may_strings: a.may_strings && b.may_strings }
}

fn v_subtract(a: ClassV, b: ClassV) -> ClassV {
    let strings = a.strings.into_iter().filter(|s| !b.strings.contains(s)).collect();
    ClassV { set: a.set.difference(&b.set), strings, may_strings: a.may_strings }
}

/// Combining marks (Mn, Mc) may continue an identifier; `char` has no direct test for them.
fn is_mark(c: char) -> bool {
    static MARKS: OnceLock<Set> = OnceLock::new();
    MARKS.get_or_init(|| property_set("M").unwrap_or_default()).contains(c as u32)
}

/// The code points of a Unicode property, through `regex-syntax`'s tables.
fn property_set(name: &str) -> Option<Set> {
    use regex_syntax::hir::{Class, HirKind};
    static CACHE: OnceLock<std::sync::Mutex<HashMap<String, Option<Set>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().ok().and_then(|c| c.get(name).cloned()) {
        return hit;
    }
    let hir = regex_syntax::ParserBuilder::new().build().parse(&format!("\\p{{{name}}}")).ok();
    let set = hir.and_then(|hir| match hir.kind() {
        HirKind::Class(Class::Unicode(cls)) => {
            Some(Set::from_ranges(cls.ranges().iter().map(|r| (r.start() as u32, r.end() as u32)).collect()))
        }
        HirKind::Literal(lit) => {
            std::str::from_utf8(&lit.0).ok().and_then(|s| s.chars().next()).map(|c| Set::single(c as u32))
        }
        _ => None,
    });
    if let Ok(mut c) = cache.lock() {
        c.insert(name.to_string(), set.clone());
    }
    set
}

// ---------------------------------------------------------------------------------------------
// Writing the tree out in the `regex` crate's syntax

struct Emitter {
    f: Flags,
    utf16: bool,
    backtracking: bool,
    /// Writing the whole-file pre-filter instead of the matcher.
    prefilter: bool,
    out: String,
}

fn push_char(out: &mut String, c: u32) {
    match char::from_u32(c) {
        Some(x) if x.is_ascii_alphanumeric() => out.push(x),
        _ => {
            out.push_str(&format!("\\u{{{c:X}}}"));
        }
    }
}

/// The set as a `regex` atom (a class or one escaped character), over real code points.
fn set_atom(s: &Set) -> String {
    let mut out = String::new();
    if s.is_empty() {
        out.push_str(r"[^\u{0}-\u{10FFFF}]");
        return out;
    }
    if s.r.len() == 1 && s.r[0].0 == s.r[0].1 {
        push_char(&mut out, s.r[0].0);
        return out;
    }
    // Write whichever of the set and its complement (over scalar values) is shorter.
    let scalars_complement = s.union(&Set::range(SURR_LO, SURR_HI)).complement(MAX_CP);
    let (negate, ranges) =
        if scalars_complement.r.len() < s.r.len() { (true, &scalars_complement.r) } else { (false, &s.r) };
    if negate && ranges.is_empty() {
        out.push_str(r"[\u{0}-\u{10FFFF}]");
        return out;
    }
    out.push('[');
    if negate {
        out.push('^');
    }
    for &(lo, hi) in ranges {
        push_char(&mut out, lo);
        if hi > lo {
            out.push('-');
            push_char(&mut out, hi);
        }
    }
    out.push(']');
    out
}

/// A set of the pattern's alphabet as the set of characters it matches in the text.
fn to_text_chars(s: &Set, utf16: bool) -> Set {
    let surrogates = Set::range(SURR_LO, SURR_HI);
    let base = s.difference(&surrogates);
    if !utf16 {
        return base;
    }
    let mapped: Vec<(u32, u32)> =
        s.intersect(&surrogates).r.iter().map(|&(lo, hi)| (lo + SURR_BASE, hi + SURR_BASE)).collect();
    base.union(&Set::from_ranges(mapped))
}

impl Emitter {
    fn word_class(&self) -> String {
        let w = if self.f.unicode() && self.f.i { case_closure(&word_set(), self.f) } else { word_set() };
        set_atom(&w)
    }

    fn set(&mut self, s: &Set) {
        if !self.prefilter {
            let atom = set_atom(&to_text_chars(s, self.utf16));
            self.out.push_str(&atom);
            return;
        }
        // Lines hold no `\n`, so nothing on one line can match it.
        let s = s.difference(&Set::single(0x0A));
        let base = s.difference(&Set::range(SURR_LO, SURR_HI));
        let mut alts = vec![set_atom(&base)];
        if self.utf16 {
            // Half of an astral character is half of its four UTF-8 bytes: the high
            // surrogate the lead byte and one continuation byte, the low one the last two.
            if s.intersects(SURR_LO, 0xDBFF) {
                alts.push(r"(?-u:[\xF0-\xF4][\x80-\xBF])".to_string());
            }
            if s.intersects(0xDC00, SURR_HI) {
                alts.push(r"(?-u:[\x80-\xBF]{2})".to_string());
            }
        }
        if base.contains(0xFFFD) {
            // A lossy decoder turns invalid bytes into U+FFFD.
            alts.push(r"(?-u:[\x80-\xFF])+".to_string());
        }
        if alts.len() == 1 {
            self.out.push_str(&alts[0]);
        } else {
            self.out.push_str(&format!("(?:{})", alts.join("|")));
        }
    }

    fn alternatives(&mut self, v: &[Node], lead: bool, trail: bool) {
        for (k, c) in v.iter().enumerate() {
            if k > 0 {
                self.out.push('|');
            }
            self.node(c, lead, trail);
        }
    }

    fn node(&mut self, n: &Node, lead: bool, trail: bool) {
        match n {
            Node::Empty => self.out.push_str("(?:)"),
            Node::Set(s) => self.set(s),
            Node::Start => {
                let s = match (self.prefilter, self.f.m) {
                    (false, false) => r"\A".to_string(),
                    (false, true) if self.backtracking => format!("(?<![^{TERMINATORS}])"),
                    (false, true) => format!(r"(?:\A|[{TERMINATORS}])"),
                    (true, false) => "(?m:^)".to_string(),
                    (true, true) if lead => r"(?:(?m:^)|[\r\u{2028}\u{2029}])".to_string(),
                    (true, true) => String::new(),
                };
                self.out.push_str(&s);
            }
            Node::End => {
                let s = match (self.prefilter, self.f.m) {
                    (true, _) => String::new(),
                    (false, false) => r"\z".to_string(),
                    (false, true) if self.backtracking => format!("(?![^{TERMINATORS}])"),
                    (false, true) => format!(r"(?:\z|[{TERMINATORS}])"),
                };
                self.out.push_str(&s);
            }
            Node::WordBoundary(pos) => {
                if self.prefilter {
                } else if self.backtracking {
                    let w = self.word_class();
                    if *pos {
                        self.out.push_str(&format!("(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"));
                    } else {
                        self.out.push_str(&format!("(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"));
                    }
                } else {
                    self.out.push_str(if *pos { r"(?-u:\b)" } else { r"(?-u:\B)" });
                }
            }
            Node::Look { behind, negate, node } => {
                if self.prefilter {
                    return;
                }
                self.out.push_str(match (behind, negate) {
                    (false, false) => "(?=",
                    (false, true) => "(?!",
                    (true, false) => "(?<=",
                    (true, true) => "(?<!",
                });
                self.node(node, false, false);
                self.out.push(')');
            }
            Node::Backref(k) => {
                if self.prefilter {
                    self.out.push_str(r"(?-u:[^\n])*");
                } else {
                    // An unset group's reference matches empty in JavaScript.
                    let i = if self.f.i { "(?i)" } else { "" };
                    self.out.push_str(&format!("(?:{i}(?({k})\\{k}|))"));
                }
            }
            Node::Group(node, index) => {
                self.out.push_str(if index.is_some() && !self.prefilter { "(" } else { "(?:" });
                match &**node {
                    // The group already brackets the alternation.
                    Node::Alt(v) => self.alternatives(v, lead, trail),
                    other => self.node(other, lead, trail),
                }
                self.out.push(')');
            }
            Node::Concat(v) => {
                let last = v.len().saturating_sub(1);
                for (k, c) in v.iter().enumerate() {
                    self.node(c, lead && k == 0, trail && k == last);
                }
            }
            Node::Alt(v) => {
                self.out.push_str("(?:");
                self.alternatives(v, lead, trail);
                self.out.push(')');
            }
            Node::Repeat { node, min, max, greedy } => {
                if matches!(**node, Node::Group(..)) {
                    self.node(node, false, false);
                } else {
                    self.out.push_str("(?:");
                    self.node(node, false, false);
                    self.out.push(')');
                }
                let q = match (min, max) {
                    (0, None) => "*".to_string(),
                    (1, None) => "+".to_string(),
                    (n, None) => format!("{{{n},}}"),
                    (0, Some(1)) => "?".to_string(),
                    (n, Some(m)) if n == m => format!("{{{n}}}"),
                    (n, Some(m)) => format!("{{{n},{m}}}"),
                };
                self.out.push_str(&q);
                if !greedy && !self.prefilter {
                    self.out.push('?');
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum R {
        T,
        F,
        E,
    }
    use R::{E, F, T};

    fn run(pattern: &str, flags: &str, text: &str) -> R {
        match JsRegex::new(pattern, flags) {
            Ok(re) => match re.is_match(text) {
                Ok(true) => T,
                Ok(false) => F,
                Err(Slow) => panic!("/{pattern}/{flags} was slow on {text:?}"),
            },
            Err(e) => {
                assert_eq!(e.code, Code::InvalidPattern, "{}", e.message);
                E
            }
        }
    }

    /// Each row was checked with `new RegExp(pattern, flags).test(text)` in Node 20.
    #[rustfmt::skip]
    const JS: &[(&str, &str, &str, R)] = &[
        ("\\w", "", "\u{E9}", F),
        ("\\w", "", "a", T),
        ("\\w", "u", "\u{E9}", F),
        ("\\w", "i", "\u{17F}", F),
        ("\\w", "iu", "\u{17F}", T),
        ("\\w", "iu", "\u{212A}", T),
        ("\\W", "iu", "s", F),
        ("\\W", "iu", "\u{17F}", F),
        ("\\W", "i", "\u{17F}", T),
        ("\\d", "", "\u{663}", F),
        ("\\d", "u", "\u{663}", F),
        ("\\D", "", "\u{663}", T),
        ("\\s", "", "\u{A0}", T),
        ("\\s", "", "\u{FEFF}", T),
        ("\\s", "", "\u{2028}", T),
        ("\\s", "", "\u{85}", F),
        ("\\s", "", "\u{180E}", F),
        ("\\S", "", "\u{3000}", F),
        (".", "", "\r", F),
        (".", "", "\n", F),
        (".", "", "\u{2028}", F),
        (".", "", "\u{85}", T),
        (".", "s", "\n", T),
        ("^.$", "", "\u{1F600}", F),
        ("^..$", "", "\u{1F600}", T),
        ("^.$", "u", "\u{1F600}", T),
        ("^..$", "u", "\u{1F600}", F),
        ("a$", "", "a\n", F),
        ("a$", "m", "a\n", T),
        ("^b", "m", "a\nb", T),
        ("^b", "", "a\nb", F),
        ("^b", "m", "a\rb", T),
        ("^b", "m", "a\u{2028}b", T),
        ("a$", "m", "a\u{2029}b", T),
        ("a$", "m", "a\rb", T),
        ("^\\n", "m", "a\r\nb", T),
        ("\\r$", "m", "a\r\nb", T),
        ("x^b", "m", "x\nb", F),
        ("a\\n^b", "m", "a\nb", T),
        ("a$\\nb", "m", "a\nb", T),
        ("a$\\rb", "m", "a\rb", T),
        ("(?:^|,)b", "m", "a\nb", T),
        ("(?:^|,)b", "", "a\nb", F),
        ("(^|x)b", "m", "a\u{2028}b", T),
        ("[^]", "", "\n", T),
        ("[]", "", "a", F),
        ("[^]", "", "\u{1F600}", T),
        ("a{", "", "a{", T),
        ("a{,5}", "", "a{,5}", T),
        ("a{2}", "", "aa", T),
        ("a{2}", "", "a", F),
        ("x{1,}y", "", "xxy", T),
        ("\\/x", "", "/x", T),
        ("a/b", "", "a/b", T),
        ("(a)\\1", "", "aa", T),
        ("(a)\\1", "", "ab", F),
        ("(?<=\\$)\\d+", "", "$12", T),
        ("(?<=\\$)\\d+", "", "12", F),
        ("(?<!\\$)\\b\\d+", "", "$12", F),
        ("\\bfoo\\b", "i", "FOO bar", T),
        ("\\bfoo\\b", "", "foobar", F),
        ("\\Bfoo", "", "afoo", T),
        ("\\b\u{E9}", "", "\u{E9}", F),
        ("\\b\u{E9}", "", "a\u{E9}", T),
        ("\u{E9}\\b", "", "\u{E9}a", T),
        ("\\b\u{17F}", "iu", "\u{17F}", T),
        ("\\b\u{17F}", "i", "\u{17F}", F),
        ("\u{17F}\\b", "iu", "\u{17F}x", F),
        ("k", "i", "\u{212A}", F),
        ("k", "iu", "\u{212A}", T),
        ("s", "i", "\u{17F}", F),
        ("s", "iu", "\u{17F}", T),
        ("\u{DF}", "i", "\u{1E9E}", F),
        ("\u{DF}", "iu", "\u{1E9E}", T),
        ("\u{3C3}", "i", "\u{3C2}", T),
        ("\u{3A3}", "i", "\u{3C2}", T),
        ("\u{3A3}\u{391}\u{3A3}", "i", "\u{3C3}\u{3B1}\u{3C2}", T),
        ("\u{130}", "i", "i", F),
        ("i", "iu", "\u{131}", F),
        ("[a-z]", "i", "K", T),
        ("[a-z]", "i", "\u{212A}", F),
        ("[a-z]", "iu", "\u{212A}", T),
        ("\\u{1F600}", "u", "\u{1F600}", T),
        ("\\u{61}", "", "uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu", T),
        ("\\u{2}", "", "uu", T),
        ("\\u{2}", "", "u", F),
        ("\\uD83D\\uDE00", "", "\u{1F600}", T),
        ("\\uD83D\\uDE00", "u", "\u{1F600}", T),
        ("\\uD83D", "", "\u{1F600}", T),
        ("\\uD83D", "u", "\u{1F600}", F),
        ("[\\uD800-\\uDFFF]", "", "a\u{1F600}", T),
        ("[\\uD800-\\uDFFF]", "", "abc", F),
        ("[\\uD800-\\uDFFF]", "u", "a\u{1F600}", F),
        ("^\u{1F600}+$", "", "\u{1F600}\u{1F600}", F),
        ("^\u{1F600}+$", "u", "\u{1F600}\u{1F600}", T),
        ("^[\u{1F600}]$", "", "\u{1F600}", F),
        ("^[\u{1F600}]$", "u", "\u{1F600}", T),
        ("^[^a]$", "", "\u{1F600}", F),
        ("^[^a]{2}$", "", "\u{1F600}", T),
        ("\\uD83D[\\uDE00-\\uDE4F]", "", "x\u{1F610}y", T),
        ("\\W\\W", "", "\u{1F600}", T),
        ("\\x41", "", "A", T),
        ("\\x4", "", "x4", T),
        ("\\cJ", "", "\n", T),
        ("\\c1", "", "\\c1", T),
        ("[\\c1]", "", "\u{11}", T),
        ("[\\c_]", "", "\u{1F}", T),
        ("\\0", "", "\u{0}", T),
        ("\\01", "", "\u{1}", T),
        ("\\101", "", "A", T),
        ("\\8", "", "8", T),
        ("\\1", "", "\u{1}", T),
        ("(a)\\2", "", "a\u{2}", T),
        ("[\\1]", "", "\u{1}", T),
        ("[\\b]", "", "\u{8}", T),
        ("\\a", "", "a", T),
        ("\\e", "", "e", T),
        ("\\k", "", "k", T),
        ("\\p{L}", "", "p{L}", T),
        ("\\p{L}", "u", "\u{E9}", T),
        ("\\p{Lu}", "u", "a", F),
        ("\\P{Lu}", "iu", "A", T),
        ("\\P{Lu}", "iv", "A", F),
        ("\\p{Script=Greek}", "u", "\u{3B1}", T),
        ("\\p{sc=Latn}", "u", "a", T),
        ("\\p{ASCII_Hex_Digit}", "u", "f", T),
        ("\\p{Emoji_Presentation}", "u", "\u{1F600}", T),
        ("(?<year>\\d{4})-\\k<year>", "", "2020-2020", T),
        ("(?<year>\\d{4})-\\k<year>", "", "2020-2021", F),
        ("\\k<a>(?<a>x)", "", "x", T),
        ("(a)|\\1b", "", "b", T),
        ("(?:(a)|b)\\1", "", "b", T),
        ("(a\\1)", "", "a", T),
        ("a*?b", "", "aab", T),
        ("a+?", "", "a", T),
        ("a??b", "", "b", T),
        ("(?=a)*b", "", "b", T),
        ("(?=a)+a", "", "a", T),
        ("(?!a)+b", "", "b", T),
        ("[\\w-]", "", "-", T),
        ("[\\w-z]", "", "-", T),
        ("[a-]", "", "-", T),
        ("[-a]", "", "-", T),
        ("[\\d-\\w]", "", "-", T),
        ("[a\\-z]", "", "-", T),
        ("[a\\-z]", "u", "-", T),
        ("[\\]]", "", "]", T),
        ("]", "", "]", T),
        ("}", "", "}", T),
        ("a{1}{", "", "a{", T),
        ("[[a]", "", "[", T),
        ("[&&a]", "", "&", T),
        ("[a&&b]", "", "&", T),
        ("[--a]", "", "-", T),
        ("[~~]", "", "~", T),
        ("[a--b]", "", "-", E),
        ("[\\^]", "", "^", T),
        ("[^^]", "", "a", T),
        ("[[a-z]--[aeiou]]", "v", "b", T),
        ("[[a-z]--[aeiou]]", "v", "a", F),
        ("[\\w&&\\d]", "v", "5", T),
        ("[\\w&&\\d]", "v", "a", F),
        ("[\\q{abc|d}]", "v", "xabcx", T),
        ("[\\q{abc|d}]", "v", "ab", F),
        ("^[\\q{abc}x]$", "v", "abc", T),
        ("[^a]", "iv", "A", F),
        ("[^a]", "i", "A", F),
        ("[^a]", "iu", "A", F),
        ("[\\p{Lu}--[A-Z]]", "v", "\u{C1}", T),
        ("[\\p{Lu}--[A-Z]]", "v", "B", F),
        ("(a|b)*c", "", "ababc", T),
        ("(ab)+", "", "abab", T),
        ("a+b*", "", "aab", T),
        ("(a?)+b", "", "b", T),
        ("(a+)?b", "", "aab", T),
        ("^npm (test|run lint)$", "", "npm test", T),
        ("^npm (test|run lint)$", "", "npm test; rm -rf /", F),
        ("^npm test$", "m", "rm -rf /\nnpm test", T),
        ("^npm test$", "", "rm -rf /\nnpm test", F),
        ("foo", "y", "foobar", T),
        ("foo", "y", "xfoo", F),
        ("^foo", "my", "\nfoo", F),
        ("^foo", "m", "\nfoo", T),
        ("bar", "g", "foobar", T),
        ("bar", "d", "foobar", T),
        ("\\$\\{", "", "${x}", T),
        ("a.c", "", "a\u{1F600}c", F),
        ("a..c", "", "a\u{1F600}c", T),
        ("a.c", "u", "a\u{1F600}c", T),
        ("a..c", "u", "a\u{1F600}c", F),
        ("a.{2}c", "", "a\u{1F600}c", T),
        ("(?<=a+)b", "", "aaab", T),
        ("(?<=^|,)b", "", "a,b", T),
        ("(?<!\\w)foo", "", "xfoo", F),
        ("(?<!\\w)foo", "", "-foo", T),
        ("(?=.*\\d)(?=.*[a-z]).{6}", "", "abc123", T),
        ("(?=.*\\d)(?=.*[a-z]).{6}", "", "abcdef", F),
        ("\\u0041", "u", "A", T),
        ("\\u{41}", "u", "A", T),
        ("[\\u{1F600}-\\u{1F64F}]", "u", "\u{1F610}", T),
        ("\\-", "", "-", T),
        ("[\\-]", "u", "-", T),
        ("\\/", "u", "/", T),
        ("(?<n>a)(?<m>b)\\k<m>", "", "abb", T),
        ("(?<$x>a)", "", "a", T),
        ("(?<\u{E9}>a)\\k<\u{E9}>", "", "aa", T),
        ("(?<\\u0061>a)\\k<a>", "", "aa", T),
        ("^\\s*$", "", "   ", T),
        ("^\\s*$", "", "  x ", F),
        ("[\\s\\S]", "", "\n", T),
        ("x*", "", "abc", T),
        ("", "", "abc", T),
        ("a|", "", "b", T),
        ("|", "", "", T),
        ("\\bfoo", "", "\u{E9}foo", T),
        ("\\Bfoo", "", "\u{E9}foo", F),
        ("\\bfoo", "u", "\u{E9}foo", T),
        ("\\bfoo", "iu", "\u{212A}foo", F),
        ("\\bfoo", "iu", "\u{17F}foo", F),
        ("\\Bfoo", "iu", "\u{17F}foo", T),
        ("[^\\d]", "", "5", F),
        ("[^\\D]", "", "5", T),
        ("[\\D]", "", "5", F),
        ("[^\\W]", "i", "\u{17F}", F),
        ("[^\\W]", "iu", "\u{17F}", T),
        ("\\W", "i", "K", F),
        ("[\u{E0}-\u{FF}]", "i", "\u{C0}", T),
        ("[\u{C0}-\u{DE}]", "i", "\u{FF}", F),
        ("\u{FF}", "i", "\u{178}", T),
        ("\u{178}", "i", "\u{FF}", T),
        ("\u{1E9E}", "i", "\u{DF}", F),
        ("\u{1E9E}", "iu", "\u{DF}", T),
        ("\u{1C5}", "i", "\u{1C6}", T),
        ("\u{1C5}", "iu", "\u{1C6}", T),
        ("\u{1C5}", "i", "\u{1C4}", T),
        ("\u{FB00}", "i", "FF", F),
        ("\u{149}", "i", "\u{2BC}N", F),
        ("\\u{10400}", "iu", "\u{10428}", T),
        ("\u{10400}", "i", "\u{10428}", F),
        ("(?:\\uD801\\uDC00)", "i", "\u{10428}", F),
        ("a\\b", "", "a", T),
        ("a\\b", "", "ab", F),
        ("a\\B", "", "a", F),
        ("^\\B$", "", "", T),
        ("^\\b$", "", "", F),
        ("\\1(a)", "", "a", T),
        ("(a)(?:\\1)+", "", "aaa", T),
        ("(?:a|b)+$", "", "xab", T),
    ];

    #[test]
    fn matches_like_javascript() {
        let mut wrong = Vec::new();
        for &(p, f, t, want) in JS {
            let got = run(p, f, t);
            if got != want {
                let how = JsRegex::new(p, f).map(|r| format!("{r:?}")).unwrap_or_else(|e| e.message);
                wrong.push(format!("/{p}/{f} on {t:?}: want {want:?}, got {got:?} ({how})"));
            }
        }
        assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), JS.len(), wrong.join("\n"));
    }

    #[test]
    fn engine_choice() {
        let bt = |p: &str, f: &str| JsRegex::new(p, f).unwrap().is_backtracking();
        assert!(!bt(r"\bfoo\b", "i"));
        assert!(!bt(r"^npm (test|run lint)$", ""));
        assert!(!bt(r"^a|b$", "m"), "leading ^ and trailing $ consume the terminator");
        assert!(!bt(r"(?:^|,)x", "m"));
        assert!(bt(r"a$\nb", "m"));
        assert!(bt(r"(a)\1", ""));
        assert!(bt(r"(?<=\$)\d+", ""));
        assert!(bt(r"x(?!y)", ""));
        assert!(bt(r"\bfoo", "iu"));
        assert!(!bt(r"\1(a)", ""), "a forward reference is always empty");
    }

    #[test]
    fn refuses_nested_repetition() {
        for p in [
            r"(a+)+",
            r"(\w+\s*)*",
            r"((ab)*c)+",
            r"(?:x+y)*",
            r"(a*)*",
            r"(a+){2,}",
            r"(a+){1,5}",
            r"(a+){3}",
            r"(?<n>a{2,})+",
            r"x(?:y|(z+))*",
            r"((?=a+)b)+",
            r"(?:(?:a+))+",
        ] {
            let e = JsRegex::new(p, "").expect_err(p);
            assert_eq!(e.code, Code::InvalidPattern);
            assert_eq!(
                e.message,
                format!(
                    "Refused regular expression /{p}/: a repeated group contains another \
                     repetition (nested repetition can take exponential time). Rewrite it \
                     without the outer repetition."
                )
            );
        }
        for p in [
            r"(a|b)*",
            r"(ab)+",
            r"a+b*",
            r"(a?)+",
            r"(a+)?",
            r"(a+){0,1}",
            r"(a+){1}",
            r"(\d{1,3}\.){3}\d{1,3}",
            r"(a+)(b+)",
            r"[a+]+",
            r"(?=a+)*b",
        ] {
            JsRegex::new(p, "").unwrap_or_else(|e| panic!("{p}: {}", e.message));
        }
    }

    #[test]
    fn invalid_patterns_say_why() {
        let msg = |p: &str, f: &str| JsRegex::new(p, f).expect_err(p).message;
        assert_eq!(msg("(", ""), "Invalid regular expression /(/: unterminated group");
        assert_eq!(msg("a)", ""), "Invalid regular expression /a)/: unmatched ')'");
        assert_eq!(msg("[a", ""), "Invalid regular expression /[a/: unterminated character class");
        assert_eq!(msg("*a", ""), "Invalid regular expression /*a/: nothing to repeat");
        assert_eq!(msg("a**", ""), "Invalid regular expression /a**/: nothing to repeat");
        assert_eq!(msg("{1}", ""), "Invalid regular expression /{1}/: nothing to repeat");
        assert_eq!(msg("^*", ""), "Invalid regular expression /^*/: nothing to repeat");
        assert_eq!(msg("a{2,1}", ""), "Invalid regular expression /a{2,1}/: numbers out of order in {} quantifier");
        assert_eq!(msg("[z-a]", ""), "Invalid regular expression /[z-a]/: range out of order in character class");
        assert_eq!(msg("\\", ""), "Invalid regular expression /\\/: \\ at end of pattern");
        assert_eq!(msg("a{", "u"), "Invalid regular expression /a{/u: incomplete quantifier");
        assert_eq!(msg("}", "u"), "Invalid regular expression /}/u: lone quantifier brackets");
        assert!(msg(r"\a", "u").contains("invalid escape \\a"));
        assert!(msg(r"\2(a)", "u").contains("no such group"));
        assert!(msg(r"(?<a>x)\k<b>", "").contains("invalid named capture referenced"));
        assert!(msg(r"(?<a>x)(?<a>y)", "").contains("duplicate capture group name"));
        assert!(msg(r"(?i)abc", "").contains("inline flags"));
        assert!(msg(r"(?P<x>a)", "").contains("Python"));
        assert!(msg(r"\p{Nope}", "u").contains("invalid property name"));
        assert!(msg(r"(?<=(a)\1)b", "").starts_with("Unsupported regular expression"));
        assert!(msg(r"[\p{RGI_Emoji}]", "v").contains("not supported"));
        assert!(msg(r"[(]", "v").contains("invalid character '('"));
        assert!(msg(r"[^\q{ab}]", "v").contains("may contain strings"));
        assert!(msg("a", "gg").contains("Invalid regular expression flags"));
        assert!(msg("a", "uv").contains("u and v"));
        assert!(msg("a", "x").contains("Invalid regular expression flags"));
        let deep = "(".repeat(500) + &")".repeat(500);
        assert!(msg(&deep, "").contains("nest"));
    }

    #[test]
    fn v_classes_follow_may_contain_strings() {
        // Checked in Node 20: a negated class is an error when its contents may hold strings,
        // judged by syntax (intersection: all operands; subtraction: the first), not by value.
        assert_eq!(run(r"[^[\q{ab}]--[a]]", "v", "x"), E);
        assert_eq!(run(r"[^\q{}]", "v", "x"), E);
        assert_eq!(run(r"[a-z&&b]", "v", "b"), E);
        assert_eq!(run(r"[^[\q{ab}]&&[a]]", "v", "b"), T);
        assert_eq!(run(r"[^[\q{a}]]", "v", "b"), T);
        assert_eq!(run(r"^[\q{}]$", "v", ""), T);
        assert_eq!(run(r"[\q{ab|c}]", "v", "xab"), T);
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let e = JsRegex::new(r"(?:a{1000}){1000}", "").expect_err("too big");
        assert_eq!(e.code, Code::InvalidPattern);
        assert!(
            e.message.starts_with("Refused regular expression /(?:a{1000}){1000}/: it is too large"),
            "{}",
            e.message
        );
    }

    #[test]
    fn catastrophic_backtracking_is_slow_not_a_hang() {
        // `(a|a)*` has no nested repetition, but with the backreference it runs on the
        // backtracking engine, which tries 2^n ways to split the a's before failing.
        let re = JsRegex::new(r"^(a|a)*\1$", "").unwrap();
        assert!(re.is_backtracking());
        let text = "a".repeat(40) + "!";
        let start = std::time::Instant::now();
        assert_eq!(re.is_match(&text), Err(Slow));
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
        assert_eq!(re.is_match("aa"), Ok(true));
    }

    #[test]
    fn is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<JsRegex>();
        check::<std::sync::Arc<JsRegex>>();
    }

    #[test]
    fn prefilter_presence() {
        let pf = |p: &str, f: &str| JsRegex::new(p, f).unwrap().prefilter().map(|r| r.as_str().to_string());
        assert!(pf("foo", "").is_some());
        assert!(pf(r"\bfoo\b", "i").is_some());
        assert!(pf(r"foo$", "").is_some());
        assert!(pf(r"(a)\1", "").is_some());
        assert!(pf(r"[^a-z]", "").is_some());
        assert!(pf(r"[^\x00-\x7F]", "").is_some());
        assert!(pf(r"x*", "").is_none(), "matches everywhere");
        assert!(pf(r"^", "").is_none());
        assert!(pf(r"(?=a)", "").is_none());
    }

    /// Patterns for the prefilter property test, over a small alphabet.
    const PREFILTER_PATTERNS: &[(&str, &str)] = &[
        ("a", ""),
        ("ab", ""),
        ("a.b", ""),
        ("a..b", ""),
        ("^a", ""),
        ("^a", "m"),
        ("b$", ""),
        ("b$", "m"),
        (r"\ba", ""),
        (r"a\b", ""),
        (r"\Ba", ""),
        ("^$", ""),
        ("^.$", ""),
        ("^..$", ""),
        ("^.$", "u"),
        (r"[^a]b", ""),
        (r"[^a]{2}", ""),
        (r"\W\W", ""),
        ("a[\\s\\S]b", ""),
        ("a[^]b", ""),
        ("a\\rb", ""),
        ("\\r", ""),
        ("a\\nb", ""),
        ("(a)\\1", ""),
        ("(?<=a)b", ""),
        ("a(?=b)", ""),
        ("a(?!b)", ""),
        ("(?<!a)b", ""),
        ("\\uD83D", ""),
        ("[\\uD800-\\uDFFF]", ""),
        ("\\uDE00", ""),
        ("\\uD83D\\uDE00", ""),
        ("\u{1F600}", ""),
        ("\u{1F600}+", ""),
        ("\\ufffd", ""),
        ("a\\uFFFDb", ""),
        ("[^b]", "u"),
        ("A", "i"),
        ("é", "i"),
        ("^(?:a|b)$", "m"),
        ("(?:^|b)a", "m"),
        ("a.b", "s"),
        ("a{2,}", ""),
        ("(?:ab)+", ""),
        ("a|^b", ""),
        ("\\S\\s\\S", ""),
        ("a.{3}", ""),
        (".{2}b", ""),
        ("\\u2028", ""),
        ("^b", "my"),
        ("ab", "y"),
        ("[^a]", ""),
        ("^[^a]$", ""),
        ("a[^b]{2}a", ""),
        ("\\uDE00a", ""),
        ("a\\uD83D", ""),
        ("[\\uDC00-\\uDFFF][^a]", ""),
        ("a[\\uD800-\\uDBFF]{1}", ""),
        (".\\uDE00", ""),
        ("[^a]+", ""),
    ];

    fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
        let atoms: Vec<&'static [u8]> = vec![
            b"a",
            b"b",
            b"A",
            b" ",
            b"\r",
            b"\n",
            "é".as_bytes(),
            "\u{1F600}".as_bytes(),
            "\u{FFFD}".as_bytes(),
            "\u{2028}".as_bytes(),
            b"\xFF",
            b"\xE2\x82",
            b"\x80",
        ];
        proptest::collection::vec(proptest::sample::select(atoms), 0..12).prop_map(|parts| parts.concat())
    }

    /// Cuts a line as grep does: at most `n` characters.
    fn cut(line: &str, n: usize) -> &str {
        match line.char_indices().nth(n) {
            Some((i, _)) => &line[..i],
            None => line,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
        #[test]
        fn prefilter_is_sound(which in 0..PREFILTER_PATTERNS.len(), buf in line_strategy(),
                              keep_cr in any::<bool>(), limit in 1usize..8) {
            let (p, f) = PREFILTER_PATTERNS[which];
            let re = JsRegex::new(p, f).unwrap();
            let Some(pre) = re.prefilter() else { return Ok(()) };
            let whole = pre.is_match(&buf);
            for raw in buf.split(|&b| b == b'\n') {
                let raw = if !keep_cr && raw.last() == Some(&b'\r') { &raw[..raw.len() - 1] } else { raw };
                let text = String::from_utf8_lossy(raw);
                for line in [&text[..], cut(&text, limit)] {
                    if re.is_match(line).unwrap() {
                        prop_assert!(whole, "/{}/{} matches line {:?} but its prefilter {} finds nothing in {:?}",
                            p, f, line, pre.as_str(), String::from_utf8_lossy(&buf));
                        prop_assert!(pre.is_match(raw), "/{}/{}: prefilter {} misses line {:?}", p, f, pre.as_str(), line);
                    }
                }
            }
            for m in pre.find_iter(&buf) {
                prop_assert!(!m.as_bytes().contains(&b'\n'), "prefilter match crosses a line");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]
        /// Any string is either refused with a message or compiled; nothing panics.
        #[test]
        fn never_panics(pattern in r#"[-a\\\[\](){}|^$.*+?,:=!<>/0-9a-zA-Z_kpPqucxdDwWsSbB&~é😀\n]{0,16}"#,
                        flags in "[gimsuvyd]{0,3}", text in "[a\nA😀é\r ,0-9]{0,6}") {
            match JsRegex::new(&pattern, &flags) {
                Ok(re) => {
                    let _ = re.is_match(&text);
                    if let Some(pre) = re.prefilter() {
                        let _ = pre.is_match(text.as_bytes());
                    }
                }
                Err(e) => prop_assert_eq!(e.code, Code::InvalidPattern),
            }
        }
    }

    /// Differential check against Node: `node tests/fixtures/jsregex-fuzz.js 1 2000 > cases.jsonl`
    /// writes one JSON array `[pattern, flags, text, result]` per line (result true, false or
    /// "error"); run with
    /// `JSREGEX_CASES=cases.jsonl cargo test -p corral-core --lib differential -- --ignored`.
    /// Refused, unsupported and slow cases are counted and skipped.
    #[test]
    #[ignore]
    fn differential_from_file() {
        let Ok(path) = std::env::var("JSREGEX_CASES") else { return };
        let data = std::fs::read_to_string(path).unwrap();
        let mut wrong = Vec::new();
        let mut n = 0;
        let mut skipped = 0;
        for line in data.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let (p, f, t) = (v[0].as_str().unwrap(), v[1].as_str().unwrap(), v[2].as_str().unwrap());
            let want = match &v[3] {
                serde_json::Value::Bool(true) => T,
                serde_json::Value::Bool(false) => F,
                _ => E,
            };
            n += 1;
            let got = match JsRegex::new(p, f) {
                Ok(re) => match re.is_match(t) {
                    Ok(b) => {
                        if b {
                            T
                        } else {
                            F
                        }
                    }
                    Err(Slow) => {
                        skipped += 1;
                        continue;
                    }
                },
                Err(e) if e.message.starts_with("Refused") || e.message.starts_with("Unsupported") => {
                    skipped += 1;
                    continue;
                }
                Err(_) => E,
            };
            if got != want {
                let how = JsRegex::new(p, f).map(|r| r.translated().to_string()).unwrap_or_else(|e| e.message);
                wrong.push(format!("{}  want {want:?} got {got:?}  {how}", serde_json::json!([p, f, t])));
            }
        }
        eprintln!("{n} cases, {skipped} refused, unsupported or slow");
        assert!(wrong.is_empty(), "{} of {n} differ:\n{}", wrong.len(), wrong.join("\n"));
    }
}
