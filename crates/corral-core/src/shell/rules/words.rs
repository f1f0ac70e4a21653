//! The words of a command line as `cmd.exe` (or a program splitting its own arguments) could read
//! them. How `sh` reads a line is the shell-syntax module's (`shell::syntax`).

/// The words of a line as `cmd.exe` and the Windows C runtime split them: only double quotes
/// quote (a `'` is a character), `\"` is a literal quote, other backslashes are kept.
pub(super) fn words_cmd(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let (mut in_word, mut quoted) = (false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
                in_word = true;
            }
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            ' ' | '\t' | '\n' | '\r' if !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
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
