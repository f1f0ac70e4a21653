// npm run bench: corral's grep, glob and read_file against ripgrep, fd and a plain-JavaScript
// implementation of the same tools, in the same run, on the same trees. Prints medians and
// ratios. Not a test: these machines are noisy, so read the ratios, not the absolute times.
//
//   node bench/run.mjs [--quick] [--runs N]
//
// Corpora: a generated small tree (always), and Debian's linux-source tree when
// /usr/src/linux-source-*.tar.xz is installed (apt-get install linux-source-6.1); it is unpacked
// once into bench/.corpus.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, statSync } from 'node:fs';
import { readFile, readdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { here, linuxTree, median, peakRss, time as timeRuns, which } from './common.mjs';

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const RUNS = Number(argv[argv.indexOf('--runs') + 1]) || (quick ? 3 : 7);

const corral = await import('corral');
const { NodeWorkspace, createFsTools } = corral;

const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`);

const time = (fn) => timeRuns(fn, RUNS);

// ---- corpora --------------------------------------------------------------------------------
function smallTree() {
  const root = join(here, '.corpus', 'small');
  if (existsSync(join(root, '.done'))) return root;
  mkdirSync(root, { recursive: true });
  let seed = 42;
  const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const words = ['alpha', 'beta', 'gamma', 'delta', 'kmalloc', 'return', 'struct', 'static', 'int', 'void', 'error', 'TODO'];
  for (let d = 0; d < 40; d++) {
    const dir = join(root, `pkg${d}`, d % 3 ? 'src' : 'lib');
    mkdirSync(dir, { recursive: true });
    for (let f = 0; f < 50; f++) {
      const lines = [];
      for (let l = 0; l < 80; l++) lines.push(Array.from({ length: 8 }, () => words[Math.floor(rnd() * words.length)]).join(' '));
      writeFileSync(join(dir, `file${f}.${f % 4 ? 'c' : 'h'}`), `${lines.join('\n')}\n`);
    }
  }
  writeFileSync(join(root, '.done'), '');
  return root;
}

// ---- the plain-JavaScript baseline: the same tools, written the obvious way -------------------
async function* walk(dir, rel = '') {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (e.name === '.git' || e.name === 'node_modules') continue;
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) yield* walk(join(dir, e.name), p);
    else if (e.isFile()) yield p;
  }
}

async function jsGrep(root, pattern) {
  const re = new RegExp(pattern);
  const out = [];
  for await (const p of walk(root)) {
    const full = join(root, p);
    if (statSync(full).size > 2 * 1024 * 1024) continue;
    const buf = await readFile(full);
    if (buf.includes(0)) continue;
    const lines = buf.toString('utf8').split('\n');
    for (let i = 0; i < lines.length; i++) if (re.test(lines[i].slice(0, 2000))) out.push(`${p}:${i + 1}: ${lines[i]}`);
  }
  return out.sort();
}

function globToRegExp(glob) {
  let s = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '*' && glob[i + 1] === '*') { s += glob[i + 2] === '/' ? '(?:.*/)?' : '.*'; i += glob[i + 2] === '/' ? 2 : 1; }
    else if (c === '*') s += '[^/]*';
    else if (c === '?') s += '[^/]';
    else if (c === '{') s += '(?:';
    else if (c === '}') s += ')';
    else if (c === ',') s += '|';
    else s += c.replace(/[.+^$()|\\]/g, '\\$&');
  }
  return new RegExp(`^${s}$`);
}

async function jsGlob(root, pattern) {
  const re = globToRegExp(pattern);
  const out = [];
  for await (const p of walk(root)) if (re.test(p)) out.push(p);
  return out.sort();
}

// ---- the runs --------------------------------------------------------------------------------
const rows = [];
function row(name, corralMs, otherName, otherMs, note = '') {
  rows.push({ name, corral: corralMs, other: otherName, otherMs, ratio: corralMs / otherMs, note });
  console.log(`  ${name.padEnd(34)} corral ${fmt(corralMs).padStart(9)}   ${otherName.padEnd(10)} ${fmt(otherMs).padStart(9)}   ratio ${(corralMs / otherMs).toFixed(2)}× ${note}`);
}

async function benchTree(label, root, { grepPattern, globPattern }) {
  const files = Number(execFileSync('sh', ['-c', `find '${root}' -type f | wc -l`], { encoding: 'utf8' }).trim());
  console.log(`\n${label}: ${files} files (${RUNS} runs each, medians)`);
  const big = { maxResults: 1_000_000, maxOutputChars: 100_000_000, maxFilesScanned: 10_000_000, grepTimeoutMs: 600_000 };
  const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root }), big).map((t) => [t.name, t]));

  const g = await time(() => tools.grep.execute({ pattern: grepPattern }));
  const isMatch = (l) => /^[^:\n]+:\d+: /.test(l);
  const corralMatches = g.out.split('\n').filter(isMatch).length;
  const rg = which('rg');
  if (rg) {
    const r = await time(() => spawnSync(rg, ['-n', '-uu', '--no-messages', '--max-filesize', '2M', '-e', grepPattern, '.'], { cwd: root, maxBuffer: 1 << 30, encoding: 'utf8' }));
    const rgMatches = r.out.stdout ? r.out.stdout.split('\n').filter(Boolean).length : 0;
    row(`grep /${grepPattern}/`, g.ms, 'ripgrep', r.ms, `(${corralMatches} vs ${rgMatches} matches)`);
  }
  const jg = await time(() => jsGrep(root, grepPattern));
  row(`grep /${grepPattern}/`, g.ms, 'plain JS', jg.ms, `(${jg.out.length} matches)`);

  const gl = await time(() => tools.glob.execute({ pattern: globPattern }));
  const corralPaths = gl.out.split('\n').filter((l) => l && !l.startsWith('(')).length;
  const fd = which('fdfind') || which('fd');
  if (fd) {
    const f = await time(() => spawnSync(fd, ['-u', '--type', 'f', '--glob', '--full-path', `**/${globPattern.replace(/^\*\*\//, '')}`, '.'], { cwd: root, maxBuffer: 1 << 30, encoding: 'utf8' }));
    const fdPaths = f.out.stdout.split('\n').filter(Boolean).length;
    row(`glob ${globPattern}`, gl.ms, 'fd', f.ms, `(${corralPaths} vs ${fdPaths} paths)`);
  }
  const jgl = await time(() => jsGlob(root, globPattern));
  row(`glob ${globPattern}`, gl.ms, 'plain JS', jgl.ms, `(${jgl.out.length} paths)`);

  const mem = peakRss(`
    const { NodeWorkspace, createFsTools } = await import('corral');
    const before = Number(/VmRSS:\\s+(\\d+)/.exec((await import('node:fs')).readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
    const t = createFsTools(new NodeWorkspace({ root: ${JSON.stringify(root)} }), ${JSON.stringify(big)}).find((x) => x.name === 'grep');
    await t.execute({ pattern: ${JSON.stringify(grepPattern)} });
    console.error('rss before grep: ' + before.toFixed(0) + ' MB');`);
  console.log(`  grep peak memory (whole node process, VmHWM): ${mem.toFixed(0)} MB`);
  rows.push({ name: `grep peak RSS (${label})`, corral: mem, other: 'MB', otherMs: NaN, ratio: NaN });
}

async function benchRead() {
  const root = join(here, '.corpus', 'read');
  mkdirSync(root, { recursive: true });
  const lines = Array.from({ length: 5000 }, (_, i) => `    const value${i} = compute(${i}, "some text to make the line realistic"); // line ${i + 1}`);
  writeFileSync(join(root, 'big.js'), `${lines.join('\n')}\n`);
  const tool = createFsTools(new NodeWorkspace({ root }), { maxOutputChars: 100_000_000 }).find((t) => t.name === 'read_file');
  const c = await time(() => tool.execute({ path: 'big.js' }));
  const js = await time(async () => {
    const text = await readFile(join(root, 'big.js'), 'utf8');
    const ls = text.split('\n').slice(0, 2000);
    const w = String(ls.length).length;
    let out = '';
    for (let i = 0; i < ls.length; i++) out += `${String(i + 1).padStart(w)}\t${ls[i]}\n`;
    return `${out}(Showing lines 1-2000 of ${text.split('\n').length - 1}. Use offset 2001 to continue.)`;
  });
  console.log('\nper call');
  row('read_file (first 2,000 lines)', c.ms, 'fs+format', js.ms);
  await benchPerCall(root);
}

/** The per-call figures: read_file and edit_file ×200 on a small file, `true` ×50 on the shell. */
async function benchPerCall(root) {
  const small = Array.from({ length: 120 }, (_, i) => `export const v${i} = ${i};`).join('\n');
  writeFileSync(join(root, 'small.ts'), `${small}\n`);
  const workspace = new NodeWorkspace({ root });
  const tools = Object.fromEntries(createFsTools(workspace).map((t) => [t.name, t]));
  const reads = await time(async () => { for (let i = 0; i < 200; i++) await tools.read_file.execute({ path: 'small.ts' }); });
  const jsReads = await time(async () => {
    for (let i = 0; i < 200; i++) {
      const ls = (await readFile(join(root, 'small.ts'), 'utf8')).split('\n');
      if (ls.at(-1) === '') ls.pop();
      const w = String(ls.length).length;
      let out = '';
      for (let n = 0; n < ls.length; n++) out += `${String(n + 1).padStart(w)}\t${ls[n]}\n`;
    }
  });
  row('read_file ×200', reads.ms, 'fs+format', jsReads.ms);
  let k = 0;
  const edits = await time(async () => {
    for (let i = 0; i < 200; i++, k++) await tools.edit_file.execute({ path: 'small.ts', old_string: `v0 = ${k};`, new_string: `v0 = ${k + 1};` });
  });
  writeFileSync(join(root, 'small-js.ts'), `${small}\n`);
  let j = 0;
  const jsEdits = await time(async () => {
    for (let i = 0; i < 200; i++, j++) {
      const path = join(root, 'small-js.ts');
      const text = await readFile(path, 'utf8');
      const at = text.indexOf(`v0 = ${j};`);
      if (at < 0 || text.indexOf(`v0 = ${j};`, at + 1) >= 0) throw new Error('no unique match');
      const tmp = `${path}.tmp`;
      await writeFile(tmp, text.slice(0, at) + `v0 = ${j + 1};` + text.slice(at + `v0 = ${j};`.length));
      await rename(tmp, path);
    }
  });
  row('edit_file ×200', edits.ms, 'read+write', jsEdits.ms);
  const shells = await time(async () => { for (let i = 0; i < 50; i++) await workspace.exec('true'); });
  const spawns = await time(async () => {
    for (let i = 0; i < 50; i++) {
      await new Promise((resolve, reject) => {
        const c = spawn('/bin/sh', ['-c', 'true'], { cwd: root });
        c.on('error', reject);
        c.on('close', resolve);
      });
    }
  });
  row('shell `true` ×50', shells.ms, 'spawn', spawns.ms);
}

// ---- the workloads models run most, on the linux-source tree ----------------------------------
// corral's output is sorted by path, so the ripgrep it is held to is `rg -n --sort path` (one
// thread); plain `rg -n` (every thread, any order) is shown beside it.
const rgBase = ['-n', '-uu', '--no-messages', '--max-filesize', '2M'];
/** Default limits, except that the whole tree is scanned (the default stops at 20,000 files). */
const wholeTree = { maxFilesScanned: 10_000_000, grepTimeoutMs: 600_000 };
const every = { ...wholeTree, maxResults: 1_000_000, maxOutputChars: 100_000_000 };
const grepWorkloads = [
  { name: 'common word, default limits', args: { pattern: 'static' }, options: wholeTree, rg: ['-e', 'static'] },
  { name: 'common word, every match', args: { pattern: 'static' }, options: every, rg: ['-e', 'static'] },
  { name: 'common word in *.h, every match', args: { pattern: 'static', glob: '*.h' }, options: every, rg: ['-g', '*.h', '-e', 'static'] },
  { name: 'ignore_case regex, glob *.c', args: { pattern: 'EXPORT_SYMBOL_GPL\\(\\w+_init\\)', ignore_case: true, glob: '*.c' }, options: every, rg: ['-i', '-g', '*.c', '-e', 'EXPORT_SYMBOL_GPL\\(\\w+_init\\)'] },
  { name: 'rare literal', args: { pattern: 'copy_from_user_nofault' }, options: wholeTree, rg: ['-e', 'copy_from_user_nofault'] },
  { name: 'identifier, default limits', args: { pattern: 'copy_from_user' }, options: wholeTree, rg: ['-e', 'copy_from_user'] },
];

const rgLines = (root, args) => spawnSync(which('rg'), [...rgBase, ...args, '.'], { cwd: root, maxBuffer: 1 << 30, encoding: 'utf8' });
const matchCount = (out) => {
  const m = /of (?:at least )?([\d,]+) matches/.exec(out);
  return m ? Number(m[1].replaceAll(',', '')) : out.split('\n').filter((l) => /^[^:\n]+:\d+: /.test(l)).length;
};

/** Runs `script` (ES module text printing one number) in `runs` fresh node processes; the median. */
function freshMedian(script, runs) {
  const xs = [];
  for (let i = 0; i < runs; i++) {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: join(here, '..') });
    xs.push(Number(r.stdout.trim().split('\n').at(-1)));
  }
  return median(xs);
}

const firstCallScript = (root, w) => `
  const { NodeWorkspace, createFsTools } = await import('corral');
  const grep = createFsTools(new NodeWorkspace({ root: ${JSON.stringify(root)} }), ${JSON.stringify(w.options)}).find((t) => t.name === 'grep');
  const t0 = performance.now();
  await grep.execute(${JSON.stringify(w.args)});
  console.log(performance.now() - t0);`;

async function benchWorkloads(root) {
  const rg = which('rg');
  console.log(`\nlinux-source tree, the searches models run most (${RUNS} runs each, medians; ratio < 1 is faster than ripgrep)`);
  for (const w of grepWorkloads) {
    const grep = createFsTools(new NodeWorkspace({ root }), w.options).find((t) => t.name === 'grep');
    const c = await time(() => grep.execute(w.args));
    const count = matchCount(c.out);
    if (!rg) {
      console.log(`  ${w.name.padEnd(34)} corral ${fmt(c.ms).padStart(9)} (${count} matches)`);
      continue;
    }
    const sorted = await time(() => rgLines(root, ['--sort', 'path', ...w.rg]));
    const unsorted = await time(() => rgLines(root, w.rg));
    const rgCount = sorted.out.stdout.split('\n').filter(Boolean).length;
    row(w.name, c.ms, 'rg --sort', sorted.ms, `(${count} vs ${rgCount} matches; plain rg ${fmt(unsorted.ms)}, ratio ${(c.ms / unsorted.ms).toFixed(2)}×)`);
    if (w === grepWorkloads[0] || w === grepWorkloads.at(-1)) {
      const first = freshMedian(firstCallScript(root, w), Math.min(RUNS, 5));
      row(`${w.name}, first call in a process`, first, 'rg --sort', sorted.ms, '(rg is always a fresh process)');
    }
  }
  const mem = peakRss(`
    const { NodeWorkspace, createFsTools } = await import('corral');
    const t = createFsTools(new NodeWorkspace({ root: ${JSON.stringify(root)} }), ${JSON.stringify(wholeTree)}).find((x) => x.name === 'grep');
    await t.execute({ pattern: 'static' });`);
  const node = peakRss('');
  console.log(`  grep 'static' over the tree, default limits: peak memory ${mem.toFixed(0)} MB (node alone ${node.toFixed(0)} MB)`);
  rows.push({ name: 'grep common word peak RSS (linux)', corral: mem, other: 'MB', otherMs: NaN, ratio: NaN });
  const fd = which('fdfind') || which('fd');
  const glob = createFsTools(new NodeWorkspace({ root }), every).find((t) => t.name === 'glob');
  const g = await time(() => glob.execute({ pattern: '**/*.h' }));
  if (fd) {
    const f = await time(() => spawnSync(fd, ['-u', '--type', 'f', '--glob', '--full-path', '**/*.h', '.'], { cwd: root, maxBuffer: 1 << 30, encoding: 'utf8' }));
    row('glob **/*.h', g.ms, 'fd', f.ms, `(${g.out.split('\n').filter((l) => l && !l.startsWith('(')).length} vs ${f.out.stdout.split('\n').filter(Boolean).length} paths)`);
  }
}

/** Time against the files scanned: a subtree of ~2k files, one of ~17k, the whole tree. */
async function benchGrowth(root) {
  console.log('\ngrowth: grep \'static\' (every match) and glob \'**/*.h\' by the files scanned');
  console.log('  subtree     files    grep ms   µs/file    glob ms   µs/file');
  for (const sub of ['fs', 'arch', '.']) {
    const dir = join(root, sub);
    const files = Number(execFileSync('sh', ['-c', `find '${dir}' -type f | wc -l`], { encoding: 'utf8' }).trim());
    const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root: dir }), every).map((t) => [t.name, t]));
    const g = await time(() => tools.grep.execute({ pattern: 'static' }));
    const gl = await time(() => tools.glob.execute({ pattern: '**/*.h' }));
    const us = (ms) => ((ms * 1000) / files).toFixed(1).padStart(8);
    console.log(`  ${sub.padEnd(8)} ${String(files).padStart(8)} ${g.ms.toFixed(0).padStart(10)} ${us(g.ms)} ${gl.ms.toFixed(0).padStart(10)} ${us(gl.ms)}`);
  }
}

console.log(`corral bench — node ${process.version}, ${RUNS} runs per case`);
if (!which('rg') || !(which('fdfind') || which('fd'))) console.log('(install ripgrep and fd-find for the ripgrep/fd columns: apt-get install ripgrep fd-find)');
await benchRead();
await benchTree('small tree', smallTree(), { grepPattern: 'kmalloc\\(|TODO alpha', globPattern: '**/*.h' });
const linux = quick ? null : linuxTree();
if (linux) {
  await benchTree('linux-source tree', linux, { grepPattern: 'spin_lock_irqsave\\(&\\w+->lock', globPattern: '**/*.rs' });
  await benchWorkloads(linux);
  await benchGrowth(linux);
} else if (!quick) console.log('\n(linux-source tree skipped: apt-get install linux-source-6.1)');
