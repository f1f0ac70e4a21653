//! Finding a chunk's lines in a file, as codex's `seek_sequence` does: four passes, each more
//! forgiving than the last, and the first that finds the lines wins.
//!
//! The passes: exact; ignoring trailing whitespace; ignoring whitespace at both ends; and also
//! with Unicode dashes, quotes and spaces read as their ASCII forms (a model that types `—` or
//! `’` where the file has `-` or `'` still finds its place).

/// Where `pattern` starts in `lines`, searching from `start`; with `eof` (a chunk marked
/// `*** End of File`), only at the end of the file. An empty pattern is found at `start`.
pub fn seek(lines: &[String], pattern: &[String], start: usize, eof: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last = lines.len() - pattern.len();
    // Never before `start`: a chunk cannot land inside the one before it.
    let from = if eof { last.max(start) } else { start };
    let passes: [fn(&str, &str) -> bool; 4] = [
        |a, b| a == b,
        |a, b| a.trim_end() == b.trim_end(),
        |a, b| a.trim() == b.trim(),
        |a, b| ascii(a.trim()) == ascii(b.trim()),
    ];
    for same in passes {
        let found = (from..=last).find(|&i| lines[i..i + pattern.len()].iter().zip(pattern).all(|(l, p)| same(l, p)));
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The line with typographic punctuation as ASCII.
fn ascii(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}' | '\u{2003}' | '\u{2004}' | '\u{2005}' | '\u{2006}' | '\u{2007}' | '\u{2008}'
            | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn each_pass_finds_what_the_one_before_could_not() {
        let lines = v(&["fn a() {", "    x = 1;   ", "  y = \u{2018}q\u{2019} \u{2014} z", "}"]);
        assert_eq!(seek(&lines, &v(&["}"]), 0, false), Some(3));
        assert_eq!(seek(&lines, &v(&["    x = 1;"]), 0, false), Some(1));
        assert_eq!(seek(&lines, &v(&["x = 1;"]), 0, false), Some(1));
        assert_eq!(seek(&lines, &v(&["y = 'q' - z"]), 0, false), Some(2));
        assert_eq!(seek(&lines, &v(&["nowhere"]), 0, false), None);
    }

    #[test]
    fn the_search_starts_at_start_and_an_end_of_file_chunk_matches_only_at_the_end() {
        let lines = v(&["x", "y", "x", "y"]);
        assert_eq!(seek(&lines, &v(&["x"]), 1, false), Some(2));
        assert_eq!(seek(&lines, &v(&["x", "y"]), 0, true), Some(2));
        assert_eq!(seek(&lines, &v(&["y", "x"]), 0, true), None);
        // The end of the file, but not before where the search starts.
        assert_eq!(seek(&lines, &v(&["y"]), 4, true), None);
        assert_eq!(seek(&lines, &v(&["a", "b", "c", "d", "e"]), 0, false), None);
        assert_eq!(seek(&lines, &[], 3, false), Some(3));
    }

    #[test]
    fn an_exact_match_later_wins_over_a_loose_match_earlier() {
        let lines = v(&["a  ", "a"]);
        assert_eq!(seek(&lines, &v(&["a"]), 0, false), Some(1));
    }
}
