// Sandboxed shells through the public API: SandboxShell's environment rules with NoopSandbox and
// with an adapter written in JS, the abort signal, SubprocessSandbox's option checks, a fake
// Docker Engine API server on a unix socket (the allowlisted-egress wiring on an Engine >= 25.0.5,
// and every refusal), and a real Docker Engine when CORRAL_DOCKER_HOST names one
// (scripts/dockerd-test.sh: Engine 20.10 on a private socket, no bridge, image corral-busybox).
// Every socket and listener here is a unix socket or on 127.0.0.x.
import { describe, it, expect } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SandboxShell,
  NoopSandbox,
  SubprocessSandbox,
  createShellTool,
  createCredentialBroker,
  ConfigurationError,
  WorkspaceError,
} from 'corral';
import { perTestTrees, recordingAdapter, OK } from './helpers.mjs';
import { DOCKER_HOST, IMAGE, engineGet, containersFor, containersGone } from './docker-engine.mjs';

const EGRESS_UNSUPPORTED = 'LOUSHO_SANDBOX_EGRESS_UNSUPPORTED';
const SECRET = `corral-sbx-secret-${randomBytes(8).toString('hex')}`;
const UP = '127.0.0.2'; // upstream for a broker rule host (in allowPrivate)
const ALLOWED = '127.0.0.3'; // upstream on the sandbox's allow list only (in allowPrivate)
// The fake engine's networks: gateways on loopback, so broker.listen binds 127.0.0.x only.
const GATEWAY = '127.0.0.9';
const SUBNET = '127.0.0.8/29';
const IN_SUBNET = '127.0.0.10'; // a "container" address inside SUBNET
const REUSED_GATEWAY = '127.0.0.17';
const REUSED_SUBNET = '127.0.0.16/29';

// ---- fixtures ------------------------------------------------------------------------------

const { tree, cleanups } = perTestTrees();

/** Sets process.env[name] for the test only. */
function setEnv(name, value) {
  const before = process.env[name];
  process.env[name] = value;
  cleanups.push(() => {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  });
}

/** Parses `env` output into an object (values without newlines only, which is all these tests set). */
const parseEnv = (text) => Object.fromEntries(text.split('\n').filter((l) => l.includes('=')).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));


async function broker(options) {
  const b = await createCredentialBroker(options);
  cleanups.push(() => b.close());
  return b;
}

const ruleBroker = () => broker({ rules: { [UP]: { authorization: `Bearer ${SECRET}` } }, allowPrivate: [UP, ALLOWED] });

/** An HTTP server on host:0 answering with JSON describing the request. */
async function echoUpstream(host) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      // Not text: the broker scrubs injected values from textual bodies, and the tests read what
      // the upstream really got.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(JSON.stringify({ url: req.url, headers: req.headers }));
    });
  });
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(0, host, resolve); });
  cleanups.push(() => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  return server.address().port;
}

/** A plain-HTTP request in absolute form through `proxy`, from `localAddress`. Resolves { status, body }. */
function viaProxy(url, proxy, localAddress) {
  const p = new URL(proxy);
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: p.hostname, port: p.port, path: url, headers: { host: u.host }, agent: false, localAddress }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('no answer from the proxy')));
    req.end();
  });
}

/** True when nothing listens on host:port (the connection is refused). */
const refusesConnections = (host, port) => new Promise((resolve) => {
  const s = net.connect({ host, port });
  s.on('connect', () => { s.destroy(); resolve(false); });
  s.on('error', (e) => resolve(e.code === 'ECONNREFUSED'));
});

// ---- a fake Docker Engine API server on a unix socket ---------------------------------------

/** The path of a call without its /v<api> prefix and query. */
const unversioned = (path) => path.replace(/^\/v\d+\.\d+(?=\/)/, '').split('?')[0];

const frame = (stream, text) => {
  const payload = Buffer.from(text);
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(payload.length, 4);
  return Buffer.concat([head, payload]);
};

/**
 * Answers the Engine API endpoints SubprocessSandbox uses and records every call as
 * { method, path (with version prefix and query), body (parsed JSON or null) }.
 * `networks`: existing networks as Engine objects ({ Name, Id, Internal, IPAM }); `createdIpam`: the
 * IPAM a created network gets (default: gateway 127.0.0.9 on 127.0.0.8/29).
 */
async function fakeEngine(options = {}) {
  const cfg = {
    version: '28.0.4',
    apiVersion: '1.47',
    operatingSystem: 'Ubuntu 24.04.2 LTS',
    securityOptions: ['name=apparmor', 'name=seccomp,profile=builtin', 'name=cgroupns'],
    networks: [],
    exitCode: 0,
    ...options,
  };
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-fake-engine-')));
  const socket = join(dir, 'docker.sock');
  const calls = [];
  const networks = cfg.networks.map((n) => structuredClone(n));
  let containers = 0;
  let created = 0;

  const send = (res, status, body, headers = {}) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };
  const findNet = (key) => networks.find((n) => n.Name === key || n.Id === key);

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString();
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch { body = raw; }
      calls.push({ method: req.method, path: req.url, body });
      if (req.url === '/_ping') return send(res, 200, undefined, { 'api-version': cfg.apiVersion, 'content-type': 'text/plain' });
      if (!/^\/v\d+\.\d+\//.test(req.url)) return send(res, 404, { message: 'page not found' });
      const seg = unversioned(req.url).split('/').filter(Boolean);
      const route = `${req.method} ${seg.map((s, i) => (i === 1 && seg.length > 1 && !['create', 'json'].includes(s) ? ':id' : s)).join('/')}`;
      switch (route) {
        case 'GET version': return send(res, 200, { Version: cfg.version, ApiVersion: cfg.apiVersion });
        case 'GET info': return send(res, 200, { OperatingSystem: cfg.operatingSystem, SecurityOptions: cfg.securityOptions });
        case 'GET networks/:id': {
          const n = findNet(decodeURIComponent(seg[1]));
          return n ? send(res, 200, n) : send(res, 404, { message: `network ${seg[1]} not found` });
        }
        case 'POST networks/create': {
          if (findNet(body.Name)) return send(res, 409, { message: `network with name ${body.Name} already exists` });
          created += 1;
          const n = {
            Name: body.Name,
            Id: `fakenet${created}`,
            Driver: body.Driver ?? 'bridge',
            Internal: Boolean(body.Internal),
            EnableIPv6: Boolean(body.EnableIPv6),
            Labels: body.Labels ?? {},
            IPAM: cfg.createdIpam ?? { Driver: 'default', Config: [{ Subnet: SUBNET, Gateway: GATEWAY }] },
          };
          networks.push(n);
          return send(res, 201, { Id: n.Id, Warning: '' });
        }
        case 'DELETE networks/:id': {
          const n = findNet(decodeURIComponent(seg[1]));
          if (!n) return send(res, 404, { message: 'no such network' });
          networks.splice(networks.indexOf(n), 1);
          return send(res, 204);
        }
        case 'POST containers/create':
          containers += 1;
          return send(res, 201, { Id: `fakecontainer${containers}`, Warnings: [] });
        case 'POST containers/:id/start':
        case 'POST containers/:id/kill':
        case 'DELETE containers/:id':
          return send(res, 204);
        case 'POST containers/:id/wait':
          return send(res, 200, { StatusCode: cfg.exitCode, Error: null });
        default:
          return send(res, 404, { message: `fake engine: no route for ${req.method} ${req.url}` });
      }
    });
  });
  // POST /containers/<id>/attach asks for the connection to be hijacked (101, then raw frames).
  server.on('upgrade', (req, sock) => {
    calls.push({ method: req.method, path: req.url, body: null });
    sock.write('HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n');
    const withStdin = /[?&]stdin=1\b/.test(req.url);
    if (!withStdin) {
      sock.end(Buffer.concat([frame(1, 'fake-'), frame(2, 'warn\n'), frame(1, 'out\n')]));
      return;
    }
    // Like `cat`: echo stdin on stdout once the client closes it.
    const input = [];
    sock.on('data', (c) => input.push(c));
    sock.on('end', () => sock.end(frame(1, `stdin:${Buffer.concat(input).toString()}`)));
  });
  server.on('error', () => {});
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(socket, resolve); });
  cleanups.push(() => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => { rmSync(dir, { recursive: true, force: true }); resolve(); });
  }));
  return {
    host: `unix://${socket}`,
    calls,
    networks,
    /** The calls with this method whose unversioned path starts with `prefix`. */
    callsTo: (method, prefix) => calls.filter((c) => c.method === method && unversioned(c.path).startsWith(prefix)),
  };
}

/** `Env` of a container create body as an object. */
const envOf = (createCall) => Object.fromEntries(createCall.body.Env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));

// ---- SandboxShell over NoopSandbox (on the host) ------------------------------------------

describe('SandboxShell over NoopSandbox', () => {
  it('gives a host command the base environment (PATH, HOME) but not a secret from process.env', async () => {
    const t = tree();
    setEnv('CORRAL_SBX_SECRET', SECRET);
    const r = await new SandboxShell(new NoopSandbox(), { cwd: t.root }).exec('env');
    expect(r.exitCode).toBe(0);
    const env = parseEnv(r.stdout);
    expect(env.PATH).toBe(process.env.PATH);
    expect(env.HOME).toBe(process.env.HOME);
    expect(env.CORRAL_SBX_SECRET).toBeUndefined();
    expect(r.stdout).not.toContain(SECRET);
  });

  it('adds the given env and copies the names listed in inheritEnv, and nothing else from the host', async () => {
    const t = tree();
    setEnv('CORRAL_SBX_SECRET', SECRET);
    setEnv('CORRAL_SBX_LISTED', 'listed-value');
    const shell = new SandboxShell(new NoopSandbox(), { cwd: t.root, env: { GIVEN: 'yes' }, inheritEnv: ['CORRAL_SBX_LISTED'] });
    const env = parseEnv((await shell.exec('env', { env: { PER_CALL: 'call' } })).stdout);
    expect(env).toMatchObject({ GIVEN: 'yes', CORRAL_SBX_LISTED: 'listed-value', PER_CALL: 'call', PATH: process.env.PATH });
    expect(env.CORRAL_SBX_SECRET).toBeUndefined();
  });

  it('inheritEnv: true gives a host command the whole host environment', async () => {
    const t = tree();
    setEnv('CORRAL_SBX_SECRET', SECRET);
    const shell = new SandboxShell(new NoopSandbox(), { cwd: t.root, env: { GIVEN: 'yes' }, inheritEnv: true });
    const env = parseEnv((await shell.exec('env')).stdout);
    expect(env.CORRAL_SBX_SECRET).toBe(SECRET);
    expect(env.GIVEN).toBe('yes');
    for (const [k, v] of Object.entries(process.env)) {
      if (!v.includes('\n') && !['_', 'PWD', 'OLDPWD', 'SHLVL'].includes(k)) expect(env[k], k).toBe(v);
    }
  });

  it('runs in the shell cwd or a per-call cwd below it, with exit code and both streams', async () => {
    const t = tree();
    const shell = new SandboxShell(new NoopSandbox(), { cwd: t.root });
    expect(await shell.exec('pwd; echo err >&2; exit 4')).toMatchObject({ stdout: `${t.root}\n`, stderr: 'err\n', exitCode: 4, timedOut: false });
    expect((await shell.exec('pwd', { cwd: 'sub' })).stdout).toBe(`${join(t.root, 'sub')}\n`);
  });
});

// ---- SandboxShell over an adapter written in JS -------------------------------------------

describe('SandboxShell over a JS adapter', () => {
  it('names sh as its shell', () => {
    const t = tree();
    expect(new SandboxShell(recordingAdapter(), { cwd: t.root }).shell).toBe('sh');
    expect(new SandboxShell(new NoopSandbox(), { cwd: t.root }).shell).toBe('sh');
  });

  it('passes the command, the absolute cwd, timeoutMs and stdin in the request, and returns the adapter result', async () => {
    const t = tree();
    const a = recordingAdapter(() => ({ stdout: 'out', stderr: 'err', exitCode: 7, timedOut: false }));
    const shell = new SandboxShell(a, { cwd: t.root });
    const r = await shell.exec('make test', { timeoutMs: 4321, stdin: 'input' });
    expect(r).toMatchObject({ stdout: 'out', stderr: 'err', exitCode: 7, timedOut: false });
    expect(a.requests).toEqual([{ command: 'make test', cwd: t.root, env: {}, timeoutMs: 4321, stdin: 'input' }]);
    // Without a timeout the request still carries one.
    await shell.exec('true');
    expect(a.requests[1].timeoutMs).toBeGreaterThan(0);
    expect(a.requests[1].stdin).toBeUndefined();
  });

  it('gives the adapter only the given variables and the inheritEnv names, never PATH, HOME or a secret', async () => {
    const t = tree();
    setEnv('CORRAL_SBX_SECRET', SECRET);
    setEnv('CORRAL_SBX_LISTED', 'listed-value');
    const a = recordingAdapter();
    const shell = new SandboxShell(a, { cwd: t.root, env: { GIVEN: 'yes' }, inheritEnv: ['CORRAL_SBX_LISTED', 'CORRAL_SBX_UNSET'] });
    await shell.exec('env', { env: { PER_CALL: 'call' } });
    expect(a.requests[0].env).toEqual({ GIVEN: 'yes', CORRAL_SBX_LISTED: 'listed-value', PER_CALL: 'call' });
  });

  it('inheritEnv: true does not give a non-host adapter the host environment', async () => {
    const t = tree();
    setEnv('CORRAL_SBX_SECRET', SECRET);
    const a = recordingAdapter();
    await new SandboxShell(a, { cwd: t.root, env: { GIVEN: 'yes' }, inheritEnv: true }).exec('env');
    expect(a.requests[0].env).toEqual({ GIVEN: 'yes' });
    expect(JSON.stringify(a.requests[0])).not.toContain(SECRET);
  });

  it('resolves a per-call cwd inside the shell cwd to an absolute path', async () => {
    const t = tree();
    const a = recordingAdapter();
    const shell = new SandboxShell(a, { cwd: t.root });
    await shell.exec('pwd', { cwd: 'sub' });
    await shell.exec('pwd', { cwd: 'sub/..' });
    expect(a.requests.map((r) => r.cwd)).toEqual([join(t.root, 'sub'), t.root]);
  });

  it('refuses a per-call cwd that leaves the shell cwd, and the adapter is never called', async () => {
    const t = tree();
    symlinkSync(t.dir, join(t.root, 'out-link'));
    const a = recordingAdapter();
    const shell = new SandboxShell(a, { cwd: t.root });
    for (const cwd of ['..', 'sub/../..', t.dir, 'out-link']) {
      const e = await shell.exec('touch escaped', { cwd }).catch((err) => err);
      expect(e, cwd).toBeInstanceOf(WorkspaceError);
      expect(e.code, cwd).toBe('OutsideWorkspace');
    }
    expect(a.calls).toHaveLength(0);
  });

  it('refuses a relative cwd, or one that is a file here, at construction with a ConfigurationError', () => {
    const t = tree({ 'f.txt': 'x' });
    expect(() => new SandboxShell(recordingAdapter(), { cwd: 'relative/dir' })).toThrow(ConfigurationError);
    expect(() => new SandboxShell(recordingAdapter(), { cwd: join(t.root, 'f.txt') })).toThrow(ConfigurationError);
    expect(() => new SandboxShell({}, { cwd: t.root })).toThrow(ConfigurationError);
  });

  it('accepts a cwd that exists only inside the sandbox, as the specification\'s example does, and joins per-call cwds to it', async () => {
    const a = recordingAdapter();
    const shell = new SandboxShell(a, { cwd: '/abs/path/to/project' });
    await shell.exec('make');
    await shell.exec('make', { cwd: 'sub/./deeper/..' });
    expect(a.requests.map((r) => r.cwd)).toEqual(['/abs/path/to/project', '/abs/path/to/project/sub']);
    await expect(shell.exec('make', { cwd: '../x' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(a.calls).toHaveLength(2);
  });

  it('passes an AbortSignal that fires when the exec is aborted, and returns the adapter answer', async () => {
    const t = tree();
    const a = recordingAdapter((request, signal) => new Promise((resolve) => {
      signal.addEventListener('abort', () => resolve({ stdout: 'stopped', stderr: '', exitCode: null, timedOut: false, aborted: true }), { once: true });
    }));
    const controller = new AbortController();
    const running = new SandboxShell(a, { cwd: t.root }).exec('sleep 100', { signal: controller.signal });
    await sleep(100);
    expect(a.calls).toHaveLength(1);
    expect(a.calls[0].signal).toBeInstanceOf(AbortSignal);
    expect(a.calls[0].signal.aborted).toBe(false);
    controller.abort();
    const r = await running;
    expect(a.calls[0].signal.aborted).toBe(true);
    expect(r).toMatchObject({ aborted: true, stdout: 'stopped' });
  });

  it('an already-aborted signal never calls the adapter', async () => {
    const t = tree();
    const a = recordingAdapter();
    const r = await new SandboxShell(a, { cwd: t.root }).exec('touch x', { signal: AbortSignal.abort() });
    expect(r.aborted).toBe(true);
    expect(a.calls).toHaveLength(0);
  });

  it('stops waiting on an adapter that ignores the signal: exec resolves aborted within about 2 s while the adapter is still pending', async () => {
    const t = tree();
    let settled = false;
    let finish;
    const a = recordingAdapter(() => new Promise((resolve) => {
      finish = () => { settled = true; resolve(OK); };
    }));
    cleanups.push(() => finish?.());
    const controller = new AbortController();
    const running = new SandboxShell(a, { cwd: t.root }).exec('sleep 100', { signal: controller.signal, timeoutMs: 60_000 });
    await sleep(100);
    const t0 = Date.now();
    controller.abort();
    const r = await running;
    const elapsed = Date.now() - t0;
    expect(r.aborted).toBe(true);
    expect(elapsed).toBeLessThan(2500);
    expect(settled).toBe(false);
    expect(a.calls[0].signal.aborted).toBe(true);
  });

  it('an adapter that throws makes exec reject with its message', async () => {
    const t = tree();
    const a = recordingAdapter(() => { throw new WorkspaceError('the sandbox is gone', 'Io'); });
    const e = await new SandboxShell(a, { cwd: t.root }).exec('ls').catch((err) => err);
    expect(e).toBeInstanceOf(WorkspaceError);
    expect(e.message).toContain('the sandbox is gone');
  });

  it('createShellTool over a SandboxShell runs the command through the adapter with the tool options', async () => {
    const t = tree();
    const a = recordingAdapter((request) => ({ stdout: `ran ${request.command}\n`, stderr: '', exitCode: 0, timedOut: false }));
    const tool = createShellTool(new SandboxShell(a, { cwd: t.root, env: { GIVEN: 'yes' } }), { needsApproval: false, defaultTimeoutMs: 1234, cwd: 'sub', env: { NODE_ENV: 'test' } });
    expect(await tool.execute({ command: 'make test' })).toEqual({ exitCode: 0, stdout: 'ran make test\n', stderr: '' });
    expect(a.requests).toEqual([{ command: 'make test', cwd: join(t.root, 'sub'), env: { GIVEN: 'yes', NODE_ENV: 'test' }, timeoutMs: 1234 }]);
  });

  it('createShellTool over a SandboxShell with NoopSandbox runs a real command', async () => {
    const t = tree();
    const tool = createShellTool(new SandboxShell(new NoopSandbox(), { cwd: t.root }), { needsApproval: false });
    const r = await tool.execute({ command: 'echo hi; pwd' });
    expect(r).toMatchObject({ exitCode: 0, stdout: `hi\n${t.root}\n` });
  });
});

// ---- SubprocessSandbox options ----------------------------------------------------------------

describe('SubprocessSandbox options', () => {
  const image = 'corral-busybox:latest';

  it('refuses a URL, a host with a port, a path or an empty string in network.allow with a ConfigurationError', () => {
    for (const bad of ['https://api.github.com', 'api.github.com:443', 'api.github.com/repos', '', 'not a host', '*']) {
      const e = (() => { try { new SubprocessSandbox({ image, network: { allow: ['ok.example.com', bad] } }); } catch (err) { return err; } })();
      expect(e, JSON.stringify(bad)).toBeInstanceOf(ConfigurationError);
      if (bad) expect(e.message, bad).toContain(bad);
    }
  });

  it('keeps the validated host names normalised on sandbox.network', () => {
    const s = new SubprocessSandbox({ image, network: { allow: ['API.GitHub.com', '*.NPMJS.org', 'example.com.', '127.0.0.3'] } });
    expect(s.network).toEqual({ allow: ['api.github.com', '*.npmjs.org', 'example.com', '127.0.0.3'] });
    expect(new SubprocessSandbox({ image }).network).toBe('none');
    expect(new SubprocessSandbox({ image, network: 'default' }).network).toBe('default');
  });

  it('refuses a missing image, a bad network policy, a bad networkName, a bad dockerHost and a broker not from createCredentialBroker', () => {
    expect(() => new SubprocessSandbox({})).toThrow(ConfigurationError);
    expect(() => new SubprocessSandbox({ image, network: 'bridge' })).toThrow(ConfigurationError);
    for (const limits of [{ pids: 0 }, { memoryBytes: -1 }, { cpuSeconds: 1e12 }, { memory: 1 }]) expect(() => new SubprocessSandbox({ image, limits }), JSON.stringify(limits)).toThrow(ConfigurationError);
    expect(new SubprocessSandbox({ image, limits: { memoryBytes: 64 << 20, pids: 64 } })).toBeInstanceOf(SubprocessSandbox);
    expect(() => new SubprocessSandbox({ image, networkName: 'bad name' })).toThrow(ConfigurationError);
    expect(() => new SubprocessSandbox({ image, dockerHost: 'docker.sock' })).toThrow(ConfigurationError);
    expect(() => new SubprocessSandbox({ image, network: { allow: ['a.com'] }, broker: { url: 'http://127.0.0.1:1' } })).toThrow(ConfigurationError);
  });

  it('names the egress network networkName, or lousho-egress-<random> when none is given', () => {
    expect(new SubprocessSandbox({ image, networkName: 'agents-egress' }).networkName).toBe('agents-egress');
    const a = new SubprocessSandbox({ image }).networkName;
    const b = new SubprocessSandbox({ image }).networkName;
    expect(a).toMatch(/^lousho-egress-[0-9a-z]+$/);
    expect(a).not.toBe(b);
  });
});

// ---- against a fake Docker Engine API server ----------------------------------------------

describe('SubprocessSandbox against a fake Engine API server', () => {
  it('runs a command as sh -c in a new container with the cwd bind-mounted, no network, only the given env, and removes it', async () => {
    const t = tree();
    const engine = await fakeEngine({ exitCode: 3, apiVersion: '1.41', version: '20.10.24+dfsg1' });
    setEnv('CORRAL_SBX_SECRET', SECRET);
    const shell = new SandboxShell(new SubprocessSandbox({ image: 'img:1', dockerHost: engine.host }), { cwd: t.root, env: { GIVEN: 'yes' } });
    const r = await shell.exec('make test', { cwd: 'sub', timeoutMs: 30_000 });
    expect(r).toMatchObject({ stdout: 'fake-out\n', stderr: 'warn\n', exitCode: 3, timedOut: false });
    const sub = join(t.root, 'sub');
    // The API version is negotiated with /_ping: 1.41 here, and every other path is versioned.
    expect(engine.calls[0]).toMatchObject({ method: 'GET', path: '/_ping' });
    expect(engine.calls.slice(1).every((c) => c.path.startsWith('/v1.41/'))).toBe(true);
    expect(engine.calls.map((c) => `${c.method} ${unversioned(c.path)}`)).toEqual([
      'GET /_ping',
      'POST /containers/create',
      'POST /containers/fakecontainer1/attach',
      'POST /containers/fakecontainer1/start',
      'POST /containers/fakecontainer1/wait',
      'DELETE /containers/fakecontainer1',
    ]);
    const create = engine.callsTo('POST', '/containers/create')[0].body;
    expect(create).toMatchObject({
      Image: 'img:1',
      Entrypoint: ['sh', '-c'],
      Cmd: ['make test'],
      WorkingDir: sub,
      // The container sees the whole of the shell's cwd at the same path, and starts in sub/.
      HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'bind', Source: t.root, Target: t.root }] },
    });
    expect(envOf({ body: create })).toEqual({ GIVEN: 'yes' });
    expect(engine.callsTo('DELETE', '/containers/')[0].path).toContain('force=1');
    // No egress setup for network 'none'.
    expect(engine.callsTo('GET', '/info')).toHaveLength(0);
    expect(engine.callsTo('GET', '/networks')).toHaveLength(0);
  });

  it('refuses to bind-mount a cwd that does not exist on this machine, with a clear error and no container', async () => {
    const engine = await fakeEngine();
    const shell = new SandboxShell(new SubprocessSandbox({ image: 'img:1', dockerHost: engine.host }), { cwd: '/abs/path/to/project' });
    await expect(shell.exec('make')).rejects.toMatchObject({ name: 'WorkspaceError', code: 'NotFound', message: expect.stringContaining("the SandboxShell's cwd is not a directory on this machine") });
    // What the model reads names no host path.
    await expect(shell.exec('make')).rejects.toMatchObject({ message: expect.not.stringContaining('/abs/path') });
    expect(engine.callsTo('POST', '/containers/create')).toHaveLength(0);
  });

  it('feeds stdin to the container through the hijacked attach connection', async () => {
    const t = tree();
    const engine = await fakeEngine();
    const shell = new SandboxShell(new SubprocessSandbox({ image: 'img', dockerHost: engine.host }), { cwd: t.root });
    const r = await shell.exec('cat', { stdin: 'hello sandbox' });
    expect(r.stdout).toBe('stdin:hello sandbox');
    expect(engine.callsTo('POST', '/containers/create')[0].body).toMatchObject({ OpenStdin: true, StdinOnce: true, AttachStdin: true });
    expect(engine.callsTo('POST', '/containers/fakecontainer1/attach')[0].path).toContain('stdin=1');
  });

  it("{ allow } without a broker means no network: NetworkMode 'none', no proxy variables, no network setup", async () => {
    const t = tree();
    const engine = await fakeEngine();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: ['registry.npmjs.org'] } });
    const r = await new SandboxShell(sandbox, { cwd: t.root, env: { GIVEN: 'yes' } }).exec('true');
    expect(r.exitCode).toBe(0);
    const create = engine.callsTo('POST', '/containers/create')[0];
    expect(create.body.HostConfig.NetworkMode).toBe('none');
    expect(envOf(create)).toEqual({ GIVEN: 'yes' });
    expect(engine.calls.filter((c) => /^\/(info|version|networks)/.test(unversioned(c.path)))).toEqual([]);
    await sandbox.close();
  });

  it("network 'default' puts the container on Docker's default network", async () => {
    const t = tree();
    const engine = await fakeEngine();
    await new SandboxShell(new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: 'default' }), { cwd: t.root }).exec('true');
    expect(engine.callsTo('POST', '/containers/create')[0].body.HostConfig.NetworkMode).toBe('default');
  });

  it('Engine >= 25.0.5 with { allow }: checks the engine, creates the internal network, then runs the container on it', async () => {
    const t = tree();
    const engine = await fakeEngine({ version: '25.0.5', apiVersion: '1.44' });
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b });
    cleanups.push(() => sandbox.close());
    expect(sandbox.networkName).toMatch(/^lousho-egress-/);
    const r = await new SandboxShell(sandbox, { cwd: t.root }).exec('true');
    expect(r.exitCode).toBe(0);
    const name = sandbox.networkName;
    expect(engine.calls.map((c) => `${c.method} ${unversioned(c.path)}`)).toEqual([
      'GET /_ping',
      'GET /info',
      'GET /version',
      `GET /networks/${name}`,
      'POST /networks/create',
      'GET /networks/fakenet1',
      'POST /containers/create',
      'POST /containers/fakecontainer1/attach',
      'POST /containers/fakecontainer1/start',
      'POST /containers/fakecontainer1/wait',
      'DELETE /containers/fakecontainer1',
    ]);
    // The daemon offers 1.44; the client speaks 1.43 at most.
    expect(engine.calls.slice(1).every((c) => c.path.startsWith('/v1.43/'))).toBe(true);
    expect(engine.callsTo('POST', '/networks/create')[0].body).toMatchObject({
      Name: name,
      Driver: 'bridge',
      Internal: true,
      EnableIPv6: false,
      Labels: { 'com.lousho.sandbox': 'egress' },
    });
  });

  it('{ allow } with a broker: the container joins the network with proxy variables at the broker listener on the gateway and NO_PROXY = the gateway', async () => {
    const t = tree();
    const engine = await fakeEngine();
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b, networkName: 'corral-test-egress' });
    cleanups.push(() => sandbox.close());
    const shell = new SandboxShell(sandbox, { cwd: t.root, env: { GIVEN: 'yes', HTTP_PROXY: 'http://mine.example:1', NO_PROXY: '*' } });
    await shell.exec('first');
    await shell.exec('second');
    // One network for both runs, made once.
    expect(engine.callsTo('POST', '/networks/create')).toHaveLength(1);
    expect(engine.callsTo('POST', '/networks/create')[0].body.Name).toBe('corral-test-egress');
    const creates = engine.callsTo('POST', '/containers/create');
    expect(creates).toHaveLength(2);
    expect(creates.map((c) => c.body.HostConfig.NetworkMode)).toEqual(['corral-test-egress', 'corral-test-egress']);
    const env = envOf(creates[0]);
    const proxy = env.HTTP_PROXY;
    expect(proxy).toMatch(new RegExp(`^http://${GATEWAY.replaceAll('.', '\\.')}:\\d+$`));
    expect(env).toEqual({
      GIVEN: 'yes',
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: GATEWAY,
      no_proxy: GATEWAY,
    });
    expect(envOf(creates[1])).toEqual(env);
    expect(proxy).not.toBe(b.url);
    expect(JSON.stringify(engine.calls)).not.toContain(SECRET);
  });

  it("a real TCP connection from the network's subnet to the proxy URL reaches the broker, which adds the rule headers and applies the sandbox's allow list", async () => {
    const t = tree();
    const upPort = await echoUpstream(UP);
    const allowedPort = await echoUpstream(ALLOWED);
    const engine = await fakeEngine();
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b });
    cleanups.push(() => sandbox.close());
    await new SandboxShell(sandbox, { cwd: t.root }).exec('true');
    const proxy = envOf(engine.callsTo('POST', '/containers/create')[0]).HTTP_PROXY;
    // A rule host: the broker adds the credential the container never sees.
    const r = await viaProxy(`http://${UP}:${upPort}/from-container`, proxy, IN_SUBNET);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ url: '/from-container', headers: { authorization: `Bearer ${SECRET}` } });
    // A host on the sandbox's allow list passes through this listener, not the broker's loopback one.
    const viaGateway = await viaProxy(`http://${ALLOWED}:${allowedPort}/`, proxy, IN_SUBNET);
    expect(viaGateway.status).toBe(200);
    expect(JSON.parse(viaGateway.body).headers.authorization).toBeUndefined();
    expect((await viaProxy(`http://${ALLOWED}:${allowedPort}/`, b.url)).status).toBe(403);
  });

  it('close() removes the network it created and the gateway listener stops accepting', async () => {
    const t = tree();
    const engine = await fakeEngine();
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b });
    await new SandboxShell(sandbox, { cwd: t.root }).exec('true');
    const proxy = new URL(envOf(engine.callsTo('POST', '/containers/create')[0]).HTTP_PROXY);
    expect(await refusesConnections(proxy.hostname, proxy.port)).toBe(false);
    expect(engine.networks.map((n) => n.Name)).toEqual([sandbox.networkName]);
    await sandbox.close();
    expect(await refusesConnections(proxy.hostname, proxy.port)).toBe(true);
    expect(engine.callsTo('DELETE', '/networks/').map((c) => unversioned(c.path))).toEqual(['/networks/fakenet1']);
    expect(engine.networks).toEqual([]);
    // The broker's own loopback listener is unaffected.
    expect(await refusesConnections('127.0.0.1', new URL(b.url).port)).toBe(false);
    // A second close() has nothing left to do.
    await sandbox.close();
    expect(engine.callsTo('DELETE', '/networks/')).toHaveLength(1);
  });

  it('reuses an existing internal network (no create), listens on its gateway and does not remove it on close()', async () => {
    const t = tree();
    const existing = { Name: 'agents-egress', Id: 'existing0', Driver: 'bridge', Internal: true, IPAM: { Driver: 'default', Config: [{ Subnet: REUSED_SUBNET, Gateway: REUSED_GATEWAY }] } };
    const engine = await fakeEngine({ networks: [existing] });
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b, networkName: 'agents-egress' });
    const r = await new SandboxShell(sandbox, { cwd: t.root }).exec('true');
    expect(r.exitCode).toBe(0);
    expect(engine.callsTo('POST', '/networks/create')).toHaveLength(0);
    const create = engine.callsTo('POST', '/containers/create')[0];
    expect(create.body.HostConfig.NetworkMode).toBe('agents-egress');
    const env = envOf(create);
    expect(env.HTTP_PROXY).toMatch(new RegExp(`^http://${REUSED_GATEWAY.replaceAll('.', '\\.')}:\\d+$`));
    expect(env.NO_PROXY).toBe(REUSED_GATEWAY);
    const port = new URL(env.HTTP_PROXY).port;
    await sandbox.close();
    expect(await refusesConnections(REUSED_GATEWAY, port)).toBe(true);
    expect(engine.callsTo('DELETE', '/networks/')).toHaveLength(0);
    expect(engine.networks.map((n) => n.Name)).toEqual(['agents-egress']);
  });

  it('removes a network it created again when that network has no IPv4 subnet, and refuses the run', async () => {
    const t = tree();
    const engine = await fakeEngine({ createdIpam: { Driver: 'default', Config: [] } });
    const b = await ruleBroker();
    const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b });
    const e = await new SandboxShell(sandbox, { cwd: t.root }).exec('true').catch((err) => err);
    expect(e.code).toBe(EGRESS_UNSUPPORTED);
    expect(engine.callsTo('POST', '/networks/create')).toHaveLength(1);
    expect(engine.callsTo('DELETE', '/networks/')).toHaveLength(1);
    expect(engine.networks).toEqual([]);
    expect(engine.callsTo('POST', '/containers/')).toEqual([]);
    await sandbox.close();
  });

  describe('refuses { allow } where egress cannot be enforced, with LOUSHO_SANDBOX_EGRESS_UNSUPPORTED and no container', () => {
    const nonInternal = { Name: 'shared', Id: 'existing0', Driver: 'bridge', Internal: false, IPAM: { Driver: 'default', Config: [{ Subnet: REUSED_SUBNET, Gateway: REUSED_GATEWAY }] } };
    const cases = [
      ['Docker Desktop', { operatingSystem: 'Docker Desktop' }],
      ['rootless Docker', { securityOptions: ['name=seccomp,profile=builtin', 'name=rootless', 'name=cgroupns'] }],
      ['a reused network that is not internal', { networks: [nonInternal] }, 'shared'],
      ['Engine 25.0.4, older than 25.0.5', { version: '25.0.4', apiVersion: '1.44' }],
      ['Engine 20.10, older than 25.0.5', { version: '20.10.24+dfsg1', apiVersion: '1.41' }],
    ];
    for (const [what, config, networkName] of cases) {
      it(`refuses on ${what}`, async () => {
        const t = tree();
        const engine = await fakeEngine(config);
        const b = await ruleBroker();
        const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: engine.host, network: { allow: [ALLOWED] }, broker: b, networkName });
        const shell = new SandboxShell(sandbox, { cwd: t.root });
        for (let i = 0; i < 2; i++) {
          const e = await shell.exec('touch ran').catch((err) => err);
          expect(e).toBeInstanceOf(Error);
          expect(e.code).toBe(EGRESS_UNSUPPORTED);
        }
        // Directly through the adapter as well.
        const direct = await sandbox.run({ command: 'true', cwd: t.root, env: {}, timeoutMs: 5000 }).catch((err) => err);
        expect(direct.code).toBe(EGRESS_UNSUPPORTED);
        expect(engine.callsTo('POST', '/containers/')).toEqual([]);
        expect(engine.callsTo('POST', '/networks/create')).toEqual([]);
        await sandbox.close();
        expect(engine.callsTo('DELETE', '/networks/')).toEqual([]);
        if (networkName) expect(engine.networks.map((n) => n.Name)).toEqual([networkName]);
      });
    }

    it('refuses on a remote daemon (tcp://) without attempting a connection', async () => {
      const t = tree();
      // A listener where the remote daemon would be, to prove nothing connects to it.
      let connections = 0;
      const trap = net.createServer((s) => { connections += 1; s.destroy(); });
      await new Promise((resolve, reject) => { trap.once('error', reject); trap.listen(2375, '127.0.0.1', resolve); });
      cleanups.push(() => new Promise((resolve) => trap.close(() => resolve())));
      const b = await ruleBroker();
      const sandbox = new SubprocessSandbox({ image: 'img', dockerHost: 'tcp://127.0.0.1:2375', protect: [], network: { allow: [ALLOWED] }, broker: b });
      const e = await new SandboxShell(sandbox, { cwd: t.root }).exec('touch ran').catch((err) => err);
      expect(e.code).toBe(EGRESS_UNSUPPORTED);
      expect(e.message).toContain('tcp://127.0.0.1:2375');
      await sandbox.close();
      await sleep(100);
      expect(connections).toBe(0);
      expect(existsSync(join(t.root, 'ran'))).toBe(false);
    });
  });
});

// ---- against a real Docker Engine ---------------------------------------------------------

async function waitForFile(path, ms = 20_000) {
  const until = Date.now() + ms;
  while (!existsSync(path)) {
    if (Date.now() > until) throw new Error(`${path} did not appear within ${ms} ms`);
    await sleep(50);
  }
}

const realSandbox = (options = {}) => new SubprocessSandbox({ image: IMAGE, dockerHost: DOCKER_HOST, ...options });

describe.skipIf(!DOCKER_HOST)('SubprocessSandbox against a real Docker Engine', () => {
  it("runs a command's whole lifecycle with network 'none': only lo, only the given env, the cwd bind-mounted and writable, no container left", async () => {
    const t = tree({ 'from-host.txt': 'host data\n' });
    setEnv('CORRAL_SBX_SECRET', SECRET);
    setEnv('CORRAL_SBX_LISTED', 'listed-value');
    const shell = new SandboxShell(realSandbox({ network: 'none' }), { cwd: t.root, env: { GIVEN: 'yes' }, inheritEnv: ['CORRAL_SBX_LISTED'] });
    const r = await shell.exec('ls /sys/class/net; echo ---; env; echo ---; cat from-host.txt; echo written > out.txt; pwd', { timeoutMs: 30_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    const [nets, envText, rest] = r.stdout.split('---\n');
    expect(nets.split(/\s+/).filter(Boolean)).toEqual(['lo']);
    const env = parseEnv(envText);
    expect(env).toMatchObject({ GIVEN: 'yes', CORRAL_SBX_LISTED: 'listed-value' });
    // Only the given variables plus what the image, the runtime and sh add; none of the host's.
    const extra = Object.keys(env).filter((k) => !['GIVEN', 'CORRAL_SBX_LISTED', 'PATH', 'HOME', 'HOSTNAME', 'PWD', 'SHLVL'].includes(k));
    expect(extra).toEqual([]);
    expect(env.PATH).not.toBe(process.env.PATH);
    expect(r.stdout).not.toContain(SECRET);
    expect(rest.split('\n').filter(Boolean)).toEqual(['host data', t.root]);
    expect(readFileSync(join(t.root, 'out.txt'), 'utf8')).toBe('written\n');
    // A per-call cwd below it, at the same path in the container.
    const r2 = await shell.exec('pwd; touch here', { cwd: 'sub', timeoutMs: 30_000 });
    expect(r2.stdout).toBe(`${join(t.root, 'sub')}\n`);
    expect(existsSync(join(t.root, 'sub', 'here'))).toBe(true);
    expect(await containersFor(t.root)).toEqual([]);
  });

  it('returns exit codes, stdout and stderr', async () => {
    const t = tree();
    const shell = new SandboxShell(realSandbox(), { cwd: t.root });
    const r = await shell.exec('echo out; echo err >&2; exit 3', { timeoutMs: 30_000 });
    expect(r).toMatchObject({ stdout: 'out\n', stderr: 'err\n', exitCode: 3, timedOut: false });
    expect(r.aborted).toBeFalsy();
    expect(r.signal).toBeUndefined();
    expect((await shell.exec('true')).exitCode).toBe(0);
    const missing = await shell.exec('no-such-command-xyz');
    expect(missing.exitCode).toBe(127);
    expect(missing.stderr).toContain('not found');
    const big = await shell.exec('i=0; while [ $i -lt 2000 ]; do echo line$i; echo e$i >&2; i=$((i+1)); done');
    expect(big.stdout.split('\n').filter(Boolean)).toHaveLength(2000);
    expect(big.stderr.trimEnd().split('\n').at(-1)).toBe('e1999');
    expect(await containersFor(t.root)).toEqual([]);
  });

  it('feeds stdin and closes it; without stdin the command sees end of input at once', async () => {
    const t = tree();
    const shell = new SandboxShell(realSandbox(), { cwd: t.root });
    expect((await shell.exec('cat; echo; echo done', { stdin: 'hello\nworld' })).stdout).toBe('hello\nworld\ndone\n');
    const t0 = Date.now();
    const r = await shell.exec('cat; echo rc=$?', { timeoutMs: 10_000 });
    expect(r).toMatchObject({ stdout: 'rc=0\n', timedOut: false });
    expect(Date.now() - t0).toBeLessThan(8000);
  });

  it('a timeout gives timedOut: true, kills the container and removes it', async () => {
    const t = tree();
    const shell = new SandboxShell(realSandbox(), { cwd: t.root });
    const t0 = Date.now();
    const r = await shell.exec('echo started; sleep 30; touch late', { timeoutMs: 1500 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null, stdout: 'started\n' });
    expect(r.aborted).toBeFalsy();
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await containersFor(t.root)).toEqual([]);
    expect(existsSync(join(t.root, 'late'))).toBe(false);
  });

  it('an abort through SandboxShell.exec gives aborted: true and leaves no container', async () => {
    const t = tree();
    const shell = new SandboxShell(realSandbox(), { cwd: t.root });
    const controller = new AbortController();
    const running = shell.exec('touch running; sleep 30; touch late', { signal: controller.signal, timeoutMs: 60_000 });
    await waitForFile(join(t.root, 'running'));
    const t0 = Date.now();
    controller.abort();
    const r = await running;
    expect(r.aborted).toBe(true);
    expect(r.timedOut).toBe(false);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(await containersGone(t.root)).toEqual([]);
    expect(existsSync(join(t.root, 'late'))).toBe(false);
    // An already-aborted signal starts no container.
    const again = await shell.exec('touch never', { signal: controller.signal });
    expect(again.aborted).toBe(true);
    expect(existsSync(join(t.root, 'never'))).toBe(false);
    expect(await containersFor(t.root)).toEqual([]);
  });

  it('an abort through createShellTool ctx.signal gives aborted: true and leaves no container', async () => {
    const t = tree();
    const tool = createShellTool(new SandboxShell(realSandbox(), { cwd: t.root }), { needsApproval: false });
    const controller = new AbortController();
    const running = tool.execute({ command: 'touch running; sleep 30; touch late' }, { signal: controller.signal });
    await waitForFile(join(t.root, 'running'));
    controller.abort();
    const r = await running;
    expect(r.aborted).toBe(true);
    expect(r.note).toMatch(/abort/i);
    expect(await containersGone(t.root)).toEqual([]);
    expect(existsSync(join(t.root, 'late'))).toBe(false);
  });

  it('refuses { allow } with a broker on this Engine (older than 25.0.5) with LOUSHO_SANDBOX_EGRESS_UNSUPPORTED, starting no container and creating no network', async () => {
    const t = tree();
    const before = await engineGet('/networks');
    const b = await ruleBroker();
    const sandbox = realSandbox({ network: { allow: ['registry.npmjs.org'] }, broker: b });
    const e = await new SandboxShell(sandbox, { cwd: t.root }).exec('touch ran', { timeoutMs: 30_000 }).catch((err) => err);
    expect(e).toBeInstanceOf(Error);
    expect(e.code).toBe(EGRESS_UNSUPPORTED);
    expect(e.message).toContain('25.0.5');
    expect(existsSync(join(t.root, 'ran'))).toBe(false);
    expect(await containersFor(t.root)).toEqual([]);
    const after = await engineGet('/networks');
    expect(after.map((n) => n.Name)).not.toContain(sandbox.networkName);
    expect(after.filter((n) => n.Labels?.['com.lousho.sandbox'] === 'egress')).toEqual([]);
    expect(after.map((n) => n.Id).sort()).toEqual(before.map((n) => n.Id).sort());
    await sandbox.close();
  });
});
