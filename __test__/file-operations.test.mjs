// move_file, delete_file, make_dir, file_info and read_files, read_file's negative offset and
// list_dir's depth, through the public API over every kind of provider.
import { describe, it, expect, afterAll } from 'vitest';
import { MemoryWorkspace, NodeWorkspace, WorkspaceCheckpoints, createFsTools, workspacePrompt } from 'corral';
import { filesOnDisk as onDisk, jsProvider, tempTree } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

const providers = {
  NodeWorkspace: (files) => { const t = tempTree(files); trees.push(t); return { fs: new NodeWorkspace({ root: t.root }), files: () => onDisk(t.root) }; },
  MemoryWorkspace: (files) => { const fs = new MemoryWorkspace({ files }); return { fs, files: () => fs.snapshot() }; },
  'a JS provider': (files) => { const t = tempTree(files); trees.push(t); return { fs: jsProvider(t.root), files: () => onDisk(t.root) }; },
};

const ALL = ['move_file', 'delete_file', 'make_dir', 'file_info', 'read_files'];
const toolsOf = (fs, options = {}) => Object.fromEntries(createFsTools(fs, { include: ALL, ...options }).map((t) => [t.name, t]));

const BEFORE = { 'src/a.js': 'a\n', 'src/lib/b.js': 'b\n', 'notes.md': 'one\ntwo\nthree\n', 'old/x.txt': 'x\n' };

for (const [label, make] of Object.entries(providers)) {
  describe(`file operations over ${label}`, () => {
    it('moves a directory, deletes a tree, makes a directory, and a rewind puts it all back', async () => {
      const { fs, files } = make(BEFORE);
      const checkpoints = new WorkspaceCheckpoints(fs);
      const t = toolsOf(fs, { checkpoints });
      const ctx = { sessionId: 's', turn: 2 };
      expect(await t.move_file.execute({ from: 'src', to: 'pkg/src' }, ctx)).toBe('Moved src to pkg/src.');
      expect(await t.delete_file.execute({ path: 'old', recursive: true }, ctx)).toBe('Deleted old.');
      expect(await t.make_dir.execute({ path: 'build/out' }, ctx)).toBe('Created build/out/.');
      expect(files()).toEqual({ 'pkg/src/a.js': 'a\n', 'pkg/src/lib/b.js': 'b\n', 'notes.md': 'one\ntwo\nthree\n' });
      const report = await checkpoints.rewind(2, { sessionId: 's' });
      expect(report.skipped).toEqual([]);
      expect(files()).toEqual(BEFORE);
    });

    it('refuses an existing target, a directory without recursive and the root, with their codes', async () => {
      const { fs, files } = make(BEFORE);
      const t = toolsOf(fs);
      await expect(t.move_file.execute({ from: 'notes.md', to: 'src/a.js' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Exists' });
      await expect(t.delete_file.execute({ path: 'src' })).rejects.toMatchObject({ code: 'IsADirectory' });
      await expect(t.delete_file.execute({ path: '.', recursive: true })).rejects.toMatchObject({ code: 'InvalidArguments' });
      await expect(t.make_dir.execute({ path: 'notes.md' })).rejects.toMatchObject({ code: 'Exists' });
      await expect(t.move_file.execute({ from: 'notes.md', to: '../out.md' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
      expect(files()).toEqual(BEFORE);
      expect(await t.move_file.execute({ from: 'notes.md', to: 'src/a.js', overwrite: true })).toBe('Moved notes.md to src/a.js.');
    });

    it('reads many files, the tail of one, and lists with depth', async () => {
      const { fs } = make(BEFORE);
      const t = toolsOf(fs);
      expect(await t.read_files.execute({ paths: ['notes.md', 'nope.md'], offset: -1 })).toBe('==> notes.md <==\n 3\tthree\n\n==> nope.md <==\n(File not found: nope.md)');
      expect(await t.read_file.execute({ path: 'notes.md', offset: -2 })).toBe(' 2\ttwo\n 3\tthree');
      expect(await t.list_dir.execute({ path: 'src', depth: 2 })).toBe('a.js\nlib/\nlib/b.js');
      const info = await t.file_info.execute({ path: 'notes.md' });
      expect(info.split('\n').slice(0, 4)).toEqual(['path: notes.md', 'type: file', 'size: 14 bytes', 'lines: 3']);
    });
  });
}

it('readOnly keeps file_info and read_files and leaves out the tools that change files', () => {
  const names = createFsTools(new MemoryWorkspace(), { readOnly: true, include: ALL }).map((t) => t.name);
  expect(names).toEqual(['read_file', 'list_dir', 'glob', 'grep', 'file_info', 'read_files']);
});

it('file_info on disk says when the file was modified and its mode', async () => {
  const { fs } = providers.NodeWorkspace({ 'a.sh': 'echo\n' });
  const info = await toolsOf(fs).file_info.execute({ path: 'a.sh' });
  expect(info).toMatch(/\nmodified: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/);
  if (process.platform !== 'win32') expect(info).toMatch(/\nmode: 0[0-7]{3}$/);
});

describe('the stale-file guard (requireRead)', () => {
  for (const [label, make] of Object.entries(providers)) {
    it(`over ${label}: refuses an unread file, then a file changed since it was read, per session`, async () => {
      const { fs, files } = make({ 'a.js': 'let a = 1;\n' });
      const t = toolsOf(fs, { requireRead: true, include: ['apply_patch', 'read_files'] });
      const s = { sessionId: 's1' };
      await expect(t.edit_file.execute({ path: 'a.js', old_string: '1', new_string: '2' }, s))
        .rejects.toMatchObject({ name: 'WorkspaceError', code: 'NotRead', message: 'Read a.js first: it has not been read in this session.' });
      await t.read_files.execute({ paths: ['a.js'] }, s);
      await expect(t.write_file.execute({ path: 'a.js', content: 'x' }, { sessionId: 's2' })).rejects.toMatchObject({ code: 'NotRead' });
      expect(await t.edit_file.execute({ path: 'a.js', old_string: '1', new_string: '2' }, s)).toMatch(/^Edited a\.js/);
      // The session's own edit counts as a read; a change by someone else does not.
      await t.apply_patch.execute({ input: '*** Begin Patch\n*** Update File: a.js\n-let a = 2;\n+let a = 3;\n*** End Patch' }, s);
      await fs.writeFile('a.js', 'let a = 4;\n');
      await expect(t.edit_file.execute({ path: 'a.js', old_string: '4', new_string: '5' }, s))
        .rejects.toMatchObject({ code: 'Stale', message: 'a.js changed since it was last read. Read it again before editing it.' });
      expect(files()).toEqual({ 'a.js': 'let a = 4;\n' });
      await t.read_file.execute({ path: 'a.js', offset: -1 }, s);
      await t.edit_file.execute({ path: 'a.js', old_string: '4', new_string: '5' }, s);
      expect(files()).toEqual({ 'a.js': 'let a = 5;\n' });
    });
  }
});

describe('grep modes, pages and multiline', () => {
  for (const [label, make] of Object.entries(providers)) {
    it(`over ${label}: files, counts, pages that add up, and matches across lines`, async () => {
      const { fs } = make({ 'b.txt': 'x1\nno\nx2\n', 'a.txt': 'x\n', 'c/d.ts': 'call(\n  x,\n)\n' });
      const { grep } = toolsOf(fs);
      expect(await grep.execute({ pattern: 'x', output_mode: 'files_with_matches' })).toBe('a.txt\nb.txt\nc/d.ts');
      expect(await grep.execute({ pattern: 'x', output_mode: 'count' })).toBe('a.txt:1\nb.txt:2\nc/d.ts:1\n(4 matches in 3 files)');
      const first = await grep.execute({ pattern: 'x', limit: 3 });
      expect(first.split('\n').at(-1)).toBe('(Showing the first 3 of 4 matches. Narrow the pattern, path or glob, or continue with offset=3.)');
      const rest = await grep.execute({ pattern: 'x', limit: 3, offset: 3 });
      expect([...first.split('\n').slice(0, -1), ...rest.split('\n')]).toEqual((await grep.execute({ pattern: 'x' })).split('\n'));
      expect(await grep.execute({ pattern: 'call\\(\\s*x,\\s*\\)', multiline: true })).toBe('c/d.ts:1: call(');
    });
  }
});

it('workspacePrompt names the tools include added', () => {
  const prompt = workspacePrompt(createFsTools(new MemoryWorkspace(), { include: ['apply_patch', ...ALL] }));
  for (const name of ['read_file', 'apply_patch', 'move_file', 'delete_file', 'make_dir', 'file_info', 'read_files']) expect(prompt).toContain(name);
});
