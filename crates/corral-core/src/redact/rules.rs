//! The named rule set of `rules: 'default'` (API.md "Secrets stay out of the model"): secrets
//! with a fixed prefix or a checksum-like shape, so ordinary source (lockfile integrity hashes,
//! UUIDs, git SHAs, base64 images, minified code) never matches. Started from gitleaks' rules
//! (<https://github.com/gitleaks/gitleaks>, MIT licence, Copyright (c) 2019 Zachary Rice),
//! rewritten for the `regex` crate's linear engine: each pattern matches the token itself, and
//! the ASCII word boundaries stand where gitleaks has its boundary groups.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::bytes::Regex;

/// A rule: the name markers carry, its token's pattern, and whether the token stands between
/// word boundaries (on ASCII; before it, a JSON escape `\n`, `\r`, `\t` written as two characters
/// counts as a boundary too).
pub struct Rule {
    pub name: &'static str,
    pub pattern: &'static str,
    pub bounded: bool,
}

/// A rule whose token stands between word boundaries.
macro_rules! b {
    ($name:literal, $p:literal) => {
        Rule { name: $name, pattern: $p, bounded: true }
    };
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "private-key",
        // The body is PEM characters only (base64, whitespace, header and escape characters,
        // comment leaders and quotes), so a header in code never runs on to a footer elsewhere.
        pattern: r#"(?i-u)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\t\n\r \\:,.#*!'"-]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"#,
        bounded: false,
    },
    b!("aws-access-key-id", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}"),
    b!("github-pat", r"ghp_[0-9a-zA-Z]{36}"),
    b!("github-oauth", r"gho_[0-9a-zA-Z]{36}"),
    b!("github-app-token", r"(?:ghu|ghs)_[0-9a-zA-Z]{36}"),
    b!("github-refresh-token", r"ghr_[0-9a-zA-Z]{36}"),
    b!("github-fine-grained-pat", r"github_pat_[0-9a-zA-Z_]{82}"),
    b!("gitlab-pat", r"glpat-[0-9a-zA-Z_-]{20}"),
    b!("gitlab-ptt", r"glptt-[0-9a-f]{40}"),
    b!("gitlab-runner-token", r"glrt-[0-9a-zA-Z_-]{20}"),
    b!("gitlab-rrt", r"GR1348941[0-9a-zA-Z_-]{20}"),
    b!("slack-bot-token", r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]{0,64}"),
    b!("slack-user-token", r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}"),
    b!("slack-app-token", r"(?:xapp|XAPP)-[0-9]-[A-Z0-9]{1,64}-[0-9]{1,32}-[a-z0-9]{1,128}"),
    Rule {
        name: "slack-webhook-url",
        pattern: r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        bounded: false,
    },
    b!("stripe-live-key", r"(?:sk|rk)_live_[a-zA-Z0-9]{10,99}"),
    b!("anthropic-api-key", r"sk-ant-api03-[a-zA-Z0-9_-]{93}AA"),
    b!("anthropic-admin-key", r"sk-ant-admin01-[a-zA-Z0-9_-]{93}AA"),
    b!(
        "openai-api-key",
        r"sk-(?:(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})|[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})"
    ),
    b!("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    b!("npm-access-token", r"npm_[a-zA-Z0-9]{36}"),
    b!("pypi-upload-token", r"pypi-AgEIcHlwaS5vcmc[0-9A-Za-z_-]{50,1000}"),
    b!("huggingface-access-token", r"hf_[a-zA-Z]{34}"),
    b!("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    b!("sendgrid-api-token", r"SG\.[a-zA-Z0-9=_.-]{66}"),
    b!("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}"),
    Rule { name: "age-secret-key", pattern: r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", bounded: false },
];

/// How every rule's token begins: a stream holds back a tail only while it could still become one
/// of these (each rule's synthesized token starts with one; a test checks it).
pub const PREFIXES: &[&str] = &[
    "-----BEGIN",
    "-----begin",
    "A3T",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "glptt-",
    "glrt-",
    "GR1348941",
    "xoxb-",
    "xoxp-",
    "xoxe-",
    "xapp-",
    "XAPP-",
    "hooks.slack.com/",
    "http://hooks.slack.com/",
    "https://hooks.slack.com/",
    "sk_live_",
    "rk_live_",
    "sk-",
    "AIza",
    "npm_",
    "pypi-",
    "hf_",
    "shpat_",
    "shpca_",
    "shppa_",
    "shpss_",
    "SG.",
    "doo_v1_",
    "dop_v1_",
    "dor_v1_",
    "AGE-SECRET-KEY-1",
];

/// Beginnings several prefixes share, looked for in their place (`glp` for `glpat-` and
/// `glptt-`; a key block's `-----BEGIN`, in any case, as its `-----`: the anchored pattern then
/// reads the word). Fewer, distinct beginnings make the search that runs over everything a tool
/// returns about twice as fast (case variants would make it several times slower).
const SHARED: &[&str] = &["-----", "glp", "xox", "shp"];

/// What the search for a token's beginning looks for: each of `PREFIXES`, or the beginning of
/// `SHARED` it starts with; a Slack webhook without its scheme (the scheme is taken back at the
/// match).
pub fn literals() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for p in PREFIXES {
        let p = p.trim_start_matches("https://").trim_start_matches("http://");
        let l = SHARED.iter().find(|s| p.starts_with(*s)).copied().unwrap_or(p);
        if !out.contains(&l) {
            out.push(l);
        }
    }
    out
}

/// `literals()` in the packed searcher's eight buckets: a place in the text is looked at closely
/// (verified) when each of its first three bytes has, by nybbles, the byte of some pattern of one
/// bucket, so patterns that share nybbles share a bucket. Chosen by counting, for each grouping,
/// the places in Linux's C sources and in JavaScript packages that would be verified. Over 48 MB
/// of kernel sources this search takes 4.7 ms; the library's own placement of the same patterns
/// took 35 ms in this form and 7.2 ms in its 16-bucket form. (The placement changes the speed
/// only: any placement finds the same beginnings.)
const BUCKETS: [&[&str]; 8] = [
    &["-----", "A3T", "SG."],
    &["AGE-SECRET-KEY-1", "ghu_", "pypi-", "ghp_"],
    &["sk_live_", "rk_live_", "shp", "xapp-", "XAPP-"],
    &["hooks.slack.com/", "dor_v1_", "dop_v1_", "doo_v1_", "hf_"],
    &["github_pat_", "glp", "glrt-", "GR1348941"],
    &["ACCA", "ASIA", "ABIA", "AKIA", "AIza"],
    &["sk-", "xox"],
    &["npm_", "gho_", "ghs_", "ghr_"],
];

/// The low nybbles of a pattern's first three bytes: the packed searcher puts patterns that have
/// the same ones in one bucket.
fn low_nybbles(p: &str) -> [u8; 3] {
    let b = p.as_bytes();
    [b[0] & 15, b[1] & 15, b[2] & 15]
}

/// `BUCKETS` as the list the packed searcher is given, in the order that puts each group in a
/// bucket of its own. The searcher (aho-corasick's slim Teddy) puts pattern `id` in bucket
/// `7 - id % 8`, or, when a pattern with the same low nybbles is placed already, in that one's
/// bucket; a turn whose bucket has no pattern left takes a copy of one placed already (a copy
/// only repeats a verification its original makes).
pub fn placed() -> Vec<&'static str> {
    // The low nybbles of the patterns placed so far.
    let mut placed: Vec<[u8; 3]> = Vec::new();
    let mut left: Vec<Vec<&'static str>> = BUCKETS.iter().map(|g| g.iter().rev().copied().collect()).collect();
    let mut out: Vec<&'static str> = Vec::new();
    while left.iter().any(|g| !g.is_empty()) {
        // A pattern that shares nybbles with a placed one goes there whatever its turn.
        let shared = left.iter().position(|g| g.last().is_some_and(|p| placed.contains(&low_nybbles(p))));
        if let Some(group) = shared {
            out.extend(left[group].pop());
            continue;
        }
        let turn = BUCKETS.len() - 1 - out.len() % BUCKETS.len();
        match left[turn].pop() {
            Some(p) => {
                placed.push(low_nybbles(p));
                out.push(p);
            }
            None => out.push(out[0]),
        }
    }
    out
}

/// The search for `literals()`: the packed (SIMD) searcher in its 8-bucket form, given
/// `placed()`; a plain automaton where the CPU has no vector instructions it can use.
pub enum Literals {
    Packed(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

impl Literals {
    fn new() -> Literals {
        use aho_corasick::packed::{Config, MatchKind as Kind};
        let packed = Config::new()
            .match_kind(Kind::LeftmostFirst)
            .only_teddy(true)
            .only_teddy_fat(Some(false))
            .heuristic_pattern_limits(false)
            .builder()
            .extend(placed())
            .build();
        match packed {
            Some(s) => Literals::Packed(s),
            None => Literals::Automaton(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(literals())
                    .expect("the prefixes compile"),
            ),
        }
    }

    /// Where the first beginning in `text[from..]` is.
    pub fn find(&self, text: &[u8], from: usize) -> Option<usize> {
        match self {
            Literals::Packed(s) => s.find_in(text, aho_corasick::Span::from(from..text.len())).map(|m| m.start()),
            Literals::Automaton(a) => a.find(aho_corasick::Input::new(text).span(from..text.len())).map(|m| m.start()),
        }
    }

    /// Whether `text` holds any beginning.
    pub fn is_match(&self, text: &[u8]) -> bool {
        self.find(text, 0).is_some()
    }
}

/// The rules compiled: where a token may begin (a literal search), one anchored pattern for all
/// (tried at each such place), and each rule alone, anchored at both ends (a match is named by
/// the rule that matches it whole).
pub struct Compiled {
    pub prefixes: Literals,
    pub start: Regex,
    pub each: Vec<(&'static str, bool, Regex)>,
}

/// A rule's token as it must match: followed by a word boundary when it is bounded.
fn token(r: &Rule) -> String {
    if r.bounded {
        format!("(?:{})(?-u:\\b)", r.pattern)
    } else {
        format!("(?:{})", r.pattern)
    }
}

pub fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let all: Vec<String> = RULES.iter().map(token).collect();
        let start = Regex::new(&format!("^(?:{})", all.join("|"))).expect("the default rules compile");
        let each = RULES
            .iter()
            .map(|r| {
                (r.name, r.bounded, Regex::new(&format!("^(?:{})$", r.pattern)).expect("each default rule compiles"))
            })
            .collect();
        Compiled { prefixes: Literals::new(), start, each }
    })
}

/// The rule that matches `token` whole, and whether it is bounded.
pub fn rule_of(token: &[u8]) -> (&'static str, bool) {
    compiled().each.iter().find(|(_, _, re)| re.is_match(token)).map_or(("secret", false), |(n, b, _)| (*n, *b))
}

/// A word character on ASCII (`[A-Za-z0-9_]`), as the rules' boundaries read them.
pub fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether the `-----` at `i` in `text` begins a key block's `-----BEGIN` (`word`: `b"begin"`) or
/// `-----END` (`b"end"`), in any case.
pub fn pem_mark_at(text: &[u8], i: usize, word: &[u8]) -> bool {
    text.get(i + 5..i + 5 + word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word))
}

/// Whether a bounded token may begin at `p`: at the start, after a byte that is not a word
/// character, or after a JSON escape (`\n`, `\r`, `\t` written as two characters).
pub fn boundary_before(text: &[u8], p: usize) -> bool {
    p == 0 || !is_word(text[p - 1]) || (p >= 2 && text[p - 2] == b'\\' && matches!(text[p - 1], b'n' | b'r' | b't'))
}

/// Where a token found at `found` begins: a Slack webhook's scheme before it is part of it (not
/// when the scheme is part of the token before, which ends at `floor`).
fn webhook_scheme(text: &[u8], found: usize, floor: usize) -> usize {
    if !text[found..].starts_with(b"hooks.slack.com/") {
        return found;
    }
    [&b"https://"[..], b"http://"]
        .iter()
        .find(|s| text[..found].ends_with(s) && found - s.len() >= floor)
        .map_or(found, |s| found - s.len())
}

/// Every token of the rules in `text`: (start, end, rule), in order, none overlapping.
pub fn tokens(text: &[u8]) -> Vec<(usize, usize, &'static str)> {
    tokens_and_open(text).0
}

/// `tokens`, and whether a key block begins in `text` that does not end there (`text` is then
/// part of a longer one whose block may end later).
pub fn tokens_and_open(text: &[u8]) -> (Vec<(usize, usize, &'static str)>, bool) {
    let c = compiled();
    let mut open = false;
    let mut out: Vec<(usize, usize, &'static str)> = Vec::new();
    let mut at = 0;
    // Each place a prefix begins; after one that begins no token, the search goes on from the next
    // byte (a token may begin inside a prefix that began none: `AKIAKIA…`).
    while let Some(found) = c.prefixes.find(text, at) {
        at = found + 1;
        let p = webhook_scheme(text, found, out.last().map_or(0, |t| t.1));
        // A run of dashes in a comment is no key block: only one that says BEGIN is tried.
        if text[p] == b'-' && !pem_mark_at(text, p, b"begin") {
            // In a longer run of dashes, the next place a `-----BEGIN` may begin is five before
            // its end (a separator line is one search, not one per dash).
            let run = text[p..].iter().take_while(|&&b| b == b'-').count();
            at = at.max((p + run).saturating_sub(5));
            continue;
        }
        let Some(hit) = c.start.find(&text[p..]) else {
            open |= text[p] == b'-';
            continue;
        };
        let end = p + hit.end();
        let (name, bounded) = rule_of(&text[p..end]);
        if bounded && !boundary_before(text, p) {
            continue;
        }
        out.push((p, end, name));
        at = end;
    }
    (out, open)
}
