// SubprocessSandbox with reuse: 'session' and with limits, against a real Docker Engine
// (CORRAL_DOCKER_HOST; scripts/dockerd-test.sh starts one as root). Skipped without one.
import { describe, it, expect } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SandboxShell, SubprocessSandbox, ConfigurationError } from 'corral';
import { perTestTrees } from './helpers.mjs';
import { DOCKER_HOST, IMAGE, containersFor, containersGone } from './docker-engine.mjs';

const { tree, cleanups } = perTestTrees();

function session(options = {}) {
  const sandbox = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse: 'session', ...options });
  cleanups.push(() => sandbox.close());
  return sandbox;
}

/** The command lines of the processes running in the kept container, seen from a new command. */
async function processes(shell) {
  const r = await shell.exec('ps -o args');
  return r.stdout.split('\n').slice(1).map((l) => l.trim()).filter(Boolean);
}

describe('SubprocessSandbox reuse option', () => {
  it("refuses a reuse that is not 'command' or 'session'", () => {
    expect(() => new SubprocessSandbox({ image: IMAGE, reuse: 'always' })).toThrow(ConfigurationError);
    expect(() => new SubprocessSandbox({ image: IMAGE, reuse: 'always' })).toThrow(/reuse must be 'command' or 'session'/);
  });
});

describe.skipIf(!DOCKER_HOST)("SubprocessSandbox reuse: 'session' against a real Docker Engine", () => {
  it('runs every command of a SandboxShell in one kept container, with each command its own env and cwd', async () => {
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root, env: { BASE: 'b' } });
    const first = await shell.exec('echo kept > /tmp/state; echo $BASE $ONE; hostname', { env: { ONE: '1' }, timeoutMs: 30_000 });
    expect(first.exitCode, first.stderr).toBe(0);
    const [vars, host] = first.stdout.trim().split('\n');
    expect(vars).toBe('b 1');
    const second = await shell.exec('cat /tmp/state; echo "[$ONE]"; hostname; pwd', { cwd: 'sub' });
    expect(second.stdout).toBe(`kept\n[]\n${host}\n${join(t.root, 'sub')}\n`);
    expect((await shell.exec('exit 7')).exitCode).toBe(7);
    expect((await shell.exec('cat', { stdin: 'in\n' })).stdout).toBe('in\n');
    expect(await containersFor(t.root)).toHaveLength(1);
  });

  it("a timeout kills the command and what it left running, and the container serves the next command", async () => {
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root });
    await shell.exec('true');
    const r = await shell.exec('sleep 31 & sleep 32; touch late', { timeoutMs: 800 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGKILL' });
    const left = await processes(shell);
    expect(left.filter((a) => /sleep 3[12]/.test(a))).toEqual([]);
    expect((await shell.exec('echo still here')).stdout).toBe('still here\n');
    expect(existsSync(join(t.root, 'late'))).toBe(false);
    expect(await containersFor(t.root)).toHaveLength(1);
  });

  it('an abort kills only the aborted command while another runs in the same container', async () => {
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root });
    await shell.exec('true');
    const controller = new AbortController();
    const aborted = shell.exec('touch started; sleep 41', { signal: controller.signal });
    const other = shell.exec('sleep 2; echo other finished');
    while (!existsSync(join(t.root, 'started'))) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    const r = await aborted;
    expect(r).toMatchObject({ aborted: true, exitCode: null });
    expect(await other).toMatchObject({ exitCode: 0, stdout: 'other finished\n' });
    expect((await processes(shell)).filter((a) => a.includes('sleep 41'))).toEqual([]);
  });

  it('an abort at any moment of a command kills only that command (repeated, the abort at each stage)', async () => {
    // Once in ten runs under load the abort came before the wrapper's pid line had been read,
    // and the aborted command kept running.
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root });
    await shell.exec('true');
    const moments = [
      () => {},
      () => Promise.resolve(),
      () => new Promise((r) => setTimeout(r, 0)),
      () => new Promise((r) => setTimeout(r, Math.random() * 300)),
      async () => { while (!existsSync(join(t.root, 'started'))) await new Promise((r) => setImmediate(r)); },
    ];
    for (let i = 0; i < 15; i++) {
      rmSync(join(t.root, 'started'), { force: true });
      const c = new AbortController();
      const aborted = shell.exec(`touch started; sleep ${500 + i}`, { signal: c.signal });
      const other = shell.exec('sleep 1; echo other finished');
      await moments[i % moments.length]();
      c.abort();
      expect(await aborted).toMatchObject({ aborted: true, exitCode: null });
      expect(await other).toMatchObject({ exitCode: 0, stdout: 'other finished\n' });
      // An exec that started late would show now.
      await new Promise((r) => setTimeout(r, 200));
      expect((await processes(shell)).filter((a) => a.includes(`sleep ${500 + i}`))).toEqual([]);
    }
  }, 300_000);

  it('close() removes the kept container; a later command starts a new one', async () => {
    const t = tree();
    const sandbox = session();
    const shell = new SandboxShell(sandbox, { cwd: t.root });
    await shell.exec('echo x > /tmp/state');
    expect(await containersFor(t.root)).toHaveLength(1);
    await sandbox.close();
    expect(await containersGone(t.root)).toEqual([]);
    const r = await shell.exec('cat /tmp/state 2>/dev/null || echo fresh');
    expect(r.stdout).toBe('fresh\n');
  });

  it('a kept container removed behind its back is replaced on the next command', async () => {
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root });
    await shell.exec('true');
    const [c] = await containersFor(t.root);
    await engineDelete(`/containers/${c.Id}?force=1`);
    const r = await shell.exec('echo replaced');
    expect(r).toMatchObject({ exitCode: 0, stdout: 'replaced\n' });
    expect((await containersFor(t.root)).map((x) => x.Id)).not.toContain(c.Id);
  });

  it('prune() removes the container a crashed process left, and not those of a live one', async () => {
    const t = tree();
    const live = tree();
    await new SandboxShell(session(), { cwd: live.root }).exec('true');
    // A child process runs one command in a kept container and is killed before it can close.
    const child = spawn(process.execPath, ['--input-type=module', '-e', `
      const { SubprocessSandbox, SandboxShell } = await import('corral');
      const s = new SubprocessSandbox({ image: ${JSON.stringify(IMAGE)}, dockerHost: ${JSON.stringify(DOCKER_HOST)}, reuse: 'session' });
      await new SandboxShell(s, { cwd: ${JSON.stringify(t.root)} }).exec('true');
      console.log('ready');
      setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => { if (String(d).includes('ready')) resolve(); });
      child.on('exit', (code) => reject(new Error(`the child exited with ${code}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    expect(await containersFor(t.root)).toHaveLength(1);
    const removed = await session().prune();
    expect(removed).toBeGreaterThanOrEqual(1);
    expect(await containersGone(t.root)).toEqual([]);
    expect(await containersFor(live.root)).toHaveLength(1);
  });

  it('no command can make another command\'s timeout kill anything but that command', async () => {
    const t = tree();
    const shell = new SandboxShell(session(), { cwd: t.root });
    await shell.exec('true');
    const other = shell.exec('sleep 3; echo other finished');
    // The attack: point every file the old kill trusted at init, then time out.
    const attacker = await shell.exec('for f in /tmp/.corral-exec-* /tmp/*; do echo 1 > "$f"; done 2>/dev/null; sleep 30', { timeoutMs: 1000 });
    expect(attacker).toMatchObject({ timedOut: true });
    expect(await other).toMatchObject({ exitCode: 0, stdout: 'other finished\n' });
    expect((await processes(shell)).filter((a) => a.includes('sleep 30'))).toEqual([]);
  });

  it('prune() never removes a live process\'s container, whatever its pid namespace', async () => {
    const t = tree();
    // A live process in a pid namespace of its own, whose pid means nothing (no process) here.
    // --kill-child: when unshare dies, its namespace's init does, and with it every process there.
    const child = spawn('unshare', ['--pid', '--fork', '--kill-child', '--mount-proc', 'sh', '-c', `echo 400000 > /proc/sys/kernel/ns_last_pid && ${JSON.stringify(process.execPath)} --input-type=module -e "$0"`, `
      const { SubprocessSandbox, SandboxShell } = await import('corral');
      const s = new SubprocessSandbox({ image: ${JSON.stringify(IMAGE)}, dockerHost: ${JSON.stringify(DOCKER_HOST)}, reuse: 'session' });
      await new SandboxShell(s, { cwd: ${JSON.stringify(t.root)} }).exec('true');
      console.log('ready ' + process.pid);
      setInterval(() => {}, 1000);`], { stdio: ['ignore', 'pipe', 'inherit'], cwd: process.cwd() });
    try {
      const pid = await new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => { const m = /ready (\d+)/.exec(String(d)); if (m) resolve(Number(m[1])); });
        child.on('exit', (code) => reject(new Error(`the child exited with ${code}`)));
      });
      expect(pid).toBeGreaterThan(400000);
      expect(() => process.kill(pid, 0)).toThrow(); // no such process in this namespace
      expect(await containersFor(t.root)).toHaveLength(1);
      await session().prune();
      expect(await containersFor(t.root)).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.on('exit', r));
    }
    // Nothing of the child's namespace outlives the test.
    for (let i = 0; i < 50 && spawnSync('pgrep', ['-f', t.root]).status === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(spawnSync('pgrep', ['-f', t.root]).status).toBe(1);
  });

  it('limits hold in a kept container: forks past pids are refused and named, memory and file size too', async () => {
    const t = tree();
    const shell = new SandboxShell(session({ limits: { pids: 16, memoryBytes: 64 * 1024 * 1024, fileSizeBytes: 1024 * 1024 } }), { cwd: t.root });
    const big = await shell.exec('head -c 2000000 /dev/zero > big.bin', { timeoutMs: 30_000 });
    expect(big.exitCode).not.toBe(0);
    expect(big.note).toMatch(/file size/);
    const mem = await shell.exec('x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo ${#x}', { timeoutMs: 60_000 });
    expect(mem.exitCode).not.toBe(0);
    expect(mem.note).toMatch(/memory/);
    // A SIGKILL that is not the OOM killer's is not called memory where the cgroup can be read.
    const [c] = await containersFor(t.root);
    const cgroups = [`/sys/fs/cgroup/memory/docker/${c.Id}`, `/sys/fs/cgroup/docker/${c.Id}`, `/sys/fs/cgroup/system.slice/docker-${c.Id}.scope`];
    const own = await shell.exec('kill -9 $$');
    expect(own.exitCode).toBe(137);
    if (cgroups.some((p) => existsSync(p))) expect(own.note).toBeUndefined();
    // Last: the sleeps that did start outlive the command in a kept container, as in a shell.
    const forks = await shell.exec('for i in $(seq 1 40); do sleep 1 & done; wait', { timeoutMs: 30_000 });
    expect(forks.stderr).toMatch(/fork|resource/i);
    expect(forks.note).toMatch(/pids/);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await shell.exec('echo alive')).stdout).toBe('alive\n');
  });
});

describe.skipIf(!DOCKER_HOST)("SubprocessSandbox limits, one container per command, against a real Docker Engine", () => {
  it('forks past pids are refused and named in the note; seq and ps are in the image', async () => {
    const t = tree();
    const sandbox = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, limits: { pids: 16 } });
    const shell = new SandboxShell(sandbox, { cwd: t.root });
    const r = await shell.exec('for i in $(seq 1 40); do sleep 5 & done; wait', { timeoutMs: 30_000 });
    expect(r.stderr).toMatch(/fork|resource/i);
    expect(r.note).toMatch(/pids/);
    expect((await shell.exec('ps -o pid | wc -l')).exitCode).toBe(0);
    expect(await containersGone(t.root)).toEqual([]);
  });
});

/** A DELETE on the real engine's socket. */
function engineDelete(path) {
  return import('node:http').then(({ default: http }) => new Promise((resolve, reject) => {
    const req = http.request({ socketPath: DOCKER_HOST.replace(/^unix:\/\//, ''), path, method: 'DELETE', headers: { host: 'docker' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  }));
}

describe.skipIf(!DOCKER_HOST)('SubprocessSandbox protect against a real Docker Engine', () => {
  for (const reuse of ['command', 'session']) {
    it(`every .git under the mounted cwd is read-only in the container (reuse: '${reuse}')`, async () => {
      const t = tree();
      for (const d of ['.git/hooks', 'vendor/lib/.git/hooks']) mkdirSync(join(t.root, d), { recursive: true });
      mkdirSync(join(t.root, 'wt'));
      writeFileSync(join(t.root, 'wt/.git'), 'gitdir: ../.git\n');
      const kept = (o) => { const s = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse, ...o }); cleanups.push(() => s.close()); return s; };
      const shell = new SandboxShell(kept({}), { cwd: t.root });
      const r = await shell.exec('echo evil > .git/hooks/pre-commit; echo evil > vendor/lib/.git/hooks/pre-commit; echo x >> wt/.git; echo ok > vendor/lib/plain.txt');
      expect(r.stderr).toMatch(/Read-only file system/);
      expect(existsSync(join(t.root, '.git/hooks/pre-commit'))).toBe(false);
      expect(existsSync(join(t.root, 'vendor/lib/.git/hooks/pre-commit'))).toBe(false);
      expect(readFileSync(join(t.root, 'wt/.git'), 'utf8')).toBe('gitdir: ../.git\n');
      expect(readFileSync(join(t.root, 'vendor/lib/plain.txt'), 'utf8')).toBe('ok\n');
      // The directories above a protected .git cannot be renamed to carry it away.
      const moved = await shell.exec('mv vendor vendor.x; mv vendor/lib vendor/lib.x; ls');
      expect(moved.stdout).toContain('vendor\n');
      expect(existsSync(join(t.root, 'vendor/lib/.git/hooks'))).toBe(true);
      // A .git planted as a link to a directory outside cwd is never mounted (a bind would follow it).
      const outside = tree();
      writeFileSync(join(outside.root, 'secret'), 'SECRET');
      await shell.exec(`mkdir -p planted && ln -s ${outside.root} planted/.git`);
      const next = new SandboxShell(kept({}), { cwd: t.root });
      expect((await next.exec('cat planted/.git/secret')).stdout).not.toContain('SECRET');
      // protect: [] is the reference's behaviour: all of cwd writable.
      const open = new SandboxShell(kept({ protect: [] }), { cwd: t.root });
      expect((await open.exec('echo fine > .git/hooks/pre-commit')).exitCode).toBe(0);
    });

    it(`a .git a command makes is removed when it ends, and the note says so (reuse: '${reuse}')`, async () => {
      // The attack: a repository (or a gitdir: file) whose core.fsmonitor the host's next
      // `git status` runs outside the container. The image has no git: the files are written.
      const t = tree({ 'keep/.git/HEAD': 'ref: refs/heads/main\n' });
      const s = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse });
      cleanups.push(() => s.close());
      const shell = new SandboxShell(s, { cwd: t.root });
      const plant = "mkdir -p src/.git/objects src/.git/refs sub && echo 'ref: refs/heads/main' > src/.git/HEAD && printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > src/.git/config && echo 'gitdir: ../src/.git' > sub/.git && echo planted";
      const r = await shell.exec(plant);
      expect(r.stdout, r.stderr).toBe('planted\n');
      expect(r.note).toMatch(/^removed (src|sub)\/\.git, (src|sub)\/\.git: made by the command, and protected$/);
      expect(existsSync(join(t.root, 'src/.git'))).toBe(false);
      expect(existsSync(join(t.root, 'sub/.git'))).toBe(false);
      expect(existsSync(join(t.root, 'keep/.git/HEAD'))).toBe(true);
      // protect: [] keeps what the command made (an agent's own clone).
      const s2 = new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, reuse, protect: [] });
      cleanups.push(() => s2.close());
      const kept = await new SandboxShell(s2, { cwd: t.root }).exec(plant);
      expect(kept.note ?? '').not.toContain('removed');
      expect(existsSync(join(t.root, 'src/.git/config'))).toBe(true);
    });
  }
});

describe('SubprocessSandbox protect with a daemon on TCP', () => {
  it('is refused unless it is []: the files are on the daemon\'s machine', () => {
    expect(() => new SubprocessSandbox({ image: IMAGE, dockerHost: 'tcp://127.0.0.1:1' })).toThrow(/protect: \[\]/);
    expect(() => new SubprocessSandbox({ image: IMAGE, dockerHost: 'tcp://127.0.0.1:1', protect: [] })).not.toThrow();
  });
});
