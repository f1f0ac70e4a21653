// NodeWorkspace as an FsProvider on real temp directories: confinement by realpath, links,
// atomic writes, permission bits.
import { describe, it, expect, afterEach } from 'vitest';
import { symlinkSync, writeFileSync, readFileSync, existsSync, chmodSync, statSync, mkdirSync, readdirSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { NodeWorkspace, ConfigurationError, createFsTools } from 'corral';
import { tempTree, linksWork, posixModes } from './helpers.mjs';

let t;
afterEach(() => t?.cleanup());
const tool = (tools, name) => tools.find((x) => x.name === name);

describe('NodeWorkspace root', () => {
  it.skipIf(!linksWork)('resolves root with realpath and keeps the real absolute path', () => {
    t = tempTree({ 'a.txt': 'a' });
    symlinkSync(t.root, join(t.dir, 'link'));
    const ws = new NodeWorkspace({ root: join(t.dir, 'link') });
    expect(ws.root).toBe(t.root);
  });

  it('throws ConfigurationError for a missing, empty or non-directory root and never creates it', () => {
    t = tempTree({ 'file.txt': 'x' });
    for (const root of [join(t.dir, 'missing'), '', join(t.root, 'file.txt')]) {
      expect(() => new NodeWorkspace({ root })).toThrow(ConfigurationError);
    }
    expect(() => new NodeWorkspace({})).toThrow(ConfigurationError);
    expect(existsSync(join(t.dir, 'missing'))).toBe(false);
  });
});

describe('confinement', () => {
  it('reads and writes inside the root, creating parent directories', async () => {
    t = tempTree({ 'src/a.ts': 'a' });
    const ws = new NodeWorkspace({ root: t.root });
    expect(await ws.readFile('src/a.ts')).toBe('a');
    await ws.writeFile('deep/new/b.ts', 'b');
    expect(readFileSync(join(t.root, 'deep/new/b.ts'), 'utf8')).toBe('b');
    expect(await ws.stat('deep')).toEqual({ type: 'directory', size: expect.any(Number) });
    expect(await ws.stat('nope')).toBeUndefined();
    expect((await ws.readdir('.')).map((e) => e.name)).toEqual(['deep', 'src']);
  });

  it('refuses paths that climb out, and messages name workspace paths only', async () => {
    t = tempTree({});
    writeFileSync(join(t.dir, 'secret.txt'), 'secret');
    const ws = new NodeWorkspace({ root: t.root });
    for (const p of ['../secret.txt', `${t.dir}/secret.txt`, 'a/../../secret.txt']) {
      const e = await ws.readFile(p).catch((err) => err);
      expect(e.code, p).toBe('OutsideWorkspace');
      expect(e.message).not.toContain(t.root);
    }
  });

  it.skipIf(!linksWork)('a link inside the root that points outside is refused for reads and for new files under it', async () => {
    t = tempTree({});
    writeFileSync(join(t.dir, 'secret.txt'), 'secret');
    symlinkSync(t.dir, join(t.root, 'escape-link'));
    symlinkSync(join(t.dir, 'secret.txt'), join(t.root, 'secret-link'));
    const ws = new NodeWorkspace({ root: t.root });
    await expect(ws.readFile('escape-link/secret.txt')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(ws.readFile('secret-link')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(ws.writeFile('escape-link/new.txt', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(ws.writeFile('escape-link/sub/new.txt', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(existsSync(join(t.dir, 'new.txt'))).toBe(false);
    expect(existsSync(join(t.dir, 'sub'))).toBe(false);
    const tools = createFsTools(ws);
    await expect(tool(tools, 'read_file').execute({ path: 'escape-link/secret.txt' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
  });

  it.skipIf(!linksWork)('a link whose target does not exist is never followed', async () => {
    t = tempTree({});
    symlinkSync(join(t.dir, 'created-outside.txt'), join(t.root, 'dangling'));
    const ws = new NodeWorkspace({ root: t.root });
    await expect(ws.writeFile('dangling', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(existsSync(join(t.dir, 'created-outside.txt'))).toBe(false);
  });

  it.skipIf(!linksWork)('a link inside the root to a file inside the root works', async () => {
    t = tempTree({ 'src/a.ts': 'hello' });
    symlinkSync('src/a.ts', join(t.root, 'alias.ts'));
    const ws = new NodeWorkspace({ root: t.root });
    expect(await ws.readFile('alias.ts')).toBe('hello');
    expect(await ws.realPath('alias.ts')).toBe('src/a.ts');
  });

  it.skipIf(!linksWork)('rm on a link removes the link and leaves its target alone', async () => {
    t = tempTree({});
    writeFileSync(join(t.dir, 'target.txt'), 'keep');
    mkdirSync(join(t.dir, 'tdir'));
    symlinkSync(join(t.dir, 'target.txt'), join(t.root, 'l1'));
    symlinkSync(join(t.dir, 'tdir'), join(t.root, 'l2'));
    const ws = new NodeWorkspace({ root: t.root });
    await ws.rm('l1');
    await ws.rm('l2', { recursive: true });
    expect(readdirSync(t.root)).toEqual([]);
    expect(readFileSync(join(t.dir, 'target.txt'), 'utf8')).toBe('keep');
    expect(existsSync(join(t.dir, 'tdir'))).toBe(true);
  });

  it.skipIf(!linksWork)('links into .git are refused for every file tool', async () => {
    t = tempTree({ '.git/config': '[http] extraheader = AUTHORIZATION: basic xyz\n', '.git/hooks/pre-commit': '#!/bin/sh\n', 'a.txt': 'a\n' });
    symlinkSync('.git', join(t.root, 'gitj'));
    symlinkSync('.git/hooks', join(t.root, 'hooks'));
    symlinkSync('.git/config', join(t.root, 'cfg'));
    const tools = createFsTools(new NodeWorkspace({ root: t.root }));
    const denied = { name: 'WorkspaceError', code: 'Denied' };
    await expect(tool(tools, 'read_file').execute({ path: 'gitj/config' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'read_file').execute({ path: 'cfg' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'edit_file').execute({ path: 'gitj/config', old_string: 'basic', new_string: 'x' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'write_file').execute({ path: 'gitj/PWNED', content: 'x' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'write_file').execute({ path: 'hooks/post-checkout', content: 'x' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'list_dir').execute({ path: 'gitj' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'glob').execute({ pattern: '*', path: 'gitj' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'grep').execute({ pattern: 'basic', path: 'gitj' })).rejects.toMatchObject(denied);
    await expect(tool(tools, 'grep').execute({ pattern: 'basic', path: 'gitj/config' })).rejects.toMatchObject(denied);
    expect(existsSync(join(t.root, '.git/PWNED'))).toBe(false);
    expect(await tool(tools, 'grep').execute({ pattern: 'basic' })).toBe('No matches found.');
    expect(readFileSync(join(t.root, '.git/config'), 'utf8')).toContain('basic xyz');
  });
});

describe('atomic writes and permission bits', () => {
  it.skipIf(!posixModes)('a replaced file keeps its permission bits and no temp file is left', async () => {
    t = tempTree({ 'run.sh': '#!/bin/sh\necho 1\n' });
    chmodSync(join(t.root, 'run.sh'), 0o750);
    const ws = new NodeWorkspace({ root: t.root });
    await ws.writeFile('run.sh', '#!/bin/sh\necho 2\n');
    expect(statSync(join(t.root, 'run.sh')).mode & 0o777).toBe(0o750);
    expect(await ws.getMode('run.sh')).toBe(0o750);
    expect(readdirSync(t.root)).toEqual(['run.sh']);
  });

  it.skipIf(!posixModes)('a read-only file is refused by its mode bits, even for root, and left as it was', async () => {
    t = tempTree({ 'ro.txt': 'original' });
    chmodSync(join(t.root, 'ro.txt'), 0o444);
    const ws = new NodeWorkspace({ root: t.root });
    await expect(ws.writeFile('ro.txt', 'changed')).rejects.toMatchObject({ code: 'ReadOnly' });
    const tools = createFsTools(ws);
    await expect(tool(tools, 'edit_file').execute({ path: 'ro.txt', old_string: 'original', new_string: 'x' })).rejects.toMatchObject({ code: 'ReadOnly' });
    expect(readFileSync(join(t.root, 'ro.txt'), 'utf8')).toBe('original');
    await ws.chmod('ro.txt', 0o644);
    await ws.writeFile('ro.txt', 'now writable');
    expect(readFileSync(join(t.root, 'ro.txt'), 'utf8')).toBe('now writable');
  });

  it('a write killed mid-way leaves the old content or the new one, never a mix', async () => {
    t = tempTree({});
    const A = 'A'.repeat(8 * 1024 * 1024);
    const B = 'B'.repeat(8 * 1024 * 1024);
    writeFileSync(join(t.root, 'big.txt'), A);
    const script = `
      const { NodeWorkspace } = require(${JSON.stringify(join(process.cwd(), 'js', 'index.js'))});
      const ws = new NodeWorkspace({ root: ${JSON.stringify(t.root)} });
      const A = 'A'.repeat(8 * 1024 * 1024), B = 'B'.repeat(8 * 1024 * 1024);
      (async () => { process.stdout.write('ready\\n'); for (let i = 0; ; i++) await ws.writeFile('big.txt', i % 2 ? A : B); })();
    `;
    for (let round = 0; round < 6; round++) {
      const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise((r) => child.stdout.once('data', r));
      await new Promise((r) => setTimeout(r, 40 + round * 37));
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const content = readFileSync(join(t.root, 'big.txt'), 'utf8');
      expect(content === A || content === B, `round ${round}: length ${content.length}`).toBe(true);
    }
    // Temp files of killed writers are hidden names next to the target; the target itself is whole.
    expect(lstatSync(join(t.root, 'big.txt')).isFile()).toBe(true);
  });
});
