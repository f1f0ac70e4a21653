// npm run bench (part): the soak. One NodeWorkspace over 200 files (10 directories, 40 lines
// each); calls awaited one after another, cycling read_file, grep `needle` in one directory, glob
// `**/*.txt`, write_file, edit_file, a refused read of `../etc/passwd`, shell `true` (allowed)
// and list_dir. Prints calls/s, the median time of each operation, and memory: RSS and heap at
// call 5,000 and at the end (flat means within 10 MB).
//
//   node bench/soak.mjs [--calls N] [--package DIR ...]
//
// Each --package is a corral checkout whose addon is built (`npm run build`); several run one
// after another in the same process run, so two commits are compared on the same machine state.
// Without --package, this checkout.
import { mkdtempSync, mkdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { spawnSync } from 'node:child_process';
import { here, median } from './common.mjs';

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const CALLS = Number(flag('--calls', '50000'));
const packages = args.flatMap((a, i) => (args[i - 1] === '--package' ? [resolve(a)] : []));
const OPS = ['read_file', 'grep', 'glob', 'write_file', 'edit_file', 'refused_read', 'shell', 'list_dir'];

/** Runs the soak against the corral package at `pkg` in this process; returns its figures. */
export async function soak(pkg, calls) {
  const corral = createRequire(join(pkg, 'package.json'))(pkg);
  const root = realpathSync(mkdtempSync(join(tmpdir(), 'corral-soak-')));
  const line = (d, f, n) => `line ${n} of file ${f} in dir ${d}${n === 20 ? ' needle' : ''} and some more text to read\n`;
  for (let d = 0; d < 10; d++) {
    mkdirSync(join(root, `d${d}`));
    for (let f = 0; f < 20; f++) {
      writeFileSync(join(root, `d${d}`, `f${f}.txt`), Array.from({ length: 40 }, (_, n) => line(d, f, n)).join(''));
    }
  }
  const ws = new corral.NodeWorkspace({ root });
  const tools = Object.fromEntries(corral.createFsTools(ws).map((t) => [t.name, t]));
  const shell = corral.createShellTool(ws, { needsApproval: false, allow: [{ command: 'true' }] });
  let toggle = 0;
  const run = {
    read_file: () => tools.read_file.execute({ path: 'd3/f7.txt' }),
    grep: () => tools.grep.execute({ pattern: 'needle', path: 'd5' }),
    glob: () => tools.glob.execute({ pattern: '**/*.txt' }),
    write_file: () => tools.write_file.execute({ path: 'out/w.txt', content: `written ${toggle}\n` }),
    edit_file: () => {
      toggle ^= 1;
      const [a, b] = toggle ? ['line 3 of', 'LINE 3 of'] : ['LINE 3 of', 'line 3 of'];
      return tools.edit_file.execute({ path: 'd1/f1.txt', old_string: a, new_string: b });
    },
    refused_read: () => tools.read_file.execute({ path: '../etc/passwd' }).then(() => { throw new Error('not refused'); }, () => {}),
    shell: () => shell.execute({ command: 'true' }),
    list_dir: () => tools.list_dir.execute({ path: 'd2' }),
  };
  const times = Object.fromEntries(OPS.map((o) => [o, []]));
  const mem = () => ({ rss: process.memoryUsage().rss / 1048576, heap: process.memoryUsage().heapUsed / 1048576 });
  let at5000;
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) {
    const op = OPS[i % OPS.length];
    const s = performance.now();
    await run[op]();
    times[op].push(performance.now() - s);
    if (i + 1 === Math.min(5000, calls)) {
      globalThis.gc?.();
      at5000 = mem();
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  globalThis.gc?.();
  const end = mem();
  rmSync(root, { recursive: true, force: true });
  return {
    callsPerSecond: calls / seconds,
    perOp: Object.fromEntries(OPS.map((o) => [o, median(times[o]) * 1000])),
    at5000,
    end,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const list = packages.length ? packages : [join(here, '..')];
  if (typeof globalThis.gc !== 'function') {
    // Memory is read after a collection: run again with --expose-gc.
    const r = spawnSync(process.execPath, ['--expose-gc', process.argv[1], ...args], { stdio: 'inherit' });
    process.exit(r.status ?? 1);
  }
  console.log(`soak: ${CALLS.toLocaleString('en')} calls over 200 files, node ${process.version}`);
  const rows = [];
  for (const pkg of list) rows.push({ pkg, ...(await soak(pkg, CALLS)) });
  const w = Math.max(...rows.map((r) => r.pkg.length), 8);
  console.log(`${'package'.padEnd(w)}  calls/s  ${OPS.map((o) => o.padStart(13)).join('')}   RSS@5k→end (MB)   heap@5k→end (MB)`);
  for (const r of rows) {
    const ops = OPS.map((o) => `${r.perOp[o].toFixed(0)} µs`.padStart(13)).join('');
    const m = (a, b) => `${a.toFixed(1)}→${b.toFixed(1)}`;
    console.log(`${r.pkg.padEnd(w)}  ${r.callsPerSecond.toFixed(0).padStart(7)}  ${ops}   ${m(r.at5000.rss, r.end.rss).padStart(15)}   ${m(r.at5000.heap, r.end.heap).padStart(16)}`);
  }
  console.log('(goal: at least 2,000 calls/s; RSS within 10 MB of its value at call 5,000, heap flat)');
}
