use serde_json::json;

use super::guard::size_against;
use super::*;
use crate::fs::memory::MemoryFs;

fn mem(files: &[(&str, &str)]) -> MemoryFs {
    MemoryFs::new(files.iter().map(|(p, c)| (p.to_string(), c.as_bytes().to_vec()))).unwrap()
}

async fn run(fs: &dyn FsProvider, name: &str, args: Value) -> Result<String> {
    call_text(fs, &FsToolOptions::default(), name, args).await
}

/// A tool's text result.
async fn call_text(fs: &dyn FsProvider, o: &FsToolOptions, name: &str, args: Value) -> Result<String> {
    call(fs, o, name, &args, &Ctx::default()).await.map(|v| v.as_str().expect("a text result").to_string())
}

#[tokio::test]
async fn read_file_numbers_lines_and_says_how_to_continue() {
    let content: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let fs = mem(&[("a.txt", &content)]);
    let o = FsToolOptions { max_read_lines: 10, ..Default::default() };
    let out = call_text(&fs, &o, "read_file", json!({"path": "a.txt"})).await.unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "  1\tline 1");
    assert_eq!(lines[9], " 10\tline 10");
    assert_eq!(lines[10], "(Showing lines 1-10 of 30. Use offset 11 to continue.)");
    let out = run(&fs, "read_file", json!({"path": "a.txt", "offset": 29})).await.unwrap();
    assert_eq!(out, " 29\tline 29\n 30\tline 30");
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema() {
    let fs = mem(&[("a.txt", "x")]);
    let e = run(&fs, "read_file", json!({"path": 3})).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    assert!(e.message.contains("path"), "{}", e.message);
    let e = run(&fs, "write_file", json!({"path": "b.txt"})).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    assert!(e.message.contains("content"), "{}", e.message);
    assert!(!fs.snapshot().contains_key("b.txt"));
}

#[tokio::test]
async fn edit_rules() {
    let fs = mem(&[("a.txt", "one two two\n"), ("crlf.txt", "a\r\nb\r\n")]);
    let e = run(&fs, "edit_file", json!({"path": "a.txt", "old_string": "two", "new_string": "2"})).await.unwrap_err();
    assert_eq!(e.code, Code::Ambiguous);
    assert!(e.message.contains("2 times"));
    run(&fs, "edit_file", json!({"path": "a.txt", "old_string": "one", "new_string": "1"})).await.unwrap();
    assert_eq!(fs.snapshot()["a.txt"], "1 two two\n");
    let again = run(&fs, "edit_file", json!({"path": "a.txt", "old_string": "one", "new_string": "1"})).await.unwrap();
    assert!(again.contains("already applied"), "{again}");
    let e =
        run(&fs, "edit_file", json!({"path": "crlf.txt", "old_string": "a\nb", "new_string": "x"})).await.unwrap_err();
    assert_eq!(e.code, Code::NoMatch);
    assert!(e.message.contains("CRLF"), "{}", e.message);
    run(&fs, "edit_file", json!({"path": "a.txt", "old_string": "two", "new_string": "2", "replace_all": true}))
        .await
        .unwrap();
    assert_eq!(fs.snapshot()["a.txt"], "1 2 2\n");
}

#[tokio::test]
async fn edit_refuses_non_utf8_and_keeps_bom() {
    let fs = MemoryFs::new([
        ("latin1.txt".to_string(), b"caf\xe9\n".to_vec()),
        ("utf16.txt".to_string(), b"\xff\xfeh\x00i\x00".to_vec()),
        ("bom.txt".to_string(), "\u{feff}hello\n".as_bytes().to_vec()),
    ])
    .unwrap();
    for p in ["latin1.txt", "utf16.txt"] {
        let before = fs.read_file_bytes(p).await.unwrap();
        let e = run(&fs, "edit_file", json!({"path": p, "old_string": "h", "new_string": "x"})).await.unwrap_err();
        assert_eq!(e.code, Code::NotUtf8);
        assert_eq!(fs.read_file_bytes(p).await.unwrap(), before);
    }
    run(&fs, "edit_file", json!({"path": "bom.txt", "old_string": "hello", "new_string": "bye"})).await.unwrap();
    assert_eq!(fs.read_file_bytes("bom.txt").await.unwrap(), "\u{feff}bye\n".as_bytes());
}

#[tokio::test]
async fn git_is_refused_and_hidden() {
    let fs = mem(&[(".git/config", "token"), ("src/a.ts", "a"), (".gitignore", "x"), (".github/ci.yml", "y")]);
    for (tool, args) in [
        ("read_file", json!({"path": ".git/config"})),
        ("read_file", json!({"path": "./.GIT/config"})),
        ("write_file", json!({"path": "sub/.git/x", "content": "x"})),
        ("list_dir", json!({"path": ".git"})),
        ("grep", json!({"pattern": "token", "path": ".git"})),
    ] {
        assert_eq!(run(&fs, tool, args).await.unwrap_err().code, Code::Denied, "{tool}");
    }
    assert_eq!(run(&fs, "list_dir", json!({})).await.unwrap(), ".github/\n.gitignore\nsrc/");
    let o = FsToolOptions { ignore: vec![], ..Default::default() };
    let g = call_text(&fs, &o, "grep", json!({"pattern": "token|a|x"})).await.unwrap();
    assert!(!g.contains(".git/"), "{g}");
    let all = call_text(&fs, &o, "glob", json!({"pattern": "**/*"})).await.unwrap();
    assert_eq!(all, ".github/ci.yml\n.gitignore\nsrc/a.ts");
}

#[tokio::test]
async fn glob_and_grep() {
    let fs = mem(&[
        ("src/a.ts", "export const a = 1;\nconst b = 2;\n"),
        ("src/lib/b.ts", "export const b = 2;\n"),
        ("src/c.js", "export default 3;\n"),
        ("node_modules/x/index.ts", "export const x = 1;\n"),
        ("bin.dat", "export\0binary"),
    ]);
    assert_eq!(run(&fs, "glob", json!({"pattern": "src/*.ts"})).await.unwrap(), "src/a.ts");
    assert_eq!(run(&fs, "glob", json!({"pattern": "**/*.ts"})).await.unwrap(), "src/a.ts\nsrc/lib/b.ts");
    assert_eq!(run(&fs, "glob", json!({"pattern": "*.{ts,js}", "path": "src"})).await.unwrap(), "src/a.ts\nsrc/c.js");
    assert_eq!(run(&fs, "glob", json!({"pattern": "**/?.[tj]s"})).await.unwrap(), "src/a.ts\nsrc/c.js\nsrc/lib/b.ts");
    assert_eq!(
        run(&fs, "grep", json!({"pattern": "^export"})).await.unwrap(),
        "src/a.ts:1: export const a = 1;\nsrc/c.js:1: export default 3;\nsrc/lib/b.ts:1: export const b = 2;"
    );
    assert_eq!(
        run(&fs, "grep", json!({"pattern": "const b", "glob": "*.ts"})).await.unwrap(),
        "src/a.ts:2: const b = 2;\nsrc/lib/b.ts:1: export const b = 2;"
    );
    assert_eq!(
        run(&fs, "grep", json!({"pattern": "EXPORT D", "ignore_case": true})).await.unwrap(),
        "src/c.js:1: export default 3;"
    );
    assert_eq!(run(&fs, "grep", json!({"pattern": "nothing here"})).await.unwrap(), "No matches found.");
    // The newline that ends a file's last line does not start another line.
    assert_eq!(run(&fs, "grep", json!({"pattern": "^$", "path": "src/c.js"})).await.unwrap(), "No matches found.");
}

#[tokio::test]
async fn read_file_numbers_lines_as_the_reference_does_a_space_the_number_right_aligned_and_a_tab() {
    let fs = mem(&[("one.txt", "hello\n"), ("twelve.txt", &"x\n".repeat(12))]);
    assert_eq!(run(&fs, "read_file", json!({"path": "one.txt"})).await.unwrap(), " 1\thello");
    let out = run(&fs, "read_file", json!({"path": "twelve.txt"})).await.unwrap();
    assert_eq!(out.lines().next().unwrap(), "  1\tx");
    assert_eq!(out.lines().last().unwrap(), " 12\tx");
}

#[tokio::test]
async fn edit_file_refuses_a_replace_all_whose_result_would_pass_the_limit_before_allocating_it() {
    // 200,000 quotes, each to become 100 characters: a 20 MB result from a 400 KB file.
    let fs = mem(&[("q.txt", &"\"\n".repeat(200_000))]);
    let before = fs.snapshot()["q.txt"].clone();
    let e = run(
        &fs,
        "edit_file",
        json!({"path": "q.txt", "old_string": "\"", "new_string": "x".repeat(100), "replace_all": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, Code::TooLarge, "{}", e.message);
    assert_eq!(fs.snapshot()["q.txt"], before, "a refused edit leaves the file as it was");
    // The same edit that stays under the limit goes through.
    run(&fs, "edit_file", json!({"path": "q.txt", "old_string": "\"", "new_string": "ab", "replace_all": true}))
        .await
        .unwrap();
    assert_eq!(fs.snapshot()["q.txt"].len(), 600_000);
}

#[tokio::test]
async fn write_file_refuses_content_over_the_limit() {
    let fs = mem(&[]);
    let big = "y".repeat(MAX_WRITE_BYTES as usize + 1);
    let e = run(&fs, "write_file", json!({"path": "big.txt", "content": big})).await.unwrap_err();
    assert_eq!(e.code, Code::TooLarge);
    assert!(!fs.snapshot().contains_key("big.txt"));
}

#[tokio::test]
async fn edit_file_refuses_a_file_over_the_read_limit() {
    let fs = mem(&[("huge.txt", &"z".repeat(MAX_READ_BYTES as usize + 1))]);
    let e = run(&fs, "edit_file", json!({"path": "huge.txt", "old_string": "z", "new_string": "q"})).await.unwrap_err();
    assert_eq!(e.code, Code::TooLarge);
}

#[tokio::test]
async fn grep_names_the_files_it_skips_for_size_up_to_five_and_the_cap_is_an_option() {
    let big = "x".repeat(101);
    let files: Vec<(String, &str)> =
        (0..7).map(|i| (format!("big{i}.txt"), big.as_str())).chain([("a.txt".to_string(), "hit\n")]).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), *c)).collect();
    let fs = mem(&refs);
    let o = FsToolOptions::from_options(&json!({ "maxGrepFileBytes": 100 }), &|_| None).unwrap();
    let out = call_text(&fs, &o, "grep", json!({"pattern": "hit"})).await.unwrap();
    assert!(
        out.ends_with("(Skipped 7 files over 100 bytes (maxGrepFileBytes): big0.txt, big1.txt, big2.txt, big3.txt, big4.txt and 2 more.)"),
        "{out}"
    );
    assert!(out.starts_with("a.txt:1: hit"), "{out}");
}

#[tokio::test]
async fn a_size_one_byte_over_the_limit_is_told_in_exact_bytes() {
    let (s, l) = size_against(10 * 1024 * 1024 + 1, 10 * 1024 * 1024);
    assert_eq!(format!("({s}; the limit is {l})"), "(10,485,761 bytes; the limit is 10,485,760)");
    let (s, l) = size_against(30 * 1024 * 1024, 10 * 1024 * 1024);
    assert_eq!(format!("({s}; the limit is {l})"), "(30 MB; the limit is 10 MB)");
}

#[tokio::test]
async fn results_say_1_line_and_1_file_in_the_singular() {
    let fs = mem(&[("big.txt", &"x".repeat(MAX_GREP_FILE_BYTES as usize + 1)), ("a.txt", "hit\n")]);
    let out = run(&fs, "write_file", json!({"path": "one.txt", "content": "one line\n"})).await.unwrap();
    assert_eq!(out, "Created one.txt (9 bytes, 1 line).");
    let out = run(&fs, "write_file", json!({"path": "b.txt", "content": "x"})).await.unwrap();
    assert_eq!(out, "Created b.txt (1 byte, 1 line).");
    let out = run(&fs, "grep", json!({"pattern": "hit"})).await.unwrap();
    assert!(out.ends_with("(Skipped 1 file over 2 MB (maxGrepFileBytes): big.txt.)"), "{out}");
    let out = run(&fs, "read_file", json!({"path": "a.txt", "offset": 5})).await.unwrap();
    assert_eq!(out, "(a.txt has 1 line; offset 5 is past the end.)");
}

#[tokio::test]
async fn a_grep_stopped_by_the_step_limit_says_so_not_that_it_took_too_long() {
    let fs = mem(&[("a.txt", &format!("{}!\n", "a".repeat(40)))]);
    let e = run(&fs, "grep", json!({"pattern": "^(a|a)*\\1$"})).await.unwrap_err();
    assert_eq!(e.code, Code::Timeout);
    assert!(e.message.contains("backtracking steps"), "{}", e.message);
    assert!(!e.message.contains("took longer"), "{}", e.message);
}

#[tokio::test]
async fn grep_context_shows_lines_around_matches_as_ripgrep_does() {
    let text: String = (1..=20)
        .map(|i| if i == 5 || i == 7 || i == 15 { format!("hit {i}\n") } else { format!("line {i}\n") })
        .collect();
    let fs = mem(&[("a.txt", &text), ("b.txt", "x\nhit b\n")]);
    let out = run(&fs, "grep", json!({"pattern": "hit", "context": 1})).await.unwrap();
    assert_eq!(
        out,
        "a.txt-4- line 4\na.txt:5: hit 5\na.txt-6- line 6\na.txt:7: hit 7\na.txt-8- line 8\n--\na.txt-14- line 14\na.txt:15: hit 15\na.txt-16- line 16\n--\nb.txt-1- x\nb.txt:2: hit b"
    );
    let e = run(&fs, "grep", json!({"pattern": "hit", "context": 11})).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
    let e = run(&fs, "grep", json!({"pattern": "hit", "context": -1})).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
}

#[tokio::test]
async fn grep_literal_and_limit() {
    let fs = mem(&[("a.txt", "a.b(c)\naxb(c)\n[x]\n[x]\n[x]\n")]);
    assert_eq!(run(&fs, "grep", json!({"pattern": "a.b(c)", "literal": true})).await.unwrap(), "a.txt:1: a.b(c)");
    let out = run(&fs, "grep", json!({"pattern": "[x]", "literal": true, "limit": 2})).await.unwrap();
    assert_eq!(out, "a.txt:3: [x]\na.txt:4: [x]\n(Showing the first 2 of 3 matches. Narrow the pattern, path or glob, or continue with offset=2.)");
    let e = run(&fs, "grep", json!({"pattern": "x", "limit": 0})).await.unwrap_err();
    assert_eq!(e.code, Code::InvalidArguments);
}

#[tokio::test]
async fn read_file_output_fits_max_output_chars_with_its_continuation_line() {
    let content: String = (0..200).map(|_| format!("{}\n", "y".repeat(100))).collect();
    let fs = mem(&[("a.txt", &content)]);
    for max in [2000usize, 500, 150, 101] {
        let o = FsToolOptions::from_options(&json!({ "maxOutputChars": max }), &|_| None).unwrap();
        let out = call_text(&fs, &o, "read_file", json!({"path": "a.txt"})).await.unwrap();
        assert!(out.chars().count() <= max, "{max}: {} characters:\n{out}", out.chars().count());
        assert!(out.lines().last().unwrap().contains("Use offset"), "{out}");
    }
}

#[tokio::test]
async fn a_spill_directory_is_guarded_on_its_own_provider_only_and_goes_with_it() {
    let guarded = Box::new(mem(&[]));
    protect_spill_dir(guarded.as_ref(), ".corral/out");
    let e =
        run(guarded.as_ref(), "write_file", json!({"path": ".corral/out/x.txt", "content": "x"})).await.unwrap_err();
    assert_eq!(e.code, Code::Protected);
    // Many providers made and dropped after it: none inherits its guard (a provider's address
    // may be reused; the guard is held by the provider, not keyed by where it lived).
    drop(guarded);
    for _ in 0..64 {
        let other = Box::new(mem(&[]));
        run(other.as_ref(), "write_file", json!({"path": ".corral/out/x.txt", "content": "x"})).await.unwrap();
    }
}

#[tokio::test]
async fn a_negative_offset_reads_the_last_lines_and_zero_is_refused() {
    let content: String = (1..=10).map(|i| format!("l{i}\n")).collect();
    let fs = mem(&[("a.txt", &content)]);
    assert_eq!(
        run(&fs, "read_file", json!({"path": "a.txt", "offset": -3})).await.unwrap(),
        "  8\tl8\n  9\tl9\n 10\tl10"
    );
    assert_eq!(
        run(&fs, "read_file", json!({"path": "a.txt", "offset": -2, "limit": 1})).await.unwrap(),
        " 9\tl9\n(Showing lines 9-9 of 10. Use offset 10 to continue.)"
    );
    assert!(run(&fs, "read_file", json!({"path": "a.txt", "offset": -50})).await.unwrap().starts_with("  1\tl1\n"));
    assert_eq!(
        run(&fs, "read_file", json!({"path": "a.txt", "offset": 0})).await.unwrap_err().code,
        Code::InvalidArguments
    );
}

#[tokio::test]
async fn list_dir_with_depth_lists_below_sorted_by_path_without_denied_names() {
    let fs = mem(&[
        ("src/a.rs", ""),
        ("src/deep/b.rs", ""),
        ("src/deep/deeper/c.rs", ""),
        (".git/HEAD", ""),
        ("README.md", ""),
    ]);
    assert_eq!(run(&fs, "list_dir", json!({})).await.unwrap(), "README.md\nsrc/");
    assert_eq!(run(&fs, "list_dir", json!({"depth": 2})).await.unwrap(), "README.md\nsrc/\nsrc/a.rs\nsrc/deep/");
    assert_eq!(
        run(&fs, "list_dir", json!({"path": "src", "depth": 3})).await.unwrap(),
        "a.rs\ndeep/\ndeep/b.rs\ndeep/deeper/\ndeep/deeper/c.rs"
    );
    let o = FsToolOptions { max_results: 2, ..Default::default() };
    assert_eq!(
        call_text(&fs, &o, "list_dir", json!({"depth": 9})).await.unwrap(),
        "README.md\nsrc/\n(Showing 2 of 7 entries.)"
    );
}

fn guarded() -> FsToolOptions {
    FsToolOptions {
        reads: Some(Default::default()),
        include: vec!["apply_patch".into(), "read_files".into()],
        ..Default::default()
    }
}

async fn in_session(fs: &dyn FsProvider, o: &FsToolOptions, session: &str, name: &str, args: Value) -> Result<String> {
    let ctx = Ctx { session_id: session.into(), ..Ctx::default() };
    call(fs, o, name, &args, &ctx).await.map(|v| v.as_str().unwrap_or_default().to_string())
}

#[tokio::test]
async fn require_read_refuses_edits_of_unread_files_and_of_files_changed_since() {
    let fs = mem(&[("a.txt", "one\ntwo\n"), ("b.txt", "b\n")]);
    let o = guarded();
    let edit = json!({ "path": "a.txt", "old_string": "one", "new_string": "1" });
    let e = in_session(&fs, &o, "s", "edit_file", edit.clone()).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (Code::NotRead, "Read a.txt first: it has not been read in this session.")
    );
    // A read of part of the file counts; another session's does not.
    in_session(&fs, &o, "s", "read_file", json!({ "path": "a.txt", "limit": 1 })).await.unwrap();
    assert_eq!(in_session(&fs, &o, "t", "edit_file", edit.clone()).await.unwrap_err().code, Code::NotRead);
    in_session(&fs, &o, "s", "edit_file", edit).await.unwrap();
    // The session's own edit counts as a read.
    in_session(&fs, &o, "s", "edit_file", json!({ "path": "a.txt", "old_string": "two", "new_string": "2" }))
        .await
        .unwrap();
    // Someone else changes the file: stale until read again.
    fs.write_file("a.txt", "changed\n").await.unwrap();
    let e = in_session(&fs, &o, "s", "write_file", json!({ "path": "a.txt", "content": "x" })).await.unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (Code::Stale, "a.txt changed since it was last read. Read it again before editing it.")
    );
    // The same content written again is not a change.
    in_session(&fs, &o, "s", "read_files", json!({ "paths": ["a.txt"] })).await.unwrap();
    fs.write_file("a.txt", "changed\n").await.unwrap();
    in_session(&fs, &o, "s", "write_file", json!({ "path": "a.txt", "content": "x" })).await.unwrap();
    // A new file needs no read.
    in_session(&fs, &o, "s", "write_file", json!({ "path": "new.txt", "content": "n" })).await.unwrap();
    assert_eq!(fs.read_file("a.txt").await.unwrap(), "x");
}

#[tokio::test]
async fn require_read_guards_apply_patch_updates_and_replacements_before_any_write() {
    let fs = mem(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let o = guarded();
    in_session(&fs, &o, "s", "read_file", json!({ "path": "a.txt" })).await.unwrap();
    let patch = "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** Add File: b.txt\n+B\n*** End Patch";
    let e = in_session(&fs, &o, "s", "apply_patch", json!({ "input": patch })).await.unwrap_err();
    assert_eq!(e.code, Code::NotRead);
    assert!(e.message.contains("b.txt"), "{}", e.message);
    assert_eq!(fs.read_file("a.txt").await.unwrap(), "a\n");
    in_session(&fs, &o, "s", "read_file", json!({ "path": "b.txt" })).await.unwrap();
    in_session(&fs, &o, "s", "apply_patch", json!({ "input": patch })).await.unwrap();
    // What the patch wrote counts as read: a second patch needs no new read.
    let again = "*** Begin Patch\n*** Update File: a.txt\n-A\n+AA\n*** End Patch";
    in_session(&fs, &o, "s", "apply_patch", json!({ "input": again })).await.unwrap();
    assert_eq!(fs.read_file("a.txt").await.unwrap(), "AA\n");
}
