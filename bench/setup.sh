#!/usr/bin/env bash
# Installs what npm run bench compares against (Debian's ripgrep and fd-find) and its large
# corpus (linux-source), when missing and when we may (root); otherwise says what is missing.
set -euo pipefail
need=()
command -v rg >/dev/null || need+=(ripgrep)
command -v fdfind >/dev/null || command -v fd >/dev/null || need+=(fd-find)
ls /usr/src/linux-source-*.tar.* >/dev/null 2>&1 || need+=(linux-source-6.1)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "bench: not installed: ${need[*]} (the bench runs without them, with fewer columns)"
fi
