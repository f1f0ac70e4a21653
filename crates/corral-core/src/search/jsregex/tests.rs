use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq)]
enum R {
    T,
    F,
    E,
}
use R::{E, F, T};

fn run(pattern: &str, flags: &str, text: &str) -> R {
    match JsRegex::new(pattern, flags) {
        Ok(re) => match re.is_match(text) {
            Ok(true) => T,
            Ok(false) => F,
            Err(Slow) => panic!("/{pattern}/{flags} was slow on {text:?}"),
        },
        Err(e) => {
            assert_eq!(e.code, Code::InvalidPattern, "{}", e.message);
            E
        }
    }
}

/// Each row was checked with `new RegExp(pattern, flags).test(text)` in Node 20.
    #[rustfmt::skip]
    const JS: &[(&str, &str, &str, R)] = &[
        ("\\w", "", "\u{E9}", F),
        ("\\w", "", "a", T),
        ("\\w", "u", "\u{E9}", F),
        ("\\w", "i", "\u{17F}", F),
        ("\\w", "iu", "\u{17F}", T),
        ("\\w", "iu", "\u{212A}", T),
        ("\\W", "iu", "s", F),
        ("\\W", "iu", "\u{17F}", F),
        ("\\W", "i", "\u{17F}", T),
        ("\\d", "", "\u{663}", F),
        ("\\d", "u", "\u{663}", F),
        ("\\D", "", "\u{663}", T),
        ("\\s", "", "\u{A0}", T),
        ("\\s", "", "\u{FEFF}", T),
        ("\\s", "", "\u{2028}", T),
        ("\\s", "", "\u{85}", F),
        ("\\s", "", "\u{180E}", F),
        ("\\S", "", "\u{3000}", F),
        (".", "", "\r", F),
        (".", "", "\n", F),
        (".", "", "\u{2028}", F),
        (".", "", "\u{85}", T),
        (".", "s", "\n", T),
        ("^.$", "", "\u{1F600}", F),
        ("^..$", "", "\u{1F600}", T),
        ("^.$", "u", "\u{1F600}", T),
        ("^..$", "u", "\u{1F600}", F),
        ("a$", "", "a\n", F),
        ("a$", "m", "a\n", T),
        ("^b", "m", "a\nb", T),
        ("^b", "", "a\nb", F),
        ("^b", "m", "a\rb", T),
        ("^b", "m", "a\u{2028}b", T),
        ("a$", "m", "a\u{2029}b", T),
        ("a$", "m", "a\rb", T),
        ("^\\n", "m", "a\r\nb", T),
        ("\\r$", "m", "a\r\nb", T),
        ("x^b", "m", "x\nb", F),
        ("a\\n^b", "m", "a\nb", T),
        ("a$\\nb", "m", "a\nb", T),
        ("a$\\rb", "m", "a\rb", T),
        ("(?:^|,)b", "m", "a\nb", T),
        ("(?:^|,)b", "", "a\nb", F),
        ("(^|x)b", "m", "a\u{2028}b", T),
        ("[^]", "", "\n", T),
        ("[]", "", "a", F),
        ("[^]", "", "\u{1F600}", T),
        ("a{", "", "a{", T),
        ("a{,5}", "", "a{,5}", T),
        ("a{2}", "", "aa", T),
        ("a{2}", "", "a", F),
        ("x{1,}y", "", "xxy", T),
        ("\\/x", "", "/x", T),
        ("a/b", "", "a/b", T),
        ("(a)\\1", "", "aa", T),
        ("(a)\\1", "", "ab", F),
        ("(?<=\\$)\\d+", "", "$12", T),
        ("(?<=\\$)\\d+", "", "12", F),
        ("(?<!\\$)\\b\\d+", "", "$12", F),
        ("\\bfoo\\b", "i", "FOO bar", T),
        ("\\bfoo\\b", "", "foobar", F),
        ("\\Bfoo", "", "afoo", T),
        ("\\b\u{E9}", "", "\u{E9}", F),
        ("\\b\u{E9}", "", "a\u{E9}", T),
        ("\u{E9}\\b", "", "\u{E9}a", T),
        ("\\b\u{17F}", "iu", "\u{17F}", T),
        ("\\b\u{17F}", "i", "\u{17F}", F),
        ("\u{17F}\\b", "iu", "\u{17F}x", F),
        ("k", "i", "\u{212A}", F),
        ("k", "iu", "\u{212A}", T),
        ("s", "i", "\u{17F}", F),
        ("s", "iu", "\u{17F}", T),
        ("\u{DF}", "i", "\u{1E9E}", F),
        ("\u{DF}", "iu", "\u{1E9E}", T),
        ("\u{3C3}", "i", "\u{3C2}", T),
        ("\u{3A3}", "i", "\u{3C2}", T),
        ("\u{3A3}\u{391}\u{3A3}", "i", "\u{3C3}\u{3B1}\u{3C2}", T),
        ("\u{130}", "i", "i", F),
        ("i", "iu", "\u{131}", F),
        ("[a-z]", "i", "K", T),
        ("[a-z]", "i", "\u{212A}", F),
        ("[a-z]", "iu", "\u{212A}", T),
        ("\\u{1F600}", "u", "\u{1F600}", T),
        ("\\u{61}", "", "uuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuuu", T),
        ("\\u{2}", "", "uu", T),
        ("\\u{2}", "", "u", F),
        ("\\uD83D\\uDE00", "", "\u{1F600}", T),
        ("\\uD83D\\uDE00", "u", "\u{1F600}", T),
        ("\\uD83D", "", "\u{1F600}", T),
        ("\\uD83D", "u", "\u{1F600}", F),
        ("[\\uD800-\\uDFFF]", "", "a\u{1F600}", T),
        ("[\\uD800-\\uDFFF]", "", "abc", F),
        ("[\\uD800-\\uDFFF]", "u", "a\u{1F600}", F),
        ("^\u{1F600}+$", "", "\u{1F600}\u{1F600}", F),
        ("^\u{1F600}+$", "u", "\u{1F600}\u{1F600}", T),
        ("^[\u{1F600}]$", "", "\u{1F600}", F),
        ("^[\u{1F600}]$", "u", "\u{1F600}", T),
        ("^[^a]$", "", "\u{1F600}", F),
        ("^[^a]{2}$", "", "\u{1F600}", T),
        ("\\uD83D[\\uDE00-\\uDE4F]", "", "x\u{1F610}y", T),
        ("\\W\\W", "", "\u{1F600}", T),
        ("\\x41", "", "A", T),
        ("\\x4", "", "x4", T),
        ("\\cJ", "", "\n", T),
        ("\\c1", "", "\\c1", T),
        ("[\\c1]", "", "\u{11}", T),
        ("[\\c_]", "", "\u{1F}", T),
        ("\\0", "", "\u{0}", T),
        ("\\01", "", "\u{1}", T),
        ("\\101", "", "A", T),
        ("\\8", "", "8", T),
        ("\\1", "", "\u{1}", T),
        ("(a)\\2", "", "a\u{2}", T),
        ("[\\1]", "", "\u{1}", T),
        ("[\\b]", "", "\u{8}", T),
        ("\\a", "", "a", T),
        ("\\e", "", "e", T),
        ("\\k", "", "k", T),
        ("\\p{L}", "", "p{L}", T),
        ("\\p{L}", "u", "\u{E9}", T),
        ("\\p{Lu}", "u", "a", F),
        ("\\P{Lu}", "iu", "A", T),
        ("\\P{Lu}", "iv", "A", F),
        ("\\p{Script=Greek}", "u", "\u{3B1}", T),
        ("\\p{sc=Latn}", "u", "a", T),
        ("\\p{ASCII_Hex_Digit}", "u", "f", T),
        ("\\p{Emoji_Presentation}", "u", "\u{1F600}", T),
        ("(?<year>\\d{4})-\\k<year>", "", "2020-2020", T),
        ("(?<year>\\d{4})-\\k<year>", "", "2020-2021", F),
        ("\\k<a>(?<a>x)", "", "x", T),
        ("(a)|\\1b", "", "b", T),
        ("(?:(a)|b)\\1", "", "b", T),
        ("(a\\1)", "", "a", T),
        ("a*?b", "", "aab", T),
        ("a+?", "", "a", T),
        ("a??b", "", "b", T),
        ("(?=a)*b", "", "b", T),
        ("(?=a)+a", "", "a", T),
        ("(?!a)+b", "", "b", T),
        ("[\\w-]", "", "-", T),
        ("[\\w-z]", "", "-", T),
        ("[a-]", "", "-", T),
        ("[-a]", "", "-", T),
        ("[\\d-\\w]", "", "-", T),
        ("[a\\-z]", "", "-", T),
        ("[a\\-z]", "u", "-", T),
        ("[\\]]", "", "]", T),
        ("]", "", "]", T),
        ("}", "", "}", T),
        ("a{1}{", "", "a{", T),
        ("[[a]", "", "[", T),
        ("[&&a]", "", "&", T),
        ("[a&&b]", "", "&", T),
        ("[--a]", "", "-", T),
        ("[~~]", "", "~", T),
        ("[a--b]", "", "-", E),
        ("[\\^]", "", "^", T),
        ("[^^]", "", "a", T),
        ("[[a-z]--[aeiou]]", "v", "b", T),
        ("[[a-z]--[aeiou]]", "v", "a", F),
        ("[\\w&&\\d]", "v", "5", T),
        ("[\\w&&\\d]", "v", "a", F),
        ("[\\q{abc|d}]", "v", "xabcx", T),
        ("[\\q{abc|d}]", "v", "ab", F),
        ("^[\\q{abc}x]$", "v", "abc", T),
        ("[^a]", "iv", "A", F),
        ("[^a]", "i", "A", F),
        ("[^a]", "iu", "A", F),
        ("[\\p{Lu}--[A-Z]]", "v", "\u{C1}", T),
        ("[\\p{Lu}--[A-Z]]", "v", "B", F),
        ("(a|b)*c", "", "ababc", T),
        ("(ab)+", "", "abab", T),
        ("a+b*", "", "aab", T),
        ("(a?)+b", "", "b", T),
        ("(a+)?b", "", "aab", T),
        ("^npm (test|run lint)$", "", "npm test", T),
        ("^npm (test|run lint)$", "", "npm test; rm -rf /", F),
        ("^npm test$", "m", "rm -rf /\nnpm test", T),
        ("^npm test$", "", "rm -rf /\nnpm test", F),
        ("foo", "y", "foobar", T),
        ("foo", "y", "xfoo", F),
        ("^foo", "my", "\nfoo", F),
        ("^foo", "m", "\nfoo", T),
        ("bar", "g", "foobar", T),
        ("bar", "d", "foobar", T),
        ("\\$\\{", "", "${x}", T),
        ("a.c", "", "a\u{1F600}c", F),
        ("a..c", "", "a\u{1F600}c", T),
        ("a.c", "u", "a\u{1F600}c", T),
        ("a..c", "u", "a\u{1F600}c", F),
        ("a.{2}c", "", "a\u{1F600}c", T),
        ("(?<=a+)b", "", "aaab", T),
        ("(?<=^|,)b", "", "a,b", T),
        ("(?<!\\w)foo", "", "xfoo", F),
        ("(?<!\\w)foo", "", "-foo", T),
        ("(?=.*\\d)(?=.*[a-z]).{6}", "", "abc123", T),
        ("(?=.*\\d)(?=.*[a-z]).{6}", "", "abcdef", F),
        ("\\u0041", "u", "A", T),
        ("\\u{41}", "u", "A", T),
        ("[\\u{1F600}-\\u{1F64F}]", "u", "\u{1F610}", T),
        ("\\-", "", "-", T),
        ("[\\-]", "u", "-", T),
        ("\\/", "u", "/", T),
        ("(?<n>a)(?<m>b)\\k<m>", "", "abb", T),
        ("(?<$x>a)", "", "a", T),
        ("(?<\u{E9}>a)\\k<\u{E9}>", "", "aa", T),
        ("(?<\\u0061>a)\\k<a>", "", "aa", T),
        ("^\\s*$", "", "   ", T),
        ("^\\s*$", "", "  x ", F),
        ("[\\s\\S]", "", "\n", T),
        ("x*", "", "abc", T),
        ("", "", "abc", T),
        ("a|", "", "b", T),
        ("|", "", "", T),
        ("\\bfoo", "", "\u{E9}foo", T),
        ("\\Bfoo", "", "\u{E9}foo", F),
        ("\\bfoo", "u", "\u{E9}foo", T),
        ("\\bfoo", "iu", "\u{212A}foo", F),
        ("\\bfoo", "iu", "\u{17F}foo", F),
        ("\\Bfoo", "iu", "\u{17F}foo", T),
        ("[^\\d]", "", "5", F),
        ("[^\\D]", "", "5", T),
        ("[\\D]", "", "5", F),
        ("[^\\W]", "i", "\u{17F}", F),
        ("[^\\W]", "iu", "\u{17F}", T),
        ("\\W", "i", "K", F),
        ("[\u{E0}-\u{FF}]", "i", "\u{C0}", T),
        ("[\u{C0}-\u{DE}]", "i", "\u{FF}", F),
        ("\u{FF}", "i", "\u{178}", T),
        ("\u{178}", "i", "\u{FF}", T),
        ("\u{1E9E}", "i", "\u{DF}", F),
        ("\u{1E9E}", "iu", "\u{DF}", T),
        ("\u{1C5}", "i", "\u{1C6}", T),
        ("\u{1C5}", "iu", "\u{1C6}", T),
        ("\u{1C5}", "i", "\u{1C4}", T),
        ("\u{FB00}", "i", "FF", F),
        ("\u{149}", "i", "\u{2BC}N", F),
        ("\\u{10400}", "iu", "\u{10428}", T),
        ("\u{10400}", "i", "\u{10428}", F),
        ("(?:\\uD801\\uDC00)", "i", "\u{10428}", F),
        ("a\\b", "", "a", T),
        ("a\\b", "", "ab", F),
        ("a\\B", "", "a", F),
        ("^\\B$", "", "", T),
        ("^\\b$", "", "", F),
        ("\\1(a)", "", "a", T),
        ("(a)(?:\\1)+", "", "aaa", T),
        ("(?:a|b)+$", "", "xab", T),
    ];

#[test]
fn matches_like_javascript() {
    let mut wrong = Vec::new();
    for &(p, f, t, want) in JS {
        let got = run(p, f, t);
        if got != want {
            let how = JsRegex::new(p, f).map(|r| format!("{r:?}")).unwrap_or_else(|e| e.message);
            wrong.push(format!("/{p}/{f} on {t:?}: want {want:?}, got {got:?} ({how})"));
        }
    }
    assert!(wrong.is_empty(), "{} of {} differ:\n{}", wrong.len(), JS.len(), wrong.join("\n"));
}

#[test]
fn engine_choice() {
    let bt = |p: &str, f: &str| JsRegex::new(p, f).unwrap().is_backtracking();
    assert!(!bt(r"\bfoo\b", "i"));
    assert!(!bt(r"^npm (test|run lint)$", ""));
    assert!(!bt(r"^a|b$", "m"), "leading ^ and trailing $ consume the terminator");
    assert!(!bt(r"(?:^|,)x", "m"));
    assert!(bt(r"a$\nb", "m"));
    assert!(bt(r"(a)\1", ""));
    assert!(bt(r"(?<=\$)\d+", ""));
    assert!(bt(r"x(?!y)", ""));
    assert!(bt(r"\bfoo", "iu"));
    assert!(!bt(r"\1(a)", ""), "a forward reference is always empty");
}

#[test]
fn refuses_nested_repetition() {
    for p in [
        r"(a+)+",
        r"(\w+\s*)*",
        r"((ab)*c)+",
        r"(?:x+y)*",
        r"(a*)*",
        r"(a+){2,}",
        r"(a+){1,5}",
        r"(a+){3}",
        r"(?<n>a{2,})+",
        r"x(?:y|(z+))*",
        r"((?=a+)b)+",
        r"(?:(?:a+))+",
    ] {
        let e = JsRegex::new(p, "").expect_err(p);
        assert_eq!(e.code, Code::InvalidPattern);
        assert_eq!(
            e.message,
            format!(
                "Refused regular expression /{p}/: a repeated group contains another \
                     repetition (nested repetition can take exponential time). Rewrite it \
                     without the outer repetition."
            )
        );
    }
    for p in [
        r"(a|b)*",
        r"(ab)+",
        r"a+b*",
        r"(a?)+",
        r"(a+)?",
        r"(a+){0,1}",
        r"(a+){1}",
        r"(\d{1,3}\.){3}\d{1,3}",
        r"(a+)(b+)",
        r"[a+]+",
        r"(?=a+)*b",
    ] {
        JsRegex::new(p, "").unwrap_or_else(|e| panic!("{p}: {}", e.message));
    }
}

#[test]
fn invalid_patterns_say_why() {
    let msg = |p: &str, f: &str| JsRegex::new(p, f).expect_err(p).message;
    assert_eq!(msg("(", ""), "Invalid regular expression /(/: unterminated group");
    assert_eq!(msg("a)", ""), "Invalid regular expression /a)/: unmatched ')'");
    assert_eq!(msg("[a", ""), "Invalid regular expression /[a/: unterminated character class");
    assert_eq!(msg("*a", ""), "Invalid regular expression /*a/: nothing to repeat");
    assert_eq!(msg("a**", ""), "Invalid regular expression /a**/: nothing to repeat");
    assert_eq!(msg("{1}", ""), "Invalid regular expression /{1}/: nothing to repeat");
    assert_eq!(msg("^*", ""), "Invalid regular expression /^*/: nothing to repeat");
    assert_eq!(msg("a{2,1}", ""), "Invalid regular expression /a{2,1}/: numbers out of order in {} quantifier");
    assert_eq!(msg("[z-a]", ""), "Invalid regular expression /[z-a]/: range out of order in character class");
    assert_eq!(msg("\\", ""), "Invalid regular expression /\\/: \\ at end of pattern");
    assert_eq!(msg("a{", "u"), "Invalid regular expression /a{/u: incomplete quantifier");
    assert_eq!(msg("}", "u"), "Invalid regular expression /}/u: lone quantifier brackets");
    assert!(msg(r"\a", "u").contains("invalid escape \\a"));
    assert!(msg(r"\2(a)", "u").contains("no such group"));
    assert!(msg(r"(?<a>x)\k<b>", "").contains("invalid named capture referenced"));
    assert!(msg(r"(?<a>x)(?<a>y)", "").contains("duplicate capture group name"));
    assert!(msg(r"(?i)abc", "").contains("inline flags"));
    assert!(msg(r"(?P<x>a)", "").contains("Python"));
    assert!(msg(r"\p{Nope}", "u").contains("invalid property name"));
    assert!(msg(r"(?<=(a)\1)b", "").starts_with("Unsupported regular expression"));
    assert!(msg(r"[\p{RGI_Emoji}]", "v").contains("not supported"));
    assert!(msg(r"[(]", "v").contains("invalid character '('"));
    assert!(msg(r"[^\q{ab}]", "v").contains("may contain strings"));
    assert!(msg("a", "gg").contains("Invalid regular expression flags"));
    assert!(msg("a", "uv").contains("u and v"));
    assert!(msg("a", "x").contains("Invalid regular expression flags"));
    let deep = "(".repeat(500) + &")".repeat(500);
    assert!(msg(&deep, "").contains("nest"));
}

#[test]
fn v_classes_follow_may_contain_strings() {
    // Checked in Node 20: a negated class is an error when its contents may hold strings,
    // judged by syntax (intersection: all operands; subtraction: the first), not by value.
    assert_eq!(run(r"[^[\q{ab}]--[a]]", "v", "x"), E);
    assert_eq!(run(r"[^\q{}]", "v", "x"), E);
    assert_eq!(run(r"[a-z&&b]", "v", "b"), E);
    assert_eq!(run(r"[^[\q{ab}]&&[a]]", "v", "b"), T);
    assert_eq!(run(r"[^[\q{a}]]", "v", "b"), T);
    assert_eq!(run(r"^[\q{}]$", "v", ""), T);
    assert_eq!(run(r"[\q{ab|c}]", "v", "xab"), T);
}

#[test]
fn refuses_what_does_not_fit() {
    let e = JsRegex::new(r"(?:a{1000}){1000}", "").expect_err("too big");
    assert_eq!(e.code, Code::InvalidPattern);
    assert!(e.message.starts_with("Refused regular expression /(?:a{1000}){1000}/: it is too large"), "{}", e.message);
}

#[test]
fn catastrophic_backtracking_is_slow_not_a_hang() {
    // `(a|a)*` has no nested repetition, but with the backreference it runs on the
    // backtracking engine, which tries 2^n ways to split the a's before failing.
    let re = JsRegex::new(r"^(a|a)*\1$", "").unwrap();
    assert!(re.is_backtracking());
    let text = "a".repeat(40) + "!";
    let start = std::time::Instant::now();
    assert_eq!(re.is_match(&text), Err(Slow));
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(re.is_match("aa"), Ok(true));
}

#[test]
fn is_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<JsRegex>();
    check::<std::sync::Arc<JsRegex>>();
}

#[test]
fn prefilter_presence() {
    let pf = |p: &str, f: &str| JsRegex::new(p, f).unwrap().prefilter().map(|r| r.as_str().to_string());
    assert!(pf("foo", "").is_some());
    assert!(pf(r"\bfoo\b", "i").is_some());
    assert!(pf(r"foo$", "").is_some());
    assert!(pf(r"(a)\1", "").is_some());
    assert!(pf(r"[^a-z]", "").is_some());
    assert!(pf(r"[^\x00-\x7F]", "").is_some());
    assert!(pf(r"x*", "").is_none(), "matches everywhere");
    assert!(pf(r"^", "").is_none());
    assert!(pf(r"(?=a)", "").is_none());
}

/// Patterns for the prefilter property test, over a small alphabet.
const PREFILTER_PATTERNS: &[(&str, &str)] = &[
    ("a", ""),
    ("ab", ""),
    ("a.b", ""),
    ("a..b", ""),
    ("^a", ""),
    ("^a", "m"),
    ("b$", ""),
    ("b$", "m"),
    (r"\ba", ""),
    (r"a\b", ""),
    (r"\Ba", ""),
    ("^$", ""),
    ("^.$", ""),
    ("^..$", ""),
    ("^.$", "u"),
    (r"[^a]b", ""),
    (r"[^a]{2}", ""),
    (r"\W\W", ""),
    ("a[\\s\\S]b", ""),
    ("a[^]b", ""),
    ("a\\rb", ""),
    ("\\r", ""),
    ("a\\nb", ""),
    ("(a)\\1", ""),
    ("(?<=a)b", ""),
    ("a(?=b)", ""),
    ("a(?!b)", ""),
    ("(?<!a)b", ""),
    ("\\uD83D", ""),
    ("[\\uD800-\\uDFFF]", ""),
    ("\\uDE00", ""),
    ("\\uD83D\\uDE00", ""),
    ("\u{1F600}", ""),
    ("\u{1F600}+", ""),
    ("\\ufffd", ""),
    ("a\\uFFFDb", ""),
    ("[^b]", "u"),
    ("A", "i"),
    ("é", "i"),
    ("^(?:a|b)$", "m"),
    ("(?:^|b)a", "m"),
    ("a.b", "s"),
    ("a{2,}", ""),
    ("(?:ab)+", ""),
    ("a|^b", ""),
    ("\\S\\s\\S", ""),
    ("a.{3}", ""),
    (".{2}b", ""),
    ("\\u2028", ""),
    ("^b", "my"),
    ("ab", "y"),
    ("[^a]", ""),
    ("^[^a]$", ""),
    ("a[^b]{2}a", ""),
    ("\\uDE00a", ""),
    ("a\\uD83D", ""),
    ("[\\uDC00-\\uDFFF][^a]", ""),
    ("a[\\uD800-\\uDBFF]{1}", ""),
    (".\\uDE00", ""),
    ("[^a]+", ""),
];

fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
    let atoms: Vec<&'static [u8]> = vec![
        b"a",
        b"b",
        b"A",
        b" ",
        b"\r",
        b"\n",
        "é".as_bytes(),
        "\u{1F600}".as_bytes(),
        "\u{FFFD}".as_bytes(),
        "\u{2028}".as_bytes(),
        b"\xFF",
        b"\xE2\x82",
        b"\x80",
    ];
    proptest::collection::vec(proptest::sample::select(atoms), 0..12).prop_map(|parts| parts.concat())
}

/// Cuts a line as grep does: at most `n` characters.
fn cut(line: &str, n: usize) -> &str {
    match line.char_indices().nth(n) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn prefilter_is_sound(which in 0..PREFILTER_PATTERNS.len(), buf in line_strategy(),
                          keep_cr in any::<bool>(), limit in 1usize..8) {
        let (p, f) = PREFILTER_PATTERNS[which];
        let re = JsRegex::new(p, f).unwrap();
        let Some(pre) = re.prefilter() else { return Ok(()) };
        let whole = pre.is_match(&buf);
        for raw in buf.split(|&b| b == b'\n') {
            let raw = if !keep_cr && raw.last() == Some(&b'\r') { &raw[..raw.len() - 1] } else { raw };
            let text = String::from_utf8_lossy(raw);
            for line in [&text[..], cut(&text, limit)] {
                if re.is_match(line).unwrap() {
                    prop_assert!(whole, "/{}/{} matches line {:?} but its prefilter {} finds nothing in {:?}",
                        p, f, line, pre.as_str(), String::from_utf8_lossy(&buf));
                    prop_assert!(pre.is_match(raw), "/{}/{}: prefilter {} misses line {:?}", p, f, pre.as_str(), line);
                }
            }
        }
        for m in pre.find_iter(&buf) {
            prop_assert!(!m.as_bytes().contains(&b'\n'), "prefilter match crosses a line");
        }
    }
}

#[test]
fn prefilter_is_exact_only_where_nothing_is_widened() {
    let exact = |p: &str, f: &str| JsRegex::new(p, f).unwrap().prefilter_is_exact();
    for (p, f) in
        [("static", ""), ("static", "i"), (r"EXPORT_SYMBOL_GPL\(\w+_init\)", "i"), ("a[bc]+d", ""), ("é", "i")]
    {
        assert!(exact(p, f), "/{p}/{f} should be exact");
    }
    for (p, f) in [
        ("^a", ""),
        ("a$", "m"),
        (r"\ba", ""),
        ("(a)\\1", ""),
        ("a(?=b)", ""),
        ("a.b", ""),
        ("a.b", "s"),
        ("a[^b]", ""),
        (r"a\sb", ""),
        ("\\ufffd", ""),
        ("\\uD83D", ""),
        ("ab", "y"),
    ] {
        assert!(!exact(p, f), "/{p}/{f} should not be exact");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    /// Where the prefilter is exact, a match of it inside a valid UTF-8 line, ending before the
    /// line's `\r`, is a line the pattern matches (grep counts it without testing the line).
    #[test]
    fn an_exact_prefilter_match_is_a_match(which in 0..EXACT_PATTERNS.len(), buf in line_strategy()) {
        let (p, f) = EXACT_PATTERNS[which];
        let re = JsRegex::new(p, f).unwrap();
        prop_assert!(re.prefilter_is_exact(), "/{}/{} is not exact", p, f);
        let pre = re.prefilter().unwrap();
        for raw in buf.split(|&b| b == b'\n') {
            let content = raw.strip_suffix(b"\r").unwrap_or(raw);
            let Ok(text) = std::str::from_utf8(content) else { continue };
            if pre.find_iter(raw).any(|m| m.end() <= content.len()) {
                prop_assert!(re.is_match(text).unwrap(), "/{}/{}: prefilter {} found {:?}, the pattern does not match it", p, f, pre.as_str(), text);
            }
        }
    }
}

/// Exact patterns for the property test, over the same alphabet.
const EXACT_PATTERNS: &[(&str, &str)] = &[
    ("a", ""),
    ("ab", ""),
    ("A", "i"),
    ("é", "i"),
    ("a\\rb", ""),
    ("\\r", ""),
    ("[ab ]\\r", ""),
    ("a[ \\t]+b", ""),
    ("(?:ab)+", ""),
    ("a{2,}", ""),
    ("a|b ", ""),
    ("\u{1F600}+", "u"),
    ("[a\\u{1F600}]{2}", "u"),
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]
    /// Any string is either refused with a message or compiled; nothing panics.
    #[test]
    fn never_panics(pattern in r#"[-a\\\[\](){}|^$.*+?,:=!<>/0-9a-zA-Z_kpPqucxdDwWsSbB&~é😀\n]{0,16}"#,
                    flags in "[gimsuvyd]{0,3}", text in "[a\nA😀é\r ,0-9]{0,6}") {
        match JsRegex::new(&pattern, &flags) {
            Ok(re) => {
                let _ = re.is_match(&text);
                if let Some(pre) = re.prefilter() {
                    let _ = pre.is_match(text.as_bytes());
                }
            }
            Err(e) => prop_assert_eq!(e.code, Code::InvalidPattern),
        }
    }
}

/// Differential check against Node: `node tests/fixtures/jsregex-fuzz.js 1 2000 > cases.jsonl`
/// writes one JSON array `[pattern, flags, text, result]` per line (result true, false or
/// "error"); run with
/// `JSREGEX_CASES=cases.jsonl cargo test -p corral-core --lib differential -- --ignored`.
/// Refused, unsupported and slow cases are counted and skipped.
#[test]
#[ignore]
fn differential_from_file() {
    let Ok(path) = std::env::var("JSREGEX_CASES") else { return };
    let data = std::fs::read_to_string(path).unwrap();
    let mut wrong = Vec::new();
    let mut n = 0;
    let mut skipped = 0;
    for line in data.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (p, f, t) = (v[0].as_str().unwrap(), v[1].as_str().unwrap(), v[2].as_str().unwrap());
        let want = match &v[3] {
            serde_json::Value::Bool(true) => T,
            serde_json::Value::Bool(false) => F,
            _ => E,
        };
        n += 1;
        let got = match JsRegex::new(p, f) {
            Ok(re) => match re.is_match(t) {
                Ok(b) => {
                    if b {
                        T
                    } else {
                        F
                    }
                }
                Err(Slow) => {
                    skipped += 1;
                    continue;
                }
            },
            Err(e) if e.message.starts_with("Refused") || e.message.starts_with("Unsupported") => {
                skipped += 1;
                continue;
            }
            Err(_) => E,
        };
        if got != want {
            let how = JsRegex::new(p, f).map(|r| r.translated().to_string()).unwrap_or_else(|e| e.message);
            wrong.push(format!("{}  want {want:?} got {got:?}  {how}", serde_json::json!([p, f, t])));
        }
    }
    eprintln!("{n} cases, {skipped} refused, unsupported or slow");
    assert!(wrong.is_empty(), "{} of {n} differ:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn match_starts_are_offsets_in_the_text_also_after_astral_characters_read_as_units() {
    let starts = |pattern: &str, flags: &str, text: &str| {
        let re = JsRegex::new(pattern, flags).unwrap();
        let mut v = Vec::new();
        re.for_each_start(text, |i| {
            v.push(i);
            true
        })
        .unwrap();
        v
    };
    assert_eq!(starts("b.c", "s", "abc\nb\nc b\u{e9}c"), vec![4, 8]);
    // Without `u` the pattern sees UTF-16 units; the starts are still offsets in the text.
    let text = "\u{1F600}x\u{1F600}x";
    assert_eq!(starts("x", "", text), vec![4, 9]);
    assert_eq!(starts("[\\uD800-\\uDBFF]", "", text), vec![0, 5]);
}
