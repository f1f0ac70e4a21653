#!/usr/bin/env bash
# npm run demo: build the addon if needed, then run the scripted agent session.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules/@napi-rs/cli ]; then npm install --no-audit --no-fund; fi
if ! ls js/corral.*.node >/dev/null 2>&1 || [ ! -f js/binding.js ]; then
  echo "Building the corral addon (first run only, a few minutes)…"
  npx napi build --platform -o js --js binding.js --dts binding.d.ts
fi
node examples/demo.mjs
