//! The reader against the real shells: generated command lines (quotes, `$'…'`, escapes,
//! expansions, here-documents, comments, line continuations, operators) run by `bash` and `dash`,
//! each simple command a program that records the argv it gets; the words [`read`] yields must
//! be that argv, and its commands the ones that ran.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command as Process;

use super::{read, Construct};

/// A small deterministic generator (xorshift), so a failure names a line that comes back.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

/// One piece of a word: its shell text, and the text the program gets (`None`: an expansion).
fn piece(g: &mut Gen, bash: bool) -> (String, Option<String>) {
    const PLAIN: &[&str] = &["a", "b7", "x.y", "-f", "--k=v", "a/b", "c:d", "e,f", "@g", "+", "%", "=", "x#y", "~u"];
    const SINGLE: &[&str] =
        &["", "a b", "$x", "\"q\"", "a\\b", ";|&", "*?[", "#c", "`id`", "$(id)", "tab\there", "l1\nl2"];
    const DOUBLE: &[(&str, &str)] = &[
        ("", ""),
        ("a b", "a b"),
        ("'s'", "'s'"),
        ("\\\"", "\""),
        ("\\\\", "\\"),
        ("\\$", "$"),
        ("\\`", "`"),
        ("\\a", "\\a"),
        ("x\\\ny", "xy"),
        (";|&<>()", ";|&<>()"),
        ("*?[", "*?["),
        ("# not a comment", "# not a comment"),
        ("l1\nl2", "l1\nl2"),
    ];
    const ESCAPED: &[&str] = &[";", " ", "'", "\"", "$", "\\", "*", "|", "&", "<", ">", "(", "#", "a", "`", "{"];
    const ANSI: &[(&str, &str)] = &[
        ("a\\nb", "a\nb"),
        ("\\t", "\t"),
        ("\\x41\\x7e", "A~"),
        ("\\101", "A"),
        ("\\'", "'"),
        ("\\\\", "\\"),
        ("\\q", "\\q"),
        ("\\\"", "\""),
        ("$x `y`", "$x `y`"),
    ];
    match g.below(if bash { 7 } else { 6 }) {
        0 | 1 => {
            let p = g.pick(PLAIN);
            (p.to_string(), Some(p.to_string()))
        }
        2 => {
            let s = g.pick(SINGLE);
            (format!("'{s}'"), Some(s.to_string()))
        }
        3 => {
            let (src, val) = DOUBLE[g.below(DOUBLE.len())];
            (format!("\"{src}\""), Some(val.to_string()))
        }
        4 => {
            let e = g.pick(ESCAPED);
            (format!("\\{e}"), Some(e.to_string()))
        }
        5 => {
            // expansions that make exactly one field: quoted
            let e = g.pick(&["\"$V\"", "\"${V}\"", "\"$(printf x)\"", "\"`printf y`\"", "\"$((1+2))\""]);
            (e.to_string(), None)
        }
        _ => {
            let (src, val) = ANSI[g.below(ANSI.len())];
            (format!("$'{src}'"), Some(val.to_string()))
        }
    }
}

/// A generated line, and for each of its recording commands (by marker) the argv expected.
fn line(g: &mut Gen, bash: bool) -> String {
    let mut out = String::new();
    let commands = 1 + g.below(3);
    for k in 0..commands {
        out.push_str(g.pick(&["p", "'p'", "\"p\"", "\\p", "p''"]));
        out.push_str(&format!(" m{k}"));
        for _ in 0..g.below(4) {
            out.push_str(g.pick(&[" ", "  ", "\t", " \\\n "]));
            for _ in 0..1 + g.below(3) {
                out.push_str(&piece(g, bash).0);
            }
        }
        if g.below(6) == 0 {
            let body = match g.below(3) {
                0 => format!(" <<EOF\n$(p h{k} \"a b\") `p x{k}` ;\nEOF\n"),
                1 => " <<'E'\nnot; p run $(p no)\nE\n".to_string(),
                _ => format!(" <<-X\n\tbody $(p t{k})\n\tX\n"),
            };
            out.push_str(&body);
        } else if g.below(6) == 0 {
            out.push_str(" # p comment; p m9");
        }
        if k + 1 < commands {
            let ends_line = out.ends_with('\n') || out.contains(" # p comment") && !out.ends_with('\n');
            if out.ends_with(" # p comment; p m9") {
                out.push('\n');
            } else if !ends_line {
                out.push_str(g.pick(&[" ; ", ";", " && ", "&&", " | ", "|", "\n"]));
            }
        }
    }
    out
}

/// What the shell gave each recording command: marker → argv after the marker.
fn run(shell: &str, line: &str, dir: &Path) -> BTreeMap<String, Vec<String>> {
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir(&out).unwrap();
    let status = Process::new(shell)
        .arg("-c")
        .arg(line)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", dir.display()))
        .env("OUT", &out)
        .env("V", "v a l")
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "{shell} failed on {line:?}");
    let mut ran = BTreeMap::new();
    for e in std::fs::read_dir(&out).unwrap() {
        let bytes = std::fs::read(e.unwrap().path()).unwrap();
        let mut args: Vec<String> = bytes.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        args.pop(); // after the last NUL
        let marker = args.remove(0);
        ran.insert(marker, args);
    }
    ran
}

/// What the reader says the recording commands get (`None` for an expanded word).
fn expected(line: &str) -> BTreeMap<String, Vec<Option<String>>> {
    let reading = read(line);
    assert!(reading.uncertain().is_none(), "{line:?}: {:?}", reading.marks);
    let mut out = BTreeMap::new();
    for c in reading.commands.iter().filter(|c| !c.words.is_empty()) {
        // the recording commands, and at the top nothing else (substitutions run `printf`)
        if c.nested && c.words[0].text != "p" {
            continue;
        }
        assert_eq!(c.words[0].text, "p", "{line:?}: {c:?}");
        let marker = c.words[1].text.clone();
        let words = c.words[2..].iter().map(|w| (!w.expanded).then(|| w.text.clone())).collect();
        assert!(out.insert(marker, words).is_none(), "{line:?}: a marker twice");
    }
    out
}

fn printer(dir: &Path) {
    let p = dir.join("p");
    std::fs::write(&p, "#!/bin/sh\nprintf '%s\\0' \"$@\" > \"$OUT/$$\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn differential(shell: &str, bash: bool, seed: u64, lines: usize) {
    let dir = tempfile::tempdir().unwrap();
    printer(dir.path());
    let mut g = Gen(seed);
    for _ in 0..lines {
        let l = line(&mut g, bash);
        let want = expected(&l);
        let got = run(shell, &l, dir.path());
        assert_eq!(
            want.keys().collect::<Vec<_>>(),
            got.keys().collect::<Vec<_>>(),
            "{shell}: the commands that ran differ for {l:?}"
        );
        for (marker, words) in &want {
            let argv = &got[marker];
            assert_eq!(words.len(), argv.len(), "{shell}: word count of {marker} in {l:?}: {words:?} vs {argv:?}");
            for (w, a) in words.iter().zip(argv) {
                if let Some(w) = w {
                    assert_eq!(w, a, "{shell}: a word of {marker} in {l:?}");
                }
            }
        }
    }
}

#[test]
fn the_words_read_are_the_argv_bash_gives_a_program() {
    differential("bash", true, 0x9e37_79b9_7f4a_7c15, 600);
}

#[test]
fn the_words_read_are_the_argv_dash_gives_a_program() {
    differential("dash", false, 0x2545_f491_4f6c_dd1d, 600);
}

#[test]
fn what_the_reader_cannot_be_certain_of_is_marked() {
    for (line, what) in [
        ("echo 'open", Construct::Unterminated),
        ("echo \"open", Construct::Unterminated),
        ("echo $(open", Construct::Unterminated),
        ("echo ${open", Construct::Unterminated),
        ("echo `open", Construct::Unterminated),
        ("echo a\\", Construct::TrailingBackslash),
        ("echo $'\\cA'", Construct::UnknownEscape),
        ("echo $'\\u00e9'", Construct::UnknownEscape),
        ("echo $'\\xff'", Construct::UnknownEscape),
    ] {
        let r = read(line);
        assert_eq!(r.uncertain().map(|m| &m.what), Some(&what), "{line:?}");
    }
    for line in ["echo 'closed'", "a && b | c; d", "echo $'\\n'"] {
        assert!(read(line).uncertain().is_none(), "{line:?}");
    }
}

#[test]
fn commands_inside_substitutions_and_backticks_are_read_too() {
    let r = read("echo \"$(rm -rf a)\" `rm -rf b` $(x; (rm -rf c)) <(rm -rf d)");
    let nested: Vec<&str> = r.commands.iter().filter(|c| c.nested).map(|c| c.raw.as_str()).collect();
    for want in ["rm -rf a", "rm -rf b", "rm -rf c", "rm -rf d"] {
        assert!(nested.contains(&want), "{want} in {nested:?}");
    }
    let top: Vec<&str> =
        r.commands.iter().filter(|c| !c.nested && !c.words.is_empty()).map(|c| c.raw.as_str()).collect();
    assert_eq!(top.len(), 1, "{top:?}");
}
