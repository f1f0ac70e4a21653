// Attacks on the package as a user would ship it, each run for real through the public API. What
// can crash or exhaust memory runs in a child process, so a failure is a failed test, not a dead
// test runner.
import { describe, it, expect, afterAll } from 'vitest';
import { readFileSync, writeFileSync, existsSync, statSync, mkdirSync, readdirSync, chmodSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  NodeWorkspace, MemoryWorkspace, WorkspaceCheckpoints, FileWorkspaceCheckpointStore, createFsTools, createShellTool,
  readOnlyCommands,
} from 'corral';
import { tempTree, posixModes } from './helpers.mjs';

const INDEX = fileURLToPath(new URL('../js/index.js', import.meta.url));
const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };
const toolsOf = (fs, o) => Object.fromEntries(createFsTools(fs, o).map((t) => [t.name, t]));

/** Runs `body` (an async function's source, given `corral` and `root`) in a child Node process. */
function inChild(body, root) {
  const script = `const corral = require(${JSON.stringify(INDEX)}); const root = ${JSON.stringify(root)};
    (async () => { ${body} })().then((v) => { console.log(JSON.stringify(v)); }, (e) => { console.log(JSON.stringify({ thrown: e.code ?? e.message })); });`;
  const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, signal: r.signal, out: r.stdout.trim() ? JSON.parse(r.stdout.trim().split('\n').pop()) : undefined, stderr: r.stderr };
}

describe('edit_file and write_file cannot be made to exhaust memory', () => {
  it('a replace_all that would grow a 2 MB file to gigabytes is refused with TooLarge and the process lives', () => {
    const t = tree({ 'q.txt': '"\n'.repeat(1_000_000) });
    const r = inChild(`
      const ws = new corral.NodeWorkspace({ root });
      const edit = corral.createFsTools(ws).find((x) => x.name === 'edit_file');
      return await edit.execute({ path: 'q.txt', old_string: '"', new_string: 'x'.repeat(10000), replace_all: true });`, t.root);
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
    expect(r.out).toEqual({ thrown: 'TooLarge' });
    expect(readFileSync(join(t.root, 'q.txt'), 'utf8')).toBe('"\n'.repeat(1_000_000));
  });

  it('write_file refuses content over the write limit and leaves the old file', async () => {
    const t = tree({ 'a.txt': 'old\n' });
    const { write_file } = toolsOf(new NodeWorkspace({ root: t.root }));
    await expect(write_file.execute({ path: 'a.txt', content: 'y'.repeat(10 * 1024 * 1024 + 1) })).rejects.toMatchObject({ code: 'TooLarge' });
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('old\n');
  });
});

describe('the approval building block', () => {
  const needs = readOnlyCommands(['ls', 'cat', 'git status', 'git diff', 'git log']);
  it.each(['ls; touch /tmp/x', 'ls | sh -c id', 'ls\nid', 'git status; rm -fr ~/x', 'cat $(echo /etc/passwd)', 'ls > x', 'cat ../x', 'git stash'])(
    'readOnlyCommands asks for approval for %j', (command) => {
      expect(needs(command)).toBe(true);
    });
  it.each(['ls', 'ls -la src', 'cat README.md', 'git status --short', 'git log -n 3'])('readOnlyCommands lets %j run without approval', (command) => {
    expect(needs(command)).toBe(false);
  });
  it('as the shell tool\'s needsApproval it asks for the chains the old README example approved', async () => {
    const shell = createShellTool(new MemoryWorkspace(), { needsApproval: needs });
    expect(await shell.needsApproval({ command: 'ls; touch /tmp/x' })).toBe(true);
    expect(await shell.needsApproval({ command: 'git status' })).toBe(false);
  });
  it('a list with an operator in it is a ConfigurationError', () => {
    expect(() => readOnlyCommands(['ls; id'])).toThrow(expect.objectContaining({ name: 'ConfigurationError' }));
  });
});

describe('the README args example', () => {
  const testFiles = (rest) => rest === '' || rest.split(' ').every((f) => /^[\w-]+(\/[\w-]+)*\.test\.js$/.test(f));
  it('answers at once on the input that froze the old example, and refuses paths that climb out', () => {
    const evil = 'a.test.js '.repeat(24) + '!';
    const started = process.hrtime.bigint();
    expect(testFiles(evil)).toBe(false);
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(1000); // the old example backtracked for minutes
    expect(testFiles('../x.test.js')).toBe(false);
    expect(testFiles('test/math.test.js test/a-b.test.js')).toBe(true);
  });
});

describe('grep keeps its budget per line and stays off the async threads', () => {
  const slowFiles = () => Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`f${i}.txt`, `${'a'.repeat(2000)}\n`.repeat(200)]));
  it('a pattern that is slow on every line stops near its budget with a Timeout', async () => {
    const { grep } = toolsOf(new MemoryWorkspace({ files: slowFiles() }), { grepTimeoutMs: 500 });
    const started = Date.now();
    await expect(grep.execute({ pattern: '(?:a?){2000}a{2000}' })).rejects.toMatchObject({ code: 'Timeout' });
    // The budget used to be checked every 1,024 lines: this ran for tens of seconds.
    expect(Date.now() - started).toBeLessThan(5000);
  });
  it('an abort stops such a grep within moments', async () => {
    const { grep } = toolsOf(new MemoryWorkspace({ files: slowFiles() }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    const started = Date.now();
    await expect(grep.execute({ pattern: '(?:a?){2000}a{2000}' }, { signal: ac.signal })).rejects.toMatchObject({ code: 'Aborted' });
    expect(Date.now() - started).toBeLessThan(5000);
  });
  it('two slow greps over MemoryWorkspace do not stall an unrelated read_file', async () => {
    const slow = toolsOf(new MemoryWorkspace({ files: slowFiles() }), { grepTimeoutMs: 3000 });
    const other = toolsOf(new MemoryWorkspace({ files: { 'x.txt': 'hi\n' } }));
    let settled = 0;
    const greps = [slow.grep.execute({ pattern: '(?:a?){2000}a{2000}' }), slow.grep.execute({ pattern: '(?:a?){2000}a{2000}' })]
      .map((p) => p.catch(() => {}).finally(() => { settled += 1; }));
    await new Promise((r) => setTimeout(r, 100));
    expect(await other.read_file.execute({ path: 'x.txt' })).toBe(' 1\thi');
    expect(settled).toBe(0);
    await Promise.all(greps);
  });
});

describe('paths and patterns are bounded', () => {
  it('a path thousands of segments deep is InvalidArguments at once, for every provider', async () => {
    const deep = 'y/'.repeat(60_000) + 'g';
    for (const fs of [new MemoryWorkspace(), new NodeWorkspace({ root: tree({}).root })]) {
      const { write_file, read_file } = toolsOf(fs);
      await expect(write_file.execute({ path: deep, content: 'x' })).rejects.toMatchObject({ code: 'InvalidArguments' });
      await expect(read_file.execute({ path: `${'n'.repeat(256)}.txt` })).rejects.toMatchObject({ code: 'InvalidArguments' });
    }
  });
  it('a 100,000-character glob is an InvalidPattern tool error', async () => {
    const { glob, grep } = toolsOf(new MemoryWorkspace({ files: { 'a.txt': 'a' } }));
    await expect(glob.execute({ pattern: '*'.repeat(100_000) })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'InvalidPattern' });
    await expect(grep.execute({ pattern: 'a', glob: '[a-z]'.repeat(20_000) })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'InvalidPattern' });
  });
});

describe('walks over a JavaScript provider end', () => {
  const looping = () => {
    let calls = 0;
    return {
      get calls() { return calls; },
      async readFile() { return ''; },
      async writeFile() {},
      async stat(p) { return p === '.' ? { type: 'directory', size: 0 } : { type: 'directory', size: 0 }; },
      async readdir() { calls += 1; return [{ name: 'loop', type: 'directory' }]; },
      async mkdir() {},
      async rm() {},
    };
  };
  it('a provider that invents directories forever is stopped by maxFilesScanned', async () => {
    const fs = looping();
    const { glob, grep } = toolsOf(fs, { maxFilesScanned: 500 });
    expect(await glob.execute({ pattern: '**/*.txt' })).toMatch(/Stopped after scanning 500 files/);
    expect(fs.calls).toBeLessThanOrEqual(501);
    expect(await grep.execute({ pattern: 'x' })).toMatch(/Stopped after scanning 500 files/);
  });
  it('list_dir drops entry names that are not names, and never hands them back to the provider', async () => {
    const asked = [];
    const fs = { ...looping(), async stat(p) { asked.push(p); return { type: 'directory', size: 0 }; },
      async readdir() { return ['..', '../../etc', '/abs', 'a\\b', '', 'ok.txt'].map((name) => ({ name, type: name === '../../etc' ? 'directory' : 'file' })); } };
    const { list_dir } = toolsOf(fs);
    expect(await list_dir.execute({})).toBe('ok.txt');
    expect(asked.every((p) => !p.includes('..') && !p.includes('etc') && !p.includes('abs'))).toBe(true);
  });
  it('names with a separator or . and .. from readdir are refused', async () => {
    for (const name of ['a/b', '..', '.', 'a\\b']) {
      const fs = { ...looping(), async readdir() { return [{ name, type: 'file' }]; } };
      const { glob } = toolsOf(fs);
      await expect(glob.execute({ pattern: '**' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Io' });
    }
  });
});

describe('rewind does not trust its store', () => {
  it.skipIf(!posixModes)('a store edited to restore .git/hooks/pre-commit with mode 4755 is refused and writes nothing', async () => {
    const t = tree({ 'run.sh': 'echo hi\n' });
    mkdirSync(join(t.root, '.git/hooks'), { recursive: true });
    const dir = join(t.root, '.checkpoints');
    const fs = new NodeWorkspace({ root: t.root });
    const checkpoints = new WorkspaceCheckpoints(fs, { store: new FileWorkspaceCheckpointStore(dir) });
    const { write_file } = toolsOf(fs, { checkpoints });
    chmodSync(join(t.root, 'run.sh'), 0o644);
    await write_file.execute({ path: 'run.sh', content: 'echo changed\n' }, { sessionId: 's', turn: 1 });
    const [name] = readdirSync(dir);
    const doc = JSON.parse(readFileSync(join(dir, name), 'utf8'));
    const entry = doc.turns['1']['run.sh'];
    entry.before.mode = 0o4755;
    // The agent rewrites the store (it lives in the workspace).
    const evil = structuredClone(doc);
    evil.turns['1'] = { '.git/hooks/pre-commit': entry };
    writeFileSync(join(dir, name), JSON.stringify(evil));
    const again = new WorkspaceCheckpoints(fs, { store: new FileWorkspaceCheckpointStore(dir) });
    await expect(again.rewind(0, { sessionId: 's', force: true })).rejects.toMatchObject({ code: 'Denied' });
    expect(existsSync(join(t.root, '.git/hooks/pre-commit'))).toBe(false);

    // The setuid bit alone, on an ordinary path: the file comes back without it.
    writeFileSync(join(dir, name), JSON.stringify(doc));
    const third = new WorkspaceCheckpoints(fs, { store: new FileWorkspaceCheckpointStore(dir) });
    await third.rewind(0, { sessionId: 's', force: true });
    expect(readFileSync(join(t.root, 'run.sh'), 'utf8')).toBe('echo hi\n');
    expect(statSync(join(t.root, 'run.sh')).mode & 0o7777).toBe(0o755);
  });
});

describe('globs cannot turn file names into options', () => {
  it('tar with files named --checkpoint-action is refused under the string pattern tar', async () => {
    const t = tree({ 'x.sh': 'touch pwned\n', '--checkpoint=1': '', '--checkpoint-action=exec=sh x.sh': '' });
    const shell = createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: false, allow: ['tar'] });
    await expect(shell.execute({ command: 'tar cf out.tar *' })).rejects.toMatchObject({ code: 'CommandRefused', message: expect.stringMatching(/expands to `--checkpoint/) });
    expect(existsSync(join(t.root, 'pwned'))).toBe(false);
    const r = await shell.execute({ command: 'tar cf out.tar ./*' });
    expect(r.exitCode).toBe(0);
    expect(existsSync(join(t.root, 'pwned'))).toBe(false);
  });
});

describe('MemoryWorkspace.snapshot', () => {
  it('keeps a file named __proto__ that read_file reads', async () => {
    const fs = new MemoryWorkspace({ files: { a: '1' } });
    await fs.writeFile('__proto__', 'p');
    expect(await fs.readFile('__proto__')).toBe('p');
    const snap = fs.snapshot();
    expect(Object.keys(snap).sort()).toEqual(['__proto__', 'a']);
    expect(Object.getOwnPropertyDescriptor(snap, '__proto__').value).toBe('p');
  });
  it('keeps a file named __proto__ given to the constructor', async () => {
    const fs = new MemoryWorkspace({ files: JSON.parse('{"__proto__":"p","a.txt":"b"}') });
    expect(await fs.readFile('__proto__')).toBe('p');
    const snap = fs.snapshot();
    expect(Object.keys(snap).sort()).toEqual(['__proto__', 'a.txt']);
    expect(Object.getOwnPropertyDescriptor(snap, '__proto__').value).toBe('p');
  });
});

describe('no input panics across the boundary', () => {
  it('random paths, commands, patterns and options reach the core without crashing the process', () => {
    const r = inChild(`
      const { normalizeWorkspacePath, readOnlyCommands, createShellTool, createFsTools, MemoryWorkspace } = corral;
      let seed = 42;
      const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
      const alphabet = 'ab/\\\\.:*?[]{}()|+^$\\\\~-!&;<>\`"\\' \\n\\t\\0\\u00e9\\ud83d\\ude00\\ud800';
      const str = () => Array.from({ length: rnd(40) }, () => alphabet[rnd(alphabet.length)]).join('');
      const ws = new MemoryWorkspace({ files: { 'a.txt': 'abc\\n' } });
      const [read, , , , glob, grep] = createFsTools(ws);
      const ro = readOnlyCommands(['ls', 'git status']);
      let calls = 0;
      for (let i = 0; i < 3000; i++) {
        const s = str();
        try { normalizeWorkspacePath(s); } catch {}
        ro(s);
        try { createShellTool(ws, { allow: [s, { command: s }], deny: [s] }); } catch {}
        try { createShellTool(ws, { allow: [new RegExp(s)] }); } catch {}
        await read.execute({ path: s }).catch(() => {});
        await glob.execute({ pattern: s || 'x' }).catch(() => {});
        await grep.execute({ pattern: s || 'x', glob: s }).catch(() => {});
        calls += 1;
      }
      return calls;`, '/');
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
    expect(r.out).toBe(3000);
  });
});

describe('a command\'s output held in memory is bounded by what the tool can return', () => {
  it.skipIf(process.platform !== 'linux')('six concurrent commands printing 64 MiB each keep the process far below their output', () => {
    const t = tree({ 'a.txt': 'a\n' });
    const r = inChild(`
      const ws = new corral.NodeWorkspace({ root });
      const shell = corral.createShellTool(ws, { needsApproval: false });
      const runs = Array.from({ length: 6 }, () => shell.execute({ command: "head -c 67108864 /dev/zero | tr '\\\\0' a; echo end" }));
      const results = await Promise.all(runs);
      const hwm = Number(require('fs').readFileSync('/proc/self/status', 'utf8').match(/VmHWM:\\s+(\\d+)/)[1]) * 1024;
      return { hwm, ends: results.map((x) => x.stdout.endsWith('end\\n')), lengths: results.map((x) => x.stdout.length) };`, t.root);
    expect(r.status).toBe(0);
    expect(r.out.ends).toEqual([true, true, true, true, true, true]);
    // What is returned is the head and tail (30,000 characters and a note), not 64 MiB.
    for (const n of r.out.lengths) expect(n).toBeLessThan(40_000);
    // 6 × 64 MiB held would be 384 MiB of output alone (over 1 GB peak before the cap); the
    // bound is wide: node and the addon take about 100 MB.
    expect(r.out.hwm).toBeLessThan(350 * 1024 * 1024);
  });
});
