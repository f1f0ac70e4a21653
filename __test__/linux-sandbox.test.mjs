// LinuxSandbox through the public API, each case an escape attempt that must fail: writes
// outside cwd, .git, the home directory, the host's loopback, namespace syscalls, a process that
// would outlive an abort, and the limits. Reported as skipped where the kernel lacks namespaces.
import { describe, it, expect, afterEach } from 'vitest';
import net from 'node:net';
import http from 'node:http';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LinuxSandbox, SandboxShell, createShellTool, createCredentialBroker, ConfigurationError, WorkspaceError } from 'corral';
import { linuxSandboxUsable as usable, tempTree } from './helpers.mjs';

const probe = LinuxSandbox.probe();

const hasCurl = (() => { try { execFileSync('curl', ['--version']); return true; } catch { return false; } })();

const cleanups = [];
afterEach(() => { while (cleanups.length) cleanups.pop()(); });
const tree = (files) => { const t = tempTree(files); cleanups.push(t.cleanup); return t; };

describe('LinuxSandbox.probe and options', () => {
  it('probe() reports each layer the machine offers with the documented shape', () => {
    expect(Object.keys(probe).sort()).toEqual(['cgroups', 'landlock', 'mountNamespaces', 'netNamespaces', 'pidNamespaces', 'seccomp', 'userNamespaces']);
    for (const k of ['userNamespaces', 'mountNamespaces', 'pidNamespaces', 'netNamespaces', 'seccomp', 'landlock']) expect(typeof probe[k]).toBe('boolean');
    expect([null, 'v1', 'v2']).toContain(probe.cgroups);
  });

  it('bad options are ConfigurationErrors naming the option', () => {
    for (const [o, names] of [
      [{ limits: { pids: 0 } }, /pids/], [{ limits: { cpu: 1 } }, /cpu/], [{ network: 'default' }, /network/],
      [{ network: { allow: ['https://x.com/'] } }, /https:\/\/x\.com/], [{ writable: ['rel'] }, /writable/],
      [{ protec: ['.git'] }, /protec.*protect/], [{ broker: {} }, /broker/], [{ hostUid: 0 }, /hostUid/],
    ]) {
      let e;
      try { new LinuxSandbox(o); } catch (x) { e = x; }
      expect(e, JSON.stringify(o)).toBeInstanceOf(ConfigurationError);
      expect(e.message, JSON.stringify(o)).toMatch(names);
    }
    expect(() => new LinuxSandbox({ protec: [] })).toThrow(/protect/);
  });
});

describe.skipIf(!usable)('LinuxSandbox on this kernel', () => {
  const shellIn = (root, options) => new SandboxShell(new LinuxSandbox(options), { cwd: root });

  it('the cwd is writable, the rest of the host is read-only and .git stays read-only', async () => {
    const t = tree({ '.git/config': '[core]\n', 'a.txt': 'host\n' });
    const r = await shellIn(t.root).exec('cat a.txt && echo new > b.txt; echo x > ../outside.txt; echo evil >> .git/config; echo y > /etc/corral-escape; true');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('host\n');
    expect(readFileSync(join(t.root, 'b.txt'), 'utf8')).toBe('new\n');
    expect(r.stderr).toMatch(/Read-only file system/);
    expect(readFileSync(join(t.root, '.git/config'), 'utf8')).toBe('[core]\n');
    expect(existsSync('/etc/corral-escape')).toBe(false);
  });

  it('writable paths can be written, hidden paths look empty and /tmp is private', async () => {
    const t = tree();
    const extra = realpathSync(mkdtempSync(join(tmpdir(), 'corral-writable-')));
    const secret = join(t.dir, 'secret');
    mkdirSync(secret);
    writeFileSync(join(secret, 'key'), 'hunter2');
    cleanups.push(() => rmSync(extra, { recursive: true, force: true }));
    const shell = shellIn(t.root, { writable: [extra], hide: [secret] });
    const r = await shell.exec(`echo cached > ${extra}/c; ls -A ${secret}; cat ${secret}/key; echo tmp > /tmp/corral-private-probe; true`);
    expect(readFileSync(join(extra, 'c'), 'utf8')).toBe('cached\n');
    expect(r.stdout).toBe('');
    expect(r.stdout + r.stderr).not.toContain('hunter2');
    expect(existsSync('/tmp/corral-private-probe')).toBe(false);
  });

  it("a listener on the host's loopback cannot be reached and only lo exists", async () => {
    const t = tree();
    const server = net.createServer((s) => s.end('reached\n'));
    await new Promise((res) => server.listen(0, '127.0.0.1', res));
    cleanups.push(() => server.close());
    const { port } = server.address();
    const r = await shellIn(t.root).exec(`ls /sys/class/net; (exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3) 2>&1 || echo refused`, { timeoutMs: 10_000 });
    expect(r.stdout).not.toContain('reached');
    // /dev/tcp is bash-only; sh reports a missing file instead, which is also "not reached".
    expect(r.stdout.split('\n')[0]).toBe('lo');
  });

  it('an abort kills a background child that would outlive the command', async () => {
    const t = tree();
    const tool = createShellTool(shellIn(t.root), { needsApproval: false });
    const controller = new AbortController();
    const running = tool.execute({ command: '(setsid sh -c "sleep 2; touch late" &) ; touch started; sleep 30' }, { abortSignal: controller.signal, signal: controller.signal });
    // The command and its background child started (the positive control).
    for (let i = 0; i < 200 && !existsSync(join(t.root, 'started')); i++) await sleep(25);
    expect(existsSync(join(t.root, 'started'))).toBe(true);
    controller.abort();
    await running.catch((e) => e);
    await sleep(3000);
    expect(existsSync(join(t.root, 'late'))).toBe(false);
  });

  it('a command stopped by a limit resolves with a note naming the limit, passed on by the shell tool', async () => {
    const t = tree();
    const tool = createShellTool(shellIn(t.root, { limits: { fileSizeBytes: 4096, cpuSeconds: 1 }, allowWeaker: true }), { needsApproval: false });
    const big = await tool.execute({ command: 'head -c 100000 /dev/zero > big.bin' });
    expect(big.note).toMatch(/file size/);
    const spin = await tool.execute({ command: 'while :; do :; done' });
    expect(spin.note).toMatch(/cpu/);
  });

  it('hostUid and allowUnixSockets: root inside only, files root\'s on disk as root, unix sockets refused by default', async () => {
    expect(() => new LinuxSandbox({ hostUid: 0 })).toThrow(ConfigurationError);
    expect(() => new LinuxSandbox({ allowUnixSocket: true })).toThrow(/allowUnixSockets/);
    const t = tree();
    const r = await shellIn(t.root, {}).exec("id -u; echo x > made.txt; perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\\n\"'");
    expect(r.stderr).toContain('socket: Operation not permitted');
    if (process.getuid() === 0) {
      expect(r.stdout.trim()).toBe('0');
      expect(statSync(join(t.root, 'made.txt')).uid).toBe(0);
      // The host's root-only files are not the command's.
      const dir = mkdtempSync('/var/tmp/corral-secret-');
      writeFileSync(join(dir, 'key'), 'PRIVATE', { mode: 0o600 });
      try {
        const read = await shellIn(t.root, { hostUid: 12345 }).exec(`cat ${join(dir, 'key')}`);
        expect(read.stdout).not.toContain('PRIVATE');
        expect(read.stderr).toContain('Permission denied');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const allowed = await shellIn(t.root, { allowUnixSockets: true }).exec("perl -MSocket -e 'socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die; print \"made\"'");
    expect(allowed.stdout).toBe('made');
  });

  it('a missing writable path is a ConfigurationError at construction naming it, never a message to the model', () => {
    expect(() => new LinuxSandbox({ writable: ['/nonexistent/corral-w'] })).toThrow(ConfigurationError);
    expect(() => new LinuxSandbox({ writable: ['/nonexistent/corral-w'] })).toThrow(/\/nonexistent\/corral-w/);
  });

  it.skipIf(!hasCurl)('network { allow } with a broker: allowed hosts through the broker with its header, others refused, no way around it', async () => {
    const t = tree();
    const seen = [];
    const server = http.createServer((req, res) => { seen.push(req.headers.authorization); res.end('upstream'); });
    await new Promise((res) => server.listen(0, '127.0.0.2', res));
    cleanups.push(() => server.close());
    const up = `127.0.0.2:${server.address().port}`;
    const broker = await createCredentialBroker({ rules: { '127.0.0.2': { authorization: 'Bearer corral-linux-secret' } }, allowPrivate: ['127.0.0.2', '127.0.0.3'] });
    const sandbox = new LinuxSandbox({ network: { allow: ['127.0.0.3'] }, broker });
    const shell = new SandboxShell(sandbox, { cwd: t.root });
    try {
      const r = await shell.exec(`echo $HTTP_PROXY; curl -sS --max-time 10 http://${up}/; echo; curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.4:1/; echo; curl -sS --max-time 3 --noproxy '*' http://${up}/ || echo direct-refused`, { timeoutMs: 30_000 });
      const lines = r.stdout.split('\n');
      expect(lines[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(lines[1]).toBe('upstream');
      expect(lines[2]).toBe('403');
      expect(lines[3]).toBe('direct-refused');
      expect(seen).toEqual(['Bearer corral-linux-secret']);
      expect(r.stdout).not.toContain('corral-linux-secret');
    } finally {
      await sandbox.close();
      await broker.close();
    }
  });
});
