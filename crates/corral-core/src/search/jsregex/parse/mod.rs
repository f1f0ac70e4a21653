//! The parser: JavaScript regex syntax (with Annex B's lenient forms when neither `u` nor `v`
//! is set) into the tree. Character classes are in `class`.

use super::*;

mod class;

pub(super) use class::is_mark;

pub(super) fn is_syntax_char(c: u32) -> bool {
    matches!(
        char::from_u32(c),
        Some('^' | '$' | '\\' | '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|')
    )
}

pub(super) fn hex_val(c: u32) -> Option<u32> {
    char::from_u32(c).and_then(|c| c.to_digit(16))
}

pub(super) fn is_octal(c: Option<u32>) -> bool {
    matches!(c, Some(d) if (0x30..=0x37).contains(&d))
}

pub(super) fn is_digit(c: Option<u32>) -> bool {
    matches!(c, Some(d) if (0x30..=0x39).contains(&d))
}

pub(super) fn ch(c: char) -> u32 {
    c as u32
}

/// An item inside a class: one character (may start or end a range) or a set (`\d`, `\p{..}`).
pub(super) enum ClassAtom {
    Char(u32),
    Set(Set),
}

/// A `v`-mode class value: single characters and strings (from `\q{..}`).
#[derive(Default)]
pub(super) struct ClassV {
    pub(super) set: Set,
    pub(super) strings: Vec<Vec<u32>>,
    /// JavaScript's static MayContainStrings, which decides whether `[^..]` is allowed.
    pub(super) may_strings: bool,
}

pub(super) struct Parser<'a> {
    pub(super) s: Vec<u32>,
    pub(super) i: usize,
    pub(super) f: Flags,
    pub(super) pattern: &'a str,
    pub(super) flags: &'a str,
    /// Group names found by the pre-scan, in order, with their group numbers.
    pub(super) names: Vec<(Vec<u32>, usize)>,
    pub(super) ngroups: usize,
    /// Capturing groups opened so far.
    pub(super) opened: usize,
    /// Capturing groups open around the current position.
    pub(super) open: Vec<usize>,
    pub(super) lookbehind: usize,
    pub(super) depth: usize,
    pub(super) can_match_surrogate: bool,
    pub(super) seen_names: Vec<Vec<u32>>,
}

impl<'a> Parser<'a> {
    pub(super) fn parse(pattern: &'a str, flags: &'a str, f: Flags) -> Result<Ast> {
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

    pub(super) fn err(&self, why: &str) -> Error {
        Error::new(
            Code::InvalidPattern,
            format!("Invalid regular expression {}: {why}", show(self.pattern, self.flags)),
        )
    }

    pub(super) fn unsupported(&self, why: &str) -> Error {
        Error::new(
            Code::InvalidPattern,
            format!("Unsupported regular expression {}: {why}", show(self.pattern, self.flags)),
        )
    }

    pub(super) fn peek(&self) -> Option<u32> {
        self.s.get(self.i).copied()
    }

    pub(super) fn peek_at(&self, k: usize) -> Option<u32> {
        self.s.get(self.i + k).copied()
    }

    pub(super) fn at(&self, lit: &str) -> bool {
        lit.chars().enumerate().all(|(k, c)| self.s.get(self.i + k) == Some(&(c as u32)))
    }

    pub(super) fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c as u32) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// Counts capturing groups and collects group names, so that `\N` and `\k<name>` can be
    /// told apart from octal and identity escapes before the groups are reached.
    pub(super) fn prescan(&mut self) {
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
    pub(super) fn group_name(&self, mut k: usize) -> Option<(Vec<u32>, usize)> {
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
    pub(super) fn unicode_escape_at(&self, k: usize, braces: bool, pairs: bool) -> Option<(u32, usize)> {
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

    pub(super) fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.unsupported(&format!("groups and classes nest more than {MAX_DEPTH} deep")));
        }
        Ok(())
    }

    pub(super) fn disjunction(&mut self) -> Result<Node> {
        let mut alts = vec![self.alternative()?];
        while self.eat('|') {
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 { alts.pop().expect("one") } else { Node::Alt(alts) })
    }

    pub(super) fn alternative(&mut self) -> Result<Node> {
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

    pub(super) fn term(&mut self) -> Result<Node> {
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
    pub(super) fn braced(&self) -> Option<(u32, Option<u32>, usize)> {
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
    pub(super) fn no_quantifier(&self) -> Result<()> {
        match self.peek() {
            Some(c) if c == ch('*') || c == ch('+') || c == ch('?') => Err(self.err("nothing to repeat")),
            Some(c) if c == ch('{') && self.braced().is_some() => Err(self.err("nothing to repeat")),
            _ => Ok(()),
        }
    }

    pub(super) fn quantified(&mut self, atom: Node) -> Result<Node> {
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

    pub(super) fn atom(&mut self) -> Result<Node> {
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
    pub(super) fn set_node(&mut self, set: Set) -> Node {
        let set = if self.f.i { case_closure(&set, self.f) } else { set };
        self.note_surrogates(&set);
        Node::Set(set)
    }

    pub(super) fn note_surrogates(&mut self, set: &Set) {
        if set.intersects(SURR_LO, SURR_HI) {
            self.can_match_surrogate = true;
        }
    }

    pub(super) fn literal(&mut self, c: u32) -> Node {
        self.set_node(Set::single(c))
    }

    pub(super) fn group(&mut self) -> Result<Node> {
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
    pub(super) fn backref(&mut self, n: usize) -> Result<Node> {
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

    pub(super) fn atom_escape(&mut self) -> Result<Node> {
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
    pub(super) fn legacy_octal_or_digit(&mut self) -> u32 {
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
    pub(super) fn char_escape(&mut self, in_class: bool) -> Result<u32> {
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
}
