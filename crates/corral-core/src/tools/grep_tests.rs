//! grep's fast path (the prefilter over the whole buffer, lines looked at only where it lands,
//! counting without lines past the kept ones) against the plain definition: every line, decoded
//! lossily, without its `\r`, cut to its first characters, tested with the pattern.

use serde_json::json;

use super::*;
use crate::fs::local::LocalFs;
use crate::fs::memory::MemoryFs;
use crate::tools::{call, Ctx, FsToolOptions};

/// Files whose lines try every edge of the fast path.
fn corpus() -> Vec<(String, Vec<u8>)> {
    let long_tail = format!("{}static at the far end", "x".repeat(GREP_LINE_CHARS));
    let at_the_cut = format!("{}static", "y".repeat(GREP_LINE_CHARS - 6));
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("a.c".into(), b"static int a;\nint b;\n  static  \nSTATIC x\n".to_vec()),
        ("crlf.c".into(), b"static\r\nfoo\r\nb\r\nend static\r\n".to_vec()),
        ("invalid.c".into(), b"static \xFF\xFE bytes\nplain\n\xC3static\n".to_vec()),
        ("long.c".into(), format!("{long_tail}\n{at_the_cut}\nfoo bar\n").into_bytes()),
        ("words.c".into(), b"foo\nfoobar\na foo b\nfoo_bar\nabab\nx.y\nxzy\n\xC3\xA9t\xC3\xA9\n".to_vec()),
        ("noeol.c".into(), b"first\nlast static".to_vec()),
        ("sub/dir/deep.c".into(), b"a b\na\tb\na  b\nab\n".to_vec()),
    ];
    for i in 0..30 {
        files.push((format!("many/f{i:02}.c"), "static\nnot this\nstatic again\n".repeat(4).into_bytes()));
    }
    files
}

/// The definition: every line tested on its own.
fn expected(files: &[(String, Vec<u8>)], re: &JsRegex) -> Vec<String> {
    let mut out = Vec::new();
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, bytes) in sorted {
        let text = String::from_utf8_lossy(bytes);
        let body = text.strip_suffix('\n').unwrap_or(&text);
        for (i, line) in body.split('\n').enumerate() {
            let line = cut_line(line.strip_suffix('\r').unwrap_or(line));
            if re.is_match(line).unwrap() {
                out.push(format!("{path}:{}: {line}", i + 1));
            }
        }
    }
    out
}

/// The files in a temporary directory, and a provider over it.
fn on_disk(files: &[(String, Vec<u8>)]) -> (tempfile::TempDir, LocalFs) {
    let dir = tempfile::tempdir().unwrap();
    for (p, c) in files {
        let f = dir.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, c).unwrap();
    }
    let disk = LocalFs::new(dir.path().to_str().unwrap()).unwrap();
    (dir, disk)
}

fn everything() -> FsToolOptions {
    FsToolOptions { max_results: 1_000_000, max_output_chars: 100_000_000, ..Default::default() }
}

async fn grep_lines(fs: &dyn FsProvider, o: &FsToolOptions, args: Value) -> Vec<String> {
    let out = call(fs, o, "grep", &args, &Ctx::default()).await.unwrap();
    out.as_str()
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('(') && *l != "No matches found.")
        .map(String::from)
        .collect()
}

const PATTERNS: &[(&str, &str)] = &[
    ("static", ""),
    ("static", "i"),
    (r"static\s", ""),
    (r"\bfoo\b", ""),
    ("static$", ""),
    ("^static", ""),
    ("(a)b\\1b", ""),
    ("x.y", ""),
    ("é", "i"),
    ("\\r", ""),
    ("b\\r?$", ""),
    ("[^a]static", ""),
    ("a\\s+b", ""),
    ("\\ufffd", ""),
    ("y{4}static", ""),
    ("far end", ""),
    ("foo|bar", ""),
];

#[tokio::test]
async fn grep_finds_exactly_the_lines_a_line_by_line_search_finds() {
    let files = corpus();
    let memory = MemoryFs::new(files.clone()).unwrap();
    let (_dir, disk) = on_disk(&files);
    for &(pattern, flags) in PATTERNS {
        let re = JsRegex::new(pattern, flags).unwrap();
        let want = expected(&files, &re);
        let args = json!({ "pattern": pattern, "ignore_case": flags == "i" });
        for fs in [&memory as &dyn FsProvider, &disk] {
            let got = grep_lines(fs, &everything(), args.clone()).await;
            assert_eq!(got, want, "/{pattern}/{flags} (exact prefilter: {})", re.prefilter_is_exact());
        }
    }
}

#[tokio::test]
async fn past_the_limit_matches_are_counted_and_the_first_by_path_are_shown() {
    // 400 files of 3 matches each, on disk (a parallel walk in no fixed order) and in memory.
    let files: Vec<(String, Vec<u8>)> =
        (0..400).map(|i| (format!("d{}/f{i:03}.txt", i % 7), b"hit 1\nmiss\nhit 2\nhit 3\n".to_vec())).collect();
    let (_dir, disk) = on_disk(&files);
    let memory = MemoryFs::new(files.clone()).unwrap();
    let re = JsRegex::new("hit", "").unwrap();
    let want: Vec<String> = expected(&files, &re).into_iter().take(200).collect();
    for fs in [&disk as &dyn FsProvider, &memory] {
        for _ in 0..5 {
            let out =
                call(fs, &FsToolOptions::default(), "grep", &json!({"pattern": "hit"}), &Ctx::default()).await.unwrap();
            let out = out.as_str().unwrap();
            let shown: Vec<String> = out.lines().filter(|l| !l.starts_with('(')).map(String::from).collect();
            assert_eq!(shown, want);
            assert!(
                out.ends_with(
                    "(Showing the first 200 of 1,200 matches. Narrow the pattern, path or glob to see the rest.)"
                ),
                "{out}"
            );
        }
    }
}
