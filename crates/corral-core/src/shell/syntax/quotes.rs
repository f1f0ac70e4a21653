//! The lexer, part two: quotes, expansions (`$(…)`, `${…}`, `$((…))`,
//! backticks), comments and here-documents. Inside any of them but an unquoted `$(…)`, every
//! placeholder is refused (`strict`): the outermost construct names the reason.

use super::Tok;
use super::{refuse, Construct, Heredoc, Refusal, Scan, Why, EXPANSION, R};

/// Whether `$` followed by `c` expands a parameter (`$name`, `$1`, `$?`…).
pub(super) fn names_parameter(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '@' | '*' | '#' | '?' | '$' | '!' | '-')
}

impl Scan {
    /// `$(…)`, `$((…))`, `${…}` or `$[…]` at a `$`, with its text and placeholders; `None` when
    /// the `$` starts none of them. A placeholder right after the `$` is refused.
    pub(super) fn expansion(&mut self, strict: &Option<Why>) -> R<Option<(String, Vec<String>)>> {
        let r = self.expansion_in(strict)?;
        self.rec.expanded |= r.is_some() || self.c(1).is_some_and(names_parameter);
        Ok(r)
    }

    fn expansion_in(&mut self, strict: &Option<Why>) -> R<Option<(String, Vec<String>)>> {
        match self.t.get(self.i + 1).cloned() {
            Some(Tok::F(f)) => Err(refuse(&f, strict, Why::AfterDollar)),
            Some(Tok::C('(')) if self.c(2) == Some('(') => {
                self.i += 3;
                self.arith("$((…))", strict.clone(), ')')?;
                Ok(Some((EXPANSION.to_string(), Vec::new())))
            }
            Some(Tok::C('(')) => {
                self.mark(Construct::Substitution);
                self.i += 2;
                let fields = self.list(true, strict.clone())?;
                Ok(Some((EXPANSION.to_string(), fields)))
            }
            Some(Tok::C('{')) => {
                self.i += 2;
                let text = self.param(strict)?;
                Ok(Some((format!("${{{text}}}"), Vec::new())))
            }
            Some(Tok::C('[')) => {
                self.i += 2;
                self.arith("$[…]", strict.clone(), ']')?;
                Ok(Some((EXPANSION.to_string(), Vec::new())))
            }
            _ => Ok(None),
        }
    }

    pub(super) fn comment(&mut self, strict: &Option<Why>) -> R {
        while let Some(t) = self.tok() {
            match t {
                Tok::C('\n') => break,
                Tok::F(f) => return Err(refuse(&f, strict, Why::Comment)),
                Tok::C(_) => self.i += 1,
            }
        }
        Ok(())
    }

    /// After `'` (or `$'`, where `\` escapes as bash's ANSI-C quoting does): the text up to the
    /// closing quote.
    pub(super) fn single(&mut self, strict: &Option<Why>, escapes: bool) -> R<String> {
        let mut s = String::new();
        while let Some(t) = self.tok() {
            self.i += 1;
            match t {
                Tok::F(f) => return Err(refuse(&f, strict, Why::Quotes)),
                Tok::C('\'') => return Ok(s),
                Tok::C('\\') if escapes => match self.tok() {
                    Some(Tok::F(f)) => return Err(refuse(&f, strict, Why::Quotes)),
                    Some(Tok::C(_)) => self.ansi_c_escape(&mut s),
                    None => {}
                },
                Tok::C(c) => s.push(c),
            }
        }
        self.mark(Construct::Unterminated);
        Ok(s)
    }

    /// The escape after a `\` in `$'…'`, at the scan's position, as bash decodes it.
    fn ansi_c_escape(&mut self, s: &mut String) {
        let Some(c) = self.c(0) else { return };
        self.i += 1;
        let simple = match c {
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(c),
            _ => None,
        };
        if let Some(d) = simple {
            s.push(d);
            return;
        }
        let (radix, max) = match c {
            '0'..='7' => (8, 3),
            'x' => (16, 2),
            _ => {
                // `\cX`, and `\u`/`\U`, which bash decodes by the locale
                if matches!(c, 'c' | 'u' | 'U') {
                    self.mark(Construct::UnknownEscape);
                }
                s.push('\\');
                s.push(c);
                return;
            }
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(c);
        }
        while digits.len() < max {
            match self.c(0) {
                Some(d) if d.is_digit(radix) => {
                    digits.push(d);
                    self.i += 1;
                }
                _ => break,
            }
        }
        if digits.is_empty() {
            s.push('\\');
            s.push(c);
            return;
        }
        let n = u32::from_str_radix(&digits, radix).unwrap_or(0);
        // bash ends the word's text at a NUL byte, and above 0x7f these are raw bytes, which a
        // `String` does not hold.
        match char::from_u32(n) {
            Some(d) if n > 0 && n <= 0x7f => s.push(d),
            _ => self.mark(Construct::UnknownEscape),
        }
    }

    /// After `"`: the text up to the closing quote; expansions inside are scanned.
    pub(super) fn dquote(&mut self, strict: &Option<Why>) -> R<String> {
        self.nested(|s| s.dquote_in(strict))
    }

    fn dquote_in(&mut self, strict: &Option<Why>) -> R<String> {
        let strict = Some(strict.clone().unwrap_or(Why::Quotes));
        let mut s = String::new();
        while let Some(t) = self.tok() {
            match t {
                Tok::F(f) => return Err(refuse(&f, &strict, Why::Quotes)),
                Tok::C('"') => {
                    self.i += 1;
                    return Ok(s);
                }
                Tok::C('\\') => {
                    // only `$`, `` ` ``, `"`, `\` and a newline are escaped between double quotes
                    match self.t.get(self.i + 1) {
                        Some(Tok::F(f)) => return Err(refuse(f, &strict, Why::Quotes)),
                        Some(Tok::C('\n')) => {}
                        Some(Tok::C(n @ ('$' | '`' | '"' | '\\'))) => s.push(*n),
                        Some(Tok::C(n)) => {
                            s.push('\\');
                            s.push(*n);
                        }
                        None => {}
                    }
                    self.i += 2;
                }
                Tok::C('`') => {
                    self.mark(Construct::Backtick);
                    self.i += 1;
                    self.backticks(&strict)?;
                    s.push(EXPANSION);
                }
                Tok::C('$') => match self.quoted_dollar(&strict)? {
                    Some((text, _)) => s.push_str(&text),
                    None => {
                        self.i += 1;
                        s.push('$');
                    }
                },
                Tok::C(c) => {
                    self.i += 1;
                    s.push(c);
                }
            }
        }
        self.mark(Construct::Unterminated);
        Ok(s)
    }

    /// A `$` between double quotes.
    fn quoted_dollar(&mut self, strict: &Option<Why>) -> R<Option<(String, Vec<String>)>> {
        self.mark(Construct::DollarInQuotes);
        self.expansion(strict)
    }

    /// After `` ` ``: up to the next unescaped backquote, as bash finds it (quotes do not count).
    pub(super) fn backticks(&mut self, strict: &Option<Why>) -> R {
        let start = self.i;
        while let Some(t) = self.tok() {
            self.i += 1;
            match t {
                Tok::F(f) => return Err(refuse(&f, strict, Why::Backticks)),
                Tok::C('`') => {
                    self.rec.backticks.push((start, self.i - 1));
                    return Ok(());
                }
                Tok::C('\\') => {
                    if let Some(Tok::F(f)) = self.tok() {
                        return Err(refuse(&f, strict, Why::Backticks));
                    }
                    self.i += 1;
                }
                Tok::C(_) => {}
            }
        }
        self.mark(Construct::Unterminated);
        Ok(())
    }

    /// After `${`: up to its `}`. Its subscript or offsets (from the first `[` or `:`) are kept
    /// as arithmetic text; inside arithmetic, or for `${!v}`, the whole expansion is.
    pub(super) fn param(&mut self, strict: &Option<Why>) -> R<String> {
        self.nested(|s| s.param_in(strict))
    }

    fn param_in(&mut self, strict: &Option<Why>) -> R<String> {
        let strict = Some(strict.clone().unwrap_or(Why::ParamExpansion));
        let (mut text, mut closed) = (String::new(), false);
        while let Some(t) = self.tok() {
            match t {
                Tok::F(f) => return Err(refuse(&f, &strict, Why::ParamExpansion)),
                Tok::C('}') => {
                    self.i += 1;
                    closed = true;
                    break;
                }
                Tok::C('\\') => {
                    if let Some(Tok::F(f)) = self.t.get(self.i + 1) {
                        return Err(refuse(f, &strict, Why::ParamExpansion));
                    }
                    self.i += 2;
                }
                Tok::C(c @ ('\'' | '"' | '`' | '$')) => self.inner_quote(c, &strict, &mut text, false)?,
                Tok::C(c) => {
                    self.i += 1;
                    text.push(c);
                }
            }
        }
        if !closed {
            self.mark(Construct::Unterminated);
        }
        if self.arith_depth > 0 || text.starts_with('!') {
            // in arithmetic, or `${!v}`: v's value is a name, whose subscript bash evaluates
            self.arith.push(format!("${{{text}}}"));
        } else if let Some(p) = text.find(['[', ':']) {
            self.arith.push(text[p..].to_string());
        }
        Ok(text)
    }

    /// A quote, backticks or an expansion inside `${…}` or arithmetic, at `c`: expansions' text
    /// (and with `keep_dquoted`, double-quoted text) is added to `text`.
    fn inner_quote(&mut self, c: char, strict: &Option<Why>, text: &mut String, keep_dquoted: bool) -> R {
        match c {
            '\'' => {
                self.i += 1;
                self.single(strict, false)?;
            }
            '"' => {
                self.i += 1;
                let s = self.dquote(strict)?;
                if keep_dquoted {
                    text.push_str(&s);
                }
            }
            '`' => {
                self.i += 1;
                self.backticks(strict)?;
            }
            _ => match self.expansion(strict)? {
                Some((inner, _)) => text.push_str(&inner),
                None => {
                    self.i += 1;
                    text.push('$');
                }
            },
        }
        Ok(())
    }

    /// After `((`, `$((` or `$[`: up to the matching `))` or `]`.
    pub(super) fn arith(&mut self, what: &str, strict: Option<Why>, close: char) -> R {
        self.nested(|s| s.arith_in(what, strict, close))
    }

    fn arith_in(&mut self, what: &str, strict: Option<Why>, close: char) -> R {
        let strict = Some(strict.unwrap_or(Why::Arithmetic(what.to_string())));
        let open = if close == ')' { '(' } else { '[' };
        let (mut depth, mut text, mut closed) = (0usize, String::new(), false);
        self.arith_depth += 1;
        while let Some(t) = self.tok() {
            match t {
                Tok::F(f) => return Err(refuse(&f, &strict, Why::Arithmetic(what.to_string()))),
                Tok::C(c) if c == close && depth == 0 => {
                    self.i += 1;
                    if close == ')' && self.c(0) == Some(')') {
                        self.i += 1;
                    }
                    closed = true;
                    break;
                }
                Tok::C('\\') => {
                    if let Some(Tok::F(f)) = self.t.get(self.i + 1) {
                        return Err(refuse(f, &strict, Why::Arithmetic(what.to_string())));
                    }
                    self.i += 2;
                }
                Tok::C(c @ ('\'' | '"' | '`' | '$')) => self.inner_quote(c, &strict, &mut text, true)?,
                Tok::C(c) => {
                    if c == open {
                        depth += 1;
                    } else if c == close {
                        depth -= 1;
                    }
                    self.i += 1;
                    text.push(c);
                }
            }
        }
        self.arith_depth -= 1;
        if !closed {
            self.mark(Construct::Unterminated);
        }
        self.arith.push(text);
        Ok(())
    }

    /// After `<<` or `<<-`: the delimiter word, quoted when any part of it is.
    pub(super) fn heredoc_delimiter(&mut self, strip_tabs: bool) -> R {
        while matches!(self.c(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        let (mut delimiter, mut quoted, mut quote) = (String::new(), false, None);
        while let Some(t) = self.tok() {
            match (t, quote) {
                (Tok::F(f), _) => return Err(Refusal::new(&f, Why::HeredocDelimiter)),
                (Tok::C(c), Some(q)) if c == q => quote = None,
                (Tok::C('\\'), q) if q != Some('\'') => {
                    quoted = true;
                    match self.t.get(self.i + 1) {
                        Some(Tok::F(f)) => return Err(Refusal::new(f, Why::HeredocDelimiter)),
                        Some(Tok::C(n)) => delimiter.push(*n),
                        None => {}
                    }
                    self.i += 1;
                }
                (Tok::C(c), Some(_)) => delimiter.push(c),
                (Tok::C(q @ ('\'' | '"')), None) => {
                    quoted = true;
                    quote = Some(q);
                }
                (Tok::C(c), None) if " \t\n;&|()<>".contains(c) => break,
                (Tok::C(c), None) => delimiter.push(c),
            }
            self.i += 1;
        }
        self.heredocs.push(Heredoc { delimiter, strip_tabs, quoted });
        Ok(())
    }

    /// At the start of a line: the bodies of the here-documents begun on the line before. Any
    /// placeholder in a body is refused; the lines are read as bash reads them to find the end (an
    /// unquoted document's `\`+newline joins lines before the delimiter is looked for).
    pub(super) fn heredoc_bodies(&mut self) -> R {
        for h in std::mem::take(&mut self.heredocs) {
            let body = self.i;
            while self.i < self.t.len() {
                let (mut line, mut field) = (String::new(), None::<String>);
                while let Some(t) = self.tok() {
                    self.i += 1;
                    match t {
                        Tok::C('\n') => break,
                        Tok::F(f) => {
                            field.get_or_insert(f);
                        }
                        Tok::C('\\') if !h.quoted => match self.tok() {
                            Some(Tok::C('\n')) => self.i += 1,
                            Some(Tok::C(n)) => {
                                line.push('\\');
                                line.push(n);
                                self.i += 1;
                            }
                            Some(Tok::F(f)) => {
                                field.get_or_insert(f);
                                self.i += 1;
                            }
                            None => line.push('\\'),
                        },
                        Tok::C(c) => line.push(c),
                    }
                }
                if let Some(f) = field {
                    let why = if h.quoted { Why::QuotedHeredocBody } else { Why::HeredocBody };
                    return Err(Refusal::new(&f, why));
                }
                let cmp = if h.strip_tabs { line.trim_start_matches('\t') } else { &line };
                if cmp == h.delimiter {
                    break;
                }
            }
            if !h.quoted {
                self.body_expansions(body, self.i)?;
            }
        }
        Ok(())
    }

    /// The substitutions of an unquoted here-document's body, which bash runs: read as between
    /// double quotes, so the commands inside are recorded like any other.
    fn body_expansions(&mut self, start: usize, end: usize) -> R {
        let resume = self.i;
        self.i = start;
        self.rec.lists += 1;
        let strict = Some(Why::HeredocBody);
        while self.i < end {
            match self.c(0) {
                Some('\\') => self.i += 2,
                Some('`') => {
                    self.i += 1;
                    self.backticks(&strict)?;
                }
                Some('$') => {
                    if self.expansion(&strict)?.is_none() {
                        self.i += 1;
                    }
                }
                _ => self.i += 1,
            }
        }
        self.rec.lists -= 1;
        if self.i > end {
            self.mark(Construct::Unterminated);
        }
        self.i = resume;
        Ok(())
    }
}
