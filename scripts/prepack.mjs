#!/usr/bin/env node
// `npm pack` and `npm publish` run this first: an addon built for debugging (`npm run
// build:debug`, or the one `npm test` builds) is ~80 MB of debug information and is refused. Build
// the release addon (`npm run build`, ~10 MB) and pack again; CORRAL_PACK_DEBUG=1 packs a debug
// addon anyway, and says so.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const DEBUG_BYTES = 40 * 1024 * 1024;
const dir = join(import.meta.dirname, '..', 'js');
const debug = readdirSync(dir)
  .filter((f) => f.endsWith('.node'))
  .map((f) => ({ f, size: statSync(join(dir, f)).size }))
  .filter(({ size }) => size > DEBUG_BYTES);

for (const { f, size } of debug) {
  const mb = (size / 1024 / 1024).toFixed(0);
  if (process.env.CORRAL_PACK_DEBUG === '1') {
    console.error(`corral: packing js/${f}, a DEBUG build of ${mb} MB (CORRAL_PACK_DEBUG=1). Do not publish it.`);
  } else {
    console.error(`corral: js/${f} is a debug build (${mb} MB): run \`npm run build\` for the release addon, then pack again (CORRAL_PACK_DEBUG=1 packs it anyway).`);
    process.exitCode = 1;
  }
}
