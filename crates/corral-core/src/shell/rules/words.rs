//! The words of a command line: as `sh` reads them, as `cmd.exe` (or a program splitting its own
//! arguments) could, and the unquoted globs among them.

/// The words of a line as `sh` reads them: quotes removed, a backslash escaping the next
/// character (inside double quotes, only `$`, `` ` ``, `"`, `\` and newline).
pub(super) fn words_sh(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '\'' => {
                in_word = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    cur.push(n);
                }
            }
            '"' => {
                in_word = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '\\' => match chars.peek() {
                            Some(&e) if matches!(e, '$' | '`' | '"' | '\\' | '\n') => {
                                cur.push(e);
                                chars.next();
                            }
                            _ => cur.push('\\'),
                        },
                        _ => cur.push(n),
                    }
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The words of a line as `cmd.exe` (or a program splitting its own arguments) could read them:
/// both kinds of quotes removed, backslashes kept (they are path separators there).
pub(super) fn words_plain(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (c, quote) {
            ('"' | '\'', None) => {
                quote = Some(c);
                in_word = true;
            }
            (c, Some(q)) if c == q => quote = None,
            (' ' | '\t' | '\n' | '\r', None) => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            _ => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The first word of `line` (after the command) that starts with an unquoted, unescaped `*`, `?`
/// or `[`: sh expands it to file names, and a file named `-x` or `--flag=…` then reaches the
/// program as an option. `./*` expands to `./-x`, which is safe. Conservative on purpose: it is
/// decided on the line alone, so a file created between the check and the run changes nothing.
pub(super) fn glob_words(line: &str) -> Vec<String> {
    let mut chars = line.chars().peekable();
    let mut words = 0usize;
    let mut at_start = true;
    let mut all = Vec::new();
    let mut found: Option<String> = None;
    while let Some(c) = chars.next() {
        if let Some(w) = found.as_mut() {
            match c {
                ' ' | '\t' | '\n' | '\r' => {
                    all.extend(found.take());
                    at_start = true;
                }
                c => w.push(c),
            }
            continue;
        }
        match c {
            ' ' | '\t' | '\n' | '\r' => at_start = true,
            '*' | '?' | '[' if at_start && words > 0 => found = Some(c.to_string()),
            _ => {
                if at_start {
                    words += 1;
                    at_start = false;
                }
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '\'' => {
                        for n in chars.by_ref() {
                            if n == '\'' {
                                break;
                            }
                        }
                    }
                    '"' => {
                        while let Some(n) = chars.next() {
                            match n {
                                '"' => break,
                                '\\' => {
                                    chars.next();
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    all.extend(found);
    all
}
