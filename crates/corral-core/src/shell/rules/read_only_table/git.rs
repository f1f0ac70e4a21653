//! The git part of corral's read-only table: the subcommands with a read-only form, the global
//! options allowed before them, and the options refused after them.

use super::{RUNS, WRITES};

/// The git subcommands with a read-only form.
const GIT_SUBCOMMANDS: &[&str] = &["status", "log", "diff", "show", "branch", "grep", "ls-files", "rev-parse", "blame"];

/// The options allowed between `git` and its subcommand; every other one is refused.
const GIT_GLOBALS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-replace-objects",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--no-lazy-fetch",
];

const GIT_READ_ONLY: &str =
    "git's read-only forms are status, log, diff, show, branch (listing), grep, ls-files, rev-parse and blame";

/// `words` without git's harmless global options (`git --no-pager log` → `git log`), or why one
/// of those options is refused. Other programs' words are returned as they are.
pub(in crate::shell::rules) fn normalize(words: &[String]) -> Result<Vec<String>, String> {
    if words.first().map(String::as_str) != Some("git") {
        return Ok(words.to_vec());
    }
    let mut i = 1;
    while let Some(w) = words.get(i).filter(|w| w.starts_with('-')) {
        if !GIT_GLOBALS.contains(&w.as_str()) {
            let why = match w.as_str() {
                w if w.starts_with("-c") || w.starts_with("--config-env") => {
                    "sets configuration, which can name a program to run (a pager, a diff or textconv program)"
                }
                w if w.starts_with("-C") || w.starts_with("--git-dir") || w.starts_with("--work-tree") => {
                    "points git at another repository, whose configuration can run programs"
                }
                w if w.starts_with("--exec-path") => "sets where git finds the programs it runs",
                "-p" | "--paginate" => "runs a pager",
                _ => "is not one of the global options approved (--no-pager, -P, --literal-pathspecs, …)",
            };
            return Err(format!("`git {w}` {why}"));
        }
        i += 1;
    }
    Ok(std::iter::once(words[0].clone()).chain(words[i..].iter().cloned()).collect())
}

/// Long git options that write a file, run a program or read another repository's configuration
/// (refused after the subcommand too, abbreviated or not).
const GIT_DANGER_LONG: &[(&str, &str)] = &[
    ("--output", WRITES),
    ("--ext-diff", "runs the external diff program"),
    ("--textconv", "runs textconv filter programs"),
    ("--exec", RUNS),
    ("--exec-path", "sets where git finds the programs it runs"),
    ("--paginate", "runs a pager"),
    ("--open-files-in-pager", "runs the pager it names"),
    ("--upload-pack", RUNS),
    ("--config-env", "sets configuration, which can name a program to run"),
    ("--git-dir", "points git at another repository"),
    ("--work-tree", "points git at another work tree"),
    ("--show-signature", "runs gpg"),
    ("--help", "opens a manual page or a browser"),
];

/// Why `git ARGS` (global options removed) is not read-only, or `Ok`.
pub(super) fn check(args: &[String], partial: bool) -> Result<(), String> {
    let Some(sub) = args.first() else {
        return if partial { Ok(()) } else { Err(format!("`git` needs a subcommand: {GIT_READ_ONLY}")) };
    };
    if !GIT_SUBCOMMANDS.contains(&sub.as_str()) {
        return Err(format!("`git {sub}` has no read-only form: {GIT_READ_ONLY}"));
    }
    for a in &args[1..] {
        if let Some(why) = git_option_refusal(sub, a) {
            return Err(format!("`git {sub} {a}` {why}"));
        }
    }
    if sub == "branch" {
        return git_branch(&args[1..]);
    }
    Ok(())
}

fn git_option_refusal(sub: &str, a: &str) -> Option<&'static str> {
    if let Some(long) = a.strip_prefix("--") {
        let name = &a[..2 + long.find('=').unwrap_or(long.len())];
        if name.len() <= 2 || name == "--text" {
            return None;
        }
        return GIT_DANGER_LONG.iter().find(|(d, _)| d.starts_with(name)).map(|(_, why)| *why);
    }
    if a.starts_with("-c") {
        return Some("is never approved for git (`-c` sets configuration, which can name a program)");
    }
    if a.starts_with("-o") {
        return Some("is never approved for git (an output option)");
    }
    if sub == "grep" && a.starts_with('-') && a.contains('O') {
        return Some("(`-O`) opens the matching files in a pager, which it can name");
    }
    if matches!(sub, "log" | "show") && a.contains("%G") {
        return Some("(`%G…`) runs gpg to check signatures");
    }
    None
}

/// `git branch` lists only with these arguments; anything else can create, rename or delete a
/// branch. Patterns are allowed after `--list`.
fn git_branch(args: &[String]) -> Result<(), String> {
    const FLAGS: &[&str] = &[
        "--list",
        "--show-current",
        "--all",
        "--remotes",
        "--verbose",
        "--ignore-case",
        "--color",
        "--no-color",
        "--no-column",
        "--omit-empty",
        "--no-abbrev",
    ];
    const VALUED: &[&str] = &[
        "--format=",
        "--sort=",
        "--contains=",
        "--no-contains=",
        "--merged=",
        "--no-merged=",
        "--points-at=",
        "--color=",
        "--abbrev=",
        "--column=",
    ];
    let list = args.iter().any(|a| a == "--list");
    for a in args {
        let ok = FLAGS.contains(&a.as_str())
            || VALUED.iter().any(|p| a.starts_with(p))
            || (a.len() > 1
                && !a.starts_with("--")
                && a.starts_with('-')
                && a[1..].chars().all(|c| "alrvi".contains(c)))
            || (list && !a.starts_with('-'));
        if !ok {
            return Err(format!(
                "`git branch {a}` can create, rename or delete a branch: only listing is read-only (`--list [PATTERN]`, `-a`, `-r`, `-v`, `--show-current`, `--format=…`)"
            ));
        }
    }
    Ok(())
}
