#!/usr/bin/env bash
# The LinuxSandbox tests again as an unprivileged user (uid 65534), where the sandbox must make
# its own user namespace and has no cgroup to write. Run as root by scripts/test.sh; reports
# "skipped" where there is no setpriv or the kernel refuses unprivileged user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "skipped: the unprivileged LinuxSandbox run needs root and setpriv"
  exit 0
fi
if ! setpriv --reuid=65534 --regid=65534 --clear-groups unshare --user true 2>/dev/null; then
  echo "skipped: this kernel refuses user namespaces to unprivileged users"
  exit 0
fi
BIN=$(cargo test -p corral-core --lib --no-run --message-format=json 2>/dev/null | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    for (const line of s.split("\n")) {
      try { const m = JSON.parse(line); if (m.reason === "compiler-artifact" && m.executable && m.target.name === "corral_core") console.log(m.executable); } catch {}
    }
  });')
DIR=$(mktemp -d /tmp/corral-unpriv.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
# A copy the user can run, in a directory it can write (its HOME and TMPDIR).
cp "$BIN" "$DIR/tests"
chmod 1777 "$DIR"
chmod 755 "$DIR/tests"
cd "$DIR"
run() { setpriv --reuid=65534 --regid=65534 --clear-groups env -i PATH="$PATH" HOME="$DIR" TMPDIR="$DIR" ./tests "$@"; }
# Every LinuxSandbox test (the root-only attacks aside); the attacks with and without Landlock.
run sandbox::linux --include-ignored --skip as_root
# The keeper: where commands come from, and that they end with it.
run sandbox::session --include-ignored
# A persistent session: its root, ports, proxy, stop and resume.
run sandbox::persistent --include-ignored
# Every command of a NodeWorkspace ends with its owner where no control group can be made too
# (its process group, then).
run shell::exec::tests::every_command_ends_with_its_owner_however_the_owner_ends --include-ignored --exact
