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
    let long_tail = format!("{}static at the far end", "x".repeat(crate::tools::GREP_LINE_CHARS));
    let at_the_cut = format!("{}static", "y".repeat(crate::tools::GREP_LINE_CHARS - 6));
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
            let line = crate::search::searcher::cut_line(line.strip_suffix('\r').unwrap_or(line));
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
async fn past_the_limit_the_first_by_path_are_shown_and_the_search_stops_once_they_are_settled() {
    // 400 files of 3 matches each, on disk (files matched on several threads) and in memory.
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
            // The walk stops once the 67th file is settled: the total is then a lower bound, said
            // so. On disk a thread held up on an early file can let the others finish the tree
            // first; then every file was searched and the total is exact.
            let last = out.lines().last().unwrap();
            let total = last
                .strip_prefix("(Showing the first 200 of ")
                .and_then(|r| {
                    r.strip_suffix(" matches. Narrow the pattern, path or glob, or continue with offset=200.)")
                })
                .unwrap_or_else(|| panic!("{last}"));
            let at_least = total.strip_prefix("at least ").map(|n| n.replace(',', "").parse::<usize>().unwrap());
            match at_least {
                Some(n) => assert!((201..1200).contains(&n), "{last}"),
                None if fs.as_memory().is_none() => assert_eq!(total, "1,200", "{last}"),
                None => panic!("in memory the walk is in order and stops: {last}"),
            }
        }
        // Counting needs every file: the count is whole.
        let out = call(
            fs,
            &FsToolOptions::default(),
            "grep",
            &json!({"pattern": "hit", "output_mode": "count"}),
            &Ctx::default(),
        )
        .await
        .unwrap();
        assert!(out.as_str().unwrap().contains("(1,200 matches in 400 files)"), "{out}");
    }
}

async fn grep_text(fs: &dyn crate::fs::FsProvider, o: &FsToolOptions, args: serde_json::Value) -> String {
    call(fs, o, "grep", &args, &Ctx::default()).await.unwrap().as_str().unwrap().to_string()
}

fn modes_fs() -> MemoryFs {
    MemoryFs::new([
        ("b.txt".to_string(), b"x1\nno\nx2\nx3\n".to_vec()),
        ("a.txt".to_string(), b"x\n".to_vec()),
        ("c/d.txt".to_string(), b"nothing\n".to_vec()),
        ("c/e.txt".to_string(), b"x x x\nx\n".to_vec()),
    ])
    .unwrap()
}

#[tokio::test]
async fn files_with_matches_and_count_list_files_by_path_and_count_matching_lines() {
    let fs = modes_fs();
    let o = FsToolOptions::default();
    let files = grep_text(&fs, &o, json!({ "pattern": "x", "output_mode": "files_with_matches" })).await;
    assert_eq!(files, "a.txt\nb.txt\nc/e.txt");
    let count = grep_text(&fs, &o, json!({ "pattern": "x", "output_mode": "count" })).await;
    assert_eq!(count, "a.txt:1\nb.txt:3\nc/e.txt:2\n(6 matches in 3 files)");
    let none = grep_text(&fs, &o, json!({ "pattern": "zzz", "output_mode": "count" })).await;
    assert_eq!(none, "No matches found.");
}

#[tokio::test]
async fn every_cut_line_names_the_offset_that_continues_and_pages_add_up_to_the_whole() {
    let fs = modes_fs();
    let o = FsToolOptions::default();
    for (mode, context) in [("content", 0), ("content", 1), ("files_with_matches", 0), ("count", 0)] {
        let whole = grep_text(&fs, &o, json!({ "pattern": "x", "output_mode": mode, "context": context })).await;
        let (mut offset, mut pages) = (0u64, Vec::new());
        loop {
            let page = grep_text(
                &fs,
                &o,
                json!({ "pattern": "x", "output_mode": mode, "context": context, "offset": offset, "limit": 2 }),
            )
            .await;
            let mut lines: Vec<&str> = page.lines().collect();
            let next = lines
                .last()
                .and_then(|l| l.split("offset=").nth(1))
                .map(|n| n.trim_end_matches(".)").parse::<u64>().unwrap());
            if next.is_some() {
                lines.pop();
            }
            if mode == "count" {
                lines.retain(|l| !l.starts_with('('));
            }
            pages.extend(lines.iter().map(|s| s.to_string()));
            match next {
                Some(n) => {
                    assert_eq!(n, offset + 2, "{mode}: {page}");
                    offset = n;
                }
                None => break,
            }
        }
        let mut expected: Vec<String> = whole.lines().map(String::from).collect();
        if mode == "count" {
            expected.retain(|l| !l.starts_with('('));
        }
        if context > 0 {
            // Pages are cut between matches: a `--` may stand between two pages' groups.
            pages.retain(|l| l != "--");
            expected.retain(|l| l != "--");
            pages.dedup();
        }
        assert_eq!(pages, expected, "{mode} with context {context}");
    }
    let cut = grep_text(&fs, &o, json!({ "pattern": "x", "limit": 2 })).await;
    assert_eq!(
        cut.lines().last().unwrap(),
        "(Showing the first 2 of at least 4 matches. Narrow the pattern, path or glob, or continue with offset=2.)"
    );
    let cut =
        grep_text(&fs, &o, json!({ "pattern": "x", "limit": 2, "offset": 2, "output_mode": "files_with_matches" }))
            .await;
    assert_eq!(cut, "c/e.txt");
    let cut = grep_text(&fs, &o, json!({ "pattern": "x", "limit": 1, "offset": 1, "output_mode": "count" })).await;
    assert_eq!(cut, "b.txt:3\n(6 matches in 3 files)\n(Showing files 2-2 of 3. Continue with offset=2.)");
    let past = grep_text(&fs, &o, json!({ "pattern": "x", "offset": 50 })).await;
    assert_eq!(past, "(offset=50 is past the last of 6 matches.)");
    // The lines before a page are held while matching: the offset is bounded.
    let e =
        call(&fs, &o, "grep", &json!({ "pattern": "x", "offset": MAX_OFFSET + 1 }), &Ctx::default()).await.unwrap_err();
    assert_eq!(e.code, crate::error::Code::InvalidArguments);
}

#[tokio::test]
async fn multiline_matches_span_lines_and_report_the_line_they_start_on() {
    let fs = MemoryFs::new([(
        "m.rs".to_string(),
        b"fn a() {\n    call(\n        x,\n    );\n}\nfn b() { call(y); }\n".to_vec(),
    )])
    .unwrap();
    let o = FsToolOptions::default();
    let out = grep_text(&fs, &o, json!({ "pattern": "call\\(\\s*x,\\s*\\)", "multiline": true })).await;
    assert_eq!(out, "m.rs:2:     call(");
    let out = grep_text(&fs, &o, json!({ "pattern": "call\\(\\s*x,\\s*\\)" })).await;
    assert_eq!(out, "No matches found.");
    let out =
        grep_text(&fs, &o, json!({ "pattern": "fn a.*b\\(\\)", "multiline": true, "output_mode": "count" })).await;
    assert_eq!(out, "m.rs:1\n(1 match in 1 file)");
    let out = grep_text(&fs, &o, json!({ "pattern": "^fn", "multiline": true, "context": 1 })).await;
    assert_eq!(out, "m.rs:1: fn a() {\nm.rs-2-     call(\n--\nm.rs-5- }\nm.rs:6: fn b() { call(y); }");
}
