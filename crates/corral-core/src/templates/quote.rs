//! POSIX shell quoting, as Python's `shlex.quote` does it: a non-empty word of only
//! `[A-Za-z0-9@%+=:,./_-]` is left as it is; anything else goes in single quotes, each `'` written
//! `'"'"'`. The shell reads the result back as exactly the one word it was.

/// `shlex.quote(s)`.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "@%+=:,./_-".contains(c)) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// One argument as a program started through `cmd.exe /d /s /c "…"` (a Windows host's shell)
/// receives it: quoted as the C runtime splits a command line (`CommandLineToArgvW`: `"` around
/// it, a `"` inside written `\"`, the backslashes before a `"` doubled), then every character
/// cmd.exe gives a meaning to escaped with `^`, the quotes too, so cmd.exe expands, splits and
/// redirects none of it and hands the program the text as it was. `None` for text cmd.exe would
/// read whatever the quoting: a line break ends its command line, and two `%` may name a variable
/// it expands (a caret before each does not stop every cmd.exe: Wine's expands `^%OS^%`).
pub fn quote_cmd(s: &str) -> Option<String> {
    if s.contains(['\n', '\r', '\0']) || s.matches('%').count() > 1 {
        return None;
    }
    let mut argv = String::from("\"");
    let mut backslashes = 0;
    for c in s.chars() {
        match c {
            '\\' => {
                backslashes += 1;
                continue;
            }
            '"' => argv.push_str(&"\\".repeat(backslashes * 2 + 1)),
            _ => argv.push_str(&"\\".repeat(backslashes)),
        }
        backslashes = 0;
        argv.push(c);
    }
    argv.push_str(&"\\".repeat(backslashes * 2));
    argv.push('"');
    let mut out = String::with_capacity(argv.len() * 2);
    for c in argv.chars() {
        if "()[]%!^\"`<>&|;, *?".contains(c) {
            out.push('^');
        }
        out.push(c);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a program receives from a cmd.exe command line (carets taken away outside quotes,
    /// cmd.exe in its quote state never), split as `CommandLineToArgvW` splits one argument.
    fn as_received(line: &str) -> String {
        // cmd.exe: with every `"` escaped it never enters a quote; `^x` is `x`.
        let mut unescaped = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '^' => unescaped.extend(chars.next()),
                '"' | '&' | '|' | '<' | '>' | '%' => panic!("cmd.exe would read {c:?} in {line}"),
                _ => unescaped.push(c),
            }
        }
        // The C runtime: one quoted argument.
        let inner = unescaped.strip_prefix('"').and_then(|u| u.strip_suffix('"')).expect("quoted");
        let (mut out, mut backslashes) = (String::new(), 0);
        for c in inner.chars() {
            match c {
                '\\' => backslashes += 1,
                '"' => {
                    assert!(backslashes % 2 == 1, "an unescaped quote ends the argument in {inner}");
                    out.push_str(&"\\".repeat(backslashes / 2));
                    out.push('"');
                    backslashes = 0;
                }
                _ => {
                    out.push_str(&"\\".repeat(backslashes));
                    backslashes = 0;
                    out.push(c);
                }
            }
        }
        assert!(backslashes % 2 == 0, "a closing quote escaped in {inner}");
        out.push_str(&"\\".repeat(backslashes / 2));
        out
    }

    #[test]
    fn quote_cmd_hands_the_program_the_text_and_cmd_exe_reads_nothing() {
        for s in [
            "",
            "plain",
            "a b",
            "x & echo pwned > p.txt",
            "100% & echo pwned > p.txt",
            "!x! ^",
            "\"quoted\" & calc",
            "ends with \\",
            "\\\"",
            "a\\\\\"b",
            "( ) [ ] ; , * ? ` ^ | < >",
            "echo 'x & y'",
        ] {
            let q = quote_cmd(s).unwrap();
            assert_eq!(as_received(&q), s, "through {q}");
        }
        assert_eq!(quote_cmd("a\nb"), None);
        assert_eq!(quote_cmd("a\rb"), None);
        assert_eq!(quote_cmd("%OS%"), None);
        assert_eq!(quote_cmd("50% and 50%"), None);
    }

    #[test]
    fn quote_follows_shlex() {
        assert_eq!(quote("abc-1.2/x_y@%+=:,"), "abc-1.2/x_y@%+=:,");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\"'\"'s'");
        assert_eq!(quote("$(id)"), "'$(id)'");
    }
}
