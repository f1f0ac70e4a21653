//! corral's read-only table for `readOnlyCommands`: the programs it can approve and, for those with
//! options that write a file or run a program, the arguments that keep them read-only. Modelled on
//! codex's known-safe commands (`command_safety/is_safe_command.rs`); a word here is a word as the
//! shell passes it to the program (quotes removed). `git`'s subcommands have a module of their own.

pub(super) mod git;

/// Programs with no option that writes a file or runs a program.
const PLAIN: &[&str] = &[
    "basename", "cat", "cmp", "cut", "df", "dirname", "du", "echo", "expr", "false", "grep", "head", "id", "ls", "nl",
    "numfmt", "paste", "printenv", "pwd", "readlink", "realpath", "rev", "seq", "stat", "tac", "tail", "tr", "true",
    "uname", "wc", "which", "whoami",
];

/// Programs approved only with the arguments their check accepts.
const CHECKED: &[&str] = &["base64", "date", "diff", "file", "find", "git", "rg", "sed", "sort", "tree", "uniq"];

const SED_FORM: &str =
    "only `sed -n SCRIPT [FILE…]` is read-only, SCRIPT being addresses (`N`, `N,M`, `$`, `/re/`) each followed by `p`";

/// The names the table knows, for messages.
pub(super) fn known() -> String {
    let mut all: Vec<&str> = PLAIN.iter().chain(CHECKED).copied().collect();
    all.sort_unstable();
    all.join(", ")
}

/// Why a program the table does not know has no read-only form.
pub(super) fn why_unknown(name: &str) -> &'static str {
    match name {
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "fish" | "csh" | "tcsh" | "cmd" | "cmd.exe" | "powershell"
        | "pwsh" => "it is a shell: it runs any command",
        "env" | "xargs" | "nice" | "nohup" | "timeout" | "time" | "sudo" | "doas" | "su" | "exec" | "command"
        | "builtin" | "eval" | "source" | "." | "watch" | "stdbuf" | "ionice" | "chroot" | "strace" | "parallel" => {
            "it runs the program it is given"
        }
        "awk" | "gawk" | "mawk" | "nawk" => {
            "its programs run commands (`system()`, `| getline`) and write files (`print > f`)"
        }
        "python" | "python3" | "node" | "perl" | "ruby" | "php" | "deno" | "bun" | "lua" | "java" | "Rscript" => {
            "it runs code"
        }
        "tar" => "it writes files and runs programs (`--to-command`, `-I`, `--checkpoint-action`)",
        "cd" | "pushd" | "popd" => "it changes the directory later commands run in (`cd` alone goes home)",
        "less" | "more" | "man" | "vi" | "vim" | "nano" | "emacs" => {
            "it is interactive and can run commands or write files"
        }
        _ => "it is not in corral's read-only table",
    }
}

/// Why the table does not approve `words` (normalized; the program first), or `None`. With
/// `partial`, `words` is a list entry: a prefix of the command lines it stands for, which may
/// stop before a required word (`git`, `sed -n`).
pub(super) fn refusal(words: &[String], partial: bool) -> Option<String> {
    let name = words.first()?.as_str();
    let args = &words[1..];
    let r = match name {
        n if PLAIN.contains(&n) => Ok(()),
        "git" => git::check(args, partial),
        "sed" => sed(args, partial),
        "find" => find(args),
        "uniq" => getopt(args, &UNIQ).and_then(|ops| match ops.get(1) {
            Some(op) => Err(format!("`uniq` writes its second operand (`{op}`): give it at most one file")),
            None => Ok(()),
        }),
        "date" => getopt(args, &DATE).and_then(|ops| match ops.iter().find(|o| !o.starts_with('+')) {
            Some(op) => Err(format!("`date {op}` sets the clock: only `+FORMAT` operands print")),
            None => Ok(()),
        }),
        "sort" => getopt(args, &SORT).map(drop),
        "rg" => getopt(args, &RG).map(drop),
        "tree" => getopt(args, &TREE).map(drop),
        "file" => getopt(args, &FILE).map(drop),
        "diff" => getopt(args, &DIFF).map(drop),
        "base64" => getopt(args, &BASE64).map(drop),
        n => Err(format!("`{n}` has no read-only form: {}", why_unknown(n))),
    };
    r.err()
}

/// How a getopt-style program reads its options, and those that write a file or run a program.
struct Opts {
    /// Short options refused, with why.
    danger_short: &'static [(char, &'static str)],
    /// Short options taking a value: the rest of the word, or the next word.
    value_short: &'static str,
    /// Short options taking an optional value: the rest of the word only.
    optional_short: &'static str,
    /// Whether the letters after a value-taking one are options too (tree reads them so).
    whole_cluster: bool,
    /// Long options refused, with why; an abbreviation of one (`--out` for `--output`) too.
    danger_long: &'static [(&'static str, &'static str)],
    /// Long options whose value may be the next word.
    value_long: &'static [&'static str],
}

pub(super) const WRITES: &str = "writes a file";
pub(super) const RUNS: &str = "runs a program";

const NONE: Opts = Opts {
    danger_short: &[],
    value_short: "",
    optional_short: "",
    whole_cluster: false,
    danger_long: &[],
    value_long: &[],
};
const UNIQ: Opts = Opts { value_short: "fsw", value_long: &["--skip-fields", "--skip-chars", "--check-chars"], ..NONE };
const DATE: Opts = Opts {
    danger_short: &[('s', "sets the clock")],
    value_short: "dfrs",
    optional_short: "I",
    danger_long: &[("--set", "sets the clock")],
    value_long: &["--date", "--file", "--reference", "--set", "--rfc-3339"],
    ..NONE
};
const SORT: Opts = Opts {
    danger_short: &[('o', WRITES), ('T', "writes temporary files in the directory it names")],
    value_short: "kStoT",
    danger_long: &[
        ("--output", WRITES),
        ("--compress-program", RUNS),
        ("--temporary-directory", "writes temporary files in the directory it names"),
    ],
    ..NONE
};
const RG: Opts = Opts {
    danger_short: &[('z', "runs decompression programs")],
    value_short: "efgtTmABCMjrEd",
    danger_long: &[
        ("--pre", "runs a program on every file searched"),
        ("--pre-glob", "chooses the files `--pre` runs a program on"),
        ("--search-zip", "runs decompression programs"),
        ("--hostname-bin", RUNS),
    ],
    ..NONE
};
const TREE: Opts = Opts {
    danger_short: &[('o', WRITES), ('R', "writes an `00Tree.html` in every directory")],
    whole_cluster: true,
    ..NONE
};
const FILE: Opts = Opts {
    danger_short: &[
        ('C', "compiles a magic file (writes it)"),
        ('z', "runs decompression programs"),
        ('Z', "runs decompression programs"),
    ],
    value_short: "eFfmP",
    danger_long: &[
        ("--compile", "compiles a magic file (writes it)"),
        ("--uncompress", "runs decompression programs"),
        ("--uncompress-noreport", "runs decompression programs"),
    ],
    ..NONE
};
const DIFF: Opts = Opts {
    danger_short: &[('l', "runs `pr` on the output")],
    value_short: "CDFILSUWxX",
    danger_long: &[("--paginate", "runs `pr` on the output")],
    ..NONE
};
const BASE64: Opts =
    Opts { danger_short: &[('o', WRITES)], value_short: "wbi", danger_long: &[("--output", WRITES)], ..NONE };

/// Why the option word `a` is refused, or `None`.
fn option_refusal(a: &str, o: &Opts) -> Option<String> {
    if let Some(long) = a.strip_prefix("--") {
        let name = &a[..2 + long.find('=').unwrap_or(long.len())];
        let hit = o.danger_long.iter().find(|(d, _)| name.len() > 2 && d.starts_with(name))?;
        return Some(format!("`{a}` {}", hit.1));
    }
    for c in a.chars().skip(1) {
        if let Some((_, why)) = o.danger_short.iter().find(|(d, _)| *d == c) {
            let part = if a.chars().count() > 2 { format!(" (`-{c}`)") } else { String::new() };
            return Some(format!("`{a}`{part} {why}"));
        }
        if !o.whole_cluster && (o.value_short.contains(c) || o.optional_short.contains(c)) {
            break;
        }
    }
    None
}

/// Whether the option word `a` takes the next word as its value.
fn takes_next(a: &str, o: &Opts) -> bool {
    if a.starts_with("--") {
        return !a.contains('=') && o.value_long.contains(&a);
    }
    let letters: Vec<char> = a.chars().skip(1).collect();
    match letters.iter().position(|c| o.value_short.contains(*c) || o.optional_short.contains(*c)) {
        Some(k) => k + 1 == letters.len() && o.value_short.contains(letters[k]),
        None => false,
    }
}

/// The operands of `args` (the words that are neither options nor their values), or why an
/// option is refused. Every word that looks like an option is checked, values and words after
/// `--` too: that can only refuse more.
fn getopt<'a>(args: &'a [String], o: &Opts) -> Result<Vec<&'a str>, String> {
    let mut operands = Vec::new();
    let (mut value_next, mut ended) = (false, false);
    for a in args.iter().map(String::as_str) {
        let is_value = std::mem::take(&mut value_next);
        if a.len() > 1 && a.starts_with('-') {
            if let Some(why) = option_refusal(a, o) {
                return Err(why);
            }
            if a == "--" && !is_value && !ended {
                ended = true;
                continue;
            }
            if !is_value && !ended {
                value_next = takes_next(a, o);
                continue;
            }
        }
        if !is_value {
            operands.push(a);
        }
    }
    Ok(operands)
}

fn find(args: &[String]) -> Result<(), String> {
    for a in args {
        let why = match a.as_str() {
            a if a.starts_with("-exec") || a.starts_with("-ok") => "runs a program",
            "-delete" => "deletes files",
            a if a.starts_with("-fprint") || a == "-fls" => "writes a file",
            _ => continue,
        };
        return Err(format!("`find {a}` {why}"));
    }
    Ok(())
}

fn sed(args: &[String], partial: bool) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("-n") => {}
        None if partial => return Ok(()),
        _ => return Err(SED_FORM.to_string()),
    }
    match args.get(1) {
        None if partial => return Ok(()),
        Some(s) if sed_print_script(s) => {}
        Some(s) => {
            return Err(format!(
                "the sed script `{s}` is not only addresses followed by `p` (`w`, `r`, `e` and `s///w` write files or run commands): {SED_FORM}"
            ))
        }
        None => return Err(SED_FORM.to_string()),
    }
    match args[2..].iter().find(|f| f.starts_with('-') && *f != "-") {
        Some(f) => {
            Err(format!("`sed … {f}`: sed reads options after the script too (`-i` edits in place); {SED_FORM}"))
        }
        None => Ok(()),
    }
}

/// The index of sed's script in `words` (`sed -n SCRIPT …`), which names no file.
pub(super) fn sed_script_index(words: &[String]) -> Option<usize> {
    (words.len() > 2 && words[0] == "sed" && words[1] == "-n" && sed_print_script(&words[2])).then_some(2)
}

/// Whether `s` is `ADDR[,ADDR]p` commands separated by `;`, an address being `N`, `$` or `/re/`.
fn sed_print_script(s: &str) -> bool {
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    let skip_spaces = |i: &mut usize| {
        while b.get(*i) == Some(&' ') {
            *i += 1;
        }
    };
    loop {
        skip_spaces(&mut i);
        if !sed_address(&b, &mut i) {
            return false;
        }
        if b.get(i) == Some(&',') {
            i += 1;
            if !sed_address(&b, &mut i) {
                return false;
            }
        }
        if b.get(i) != Some(&'p') {
            return false;
        }
        i += 1;
        skip_spaces(&mut i);
        match b.get(i) {
            None => return true,
            Some(';') => i += 1,
            Some(_) => return false,
        }
        skip_spaces(&mut i);
        if i == b.len() {
            return true;
        }
    }
}

fn sed_address(b: &[char], i: &mut usize) -> bool {
    match b.get(*i) {
        Some('$') => *i += 1,
        Some(c) if c.is_ascii_digit() => {
            while b.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
        }
        Some('/') => {
            *i += 1;
            loop {
                match b.get(*i) {
                    Some('/') => break,
                    Some('\\') if b.get(*i + 1).is_some_and(|c| *c != '\n') => *i += 1,
                    Some(c) if *c != '\n' && *c != '\\' => {}
                    _ => return false,
                }
                *i += 1;
            }
            *i += 1;
        }
        _ => return false,
    }
    true
}
