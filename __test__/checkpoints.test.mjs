// "Checkpoints": undo what the agent did to the files, through the public API only — tool calls
// with a { sessionId, turn } context, WorkspaceCheckpoints, its stores, and a real kill -9.
import { describe, it, expect, afterAll } from 'vitest';
import {
  readFileSync, writeFileSync, existsSync, statSync, chmodSync, mkdirSync, rmSync, renameSync,
  symlinkSync, readdirSync, lstatSync, mkdtempSync, realpathSync,
} from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  NodeWorkspace, MemoryWorkspace, WorkspaceCheckpoints, FileWorkspaceCheckpointStore, createFsTools, WorkspaceError,
} from 'corral';
import { tempTree, jsProvider, linksWork, posixModes } from './helpers.mjs';

const INDEX = fileURLToPath(new URL('../js/index.js', import.meta.url));

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };
const tempDir = () => { const d = realpathSync(mkdtempSync(join(tmpdir(), 'corral-ckpt-'))); trees.push({ cleanup: () => rmSync(d, { recursive: true, force: true }) }); return d; };

/** The same operations over both providers: the file as the outside world sees it, and changes made behind the agent's back. */
const providers = {
  MemoryWorkspace: (files) => {
    const fs = new MemoryWorkspace({ files });
    return {
      fs,
      read: (p) => fs.snapshot()[p],
      files: () => fs.snapshot(),
      outside: { write: (p, c) => fs.writeFile(p, c), rm: (p) => fs.rm(p), mkdir: (p) => fs.mkdir(p) },
      isDir: async (p) => (await fs.stat(p))?.type === 'directory',
    };
  },
  NodeWorkspace: (files) => {
    const t = tree(files);
    const fs = new NodeWorkspace({ root: t.root });
    const abs = (p) => join(t.root, p);
    const walk = (dir, prefix = '') => Object.assign({}, ...readdirSync(dir, { withFileTypes: true }).map((e) =>
      e.isDirectory() ? walk(join(dir, e.name), `${prefix}${e.name}/`) : { [`${prefix}${e.name}`]: readFileSync(join(dir, e.name), 'utf8') }));
    return {
      fs,
      t,
      abs,
      read: (p) => (existsSync(abs(p)) ? readFileSync(abs(p), 'utf8') : undefined),
      files: () => walk(t.root),
      outside: { write: async (p, c) => writeFileSync(abs(p), c), rm: async (p) => rmSync(abs(p)), mkdir: async (p) => mkdirSync(abs(p)) },
      isDir: async (p) => existsSync(abs(p)) && statSync(abs(p)).isDirectory(),
    };
  },
};

function setup(make, files, options) {
  const env = make(files);
  const checkpoints = new WorkspaceCheckpoints(env.fs, options);
  const tools = Object.fromEntries(createFsTools(env.fs, { checkpoints }).map((t) => [t.name, t]));
  const call = (name, args, ctx) => tools[name].execute(args, ctx);
  return { ...env, checkpoints, tools, call };
}

const EMPTY = { dryRun: false, restored: [], deleted: [], skipped: [] };

for (const [label, make] of Object.entries(providers)) {
  describe(`checkpoints over ${label}`, () => {
    it("the specification's example: list shows each turn's paths, the dry run reports, the rewind restores notes.md and deletes todo.md", async () => {
      const s = setup(make, { 'notes.md': '# Notes\n' });
      await s.call('edit_file', { path: 'notes.md', old_string: '# Notes', new_string: '# Plan' }, { sessionId: 'sess-1', turn: 0 });
      await s.call('write_file', { path: 'todo.md', content: '- ship it\n' }, { sessionId: 'sess-1', turn: 1 });
      expect(s.files()).toEqual({ 'notes.md': '# Plan\n', 'todo.md': '- ship it\n' });

      expect(await s.checkpoints.list({ sessionId: 'sess-1' })).toEqual([{ turn: 0, paths: ['notes.md'] }, { turn: 1, paths: ['todo.md'] }]);
      expect(await s.checkpoints.list({ sessionId: 'another-session' })).toEqual([]);

      const preview = await s.checkpoints.rewind(0, { sessionId: 'sess-1', dryRun: true });
      expect(preview).toEqual({ dryRun: true, restored: ['notes.md'], deleted: ['todo.md'], skipped: [] });
      expect(s.files()).toEqual({ 'notes.md': '# Plan\n', 'todo.md': '- ship it\n' });
      expect(await s.checkpoints.list({ sessionId: 'sess-1' })).toHaveLength(2);

      expect(await s.checkpoints.rewind(0, { sessionId: 'sess-1' })).toEqual({ dryRun: false, restored: ['notes.md'], deleted: ['todo.md'], skipped: [] });
      expect(s.files()).toEqual({ 'notes.md': '# Notes\n' });
      if (label === 'MemoryWorkspace') expect(s.fs.snapshot()).toEqual({ 'notes.md': '# Notes\n' });
      expect(await s.checkpoints.list({ sessionId: 'sess-1' })).toEqual([]);
    });

    it('a file the agent created is deleted, one it edited or overwrote gets its content back, and the directories it created stay empty', async () => {
      const s = setup(make, { 'src/a.ts': 'export const a = 1;\n', 'README.md': 'readme\n' });
      const ctx = { sessionId: 's', turn: 0 };
      await s.call('edit_file', { path: 'src/a.ts', old_string: '= 1', new_string: '= 2' }, ctx);
      await s.call('write_file', { path: 'README.md', content: 'rewritten\n' }, ctx);
      await s.call('write_file', { path: 'new/deep/file.md', content: 'created\n' }, ctx);
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 0, paths: ['README.md', 'new/deep/file.md', 'src/a.ts'] }]);

      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['README.md', 'src/a.ts'], deleted: ['new/deep/file.md'], skipped: [] });
      expect(s.read('src/a.ts')).toBe('export const a = 1;\n');
      expect(s.read('README.md')).toBe('readme\n');
      expect(s.read('new/deep/file.md')).toBeUndefined();
      expect(await s.isDir('new/deep')).toBe(true);
      expect(await s.fs.readdir('new/deep')).toEqual([]);
    });

    it('a rewind to a later turn undoes that turn and the ones after it and keeps the earlier turns', async () => {
      const s = setup(make, { 'a.md': 'a0' });
      await s.call('write_file', { path: 'a.md', content: 'a1' }, { sessionId: 's', turn: 0 });
      await s.call('write_file', { path: 'a.md', content: 'a2' }, { sessionId: 's', turn: 1 });
      await s.call('write_file', { path: 'b.md', content: 'b2' }, { sessionId: 's', turn: 2 });
      expect(await s.checkpoints.rewind(1, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: ['b.md'], skipped: [] });
      expect(s.files()).toEqual({ 'a.md': 'a1' });
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 0, paths: ['a.md'] }]);
      await s.checkpoints.rewind(0, { sessionId: 's' });
      expect(s.files()).toEqual({ 'a.md': 'a0' });
    });

    it("a file something else changed since the agent's write is skipped as changed-since and kept; force: true restores it", async () => {
      const s = setup(make, { 'a.md': 'original', 'b.md': 'b original' });
      const ctx = { sessionId: 's', turn: 0 };
      await s.call('write_file', { path: 'a.md', content: 'agent' }, ctx);
      await s.call('write_file', { path: 'b.md', content: 'agent b' }, ctx);
      await s.call('write_file', { path: 'c.md', content: 'agent c' }, ctx);
      await s.outside.write('a.md', 'edited by you');
      await s.outside.write('c.md', 'you kept working on it');

      const report = await s.checkpoints.rewind(0, { sessionId: 's', dryRun: true });
      expect(report).toEqual({
        dryRun: true, restored: ['b.md'], deleted: [],
        skipped: [{ path: 'a.md', reason: 'changed-since' }, { path: 'c.md', reason: 'changed-since' }],
      });
      expect(s.read('b.md')).toBe('agent b');

      expect(await s.checkpoints.rewind(0, { sessionId: 's', dryRun: true, force: true })).toEqual({ dryRun: true, restored: ['a.md', 'b.md'], deleted: ['c.md'], skipped: [] });
      expect(await s.checkpoints.rewind(0, { sessionId: 's', force: true })).toEqual({ dryRun: false, restored: ['a.md', 'b.md'], deleted: ['c.md'], skipped: [] });
      expect(s.files()).toEqual({ 'a.md': 'original', 'b.md': 'b original' });
    });

    it('without force, a changed-since file keeps the other content and its backup is forgotten with the turn', async () => {
      const s = setup(make, { 'a.md': 'original' });
      await s.call('write_file', { path: 'a.md', content: 'agent' }, { sessionId: 's', turn: 0 });
      await s.outside.write('a.md', 'edited by you');
      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ ...EMPTY, skipped: [{ path: 'a.md', reason: 'changed-since' }] });
      expect(s.read('a.md')).toBe('edited by you');
      expect(await s.checkpoints.rewind(0, { sessionId: 's', force: true })).toEqual(EMPTY);
      expect(s.read('a.md')).toBe('edited by you');
    });

    it('keepSkipped: a skipped file keeps its backup, stays listed alone, and a later forced rewind restores it', async () => {
      const s = setup(make, { 'a.md': 'original', 'b.md': 'b0' }, { keepSkipped: true });
      await s.call('write_file', { path: 'a.md', content: 'agent' }, { sessionId: 's', turn: 0 });
      await s.call('write_file', { path: 'b.md', content: 'b1' }, { sessionId: 's', turn: 1 });
      await s.outside.write('a.md', 'edited by a command');
      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ ...EMPTY, restored: ['b.md'], skipped: [{ path: 'a.md', reason: 'changed-since' }] });
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 0, paths: ['a.md'] }]);
      expect(await s.checkpoints.rewind(0, { sessionId: 's', force: true })).toEqual({ ...EMPTY, restored: ['a.md'] });
      expect(s.read('a.md')).toBe('original');
      expect(s.read('b.md')).toBe('b0');
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([]);
    });

    it('a path that has become a directory is skipped as not-a-file and left alone, even with force', async () => {
      const s = setup(make, { 'keep.md': 'k0' });
      await s.call('write_file', { path: 'out', content: 'agent output' }, { sessionId: 's', turn: 0 });
      await s.call('write_file', { path: 'keep.md', content: 'k1' }, { sessionId: 's', turn: 0 });
      await s.outside.rm('out');
      await s.outside.mkdir('out');
      await s.outside.write('out/inner.txt', 'inside the directory');
      expect(await s.checkpoints.rewind(0, { sessionId: 's', dryRun: true, force: true })).toEqual({
        dryRun: true, restored: ['keep.md'], deleted: [], skipped: [{ path: 'out', reason: 'not-a-file' }],
      });
      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({
        dryRun: false, restored: ['keep.md'], deleted: [], skipped: [{ path: 'out', reason: 'not-a-file' }],
      });
      expect(await s.isDir('out')).toBe(true);
      expect(s.read('out/inner.txt')).toBe('inside the directory');
      expect(s.read('keep.md')).toBe('k0');
    });

    it('files over maxFileBytes are reported as too-large and never restored or deleted, and their content is not copied', async () => {
      const saved = [];
      const memory = new Map();
      const store = {
        async load(id) { return memory.get(id); },
        async save(id, data) { saved.push(JSON.stringify(data)); memory.set(id, structuredClone(data)); },
        async delete(id) { memory.delete(id); },
      };
      const BIG_BEFORE = 'B'.repeat(64);
      const s = setup(make, { 'big.txt': BIG_BEFORE, 'small.txt': 'tiny' }, { maxFileBytes: 32, store });
      const ctx = { sessionId: 's', turn: 0 };
      await s.call('write_file', { path: 'big.txt', content: 'N'.repeat(64) }, ctx);
      await s.call('write_file', { path: 'created-big.txt', content: 'C'.repeat(64) }, ctx);
      await s.call('write_file', { path: 'small.txt', content: 'G'.repeat(64) }, ctx);
      await s.call('write_file', { path: 'created-small.txt', content: 'ok' }, ctx);

      const skipped = [
        { path: 'big.txt', reason: 'too-large' },
        { path: 'created-big.txt', reason: 'too-large' },
        { path: 'small.txt', reason: 'too-large' },
      ];
      expect(await s.checkpoints.rewind(0, { sessionId: 's', dryRun: true, force: true })).toEqual({ dryRun: true, restored: [], deleted: ['created-small.txt'], skipped });
      expect(await s.checkpoints.rewind(0, { sessionId: 's', force: true })).toEqual({ dryRun: false, restored: [], deleted: ['created-small.txt'], skipped });
      expect(s.read('big.txt')).toBe('N'.repeat(64));
      expect(s.read('created-big.txt')).toBe('C'.repeat(64));
      expect(s.read('small.txt')).toBe('G'.repeat(64));
      expect(s.read('created-small.txt')).toBeUndefined();
      expect(saved.length).toBeGreaterThan(0);
      expect(saved.some((d) => d.includes(BIG_BEFORE))).toBe(false);
      expect(saved.some((d) => d.includes('tiny'))).toBe(true);
    });

    it('a second rewind does nothing', async () => {
      const s = setup(make, { 'a.md': 'a0' });
      await s.call('write_file', { path: 'a.md', content: 'a1' }, { sessionId: 's', turn: 0 });
      await s.call('write_file', { path: 'b.md', content: 'b1' }, { sessionId: 's', turn: 1 });
      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: ['b.md'], skipped: [] });
      await s.outside.write('a.md', 'your edit after the rewind');
      expect(await s.checkpoints.rewind(0, { sessionId: 's', dryRun: true })).toEqual({ ...EMPTY, dryRun: true });
      expect(await s.checkpoints.rewind(0, { sessionId: 's', force: true })).toEqual(EMPTY);
      expect(s.files()).toEqual({ 'a.md': 'your edit after the rewind' });
    });

    it('only the newest maxTurns turns are kept and a rewind to an older turn throws a WorkspaceError that says which turns are left', async () => {
      const s = setup(make, { 'a.md': 'a0' }, { maxTurns: 2 });
      for (let turn = 0; turn < 4; turn++) await s.call('write_file', { path: 'a.md', content: `a${turn + 1}` }, { sessionId: 's', turn });
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 2, paths: ['a.md'] }, { turn: 3, paths: ['a.md'] }]);

      for (const old of [0, 1]) {
        const err = await s.checkpoints.rewind(old, { sessionId: 's' }).catch((e) => e);
        expect(err).toBeInstanceOf(WorkspaceError);
        expect(err.name).toBe('WorkspaceError');
        expect(err.code).toBe('InvalidArguments');
        expect(err.message).toContain(`turn ${old}`);
        expect(err.message).toMatch(/newest 2 turns/);
        expect(err.message).toMatch(/turn 2 or later/);
        expect(err.message).not.toMatch(/a[0-4]\b/);
      }
      await expect(s.checkpoints.rewind(0, { sessionId: 's', dryRun: true })).rejects.toMatchObject({ code: 'InvalidArguments' });
      expect(s.read('a.md')).toBe('a4');

      expect(await s.checkpoints.rewind(2, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: [], skipped: [] });
      expect(s.read('a.md')).toBe('a2');
    });

    it("when one turn writes a path several times, rewind restores the content from before the turn's first write", async () => {
      const saved = [];
      const memory = new Map();
      const store = {
        async load(id) { return memory.get(id); },
        async save(id, data) { saved.push(JSON.stringify(data)); memory.set(id, structuredClone(data)); },
        async delete(id) { memory.delete(id); },
      };
      const s = setup(make, { 'a.md': 'FIRST-CONTENT\n' }, { store });
      const ctx = { sessionId: 's', turn: 0 };
      await s.call('write_file', { path: 'a.md', content: 'SECOND-CONTENT\n' }, ctx);
      await s.call('write_file', { path: './a.md', content: 'THIRD-CONTENT\n' }, ctx);
      await s.call('edit_file', { path: 'a.md', old_string: 'THIRD', new_string: 'FOURTH' }, ctx);
      expect(s.read('a.md')).toBe('FOURTH-CONTENT\n');
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 0, paths: ['a.md'] }]);
      // Only the first write keeps content; the later ones keep hashes.
      const last = saved.at(-1);
      expect(last).toContain('FIRST-CONTENT');
      for (const later of ['SECOND-CONTENT', 'THIRD-CONTENT', 'FOURTH-CONTENT']) expect(last).not.toContain(later);

      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: [], skipped: [] });
      expect(s.read('a.md')).toBe('FIRST-CONTENT\n');
    });

    it('a write_file or edit_file that would leave the file as it is records and writes nothing', async () => {
      const s = setup(make, { 'notes.md': '# Plan\n' });
      const ctx = { sessionId: 's', turn: 0 };
      expect(await s.call('write_file', { path: 'notes.md', content: '# Plan\n' }, ctx)).toMatch(/nothing was written/i);
      // The edit was already applied (a call re-run after a crash): old_string gone, new_string there.
      expect(await s.call('edit_file', { path: 'notes.md', old_string: '# Notes', new_string: '# Plan' }, ctx)).toMatch(/already applied/i);
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([]);
      expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual(EMPTY);
      expect(s.files()).toEqual({ 'notes.md': '# Plan\n' });
    });

    it("without a context, tool calls are recorded as turn 0 of the session 'default'", async () => {
      const s = setup(make, { 'a.md': 'a0' });
      await s.call('write_file', { path: 'a.md', content: 'a1' });
      await s.call('edit_file', { path: 'a.md', old_string: 'a1', new_string: 'a2' }, {});
      await s.call('write_file', { path: 'b.md', content: 'b' }, { turn: 0 });
      expect(await s.checkpoints.list({ sessionId: 'default' })).toEqual([{ turn: 0, paths: ['a.md', 'b.md'] }]);
      expect(await s.checkpoints.list({ sessionId: 'other' })).toEqual([]);
      expect(await s.checkpoints.rewind(0, { sessionId: 'default' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: ['b.md'], skipped: [] });
      expect(s.files()).toEqual({ 'a.md': 'a0' });
    });

    it("clear forgets one session's backups and leaves the others", async () => {
      const s = setup(make, { 'a.md': 'a0', 'b.md': 'b0' });
      await s.call('write_file', { path: 'a.md', content: 'a1' }, { sessionId: 'one', turn: 0 });
      await s.call('write_file', { path: 'b.md', content: 'b1' }, { sessionId: 'two', turn: 0 });
      await s.checkpoints.clear({ sessionId: 'one' });
      expect(await s.checkpoints.list({ sessionId: 'one' })).toEqual([]);
      expect(await s.checkpoints.rewind(0, { sessionId: 'one' })).toEqual(EMPTY);
      expect(s.read('a.md')).toBe('a1');
      expect(await s.checkpoints.list({ sessionId: 'two' })).toEqual([{ turn: 0, paths: ['b.md'] }]);
      expect(await s.checkpoints.rewind(0, { sessionId: 'two' })).toEqual({ dryRun: false, restored: ['b.md'], deleted: [], skipped: [] });
      expect(s.read('b.md')).toBe('b0');
    });

    it('a tool context whose sessionId is not a string or whose turn is not a non-negative integer is refused, and nothing is written', async () => {
      const s = setup(make, { 'a.md': 'a0' });
      for (const ctx of [{ sessionId: 5, turn: 0 }, { sessionId: 's', turn: -1 }, { sessionId: 's', turn: 1.5 }, { sessionId: 's', turn: '1' }]) {
        const err = await s.call('write_file', { path: 'a.md', content: 'a1' }, ctx).then(() => undefined, (e) => e);
        expect(err, JSON.stringify(ctx)).toBeInstanceOf(WorkspaceError);
        expect(err.code).toBe('InvalidArguments');
        expect(err.message).toMatch(/sessionId|turn/);
        expect(s.read('a.md')).toBe('a0');
      }
      expect(await s.checkpoints.list({ sessionId: 'default' })).toEqual([]);
      expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([]);
    });

    it('list and rewind results carry paths and reasons, never file content', async () => {
      const s = setup(make, { 'a.md': 'SECRET-BEFORE-a', 'b.md': 'SECRET-BEFORE-b' }, { maxTurns: 1 });
      await s.call('write_file', { path: 'a.md', content: 'SECRET-AGENT-a' }, { sessionId: 's', turn: 0 });
      await s.call('write_file', { path: 'b.md', content: 'SECRET-AGENT-b' }, { sessionId: 's', turn: 1 });
      await s.call('write_file', { path: 'c.md', content: 'SECRET-AGENT-c' }, { sessionId: 's', turn: 1 });
      await s.outside.write('b.md', 'SECRET-YOURS-b');
      const results = [
        await s.checkpoints.list({ sessionId: 's' }),
        await s.checkpoints.rewind(1, { sessionId: 's', dryRun: true }),
        await s.checkpoints.rewind(0, { sessionId: 's' }).catch((e) => ({ message: e.message, code: e.code })),
        await s.checkpoints.rewind(1, { sessionId: 's' }),
      ];
      expect(results[3]).toEqual({ dryRun: false, restored: [], deleted: ['c.md'], skipped: [{ path: 'b.md', reason: 'changed-since' }] });
      expect(JSON.stringify(results)).not.toContain('SECRET');
    });
  });
}

describe('checkpoints over NodeWorkspace only', () => {
  it.skipIf(!posixModes)('permission bits are restored with the content, also when they were changed after the write', async () => {
    const s = setup(providers.NodeWorkspace, { 'run.sh': 'echo one\n', 'conf.ini': 'x=1\n' });
    chmodSync(s.abs('run.sh'), 0o750);
    chmodSync(s.abs('conf.ini'), 0o640);
    const ctx = { sessionId: 's', turn: 0 };
    await s.call('write_file', { path: 'run.sh', content: 'echo two\n' }, ctx);
    await s.call('edit_file', { path: 'conf.ini', old_string: 'x=1', new_string: 'x=2' }, ctx);
    expect(statSync(s.abs('run.sh')).mode & 0o777).toBe(0o750);
    chmodSync(s.abs('run.sh'), 0o600);
    chmodSync(s.abs('conf.ini'), 0o666);

    expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['conf.ini', 'run.sh'], deleted: [], skipped: [] });
    expect(readFileSync(s.abs('run.sh'), 'utf8')).toBe('echo one\n');
    expect(statSync(s.abs('run.sh')).mode & 0o777).toBe(0o750);
    expect(readFileSync(s.abs('conf.ini'), 'utf8')).toBe('x=1\n');
    expect(statSync(s.abs('conf.ini')).mode & 0o777).toBe(0o640);
  });

  it('a file that was not UTF-8 gets its exact bytes back', async () => {
    const s = setup(providers.NodeWorkspace, {});
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x41, 0x0a, 0xc3]);
    writeFileSync(s.abs('blob.bin'), bytes);
    await s.call('write_file', { path: 'blob.bin', content: 'now text\n' }, { sessionId: 's', turn: 0 });
    expect(readFileSync(s.abs('blob.bin'), 'utf8')).toBe('now text\n');
    expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['blob.bin'], deleted: [], skipped: [] });
    expect(readFileSync(s.abs('blob.bin')).equals(bytes)).toBe(true);
  });

  it("a JS provider's writeFileBytes gets a file that was not UTF-8 back exactly; without it the rewind refuses", async () => {
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x41, 0x0a, 0xc3]);
    for (const withBytes of [true, false]) {
      const t = tree({});
      const fs = jsProvider(t.root);
      if (withBytes) fs.writeFileBytes = async (p, b) => writeFileSync(join(t.root, p), b);
      writeFileSync(join(t.root, 'blob.bin'), bytes);
      const checkpoints = new WorkspaceCheckpoints(fs);
      const write = createFsTools(fs, { checkpoints }).find((x) => x.name === 'write_file');
      await write.execute({ path: 'blob.bin', content: 'now text\n' }, { sessionId: 's', turn: 0 });
      if (withBytes) {
        expect(await checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['blob.bin'], deleted: [], skipped: [] });
        expect(readFileSync(join(t.root, 'blob.bin')).equals(bytes)).toBe(true);
      } else {
        await expect(checkpoints.rewind(0, { sessionId: 's' })).rejects.toMatchObject({ code: 'NotUtf8' });
        expect(readFileSync(join(t.root, 'blob.bin'), 'utf8')).toBe('now text\n');
      }
    }
  });

  it('a write the provider refuses (a read-only file) changes nothing and is not listed as a change', async () => {
    const s = setup(providers.NodeWorkspace, { 'ro.txt': 'locked\n' });
    chmodSync(s.abs('ro.txt'), 0o444);
    await expect(s.call('write_file', { path: 'ro.txt', content: 'changed\n' }, { sessionId: 's', turn: 0 })).rejects.toMatchObject({ code: 'ReadOnly' });
    expect(readFileSync(s.abs('ro.txt'), 'utf8')).toBe('locked\n');
    expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([]);
  });

  it("a write the provider refuses does not push an older turn's backups out of maxTurns", async () => {
    const s = setup(providers.NodeWorkspace, { 'a.md': 'a0', 'ro.txt': 'locked\n' }, { maxTurns: 1 });
    chmodSync(s.abs('ro.txt'), 0o444);
    await s.call('write_file', { path: 'a.md', content: 'a1' }, { sessionId: 's', turn: 0 });
    await expect(s.call('write_file', { path: 'ro.txt', content: 'changed\n' }, { sessionId: 's', turn: 1 })).rejects.toMatchObject({ code: 'ReadOnly' });
    expect(await s.checkpoints.list({ sessionId: 's' })).toEqual([{ turn: 0, paths: ['a.md'] }]);
    expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md'], deleted: [], skipped: [] });
    expect(readFileSync(s.abs('a.md'), 'utf8')).toBe('a0');
  });

  it.skipIf(!linksWork)('a rewind never writes or deletes outside the root when a directory was swapped for a link to outside', async () => {
    const s = setup(providers.NodeWorkspace, { 'a.md': 'a0', 'sub/b.md': 'b0' });
    const ctx = { sessionId: 's', turn: 0 };
    await s.call('write_file', { path: 'a.md', content: 'a1' }, ctx);
    await s.call('write_file', { path: 'sub/b.md', content: 'b1' }, ctx);
    await s.call('write_file', { path: 'sub/new.md', content: 'n1' }, ctx);
    // Something moves sub/ out of the root and leaves a link in its place; the files outside hold
    // exactly what the agent wrote, so only confinement stands between rewind and them.
    const outside = join(s.t.dir, 'outside');
    mkdirSync(outside);
    renameSync(s.abs('sub'), join(outside, 'sub'));
    symlinkSync(join(outside, 'sub'), s.abs('sub'));
    // And a file link to outside where a.md was.
    writeFileSync(join(outside, 'a-target.md'), 'a1');
    rmSync(s.abs('a.md'));
    symlinkSync(join(outside, 'a-target.md'), s.abs('a.md'));

    for (const options of [{ dryRun: true }, {}, { force: true }]) {
      let report;
      try {
        report = await s.checkpoints.rewind(0, { sessionId: 's', ...options });
      } catch (e) {
        expect(e).toBeInstanceOf(WorkspaceError);
        expect(e.code).toBe('OutsideWorkspace');
        expect(e.message).not.toContain(outside);
      }
      if (report) {
        expect(report.restored).toEqual([]);
        expect(report.deleted).toEqual([]);
      }
      expect(readFileSync(join(outside, 'sub/b.md'), 'utf8')).toBe('b1');
      expect(readFileSync(join(outside, 'sub/new.md'), 'utf8')).toBe('n1');
      expect(readFileSync(join(outside, 'a-target.md'), 'utf8')).toBe('a1');
      expect(lstatSync(s.abs('a.md')).isSymbolicLink()).toBe(true);
      expect(readdirSync(outside).sort()).toEqual(['a-target.md', 'sub']);
      expect(readdirSync(join(outside, 'sub')).sort()).toEqual(['b.md', 'new.md']);
    }
  });

  it.skipIf(!linksWork)('every path is checked before anything is written: one refused path leaves the restorable ones untouched', async () => {
    const s = setup(providers.NodeWorkspace, { 'a.md': 'a0', 'sub/b.md': 'b0' });
    const ctx = { sessionId: 's', turn: 0 };
    await s.call('write_file', { path: 'a.md', content: 'a1' }, ctx);
    await s.call('write_file', { path: 'sub/b.md', content: 'b1' }, ctx);
    const outside = join(s.t.dir, 'outside');
    mkdirSync(outside);
    renameSync(s.abs('sub'), join(outside, 'sub'));
    symlinkSync(join(outside, 'sub'), s.abs('sub'));
    await expect(s.checkpoints.rewind(0, { sessionId: 's' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'OutsideWorkspace' });
    expect(readFileSync(s.abs('a.md'), 'utf8')).toBe('a1');
    expect(readFileSync(join(outside, 'sub/b.md'), 'utf8')).toBe('b1');
    // Put the directory back: the backups are still there and the rewind goes through.
    rmSync(s.abs('sub'));
    renameSync(join(outside, 'sub'), s.abs('sub'));
    expect(await s.checkpoints.rewind(0, { sessionId: 's' })).toEqual({ dryRun: false, restored: ['a.md', 'sub/b.md'], deleted: [], skipped: [] });
    expect(readFileSync(s.abs('a.md'), 'utf8')).toBe('a0');
    expect(readFileSync(s.abs('sub/b.md'), 'utf8')).toBe('b0');
  });
});

describe('checkpoint stores', () => {
  it('a WorkspaceCheckpointStore written in plain JS receives the data, and a new WorkspaceCheckpoints rewinds from it', async () => {
    const calls = [];
    const memory = new Map();
    const store = {
      async load(id) { calls.push(['load', id]); return memory.has(id) ? JSON.parse(memory.get(id)) : undefined; },
      async save(id, data) { calls.push(['save', id]); memory.set(id, JSON.stringify(data)); },
      async delete(id) { calls.push(['delete', id]); memory.delete(id); },
    };
    const fs = new MemoryWorkspace({ files: { 'notes.md': 'STORE-BEFORE\n' } });
    const checkpoints = new WorkspaceCheckpoints(fs, { store });
    const tools = Object.fromEntries(createFsTools(fs, { checkpoints }).map((t) => [t.name, t]));
    await tools.write_file.execute({ path: 'notes.md', content: 'agent\n' }, { sessionId: 'js-store', turn: 0 });
    await tools.write_file.execute({ path: 'todo.md', content: 'todo\n' }, { sessionId: 'js-store', turn: 1 });

    expect(calls).toContainEqual(['load', 'js-store']);
    expect(calls.filter(([op]) => op === 'save').length).toBeGreaterThan(0);
    expect(calls.every(([, id]) => id === 'js-store')).toBe(true);
    const data = JSON.parse(memory.get('js-store'));
    expect(typeof data).toBe('object');
    expect(JSON.stringify(data)).toContain('STORE-BEFORE');

    // A restart: new checkpoints over the same store.
    const again = new WorkspaceCheckpoints(fs, { store });
    expect(await again.list({ sessionId: 'js-store' })).toEqual([{ turn: 0, paths: ['notes.md'] }, { turn: 1, paths: ['todo.md'] }]);
    expect(await again.rewind(0, { sessionId: 'js-store' })).toEqual({ dryRun: false, restored: ['notes.md'], deleted: ['todo.md'], skipped: [] });
    expect(fs.snapshot()).toEqual({ 'notes.md': 'STORE-BEFORE\n' });
    await again.clear({ sessionId: 'js-store' });
    expect(calls.at(-1)).toEqual(['delete', 'js-store']);
    expect(memory.has('js-store')).toBe(false);
  });

  it('a store that fails makes the tool call fail before the file is written', async () => {
    const store = {
      async load() { return undefined; },
      async save() { throw new WorkspaceError('the backup disk is full', 'Io'); },
      async delete() {},
    };
    const fs = new MemoryWorkspace({ files: { 'a.md': 'a0' } });
    const checkpoints = new WorkspaceCheckpoints(fs, { store });
    const [, write] = createFsTools(fs, { checkpoints });
    await expect(write.execute({ path: 'a.md', content: 'a1' }, { sessionId: 's', turn: 0 })).rejects.toThrow(/backup disk is full/);
    expect(fs.snapshot()).toEqual({ 'a.md': 'a0' });
  });

  it('FileWorkspaceCheckpointStore keeps one JSON file per session and a new WorkspaceCheckpoints on the same dir rewinds after a restart', async () => {
    const t = tree({ 'notes.md': '# Notes\n' });
    const dir = join(t.dir, 'checkpoints');
    const first = new WorkspaceCheckpoints(new NodeWorkspace({ root: t.root }), { store: new FileWorkspaceCheckpointStore(dir) });
    const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root: t.root }), { checkpoints: first }).map((x) => [x.name, x]));
    await tools.edit_file.execute({ path: 'notes.md', old_string: '# Notes', new_string: '# Plan' }, { sessionId: 'alpha', turn: 0 });
    await tools.write_file.execute({ path: 'todo.md', content: '- ship it\n' }, { sessionId: 'alpha', turn: 1 });
    await tools.write_file.execute({ path: 'other.md', content: 'o\n' }, { sessionId: '../../escape/Beta', turn: 0 });

    const names = readdirSync(dir);
    expect(names).toHaveLength(2);
    expect(names.every((n) => n.endsWith('.json') && !n.startsWith('.'))).toBe(true);
    for (const n of names) expect(typeof JSON.parse(readFileSync(join(dir, n), 'utf8'))).toBe('object');
    expect(names.map((n) => readFileSync(join(dir, n), 'utf8')).join('\n')).toContain('# Notes');
    expect(readdirSync(t.dir).sort()).toEqual(['checkpoints', 'root']);
    const store = new FileWorkspaceCheckpointStore(dir);
    expect(store.dir).toBe(dir);
    expect(await store.load('nobody')).toBeUndefined();

    // The restart: everything new, only the directory is shared.
    const fs = new NodeWorkspace({ root: t.root });
    const second = new WorkspaceCheckpoints(fs, { store: new FileWorkspaceCheckpointStore(dir) });
    expect(await second.list({ sessionId: 'alpha' })).toEqual([{ turn: 0, paths: ['notes.md'] }, { turn: 1, paths: ['todo.md'] }]);
    expect(await second.rewind(0, { sessionId: 'alpha', dryRun: true })).toEqual({ dryRun: true, restored: ['notes.md'], deleted: ['todo.md'], skipped: [] });
    expect(await second.rewind(0, { sessionId: 'alpha' })).toEqual({ dryRun: false, restored: ['notes.md'], deleted: ['todo.md'], skipped: [] });
    expect(readFileSync(join(t.root, 'notes.md'), 'utf8')).toBe('# Notes\n');
    expect(existsSync(join(t.root, 'todo.md'))).toBe(false);

    // The rewind was saved: a third instance has nothing left to undo for alpha.
    const third = new WorkspaceCheckpoints(fs, { store: new FileWorkspaceCheckpointStore(dir) });
    expect(await third.list({ sessionId: 'alpha' })).toEqual([]);
    await third.clear({ sessionId: '../../escape/Beta' });
    expect(await third.list({ sessionId: '../../escape/Beta' })).toEqual([]);
    expect(readdirSync(dir).filter((n) => !n.startsWith('.'))).toHaveLength(1);
    expect(readdirSync(dir).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// A real crash: a child process with a FileWorkspaceCheckpointStore, kill -9ed between the backup
// and the write (or between the write and its confirmation).

const CHILD = `
const { NodeWorkspace, WorkspaceCheckpoints, FileWorkspaceCheckpointStore, createFsTools } = require(${JSON.stringify(INDEX)});
const plan = JSON.parse(process.env.CORRAL_PLAN);
const file = new FileWorkspaceCheckpointStore(plan.store);
let hangOnSave = 0; // hang on the n-th save of the current call (0: never)
const store = {
  load: (id) => file.load(id),
  delete: (id) => file.delete(id),
  async save(id, data) {
    await file.save(id, data); // the real, durable save
    if (hangOnSave > 0 && --hangOnSave === 0) {
      process.stdout.write('saved\\n');
      setInterval(() => {}, 1 << 30);
      await new Promise(() => {});
    }
  },
};
const fs = new NodeWorkspace({ root: plan.root });
const checkpoints = new WorkspaceCheckpoints(fs, { store });
const tools = Object.fromEntries(createFsTools(fs, { checkpoints }).map((t) => [t.name, t]));
(async () => {
  for (const c of plan.calls ?? []) {
    hangOnSave = c.hangOnSave ?? 0;
    const result = await tools[c.tool].execute(c.args, c.ctx);
    process.stdout.write(JSON.stringify({ result }) + '\\n');
  }
  if (plan.rewind) {
    const list = await checkpoints.list({ sessionId: plan.rewind.sessionId });
    const report = await checkpoints.rewind(plan.rewind.toTurn, { sessionId: plan.rewind.sessionId });
    process.stdout.write(JSON.stringify({ list, report }) + '\\n');
  }
  process.stdout.write('done\\n');
})().catch((e) => { process.stderr.write(String(e && e.stack || e) + '\\n'); process.exit(1); });
`;

/** Runs the child with `plan`; kills it with SIGKILL as soon as it prints "saved". */
function runChild(plan, onSaved = () => {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', CHILD], { env: { ...process.env, CORRAL_PLAN: JSON.stringify(plan) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let atKill;
    child.stdout.on('data', (d) => {
      out += d;
      if (atKill === undefined && out.split('\n').includes('saved')) {
        atKill = onSaved();
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const lines = out.split('\n').filter(Boolean);
      resolve({ code, signal, lines, json: lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)), stderr: err, atKill });
    });
  });
}

describe('checkpoints survive a crash', () => {
  const crashSetup = () => {
    const t = tree({ 'notes.md': 'status: draft\n', 'log.md': 'log v0\n' });
    return { t, store: join(t.dir, 'checkpoints'), root: t.root, read: (p) => readFileSync(join(t.root, p), 'utf8') };
  };
  const ctx = { sessionId: 'crash-session', turn: 0 };
  const warmUp = { tool: 'write_file', args: { path: 'log.md', content: 'log v1\n' }, ctx };
  const target = { tool: 'edit_file', args: { path: 'notes.md', old_string: 'status: draft', new_string: 'status: final' }, ctx };

  it('a process killed between the backup and the write leaves the old content, and a new process finds nothing to undo for that file', async () => {
    const c = crashSetup();
    const crashed = await runChild({ root: c.root, store: c.store, calls: [warmUp, { ...target, hangOnSave: 1 }] }, () => c.read('notes.md'));
    expect(crashed.signal).toBe('SIGKILL');
    expect(crashed.lines).toEqual([expect.stringContaining('"result"'), 'saved']);
    expect(crashed.atKill).toBe('status: draft\n'); // killed after the backup, before the write
    expect(c.read('notes.md')).toBe('status: draft\n');
    expect(c.read('log.md')).toBe('log v1\n');

    const rewound = await runChild({ root: c.root, store: c.store, rewind: { sessionId: ctx.sessionId, toTurn: 0 } });
    expect(rewound.stderr).toBe('');
    expect(rewound.code).toBe(0);
    const [{ list, report }] = rewound.json;
    // The backup survived the kill …
    expect(list).toEqual([{ turn: 0, paths: ['log.md', 'notes.md'] }]);
    // … and rewind treats the never-written file as nothing to undo.
    expect(report).toEqual({ dryRun: false, restored: ['log.md'], deleted: [], skipped: [] });
    expect(c.read('notes.md')).toBe('status: draft\n');
    expect(c.read('log.md')).toBe('log v0\n');
  });

  it('a tool call re-run after a crash before its write keeps the first backup, and rewind restores the content from before the first attempt', async () => {
    const c = crashSetup();
    const crashed = await runChild({ root: c.root, store: c.store, calls: [{ ...target, hangOnSave: 1 }] }, () => c.read('notes.md'));
    expect(crashed.signal).toBe('SIGKILL');
    expect(crashed.atKill).toBe('status: draft\n');

    const resumed = await runChild({ root: c.root, store: c.store, calls: [target] });
    expect(resumed.stderr).toBe('');
    expect(resumed.json).toEqual([{ result: expect.stringMatching(/^Edited notes\.md/) }]);
    expect(c.read('notes.md')).toBe('status: final\n');

    const checkpoints = new WorkspaceCheckpoints(new NodeWorkspace({ root: c.root }), { store: new FileWorkspaceCheckpointStore(c.store) });
    expect(await checkpoints.list({ sessionId: ctx.sessionId })).toEqual([{ turn: 0, paths: ['notes.md'] }]);
    expect(await checkpoints.rewind(0, { sessionId: ctx.sessionId })).toEqual({ dryRun: false, restored: ['notes.md'], deleted: [], skipped: [] });
    expect(c.read('notes.md')).toBe('status: draft\n');
  });

  it("a tool call re-run after a crash between its write and the write's confirmation keeps the first backup, so rewind restores the content from before the first attempt", async () => {
    const c = crashSetup();
    // The second save of the call is the one after the write: the file already holds the agent's content.
    const crashed = await runChild({ root: c.root, store: c.store, calls: [warmUp, { ...target, hangOnSave: 2 }] }, () => c.read('notes.md'));
    expect(crashed.signal).toBe('SIGKILL');
    expect(crashed.atKill).toBe('status: final\n');

    // Resume: the same call runs again, finds the edit applied and writes nothing.
    const resumed = await runChild({ root: c.root, store: c.store, calls: [target] });
    expect(resumed.stderr).toBe('');
    expect(resumed.json).toEqual([{ result: expect.stringMatching(/already applied/i) }]);
    expect(c.read('notes.md')).toBe('status: final\n');

    const rewound = await runChild({ root: c.root, store: c.store, rewind: { sessionId: ctx.sessionId, toTurn: 0 } });
    expect(rewound.stderr).toBe('');
    expect(rewound.json[0].report).toEqual({ dryRun: false, restored: ['log.md', 'notes.md'], deleted: [], skipped: [] });
    expect(c.read('notes.md')).toBe('status: draft\n');
    expect(c.read('log.md')).toBe('log v0\n');
  });

  it('a process killed right after the write, before confirming it, can still be rewound without a re-run', async () => {
    const c = crashSetup();
    const crashed = await runChild({ root: c.root, store: c.store, calls: [{ tool: 'write_file', args: { path: 'fresh.md', content: 'new file\n' }, ctx, hangOnSave: 2 }, target] }, () => c.read('fresh.md'));
    expect(crashed.signal).toBe('SIGKILL');
    expect(crashed.atKill).toBe('new file\n');
    const checkpoints = new WorkspaceCheckpoints(new NodeWorkspace({ root: c.root }), { store: new FileWorkspaceCheckpointStore(c.store) });
    expect(await checkpoints.rewind(0, { sessionId: ctx.sessionId, dryRun: true })).toEqual({ dryRun: true, restored: [], deleted: ['fresh.md'], skipped: [] });
    expect(await checkpoints.rewind(0, { sessionId: ctx.sessionId })).toEqual({ dryRun: false, restored: [], deleted: ['fresh.md'], skipped: [] });
    expect(existsSync(join(c.root, 'fresh.md'))).toBe(false);
    expect(c.read('notes.md')).toBe('status: draft\n');
  });
});

describe('sessions are independent', () => {
  it('a store that never settles for one session blocks only that session', async () => {
    const saved = new Map();
    const store = {
      async load(sessionId) { if (sessionId === 'stuck') return new Promise(() => {}); return saved.get(sessionId); },
      async save(sessionId, data) { saved.set(sessionId, data); },
      async delete(sessionId) { saved.delete(sessionId); },
    };
    const fs = new MemoryWorkspace({ files: { 'a.md': 'a\n' } });
    const checkpoints = new WorkspaceCheckpoints(fs, { store });
    const tools = Object.fromEntries(createFsTools(fs, { checkpoints }).map((x) => [x.name, x]));
    let stuckSettled = false;
    tools.write_file.execute({ path: 'a.md', content: 'stuck\n' }, { sessionId: 'stuck', turn: 0 }).finally(() => { stuckSettled = true; });
    await tools.write_file.execute({ path: 'b.md', content: 'b\n' }, { sessionId: 'free', turn: 0 });
    expect(await checkpoints.list({ sessionId: 'free' })).toEqual([{ turn: 0, paths: ['b.md'] }]);
    expect(await checkpoints.rewind(0, { sessionId: 'free' })).toMatchObject({ deleted: ['b.md'] });
    expect(stuckSettled).toBe(false);
  });
});
