#!/usr/bin/env bash
# `check-macos-imports.sh ADDON`: what a macOS addon will ask of the Mac that loads it. Each symbol
# it imports from libSystem must be one that zig's libSystem stub (what the cross build links
# against) exports; each symbol left to be looked up when it loads (`-undefined dynamic_lookup`)
# must be Node's own (napi_*, node_api_*, uv_*): anything else would fail on a Mac, where the
# linker here could not see it. Imports from frameworks are listed by name, unchecked (no stub
# of theirs ships with zig; scripts/cross/macos-frameworks.sh writes the two corral links).
# Used by scripts/cross.sh after each macOS build. Needs llvm-nm (Debian's llvm) and ziglang.
set -euo pipefail
file=${1:?usage: check-macos-imports.sh ADDON}
zig_lib=$(python3 -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')/lib
tbd="$zig_lib/libc/darwin/libSystem.tbd"
[ -f "$tbd" ] || { echo "check-macos-imports: no libSystem stub at $tbd" >&2; exit 1; }
exports=$(grep -oE "[A-Za-z0-9_.\$]+" "$tbd" | sort -u)
imports=$(llvm-nm -u -m "$file" | sed -n 's/^ *(undefined) external \([^ ]*\) *\(.*\)$/\1 \2/p')
[ -n "$imports" ] || { echo "check-macos-imports: $file imports nothing (llvm-nm read no Mach-O?)" >&2; exit 1; }
fail=0 system=0 frameworks=() node=0
while read -r sym from; do
  case $from in
    "(from libSystem)")
      system=$((system + 1))
      grep -qxF -- "$sym" <<<"$exports" || { echo "check-macos-imports: $sym is not in zig's libSystem" >&2; fail=1; } ;;
    "(from "*)
      frameworks+=("${from#(from }") ;;
    *)
      case $sym in
        _napi_* | _node_api_* | _uv_*) node=$((node + 1)) ;;
        *) echo "check-macos-imports: $sym is looked up at load, and Node does not give it" >&2; fail=1 ;;
      esac ;;
  esac
done <<<"$imports"
[ $fail = 0 ] || exit 1
listed=$(printf '%s\n' "${frameworks[@]}" | sed 's/)$//' | sort | uniq -c | awk '{printf "%s (%s), ", $2, $1}')
echo "   $file: $system libSystem imports in zig's stub, $node from Node; unchecked: ${listed%, }"
