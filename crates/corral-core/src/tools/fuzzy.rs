//! `fuzzyEdit`'s matcher: when an `old_string` is not in the file as it is, it is looked for once
//! more with both sides normalised — each run of spaces and tabs read as one space, spaces and
//! tabs at line ends ignored, `‘`/`’` read as `'`, `“`/`”` as `"`, `–`/`—` as `-` — while line
//! breaks must still match. A match in the normalised file is mapped back to the exact bytes of
//! the original it covers, so the replacement takes out what was there, no more and no less.

/// A text normalised, with where each of its characters came from.
struct Normalised {
    text: String,
    /// For each char of `text` (by index): its byte range in the original.
    spans: Vec<(usize, usize)>,
    /// For each byte offset of `text` that starts a char (and its end): the char index.
    char_at: Vec<usize>,
}

fn fold(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' => '\'',
        '\u{201C}' | '\u{201D}' => '"',
        '\u{2013}' | '\u{2014}' => '-',
        c => c,
    }
}

fn normalise(s: &str) -> Normalised {
    let mut text = String::with_capacity(s.len());
    let mut spans = Vec::with_capacity(s.len());
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (at, c) = chars[i];
        if c == ' ' || c == '\t' {
            let mut j = i;
            while j < chars.len() && (chars[j].1 == ' ' || chars[j].1 == '\t') {
                j += 1;
            }
            let end = chars.get(j).map_or(s.len(), |(b, _)| *b);
            let at_line_end = match chars.get(j) {
                None => true,
                Some((_, '\n')) => true,
                Some((_, '\r')) => chars.get(j + 1).is_none_or(|(_, n)| *n == '\n'),
                _ => false,
            };
            if !at_line_end {
                text.push(' ');
                spans.push((at, end));
            }
            i = j;
            continue;
        }
        text.push(fold(c));
        spans.push((at, at + c.len_utf8()));
        i += 1;
    }
    let mut char_at = vec![usize::MAX; text.len() + 1];
    for (n, (b, _)) in text.char_indices().enumerate() {
        char_at[b] = n;
    }
    char_at[text.len()] = spans.len();
    Normalised { text, spans, char_at }
}

/// The byte ranges of `text` that `needle` matches once both are normalised, in order and not
/// overlapping. Empty when the normalised needle is empty.
pub fn find(text: &str, needle: &str) -> Vec<(usize, usize)> {
    let n = normalise(text);
    let pattern = normalise(needle).text;
    if pattern.is_empty() {
        return Vec::new();
    }
    n.text
        .match_indices(&pattern)
        .map(|(b, m)| {
            let (c0, c1) = (n.char_at[b], n.char_at[b + m.len()]);
            (n.spans[c0].0, n.spans[c1 - 1].1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn whitespace_runs_quotes_and_dashes_are_normalised_and_mapped_back_exactly() {
        let text = "fn main() {\n    let s = \u{201C}hi\u{201D};  \n\tx \u{2013} y\n}\n";
        let spans = find(text, "let  s = \"hi\";\n x - y");
        assert_eq!(spans.len(), 1);
        let (a, b) = spans[0];
        assert_eq!(&text[a..b], "let s = \u{201C}hi\u{201D};  \n\tx \u{2013} y");
        // Line breaks must still match.
        assert!(find(text, "let s = \"hi\"; x - y").is_empty());
        assert!(find(text, "   ").is_empty());
        assert_eq!(find("a  b\na\tb", "a b").len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn an_exact_substring_is_always_found_and_spans_are_char_boundaries(
            text in "[a-c \t\n\u{2018}\u{2019}\u{2013}é]{0,40}", start in 0usize..40, len in 1usize..10,
        ) {
            let chars: Vec<char> = text.chars().collect();
            let start = start.min(chars.len());
            let end = (start + len).min(chars.len());
            let needle: String = chars[start..end].iter().collect();
            for (a, b) in find(&text, &needle) {
                prop_assert!(text.is_char_boundary(a) && text.is_char_boundary(b) && a < b);
            }
            if needle.chars().any(|c| !c.is_whitespace()) && !needle.ends_with([' ', '\t']) && !needle.starts_with([' ', '\t']) {
                prop_assert!(!find(&text, &needle).is_empty(), "{:?} in {:?}", needle, text);
            }
        }
    }
}
