#!/usr/bin/env bash
# The cross step of CI (.ci/run calls it after `npm test`, never inside it): every platform the
# package promises is compiled here, on Linux x64.
#
# - `cargo check --workspace --all-targets` (the library, the binding and the tests) for each
#   family of `cfg` the host build does not see: Windows and macOS. zig is the C compiler
#   (`cargo zigbuild`: ring and the bundled SQLite build with it). Windows MSVC is checked with the
#   gnu target's std: the MSVC runtime cannot be fetched here; the release workflow builds and
#   tests it on a Windows runner.
# - A debug build (without debug info: only linking is proven here) of the addon (.node) for linux
#   arm64 gnu, both musl targets and both macOS targets (`napi build --cross-compile`), each
#   checked for its binary format and for the napi module entry it must export (llvm-objdump,
#   llvm-nm). A build compiles the library and the binding; the other Linux and the second macOS
#   target add no `cfg` of their own to the tests, so they are built, not checked as well. A macOS
#   build's imports are checked too (scripts/cross/check-macos-imports.sh: libSystem's against
#   zig's stub, nothing looked up at load but Node's; frameworks listed, unchecked); the release
#   workflow's macOS runners stay the test that the addon loads and runs there.
# - The smoke test (scripts/cross/smoke.mjs: file tools, grep, shell) run by an arm64 Node under
#   qemu against the arm64 build.
# - Windows for real: the addon built for x86_64-pc-windows-gnu, loaded by a Windows node.exe
#   under Wine, runs the smoke test and the vitest files of __test__/windows/files.txt
#   (scripts/cross/windows-wine.sh; Wine and its prefix are installed and cached there).
#
# Installs what it needs where it is missing (rustup targets, zig and cargo-zigbuild from PyPI,
# Debian's qemu-user-static and arm64 libraries; scripts/cross/smoke-arm64.sh brings an arm64 Node
# from npm). Prints its time per target. Run as `scripts/cross.sh [target…]` to do only some targets.
set -euo pipefail
cd "$(dirname "$0")/.."
selected=("$@")

ZIG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1

# target  napi-dir  how: check (check only), build (build the .node) or both
ALL=(
  "x86_64-apple-darwin darwin-x64 both"
  "aarch64-apple-darwin darwin-arm64 build"
  "x86_64-pc-windows-gnu win32-x64-msvc check"
  "aarch64-unknown-linux-gnu linux-arm64-gnu build"
  "x86_64-unknown-linux-musl linux-x64-musl build"
  "aarch64-unknown-linux-musl linux-arm64-musl build"
)

WORK=target/cross
mkdir -p "$WORK"
step_start=$(date +%s)
timings=()
elapsed() { echo $(( $(date +%s) - $1 ))s; }

echo "== cross: tools"
t0=$(date +%s)
need_apt=()
command -v qemu-aarch64-static >/dev/null || need_apt+=(qemu-user-static)
[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || need_apt+=(libc6-arm64-cross)
[ -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ] || need_apt+=(libstdc++6-arm64-cross)
[ -e /usr/aarch64-linux-gnu/lib/libgcc_s.so.1 ] || need_apt+=(libgcc-s1-arm64-cross)
command -v llvm-nm >/dev/null && command -v llvm-objdump >/dev/null || need_apt+=(llvm)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if ! python3 -m ziglang version 2>/dev/null | grep -qx "$ZIG_VERSION" || ! command -v cargo-zigbuild >/dev/null; then
  python3 -m pip install -q --disable-pip-version-check "ziglang==$ZIG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION"
  hash -r
fi
installed=$(rustup target list --installed)
missing=()
for row in "${ALL[@]}"; do
  set -- $row
  grep -qx "$1" <<<"$installed" || missing+=("$1")
done
[ ${#missing[@]} -eq 0 ] || rustup target add "${missing[@]}"
timings+=("tools $(elapsed "$t0")")

# The macOS frameworks the addon links, as stubs the linker finds (-F): see macos-frameworks.sh.
FRAMEWORKS="$WORK/macos-frameworks"
scripts/cross/macos-frameworks.sh "$FRAMEWORKS"
export CARGO_TARGET_X86_64_APPLE_DARWIN_RUSTFLAGS="-C link-arg=-F$PWD/$FRAMEWORKS"
export CARGO_TARGET_AARCH64_APPLE_DARWIN_RUSTFLAGS="-C link-arg=-F$PWD/$FRAMEWORKS"

# napi-build wants node.dll's import library to link a windows-gnu addon; a check links nothing,
# so an empty stand-in lets the binding's build script run.
LIBNODE_STUB="$WORK/libnode-stub"
mkdir -p "$LIBNODE_STUB" && : >"$LIBNODE_STUB/libnode.dll"

for row in "${ALL[@]}"; do
  set -- $row
  target=$1 dir=$2 how=$3
  if [ ${#selected[@]} -gt 0 ] && ! printf '%s\n' "${selected[@]}" | grep -qx "$target"; then continue; fi
  t0=$(date +%s)
  if [ "$how" != build ]; then
    echo "== cross: cargo check --workspace --all-targets --target $target"
    LIBNODE_PATH="$PWD/$LIBNODE_STUB" cargo-zigbuild check --quiet --workspace --all-targets --target "$target"
  fi
  if [ "$how" != check ]; then
    echo "== cross: napi build (debug) --target $target"
    out="$WORK/npm/$dir"
    rm -rf "$out" && mkdir -p "$out"
    CARGO_PROFILE_DEV_DEBUG=0 npx napi build --platform --cross-compile --target "$target" --output-dir "$out" \
      --no-js --dts binding.d.ts >"$WORK/build-$target.log" 2>&1 \
      || { tail -40 "$WORK/build-$target.log"; exit 1; }
    rm -f "$out/binding.d.ts"
    scripts/cross/check-binary.sh "$out/corral.$dir.node"
    case $target in *-apple-darwin) scripts/cross/check-macos-imports.sh "$out/corral.$dir.node" ;; esac
  fi
  timings+=("$target $(elapsed "$t0")")
done

if [ ${#selected[@]} -eq 0 ] || printf '%s\n' "${selected[@]}" | grep -qx aarch64-unknown-linux-gnu; then
  t0=$(date +%s)
  echo "== cross: smoke test by an arm64 Node under qemu"
  scripts/cross/smoke-arm64.sh "$WORK/npm/linux-arm64-gnu/corral.linux-arm64-gnu.node"
  timings+=("arm64 smoke $(elapsed "$t0")")
fi

if [ ${#selected[@]} -eq 0 ] || printf '%s\n' "${selected[@]}" | grep -qx x86_64-pc-windows-gnu; then
  t0=$(date +%s)
  scripts/cross/windows-wine.sh
  timings+=("windows under Wine $(elapsed "$t0")")
fi

echo "== cross: time per target"
printf '   %s\n' "${timings[@]}"
echo "   all: $(elapsed "$step_start")"
