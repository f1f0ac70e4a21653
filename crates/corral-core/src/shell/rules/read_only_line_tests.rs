//! `readOnlyCommands`: the table's programs other than git, and how a line is split into simple
//! commands (operators, redirections, substitutions, globs).

use super::read_only_tests::{asks, ro, runs, ALL};

#[test]
fn find_exec_delete_and_file_writing_actions_need_approval() {
    asks(
        &["find"],
        &[
            "find . -exec rm {} ;",
            "find . -name x -exec rm '{}' ';'",
            "find . -execdir sh -c id ';'",
            "find . -ok rm '{}' ';'",
            "find . -okdir rm '{}' ';'",
            "find . -delete",
            "find . -fprint out.txt",
            "find . -fprint0 out.txt",
            "find . -fprintf out.txt %p",
            "find . -fls out.txt",
        ],
    );
    runs(&["find"], &["find . -name '*.rs'", "find src -type f -newer Cargo.toml", "find . -maxdepth 2 -print0"]);
}

#[test]
fn sort_output_temporary_directory_and_compress_program_need_approval() {
    asks(
        &["sort"],
        &[
            "sort -o out.txt a.txt",
            "sort -uo out.txt a.txt",
            "sort --output=out.txt a.txt",
            "sort --out=out.txt a.txt",
            "sort --compress-program=sh a.txt",
            "sort -T tmp a.txt",
        ],
    );
    runs(&["sort"], &["sort -u a.txt", "sort -k 2 -n a.txt", "sort -to a.txt", "sort -rn a.txt"]);
}

#[test]
fn rg_preprocessors_and_search_zip_need_approval() {
    asks(
        &["rg"],
        &[
            "rg --pre sh foo",
            "rg --pre=./x.sh foo",
            "rg --pre-glob '*.js' foo",
            "rg -z foo",
            "rg -nz foo",
            "rg --search-zip foo",
            "rg --hostname-bin=x foo",
        ],
    );
    runs(&["rg"], &["rg -n foo src", "rg -g '*.rs' 'fn main'", "rg --pretty foo", "rg -e -x -- a.txt"]);
}

#[test]
fn sed_scripts_other_than_printing_addresses_need_approval() {
    asks(
        &["sed"],
        &[
            "sed -n '1w out.txt' a.txt",
            "sed -n '1p;w out.txt' a.txt",
            "sed -n 's/a/b/w out.txt' a.txt",
            "sed -n '1e id' a.txt",
            "sed -n 1r/etc/passwd a.txt",
            "sed -n '/x/w out.txt' a.txt",
            "sed -n 1p a.txt -i",
            "sed -i 1p a.txt",
            "sed 1p a.txt",
            "sed -n",
            "sed -n 1p /etc/passwd",
            "sed -n '/a/p' /etc/p",
        ],
    );
    runs(
        &["cat", "sed"],
        &[
            "sed -n 1,10p file",
            "sed -n '$p' a.txt",
            "sed -n '/fn main/,/^}/p' src/main.rs",
            "sed -n '1p; 5,7p' a.txt",
            "sed -n '/a\\/b/p' a.txt",
            "cat a.txt | sed -n 2p",
        ],
    );
}

#[test]
fn uniq_with_an_output_operand_needs_approval() {
    asks(&["uniq"], &["uniq a.txt b.txt", "uniq -f 1 a.txt b.txt", "uniq -- a.txt -b", "uniq a*"]);
    runs(&["uniq"], &["uniq a.txt", "uniq -c a.txt", "uniq -f 1 a.txt", "uniq -w 3 a.txt"]);
}

#[test]
fn other_table_options_that_write_run_or_set_need_approval() {
    asks(
        ALL,
        &[
            "date -s 2020-01-01",
            "date --set=now",
            "date --se now",
            "date 0101000020",
            "tree -o out.txt",
            "tree -R",
            "tree -Lo 2 out.txt",
            "file -C -m magic",
            "file -z a.gz",
            "file --uncompress a.gz",
            "diff -l a b",
            "diff --paginate a b",
            "base64 -o out a",
            "base64 --output=out a",
        ],
    );
    runs(
        ALL,
        &[
            "date +%Y-%m-%d",
            "date -Iseconds",
            "date -u -d yesterday +%s",
            "tree -L 2 src",
            "file src/a.rs",
            "diff -u a b",
            "base64 -w 0 a",
            "wc -l a.txt",
            "head -n 5 a.txt",
            "tail -f log.txt",
            "grep -rn 'a|b' src",
            "echo 'cost: $5'",
        ],
    );
}

#[test]
fn output_redirection_anywhere_needs_approval() {
    asks(
        ALL,
        &[
            "ls > x",
            "ls >> x",
            "ls >| x",
            "ls &> x",
            "echo a>b",
            "cat <> x",
            "ls 2>/dev/null",
            "ls 2>&1",
            "cat a | grep x > out",
            "cat <<EOF",
            "cat <(ls)",
        ],
    );
}

#[test]
fn input_redirection_needs_no_approval_only_from_inside_the_workspace() {
    runs(ALL, &["wc -l < src/a.rs", "grep x <a.txt", "sort 0<a.txt"]);
    asks(ALL, &["cat < /etc/passwd", "cat 0</etc/passwd", "cat < ../x", "cat < *", "cat <", "< a.txt", "cat < ~/x"]);
}

#[test]
fn sequences_and_pipes_of_listed_commands_need_no_approval() {
    runs(
        ALL,
        &[
            "cat a | grep x",
            "ls && pwd",
            "git status; git log -1",
            "ls || true",
            "ls;",
            "git log --oneline | head -n 3",
        ],
    );
}

#[test]
fn substitutions_subshells_background_and_unlisted_parts_need_approval() {
    asks(
        ALL,
        &[
            "cat a | sh",
            "ls | grep x | xargs rm",
            "ls & pwd",
            "ls |& grep x",
            "ls &&",
            "| ls",
            "; ls",
            "ls ;; pwd",
            "(ls)",
            "ls; (pwd)",
            "{ ls; }",
            "ls # ; rm -rf x",
            "echo $(id)",
            "echo \"$HOME\"",
            "echo `id`",
            "echo \"`id`\"",
            "cat 'unterminated",
            "ls\npwd",
            "ls \\\npwd",
            "FOO=bar ls",
            "./ls",
            "",
        ],
    );
}

#[test]
fn globs_that_can_expand_to_an_option_need_approval() {
    asks(ALL, &["ls *", "ls ''*", "ls ?x", "git log --out*", "sort -o* a.txt"]);
    runs(ALL, &["ls src/*.rs", "ls a*", "ls '*'"]);
}

#[test]
fn the_cmd_exe_reading_needs_approval_for_any_operator_character() {
    let r = ro(ALL);
    for line in ["cat a | grep x", "git log --format=%h", "git log HEAD^", "ls & del x", "git log \"--output=x\""] {
        assert!(r.refusal_in(line, true).is_some(), "{line:?}");
    }
    assert_eq!(r.refusal_in("git log --oneline -5", true), None);
}
