#!/usr/bin/env bash
# `macos-frameworks.sh DIR`: text stubs (.tbd) of the two macOS system frameworks corral's macOS
# addon links (CoreFoundation and SystemConfiguration, through tokio-postgres' whoami), for the
# cross build: zig brings libSystem's stubs but no framework's. Each stub names the framework's
# install path and the symbols corral uses, so the addon loads the real framework on a Mac.
set -euo pipefail
dir=${1:?usage: macos-frameworks.sh DIR}

stub() { # name symbols...
  local name=$1; shift
  local syms
  syms=$(printf '_%s, ' "$@"); syms=${syms%, }
  mkdir -p "$dir/$name.framework"
  cat >"$dir/$name.framework/$name.tbd" <<TBD
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/System/Library/Frameworks/$name.framework/Versions/A/$name'
current-version: 1.0
exports:
  - targets:         [ x86_64-macos, arm64-macos ]
    symbols:         [ $syms ]
...
TBD
}

stub CoreFoundation CFStringGetCString CFStringGetLength CFStringGetMaximumSizeForEncoding CFRelease
stub SystemConfiguration SCDynamicStoreCopyComputerName
