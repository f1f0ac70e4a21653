// Every surface takes the file tools' path: the attacks refused through createFsTools, run again
// through toAiSdkSandbox, corralSandboxClient's sessions (file API, manifest, editor) and
// createEditor. Before, each adapter decided file rules in JavaScript, and `.git` was writable
// through all of them: a written core.fsmonitor then ran a refused command through an allowed
// `git status`.
import { describe, it, expect } from 'vitest';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Manifest } from '@openai/agents/sandbox';
import { NodeWorkspace, WorkspaceCheckpoints, createShellTool } from 'corral';
import { toAiSdkSandbox } from 'corral/ai-sdk';
import { corralSandboxClient, createEditor } from 'corral/openai-agents';
import { treesForFile, linksWork } from './helpers.mjs';

const tree = treesForFile();
const win = process.platform === 'win32';
/** Windows under Wine has no git: there a repository's files are written as `git init` writes them. */
const noGit = win && spawnSync('git', ['--version']).error !== undefined;

/** A workspace that is a git repository, with `a.txt`. */
function repo() {
  const t = tree(noGit
    ? { 'a.txt': 'a\n', '.git/HEAD': 'ref: refs/heads/main\n', '.git/config': '[core]\n\trepositoryformatversion = 0\n\tbare = false\n', '.git/description': '', '.git/hooks/pre-commit.sample': '#!/bin/sh\n', '.git/info/exclude': '', '.git/objects/info/.keep': '', '.git/refs/heads/.keep': '' }
    : { 'a.txt': 'a\n' });
  if (!noGit) execFileSync('git', ['init', '-q', t.root]);
  return { t, ws: new NodeWorkspace({ root: t.root }) };
}

const FSMONITOR = (marker) => `[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch ${marker}\n`;

/** Each adapter as the operations the attacks use: write, create under .git/hooks, move into .git, delete, read. */
const surfaces = {
  toAiSdkSandbox: async (ws, files) => {
    const s = toAiSdkSandbox(ws, files ? { files } : undefined);
    return {
      write: (p, text) => s.writeTextFile({ path: `/workspace/${p}`, content: text }),
      create: (p, text) => s.writeBinaryFile({ path: p, content: Buffer.from(text) }),
      moveInto: (p, text) => s.writeFile({ path: p, content: new Blob([text]).stream() }),
      remove: (p) => s.deleteFile({ path: p }),
      read: (p) => s.readTextFile({ path: p }),
    };
  },
  'corralSandboxClient session': async (ws, files) => {
    const session = await corralSandboxClient({ fs: ws, ...(files ? { files } : {}) }).create();
    const editor = session.createEditor();
    return {
      write: (p, text) => editor.createFile({ path: p, diff: text.split('\n').map((l) => `+${l}`).join('\n') }),
      create: (p, text) => editor.createFile({ path: p, diff: text.split('\n').map((l) => `+${l}`).join('\n') }),
      moveInto: (p) => editor.updateFile({ path: 'a.txt', diff: '@@\n-a\n+b\n', moveTo: p }),
      remove: (p) => editor.deleteFile({ path: p }),
      read: (p) => session.readFile({ path: p }),
    };
  },
  createEditor: async (ws, files) => {
    const editor = createEditor(ws, files ? { files } : undefined);
    return {
      write: (p, text) => editor.createFile({ path: p, diff: text.split('\n').map((l) => `+${l}`).join('\n') }),
      create: (p, text) => editor.createFile({ path: p, diff: text.split('\n').map((l) => `+${l}`).join('\n') }),
      moveInto: (p) => editor.updateFile({ path: 'a.txt', diff: '@@\n-a\n+b\n', moveTo: p }),
      remove: (p) => editor.deleteFile({ path: p }),
      read: async () => { throw Object.assign(new Error('no read'), { code: 'Denied' }); },
    };
  },
};

describe.each(Object.keys(surfaces))('%s takes the file tools\' path', (name) => {
  it('cannot write, plant, move into, delete or read .git, and the host git runs nothing a model wrote', async () => {
    const { t, ws } = repo();
    const s = await surfaces[name](ws);
    const marker = join(t.dir, 'PWNED');
    const config = readFileSync(join(t.root, '.git/config'), 'utf8');
    for (const attempt of [
      () => s.write('.git/config', FSMONITOR(marker)),
      () => s.create('.git/hooks/post-checkout', '#!/bin/sh\ntouch x\n'),
      () => s.moveInto('.git/hooks/pre-commit', '#!/bin/sh\n'),
      () => s.remove('.git/HEAD'),
      () => s.read('.git/config'),
      () => s.write('sub/../.git/config', FSMONITOR(marker)),
    ]) {
      await expect(attempt()).rejects.toMatchObject({ code: 'Denied' });
    }
    expect(readFileSync(join(t.root, '.git/config'), 'utf8')).toBe(config);
    expect(existsSync(join(t.root, '.git/hooks/post-checkout'))).toBe(false);
    expect(existsSync(join(t.root, '.git/HEAD'))).toBe(true);
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('a\n');
    // An allowed `git status` then runs nothing the model wrote.
    const shell = createShellTool(ws, { allow: ['git status'] });
    await shell.execute({ command: 'git status' });
    expect(existsSync(marker)).toBe(false);
  });

  it.skipIf(!linksWork)('a link to .git, or out of the workspace, leads nowhere', async () => {
    const { t, ws } = repo();
    symlinkSync('.git', join(t.root, 'g'));
    mkdirSync(join(t.dir, 'outside'));
    symlinkSync(join(t.dir, 'outside'), join(t.root, 'out'));
    const s = await surfaces[name](ws);
    await expect(s.write('g/config', 'x')).rejects.toMatchObject({ code: 'Denied' });
    await expect(s.write('../escape.txt', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(s.create('out/x.txt', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(existsSync(join(t.dir, 'escape.txt')) || existsSync(join(t.dir, 'outside/x.txt'))).toBe(false);
  });

  it('files: readOnly, protect and requireRead hold as for createFsTools', async () => {
    const { ws } = repo();
    const ro = await surfaces[name](ws, { readOnly: true });
    await expect(ro.create('new.txt', 'x')).rejects.toMatchObject({ code: 'ReadOnly' });
    const pr = await surfaces[name](ws, { protect: ['*.lock'] });
    await expect(pr.create('x.lock', 'x')).rejects.toMatchObject({ code: 'Protected' });
    const rr = await surfaces[name](ws, { requireRead: true });
    await expect(rr.remove('a.txt')).rejects.toMatchObject({ code: 'NotRead' });
  });
});

describe('an adapter\'s changes are recorded and undone like the file tools\'', () => {
  it('toAiSdkSandbox with files.checkpoints and a turn function: a write is rewound, onEdit hears it', async () => {
    const t = tree({ 'a.txt': 'one\n' });
    const ws = new NodeWorkspace({ root: t.root });
    const checkpoints = new WorkspaceCheckpoints(ws);
    const edits = [];
    let turn = 1;
    const s = toAiSdkSandbox(ws, { files: { checkpoints, onEdit: (e) => edits.push(e) }, sessionId: 's1', turn: () => turn });
    await s.writeTextFile({ path: 'a.txt', content: 'two\n' });
    turn = 2;
    await s.writeTextFile({ path: 'b.txt', content: 'new\n' });
    await new Promise((r) => setTimeout(r, 50));
    expect(edits.map((e) => [e.path, e.sessionId, e.turn])).toEqual([['a.txt', 's1', 1], ['b.txt', 's1', 2]]);
    await checkpoints.rewind(1, { sessionId: 's1' });
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('one\n');
    expect(existsSync(join(t.root, 'b.txt'))).toBe(false);
  });

  it('a manifest entry under .git/hooks is refused before the session exists', async () => {
    const { t, ws } = repo();
    const client = corralSandboxClient({ fs: ws });
    await expect(client.create({ manifest: new Manifest({ entries: { '.git/hooks/post-checkout': { type: 'file', content: '#!/bin/sh\n' } } }) })).rejects.toMatchObject({ code: 'Denied' });
    expect(existsSync(join(t.root, '.git/hooks/post-checkout'))).toBe(false);
    writeFileSync(join(t.root, 'keep.txt'), 'k');
  });

  it('a command cannot start in .git or a file, and every session names listed paths as the core does', async () => {
    const { t, ws } = repo();
    // A colon is no plain name on Windows (it names a drive or a stream): a space stands in there.
    const odd = win ? 'ab c' : 'ab:c';
    const [ok, pwd] = win ? ['ver', 'cd'] : ['true', 'pwd'];
    mkdirSync(join(t.root, odd));
    writeFileSync(join(t.root, odd, 'f.txt'), 'f');
    const ai = toAiSdkSandbox(ws);
    const session = await corralSandboxClient({ fs: ws }).create();
    await expect(ai.run({ command: ok, workingDirectory: '.git' })).rejects.toMatchObject({ code: 'Denied' });
    await expect(session.exec({ cmd: ok, workdir: '.git/hooks' })).rejects.toMatchObject({ code: 'Denied' });
    await expect(ai.run({ command: ok, workingDirectory: 'a.txt' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(session.exec({ cmd: ok, workdir: 'a.txt' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(session.exec({ cmd: ok, workdir: 'nope' })).rejects.toMatchObject({ code: 'NotFound' });
    expect((await ai.run({ command: pwd, workingDirectory: odd })).stdout.trim()).toBe(join(t.root, odd));
    // A name with a colon (a space on Windows) is a plain name: listed, under its workspace path.
    expect(await session.listDir({ path: odd })).toEqual([{ name: 'f.txt', path: `${odd}/f.txt`, type: 'file' }]);
    expect((await session.listDir({ path: '/workspace' })).map((e) => e.path).sort()).toEqual(['a.txt', odd]);
    const editor = session.createEditor();
    const moved = await editor.updateFile({ path: `${odd}/f.txt`, diff: '@@\n-f\n+g\n', moveTo: `/workspace/${odd}/./f.txt` });
    expect(moved.output).toBe(`Updated ${odd}/f.txt`);
    expect(readFileSync(join(t.root, odd, 'f.txt'), 'utf8')).toBe('g');
  });

  it('misspelled files options are a ConfigurationError naming the nearest key', () => {
    const { ws } = repo();
    expect(() => toAiSdkSandbox(ws, { files: { requireReed: true } })).toThrow(/requireRead/);
    expect(() => createEditor(ws, { files: { dney: [] } })).toThrow(/deny/);
  });
});
