// Background processes (createShellTool(shell, { background: true })): started with
// run_in_background, read, written, stopped and listed by id; killed on stop, on close(), when
// the Node process exits and when it dies by a signal (each checked by pid).
import { describe, it, expect, afterAll } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { MemoryWorkspace, NodeWorkspace, SandboxShell, LinuxSandbox, SubprocessSandbox, createShellTool } from 'corral';
import { linuxSandboxUsable, tempTree, alive, gone } from './helpers.mjs';
import { DOCKER_HOST, IMAGE, containersGone } from './docker-engine.mjs';

// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them,
// node doing what sh's read loops, $$ and sleep do.
const win = process.platform === 'win32';
/** `node -e <script>` as the shell reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;
/** What the shell's echo ends a line with. */
const EOL = win ? '\r\n' : '\n';
/** Prints its pid, then lives 300 s. */
const PID_SLEEP = win ? nodeE('console.log(process.pid); setTimeout(() => {}, 300000)') : 'echo $$; exec sleep 300';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };

const toolsOf = (shell, options = {}) => {
  const tools = createShellTool(shell, { background: true, needsApproval: false, ...options });
  return { ...Object.fromEntries(tools.map((t) => [t.name, t])), close: () => tools.close() };
};

/** Reads a background process until `done(stdout so far, last result)`; 20 s at most. */
async function readUntil(t, id, done, ctx) {
  let out = '';
  let last;
  for (const started = Date.now(); Date.now() - started < 20_000;) {
    last = await t.process_output.execute({ id, wait_ms: 500 }, ctx);
    out += last.stdout;
    if (done(out, last)) break;
  }
  return { out, last };
}


describe('background processes over NodeWorkspace', () => {
  it('createShellTool returns the shell tool and the process tools, with close() not enumerable', () => {
    const tools = createShellTool(new NodeWorkspace({ root: tree().root }), { background: true });
    expect(tools.map((t) => t.name)).toEqual(['shell', 'process_output', 'process_input', 'process_stop', 'process_list']);
    expect(Object.keys(tools)).not.toContain('close');
    expect(typeof tools.close).toBe('function');
    expect(tools[0].inputSchema.properties.run_in_background.type).toBe('boolean');
  });

  it('a dev server started in the background answers on its port while the agent keeps working', async () => {
    const t = toolsOf(new NodeWorkspace({ root: tree({ 'server.js': "require('http').createServer((q, s) => s.end('hello from ' + q.url)).listen(0, '127.0.0.1', function () { console.log('port ' + this.address().port); });\n" }).root }));
    const command = win ? nodeE("console.log('pid ' + process.pid); require('./server.js')") : 'echo pid $$; exec node server.js';
    const started = await t.shell.execute({ command, run_in_background: true });
    expect(started).toEqual({ id: 'p1', running: true, stdout: '', stderr: '' });
    // The agent keeps working meanwhile.
    expect((await t.shell.execute({ command: 'echo busy' })).stdout).toBe(`busy${EOL}`);
    const { out } = await readUntil(t, 'p1', (o) => /port \d+/.test(o));
    const port = Number(/port (\d+)/.exec(out)[1]);
    const pid = Number(/pid (\d+)/.exec(out)[1]);
    expect(await (await fetch(`http://127.0.0.1:${port}/x`)).text()).toBe('hello from /x');
    expect(await t.process_list.execute({})).toEqual([{ id: 'p1', command, running: true }]);
    const stopped = await t.process_stop.execute({ id: 'p1' });
    expect(stopped.running).toBe(false);
    expect(await gone(pid)).toBe(true);
    await expect(fetch(`http://127.0.0.1:${port}/x`)).rejects.toThrow();
  });

  it('input reaches the process, and the output of each read is only what is new', async () => {
    const t = toolsOf(new NodeWorkspace({ root: tree().root }));
    const command = win
      ? nodeE("require('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log('got ' + l)).on('close', () => console.log('bye'))")
      : 'while read l; do echo "got $l"; done; echo bye';
    const { id } = await t.shell.execute({ command, run_in_background: true });
    await t.process_input.execute({ id, text: 'one\n' });
    expect((await readUntil(t, id, (o) => o.includes('got one'))).out).toBe('got one\n');
    await t.process_input.execute({ id, text: 'two\n', close: true });
    const { out, last } = await readUntil(t, id, (_, l) => !l.running);
    expect(out).toBe('got two\nbye\n');
    expect(last.exitCode).toBe(0);
  });

  it('close() stops every process of the tool set, and the rules and sessions still hold', async () => {
    const t = toolsOf(new NodeWorkspace({ root: tree().root }), { deny: ['rm'] });
    await expect(t.shell.execute({ command: 'rm -rf x', run_in_background: true })).rejects.toMatchObject({ code: 'CommandRefused' });
    const pids = [];
    for (const ctx of [{ sessionId: 'a' }, { sessionId: 'b' }]) {
      const { id } = await t.shell.execute({ command: PID_SLEEP, run_in_background: true }, ctx);
      pids.push(Number((await readUntil(t, id, (o) => o.includes('\n'), ctx)).out));
    }
    await expect(t.process_output.execute({ id: 'p1' }, { sessionId: 'b' })).rejects.toMatchObject({ code: 'NotFound' });
    expect(pids.every(alive)).toBe(true);
    await t.close();
    for (const pid of pids) expect(await gone(pid)).toBe(true);
  });

  for (const how of ['exit', 'hang']) {
    it(`the process is killed when Node ${how === 'exit' ? 'exits' : 'dies by SIGKILL'}`, async () => {
      const child = spawn(process.execPath, [join(__dirname, 'fixtures', 'background-child.cjs'), tree().root, how], { stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      const pid = await new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => { text += d; const m = /pid (\d+)/.exec(text); if (m) resolve(Number(m[1])); });
        child.on('exit', () => { const m = /pid (\d+)/.exec(text); m ? resolve(Number(m[1])) : reject(new Error(`no pid: ${text}`)); });
      });
      expect(pid).toBeGreaterThan(1);
      const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
      if (how === 'hang') child.kill('SIGKILL');
      // A background process does not keep Node running: the 'exit' child ends by itself.
      expect(await exited).toEqual(how === 'exit' ? { code: 0, signal: null } : { code: null, signal: 'SIGKILL' });
      expect(await gone(pid)).toBe(true);
    }, 30_000);
  }
});

/**
 * A ShellProvider written in JavaScript with spawn(), over child_process, as a user would write one:
 * sh, or on Windows cmd.exe, whose command and what it started taskkill ends as a tree.
 */
function jsShellWithSpawn(cwd) {
  const start = (command, options) => (win
    ? spawn(process.env.ComSpec ?? 'cmd.exe', ['/d', '/s', '/c', `"${command}"`], { cwd, windowsVerbatimArguments: true, ...options })
    : spawn('/bin/sh', ['-c', command], { cwd, ...options }));
  return {
    shell: win ? 'cmd.exe' : 'sh',
    async exec(command) {
      return new Promise((resolve) => {
        const p = start(command);
        let stdout = '';
        p.stdout.on('data', (d) => { stdout += d; });
        p.on('close', (exitCode) => resolve({ stdout, stderr: '', exitCode }));
      });
    },
    spawn(command, options) {
      const p = start(command, { detached: !win });
      p.stdout.on('data', (d) => options.onOutput('stdout', String(d)));
      p.stderr.on('data', (d) => options.onOutput('stderr', String(d)));
      const exited = new Promise((resolve) => p.on('close', (exitCode, signal) => resolve({ stdout: '', stderr: '', exitCode, signal: signal ?? undefined })));
      return {
        pid: p.pid,
        write: (text) => { p.stdin.write(text); },
        closeStdin: () => { p.stdin.end(); },
        kill: () => {
          if (win) spawnSync('taskkill', ['/T', '/F', '/PID', String(p.pid)]);
          else try { process.kill(-p.pid, 'SIGKILL'); } catch {}
        },
        wait: () => exited,
      };
    },
  };
}

describe('background processes elsewhere', () => {
  it("a shell written in JavaScript runs them through its spawn(): output, input and stop", async () => {
    const t = toolsOf(jsShellWithSpawn(tree().root));
    const command = win
      ? nodeE("console.log('ready'); require('readline').createInterface({ input: process.stdin }).on('line', (l) => console.log('js: ' + l))")
      : 'echo ready; while read l; do echo "js: $l"; done';
    const { id } = await t.shell.execute({ command, run_in_background: true });
    expect((await readUntil(t, id, (o) => o.includes('ready'))).out).toBe('ready\n');
    await t.process_input.execute({ id, text: 'x\n' });
    expect((await readUntil(t, id, (o) => o.includes('js:'))).out).toBe('js: x\n');
    const stopped = await t.process_stop.execute({ id });
    // taskkill ends a Windows process with an exit code: there are no signals there.
    expect(stopped).toMatchObject(win ? { id, running: false } : { id, running: false, signal: 'SIGKILL' });
    const plain = toolsOf({ exec: async () => ({ stdout: '', stderr: '', exitCode: 0 }) });
    await expect(plain.shell.execute({ command: 'x', run_in_background: true })).rejects.toMatchObject({ code: 'CommandRefused' });
  });

  it('a shell that cannot run in the background refuses run_in_background', async () => {
    const t = toolsOf(new MemoryWorkspace());
    await expect(t.shell.execute({ command: 'echo', run_in_background: true })).rejects.toMatchObject({ code: 'CommandRefused', message: expect.stringMatching(/cannot run commands in the background/) });
  });

  it.skipIf(!linuxSandboxUsable)('over LinuxSandbox: output, input and stop', async () => {
    const root = tree().root;
    const t = toolsOf(new SandboxShell(new LinuxSandbox(), { cwd: root }));
    const { id } = await t.shell.execute({ command: 'echo ready; while read l; do echo "in sandbox: $l"; done', run_in_background: true });
    expect((await readUntil(t, id, (o) => o.includes('ready'))).out).toBe('ready\n');
    await t.process_input.execute({ id, text: 'hi\n' });
    expect((await readUntil(t, id, (o) => o.includes('in sandbox'))).out).toBe('in sandbox: hi\n');
    const stopped = await t.process_stop.execute({ id });
    expect(stopped.running).toBe(false);
    await t.close();
  });
});

describe.skipIf(!DOCKER_HOST)('background processes in Docker (a real engine)', () => {
  for (const reuse of ['command', 'session']) {
    it(`reuse '${reuse}': output, input and stop, and nothing left after close`, async () => {
      const root = tree().root;
      const sandbox = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse });
      const t = toolsOf(new SandboxShell(sandbox, { cwd: root }));
      const { id } = await t.shell.execute({ command: 'echo ready; while read l; do echo "in docker: $l"; done', run_in_background: true });
      expect((await readUntil(t, id, (o) => o.includes('ready'))).out).toBe('ready\n');
      await t.process_input.execute({ id, text: 'hi\n' });
      expect((await readUntil(t, id, (o) => o.includes('in docker'))).out).toBe('in docker: hi\n');
      const stopped = await t.process_stop.execute({ id });
      expect(stopped.running).toBe(false);
      await t.close();
      await sandbox.close();
      expect(await containersGone(root)).toEqual([]);
    }, 60_000);
  }

  it('a dev server in a kept container answers on its port while the agent keeps working', async () => {
    const root = tree({ 'www/index.html': 'served from the container\n' }).root;
    const sandbox = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse: 'session' });
    const t = toolsOf(new SandboxShell(sandbox, { cwd: root }));
    const { id } = await t.shell.execute({ command: 'echo listening; exec busybox httpd -f -p 127.0.0.1:8080 -h www', run_in_background: true });
    await readUntil(t, id, (o) => o.includes('listening'));
    // Another command in the same container reaches it over loopback, while it keeps running.
    let page = '';
    for (let i = 0; i < 50 && !page.includes('served'); i++) {
      page = (await t.shell.execute({ command: 'wget -qO- http://127.0.0.1:8080/index.html 2>&1; true' })).stdout;
      if (!page.includes('served')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(page).toBe('served from the container\n');
    expect((await t.process_list.execute({}))[0]).toMatchObject({ id, running: true });
    expect((await t.process_stop.execute({ id })).running).toBe(false);
    expect((await t.shell.execute({ command: 'wget -qO- http://127.0.0.1:8080/index.html >/dev/null 2>&1; echo $?' })).stdout).not.toBe('0\n');
    await t.close();
    await sandbox.close();
    expect(await containersGone(root)).toEqual([]);
  }, 60_000);
});
