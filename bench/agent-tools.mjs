// npm run bench (part): the agent tools of "Tools the leading agents use".
//  - apply_patch: one 20-file patch against the same 20 edits made with edit_file, on disk.
//  - background processes: a start / read / stop cycle, against a plain foreground `true`.
// Prints medians and ratios of the same run. Not a test.
//
//   node bench/agent-tools.mjs [--runs N]
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const { NodeWorkspace, createFsTools, createShellTool } = await import('corral');
const argv = process.argv.slice(2);
const RUNS = Number(argv[argv.indexOf('--runs') + 1]) || 9;
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`);

async function time(setup, fn) {
  const xs = [];
  for (let i = 0; i <= RUNS; i++) {
    const state = await setup();
    const t0 = performance.now();
    await fn(state);
    if (i > 0) xs.push(performance.now() - t0); // the first run warms up
  }
  return median(xs);
}

const FILES = 20;
const body = (i) => Array.from({ length: 200 }, (_, n) => `export const value_${i}_${n} = ${n};`).join('\n') + '\n';
const dir = mkdtempSync(join(tmpdir(), 'corral-bench-agent-'));
let round = 0;

/** A fresh tree of 20 files, and the tools over it. */
function tree() {
  const root = join(dir, `t${round++}`);
  mkdirSync(join(root, 'src'), { recursive: true });
  for (let i = 0; i < FILES; i++) writeFileSync(join(root, 'src', `f${i}.ts`), body(i));
  return Object.fromEntries(createFsTools(new NodeWorkspace({ root }), { include: ['apply_patch'] }).map((t) => [t.name, t]));
}

const patch = ['*** Begin Patch'];
for (let i = 0; i < FILES; i++) {
  patch.push(`*** Update File: src/f${i}.ts`, `@@ export const value_${i}_99 = 99;`, `-export const value_${i}_100 = 100;`, `+export const value_${i}_100 = 1000;`);
}
patch.push('*** End Patch');
const input = patch.join('\n');

const patchMs = await time(tree, (t) => t.apply_patch.execute({ input }));
const editMs = await time(tree, async (t) => {
  for (let i = 0; i < FILES; i++) {
    await t.edit_file.execute({ path: `src/f${i}.ts`, old_string: `export const value_${i}_100 = 100;`, new_string: `export const value_${i}_100 = 1000;` });
  }
});

const root = join(dir, 'shell');
mkdirSync(root);
const [shell, output, , stop] = createShellTool(new NodeWorkspace({ root }), { background: true, needsApproval: false });
const cycleMs = await time(() => null, async () => {
  const { id } = await shell.execute({ command: 'echo up; exec sleep 60', run_in_background: true });
  let text = '';
  while (!text.includes('up')) text += (await output.execute({ id, wait_ms: 1000 })).stdout;
  await stop.execute({ id });
});
const plainMs = await time(() => null, () => shell.execute({ command: 'echo up' }));
rmSync(dir, { recursive: true, force: true });

console.log(`\n== agent tools (median of ${RUNS}; ratio < 1 means corral's way is faster)`);
console.log(`apply_patch, 20 files in one patch      ${fmt(patchMs).padStart(10)}`);
console.log(`edit_file, the same 20 edits            ${fmt(editMs).padStart(10)}   patch/edits ${(patchMs / editMs).toFixed(2)}x`);
console.log(`background start, read, stop            ${fmt(cycleMs).padStart(10)}`);
console.log(`foreground \`echo up\`                    ${fmt(plainMs).padStart(10)}   background/foreground ${(cycleMs / plainMs).toFixed(2)}x`);
