// createCorralHarnessSandbox (corral/ai-sdk) over LinuxSandbox and over SubprocessSandbox (a kept
// container in the real Docker Engine the tests start, as root), held to the bar the harness's
// own sandbox providers set for themselves: commands, files, spawn, ports (WebSocket too),
// network policies and request transformations by real connections, lifecycle and identities.
import { describe, it, expect, afterEach, beforeAll } from 'vitest';
import http from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import WebSocket from 'ws';
import { HarnessCapabilityUnsupportedError } from '@ai-sdk/harness';
import { createCorralHarnessSandbox } from 'corral/ai-sdk';
import { linuxSandboxUsable as usable, tempTree } from './helpers.mjs';
import { DOCKER_HOST, containersFor, containersGone, engineCall, engineGet } from './docker-engine.mjs';

// The sandbox every session of the suite being run is made with.
let kind;
const DOCKER = { kind: 'docker', image: 'corral-node:latest', dockerHost: DOCKER_HOST };
const asRoot = process.getuid?.() === 0;

const cleanups = [];
afterEach(async () => { while (cleanups.length) await cleanups.pop()(); });

function provider(options = {}) {
  const t = tempTree();
  cleanups.push(t.cleanup);
  return { root: t.root, p: createCorralHarnessSandbox({ root: t.root, ...(kind && { sandbox: kind }), ...options }) };
}

async function session(options = {}, create = {}) {
  const { root, p } = provider(options);
  const s = await p.createSession(create);
  cleanups.push(() => s.destroy());
  return { root, p, s };
}

/** An HTTP server on the host's loopback that records what it was sent. */
async function hostServer() {
  const seen = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url, headers: req.headers });
    res.end('host says hi');
  });
  server.on('connect', (req, socket) => {
    socket.write('HTTP/1.1 200 OK\r\n\r\n');
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }));
  return { port: server.address().port, seen };
}

// A client run inside: GET `url` through the session's proxy (HTTP_PROXY), or directly with
// `direct`; prints the status and body, or `error <code>`.
const FETCH = `
const http = require('http');
const [url, how] = process.argv.slice(2);
const proxy = process.env.HTTP_PROXY && how !== 'direct' ? new URL(process.env.HTTP_PROXY) : null;
const u = new URL(url);
const o = proxy
  ? { host: proxy.hostname, port: proxy.port, path: url, headers: { host: u.host, 'x-api-key': 'placeholder' } }
  : { host: u.hostname, port: u.port, path: u.pathname, headers: { 'x-api-key': 'placeholder' } };
const req = http.get(o, (res) => { let b = ''; res.on('data', (d) => (b += d)); res.on('end', () => console.log(res.statusCode + ' ' + b)); });
req.on('error', (e) => console.log('error ' + e.code));
req.setTimeout(10000, () => { console.log('error timeout'); req.destroy(); });
`;

// A tunnel through the proxy (CONNECT) held open: prints "open", then "closed" when it closes.
const TUNNEL = `
const http = require('http');
const proxy = new URL(process.env.HTTP_PROXY);
const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: process.argv[2] });
req.on('connect', (res, socket) => {
  console.log(res.statusCode === 200 ? 'open' : 'refused ' + res.statusCode);
  socket.on('close', () => console.log('closed'));
  socket.on('error', () => {});
});
req.on('error', (e) => console.log('error ' + e.code));
req.end();
`;

async function withScripts(s) {
  await s.writeTextFile({ path: '/workspace/fetch.js', content: FETCH });
  await s.writeTextFile({ path: '/workspace/tunnel.js', content: TUNNEL });
}

/** How many processes on this machine have `word` as an argument. */
function running(word) {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').includes(word)) n += 1;
    } catch {}
  }
  return n;
}

/** How many processes on this machine run `sleep <seconds>`. */
function sleeping(seconds) {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'latin1') === `sleep\0${seconds}\0`) n += 1;
    } catch {}
  }
  return n;
}

async function firstLine(stream) {
  const reader = stream.getReader();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return text.split('\n')[0];
}

describe('createCorralHarnessSandbox options', () => {
  it('is a harness-sandbox-v1 provider made without I/O, and checks its options at once', () => {
    const p = createCorralHarnessSandbox({ root: '/nonexistent/corral-harness-root' });
    expect(p.specificationVersion).toBe('harness-sandbox-v1');
    expect(p.providerId).toBe('corral');
    expect(typeof p.createSession).toBe('function');
    expect(typeof p.resumeSession).toBe('function');
    expect(existsSync('/nonexistent/corral-harness-root')).toBe(false);
    for (const [o, re] of [
      [{}, /root/],
      [{ root: 'relative' }, /absolute/],
      [{ root: '/x', sandbox: { kind: 'linux', network: 'none' } }, /sandbox\.network/],
      [{ root: '/x', sandbox: { kind: 'linux', broker: {} } }, /sandbox\.broker/],
      [{ root: '/x', sandbox: { kind: 'vm' } }, /kind/],
      [{ root: '/x', ports: [0] }, /ports/],
      [{ root: '/x', ports: [70000] }, /ports/],
      [{ root: '/x', network: { mode: 'custom' } }, /allowed/],
      [{ root: '/x', network: { mode: 'custom', allowedCIDRs: ['not-a-cidr'] } }, /CIDR/],
      [{ root: '/x', requestTransformations: [{ transform: { headers: {} } }] }, /host/],
      [{ root: '/x', porst: [1] }, /ports/],
    ]) {
      expect(() => createCorralHarnessSandbox(o), JSON.stringify(o)).toThrow(expect.objectContaining({ name: 'ConfigurationError' }));
      expect(() => createCorralHarnessSandbox(o), JSON.stringify(o)).toThrow(re);
    }
  });

  it.skipIf(!usable)('refuses a session id that is not one path segment, before anything is made', async () => {
    const { root, p } = provider();
    for (const id of ['../x', 'a/b', '', 'x'.repeat(129), '.hidden']) {
      await expect(p.createSession({ sessionId: id }), id).rejects.toThrow(/session id/);
    }
    expect(readdirSync(root)).toEqual([]);
  });
});

for (const [name, sandbox, runs] of [
  ['LinuxSandbox', undefined, usable],
  ['SubprocessSandbox (a kept container in the real Docker Engine)', DOCKER, Boolean(DOCKER_HOST) && asRoot],
]) describe.skipIf(!runs)(`a corral harness session over ${name}`, () => {
  beforeAll(() => { kind = sandbox; });

  it('runs commands in /workspace with stdout, stderr, the exit code and per-command env that does not leak', async () => {
    const { s } = await session({ env: { BASE: 'base' } });
    expect(s.defaultWorkingDirectory).toBe('/workspace');
    const r = await s.run({ command: 'echo out; echo err >&2; pwd; echo "$BASE $ONE $IS_SANDBOX"; exit 7', env: { ONE: 'one' } });
    expect(r).toEqual({ exitCode: 7, stdout: 'out\n/workspace\nbase one 1\n', stderr: 'err\n' });
    const again = await s.run({ command: 'echo "[$ONE]"' });
    expect(again.stdout).toBe('[]\n');
    await s.run({ command: 'mkdir -p sub/dir' });
    expect((await s.run({ command: 'pwd', workingDirectory: '/workspace/sub/dir' })).stdout).toBe('/workspace/sub/dir\n');
    expect((await s.run({ command: 'pwd', workingDirectory: '/tmp' })).stdout).toBe('/tmp\n');
    await expect(s.run({ command: 'pwd', workingDirectory: '/etc' })).rejects.toMatchObject({ code: 'NotFound', message: expect.stringMatching(/not a directory of the session/) });
  });

  it('keeps /tmp, the home and a listening port across commands, and the file operations see what commands see', async () => {
    const { s } = await session();
    await s.run({ command: 'echo kept > /tmp/t; echo home > ~/h; echo ws > /workspace/w' });
    expect((await s.run({ command: 'cat /tmp/t ~/h w; echo $HOME' })).stdout).toBe('kept\nhome\nws\n/home/agent\n');
    expect(await s.readTextFile({ path: '/tmp/t' })).toBe('kept\n');
    expect(await s.readTextFile({ path: '/home/agent/h' })).toBe('home\n');
    expect(await s.readTextFile({ path: 'w' })).toBe('ws\n');
    await s.writeTextFile({ path: '/home/agent/.config/x/y.json', content: '{}' });
    expect((await s.run({ command: 'cat ~/.config/x/y.json' })).stdout).toBe('{}');
    // A server a spawned command started is reachable from a later command.
    const server = await s.spawn({ command: `node -e "require('net').createServer((c)=>c.end('pong')).listen(7001,'127.0.0.1',()=>console.log('up'))"` });
    expect(await firstLine(server.stdout)).toBe('up');
    const r = await s.run({ command: `node -e "require('net').connect(7001,'127.0.0.1').on('data',(d)=>process.stdout.write(d))"` });
    expect(r.stdout).toBe('pong');
    await server.kill();
  });

  it('reads and writes text, bytes and streams, gives null for a missing file and refuses paths outside the session', async () => {
    const { s } = await session();
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    await s.writeBinaryFile({ path: '/workspace/b.bin', content: bytes });
    expect(Array.from(await s.readBinaryFile({ path: '/workspace/b.bin' }))).toEqual(Array.from(bytes));
    await s.writeFile({ path: '/tmp/s.txt', content: new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('a\nb\nc\n')); c.close(); } }) });
    expect(await s.readTextFile({ path: '/tmp/s.txt', startLine: 2, endLine: 2 })).toBe('b\n');
    const stream = await s.readFile({ path: '/tmp/s.txt' });
    expect(await new Response(stream).text()).toBe('a\nb\nc\n');
    expect(await s.readFile({ path: '/workspace/missing' })).toBeNull();
    expect(await s.readTextFile({ path: '/home/agent/missing' })).toBeNull();
    for (const path of ['/etc/passwd', '/workspace/../etc/passwd', '/home/other/x', '/']) {
      await expect(s.readTextFile({ path }), path).rejects.toMatchObject({ code: 'OutsideWorkspace' });
      await expect(s.writeTextFile({ path, content: 'x' }), path).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    }
  });

  it('streams a spawned process, kills it, and an abort ends that command only', async () => {
    const { s } = await session();
    const p = await s.spawn({ command: 'for i in 1 2 3; do echo line$i; sleep 0.1; done; echo done >&2' });
    expect(await new Response(p.stdout).text()).toBe('line1\nline2\nline3\n');
    expect(await new Response(p.stderr).text()).toBe('done\n');
    expect(await p.wait()).toEqual({ exitCode: 0 });

    const long = await s.spawn({ command: 'echo started; sleep 301' });
    expect(await firstLine(long.stdout)).toBe('started');
    const controller = new AbortController();
    const run = s.run({ command: 'sleep 302 & sleep 303', abortSignal: controller.signal });
    await sleep(300);
    expect(sleeping(302)).toBe(1);
    controller.abort(new Error('stop it'));
    await expect(run).rejects.toThrow('stop it');
    // All of the aborted command is gone, its background child too; the other command runs on.
    for (let i = 0; i < 50 && sleeping(302) + sleeping(303) > 0; i++) await sleep(100);
    expect(sleeping(302) + sleeping(303)).toBe(0);
    expect(sleeping(301)).toBe(1);
    await long.kill();
    expect((await long.wait()).exitCode).toBe(137);
    await long.kill(); // idempotent
  });

  it('forwards exposed ports from the host, WebSocket upgrades included, and refuses others', async () => {
    const { s } = await session({ ports: [4000] });
    expect(s.ports).toEqual([4000]);
    const server = await s.spawn({
      command: `node -e "
        const h = require('http').createServer((q, r) => r.end('inside ' + q.url));
        h.on('upgrade', (q, sock) => {
          sock.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' +
            require('crypto').createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64') + '\\r\\n\\r\\n');
          sock.on('data', (d) => sock.write(Buffer.from([0x81, 4, ...Buffer.from('echo')])));
        });
        h.listen(4000, '0.0.0.0', () => console.log('up'));"`,
    });
    expect(await firstLine(server.stdout)).toBe('up');
    const { url } = await s.getPortEndpoint({ port: 4000 });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(await (await fetch(`${url}/x`)).text()).toBe('inside /x');
    expect(await s.getPortUrl({ port: 4000 })).toBe(url);
    const wsUrl = (await s.getPortEndpoint({ port: 4000, protocol: 'ws' })).url;
    expect(wsUrl).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    const ws = new WebSocket(wsUrl);
    const message = await new Promise((resolve, reject) => {
      ws.on('open', () => ws.send('hi'));
      ws.on('message', (d) => resolve(String(d)));
      ws.on('error', reject);
    });
    ws.terminate();
    expect(message).toBe('echo');
    const e = await s.getPortEndpoint({ port: 5000 }).catch((x) => x);
    expect(HarnessCapabilityUnsupportedError.isInstance(e)).toBe(true);
    expect(e.message).toBe('Port 5000 is not exposed');
    await s.setPorts([5000]);
    expect(s.ports).toEqual([5000]);
    await expect(s.getPortEndpoint({ port: 4000 })).rejects.toThrow('Port 4000 is not exposed');
    await server.kill();
  });

  it('deny-all reaches nothing; custom lets allowedCIDRs through and deniedCIDRs win; a direct 127.0.0.1 is the session\'s own', async () => {
    const host = await hostServer();
    const target = `http://127.0.0.1:${host.port}/p`;
    const { s } = await session();
    await withScripts(s);
    const env = (await s.run({ command: 'echo "$NO_PROXY|$no_proxy"' })).stdout;
    expect(env).not.toMatch(/127\.0\.0\.1|localhost|::1/);
    expect((await s.run({ command: `node fetch.js ${target}` })).stdout).toMatch(/^403 /);
    // Direct: the session's own loopback, where nothing listens.
    expect((await s.run({ command: `node fetch.js ${target} direct` })).stdout).toBe('error ECONNREFUSED\n');
    await s.setNetworkPolicy({ mode: 'custom', allowedCIDRs: ['127.0.0.1/32'] });
    expect((await s.run({ command: `node fetch.js ${target}` })).stdout).toBe('200 host says hi\n');
    await s.setNetworkPolicy({ mode: 'custom', allowedCIDRs: ['127.0.0.0/8'], deniedCIDRs: ['127.0.0.1/32'] });
    expect((await s.run({ command: `node fetch.js ${target}` })).stdout).toMatch(/^403 /);
    // allow-all is every public address: the host's loopback stays closed.
    await s.setNetworkPolicy({ mode: 'allow-all' });
    expect((await s.run({ command: `node fetch.js ${target}` })).stdout).toMatch(/^403 /);
    expect(host.seen.length).toBe(1);
  });

  it('a policy change closes an open tunnel the new policy refuses, while its process runs', async () => {
    const host = await hostServer();
    const { s } = await session({ network: { mode: 'custom', allowedCIDRs: ['127.0.0.1/32'] } });
    await withScripts(s);
    const p = await s.spawn({ command: `node tunnel.js 127.0.0.1:${host.port}` });
    const reader = p.stdout.getReader();
    let text = '';
    const until = async (word) => {
      while (!text.includes(word)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      return text;
    };
    expect(await until('open')).toContain('open');
    await s.setNetworkPolicy({ mode: 'deny-all' });
    expect(await until('closed')).toContain('closed');
    await p.kill();
  });

  it('request transformations replace the placeholder outside the sandbox: set replaces, add merges, a denied host gets nothing', async () => {
    const host = await hostServer();
    const target = `http://127.0.0.1:${host.port}/v1/messages`;
    const real = 'REAL-KEY-' + 'f3a9c1d2e5b7';
    const rule = (value, extra = {}) => ({ match: { host: '127.0.0.1', ...extra }, transform: { headers: { 'x-api-key': value } } });
    const { s, root } = await session({
      network: { mode: 'custom', allowedCIDRs: ['127.0.0.1/32'] },
      requestTransformations: [rule(real, { path: { startsWith: '/v1/' } })],
    });
    await withScripts(s);
    const keeps = await s.spawn({ command: 'sleep 300' });
    await s.run({ command: `node fetch.js ${target}` });
    expect(host.seen.at(-1).headers['x-api-key']).toBe(real);
    // The key is in no command's environment, no /proc/*/environ inside, no file of the session.
    const inside = await s.run({ command: `env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; grep -r -l -- '${real.slice(0, 9)}f3' /workspace /tmp /home/agent 2>/dev/null; true` });
    expect(inside.stdout).not.toContain(real);
    expect(inside.stdout).toContain('HTTP_PROXY');
    const found = spawnSync('grep', ['-rl', real, root], { encoding: 'utf8' });
    expect(found.status, found.stdout).toBe(1); // grep: nothing found
    // set replaces: the old rule is gone.
    await s.setRequestTransformations([rule('second', { path: { exact: '/other' } })]);
    await s.run({ command: `node fetch.js ${target}` });
    expect(host.seen.at(-1).headers['x-api-key']).toBe('placeholder');
    // add merges (and the same match again replaces, not duplicates).
    await s.addRequestTransformations([rule('third', { path: { startsWith: '/v1/' } })]);
    await s.addRequestTransformations([rule('third', { path: { startsWith: '/v1/' } })]);
    await s.run({ command: `node fetch.js ${target}` });
    expect(host.seen.at(-1).headers['x-api-key']).toBe('third');
    await s.run({ command: `node fetch.js http://127.0.0.1:${host.port}/other` });
    expect(host.seen.at(-1).headers['x-api-key']).toBe('second');
    // A rule for a host the policy denies opens nothing.
    const before = host.seen.length;
    await s.setNetworkPolicy({ mode: 'deny-all' });
    expect((await s.run({ command: `node fetch.js ${target}` })).stdout).toMatch(/^403 /);
    expect(host.seen.length).toBe(before);
    await keeps.kill();
  }, 60_000);

  it('stop and destroy are idempotent; a stopped session resumes with its files, /tmp and home; an unknown id rejects', async () => {
    const { root, p } = provider();
    const s = await p.createSession({ sessionId: 'resumable' });
    await s.run({ command: 'echo a > /workspace/a; echo t > /tmp/t; echo h > ~/h' });
    const bg = await s.spawn({ command: 'sleep 300' });
    await s.stop();
    await s.stop();
    expect((await bg.wait()).exitCode).not.toBe(0);
    const r = await p.resumeSession({ sessionId: 'resumable' });
    expect(r.id).toBe('resumable');
    expect((await r.run({ command: 'cat /workspace/a /tmp/t ~/h' })).stdout).toBe('a\nt\nh\n');
    await r.destroy();
    await r.destroy();
    expect(existsSync(`${root}/resumable`)).toBe(false);
    await expect(p.resumeSession({ sessionId: 'resumable' })).rejects.toMatchObject({ code: 'NotFound' });
    await expect(p.createSession({ sessionId: 'twice' }).then(async (a) => { cleanups.push(() => a.destroy()); return p.createSession({ sessionId: 'twice' }); })).rejects.toThrow(/already exists/);
  });

  it('onFirstCreate runs once per identity; later sessions, and a new provider over the same root, start from its /tmp and home', async () => {
    const { root, p } = provider();
    let calls = 0;
    const onFirstCreate = async (restricted) => {
      calls += 1;
      expect(typeof restricted.setNetworkPolicy).toBe('undefined');
      expect(typeof restricted.stop).toBe('undefined');
      await restricted.run({ command: 'mkdir -p ~/.tool && echo v1 > ~/.tool/version && echo c > /tmp/cache && echo w > /workspace/not-kept' });
    };
    const [a, b] = await Promise.all([
      p.createSession({ identity: 'claude-code@1', onFirstCreate }),
      p.createSession({ identity: 'claude-code@1', onFirstCreate }),
    ]);
    cleanups.push(() => b.destroy());
    expect(calls).toBe(1);
    expect(a.id).not.toBe(b.id);
    expect((await b.run({ command: 'cat ~/.tool/version /tmp/cache; ls /workspace' })).stdout).toBe('v1\nc\n');
    await a.destroy();
    const again = createCorralHarnessSandbox({ root, ...(kind && { sandbox: kind }) });
    const c = await again.createSession({ identity: 'claude-code@1', onFirstCreate });
    cleanups.push(() => c.destroy());
    expect(calls).toBe(1);
    expect((await c.run({ command: 'cat ~/.tool/version' })).stdout).toBe('v1\n');
    const d = await again.createSession({ identity: 'other', onFirstCreate });
    cleanups.push(() => d.destroy());
    expect(calls).toBe(2);
  }, 60_000);

  it('restricted() is the same session as a plain SandboxSession', async () => {
    const { s } = await session();
    const r = s.restricted();
    for (const k of ['getPortEndpoint', 'setNetworkPolicy', 'setRequestTransformations', 'addRequestTransformations', 'setPorts', 'stop', 'destroy']) {
      expect(r[k], k).toBeUndefined();
    }
    await r.writeTextFile({ path: '/workspace/r', content: 'same' });
    expect(await s.readTextFile({ path: '/workspace/r' })).toBe('same');
  });
});

describe.skipIf(!(DOCKER_HOST && asRoot))('a corral harness session with kind: docker', () => {
  beforeAll(() => { kind = DOCKER; });

  it('is one kept container with NetworkMode none that mounts the session\'s directories, makes no Docker network, and goes with stop()', async () => {
    const networks = (await engineGet('/networks')).length;
    const { root, s } = await session({ ports: [4000] });
    const dir = `${root}/${s.id}`;
    const [c] = await containersFor(dir);
    expect(c).toBeDefined();
    const info = await engineGet(`/containers/${c.Id}/json`);
    expect(info.HostConfig.NetworkMode).toBe('none');
    const mounts = Object.fromEntries(info.Mounts.filter((m) => m.Source.startsWith(dir)).map((m) => [m.Destination, m.Source]));
    expect(mounts).toEqual({ '/workspace': `${dir}/workspace`, '/tmp': `${dir}/tmp`, '/home/agent': `${dir}/home` });
    // Every command runs in that container: the same hostname each time, the container's.
    const r = await s.run({ command: 'hostname; hostname' });
    expect(r.stdout).toBe(`${info.Config.Hostname}\n${info.Config.Hostname}\n`);
    // Its only interface is loopback; the proxy endpoint and the forwarder listen there.
    expect((await s.run({ command: 'ls /sys/class/net' })).stdout).toBe('lo\n');
    expect((await engineGet('/networks')).length).toBe(networks);
    await s.stop();
    expect(await containersGone(dir)).toEqual([]);
  });

  it('without the right to enter the container\'s network namespace, a policy other than deny-all or any port is a ConfigurationError, and deny-all with no ports runs', async () => {
    // Root without CAP_SYS_ADMIN (as a user who is not root) cannot enter it.
    const t = tempTree();
    cleanups.push(t.cleanup);
    const script = `
      import { createCorralHarnessSandbox } from 'corral/ai-sdk';
      const sandbox = ${JSON.stringify(DOCKER)};
      const out = [];
      for (const o of [{}, { ports: [], network: { mode: 'allow-all' } }, { ports: [] }]) {
        const p = createCorralHarnessSandbox({ root: ${JSON.stringify(t.root)}, sandbox, ...o });
        try {
          const s = await p.createSession();
          const r = await s.run({ command: 'echo "[$HTTP_PROXY]"' });
          const e = await s.setNetworkPolicy({ mode: 'allow-all' }).then(() => 'set', (e) => e.name);
          const ports = await s.setPorts([4000]).then(() => 'set', (e) => e.name);
          out.push(['ran', r.stdout.trim(), e, ports]);
          await s.destroy();
        } catch (e) { out.push([e.name, /root/.test(e.message)]); }
      }
      console.log(JSON.stringify(out));`;
    const r = spawnSync('setpriv', ['--bounding-set', '-sys_admin', '--inh-caps', '-sys_admin', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8', cwd: process.cwd(), timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual([
      ['ConfigurationError', true],
      ['ConfigurationError', true],
      ['ran', '[]', 'ConfigurationError', 'ConfigurationError'],
    ]);
    expect(await containersGone(t.root)).toEqual([]);
  });

  it('starts each command with what the container\'s first process was given, in a pid namespace of its own below the container\'s', async () => {
    const { root, s } = await session({ ports: [] });
    const [c] = await containersFor(`${root}/${s.id}`);
    const init = (await engineGet(`/containers/${c.Id}/json`)).State.Pid;
    const p = await s.spawn({ command: 'echo x > /corral-root-mark; exec sleep 309' });
    let pid;
    for (let i = 0; i < 50 && !pid; i++) {
      pid = readdirSync('/proc').find((d) => /^\d+$/.test(d) && (() => { try { return readFileSync(`/proc/${d}/cmdline`, 'latin1') === 'sleep\x00309\x00'; } catch { return false; } })());
      if (!pid) await sleep(100);
    }
    expect(pid).toBeDefined();
    const status = (p) => readFileSync(`/proc/${p}/status`, 'utf8').split('\n');
    const given = (p) => status(p).filter((l) => /^(Uid|Gid|Groups|Umask|Cap\w+|NoNewPrivs|Seccomp|Seccomp_filters):/.test(l));
    expect(given(pid)).toEqual(given(init));
    expect(given(pid).length).toBe(12);
    expect(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8')).toBe(readFileSync(`/proc/${init}/oom_score_adj`, 'utf8'));
    expect(readFileSync(`/proc/${pid}/cgroup`, 'utf8')).toBe(readFileSync(`/proc/${init}/cgroup`, 'utf8'));
    for (const ns of ['uts', 'ipc', 'net', 'cgroup', 'user']) {
      expect(readlinkSync(`/proc/${pid}/ns/${ns}`), ns).toBe(readlinkSync(`/proc/${init}/ns/${ns}`));
    }
    expect(readlinkSync(`/proc/${pid}/ns/pid`)).not.toBe(readlinkSync(`/proc/${init}/ns/pid`));
    // Its own mount namespace only for its own /proc: the same root as the container's, and the
    // same overmounts on /proc (masked and read-only paths) as the container's first process has.
    expect(readlinkSync(`/proc/${pid}/ns/mnt`)).not.toBe(readlinkSync(`/proc/${init}/ns/mnt`));
    expect(readFileSync(`/proc/${init}/root/corral-root-mark`, 'utf8')).toBe('x\n');
    const procMounts = (p) => readFileSync(`/proc/${p}/mountinfo`, 'utf8').split('\n').map((l) => l.split(' ')).filter((f) => f[4]?.startsWith('/proc/')).map((f) => `${f[4]} ${f[5].split(',')[0]}`);
    expect(procMounts(init).length).toBeGreaterThan(3);
    expect(procMounts(pid)).toEqual(procMounts(init));
    // Three levels: this machine's, the container's, and its own, where it is the first.
    const nspid = status(pid).find((l) => l.startsWith('NSpid:')).split(/\s+/).slice(1);
    expect(nspid.length).toBe(3);
    expect(nspid[2]).toBe('1');
    await p.kill();
  });

  it('gives each command a pid namespace of its own: an abort takes all of it, a child that left its group too, and no command can signal another\'s', async () => {
    const { s } = await session({ ports: [] });
    const other = await s.spawn({ command: 'echo started; sleep 305' });
    expect(await firstLine(other.stdout)).toBe('started');
    // `kill -9 -1` signals every process its sender may: here only those of its own command.
    const r = await s.run({ command: 'echo $$; kill -9 -1; echo after' });
    expect(r.stdout).toBe('1\nafter\n');
    expect(sleeping(305)).toBe(1);
    // A background child that made a session of its own (out of the command's process group)
    // goes with the command's abort.
    const controller = new AbortController();
    const run = s.run({ command: 'setsid sleep 306 & sleep 307', abortSignal: controller.signal });
    for (let i = 0; i < 50 && sleeping(306) + sleeping(307) < 2; i++) await sleep(100);
    expect(sleeping(306) + sleeping(307)).toBe(2);
    controller.abort(new Error('stop it'));
    await expect(run).rejects.toThrow('stop it');
    for (let i = 0; i < 50 && sleeping(306) + sleeping(307) > 0; i++) await sleep(100);
    expect(sleeping(306) + sleeping(307)).toBe(0);
    expect(sleeping(305)).toBe(1);
    // A command that clears its parent-death signal (a change of its effective ids) still goes.
    const escape = new AbortController();
    const clearing = s.run({ command: 'exec node -e "process.setegid(1); process.setegid(0); setInterval(() => {}, 1e6)" corral-escape-310', abortSignal: escape.signal });
    for (let i = 0; i < 50 && running('corral-escape-310') === 0; i++) await sleep(100);
    await sleep(300);
    expect(running('corral-escape-310')).toBe(1);
    escape.abort(new Error('stop it'));
    await expect(clearing).rejects.toThrow('stop it');
    for (let i = 0; i < 50 && running('corral-escape-310') > 0; i++) await sleep(100);
    expect(running('corral-escape-310')).toBe(0);
    // No process a command can see shows this machine's network (the container has loopback only).
    const seen = await s.run({ command: 'cat /proc/[0-9]*/net/dev 2>/dev/null | grep : | grep -v "^ *lo:" | wc -l' });
    expect(seen.stdout.trim()).toBe('0');
    // Its /proc is its own pid namespace's: no other command's process, nor the container's first.
    const listed = await s.run({ command: 'for f in /proc/[0-9]*/cmdline; do tr "\\000" " " < $f; echo; done' });
    expect(listed.stdout).toMatch(/^sh -c /);
    expect(listed.stdout).not.toMatch(/sleep 305|sleep 2147483647|docker-init/);
    // What a command leaves running ends with it, as in LinuxSandbox: `spawn` keeps a process.
    expect((await s.run({ command: 'sleep 308 >/dev/null 2>&1 & echo left' })).stdout).toBe('left\n');
    for (let i = 0; i < 50 && sleeping(308) > 0; i++) await sleep(100);
    expect(sleeping(308)).toBe(0);
    await s.stop();
    for (let i = 0; i < 50 && sleeping(305) > 0; i++) await sleep(100);
    expect(sleeping(305)).toBe(0);
  });

  it('refuses commands once the session\'s container stopped outside corral, also after it started again', async () => {
    const { root, s } = await session({ ports: [] });
    expect((await s.run({ command: 'echo up' })).stdout).toBe('up\n');
    const [c] = await containersFor(`${root}/${s.id}`);
    await engineCall('POST', `/containers/${c.Id}/kill`);
    for (let i = 0; i < 50 && (await engineGet(`/containers/${c.Id}/json`)).State.Running; i++) await sleep(100);
    // (The harness reports a command that could not start as its result, exit code 1.)
    expect(await s.run({ command: 'echo again' })).toMatchObject({ exitCode: 1, stdout: '', stderr: expect.stringMatching(/gone.*resume it/) });
    await engineCall('POST', `/containers/${c.Id}/start`);
    expect(await s.run({ command: 'echo again' })).toMatchObject({ exitCode: 1, stdout: '', stderr: expect.stringMatching(/gone.*resume it/) });
  });

  it('leaves no device file, file capability or setuid program another user could reach', async () => {
    const { root, p, s } = await session({ ports: [] });
    const dir = `${root}/${s.id}`;
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const r = await s.run({ command: 'mknod /workspace/dev c 1 3; echo "mknod $?"; cp /bin/busybox /tmp/su; chmod 4755 /tmp/su; echo "chmod $?"; id -u' });
    expect(r.stdout).toMatch(/^mknod [1-9]\d*\nchmod 0\n0\n$/);
    expect(existsSync(`${dir}/workspace/dev`)).toBe(false);
    // A later session of an identity never gets the setuid bit.
    const first = async (restricted) => { await restricted.run({ command: 'cp /bin/busybox ~/tool && chmod 4755 ~/tool' }); };
    const a = await p.createSession({ identity: 'suid', onFirstCreate: first });
    cleanups.push(() => a.destroy());
    const b = await p.createSession({ identity: 'suid', onFirstCreate: first });
    cleanups.push(() => b.destroy());
    expect(statSync(`${root}/${b.id}/home/tool`).mode & 0o7000).toBe(0);
  });

  it('a container a crashed process left over the session is removed before the session resumes', async () => {
    const t = tempTree();
    cleanups.push(t.cleanup);
    const script = `
      import { createCorralHarnessSandbox } from 'corral/ai-sdk';
      const p = createCorralHarnessSandbox({ root: ${JSON.stringify(t.root)}, sandbox: ${JSON.stringify(DOCKER)}, ports: [] });
      const s = await p.createSession({ sessionId: 'crashed' });
      await s.spawn({ command: 'i=0; while :; do i=$((i+1)); echo $i > /workspace/still-here; sleep 0.1; done' });
      while (!(await s.readTextFile({ path: '/workspace/still-here' }))) await new Promise((r) => setTimeout(r, 50));
      console.log('ready');
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((resolve) => child.stdout.on('data', (d) => String(d).includes('ready') && resolve()));
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    const dir = `${t.root}/crashed`;
    const [left] = await containersFor(dir);
    expect(left).toBeDefined();
    const p = createCorralHarnessSandbox({ root: t.root, sandbox: DOCKER, ports: [] });
    const s = await p.resumeSession({ sessionId: 'crashed' });
    cleanups.push(() => s.destroy());
    const now = await containersFor(dir);
    expect(now.map((c) => c.Id)).not.toContain(left.Id);
    expect(now.length).toBe(1);
    const before = readFileSync(`${dir}/workspace/still-here`, 'utf8');
    await sleep(400);
    expect(readFileSync(`${dir}/workspace/still-here`, 'utf8')).toBe(before);
  });

  it('checks its docker options at construction', () => {
    for (const [o, re] of [
      [{ kind: 'docker' }, /image/],
      [{ kind: 'docker', image: 'x', networkName: 'n' }, /sandbox\.networkName/],
      [{ kind: 'docker', image: 'x', network: 'none' }, /sandbox\.network/],
      [{ kind: 'docker', image: 'x', reuse: 'command' }, /reuse/],
      [{ kind: 'docker', image: 'x', dockerHost: 'tcp://127.0.0.1:2375', protect: [] }, /this machine/],
    ]) {
      expect(() => createCorralHarnessSandbox({ root: '/x', sandbox: o }), JSON.stringify(o)).toThrow(expect.objectContaining({ name: 'ConfigurationError', message: expect.stringMatching(re) }));
    }
  });
});
