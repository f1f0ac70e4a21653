//! The command-level half of the shell template check (see `placeholders.rs`): the builtins
//! that read an argument as arithmetic, as code or as a variable name (whose subscript bash
//! evaluates: `unset 'a[$(id)]'` runs `id`), the arithmetic operators of `[[ … ]]`, and the
//! variables that carry a placeholder's value into arithmetic.

use super::{Refusal, Scan, Why, Word, FIELD, R};

/// Words that may come before a command's name.
pub(super) const RESERVED: &[&str] =
    &["!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time", "function"];

/// The operators of `[[ … ]]` that evaluate both sides as arithmetic.
const ARITH_TESTS: &[&str] = &["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];

/// `name=`, `name+=` or `name[sub]=` at the start of `text`: the name and the subscript text.
pub(super) fn assignment(text: &str) -> Option<(String, Option<String>)> {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    let name = &text[..end];
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return None;
    }
    let mut rest = &text[end..];
    let mut sub = None;
    if let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']')?;
        sub = Some(r[..close].to_string());
        rest = &r[close + 1..];
    }
    (rest.starts_with('=') || rest.starts_with("+=")).then(|| (name.to_string(), sub))
}

/// Whether the next word of `words` stands where a command's name does.
pub(super) fn command_position(words: &[Word]) -> bool {
    words
        .iter()
        .filter(|w| !w.redirect)
        .all(|w| (!w.quoted && RESERVED.contains(&w.text.as_str())) || assignment(&w.text).is_some())
}

fn first_field<'a>(words: impl IntoIterator<Item = &'a Word>) -> Option<&'a str> {
    words.into_iter().flat_map(|w| w.fields.iter()).map(|(f, _)| f.as_str()).next()
}

/// Identifiers (`n`, `$n`, `${n}`) in arithmetic text.
fn identifiers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = None;
    let mut prev = ' ';
    for (i, c) in text.char_indices() {
        let word = c.is_ascii_alphanumeric() || c == '_';
        match start {
            Some(s) if !word => {
                out.push(&text[s..i]);
                start = None;
            }
            None if (c.is_ascii_alphabetic() || c == '_') && !(prev.is_ascii_alphanumeric() || prev == '_') => {
                start = Some(i)
            }
            _ => {}
        }
        prev = c;
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out
}

/// Whether arithmetic text names a positional parameter: `$1`, `${1}`, `$@`, `$*`.
fn positional(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == b'$' && {
            let next = if b.get(i + 1) == Some(&b'{') { b.get(i + 2) } else { b.get(i + 1) };
            next.is_some_and(|c| c.is_ascii_digit() || *c == b'@' || *c == b'*')
        }
    })
}

impl Scan {
    /// A simple command's checks, its words read as bash would: assignments and reserved words
    /// first, then the command's name (`command`/`builtin` skipped) and its arguments.
    pub(super) fn check_command(&mut self, words: &[Word]) -> R {
        let all = words.iter().filter(|w| !w.redirect).collect::<Vec<_>>();
        let mut k = 0;
        while let Some(w) = all.get(k) {
            if let Some((name, sub)) = assignment(&w.text) {
                self.assigned(&name, sub, w);
            } else if w.quoted || !RESERVED.contains(&w.text.as_str()) {
                break;
            }
            k += 1;
        }
        while all.get(k).is_some_and(|w| w.text == "command" || w.text == "builtin") {
            k += 1;
        }
        let Some(cmd) = all.get(k) else { return Ok(()) };
        let args = &all[k + 1..];
        let name = cmd.text.as_str();
        let refuse = |why: Why| first_field(args.iter().copied()).map(|f| Err(Refusal::new(f, why)));
        match name {
            "let" => {
                refuse(Why::Arithmetic("let".into())).unwrap_or(Ok(()))?;
                self.arith.extend(args.iter().map(|w| w.text.clone()));
            }
            "eval" | "trap" => refuse(Why::Evaluated(name.into())).unwrap_or(Ok(()))?,
            "unset" => refuse(Why::VariableName(name.into())).unwrap_or(Ok(()))?,
            "mapfile" | "readarray" => {
                refuse(Why::VariableName(name.into())).unwrap_or(Ok(()))?;
                self.read_vars.push("MAPFILE".into());
                self.read_vars.extend(args.iter().map(|w| w.text.clone()));
            }
            "declare" | "typeset" | "local" | "export" | "readonly" => self.declaration(name, args)?,
            "read" => self.read(args)?,
            "printf" | "test" | "[" | "wait" => {
                let flag = if name == "wait" { "-p" } else { "-v" };
                for pair in args.windows(2).filter(|p| p[0].text == flag) {
                    if let Some(f) = first_field([pair[1]]) {
                        return Err(Refusal::new(f, Why::VariableName(format!("{name} {flag}"))));
                    }
                    self.read_vars.push(pair[1].text.clone());
                }
            }
            "getopts" => {
                if let Some(var) = args.get(1) {
                    if let Some(f) = first_field([*var]) {
                        return Err(Refusal::new(f, Why::VariableName(name.into())));
                    }
                    self.read_vars.push(var.text.clone());
                }
            }
            "for" | "select" if args.len() >= 2 && args[1].text == "in" => {
                if let Some(f) = first_field(args[2..].iter().copied()) {
                    self.tainted.push((args[0].text.clone(), f.to_string()));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `name=value` (also `name[sub]=`, `name+=`, `name=(…)`): the subscript is arithmetic, and
    /// a name given a placeholder's value is followed.
    fn assigned(&mut self, name: &str, sub: Option<String>, w: &Word) {
        self.arith.extend(sub);
        if let Some(f) = first_field([w]) {
            self.tainted.push((name.to_string(), f.to_string()));
        }
    }

    /// `declare`, `local`, `export`…: a placeholder in a name (or an option) is refused; with `-i`
    /// the values are arithmetic too.
    fn declaration(&mut self, cmd: &str, args: &[&Word]) -> R {
        let option =
            |c: char| args.iter().any(|w| w.text.starts_with('-') && w.text.contains(c) && w.fields.is_empty());
        let integer = option('i');
        // `declare -n ref=value`: the value is a variable's name, subscript and all
        let nameref = option('n') && matches!(cmd, "declare" | "typeset" | "local");
        for w in args {
            let eq = w.text.find('=');
            let name_end = eq.unwrap_or(w.text.len());
            let in_name = w.fields.iter().find(|(_, at)| at.map_or(eq.is_none(), |a| a < name_end));
            if let Some((f, _)) = in_name {
                return Err(Refusal::new(f, Why::VariableName(cmd.into())));
            }
            if eq.is_none() && (w.text.starts_with('-') || w.text.starts_with('+')) {
                continue;
            }
            let name = w.text[..name_end].trim_end_matches('+');
            let (name, sub) = match assignment(&format!("{name}=")) {
                Some(a) => a,
                None => (name.to_string(), None),
            };
            match first_field([*w]) {
                Some(f) if nameref => return Err(Refusal::new(f, Why::VariableName(format!("{cmd} -n")))),
                Some(f) if integer => {
                    return Err(Refusal::new(f, Why::Arithmetic(format!("an integer variable ({cmd} -i)"))))
                }
                Some(f) => self.tainted.push((name.clone(), f.to_string())),
                None => {}
            }
            self.arith.extend(sub);
            if integer {
                self.int_vars.push(name);
            }
        }
        Ok(())
    }

    /// `read`: its names may hold no placeholder, and what they read may be a placeholder's value
    /// (`read n <<< {x}`, `echo {x} | while read n`), so they count as holding one.
    fn read(&mut self, args: &[&Word]) -> R {
        let mut names = Vec::new();
        let mut k = 0;
        while let Some(w) = args.get(k) {
            k += 1;
            let mut name = Some(*w);
            if w.text.len() >= 2 && w.text.starts_with('-') && !w.quoted && w.fields.is_empty() {
                name = None;
                if w.text.ends_with('a') {
                    name = args.get(k).copied(); // -a name
                    k += 1;
                } else if w.text.len() == 2 && "dinNptu".contains(&w.text[1..]) {
                    k += 1; // the option's value
                }
            }
            if let Some(n) = name {
                if let Some(f) = first_field([n]) {
                    return Err(Refusal::new(f, Why::VariableName("read".into())));
                }
                names.push(n.text.clone());
            }
        }
        self.read_vars.extend(names);
        Ok(())
    }

    /// The words between `[[` and `]]`: both sides of `-eq`… are arithmetic, `-v` takes a name.
    pub(super) fn check_cond(&mut self, words: &[Word]) -> R {
        for (k, w) in words.iter().enumerate() {
            if w.quoted {
                continue;
            }
            if ARITH_TESTS.contains(&w.text.as_str()) {
                for side in [k.checked_sub(1), Some(k + 1)].into_iter().flatten().filter_map(|s| words.get(s)) {
                    if let Some(f) = first_field([side]) {
                        return Err(Refusal::new(f, Why::Arithmetic(format!("[[ … {} … ]]", w.text))));
                    }
                    self.arith.push(side.text.clone());
                }
            } else if w.text == "-v" {
                if let Some(f) = words.get(k + 1).and_then(|n| first_field([n])) {
                    return Err(Refusal::new(f, Why::VariableName("[[ -v ]]".into())));
                }
            }
        }
        Ok(())
    }

    /// Last: no variable holding a placeholder's value is named in arithmetic or is an integer.
    pub(super) fn finish(&mut self) -> R {
        if let Some(f) = &self.first_field {
            // what `read`, `mapfile`, `printf -v`… set may have come from a placeholder
            let read = std::mem::take(&mut self.read_vars).into_iter().map(|v| (v, f.clone()));
            self.tainted.extend(read);
        }
        for text in &self.arith {
            let text = text.replace(FIELD, " ");
            for id in identifiers(&text) {
                if let Some((var, f)) = self.tainted.iter().find(|(v, _)| v == id) {
                    return Err(Refusal::new(f, Why::ReachesArithmetic(format!("${var}"))));
                }
            }
            if let (true, Some(f)) = (positional(&text), &self.first_field) {
                return Err(Refusal::new(f, Why::ReachesArithmetic("a positional parameter ($1…)".into())));
            }
        }
        for (var, f) in &self.tainted {
            if self.int_vars.contains(var) {
                return Err(Refusal::new(f, Why::IntegerVariable(var.clone())));
            }
        }
        Ok(())
    }
}
