//! `readOnlyCommands`: git, the list's entries, and the attacks that word-prefix matching let
//! through (the other programs and the line's parsing: `read_only_line_tests`).

use super::*;

/// The README's list.
pub(super) const README: &[&str] = &["ls", "cat", "git status", "git diff", "git log"];
/// Programs from each part of the table.
pub(super) const ALL: &[&str] = &[
    "ls", "cat", "grep", "wc", "head", "tail", "pwd", "echo", "true", "git", "find", "sort", "rg", "sed", "uniq",
    "date", "tree", "file", "diff", "base64",
];

pub(super) fn ro(list: &[&str]) -> ReadOnlyCommands {
    ReadOnlyCommands::new(list.iter().map(|s| s.to_string()).collect()).unwrap()
}

/// Checks the sh reading whatever the platform; `needs_approval` is checked too where the line
/// must need approval under either reading.
pub(super) fn asks(list: &[&str], lines: &[&str]) {
    let r = ro(list);
    for line in lines {
        assert!(r.refusal_in(line, false).is_some(), "{line:?} should need approval");
        assert!(r.needs_approval(line), "{line:?} should need approval");
    }
}

pub(super) fn runs(list: &[&str], lines: &[&str]) {
    let r = ro(list);
    for line in lines {
        assert_eq!(r.refusal_in(line, false), None, "{line:?} should need no approval");
    }
}

fn config_error(entry: &str) -> String {
    let e = ReadOnlyCommands::new(vec![entry.into()]).unwrap_err();
    assert_eq!(e.code, Code::Configuration, "{entry:?}");
    e.message
}

#[test]
fn git_log_output_that_replaced_a_file_needs_approval() {
    asks(
        README,
        &[
            "git log --output=src/math.js",
            "git log --output src/math.js",
            "git log --oneline --outp=src/math.js",
            "git log --out'put'=src/math.js",
            "git --no-pager log --output=src/math.js",
            "git diff --output=x.patch",
        ],
    );
    let why = ro(README).refusal_in("git log --output=src/math.js", false).unwrap();
    assert!(why.contains("--output") && why.contains("writes a file"), "{why}");
}

#[test]
fn git_diff_ext_diff_and_log_textconv_need_approval() {
    asks(
        &["git diff", "git log", "git show", "git grep", "git blame"],
        &[
            "git diff --ext-diff",
            "git diff --ext",
            "git log -p --textconv",
            "git show --textconv HEAD",
            "git grep --textconv x",
            "git blame --textconv a.txt",
        ],
    );
}

#[test]
fn git_options_before_the_subcommand_other_than_harmless_ones_need_approval() {
    asks(
        README,
        &[
            "git -c core.pager=touch log",
            "git -ccore.fsmonitor=touch status",
            "git --config-env=core.pager=X log",
            "git -C sub status",
            "git --git-dir=sub log",
            "git --work-tree=. status",
            "git --exec-path=. log",
            "git -p log",
            "git --paginate log",
            "git --bare log",
        ],
    );
    runs(README, &["git --no-pager log --oneline", "git -P diff --stat", "git --no-optional-locks status"]);
}

#[test]
fn git_subcommand_options_that_write_run_or_change_need_approval() {
    asks(
        &["git"],
        &[
            "git log -c",
            "git grep -O x",
            "git grep -nOvim x",
            "git grep --open-files-in-pager=vim x",
            "git grep --open x",
            "git log --upload-pack=x",
            "git log --exec=x",
            "git log --help",
            "git log --show-signature",
            "git log --format=%G?",
            "git ls-files -o",
            "git branch -d main",
            "git branch -D main",
            "git branch -m a b",
            "git branch new-branch",
            "git branch --edit-description",
            "git branch --set-upstream-to=x",
            "git push",
            "git stash",
            "git checkout status",
            "git",
        ],
    );
}

#[test]
fn git_read_only_forms_need_no_approval() {
    runs(
        &["git"],
        &[
            "git log --oneline -5",
            "git log -SOpen --stat",
            "git log --format='%h %s' -3",
            "git status --short",
            "git diff --stat HEAD~1",
            "git diff --text",
            "git show 'HEAD@{1}' --stat",
            "git branch",
            "git branch -a",
            "git branch -vv",
            "git branch --show-current",
            "git branch --list 'feat*'",
            "git grep -n foo -- src",
            "git ls-files --others",
            "git rev-parse --show-toplevel HEAD",
            "git blame -L 1,5 src/a.rs",
        ],
    );
}

#[test]
fn a_listed_prefix_allows_its_options_but_not_a_longer_name() {
    runs(README, &["git status", "git status --short", "ls -la src", "cat README.md"]);
    asks(README, &["git stash", "git statusx", "lsblk", "git show HEAD"]);
    let r = ro(&["git log --oneline"]);
    assert_eq!(r.refusal_in("git log --oneline -5", false), None);
    assert!(r.refusal_in("git log -5", false).is_some());
}

#[test]
fn a_name_or_subcommand_without_a_read_only_form_is_a_configuration_error() {
    let m = config_error("awk");
    assert!(m.contains("'awk'") && m.contains("system()"), "{m}");
    let m = config_error("git push");
    assert!(m.contains("'git push'") && m.contains("read-only forms are status"), "{m}");
    let m = config_error("xargs");
    assert!(m.contains("runs the program it is given"), "{m}");
    assert!(config_error("sh").contains("shell"));
    assert!(config_error("env").contains("runs the program it is given"));
    for entry in [
        "tar",
        "python",
        "node",
        "cd",
        "rm",
        "git -c x=y log",
        "git -C x log",
        "sed -i",
        "sort -o",
        "git branch -d",
        "find . -delete",
        "git log --output",
        "ls 'a b'",
        "ls ~",
    ] {
        config_error(entry);
    }
    assert!(config_error("rm").contains("it knows"));
    for entry in ["git", "git --no-pager log", "sed", "sed -n", "find . -name", "git branch --list", "uniq -c"] {
        ReadOnlyCommands::new(vec![entry.into()]).unwrap();
    }
}

/// In a real repository `git log --output=victim.txt` does replace the file, and the predicate
/// asks for it; the read-only forms it approves leave the directory as it was.
#[test]
fn git_log_output_in_a_real_repository_writes_a_file_and_needs_approval() {
    let dir = tempfile::tempdir().unwrap();
    let sh = |line: &str| {
        std::process::Command::new("sh")
            .args(["-c", line])
            .current_dir(dir.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !sh("git --version") {
        eprintln!("git is not installed; skipped");
        return;
    }
    let setup = "git init -q && git config user.name t && git config user.email t@example.com \
                 && echo 'one' > victim.txt && git add victim.txt && git commit -qm one";
    assert!(sh(setup));
    let listing = || {
        let mut names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        names.sort();
        (names, std::fs::read_to_string(dir.path().join("victim.txt")).unwrap())
    };
    let before = listing();
    let r = ro(README);
    for line in ["git log --oneline -5", "git status --short", "git diff", "git log -p -1"] {
        assert!(!r.needs_approval(line), "{line}");
        assert!(sh(line), "{line}");
    }
    assert_eq!(listing(), before, "an approved command changed the repository's files");
    let attack = "git log --output=victim.txt";
    assert!(r.needs_approval(attack));
    assert!(sh(attack));
    assert_ne!(listing().1, before.1, "the attack did not write; the test proves nothing");
}
