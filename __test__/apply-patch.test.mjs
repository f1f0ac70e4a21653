// apply_patch through the public API, over every kind of provider: codex's envelope applied all
// or nothing, under the file tools' path rules, and undone by a rewind.
import { describe, it, expect, afterAll } from 'vitest';
import { chmodSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigurationError, MemoryWorkspace, NodeWorkspace, WorkspaceCheckpoints, createFsTools } from 'corral';
import { filesOnDisk as onDisk, jsProvider, tempTree } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

const providers = {
  NodeWorkspace: (files) => { const t = tempTree(files); trees.push(t); return { fs: new NodeWorkspace({ root: t.root }), files: () => onDisk(t.root), root: t.root }; },
  MemoryWorkspace: (files) => { const fs = new MemoryWorkspace({ files }); return { fs, files: () => fs.snapshot() }; },
  'a JS provider': (files) => { const t = tempTree(files); trees.push(t); return { fs: jsProvider(t.root), files: () => onDisk(t.root), root: t.root }; },
};

const patchTool = (fs, options = {}) => createFsTools(fs, { include: ['apply_patch'], ...options }).find((t) => t.name === 'apply_patch');

const PATCH = [
  '*** Begin Patch',
  '*** Add File: docs/new.md',
  '+# New',
  '*** Update File: src/app.js',
  '@@ function main() {',
  '-  start(3000);',
  '+  start(Number(process.env.PORT));',
  '*** Update File: src/old-name.js',
  '*** Move to: src/new-name.js',
  '-export const x = 1;',
  '+export const x = 2;',
  '*** Delete File: tmp/scratch.txt',
  '*** End Patch',
].join('\n');

const BEFORE = {
  'src/app.js': 'function setup() {\n  start(3000);\n}\nfunction main() {\n  start(3000);\n}\n',
  'src/old-name.js': 'export const x = 1;\n',
  'tmp/scratch.txt': 'scratch\n',
};

for (const [label, make] of Object.entries(providers)) {
  describe(`apply_patch over ${label}`, () => {
    it('adds, updates after an anchor, moves and deletes, and the tree is exactly the expected one', async () => {
      const { fs, files } = make(BEFORE);
      const out = await patchTool(fs).execute({ input: PATCH });
      expect(out).toBe('Success. Updated the following files:\nA docs/new.md\nM src/app.js\nM src/new-name.js\nD tmp/scratch.txt');
      expect(files()).toEqual({
        'docs/new.md': '# New\n',
        'src/app.js': 'function setup() {\n  start(3000);\n}\nfunction main() {\n  start(Number(process.env.PORT));\n}\n',
        'src/new-name.js': 'export const x = 2;\n',
      });
    });

    it('a patch whose second file does not match changes no file', async () => {
      const { fs, files } = make(BEFORE);
      const input = '*** Begin Patch\n*** Update File: src/app.js\n-  start(3000);\n+  go();\n*** Update File: src/old-name.js\n-export const y = 9;\n+z\n*** End Patch';
      await expect(patchTool(fs).execute({ input })).rejects.toMatchObject({
        name: 'WorkspaceError', code: 'PatchMismatch', message: 'Failed to find expected lines in src/old-name.js:\nexport const y = 9;',
      });
      expect(files()).toEqual(BEFORE);
    });

    it('a rewind of the turn undoes the whole patch', async () => {
      const { fs, files } = make(BEFORE);
      const checkpoints = new WorkspaceCheckpoints(fs);
      await patchTool(fs, { checkpoints }).execute({ input: PATCH }, { sessionId: 's', turn: 3 });
      const report = await checkpoints.rewind(3, { sessionId: 's' });
      expect(report.skipped).toEqual([]);
      expect(files()).toEqual(BEFORE);
    });
  });
}

describe('apply_patch: refusals', () => {
  it('a grammar error is InvalidPatch naming the line, and nothing changes', async () => {
    const fs = new MemoryWorkspace({ files: { 'a.txt': 'a\n' } });
    await expect(patchTool(fs).execute({ input: '*** Begin Patch\n*** Change File: a.txt\n*** End Patch' }))
      .rejects.toMatchObject({ code: 'InvalidPatch', message: expect.stringMatching(/^invalid hunk at line 2, '\*\*\* Change File: a\.txt' is not a valid hunk header/) });
    expect(fs.snapshot()).toEqual({ 'a.txt': 'a\n' });
  });

  it('a path into .git or out of the root is refused before any file is written', async () => {
    const fs = new MemoryWorkspace({ files: { 'a.txt': 'a\n' } });
    const tool = patchTool(fs);
    await expect(tool.execute({ input: '*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Add File: .git/hooks/pre-commit\n+evil\n*** End Patch' }))
      .rejects.toMatchObject({ code: 'Denied' });
    await expect(tool.execute({ input: '*** Begin Patch\n*** Update File: a.txt\n-a\n+b\n*** Add File: ../escape.txt\n+x\n*** End Patch' }))
      .rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(fs.snapshot()).toEqual({ 'a.txt': 'a\n' });
  });

  it('readOnly leaves apply_patch out, and include names only tools there are', () => {
    const fs = new MemoryWorkspace();
    expect(createFsTools(fs, { readOnly: true, include: ['apply_patch'] }).map((t) => t.name)).toEqual(['read_file', 'list_dir', 'glob', 'grep']);
    expect(createFsTools(fs, { include: ['apply_patch'] }).map((t) => t.name).at(-1)).toBe('apply_patch');
    expect(() => createFsTools(fs, { include: ['apply_patches'] })).toThrow(ConfigurationError);
    expect(() => createFsTools(fs, { include: ['apply_patches'] })).toThrow("createFsTools: include names no tool 'apply_patches'; did you mean apply_patch?");
  });

  it.skipIf(process.platform === 'win32')('an updated file keeps its permission bits on disk', async () => {
    const { fs, root } = providers.NodeWorkspace({ 'run.sh': '#!/bin/sh\necho old\n' });
    chmodSync(join(root, 'run.sh'), 0o755);
    await patchTool(fs).execute({ input: '*** Begin Patch\n*** Update File: run.sh\n-echo old\n+echo new\n*** End Patch' });
    expect(readFileSync(join(root, 'run.sh'), 'utf8')).toBe('#!/bin/sh\necho new\n');
    expect(statSync(join(root, 'run.sh')).mode & 0o777).toBe(0o755);
  });
});
