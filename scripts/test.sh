#!/usr/bin/env bash
# npm test: install, build the addon from source, and run every test — the Rust core's, the
# public API's (vitest), and a strict type check of index.d.ts against an example agent.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules/@napi-rs/cli ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

echo "== cargo test (core)"
cargo test -p corral-core --lib

echo "== build the addon"
npx napi build --platform --js binding.js --dts binding.d.ts

echo "== type check (tsc --strict) of index.d.ts against examples/agent.ts"
npx tsc -p examples/tsconfig.json

echo "== vitest"
npx vitest run
