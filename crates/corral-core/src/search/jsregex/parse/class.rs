//! Character classes: `[...]`, the `v` flag's set operations and strings, and property escapes.

use super::*;

impl<'a> Parser<'a> {
    /// `\d \D \s \S \w \W` (the letter is given, the index is past it).
    pub(super) fn class_escape_set(&self, c: u32) -> Set {
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
    pub(super) fn property(&mut self, negate: bool) -> Result<Set> {
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
    pub(super) fn class(&mut self) -> Result<Node> {
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

    pub(super) fn class_atom(&mut self) -> Result<ClassAtom> {
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
    pub(super) fn class_v_top(&mut self) -> Result<Node> {
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
    pub(super) fn class_v(&mut self) -> Result<ClassV> {
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

    pub(super) fn finish_v(&self, mut acc: ClassV, negate: bool) -> Result<ClassV> {
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
    pub(super) fn v_operand_or_range(&mut self) -> Result<(ClassV, bool)> {
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

    pub(super) fn is_set_escape(&self, k: usize) -> bool {
        matches!(
            self.s.get(k + 1).and_then(|&c| char::from_u32(c)),
            Some('d' | 'D' | 's' | 'S' | 'w' | 'W' | 'p' | 'P' | 'q')
        )
    }

    /// A nested class, `\q{..}`, a class escape, or one character.
    pub(super) fn v_operand(&mut self) -> Result<ClassV> {
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
    pub(super) fn v_char(&mut self) -> Result<u32> {
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

pub(super) fn push_string(acc: &mut ClassV, s: Vec<u32>) {
    if s.len() == 1 {
        acc.set.add(&Set::single(s[0]));
    } else {
        acc.strings.push(s);
    }
}

pub(super) fn v_intersect(a: ClassV, b: ClassV) -> ClassV {
    let strings = a.strings.iter().filter(|s| b.strings.contains(s)).cloned().collect();
    ClassV { set: a.set.intersect(&b.set), strings, may_strings: a.may_strings && b.may_strings }
}

pub(super) fn v_subtract(a: ClassV, b: ClassV) -> ClassV {
    let strings = a.strings.into_iter().filter(|s| !b.strings.contains(s)).collect();
    ClassV { set: a.set.difference(&b.set), strings, may_strings: a.may_strings }
}

/// Combining marks (Mn, Mc) may continue an identifier; `char` has no direct test for them.
pub(in crate::search::jsregex) fn is_mark(c: char) -> bool {
    pub(super) static MARKS: OnceLock<Set> = OnceLock::new();
    MARKS.get_or_init(|| property_set("M").unwrap_or_default()).contains(c as u32)
}

/// The code points of a Unicode property, through `regex-syntax`'s tables.
pub(super) fn property_set(name: &str) -> Option<Set> {
    use regex_syntax::hir::{Class, HirKind};
    pub(super) static CACHE: OnceLock<std::sync::Mutex<HashMap<String, Option<Set>>>> = OnceLock::new();
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
