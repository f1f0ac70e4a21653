//! Arguments that leave the working directory (`..`, `~`, absolute paths, globs that can expand to
//! `..`), and globs that can expand to an option.

use super::*;
use crate::shell::syntax::Reading;

/// Why an argument of `line` leaves the working directory, or `None`. Conservative: every
/// reading of the words (sh's, in every command of the line, or with backslashes as separators;
/// under `cmd` also with only double quotes as quotes, as cmd.exe and Windows programs split) is
/// checked.
pub(super) fn leaving_argument(line: &str, reading: &Reading, cmd: bool) -> Option<String> {
    let sh = reading.commands.iter().flat_map(|c| c.words.iter().chain(&c.inputs)).map(|w| &w.text);
    let windows = if cmd { words_cmd(line) } else { Vec::new() };
    sh.chain(words_plain(line).iter()).chain(windows.iter()).find_map(|w| leaving_word(w))
}

/// The places in a word where a path can start: the word, after each `=`, `,`, `@` and `:`, and
/// after the letters of a short flag (`-o../x`, `-I/usr`). The flag says whether a `//host`
/// URL authority may follow (after `:`).
pub(super) fn candidates(word: &str) -> Vec<(&str, bool)> {
    let mut out = vec![(word, false)];
    for (i, c) in word.char_indices() {
        match c {
            '=' | ',' | '@' => out.push((&word[i + 1..], false)),
            ':' => out.push((&word[i + 1..], true)),
            _ => {}
        }
    }
    if let Some(flag) = word.strip_prefix('-') {
        if !flag.starts_with('-') {
            let letters = flag.chars().take_while(|c| c.is_ascii_alphanumeric()).count();
            for k in 1..=letters {
                out.push((&flag[k..], false));
            }
        }
    }
    out
}

pub(super) fn leaving_word(word: &str) -> Option<String> {
    for (cand, after_colon) in candidates(word) {
        if cand.starts_with('~') {
            return Some("`~` is the home directory".to_string());
        }
        if cand.starts_with(['/', '\\']) {
            let b = cand.as_bytes();
            let url_authority =
                after_colon && b.len() > 2 && matches!(b[1], b'/' | b'\\') && !matches!(b[2], b'/' | b'\\');
            if !url_authority {
                return Some(format!("`{}` is an absolute path", show(cand)));
            }
        }
        let b = cand.as_bytes();
        if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            return Some(format!("`{}` names a drive", show(cand)));
        }
        for seg in cand.split(['/', '\\']) {
            let dots = seg.chars().filter(|c| *c == '.').count();
            if dots >= 2 && seg.chars().all(|c| c == '.' || c == ' ') {
                return Some("`..`".to_string());
            }
            if seg.contains(['*', '?', '[']) && glob_can_match_dots(seg) {
                return Some(format!("the glob `{}` can expand to `..`", show(seg)));
            }
        }
    }
    None
}

#[derive(Debug)]
pub(super) enum GlobEl {
    Lit(char),
    Any,
    Star,
    Class { negated: bool, ranges: Vec<(char, char)> },
}

impl GlobEl {
    fn matches(&self, c: char) -> bool {
        match self {
            GlobEl::Lit(l) => *l == c,
            GlobEl::Any => true,
            GlobEl::Star => true,
            GlobEl::Class { negated, ranges } => ranges.iter().any(|(a, b)| *a <= c && c <= *b) != *negated,
        }
    }
}

pub(super) fn parse_glob(seg: &str) -> Vec<GlobEl> {
    let chars: Vec<char> = seg.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => out.push(GlobEl::Star),
            '?' => out.push(GlobEl::Any),
            // A bracket holding a POSIX class (`[[:punct:]]`), an equivalence class (`[[=a=]]`) or
            // a collating symbol (`[[.-.]]`) is taken to match any character (`.[[:punct:]]` is
            // `..` to dash).
            '[' if let Some(close) = class_bracket_end(&chars, i) => {
                out.push(GlobEl::Class { negated: false, ranges: vec![('\0', char::MAX)] });
                i = close + 1;
                continue;
            }
            '[' => {
                let mut j = i + 1;
                let negated = j < chars.len() && matches!(chars[j], '!' | '^');
                if negated {
                    j += 1;
                }
                let start = j;
                let mut ranges = Vec::new();
                let mut closed = false;
                while j < chars.len() {
                    if chars[j] == ']' && j > start {
                        closed = true;
                        break;
                    }
                    if j + 2 < chars.len() && chars[j + 1] == '-' && chars[j + 2] != ']' {
                        ranges.push((chars[j], chars[j + 2]));
                        j += 3;
                    } else {
                        ranges.push((chars[j], chars[j]));
                        j += 1;
                    }
                }
                if closed {
                    out.push(GlobEl::Class { negated, ranges });
                    i = j + 1;
                    continue;
                }
                out.push(GlobEl::Lit('['));
            }
            c => out.push(GlobEl::Lit(c)),
        }
        i += 1;
    }
    out
}

/// Where the bracket expression opening at `chars[open]` ends, when it holds a `[:…:]`,
/// `[=…=]` or `[.….]` (read as sh reads them: the `]` inside such a part does not close it).
fn class_bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut j = open + 1;
    if matches!(chars.get(j), Some('!' | '^')) {
        j += 1;
    }
    let start = j;
    let mut has_class = false;
    while j < chars.len() {
        match (chars[j], chars.get(j + 1)) {
            ('[', Some(&d @ (':' | '=' | '.'))) => {
                let end = (j + 2..chars.len().saturating_sub(1)).find(|&k| chars[k] == d && chars[k + 1] == ']')?;
                has_class = true;
                j = end + 2;
            }
            (']', _) if j > start => return has_class.then_some(j),
            _ => j += 1,
        }
    }
    None
}

pub(super) fn glob_match(els: &[GlobEl], s: &[char]) -> bool {
    match els.first() {
        None => s.is_empty(),
        Some(GlobEl::Star) => (0..=s.len()).any(|k| glob_match(&els[1..], &s[k..])),
        Some(el) => !s.is_empty() && el.matches(s[0]) && glob_match(&els[1..], &s[1..]),
    }
}

/// Whether a glob segment can expand to `..` (or `...`). A leading dot must be matched
/// explicitly (a literal `.` or a class that admits `.`), as shells do; a class counts as
/// explicit here, to be safe with every shell.
pub(super) fn glob_can_match_dots(seg: &str) -> bool {
    let els = parse_glob(seg);
    let explicit = match els.first() {
        Some(GlobEl::Lit('.')) => true,
        Some(el @ GlobEl::Class { .. }) => el.matches('.'),
        _ => false,
    };
    explicit && ["..", "..."].iter().any(|d| glob_match(&els, &d.chars().collect::<Vec<_>>()))
}

/// Why an unquoted glob of `line` can reach the program as an option, or `None`. With the
/// command's working directory at hand, the first segment of each glob that starts with a
/// wildcard is expanded against its entries, as sh would; without it, such a glob is refused.
pub(super) fn option_glob(reading: &Reading, cwd: Option<&Path>) -> Option<String> {
    let words: Vec<&String> = reading
        .commands
        .iter()
        .flat_map(|c| c.words.iter().skip(1))
        .filter(|w| w.glob_start)
        .map(|w| &w.text)
        .collect();
    if words.is_empty() {
        return None;
    }
    let Some(cwd) = cwd else {
        return Some(format!(
            "the glob `{}` starts with a wildcard, so it can expand to a file name that starts with `-`",
            show(words[0])
        ));
    };
    let names: Vec<String> = match std::fs::read_dir(cwd) {
        Ok(entries) => entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => return Some(format!("the glob `{}` cannot be expanded to check it", show(words[0]))),
    };
    for word in &words {
        let first = word.split('/').next().unwrap_or(word);
        let els = parse_glob(first);
        if let Some(name) =
            names.iter().find(|n| n.starts_with('-') && glob_match(&els, &n.chars().collect::<Vec<_>>()))
        {
            return Some(format!("the glob `{}` expands to `{}`", show(word), show(name)));
        }
    }
    None
}
