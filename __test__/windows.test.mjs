// Windows hosts (run under Wine in CI: scripts/cross/windows-wine.sh): the command environment,
// job objects that end every process a command started (on a timeout, and with a Node that
// crashes), and SandboxShell's paths and shell on a Windows host. Elsewhere these are skipped.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync, statSync, mkdirSync, copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { NodeWorkspace, SandboxShell, NoopSandbox, createShellTool, createTemplateTool } from 'corral';
import { tempTree, recordingAdapter } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A script that writes the time to `beat` every 100 ms, for as long as it runs. */
const BEAT = "const fs = require('fs'); setInterval(() => fs.writeFileSync(process.argv[2], String(Date.now())), 100);\n";
/** `node beat.js <file>` as cmd.exe reads it. */
const beat = (file) => `"${process.execPath}" beat.js ${file}`;

/** Whether `file` stopped changing: read twice, a second apart, after it was last written. */
async function stopped(file) {
  for (let i = 0; i < 40; i++) {
    const a = readFileSync(file, 'utf8');
    await sleep(1000);
    if (readFileSync(file, 'utf8') === a) return true;
  }
  return false;
}

/** Waits until `file` exists (what it runs has started). */
async function started(file) {
  for (let i = 0; i < 200 && !existsSync(file); i++) await sleep(50);
  return existsSync(file) && statSync(file).size > 0;
}

describe.runIf(process.platform === 'win32')('commands on a Windows host', () => {
  it('get what a Windows command needs from the host: OS, SystemRoot, ComSpec, PATHEXT', async () => {
    const ws = new NodeWorkspace({ root: tree().root });
    const r = await ws.exec('set');
    expect(r.exitCode).toBe(0);
    const names = r.stdout.split(/\r?\n/).map((l) => l.split('=')[0].toUpperCase());
    for (const name of ['OS', 'SYSTEMROOT', 'COMSPEC', 'PATHEXT', 'PATH']) expect(names).toContain(name);
    expect(r.stdout).toMatch(/^OS=Windows_NT\r?$/m);
  });

  it('a timeout ends every process the command started, one it put in the background too', async () => {
    const t = tree({ 'beat.js': BEAT });
    const shell = createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: false });
    const r = await shell.execute({ command: `start /b "" ${beat('a')} & ${beat('b')}`, timeout_ms: 3000 });
    expect(r.timedOut).toBe(true);
    expect(r.note).toContain('every process it started were killed');
    expect(await started(join(t.root, 'a'))).toBe(true);
    expect(await stopped(join(t.root, 'a'))).toBe(true);
    expect(await stopped(join(t.root, 'b'))).toBe(true);
  }, 60_000);

  it('a background process ends with a Node that crashes', async () => {
    const t = tree({ 'beat.js': BEAT });
    const owner = `const { NodeWorkspace, createShellTool } = require(${JSON.stringify(join(process.cwd(), 'js', 'index.js'))});
      const tools = createShellTool(new NodeWorkspace({ root: ${JSON.stringify(t.root)} }), { background: true, needsApproval: false });
      globalThis.held = tools;
      tools[0].execute({ command: ${JSON.stringify(beat('c'))}, run_in_background: true }).then(() => process.stdout.write('started\\n'));
      setInterval(() => {}, 1000);`;
    writeFileSync(join(t.dir, 'owner.cjs'), owner);
    const child = spawn(process.execPath, [join(t.dir, 'owner.cjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
    try {
      expect(await started(join(t.root, 'c'))).toBe(true);
      // TerminateProcess: nothing of Node's own runs after it.
      child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.on('exit', r)));
      expect(await stopped(join(t.root, 'c'))).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  }, 90_000);
});

describe.runIf(process.platform === 'win32')('SandboxShell on a Windows host', () => {
  it('hands the adapter a plain host path (C:\\…), never the \\\\?\\ form', async () => {
    const t = tree();
    const adapter = recordingAdapter();
    const shell = new SandboxShell(adapter, { cwd: t.root });
    await shell.exec('dir');
    expect(adapter.requests[0].cwd.startsWith('\\\\?\\')).toBe(false);
    expect(adapter.requests[0].cwd.toLowerCase()).toBe(t.root.toLowerCase());
  });

  it('takes a POSIX cwd as a path inside the sandbox, and joins a sub-directory with /', async () => {
    const adapter = recordingAdapter();
    const shell = new SandboxShell(adapter, { cwd: '/abs/path/to/project' });
    await shell.exec('ls');
    await shell.exec('ls', { cwd: 'src/lib' });
    expect(adapter.requests.map((r) => r.cwd)).toEqual(['/abs/path/to/project', '/abs/path/to/project/src/lib']);
  });

  it('over NoopSandbox says the commands run with cmd.exe, and runs them with it', async () => {
    const shell = new SandboxShell(new NoopSandbox(), { cwd: tree().root });
    const tool = createShellTool(shell, { needsApproval: false });
    expect(tool.description).toContain('cmd.exe');
    expect(tool.description).not.toContain('sh -c');
    const r = await tool.execute({ command: 'echo %OS%' });
    expect(r.stdout.trim()).toBe('Windows_NT');
  });
});

// A program that prints its arguments, one per line (scripts/cross/wine/argv.c; the Wine step
// builds it and names it here).
const ARGV_EXE = process.env.CORRAL_ARGV_EXE;

describe.runIf(process.platform === 'win32')('template tools through cmd.exe', () => {
  /** shlex.quote, as the template quotes each value for bash. */
  const shq = (s) => (/^[A-Za-z0-9@%+=:,./_-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`);

  it.skipIf(!ARGV_EXE)('a value reaches the program as the one argument it was: cmd.exe runs, expands and redirects none of it', async () => {
    const t = tree();
    const bin = join(t.dir, 'bin');
    mkdirSync(bin);
    // `bash` on the command's PATH prints what it was given.
    copyFileSync(ARGV_EXE, join(bin, 'bash.exe'));
    const shell = new NodeWorkspace({ root: t.root, env: { PATH: `${bin};${process.env.PATH}` } });
    const tool = createTemplateTool({ name: 'say', parameters: { type: 'object', properties: { msg: { type: 'string' } } }, handler_kind: 'shell_template', handler_payload: { command: 'echo {msg}' } }, { shell });
    for (const msg of ['x & echo pwned > p1.txt', '100% ^& echo pwned > p2.txt', '"q" & echo pwned > p3.txt', 'a\\" | echo pwned > p4.txt', "it's (a) <test> ; !x!", 'ends with \\']) {
      const r = await tool.execute({ msg });
      expect(r.stdout.replaceAll('\r\n', '\n'), msg).toBe(`-c\necho ${shq(msg)}\n`);
    }
    expect(readdirSync(t.root)).toEqual([]);
  });

  it('a value with a line break or a %NAME% is refused before anything runs: cmd.exe reads those however they are quoted', async () => {
    const t = tree();
    const tool = createTemplateTool({ name: 'say', parameters: { type: 'object', properties: { msg: { type: 'string' } } }, handler_kind: 'shell_template', handler_payload: { command: 'echo {msg}' } }, { shell: new NodeWorkspace({ root: t.root }) });
    for (const msg of ['a\n& echo pwned > p.txt', '%OS% ^& echo pwned > p.txt', '%COMSPEC%']) {
      await expect(tool.execute({ msg }), msg).rejects.toMatchObject({ code: 'InvalidArguments', message: expect.stringContaining('cmd.exe') });
    }
    expect(readdirSync(t.root)).toEqual([]);
  });
});
