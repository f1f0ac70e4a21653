//! The attacks on a root host, run for real: each test is an escape that worked before the
//! sandbox ran commands as an unprivileged user with a masked `/proc`, `nosuid` mounts and the
//! seccomp refusals, and must fail now.
//!
//! Every test runs twice: with Landlock as the kernel gives it, and in a child process of this
//! test binary under a seccomp filter that makes `landlock_create_ruleset` fail with `ENOSYS`, as
//! on a kernel without Landlock — so each guarantee is shown to hold on the other layers alone.
//! They are `#[ignore]`d (they need namespaces) and run explicitly by `scripts/test.sh`, as root
//! and again as an unprivileged user (`as_root` tests only as root).
//!
//! What they touch is theirs: a sysctl is only opened for writing with the value just read, the
//! socket is the test's own listener, setuid attempts happen in a temp dir that is removed.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::sandbox::SandboxShell;
use crate::shell::exec::InheritEnv;
use crate::shell::{ExecOptions, ShellProvider};

const NO_LANDLOCK: &str = "CORRAL_TEST_NO_LANDLOCK";

/// Runs the test `name` again in a child process where Landlock is unavailable, and asserts it
/// passed there. Returns at once in that child.
fn again_without_landlock(name: &str) {
    if std::env::var_os(NO_LANDLOCK).is_some() {
        assert_eq!(landlock::abi(), None, "the seccomp filter hides Landlock");
        return;
    }
    let rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> =
        [(libc::SYS_landlock_create_ruleset, Vec::new())].into_iter().collect();
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::ENOSYS as u32),
        seccomp::arch().unwrap(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    let (passed, out) = in_child(&format!("sandbox::linux::attacks::{name}"), NO_LANDLOCK, Some(prog));
    assert!(passed, "without Landlock:\n{out}");
}

/// Runs the test `path` again in a child process of this test binary, with `env` set (the test
/// reads it to know it is the child) and, with `filter`, under that seccomp program: whether it
/// passed, and what it printed. What crashes or is refused there cannot take the run with it.
pub(super) fn in_child(path: &str, env: &str, filter: Option<seccompiler::BpfProgram>) -> (bool, String) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([path, "--exact", "--ignored", "--test-threads=1"]);
    cmd.env(env, "1");
    if let Some(prog) = filter {
        // SAFETY: prctl and the filter's installation are raw syscalls on data made before the fork.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                seccompiler::apply_filter(&prog).map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))
            });
        }
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    (out.status.success() && text.contains("1 passed"), format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)))
}

/// A sandbox shell over a fresh working directory (under `/var/tmp`, not the private `/tmp`, so
/// paths beside it are the host's as the command sees them).
pub(super) fn shell(options: LinuxSandboxOptions) -> (tempfile::TempDir, PathBuf, SandboxShell) {
    let sb = Arc::new(LinuxSandbox::new(options).expect("LinuxSandbox"));
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let s = SandboxShell::new(sb, &cwd, BTreeMap::new(), InheritEnv::None).unwrap();
    (dir, cwd, s)
}

pub(super) async fn sh(s: &SandboxShell, cmd: &str) -> ExecResult {
    s.exec(cmd, ExecOptions { timeout_ms: Some(30_000), ..Default::default() }).await.unwrap()
}

fn is_root() -> bool {
    // SAFETY: raw syscall.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_cannot_write_a_sysctl_or_the_sysrq_trigger() {
    let before = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let (_d, _cwd, s) = shell(LinuxSandboxOptions::default());
    let r = sh(
        &s,
        "v=$(cat /proc/sys/kernel/core_pattern); printf '%s\\n' \"$v\" > /proc/sys/kernel/core_pattern && echo SYSCTL-WRITTEN; \
         (true >> /proc/sysrq-trigger) && echo SYSRQ-OPENED; \
         grep -E ' /proc/(sys|sysrq-trigger|irq|bus|fs) ' /proc/self/mountinfo | grep -c ' ro,'",
    )
    .await;
    assert!(!r.stdout.contains("SYSCTL-WRITTEN") && !r.stdout.contains("SYSRQ-OPENED"), "{r:?}");
    let masked: usize = r.stdout.trim().lines().last().unwrap_or("0").parse().unwrap_or(0);
    assert!(masked >= 3, "the /proc knobs are read-only mounts: {r:?}");
    assert_eq!(std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(), before);
    again_without_landlock("a_command_cannot_write_a_sysctl_or_the_sysrq_trigger");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn every_mount_the_command_sees_is_nosuid_and_nodev_but_the_device_nodes() {
    let (_d, _cwd, s) = shell(LinuxSandboxOptions::default());
    let r = sh(&s, "cat /proc/self/mountinfo").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    let devices = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];
    let mut checked = 0;
    for line in r.stdout.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (target, opts) = (f[4], f[5]);
        if devices.contains(&target) {
            continue;
        }
        let opts: Vec<&str> = opts.split(',').collect();
        assert!(opts.contains(&"nosuid") && opts.contains(&"nodev"), "{target} lacks nosuid,nodev: {line}");
        checked += 1;
    }
    assert!(checked >= 5, "{r:?}");
    again_without_landlock("every_mount_the_command_sees_is_nosuid_and_nodev_but_the_device_nodes");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_command_can_neither_encrypt_a_directory_nor_add_or_remove_a_key() {
    let (_d, _cwd, s) = shell(LinuxSandboxOptions::default());
    // Each fscrypt request on a directory of the workspace: refused by the filter (EPERM), where
    // the file system would say EOPNOTSUPP, EINVAL or EACCES.
    let r = sh(
        &s,
        "mkdir e && /usr/bin/python3 -c '\nimport errno, fcntl, os\nfd = os.open(\"e\", os.O_RDONLY)\n\
         for req in (0x800c6613, 0xc0506617, 0xc0406618, 0xc0406619):\n    try:\n        fcntl.ioctl(fd, req, bytearray(128))\n        \
         print(hex(req), \"done\")\n    except OSError as e:\n        print(hex(req), errno.errorcode[e.errno])\n'",
    )
    .await;
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{r:?}");
    assert!(lines.iter().all(|l| l.ends_with(" EPERM")), "{r:?}");
    again_without_landlock("a_command_can_neither_encrypt_a_directory_nor_add_or_remove_a_key");
}

/// A unix socket listener of the test's own, in the working directory (so the command sees it).
fn listener(cwd: &Path, mode: u32) -> (std::os::unix::net::UnixListener, PathBuf) {
    let path = cwd.join("test.sock");
    let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    (l, path)
}

const DIAL: &str = "perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\\n\"; connect($s, pack_sockaddr_un($ARGV[0])) or die \"connect: $!\\n\"; print \"connected\\n\"'";

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn unix_sockets_are_refused_unless_allowed_and_socketpair_still_works() {
    let (_d, cwd, s) = shell(LinuxSandboxOptions::default());
    let (_l, path) = listener(&cwd, 0o777);
    let r = sh(
        &s,
        &format!("{DIAL} {p}; perl -MSocket -e 'socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or die; print \"pair\\n\"'", p = path.display()),
    )
    .await;
    assert!(r.stderr.contains("socket: Operation not permitted"), "{r:?}");
    assert!(!r.stdout.contains("connected") && r.stdout.contains("pair"), "{r:?}");
    // allowUnixSockets: the same dial reaches the listener.
    let (_d2, cwd2, s2) = shell(LinuxSandboxOptions { allow_unix_sockets: true, ..Default::default() });
    let (_l2, path2) = listener(&cwd2, 0o777);
    let r = sh(&s2, &format!("{DIAL} {}", path2.display())).await;
    assert!(r.stdout.contains("connected"), "{r:?}");
    again_without_landlock("unix_sockets_are_refused_unless_allowed_and_socketpair_still_works");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn every_git_directory_or_file_at_any_depth_stays_read_only() {
    let (d, cwd, s) = shell(LinuxSandboxOptions::default());
    let extra = d.path().join("extra");
    for p in ["vendor/lib/.git/hooks", ".git/hooks", "wt"] {
        std::fs::create_dir_all(cwd.join(p)).unwrap();
    }
    std::fs::write(cwd.join("wt/.git"), "gitdir: ../.git\n").unwrap();
    std::fs::create_dir_all(extra.join("repo/.git")).unwrap();
    let options = LinuxSandboxOptions { writable: vec![extra.display().to_string()], ..Default::default() };
    let s2 = SandboxShell::new(Arc::new(LinuxSandbox::new(options).unwrap()), &cwd, BTreeMap::new(), InheritEnv::None)
        .unwrap();
    let r = sh(
        &s,
        "echo evil > vendor/lib/.git/hooks/pre-commit; echo evil > .git/hooks/pre-commit; echo x >> wt/.git; echo ok > vendor/lib/plain.txt",
    )
    .await;
    assert!(!cwd.join("vendor/lib/.git/hooks/pre-commit").exists(), "{r:?}");
    assert!(!cwd.join(".git/hooks/pre-commit").exists(), "{r:?}");
    assert_eq!(std::fs::read_to_string(cwd.join("wt/.git")).unwrap(), "gitdir: ../.git\n");
    assert!(cwd.join("vendor/lib/plain.txt").exists(), "the rest stays writable: {r:?}");
    let r =
        sh(&s2, &format!("mkdir {}/repo/.git/hooks; echo ok > {}/repo/file", extra.display(), extra.display())).await;
    assert!(!extra.join("repo/.git/hooks").exists(), "a .git under a writable path: {r:?}");
    assert!(extra.join("repo/file").exists(), "{r:?}");
    again_without_landlock("every_git_directory_or_file_at_any_depth_stays_read_only");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_symlink_planted_in_place_of_a_writable_path_or_a_cwd_is_refused_not_followed() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let root = std::fs::canonicalize(d.path()).unwrap();
    let (work, outside) = (root.join("work"), root.join("outside"));
    for p in [work.join("a/cache"), work.join("sub"), outside.clone()] {
        std::fs::create_dir_all(p).unwrap();
    }
    let options =
        LinuxSandboxOptions { writable: vec![work.join("a/cache").display().to_string()], ..Default::default() };
    let sb = Arc::new(LinuxSandbox::new(options).unwrap());
    let s = SandboxShell::new(sb.clone(), &work, BTreeMap::new(), InheritEnv::None).unwrap();
    let nested = SandboxShell::new(sb, work.join("sub"), BTreeMap::new(), InheritEnv::None).unwrap();
    // Run 1 swaps the writable path and the nested shell's cwd for links to a directory outside.
    let r = sh(
        &s,
        &format!("mv a a2 && mkdir a && ln -s {o} a/cache && mv sub sub.orig && ln -s {o} sub", o = outside.display()),
    )
    .await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    // Run 2 writes where the links point: the run is refused, nothing lands outside.
    let w = work.join("a/cache");
    let second = s.exec(&format!("echo pwned > {}/x", w.display()), ExecOptions::default()).await;
    assert!(second.is_err() || second.as_ref().is_ok_and(|r| r.exit_code != Some(0)), "{second:?}");
    let third = nested.exec("echo pwned > x", ExecOptions::default()).await;
    assert!(third.is_err() || third.as_ref().is_ok_and(|r| r.exit_code != Some(0)), "{third:?}");
    assert!(!outside.join("x").exists(), "a write followed the planted link");
    again_without_landlock("a_symlink_planted_in_place_of_a_writable_path_or_a_cwd_is_refused_not_followed");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_directories_above_a_protected_or_hidden_path_cannot_be_renamed() {
    let d = tempfile::tempdir_in("/var/tmp").unwrap();
    let cwd = std::fs::canonicalize(d.path()).unwrap();
    for p in ["conf/secrets", "cfg", "vendor/lib2/.git/hooks"] {
        std::fs::create_dir_all(cwd.join(p)).unwrap();
    }
    std::fs::write(cwd.join("conf/secrets/token"), "TOKEN").unwrap();
    std::fs::write(cwd.join("cfg/settings.json"), "{}").unwrap();
    let options = LinuxSandboxOptions {
        protect: vec![".git".into(), "cfg/settings.json".into()],
        hide: Some(vec![cwd.join("conf/secrets").display().to_string()]),
        ..Default::default()
    };
    let s = SandboxShell::new(Arc::new(LinuxSandbox::new(options).unwrap()), &cwd, BTreeMap::new(), InheritEnv::None)
        .unwrap();
    let r = sh(&s, "mv conf conf2; mv cfg cfg2; mv vendor/lib2 lib2-moved; mv vendor vendor2; ls").await;
    assert!(r.stderr.contains("busy") || r.stderr.contains("Busy"), "{r:?}");
    for kept in ["conf/secrets/token", "cfg/settings.json", "vendor/lib2/.git/hooks"] {
        assert!(cwd.join(kept).exists(), "{kept} was carried away: {r:?}");
    }
    let r =
        sh(&s, "cat conf/secrets/token; echo pwned > cfg/settings.json; echo x > vendor/lib2/.git/hooks/post-checkout")
            .await;
    assert!(!r.stdout.contains("TOKEN"), "{r:?}");
    assert_eq!(std::fs::read_to_string(cwd.join("cfg/settings.json")).unwrap(), "{}");
    assert!(!cwd.join("vendor/lib2/.git/hooks/post-checkout").exists());
    again_without_landlock("the_directories_above_a_protected_or_hidden_path_cannot_be_renamed");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_git_directory_the_walk_cannot_reach_refuses_the_run() {
    let (_d, cwd, s) = shell(LinuxSandboxOptions::default());
    // A `.git` below a path longer than the system allows, built the way a command would: by
    // relative steps.
    let out = std::process::Command::new("/usr/bin/python3")
        .current_dir(&cwd)
        .args([
            "-c",
            "import os\nfor i in range(25):\n    os.mkdir('d'*200); os.chdir('d'*200)\nos.makedirs('.git/hooks')",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let e = s.exec("true", ExecOptions::default()).await.unwrap_err();
    assert_eq!(e.code, Code::Io, "{e:?}");
    assert!(e.message.contains("Could not look through"), "{e:?}");
    assert!(!e.message.contains(cwd.to_str().unwrap()), "no host path in what the model reads: {e:?}");
    // Clean up from the inside out (the path is too long to remove in one go).
    let _ = std::process::Command::new("/usr/bin/python3")
        .current_dir(&cwd)
        .args(["-c", "import shutil,os\nfor i in range(24):\n    os.chdir('d'*200)\nshutil.rmtree('d'*200)"])
        .output();
    again_without_landlock("a_git_directory_the_walk_cannot_reach_refuses_the_run");
}

mod as_root {
    //! Only as root: the host's root-owned files and sockets, and setuid-root programs.
    use super::*;

    #[tokio::test]
    #[ignore = "needs namespaces as root: scripts/test.sh runs it"]
    async fn a_root_only_host_file_cannot_be_read() {
        assert!(is_root(), "run as root");
        let (d, _cwd, s) = shell(LinuxSandboxOptions::default());
        let secret = d.path().join("secret.key");
        std::fs::write(&secret, "PRIVATE").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = sh(&s, &format!("cat {}", secret.display())).await;
        assert!(!r.stdout.contains("PRIVATE"), "{r:?}");
        assert!(r.stderr.contains("Permission denied"), "{r:?}");
        again_without_landlock("as_root::a_root_only_host_file_cannot_be_read");
    }

    #[tokio::test]
    #[ignore = "needs namespaces as root: scripts/test.sh runs it"]
    async fn a_root_only_socket_cannot_be_reached_even_with_unix_sockets_allowed() {
        assert!(is_root(), "run as root");
        let (d, _cwd, s) = shell(LinuxSandboxOptions { allow_unix_sockets: true, ..Default::default() });
        let (_l, path) = listener(d.path(), 0o600);
        let r = sh(&s, &format!("{DIAL} {}", path.display())).await;
        assert!(!r.stdout.contains("connected"), "{r:?}");
        assert!(r.stderr.contains("connect: Permission denied"), "{r:?}");
        again_without_landlock("as_root::a_root_only_socket_cannot_be_reached_even_with_unix_sockets_allowed");
    }

    #[tokio::test]
    #[ignore = "needs namespaces as root: scripts/test.sh runs it"]
    async fn a_root_owned_cwd_is_writable_and_no_setuid_or_setgid_file_is_left_on_the_host() {
        assert!(is_root(), "run as root");
        let (d, cwd, s) = shell(LinuxSandboxOptions::default());
        // A victim: a host user the sandbox maps to no id, who could run what is left behind.
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = sh(
            &s,
            "id -u; echo made > made.txt; cp /bin/bash b1; chmod u+s b1; chmod g+s b1; chmod 6755 b1; \
             install -m 4755 /bin/bash b2; \
             perl -MFcntl -e 'sysopen(my $f, \"b3\", O_CREAT|O_WRONLY, 04755) or die \"open: $!\\n\"'; \
             perl -e 'mkdir \"d1\", 02755 or die; chmod 02755, \"d1\" or die \"chmod: $!\\n\"'; true",
        )
        .await;
        assert_eq!(r.stdout.lines().next(), Some("0"), "root inside its namespace: {r:?}");
        let made = cwd.join("made.txt");
        assert_eq!(std::fs::read_to_string(&made).unwrap(), "made\n", "{r:?}");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&made).unwrap().uid(), 0, "files it writes stay root's on the host");
        for entry in std::fs::read_dir(&cwd).unwrap().flatten() {
            let mode = entry.metadata().unwrap().mode();
            assert_eq!(mode & 0o6000, 0, "{:?} is setuid or setgid on the host: {r:?}", entry.path());
        }
        // The victim runs what is there: it stays the victim.
        if cwd.join("b1").exists() {
            let out = std::process::Command::new("setpriv")
                .args(["--reuid=4242", "--regid=4242", "--clear-groups"])
                .arg(cwd.join("b1"))
                .args(["-p", "-c", "id -u; id -g"])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), "4242\n4242\n");
        }
        again_without_landlock(
            "as_root::a_root_owned_cwd_is_writable_and_no_setuid_or_setgid_file_is_left_on_the_host",
        );
    }
}

/// A host `git status` in `dir`, as a user runs it after a command.
fn host_git(dir: &Path) -> std::process::Output {
    std::process::Command::new("git").arg("-C").arg(dir).arg("status").output().unwrap()
}

/// The command: `git init` in a subdirectory with an index and `core.fsmonitor` set to touch
/// `marker`, and a `.git` file (`gitdir:`) into a repository it made the same way.
fn plant_repositories(marker: &Path) -> String {
    format!(
        "set -e; git init -q src && echo x > src/f && git -C src add f && git -C src config core.fsmonitor 'touch {m}; false'; \
         git init -q --bare evil && git --git-dir=evil config core.fsmonitor 'touch {m}; false' && git --git-dir=evil config core.bare false && \
         mkdir -p sub && printf 'gitdir: ../evil\\n' > sub/.git && echo planted",
        m = marker.display()
    )
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_git_repository_a_command_makes_is_removed_before_the_host_git_can_run_it() {
    if std::process::Command::new("git").arg("--version").output().is_err() {
        panic!("git is needed for this test");
    }
    let (d, cwd, s) = shell(LinuxSandboxOptions::default());
    let marker = d.path().join("PWNED");
    let r = sh(&s, &plant_repositories(&marker)).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(r.stdout.contains("planted"), "{r:?}");
    let note = r.note.clone().unwrap_or_default();
    assert!(note.starts_with("removed ") && note.ends_with(": made by the command, and protected"), "{note}");
    assert!(note.contains("src/.git") && note.contains("sub/.git"), "{note}");
    assert!(!cwd.join("src/.git").exists() && !cwd.join("sub/.git").exists());
    assert!(cwd.join("src/f").exists(), "the rest of what the command made stays");
    for dir in [cwd.join("src"), cwd.join("sub"), cwd.clone()] {
        host_git(&dir);
    }
    assert!(!marker.exists(), "a host git status ran configuration a command wrote");
    // The positive control: with `protect: []` the repository stays, and the host's git runs it.
    let (d2, cwd2, s2) = shell(LinuxSandboxOptions { protect: Vec::new(), ..Default::default() });
    let marker2 = d2.path().join("PWNED");
    let r = sh(&s2, &plant_repositories(&marker2)).await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(cwd2.join("src/.git").is_dir());
    host_git(&cwd2.join("src"));
    assert!(marker2.exists(), "the attack is real: a kept repository's fsmonitor runs on the host");
    again_without_landlock("a_git_repository_a_command_makes_is_removed_before_the_host_git_can_run_it");
}

/// The walks keep each directory's listing between commands while its ctime stands: a command
/// that makes a `.git` and then puts its directory's modification time back exactly as it was
/// (`touch -r`) still has it removed, and one the host made that way is still kept read-only.
#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_git_made_in_a_directory_whose_times_were_set_back_is_still_found() {
    let (_d, cwd, s) = shell(LinuxSandboxOptions::default());
    std::fs::create_dir_all(cwd.join("src/deep/er")).unwrap();
    std::fs::create_dir_all(cwd.join("lib/x")).unwrap();
    // Old enough for the walks to keep their listings, then two commands to read them.
    std::thread::sleep(std::time::Duration::from_millis(2_300));
    for _ in 0..2 {
        let r = sh(&s, "true").await;
        assert_eq!(r.exit_code, Some(0), "{r:?}");
    }
    let r = sh(
        &s,
        "touch -r src/deep /tmp/ref && mkdir src/deep/.git && echo '[core]' > src/deep/.git/config \
         && touch -m -r /tmp/ref src/deep && echo made",
    )
    .await;
    assert!(r.stdout.contains("made"), "{r:?}");
    assert!(!cwd.join("src/deep/.git").exists(), "a .git made behind a restored mtime survived: {r:?}");
    assert!(r.note.unwrap_or_default().contains("src/deep/.git"));
    // The host makes one, and sets the times back the same way: the next command finds it.
    let before = std::fs::metadata(cwd.join("lib/x")).unwrap().modified().unwrap();
    std::fs::create_dir(cwd.join("lib/x/.git")).unwrap();
    std::fs::File::open(cwd.join("lib/x")).unwrap().set_modified(before).unwrap();
    let r = sh(&s, "echo x > lib/x/.git/config; mkdir lib/x/.git/hooks; echo done").await;
    assert!(r.stdout.contains("done"), "{r:?}");
    assert!(!cwd.join("lib/x/.git/config").exists() && !cwd.join("lib/x/.git/hooks").exists(), "{r:?}");
    assert!(cwd.join("lib/x/.git").is_dir(), "what was there when the command started stays");
    again_without_landlock("a_git_made_in_a_directory_whose_times_were_set_back_is_still_found");
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn a_git_directory_there_when_the_command_started_is_kept() {
    let (_d, cwd, s) = shell(LinuxSandboxOptions::default());
    std::fs::create_dir_all(cwd.join("lib/.git")).unwrap();
    std::fs::write(cwd.join("lib/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let r = sh(&s, "mkdir -p other && echo ok").await;
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(
        r.note.as_deref().unwrap_or_default().is_empty() || !r.note.as_deref().unwrap().contains("removed"),
        "{r:?}"
    );
    assert!(cwd.join("lib/.git/HEAD").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn every_process_of_a_sandboxed_command_ends_with_its_owner() {
    use crate::shell::exec::guard::owner_tests::*;
    if std::env::var_os(OWNER).is_some() {
        let (dir, _cwd, s) = shell(LinuxSandboxOptions::default());
        std::mem::forget(dir);
        own_commands_then_end(Arc::new(s)).await;
    }
    for how in ["exit", "kill"] {
        let left =
            survivors("sandbox::linux::attacks::every_process_of_a_sandboxed_command_ends_with_its_owner", how, &[]);
        assert!(left.is_empty(), "after the owner's {how}: {left:?}");
    }
}

#[tokio::test]
#[ignore = "needs namespaces: scripts/test.sh runs it"]
async fn the_sweep_cannot_be_stopped_by_many_deep_or_unreadable_directories() {
    // The attacks on the sweep itself: more `.git` than a scan takes, one deeper than a path can
    // name, one in a directory the command made unreadable; and `protect` without `.git`.
    let (_d, cwd, s) = shell(LinuxSandboxOptions::default());
    let r = sh(
        &s,
        "set -e; for i in $(seq 1100); do mkdir -p m/$i/.git; done; \
         git init -q z/r && chmod 000 z; \
         perl -e 'for (1..450) { mkdir \"aaaaaaaaaa\" or die; chdir \"aaaaaaaaaa\" or die } mkdir \".git\" or die; open(F, \">.git/config\") or die'; echo made",
    )
    .await;
    assert_eq!(r.stdout, "made\n", "{r:?}");
    let note = r.note.clone().unwrap_or_default();
    // One line for all of them: the first few names and how many more.
    assert!(
        note.starts_with("removed ") && note.contains(" and 1,097 more: made by the command, and protected"),
        "{note}"
    );
    assert!(!note.contains("could not"), "{note}");
    std::fs::set_permissions(cwd.join("z"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!cwd.join("z/r/.git").exists() && cwd.join("z/r").is_dir());
    assert!(!cwd.join("m/7/.git").exists() && cwd.join("m/7").is_dir());
    // The deep one too (find walks by descriptors): no `.git` left anywhere.
    let out = std::process::Command::new("find").arg(&cwd).args(["-name", ".git"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "", "a .git survived the sweep");
    assert!(cwd.join("aaaaaaaaaa/aaaaaaaaaa").is_dir(), "the deep tree itself stays");
    // `protect` without `.git`: LinuxSandbox still protects and sweeps `.git`.
    let (_d2, cwd2, s2) = shell(LinuxSandboxOptions { protect: vec![".env".into()], ..Default::default() });
    let r = sh(&s2, "git init -q sub && echo made").await;
    assert_eq!(r.stdout, "made\n", "{r:?}");
    assert!(!cwd2.join("sub/.git").exists(), "{r:?}");
    again_without_landlock("the_sweep_cannot_be_stopped_by_many_deep_or_unreadable_directories");
}
