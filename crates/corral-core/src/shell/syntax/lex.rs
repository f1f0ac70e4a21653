//! The lexer, part one: command lists, words and operators, as bash splits them. A word keeps
//! its text with quotes removed and where its placeholders stand; a finished simple command is
//! recorded (`reading.rs`) and goes to the template checks of `commands.rs`.

use super::commands::{assignment, command_position};
use super::Tok;
use super::{refuse, Case, Construct, List, Refusal, Scan, Why, Word, EXPANSION, FIELD, R};

impl Scan {
    /// A command list, up to its `)` when `in_parens` (or the end). Returns its placeholders.
    pub(super) fn list(&mut self, in_parens: bool, strict: Option<Why>) -> R<Vec<String>> {
        self.rec.lists += 1;
        let r = self.nested(|s| s.list_in(in_parens, strict));
        self.rec.lists -= 1;
        r
    }

    fn list_in(&mut self, in_parens: bool, strict: Option<Why>) -> R<Vec<String>> {
        let mut l = List {
            strict,
            words: Vec::new(),
            cur: Word::default(),
            in_word: false,
            redirect_next: false,
            cond: None,
            case: Vec::new(),
            fields: Vec::new(),
            input_next: false,
            start: self.i,
        };
        loop {
            let c = match self.tok() {
                None => {
                    if in_parens {
                        self.mark(Construct::Unterminated);
                    }
                    self.end_command(&mut l, "")?;
                    return Ok(l.fields);
                }
                Some(Tok::F(f)) => {
                    self.i += 1;
                    self.word_field(&mut l, &f)?;
                    continue;
                }
                Some(Tok::C(c)) => c,
            };
            if l.cond.is_some() && self.cond_token(&mut l, c)? {
                continue;
            }
            match c {
                ' ' | '\t' => {
                    self.i += 1;
                    self.end_word(&mut l)?;
                }
                '\n' => {
                    self.i += 1;
                    self.end_word(&mut l)?;
                    if !matches!(l.case.last(), Some(Case::Subject | Case::In | Case::Pattern)) {
                        self.end_command(&mut l, "\n")?;
                    }
                    self.heredoc_bodies()?;
                }
                '#' if !l.in_word => {
                    self.mark(Construct::Comment);
                    self.comment(&l.strict)?
                }
                '\\' => match self.t.get(self.i + 1).cloned() {
                    Some(Tok::F(f)) => return Err(refuse(&f, &l.strict, Why::AfterBackslash)),
                    Some(Tok::C('\n')) => self.i += 2,
                    Some(Tok::C(n)) => {
                        self.i += 2;
                        l.push(n);
                        l.cur.quoted = true;
                    }
                    None => {
                        self.mark(Construct::TrailingBackslash);
                        self.i += 1
                    }
                },
                '\'' => {
                    self.i += 1;
                    let s = self.single(&l.strict, false)?;
                    l.cur.text.push_str(&s);
                    l.in_word = true;
                    l.cur.quoted = true;
                }
                '"' => {
                    self.i += 1;
                    self.rec.expanded = false;
                    let s = self.dquote(&l.strict)?;
                    l.cur.expanded |= self.rec.expanded;
                    l.cur.text.push_str(&s);
                    l.in_word = true;
                    l.cur.quoted = true;
                }
                '`' => {
                    self.mark(Construct::Backtick);
                    self.i += 1;
                    self.backticks(&l.strict)?;
                    l.push(EXPANSION);
                }
                '$' => self.dollar_in_word(&mut l)?,
                '(' => self.open_paren(&mut l)?,
                ')' => {
                    self.mark(Construct::Paren(')'));
                    self.i += 1;
                    self.end_word(&mut l)?; // `esac)` ends the case first
                    if let Some(state @ Case::Pattern) = l.case.last_mut() {
                        *state = Case::Body;
                        continue;
                    }
                    self.end_command(&mut l, ")")?;
                    if in_parens {
                        return Ok(l.fields);
                    }
                }
                '<' | '>' => self.angle(&mut l, c)?,
                ';' | '&' | '|' => self.operator(&mut l, c)?,
                _ => {
                    match c {
                        '{' | '}' => self.mark(Construct::Brace(c)),
                        '~' if !l.in_word => l.cur.expanded = true, // tilde expansion
                        '*' | '?' | '[' => {
                            l.cur.glob_start |= l.cur.text.is_empty();
                            l.cur.glob = true;
                        }
                        _ => {}
                    }
                    self.i += 1;
                    l.push(c);
                }
            }
        }
    }

    /// A placeholder in a word of `l`.
    pub(super) fn word_field(&mut self, l: &mut List, f: &str) -> R {
        if let Some(why) = &l.strict {
            return Err(Refusal::new(f, why.clone()));
        }
        let text = &l.cur.text;
        if let Some(d) = text.rfind('$') {
            let name = &text[d + 1..];
            if name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(Refusal::new(f, Why::AfterDollar));
            }
        }
        if let Some(open) = text.rfind('[') {
            let before = &text[..open];
            let ident = before.is_empty()
                || (before.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && before.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            if ident && !text[open..].contains(']') {
                return Err(Refusal::new(f, Why::Arithmetic("an array subscript".into())));
            }
        }
        self.first_field.get_or_insert_with(|| f.to_string());
        l.cur.fields.push((f.to_string(), Some(l.cur.text.len())));
        l.push(FIELD);
        l.fields.push(f.to_string());
        Ok(())
    }

    /// Ends the word being read, if any, and files it.
    pub(super) fn end_word(&mut self, l: &mut List) -> R {
        if !l.in_word {
            return Ok(());
        }
        l.in_word = false;
        let mut w = std::mem::take(&mut l.cur);
        if std::mem::take(&mut l.redirect_next) {
            w.redirect = true;
            w.input = std::mem::take(&mut l.input_next);
        }
        if w.redirect {
            l.words.push(w);
            return Ok(());
        }
        if let Some(start) = l.cond {
            let end = !w.quoted && w.text == "]]";
            l.words.push(w);
            if end {
                let n = l.words.len();
                self.check_cond(&l.words[start + 1..n - 1])?;
                l.cond = None;
            }
            return Ok(());
        }
        match l.case.last_mut() {
            Some(state @ Case::Subject) => *state = Case::In,
            Some(state @ Case::In) => *state = Case::Pattern,
            Some(Case::Pattern) if !w.quoted && w.text == "esac" => {
                l.case.pop();
            }
            Some(Case::Pattern) => {}
            _ => {
                if !w.quoted && command_position(&l.words) {
                    if matches!(w.text.as_str(), "case" | "[[" | "for" | "select" | "coproc")
                        || super::commands::RESERVED.contains(&w.text.as_str())
                    {
                        self.mark(Construct::Compound(w.text.clone()));
                    }
                    match w.text.as_str() {
                        "case" => {
                            l.case.push(Case::Subject);
                            return Ok(());
                        }
                        "esac" if l.case.last() == Some(&Case::Body) => {
                            l.case.pop();
                            return Ok(());
                        }
                        "[[" => l.cond = Some(l.words.len()),
                        _ => {}
                    }
                }
                l.words.push(w);
            }
        }
        Ok(())
    }

    /// Ends the simple command being read; `op` is the operator just read after it.
    pub(super) fn end_command(&mut self, l: &mut List, op: &'static str) -> R {
        self.end_word(l)?;
        if std::mem::take(&mut l.redirect_next) {
            self.mark(Construct::MissingFile);
        }
        l.input_next = false;
        let end = self.i.saturating_sub(op.len()).max(l.start);
        if let Some(start) = l.cond.take() {
            self.check_cond(&l.words[start + 1..])?;
        }
        let words = std::mem::take(&mut l.words);
        self.record(&words, l.start, end, op);
        l.start = self.i;
        self.check_command(&words)
    }

    /// In `[[ … ]]`, `(`, `)`, `!`, `<`, `>`, `&&` and `||` are words and a line break is a blank.
    pub(super) fn cond_token(&mut self, l: &mut List, c: char) -> R<bool> {
        let op = match c {
            '&' | '|' if self.c(1) == Some(c) => 2,
            '(' | ')' | '!' | '<' | '>' => 1,
            '\n' => {
                self.i += 1;
                self.end_word(l)?;
                return Ok(true);
            }
            _ => return Ok(false),
        };
        self.end_word(l)?;
        for _ in 0..op {
            l.push(c);
        }
        self.i += op;
        self.end_word(l)?;
        Ok(true)
    }

    pub(super) fn open_paren(&mut self, l: &mut List) -> R {
        self.mark(Construct::Paren('('));
        if !l.in_word && self.c(1) == Some('(') {
            self.i += 2;
            return self.arith("((…))", l.strict.clone(), ')');
        }
        self.i += 1;
        if l.case.last() == Some(&Case::Pattern) {
            return Ok(()); // the optional '(' before a pattern
        }
        if l.in_word && l.cur.text.ends_with('=') {
            if let Some((name, _)) = assignment(&l.cur.text) {
                // name=( … ): the elements are words; a `[k]=v` element's subscript is refused
                let fields = self.list(true, l.strict.clone())?;
                if let Some(f) = fields.first() {
                    self.tainted.push((name, f.clone()));
                    l.cur.fields.push((f.clone(), None));
                }
                l.fields.extend(fields);
                l.push(EXPANSION);
                return Ok(());
            }
        }
        // a subshell, or a function's `()`: what came before is a command of its own
        self.end_command(l, "(")?;
        let fields = self.list(true, l.strict.clone())?;
        l.fields.extend(fields);
        l.start = self.i;
        Ok(())
    }

    pub(super) fn dollar_in_word(&mut self, l: &mut List) -> R {
        self.mark(Construct::Dollar);
        self.rec.expanded = false;
        let r = self.dollar_word(l);
        l.cur.expanded |= self.rec.expanded;
        r
    }

    fn dollar_word(&mut self, l: &mut List) -> R {
        match self.c(1) {
            Some('\'') => {
                self.i += 2;
                let s = self.single(&l.strict, true)?;
                l.cur.text.push_str(&s);
                l.cur.quoted = true;
                l.in_word = true;
            }
            Some('"') => {
                self.i += 2;
                let s = self.dquote(&l.strict)?;
                l.cur.text.push_str(&s);
                l.cur.quoted = true;
                l.in_word = true;
            }
            _ => match self.expansion(&l.strict)? {
                Some((text, fields)) => {
                    l.cur.fields.extend(fields.iter().map(|f| (f.clone(), None)));
                    l.fields.extend(fields);
                    l.cur.text.push_str(&text);
                    l.cur.expanded = true;
                    l.in_word = true;
                }
                None => {
                    // `$name`, `$1`, `$?`…; a lone `$` stays a `$`
                    self.i += 1;
                    l.push('$');
                }
            },
        }
        Ok(())
    }

    /// `<`/`>`: a process substitution `<(…)`, a here-document, a here-string or a redirection,
    /// whose target word is not an argument of the command.
    pub(super) fn angle(&mut self, l: &mut List, c: char) -> R {
        if self.c(1) == Some('(') {
            self.mark(Construct::Redirect(if c == '<' { "<(" } else { ">(" }));
            self.i += 2;
            let fields = self.list(true, l.strict.clone())?;
            l.cur.fields.extend(fields.iter().map(|f| (f.clone(), None)));
            l.fields.extend(fields);
            l.push(EXPANSION);
            return Ok(());
        }
        if l.in_word && !l.cur.quoted && l.cur.text.chars().all(|c| c.is_ascii_digit()) {
            l.cur.redirect = true; // the fd of `2>`
        }
        self.end_word(l)?;
        if l.redirect_next {
            self.mark(Construct::MissingFile);
        }
        let (n1, n2) = (self.c(1), self.c(2));
        match (c, n1, n2) {
            ('>', ..) => self.mark(Construct::Output),
            ('<', Some('<'), Some('<')) => self.mark(Construct::Redirect("<<<")),
            ('<', Some('<'), _) => self.mark(Construct::Redirect("<<")),
            ('<', Some('>'), _) => self.mark(Construct::Redirect("<>")),
            ('<', Some('&'), _) => self.mark(Construct::Redirect("<&")),
            ('<', Some('|'), _) => self.mark(Construct::Redirect("<|")),
            _ => {
                self.mark(Construct::Input);
                l.input_next = true
            }
        }
        if c == '<' && n1 == Some('<') && n2 != Some('<') {
            self.i += 2;
            let strip_tabs = self.c(0) == Some('-');
            self.i += usize::from(strip_tabs);
            return self.heredoc_delimiter(strip_tabs);
        }
        self.i += 1;
        while matches!(self.c(0), Some('<' | '>' | '&' | '|')) {
            self.i += 1;
        }
        l.redirect_next = true;
        Ok(())
    }

    pub(super) fn operator(&mut self, l: &mut List, c: char) -> R {
        self.end_word(l)?;
        let op = match (c, self.c(1), self.c(2)) {
            (';', Some(';'), Some('&')) => ";;&",
            (';', Some(';'), _) => ";;",
            (';', Some('&'), _) => ";&",
            ('&', Some('&'), _) => "&&",
            ('|', Some('|'), _) => "||",
            ('|', Some('&'), _) => "|&",
            ('&', Some('>'), _) => {
                // &> and &>>: a redirection of both streams
                self.mark(Construct::Output);
                self.i += 2 + usize::from(self.c(2) == Some('>'));
                l.redirect_next = true;
                return Ok(());
            }
            (';', ..) => ";",
            ('&', ..) => "&",
            _ => "|",
        };
        match op {
            ";;&" | ";;" | ";&" => self.mark(Construct::CaseEnd(op)),
            "|&" => self.mark(Construct::PipeBoth),
            "&" => self.mark(Construct::Background),
            _ => self.mark(Construct::Operator(op)),
        }
        self.i += op.len();
        match l.case.last().copied() {
            Some(Case::Pattern) if op == "|" => return Ok(()),
            Some(Case::Body) if op.starts_with(";;") || op == ";&" => {
                self.end_command(l, op)?;
                *l.case.last_mut().unwrap() = Case::Pattern;
                return Ok(());
            }
            _ => {}
        }
        self.end_command(l, op)
    }
}
