// Behaviours a careful user depends on beyond the happy path: parallel edits, odd files, long
// names, errors from user code, providers that only know files, and result shapes.
import { describe, it, expect, afterAll } from 'vitest';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { NodeWorkspace, MemoryWorkspace, createFsTools, createShellTool, WorkspaceCheckpoints, WorkspaceError, normalizeWorkspacePath } from 'corral';
import { ToolRegistry } from 'corral/executor';
import { tempTree, jsProvider, linksWork } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };
const byName = (tools) => Object.fromEntries(tools.map((t) => [t.name, t]));

describe('parallel tool calls', () => {
  for (const [label, make] of [
    ['NodeWorkspace', (files) => { const t = tree(files); return { fs: new NodeWorkspace({ root: t.root }), read: (p) => readFileSync(join(t.root, p), 'utf8') }; }],
    ['MemoryWorkspace', (files) => { const fs = new MemoryWorkspace({ files }); return { fs, read: (p) => fs.snapshot()[p] }; }],
  ]) {
    it(`parallel edit_file calls on one file over ${label} all land`, async () => {
      const content = Array.from({ length: 8 }, (_, i) => `const v${i} = ${i};`).join('\n') + '\n';
      const { fs, read } = make({ 'a.js': content });
      const { edit_file } = byName(createFsTools(fs));
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => edit_file.execute({ path: 'a.js', old_string: `v${i} = ${i};`, new_string: `v${i} = ${i + 100};` })));
      expect(results.every((r) => r.startsWith('Edited a.js'))).toBe(true);
      expect(read('a.js')).toBe(Array.from({ length: 8 }, (_, i) => `const v${i} = ${i + 100};`).join('\n') + '\n');
    });
  }
});

describe('odd files and names', () => {
  // Windows has no FIFOs in its file system.
  it.skipIf(process.platform === 'win32')('read_file refuses a FIFO instead of hanging', async () => {
    const t = tree({});
    execFileSync('mkfifo', [join(t.root, 'pipe')]);
    const { read_file, edit_file } = byName(createFsTools(new NodeWorkspace({ root: t.root })));
    await expect(read_file.execute({ path: 'pipe' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(edit_file.execute({ path: 'pipe', old_string: 'a', new_string: 'b' })).rejects.toMatchObject({ code: 'NotAFile' });
  });

  it('a file whose name is near the 255-byte limit can be written and edited', async () => {
    const t = tree({});
    const name = `${'n'.repeat(250)}.txt`;
    const { write_file, edit_file } = byName(createFsTools(new NodeWorkspace({ root: t.root })));
    await write_file.execute({ path: name, content: 'one\n' });
    await edit_file.execute({ path: name, old_string: 'one', new_string: 'two' });
    expect(readFileSync(join(t.root, name), 'utf8')).toBe('two\n');
  });

  it('edit_file with old_string equal to new_string leaves the file as it is and says so', async () => {
    const fs = new MemoryWorkspace({ files: { 'a.txt': 'same\n' } });
    const checkpoints = new WorkspaceCheckpoints(fs);
    const { edit_file } = byName(createFsTools(fs, { checkpoints }));
    expect(await edit_file.execute({ path: 'a.txt', old_string: 'same', new_string: 'same' })).toMatch(/left as it is/);
    expect(await checkpoints.list({ sessionId: 'default' })).toEqual([]);
    await expect(edit_file.execute({ path: 'a.txt', old_string: 'other', new_string: 'other' })).rejects.toMatchObject({ code: 'NoMatch' });
  });

  it.skipIf(!linksWork)('NodeWorkspace.stat reports a dangling link as a symlink', async () => {
    const t = tree({});
    // Windows has no ln: node makes the link there.
    if (process.platform === 'win32') symlinkSync(join(t.dir, 'nowhere'), join(t.root, 'dangling'));
    else execFileSync('ln', ['-s', join(t.dir, 'nowhere'), join(t.root, 'dangling')]);
    expect(await new NodeWorkspace({ root: t.root }).stat('dangling')).toEqual({ type: 'symlink', size: expect.any(Number) });
  });
});

describe('errors from user code', () => {
  it('a JS provider that throws a TypeError gets that TypeError back from the registry, not a tool error', async () => {
    const t = tree({ 'a.txt': 'a\n' });
    const bug = new TypeError('cannot read properties of undefined');
    const provider = { ...jsProvider(t.root), readFile: async () => { throw bug; }, readFileBytes: async () => { throw bug; } };
    const registry = new ToolRegistry().registerMany(createFsTools(provider));
    await expect(registry.execute('read_file', { path: 'a.txt' })).rejects.toBe(bug);
  });

  it('a provider WorkspaceError reaches the model as a tool error with its message', async () => {
    const t = tree({ 'a.txt': 'a\n' });
    const notFound = async (p) => { throw new WorkspaceError(`File not found: ${p}`, 'NotFound'); };
    const provider = { ...jsProvider(t.root), readFile: notFound, readFileBytes: notFound };
    const registry = new ToolRegistry().registerMany(createFsTools(provider));
    expect(await registry.execute('read_file', { path: 'a.txt' })).toEqual({ error: 'WorkspaceError', toolName: 'read_file', message: 'File not found: a.txt' });
  });

  it('a JS provider whose realPath answers a host path gets an error that names the workspace path only', async () => {
    const t = tree({ 'a.txt': 'a\n' });
    const provider = { ...jsProvider(t.root), realPath: async () => '/home/someone/secret/a.txt' };
    const e = await createFsTools(provider)[0].execute({ path: 'a.txt' }).catch((x) => x);
    expect(e.code).toBe('OutsideWorkspace');
    expect(e.message).not.toContain('/home/someone');
  });

  it('WorkspaceError takes (message, code, options) and (message, { code, cause })', () => {
    const cause = new Error('root cause');
    const a = new WorkspaceError('a', 'NotFound', { cause });
    const b = new WorkspaceError('b', { code: 'Denied', cause });
    expect([a.code, a.cause, b.code, b.cause]).toEqual(['NotFound', cause, 'Denied', cause]);
  });
});

describe('a provider that only knows files (the specification\'s remoteFs shape)', () => {
  it('list_dir, glob and grep work from the root although stat answers undefined for directories', async () => {
    const files = new Map([['src/a.ts', 'export const a = 1;\n'], ['README.md', '# r\n']]);
    const remoteFs = {
      async readFile(p) { const d = files.get(normalizeWorkspacePath(p, 'posix')); if (d === undefined) throw new WorkspaceError(`File not found: ${p}`); return d; },
      async writeFile(p, c) { files.set(normalizeWorkspacePath(p, 'posix'), c); },
      async stat(p) { const d = files.get(normalizeWorkspacePath(p, 'posix')); return d === undefined ? undefined : { type: 'file', size: d.length }; },
      async readdir(p) {
        const dir = normalizeWorkspacePath(p, 'posix');
        const prefix = dir === '.' ? '' : `${dir}/`;
        const names = new Map();
        for (const k of files.keys()) {
          if (!k.startsWith(prefix)) continue;
          const [first, ...rest] = k.slice(prefix.length).split('/');
          names.set(first, rest.length ? 'directory' : 'file');
        }
        if (names.size === 0 && dir !== '.') throw new WorkspaceError(`Not a directory: ${p}`, 'NotFound');
        return [...names].map(([name, type]) => ({ name, type }));
      },
      async mkdir() {},
      async rm(p) { files.delete(normalizeWorkspacePath(p, 'posix')); },
    };
    const { list_dir, glob, grep } = byName(createFsTools(remoteFs));
    expect(await list_dir.execute({})).toBe('README.md\nsrc/');
    expect(await list_dir.execute({ path: 'src' })).toBe('a.ts');
    expect(await glob.execute({ pattern: '**/*.ts' })).toBe('src/a.ts');
    expect(await grep.execute({ pattern: 'const a' })).toBe('src/a.ts:1: export const a = 1;');
  });
});

describe('result shapes', () => {
  it('results keep the specification\'s key order', async () => {
    const fs = new MemoryWorkspace({ files: { 'notes.md': '# Notes\n' }, exec: () => ({ stdout: 'ok\n' }) });
    const r = await createShellTool(fs, { needsApproval: false }).execute({ command: 'x' });
    expect(Object.keys(r)).toEqual(['exitCode', 'stdout', 'stderr']);
    const checkpoints = new WorkspaceCheckpoints(fs);
    await byName(createFsTools(fs, { checkpoints })).write_file.execute({ path: 'todo.md', content: 'x' }, { sessionId: 's', turn: 0 });
    const [turn] = await checkpoints.list({ sessionId: 's' });
    expect(Object.keys(turn)).toEqual(['turn', 'paths']);
    expect(Object.keys(await checkpoints.rewind(0, { sessionId: 's', dryRun: true }))).toEqual(['dryRun', 'restored', 'deleted', 'skipped']);
  });
});

describe('grep memory follows the output', () => {
  it('a pattern matching every line of many files still returns the first matches in path order', async () => {
    const files = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`f${String(i).padStart(3, '0')}.txt`, 'x\n'.repeat(500)]));
    const t = tree(files);
    const out = await byName(createFsTools(new NodeWorkspace({ root: t.root }), { maxResults: 3 })).grep.execute({ pattern: 'x' });
    const lines = out.split('\n');
    expect(lines.slice(0, 3)).toEqual(['f000.txt:1: x', 'f000.txt:2: x', 'f000.txt:3: x']);
    // The search stops once the first three are settled, and the total is then a lower bound (a
    // thread held up on the first file can let the other finish the tree: then it is exact).
    const [, atLeast, n] = /^\(Showing the first 3 of (at least )?([\d,]+) matches\. Narrow the pattern, path or glob, or continue with offset=3\.\)$/.exec(lines[3]) ?? [];
    expect(Number(n?.replaceAll(',', ''))).toBeGreaterThanOrEqual(500);
    expect(Number(n?.replaceAll(',', ''))).toBeLessThanOrEqual(150_000);
    if (!atLeast) expect(n).toBe('150,000');
  });
});
