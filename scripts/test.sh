#!/usr/bin/env bash
# npm test: install, build the addon from source, and run every test — the Rust core's, the
# public API's (vitest), and a strict type check of index.d.ts against an example agent.
#
# As root with Debian's docker.io available (CI installs it), a private Docker Engine is started
# for the sandbox tests (scripts/dockerd-test.sh: loopback only, no bridge, no iptables) and
# stopped by its PID at the end. Without it, the tests that need a real engine are reported as
# skipped, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules/@napi-rs/cli ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # `npm install`, not `npm ci`: the per-platform optional packages are published with a release,
  # so they are not in the lock file; every other version is pinned by package-lock.json.
  npm install --no-audit --no-fund
fi

if [ -z "${CORRAL_DOCKER_HOST:-}" ] && [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null && [ -x /bin/busybox ]; then
  DOCKER_DIR=$(mktemp -d /tmp/corral-dockerd.XXXXXX)
  trap 'scripts/dockerd-test.sh stop "$DOCKER_DIR" >/dev/null 2>&1 || true; rm -rf "$DOCKER_DIR" 2>/dev/null || true' EXIT
  if scripts/dockerd-test.sh start "$DOCKER_DIR"; then
    export CORRAL_DOCKER_HOST="unix://$DOCKER_DIR/docker.sock"
    export CORRAL_DOCKER_TLS_HOST="$(cat "$DOCKER_DIR/tls/host")" CORRAL_DOCKER_CERT_PATH="$DOCKER_DIR/tls"
  else
    echo "(could not start a Docker Engine: the real-engine sandbox tests will be skipped)"
  fi
fi
# In CI (CI=true) a service the tests need that is missing fails the run: nothing passes by being
# skipped there.
if [ "${CI:-}" = true ]; then
  [ -n "${CORRAL_DOCKER_HOST:-}" ] || { echo "CI: no Docker Engine for the sandbox tests (docker.io and busybox-static, as root)"; exit 1; }
  ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "CI: PostgreSQL is not installed"; exit 1; }
  { unshare --user --mount --pid --net --fork true 2>/dev/null || { [ "$(id -u)" = 0 ] && unshare --mount --pid --net --fork true 2>/dev/null; }; } \
    || { echo "CI: this kernel gives no namespaces for LinuxSandbox"; exit 1; }
fi

echo "== cargo fmt --check, cargo clippy (warnings are errors), no import circle among modules"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
node scripts/module-cycles.mjs crates/corral-core/src/lib.rs src/lib.rs

echo "== cargo test (core)"
cargo test -p corral-core --lib
cargo test -p corral-keeper
if [ -n "${CORRAL_DOCKER_HOST:-}" ]; then
  echo "== cargo test (core, against the Docker Engine)"
  cargo test -p corral-core --lib sandbox::tests::real_engine::real_engine_ -- --ignored
fi

echo "== cargo test (PostgresToolStore, against a PostgreSQL each test starts)"
if ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  cargo test -p corral-core --lib registry::postgres::tests -- --ignored
else
  echo "skipped: PostgreSQL is not installed (CI installs it)"
fi

if [ "$(id -u)" = 0 ]; then
  echo "== cargo test (a timeout, and the owner's end, empty the command's control group, as root)"
  cargo test -p corral-core --lib shell::exec::tests::a_timeout_kills_processes_that_left_the_group -- --ignored
  cargo test -p corral-core --lib shell::exec::tests::every_command_ends_with_its_owner_however_the_owner_ends -- --ignored --exact
  cargo test -p corral-core --lib shell::exec::tests::a_command_started_into_its_control_group -- --ignored
fi

echo "== cargo test (LinuxSandbox and its keeper: escapes and attacks, as $(id -un), the attacks with and without Landlock)"
if unshare --user --mount --pid --net --fork true 2>/dev/null || { [ "$(id -u)" = 0 ] && unshare --mount --pid --net --fork true 2>/dev/null; }; then
  cargo test -p corral-core --lib sandbox::linux -- --ignored
  cargo test -p corral-core --lib sandbox::session -- --ignored
  cargo test -p corral-core --lib sandbox::persistent -- --ignored
else
  echo "skipped: this kernel gives no namespaces for LinuxSandbox"
fi

echo "== cargo test (LinuxSandbox, as an unprivileged user)"
scripts/linux-sandbox-unprivileged.sh

echo "== build the addon"
npx napi build --platform -o js --js binding.js --dts binding.d.ts

echo "== type check (tsc --strict, TypeScript 5 and 7) of the declarations against examples/agent.ts"
# A project with no Node types of its own (TypeScript 7's default) too: the declarations bring theirs.
for tsc in "npx tsc" "node node_modules/typescript7/bin/tsc"; do
  $tsc --version
  $tsc -p examples/tsconfig.json
  $tsc -p examples/types-only/tsconfig.json
done

echo "== vitest"
npx vitest run
