use std::borrow::Cow;
use std::sync::Arc;

use super::stream::Stream;
use super::{register, secret_name, secret_value, Redactor, RedactorOptions};

fn rules_only() -> Redactor {
    Redactor::with_env(RedactorOptions { rules: true, ..Default::default() }, Vec::new())
}

/// A token of `n` characters cycling through `alphabet`, starting at `seed`.
fn fill(alphabet: &str, n: usize, seed: usize) -> String {
    let a: Vec<char> = alphabet.chars().collect();
    (0..n).map(|i| a[(i * 7 + seed) % a.len()]).collect()
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// One synthesized, format-valid token per rule of the default set.
fn tokens() -> Vec<(&'static str, String)> {
    let key_body = (0..20).map(|i| fill(ALNUM, 64, i)).collect::<Vec<_>>().join("\n");
    vec![
        ("private-key", format!("-----BEGIN RSA PRIVATE KEY-----\n{key_body}\n-----END RSA PRIVATE KEY-----")),
        ("private-key", format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{key_body}\n-----END OPENSSH PRIVATE KEY-----")),
        ("private-key", format!("-----begin ec private key-----\n{key_body}\n-----end ec private key-----")),
        ("aws-access-key-id", format!("AKIA{}", fill("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 3))),
        ("github-pat", format!("ghp_{}", fill(ALNUM, 36, 1))),
        ("github-oauth", format!("gho_{}", fill(ALNUM, 36, 2))),
        ("github-app-token", format!("ghs_{}", fill(ALNUM, 36, 3))),
        ("github-app-token", format!("ghu_{}", fill(ALNUM, 36, 4))),
        ("github-refresh-token", format!("ghr_{}", fill(ALNUM, 36, 5))),
        ("github-fine-grained-pat", format!("github_pat_{}", fill(ALNUM, 82, 6))),
        ("gitlab-pat", format!("glpat-{}", fill(ALNUM, 20, 7))),
        ("gitlab-ptt", format!("glptt-{}", fill("0123456789abcdef", 40, 8))),
        ("gitlab-runner-token", format!("glrt-{}", fill(ALNUM, 20, 9))),
        ("gitlab-rrt", format!("GR1348941{}", fill(ALNUM, 20, 10))),
        ("slack-bot-token", format!("xoxb-1234567890-1234567890123-{}", fill(ALNUM, 24, 11))),
        ("slack-user-token", format!("xoxp-1234567890-1234567890-1234567890-{}", fill(ALNUM, 32, 12))),
        ("slack-app-token", format!("xapp-1-A0123456789-1234567890123-{}", fill("abcdef0123456789", 64, 13))),
        ("slack-webhook-url", format!("https://hooks.slack.com/services/{}", fill(ALNUM, 44, 14))),
        ("stripe-live-key", format!("sk_live_{}", fill(ALNUM, 24, 15))),
        ("stripe-live-key", format!("rk_live_{}", fill(ALNUM, 24, 16))),
        ("anthropic-api-key", format!("sk-ant-api03-{}AA", fill(ALNUM, 93, 17))),
        ("anthropic-admin-key", format!("sk-ant-admin01-{}AA", fill(ALNUM, 93, 18))),
        ("openai-api-key", format!("sk-proj-{}T3BlbkFJ{}", fill(ALNUM, 74, 19), fill(ALNUM, 74, 20))),
        ("openai-api-key", format!("sk-{}T3BlbkFJ{}", fill(ALNUM, 20, 21), fill(ALNUM, 20, 22))),
        ("gcp-api-key", format!("AIza{}", fill(ALNUM, 35, 23))),
        ("npm-access-token", format!("npm_{}", fill(ALNUM, 36, 24))),
        ("pypi-upload-token", format!("pypi-AgEIcHlwaS5vcmc{}", fill(ALNUM, 60, 25))),
        ("huggingface-access-token", format!("hf_{}", fill("abcdefghijklmnopqrstuvwxyzABCDEF", 34, 26))),
        ("shopify-token", format!("shpat_{}", fill("0123456789abcdef", 32, 27))),
        ("sendgrid-api-token", format!("SG.{}", fill(ALNUM, 66, 28))),
        ("digitalocean-token", format!("dop_v1_{}", fill("0123456789abcdef", 64, 29))),
        ("age-secret-key", format!("AGE-SECRET-KEY-1{}", fill("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58, 30))),
    ]
}

#[test]
fn every_default_rule_fires_on_a_valid_token_and_names_itself_in_the_marker() {
    let r = rules_only();
    let mut covered = std::collections::BTreeSet::new();
    for (rule, token) in tokens() {
        let text = format!("const k = \"{token}\";\n");
        let out = r.redact(&text, "s");
        assert!(!out.contains(&token), "{rule} did not fire on {token}");
        assert!(out.contains(&format!("[secret:{rule}#")), "{rule}: {out}");
        covered.insert(rule);
    }
    let all: std::collections::BTreeSet<&str> = super::rules::RULES.iter().map(|r| r.name).collect();
    assert_eq!(covered, all, "every rule has a token here");
}

#[test]
fn a_token_inside_a_longer_word_is_not_one() {
    let r = rules_only();
    let t = format!("xghp_{}", fill(ALNUM, 36, 1));
    assert_eq!(r.redact(&t, "s"), t);
    let t = format!("ghp_{}0", fill(ALNUM, 36, 1));
    assert_eq!(r.redact(&t, "s"), t);
}

/// Ordinary text that merely looks random.
fn corpus() -> String {
    let mut text = String::new();
    // Lockfile integrity hashes, git SHAs, UUIDs.
    for i in 0..200 {
        let sha512 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, fill(ALNUM, 64, i));
        text.push_str(&format!("      \"integrity\": \"sha512-{sha512}\",\n"));
        text.push_str(&format!("commit {}\n", fill("0123456789abcdef", 40, i)));
        let u = fill("0123456789abcdef", 32, i);
        text.push_str(&format!("id: {}-{}-{}-{}-{}\n", &u[..8], &u[8..12], &u[12..16], &u[16..20], &u[20..]));
    }
    // A base64 image.
    let bytes: Vec<u8> = (0..6000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    text.push_str("<img src=\"data:image/png;base64,");
    text.push_str(&base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bytes));
    text.push_str("\">\n");
    // Minified code.
    for i in 0..100 {
        text.push_str(&format!("var a{i}=function(e,t){{return e.skip_{i}||t.askAKIA_{i}}};"));
    }
    // This repository's lock files and source (but the redactor's own tests and rules).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for f in ["package-lock.json", "Cargo.lock", "README.md"] {
        text.push_str(&std::fs::read_to_string(root.join(f)).unwrap_or_default());
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in ignore::Walk::new(&src).flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "rs") && !p.starts_with(src.join("redact")) {
            text.push_str(&std::fs::read_to_string(p).unwrap_or_default());
        }
    }
    text
}

#[test]
fn ordinary_source_has_no_hit() {
    let text = corpus();
    assert!(text.len() > 1_000_000, "the corpus is read ({} bytes)", text.len());
    let r = rules_only();
    let hits: Vec<String> =
        r.find(&text, "s").into_iter().map(|(s, e, _, rule)| format!("{rule}: {}", &text[s..e])).take(5).collect();
    assert!(hits.is_empty(), "{hits:?}");
    assert!(matches!(r.redact(&text, "s"), Cow::Borrowed(_)));
}

#[test]
fn text_without_a_secret_is_returned_as_it_was() {
    let r = Redactor::with_env(
        RedactorOptions { values: vec!["hunter2-hunter2".into()], rules: true, allow: vec![] },
        vec![],
    );
    let text = "line one\r\n\ttabs and ünïcode 🎉\nhunter2 alone\n";
    assert!(matches!(r.redact(text, "s"), Cow::Borrowed(t) if t == text));
}

#[test]
fn markers_number_distinct_values_per_session_and_are_stable() {
    let r = Redactor::with_env(
        RedactorOptions {
            values: vec!["first-secret-value".into(), "second-secret-value".into()],
            ..Default::default()
        },
        vec![],
    );
    let text = "a=first-secret-value b=second-secret-value c=first-secret-value";
    assert_eq!(r.redact(text, "s1"), "a=[secret:value#1] b=[secret:value#2] c=[secret:value#1]");
    assert_eq!(r.redact("second-secret-value", "s1"), "[secret:value#2]");
    assert_eq!(r.redact("second-secret-value", "s2"), "[secret:value#1]");
}

#[test]
fn a_multi_line_secret_keeps_its_line_count() {
    let r = rules_only();
    let (_, pem) = tokens().remove(0);
    let text = format!("before\n{pem}\nafter\n");
    let out = r.redact(&text, "s");
    assert_eq!(out.lines().count(), text.lines().count());
    assert!(out.starts_with("before\n[secret:private-key#1]\n[secret:private-key#2]\n"), "{out}");
    assert!(!out.contains("PRIVATE KEY"));
    // Back through an edit of a file that holds it, line by line.
    assert_eq!(r.restore(&out, "s", &text), text);
}

#[test]
fn a_marker_is_restored_only_into_a_file_that_holds_its_value() {
    let token = format!("ghp_{}", fill(ALNUM, 36, 1));
    let r = Redactor::with_env(
        RedactorOptions { values: vec!["given-value-123".into()], rules: true, allow: vec![] },
        vec![("DEPLOY_TOKEN".into(), "env-secret-value-1".into())],
    );
    let file = format!("GITHUB={token}\nX=given-value-123\nDEPLOY=env-secret-value-1\n");
    let shown = r.redact(&file, "s").into_owned();
    assert_eq!(shown, "GITHUB=[secret:github-pat#1]\nX=[secret:value#2]\nDEPLOY=[secret:env#3]\n");
    // The model edits the line: the rule's and the given value come back, the environment's not.
    let edit = "GITHUB=[secret:github-pat#1] # rotated\nX=[secret:value#2]\nDEPLOY=[secret:env#3]";
    assert_eq!(
        r.restore(edit, "s", &file),
        format!("GITHUB={token} # rotated\nX=given-value-123\nDEPLOY=[secret:env#3]")
    );
    // Another file (or a new one) that does not hold the value: the marker stays text.
    assert_eq!(r.restore(edit, "s", "unrelated"), edit);
    // Another session never had these markers; a marker never issued is text.
    assert_eq!(r.restore(edit, "other", &file), edit);
    assert_eq!(r.restore("[secret:github-pat#9]", "s", &file), "[secret:github-pat#9]");
}

#[test]
fn encoded_forms_of_a_value_are_secrets_too_and_allow_exempts_exact_values() {
    let r = Redactor::with_env(
        RedactorOptions {
            values: vec!["p@ss word/1".into()],
            rules: true,
            allow: vec![format!("ghp_{}", fill(ALNUM, 36, 1))],
        },
        vec![],
    );
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "p@ss word/1");
    let text = format!("auth {b64} url p%40ss%20word%2F1 raw p@ss word/1");
    let out = r.redact(&text, "s");
    assert_eq!(out, "auth [secret:value#1] url [secret:value#2] raw [secret:value#3]");
    let allowed = format!("ghp_{}", fill(ALNUM, 36, 1));
    assert_eq!(r.redact(&allowed, "s"), allowed);
}

#[test]
fn environment_variables_are_secrets_by_name_and_value() {
    for name in ["OPENAI_API_KEY", "GH_TOKEN", "DB_PASSWORD", "aws_secret", "X_CREDENTIALS", "KEY"] {
        assert!(secret_name(name), "{name}");
    }
    for name in ["PATH", "HOME", "KEYBOARD", "TOKEN_FILE", "SSH_AUTH_SOCK", "MONKEY_BUSINESS"] {
        assert!(!secret_name(name), "{name}");
    }
    for v in ["s3cr3t-value", "postgres://u:p@db/x", "abcdefgh"] {
        assert!(secret_value(v), "{v}");
    }
    for v in ["short", "/home/me/.key", "https://api.example.com/v1", "12345678901", "true", "FALSE"] {
        assert!(!secret_value(v), "{v}");
    }
}

#[test]
fn values_registered_by_a_live_broker_are_secrets_until_it_ends() {
    let r = Redactor::with_env(RedactorOptions::default(), vec![]);
    let value = format!("broker-injected-{}", fill(ALNUM, 12, 3));
    let text = format!("echo: {value}");
    assert_eq!(r.redact(&text, "s"), text);
    let handle = register(vec![value.clone()]);
    assert_eq!(r.redact(&text, "s"), "echo: [secret:broker#1]");
    // Never written back into a file, even one that holds it.
    assert_eq!(r.restore("[secret:broker#1]", "s", &text), "[secret:broker#1]");
    drop(handle);
    // A session that was shown it keeps it a secret; another sees the text as it is.
    assert_eq!(r.redact(&text, "s"), "echo: [secret:broker#1]");
    assert_eq!(r.redact(&text, "t"), text);
}

#[test]
fn a_secret_split_between_chunks_is_never_given_out_in_pieces() {
    let r = Arc::new(rules_only());
    let token = format!("ghp_{}", fill(ALNUM, 36, 1));
    // Glued to a word, this one is no token: the stream must judge it as the whole text does.
    let glued = format!("ghp_{}", fill(ALNUM, 36, 2));
    let (_, pem) = tokens().remove(0);
    let text = format!("{}{glued} {token} middle {}{pem} end\n", "x".repeat(3000), "y ".repeat(800));
    let whole = r.redact(&text, "s").into_owned();
    assert!(whole.contains(&glued) && !whole.contains(&token) && !whole.contains("PRIVATE KEY"));
    // A chunk may end inside a rule's public prefix (`gh`, `-----BEG`): that part goes out, and the
    // marker follows it. Nothing after the prefix ever goes out.
    let norm = |t: &str| regex::Regex::new(r"\S*\[secret:[^\]]+\]").unwrap().replace_all(t, "[S]").into_owned();
    let body: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    for size in [1, 2, 3, 7, 64, 1000, 4096] {
        let mut s = Stream::new(r.clone(), "s");
        let mut out = String::new();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(size) {
            let given = s.push(&piece.iter().collect::<String>());
            out.push_str(&given);
            assert!(!out.contains(&token[4..12]), "chunk size {size}");
            // (The glued word before shares characters with the key's lines: look after it.)
            let after = out.find(" middle").map_or("", |i| &out[i..]);
            assert!(
                !out.contains("PRIVATE KEY") && !body.iter().any(|l| after.contains(&l[..16])),
                "chunk size {size}: {}",
                &out[out.len().saturating_sub(300)..]
            );
        }
        out.push_str(&s.finish());
        assert_eq!(norm(&out), norm(&whole), "chunk size {size}");
    }
}

#[test]
fn a_stream_gives_out_a_line_or_a_plain_word_at_once() {
    let r = Arc::new(rules_only());
    let mut s = Stream::new(r, "s");
    assert_eq!(s.push("x"), "x");
    assert_eq!(s.push("y"), "y");
    assert_eq!(s.push(" building... "), " building... ");
    // A word that has begun a token is held until it ends.
    assert_eq!(s.push("token ghp_abc"), "token ");
    assert_eq!(s.push("def\n"), "ghp_abcdef\n");
}

#[test]
fn every_rule_token_begins_with_a_listed_prefix() {
    for (rule, token) in tokens() {
        assert!(super::rules::PREFIXES.iter().any(|p| token.starts_with(p)), "{rule}: {token}");
    }
}

#[test]
fn the_search_looks_for_fewer_beginnings_and_each_prefix_begins_with_one() {
    let literals = super::rules::literals();
    assert_eq!(literals.len(), 32, "{literals:?}");
    for p in super::rules::PREFIXES {
        let p = p.trim_start_matches("https://").trim_start_matches("http://");
        assert!(literals.iter().any(|l| p.starts_with(l)), "{p}");
    }
}

#[test]
fn the_packed_search_is_given_every_beginning_and_nothing_else() {
    let mut literals = super::rules::literals();
    let mut placed = super::rules::placed();
    literals.sort_unstable();
    placed.sort_unstable();
    placed.dedup();
    assert_eq!(placed, literals);
}

#[test]
fn a_run_of_lines_with_a_key_block_that_goes_on_past_it_is_not_redacted_alone() {
    let r = rules_only();
    let body: Vec<String> = (0..6).map(|i| fill(ALNUM, 64, i)).collect();
    let pem = format!("-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----\n", body.join("\n"));
    let half = &pem[..pem.find(&body[3]).unwrap()];
    assert!(r.redact_lines(half, "s").is_none());
    let whole = r.redact_lines(&pem, "s").expect("a whole block is redacted alone");
    assert!(body.iter().all(|b| !whole.contains(b.as_str())), "{whole}");
    assert!(matches!(r.redact_lines("a line\nanother\n-----\n", "s"), Some(Cow::Borrowed(_))));
    // A value of several lines may begin in the run and go on past it.
    let multi =
        Redactor::with_env(RedactorOptions { values: vec!["one\ntwo".into()], rules: true, allow: vec![] }, vec![]);
    assert!(multi.redact_lines("one\n", "s").is_none());
}

#[test]
fn a_webhook_is_redacted_with_its_scheme_and_a_token_after_a_scheme_is_still_found() {
    let r = rules_only();
    let hook = format!("hooks.slack.com/services/{}", fill(ALNUM, 44, 3));
    for scheme in ["https://", "http://", ""] {
        let text = format!("url = {scheme}{hook}\n");
        // (Each in its own session: each is another value.)
        assert_eq!(r.redact(&text, scheme), "url = [secret:slack-webhook-url#1]\n", "{scheme}");
    }
    let key = format!("AKIA{}", fill("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, 5));
    assert_eq!(r.redact(&format!("https://{key}"), "s"), "https://[secret:aws-access-key-id#1]");
}

#[test]
fn a_token_after_a_json_escape_is_found_and_the_escape_is_kept() {
    let r = rules_only();
    let token = format!("ghp_{}", fill(ALNUM, 36, 1));
    let text = format!(r#"{{"log":"line\n{token}\tdone"}}"#);
    assert_eq!(r.redact(&text, "s"), r#"{"log":"line\n[secret:github-pat#1]\tdone"}"#);
}

#[test]
fn a_private_key_header_in_code_never_runs_on_to_a_footer_elsewhere() {
    let r = rules_only();
    let (_, pem) = tokens().remove(0);
    let code =
        "fn parse(s: &str) -> bool { s.starts_with(\"-----BEGIN RSA PRIVATE KEY-----\") && check(s, |x| x > 0) }\n";
    let text = format!("{code}{}\n{pem}\n", "let y = vec![1, 2, 3];\n".repeat(5));
    let out = r.redact(&text, "s");
    assert!(out.starts_with(code), "the code is left as it was: {out}");
    assert!(!out.contains("PRIVATE KEY-----\n"), "the key itself is redacted: {out}");
    assert_eq!(out.lines().count(), text.lines().count());
}

#[test]
fn a_value_shown_once_is_a_secret_wherever_it_shows_up_again_in_the_session() {
    let r = rules_only();
    let (_, pem) = tokens().remove(0);
    let line = pem.lines().nth(3).unwrap().to_string();
    assert!(r.redact(&pem, "s").contains("[secret:private-key#"));
    // One line of the key alone matches no rule, but it was shown as a marker in this session.
    let alone = format!("Failed to find context '{line}'");
    let shown = r.redact(&alone, "s");
    assert!(!shown.contains(&line) && shown.contains("[secret:private-key#"), "{shown}");
    assert_eq!(r.redact(&alone, "other"), alone, "another session was shown nothing");
}

#[test]
fn overlapping_secrets_are_one_and_none_of_either_is_shown() {
    let r = Redactor::with_env(
        RedactorOptions { values: vec!["abcdefgh12".into(), "12345678xyz".into()], ..Default::default() },
        Vec::new(),
    );
    let shown = r.redact("x abcdefgh12345678xyz y", "s");
    assert!(!shown.contains("345678") && !shown.contains("abcdefgh"), "{shown}");
}

#[test]
fn a_token_after_a_json_escape_in_a_stream_is_held_until_it_is_whole() {
    let r = Arc::new(rules_only());
    let token = format!("ghp_{}", fill(ALNUM, 36, 1));
    let mut s = Stream::new(r, "s");
    let mut out = s.push(&format!("{{\"a\":\"x\\n{}", &token[..14]));
    assert!(!out.contains(&token[..6]), "{out}");
    out.push_str(&s.push(&format!("{}\"}}\n", &token[14..])));
    out.push_str(&s.finish());
    assert!(!out.contains(&token[4..10]) && out.contains("\\n[secret:github-pat#1]"), "{out}");
}

#[test]
fn a_marker_for_an_environment_value_is_unwritable_where_the_file_holds_it() {
    let r = Redactor::with_env(RedactorOptions::default(), vec![("MY_TOKEN".into(), "env-value-123456".into())]);
    let file = "TOKEN=env-value-123456\n";
    let shown = r.redact(file, "s").into_owned();
    let marker = &shown[6..shown.len() - 1];
    assert_eq!(r.unwritable(&shown, "s", file), Some(marker));
    assert_eq!(r.unwritable(&shown, "s", "TOKEN=other\n"), None, "a file without the value loses nothing");
}

#[test]
fn a_key_block_in_mixed_case_after_a_run_of_dashes_is_found() {
    let body = (0..4).map(|i| fill(ALNUM, 64, i)).collect::<Vec<_>>().join("\n");
    let text = format!("/* ---------- */\n--------Begin EC Private Key-----\n{body}\n-----End EC PRIVATE KEY-----\n");
    let out = rules_only().redact(&text, "s");
    assert!(!out.contains(&body[..64]), "{out}");
    assert!(out.starts_with("/* ---------- */\n---[secret:private-key#"), "{out}");
}
