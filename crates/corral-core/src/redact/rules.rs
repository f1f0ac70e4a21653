//! The named rule set of `rules: 'default'` (API.md "Secrets stay out of the model"): secrets
//! with a fixed prefix or a checksum-like shape, so ordinary source (lockfile integrity hashes,
//! UUIDs, git SHAs, base64 images, minified code) never matches. Started from gitleaks' rules
//! (<https://github.com/gitleaks/gitleaks>, MIT licence, Copyright (c) 2019 Zachary Rice),
//! rewritten for the `regex` crate's linear engine: each pattern matches the token itself, and
//! the ASCII word boundaries stand where gitleaks has its boundary groups.

use std::sync::OnceLock;

use regex::bytes::Regex;

/// A rule: the name markers carry, and its pattern.
pub struct Rule {
    pub name: &'static str,
    pub pattern: &'static str,
}

/// Word boundary on ASCII (the tokens are ASCII; the lazy DFA runs on any text). Before a
/// token, a JSON escape (`\n`, `\r`, `\t` written as two characters) counts as a boundary too:
/// the match then starts at the backslash, and `find` leaves the escape out.
macro_rules! b {
    ($p:literal) => {
        concat!(r"(?:(?-u:\b)|\\[nrt])", $p, r"(?-u:\b)")
    };
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "private-key",
        // The body is PEM characters only (base64, whitespace, header and escape characters,
        // comment leaders and quotes), so a header in code never runs on to a footer elsewhere.
        pattern: r#"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\t\n\r \\:,.#*!'"-]{64,}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"#,
    },
    Rule { name: "aws-access-key-id", pattern: b!(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}") },
    Rule { name: "github-pat", pattern: b!(r"ghp_[0-9a-zA-Z]{36}") },
    Rule { name: "github-oauth", pattern: b!(r"gho_[0-9a-zA-Z]{36}") },
    Rule { name: "github-app-token", pattern: b!(r"(?:ghu|ghs)_[0-9a-zA-Z]{36}") },
    Rule { name: "github-refresh-token", pattern: b!(r"ghr_[0-9a-zA-Z]{36}") },
    Rule { name: "github-fine-grained-pat", pattern: b!(r"github_pat_[0-9a-zA-Z_]{82}") },
    Rule { name: "gitlab-pat", pattern: b!(r"glpat-[0-9a-zA-Z_-]{20}") },
    Rule { name: "gitlab-ptt", pattern: b!(r"glptt-[0-9a-f]{40}") },
    Rule { name: "gitlab-runner-token", pattern: b!(r"glrt-[0-9a-zA-Z_-]{20}") },
    Rule { name: "gitlab-rrt", pattern: b!(r"GR1348941[0-9a-zA-Z_-]{20}") },
    Rule { name: "slack-bot-token", pattern: b!(r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]{0,64}") },
    Rule { name: "slack-user-token", pattern: b!(r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}") },
    Rule { name: "slack-app-token", pattern: b!(r"(?i:xapp)-[0-9]-[A-Z0-9]{1,64}-[0-9]{1,32}-[a-z0-9]{1,128}") },
    Rule {
        name: "slack-webhook-url",
        pattern: r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
    },
    Rule { name: "stripe-live-key", pattern: b!(r"(?:sk|rk)_live_[a-zA-Z0-9]{10,99}") },
    Rule { name: "anthropic-api-key", pattern: b!(r"sk-ant-api03-[a-zA-Z0-9_-]{93}AA") },
    Rule { name: "anthropic-admin-key", pattern: b!(r"sk-ant-admin01-[a-zA-Z0-9_-]{93}AA") },
    Rule {
        name: "openai-api-key",
        pattern: b!(
            r"sk-(?:(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})|[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})"
        ),
    },
    Rule { name: "gcp-api-key", pattern: b!(r"AIza[0-9A-Za-z_-]{35}") },
    Rule { name: "npm-access-token", pattern: b!(r"npm_[a-zA-Z0-9]{36}") },
    Rule { name: "pypi-upload-token", pattern: b!(r"pypi-AgEIcHlwaS5vcmc[0-9A-Za-z_-]{50,}") },
    Rule { name: "huggingface-access-token", pattern: b!(r"hf_[a-zA-Z]{34}") },
    Rule { name: "shopify-token", pattern: b!(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}") },
    Rule { name: "sendgrid-api-token", pattern: b!(r"SG\.[a-zA-Z0-9=_.-]{66}") },
    Rule { name: "digitalocean-token", pattern: b!(r"do[opr]_v1_[a-f0-9]{64}") },
    Rule { name: "age-secret-key", pattern: r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}" },
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

/// The rules compiled: one pattern for all (a match is then named by the rule that matches it
/// whole), and each rule alone, anchored.
pub struct Compiled {
    pub any: Regex,
    pub each: Vec<(&'static str, Regex)>,
}

pub fn compiled() -> &'static Compiled {
    static C: OnceLock<Compiled> = OnceLock::new();
    C.get_or_init(|| {
        let all: Vec<String> = RULES.iter().map(|r| format!("(?:{})", r.pattern)).collect();
        let any = Regex::new(&all.join("|")).expect("the default rules compile");
        let each = RULES
            .iter()
            .map(|r| (r.name, Regex::new(&format!("^(?:{})$", r.pattern)).expect("each default rule compiles")))
            .collect();
        Compiled { any, each }
    })
}

/// The rule that matches `token` whole.
pub fn name_of(token: &[u8]) -> &'static str {
    compiled().each.iter().find(|(_, re)| re.is_match(token)).map_or("secret", |(name, _)| *name)
}
