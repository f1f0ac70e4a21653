#!/usr/bin/env bash
# Checks a built addon, `corral.<napi-target>.node`: the binary format its target needs, the napi
# module entry it must export, and (musl) no dependency on glibc. Used by scripts/cross.sh and the
# release workflow. Needs llvm-objdump and llvm-nm (Debian's llvm).
set -euo pipefail
file=$1
name=$(basename "$file")
target=${name#corral.}
target=${target%.node}
case $target in
  darwin-x64) want='mach-o 64-bit x86-64' ;;
  darwin-arm64) want='mach-o arm64' ;;
  linux-x64-gnu | linux-x64-musl) want='elf64-x86-64' ;;
  linux-arm64-gnu | linux-arm64-musl) want='elf64-littleaarch64' ;;
  win32-x64-msvc) want='coff-x86-64' ;;
  *) echo "check-binary: no rule for $name" >&2; exit 1 ;;
esac
# LLVM 14's objdump names a Mach-O file from zig's linker, then stops at a load command it does
# not know: the name is all that is read here.
got=$( (llvm-objdump -f "$file" 2>/dev/null || true) | sed -n 's/.*file format //p' | head -1)
if [ "${got,,}" != "$want" ]; then
  echo "check-binary: $file has the format '$got', expected '$want'" >&2
  exit 1
fi
case $target in
  darwin-*) symbols=$(llvm-nm -g --defined-only "$file"); entry=_napi_register_module_v1 ;;
  win32-*) symbols=$(llvm-objdump -p "$file" | sed -n 's/^ *[0-9]\+ \+0x[0-9a-f]\+ \+//p'); entry=napi_register_module_v1 ;;
  *) symbols=$(llvm-nm -D --defined-only "$file"); entry=napi_register_module_v1 ;;
esac
if ! grep -qE "(^| )$entry\$" <<<"$symbols"; then
  echo "check-binary: $file does not export $entry" >&2
  exit 1
fi
if [[ $target == *-musl ]] && llvm-objdump -p "$file" | grep -qE 'NEEDED +(ld-linux|libc\.so\.6)|GLIBC_'; then
  echo "check-binary: $file is for musl but depends on glibc" >&2
  exit 1
fi
echo "   $file: $got, exports $entry"
