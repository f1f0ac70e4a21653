// Undo for the shell through the public API: LinuxSandbox({ changes: 'overlay' }) runs each
// command over an overlay, a SandboxShell with checkpoints records what it changed, and rewind
// gives the tree back as it was. Reported as skipped where the kernel lacks namespaces.
import { describe, it, expect, afterEach } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LinuxSandbox, SandboxShell, NoopSandbox, NodeWorkspace, WorkspaceCheckpoints, createShellTool, ConfigurationError } from 'corral';
import { linuxSandboxUsable as usable, tempTree } from './helpers.mjs';

const cleanups = [];
afterEach(() => { while (cleanups.length) cleanups.pop()(); });
const tree = (files) => { const t = tempTree(files); cleanups.push(t.cleanup); return t; };

/** Every entry below `dir`: kind, permission bits, content or link target. */
function snapshot(dir, rel = '') {
  const out = {};
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const p = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, p));
    if (st.isSymbolicLink()) out[p] = `link ${readlinkSync(join(dir, p))}`;
    else if (st.isDirectory()) { out[p] = `dir ${(st.mode & 0o777).toString(8)}`; Object.assign(out, snapshot(dir, p)); }
    else out[p] = `file ${(st.mode & 0o777).toString(8)} ${readFileSync(join(dir, p)).toString('base64')}`;
  }
  return out;
}

describe('shell undo: options', () => {
  it("changes takes 'direct' or 'overlay', and checkpoints need an overlay adapter over the shell's cwd", () => {
    expect(() => new LinuxSandbox({ changes: 'layered' })).toThrow(ConfigurationError);
    expect(() => new LinuxSandbox({ changes: 'layered' })).toThrow(/changes must be 'direct' or 'overlay'/);
    const t = tree({ 'a.txt': 'a\n' });
    const checkpoints = new WorkspaceCheckpoints(new NodeWorkspace({ root: t.root }));
    expect(() => new SandboxShell(new NoopSandbox(), { cwd: t.root, checkpoints })).toThrow(/changes: 'overlay'/);
    expect(() => new SandboxShell(new NoopSandbox(), { cwd: t.root, checkpoints: {} })).toThrow(/checkpoints must be a WorkspaceCheckpoints/);
  });
});

describe.skipIf(!usable)('shell undo over LinuxSandbox', () => {
  const setup = (files, options = {}) => {
    const t = tree(files);
    const ws = new NodeWorkspace({ root: t.root });
    const checkpoints = new WorkspaceCheckpoints(ws);
    const shell = new SandboxShell(new LinuxSandbox({ changes: 'overlay' }), { cwd: t.root, checkpoints, ...options });
    return { t, ws, checkpoints, shell };
  };

  it("checkpoints over another directory than the shell's cwd are refused", () => {
    const t = tree({ 'sub/a.txt': 'a\n' });
    const checkpoints = new WorkspaceCheckpoints(new NodeWorkspace({ root: join(t.root, 'sub') }));
    expect(() => new SandboxShell(new LinuxSandbox({ changes: 'overlay' }), { cwd: t.root, checkpoints })).toThrow(/whose root is the shell's cwd/);
  });

  it("the shell tool's note ends with the Changes line, and a rewind of the turn undoes the command", async () => {
    const { t, ws, checkpoints, shell } = setup({ 'src/a.ts': 'export const a = 1;\n', 'old.ts': 'old\n' });
    const before = snapshot(t.root);
    const tool = createShellTool(shell, { needsApproval: false });
    const r = await tool.execute(
      { command: "sed -i 's/1/2/' src/a.ts && echo new > b.ts && rm old.ts && mkdir -p lib/.git && echo printed" },
      { sessionId: 's1', turn: 3, toolCallId: 'call-1' },
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('printed\n');
    expect(r.note.split('\n').at(-1)).toBe('Changes: M src/a.ts, A b.ts, D old.ts; refused: lib/.git (protected)');
    expect(readFileSync(join(t.root, 'src/a.ts'), 'utf8')).toBe('export const a = 2;\n');
    expect(existsSync(join(t.root, 'lib/.git'))).toBe(false);
    expect(await checkpoints.list({ sessionId: 's1' })).toEqual([{ turn: 3, paths: ['b.ts', 'lib', 'old.ts', 'src/a.ts'] }]);
    const report = await checkpoints.rewind(3, { sessionId: 's1' });
    expect(report.skipped).toEqual([]);
    expect(snapshot(t.root)).toEqual(before);
    void ws;
  });

  it('exec reports changes; links, modes, a file replaced by a directory and back come back exactly', async () => {
    const { t, checkpoints, shell } = setup({ 'a.txt': 'a\n', 'run.sh': 'echo run\n', 'swap': 'a file\n', 'dir1/x': 'x\n', 'dir1/deep/y': 'y\n' });
    symlinkSync('a.txt', join(t.root, 'link'));
    const before = snapshot(t.root);
    const one = await shell.exec('chmod +x run.sh && rm link && ln -s run.sh link && rm swap && mkdir swap && echo in > swap/in && mv dir1 dir2', { sessionId: 's', turn: 1 });
    expect(one.exitCode).toBe(0);
    expect(one.changes).toEqual({
      added: ['dir2/deep/y', 'dir2/x', 'swap/in'], modified: ['link', 'run.sh'], deleted: ['dir1/deep/y', 'dir1/x', 'swap'], refused: [], pending: false,
    });
    const two = await shell.exec('rm -rf swap && echo back > swap && rm -rf dir2', { sessionId: 's', turn: 2 });
    expect(two.changes.deleted).toEqual(['dir2/deep/y', 'dir2/x', 'swap/in']);
    expect((await checkpoints.rewind(1, { sessionId: 's' })).skipped).toEqual([]);
    expect(snapshot(t.root)).toEqual(before);
  });

  it('npm init and npm install of a local tarball, then a rewind: the tree is byte for byte what it was', async () => {
    // The package to install: packed outside the sandbox, kept inside cwd (the sandbox's /tmp is its own).
    const pkg = tree({ 'package.json': JSON.stringify({ name: 'corral-undo-fixture', version: '1.0.0', main: 'index.js' }), 'index.js': 'module.exports = 42;\n', 'lib/a.js': 'a\n', 'lib/b.js': 'b\n' });
    const { t, checkpoints, shell } = setup({});
    mkdirSync(join(t.root, 'vendor'));
    execFileSync('npm', ['pack', '--silent', '--pack-destination', join(t.root, 'vendor')], { cwd: pkg.root, stdio: 'pipe' });
    const before = snapshot(t.root);
    const r = await shell.exec(
      'npm init -y >/dev/null && npm install --offline --no-audit --no-fund --cache /tmp/npm-cache ./vendor/corral-undo-fixture-1.0.0.tgz >/dev/null && node -e "console.log(require(\'corral-undo-fixture\'))"',
      { sessionId: 'npm', turn: 1, timeoutMs: 120_000 },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe('42\n');
    expect(r.changes.added).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'node_modules/corral-undo-fixture/index.js']));
    expect(existsSync(join(t.root, 'node_modules/corral-undo-fixture/lib/b.js'))).toBe(true);
    const report = await checkpoints.rewind(1, { sessionId: 'npm' });
    expect(report.skipped).toEqual([]);
    expect(existsSync(join(t.root, 'node_modules'))).toBe(false);
    expect(snapshot(t.root)).toEqual(before);
  }, 180_000);

  it('a file tool edit made while a command ran is kept and the command\'s change to it refused', async () => {
    const { t, ws, shell } = setup({ 'a.txt': 'start\n', 'b.txt': 'start\n' });
    const run = shell.exec('sleep 1 && echo command > a.txt && echo command > b.txt');
    await new Promise((r) => setTimeout(r, 400));
    await ws.writeFile('a.txt', 'edited by a file tool\n');
    const r = await run;
    expect(r.changes.refused).toEqual([{ path: 'a.txt', reason: 'changed on the host' }]);
    expect(r.changes.modified).toEqual(['b.txt']);
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('edited by a file tool\n');
  });

  it("applyChanges: 'manual' stacks three commands; one applied, one discarded, the rest applied, and a rewind undoes what landed", async () => {
    const { t, checkpoints, shell } = setup({ 'a.txt': '0\n' }, { applyChanges: 'manual' });
    const before = snapshot(t.root);
    const one = await shell.exec('echo 1 > a.txt', { sessionId: 'm', turn: 1 });
    expect(one.changes).toEqual({ added: [], modified: ['a.txt'], deleted: [], refused: [], pending: true });
    const two = await shell.exec('cat a.txt && echo 2 >> a.txt && echo b > b.txt', { sessionId: 'm', turn: 1 });
    expect(two.stdout).toBe('1\n');
    const three = await shell.exec('rm b.txt && printf "\\000" > bin && cat a.txt', { sessionId: 'm', turn: 2 });
    expect(three.stdout).toBe('1\n2\n');
    expect(snapshot(t.root)).toEqual(before);
    const pending = await shell.pendingChanges();
    expect(pending.map((p) => p.command)).toEqual(['echo 1 > a.txt', 'cat a.txt && echo 2 >> a.txt && echo b > b.txt', 'rm b.txt && printf "\\000" > bin && cat a.txt']);
    expect(pending[1].changes).toEqual([{ path: 'a.txt', kind: 'modified' }, { path: 'b.txt', kind: 'added' }]);
    expect(pending[1].diff).toContain('--- a/a.txt\n+++ b/a.txt\n');
    expect(pending[2].diff).toContain('Binary files /dev/null and b/bin differ');
    const [c1, , c3] = pending.map((p) => p.id);
    expect(await shell.applyChanges(c1)).toEqual([{ id: c1, changes: { added: [], modified: ['a.txt'], deleted: [], refused: [], pending: false } }]);
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('1\n');
    expect(await shell.discardChanges(c3)).toEqual([c3]);
    expect((await shell.applyChanges()).length).toBe(1);
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('1\n2\n');
    expect(existsSync(join(t.root, 'bin'))).toBe(false);
    expect(await shell.pendingChanges()).toEqual([]);
    await expect(shell.applyChanges('c99')).rejects.toThrow(/No pending changeset/);
    expect((await checkpoints.rewind(1, { sessionId: 'm' })).skipped).toEqual([]);
    expect(snapshot(t.root)).toEqual(before);
    expect(() => new SandboxShell(new LinuxSandbox({ changes: 'overlay' }), { cwd: t.root, applyChanges: 'later' })).toThrow(/applyChanges must be 'auto' or 'manual'/);
  });

  it("a background process's changes apply when it ends; a file tool edit made meanwhile is kept", async () => {
    const { t, ws, shell } = setup({ 'a.txt': 'start\n' });
    const tools = createShellTool(shell, { background: true, needsApproval: false });
    const [run, output] = [tools.find((x) => x.name === 'shell'), tools.find((x) => x.name === 'process_output')];
    try {
      const { id } = await run.execute({ command: 'echo ready; read go; echo bg > a.txt; echo new > b.txt', run_in_background: true });
      // The start answers at once; the command (and its layer's stamp) comes after: the edit is
      // made once it runs.
      let seen = '';
      for (const started = Date.now(); Date.now() - started < 20_000 && !seen.includes('ready');) seen += (await output.execute({ id, wait_ms: 200 })).stdout;
      expect(seen).toBe('ready\n');
      await ws.writeFile('a.txt', 'edited while it ran\n');
      expect(existsSync(join(t.root, 'b.txt'))).toBe(false);
      await tools.find((x) => x.name === 'process_input').execute({ id, text: 'go\n' });
      let last;
      for (const started = Date.now(); Date.now() - started < 20_000 && (!last || last.running);) last = await output.execute({ id, wait_ms: 500 });
      expect(last.running).toBe(false);
      expect(last.note.split('\n').at(-1)).toBe('Changes: A b.txt; refused: a.txt (changed on the host)');
      expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('edited while it ran\n');
      expect(readFileSync(join(t.root, 'b.txt'), 'utf8')).toBe('new\n');
    } finally {
      await tools.close();
    }
  });

  it('changesDir inside cwd is refused', () => {
    const t = tree({});
    mkdirSync(join(t.root, 'layers'));
    expect(() => new SandboxShell(new LinuxSandbox({ changes: 'overlay' }), { cwd: t.root, changesDir: join(t.root, 'layers') })).toThrow(/outside the shell's cwd/);
    writeFileSync(join(t.root, 'x'), '');
  });
});
