//! Writing the tree out in the `regex` crate's syntax, every set spelled out as ranges; in
//! prefilter mode, a looser pattern for the whole-file search.

use super::*;

pub(super) struct Emitter {
    pub(super) f: Flags,
    pub(super) utf16: bool,
    pub(super) backtracking: bool,
    /// Writing the whole-file pre-filter instead of the matcher.
    pub(super) prefilter: bool,
    pub(super) out: String,
}

pub(super) fn push_char(out: &mut String, c: u32) {
    match char::from_u32(c) {
        Some(x) if x.is_ascii_alphanumeric() => out.push(x),
        _ => {
            out.push_str(&format!("\\u{{{c:X}}}"));
        }
    }
}

/// The set as a `regex` atom (a class or one escaped character), over real code points.
pub(super) fn set_atom(s: &Set) -> String {
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
pub(super) fn to_text_chars(s: &Set, utf16: bool) -> Set {
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
    pub(super) fn word_class(&self) -> String {
        let w = if self.f.unicode() && self.f.i { case_closure(&word_set(), self.f) } else { word_set() };
        set_atom(&w)
    }

    pub(super) fn set(&mut self, s: &Set) {
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

    pub(super) fn alternatives(&mut self, v: &[Node], lead: bool, trail: bool) {
        for (k, c) in v.iter().enumerate() {
            if k > 0 {
                self.out.push('|');
            }
            self.node(c, lead, trail);
        }
    }

    pub(super) fn node(&mut self, n: &Node, lead: bool, trail: bool) {
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
