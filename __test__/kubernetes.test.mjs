// KubernetesSandbox and KubernetesWorkspace against a fake API server that speaks the real wire
// protocol (kubernetes-fake.mjs: agent-sandbox custom objects, watches, pods/exec over WebSocket,
// each command run for real in a temporary directory). No cluster can run on this machine; the
// fake is checked with @kubernetes/client-node, a client nobody here wrote. With KUBECONFIG and
// CORRAL_K8S_WARM_POOL set, the last test runs against that real cluster; else it is skipped.
import { describe, it, test, expect, beforeAll, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { Readable, Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { KubernetesSandbox, SandboxShell, createFsTools, WorkspaceCheckpoints, ConfigurationError, WorkspaceError } from 'corral';
import { runConformance } from 'corral/conformance';
import { startFakeCluster } from './kubernetes-fake.mjs';
import { podPath, podSpawn } from './pod-runner.mjs';

/** Whether a pod's commands run on Linux: here, or through the pod runner under Wine. */
const LINUX_POD = process.platform !== 'win32' || Boolean(process.env.CORRAL_TEST_POD_RUNNER);

const dirs = [];
const fakes = [];
const sandboxes = [];
function tempDir(prefix) {
  const d = realpathSync(mkdtempSync(join(tmpdir(), prefix)));
  dirs.push(d);
  return d;
}
afterAll(async () => {
  for (const s of sandboxes) await s.close().catch(() => {});
  for (const f of fakes) await f.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A fake cluster with its pod directory and a kubeconfig for it. */
async function cluster(options = {}) {
  const dir = tempDir('corral-k8s-');
  const podDir = join(dir, 'pod');
  mkdirSync(join(podDir, 'workspace'), { recursive: true });
  const fake = await startFakeCluster({ podDir, ...options });
  fakes.push(fake);
  fake.podDir = podDir;
  // The fake runs a pod's commands in podDir, on Linux: on this machine, or under Wine on its
  // Linux side through the pod runner, whose name for the directory the workdir is. A Windows
  // without the runner has no sh to stand in for a pod; its workdir is a POSIX path still.
  fake.podRoot = LINUX_POD ? await podPath(podDir) : '/';
  fake.workdir = LINUX_POD ? posix.join(fake.podRoot, 'workspace') : '/workspace';
  fake.config = fake.kubeconfig(join(dir, 'kubeconfig'));
  return fake;
}

function sandbox(fake, options = {}) {
  const s = new KubernetesSandbox({ warmPool: 'python', kubeconfig: fake.config, workdir: fake.workdir, ...options });
  sandboxes.push(s);
  return s;
}

/** Runs `argv` in a pod of `fake` (in its workdir), as `kubectl exec` would; rejects unless it exits 0. */
async function inPod(fake, argv) {
  const child = podSpawn(argv, fake.podDir);
  child.stdin.end();
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${argv.join(' ')} exited ${code}: ${err}`);
}

/** Whether a process runs (a zombie no reaper collected counts as gone). */
const alive = (pid) => {
  try {
    return !/^\S+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
const until = async (check, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
};

describe('the fake API server, driven by @kubernetes/client-node', () => {
  let fake;
  let kc;
  beforeAll(async () => {
    fake = await cluster({ anyPod: true });
    kc = new k8s.KubeConfig();
    kc.loadFromFile(fake.config);
  });

  it('serves custom objects and a watch as the official client reads them', async () => {
    const api = kc.makeApiClient(k8s.CustomObjectsApi);
    const g = { group: 'extensions.agents.x-k8s.io', version: 'v1beta1', namespace: 'agents', plural: 'sandboxclaims' };
    const events = [];
    const watch = await new k8s.Watch(kc).watch(`/apis/${g.group}/${g.version}/namespaces/agents/sandboxclaims`, {}, (type, obj) => events.push([type, obj.metadata.name, obj.status?.conditions?.[0]?.status]), () => {});
    const made = await api.createNamespacedCustomObject({ ...g, body: { apiVersion: `${g.group}/${g.version}`, kind: 'SandboxClaim', metadata: { name: 'by-client-node' }, spec: { warmPoolRef: { name: 'python' } } } });
    expect(made.metadata.name).toBe('by-client-node');
    expect((await api.getNamespacedCustomObject({ ...g, name: 'by-client-node' })).spec.warmPoolRef.name).toBe('python');
    expect(await until(() => events.some(([t, n, s]) => t === 'MODIFIED' && n === 'by-client-node' && s === 'True'))).toBe(true);
    expect((await api.listNamespacedCustomObject(g)).items.map((i) => i.metadata.name)).toContain('by-client-node');
    await api.deleteNamespacedCustomObject({ ...g, name: 'by-client-node' });
    await expect(api.getNamespacedCustomObject({ ...g, name: 'by-client-node' })).rejects.toMatchObject({ code: 404 });
    watch.abort();
  });

  it("runs an exec over v5 with the official client: output, stdin and the exit code's status", async () => {
    const chunks = { out: [], err: [] };
    const sink = (k) => new Writable({ write(c, _e, cb) { chunks[k].push(Buffer.from(c)); cb(); } });
    let st;
    // Where there is no sh (Windows without the pod runner), node does the same: stdin to stdout,
    // err to stderr, exit 3.
    const argv = !LINUX_POD
      ? [process.execPath, '-e', "process.stdin.pipe(process.stdout); process.stdin.on('end', () => { process.stderr.write('err\\n'); process.exitCode = 3; })"]
      : ['sh', '-c', 'cat; echo err >&2; exit 3'];
    const ws = await new k8s.Exec(kc).exec('agents', 'pod-x', 'main', argv, sink('out'), sink('err'), Readable.from([Buffer.from('hello')]), false, (s) => (st = s));
    await new Promise((r) => ws.on('close', r));
    expect(ws.protocol).toBe('v5.channel.k8s.io');
    expect(Buffer.concat(chunks.out).toString()).toBe('hello');
    expect(Buffer.concat(chunks.err).toString()).toBe('err\n');
    expect(st).toMatchObject({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } });
  });
});

describe('KubernetesSandbox against the fake API server', () => {
  let fake;
  let shell;
  let sb;
  beforeAll(async () => {
    fake = await cluster();
    sb = sandbox(fake);
    shell = new SandboxShell(sb, { cwd: fake.workdir });
  });

  it('claims a sandbox from the warm pool on first use and runs commands in its pod', async () => {
    const r = await shell.exec('echo "$GREETING"; pwd; echo oops >&2; exit 4', { env: { GREETING: 'hi there' }, timeoutMs: 30_000 });
    expect(r).toMatchObject({ stdout: `hi there\n${fake.workdir}\n`, stderr: 'oops\n', exitCode: 4, timedOut: false });
    const [claim] = [...fake.claims.values()];
    expect(claim.spec).toMatchObject({ warmPoolRef: { name: 'python' }, lifecycle: { shutdownPolicy: 'Delete' } });
    const ahead = Date.parse(claim.spec.lifecycle.shutdownTime) - Date.now();
    expect(ahead).toBeGreaterThan(3_500_000);
    expect(ahead).toBeLessThan(3_700_000);
    expect(claim.metadata.labels['app.kubernetes.io/managed-by']).toBe('corral');
    const sandboxName = claim.status.sandbox.name;
    const pod = fake.sandboxes.get(sandboxName).metadata.annotations['agents.x-k8s.io/pod-name'];
    const last = fake.execs.at(-1);
    expect(last).toMatchObject({ pod, container: 'main', protocol: 'v5.channel.k8s.io' });
    // The command, its directory and its variables are arguments of the exec, never script text.
    expect(last.argv.slice(0, 2)).toEqual(['sh', '-c']);
    expect(last.argv[2]).not.toContain('GREETING');
    expect(last.argv).toContain('GREETING=hi there');
  });

  it('writes stdin and closes it, and a second command runs in the same pod', async () => {
    expect((await shell.exec('cat; echo end', { stdin: 'line 1\nline 2' })).stdout).toBe('line 1\nline 2end\n');
    expect((await shell.exec('true')).exitCode).toBe(0);
    expect(fake.claims.size).toBe(1);
  });

  it('streams a large output whole', async () => {
    const r = await shell.exec("head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done >&2", { timeoutMs: 60_000 });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.length).toBe(3_000_001);
    expect(r.stdout.startsWith('xxx')).toBe(true);
    expect(r.stderr).toBe('done\n');
  });

  it('a timeout kills the command and what it started in the pod, through a second exec', async () => {
    const before = fake.execs.length;
    const r = await shell.exec('sleep 61 & echo $! > bg.pid; echo $$ > fg.pid; sleep 62', { timeoutMs: 800 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null, signal: 'SIGKILL' });
    const fg = Number(readFileSync(join(fake.workdir, 'fg.pid'), 'utf8'));
    const bg = Number(readFileSync(join(fake.workdir, 'bg.pid'), 'utf8'));
    expect(await until(() => !alive(fg) && !alive(bg))).toBe(true);
    const kill = fake.execs.slice(before).find((e) => /kill -9/.test(e.argv.join(' ')));
    expect(kill, 'the kill exec').toBeTruthy();
    expect((await shell.exec('echo still here')).stdout).toBe('still here\n');
  });

  it('closing the exec stream does not stop a command; the abort kills it by its process group', async () => {
    const ac = new AbortController();
    const run = shell.exec('echo $$ > abort.pid; sleep 63', { signal: ac.signal, timeoutMs: 60_000 });
    expect(await until(() => existsSync(join(fake.workdir, 'abort.pid')))).toBe(true);
    const pid = Number(readFileSync(join(fake.workdir, 'abort.pid'), 'utf8'));
    ac.abort();
    const r = await run;
    expect(r.aborted).toBe(true);
    expect(await until(() => !alive(pid))).toBe(true);
  });

  it('a command that names itself with spaces is still killed by an abort (its start time is read after the name)', async () => {
    // An abort, not a timeout: the pod's own watchdog (at the timeout) must not be what kills it.
    const ac = new AbortController();
    const run = shell.exec(`cp "$(command -v sleep)" './a b'; echo $$ > named.pid; exec './a b' 64`, { signal: ac.signal, timeoutMs: 120_000 });
    expect(await until(() => existsSync(join(fake.workdir, 'named.pid')))).toBe(true);
    const pid = Number(readFileSync(join(fake.workdir, 'named.pid'), 'utf8'));
    expect(await until(() => /\(a b\)/.test(readFileSync(`/proc/${pid}/stat`, 'utf8')))).toBe(true);
    ac.abort();
    expect((await run).aborted).toBe(true);
    expect(await until(() => !alive(pid), 5_000)).toBe(true);
  });

  it("a command's variables cannot change the wrapper's own: not its command, directory, timeout nor IFS", async () => {
    const env = { c: 'echo HIJACKED', d: '/', t: '0', kv: 'x', IFS: '0123456789' };
    const r = await shell.exec('echo "c=$c"; pwd', { env });
    expect(r.stdout).toBe(`c=echo HIJACKED\n${fake.workdir}\n`);
    const slow = await shell.exec('echo $$ > ifs.pid; sleep 65', { env, timeoutMs: 800 });
    expect(slow.timedOut).toBe(true);
    const pid = Number(readFileSync(join(fake.workdir, 'ifs.pid'), 'utf8'));
    expect(await until(() => !alive(pid), 5_000)).toBe(true);
    await expect(shell.exec('true', { env: { __corral_c: 'x' } })).rejects.toMatchObject({ code: 'InvalidArguments' });
  });

  it('sets the limits as ulimit values, under dash as under other shells', async () => {
    const limited = new SandboxShell(sandbox(fake, { limits: { pids: 300, openFiles: 64, cpuSeconds: 30, fileSizeBytes: 1 << 20, memoryBytes: 2 ** 31 } }), { cwd: fake.workdir });
    const r = await limited.exec('ulimit -n; ulimit -t; ulimit -f; ulimit -v');
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe(`64\n30\n2048\n${2 ** 21}\n`);
  });

  it('runs 20 commands at once', async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, (_, i) => shell.exec(`echo ${i}; exit $((${i} % 3))`, { timeoutMs: 60_000 })));
    rs.forEach((r, i) => expect([r.stdout, r.exitCode]).toEqual([`${i}\n`, i % 3]));
  });

  it('close() deletes the claim, and later commands are refused', async () => {
    const own = sandbox(fake);
    const before = new Set(fake.claims.keys());
    await own.run({ command: 'true', cwd: fake.workdir, env: {} });
    const [name] = [...fake.claims.keys()].filter((n) => !before.has(n));
    expect(name).toBeTruthy();
    await own.close();
    expect(fake.deleted).toContain(name);
    await expect(own.run({ command: 'true', cwd: fake.workdir, env: {} })).rejects.toThrow(/closed/);
  });
});

describe('KubernetesSandbox when the cluster says no', () => {
  it('a claim that never becomes ready fails at readyTimeoutMs naming the last reason, and is deleted', async () => {
    const fake = await cluster({ outcome: 'never' });
    const started = Date.now();
    const err = await sandbox(fake, { readyTimeoutMs: 1500 }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    const took = Date.now() - started;
    expect(err).toBeInstanceOf(WorkspaceError);
    expect(err.code).toBe('Timeout');
    expect(err.message).toMatch(/readyTimeoutMs \(1500 ms\).*DependenciesNotReady.*pod is pending/);
    expect(took).toBeGreaterThanOrEqual(1400);
    expect(took).toBeLessThan(15_000);
    expect(fake.deleted).toHaveLength(1);
  });

  it('a terminal reason fails at once, naming it', async () => {
    const fake = await cluster({ outcome: { reason: 'PodFailed', message: 'the pod reached phase Failed' } });
    const started = Date.now();
    const err = await sandbox(fake, { readyTimeoutMs: 60_000 }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err.message).toMatch(/PodFailed \(the pod reached phase Failed\)/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a missing warm pool is a ConfigurationError naming it', async () => {
    const fake = await cluster();
    const err = await sandbox(fake, { warmPool: 'nope' }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigurationError);
    expect(err.message).toMatch(/no SandboxWarmPool "nope" in namespace "agents"/);
    expect(fake.claims.size).toBe(0);
  });

  it('a refused token is a ConfigurationError that never names the token', async () => {
    const fake = await cluster();
    const secret = 'sekret-token-ABCDEFGHIJ';
    const config = fake.kubeconfig(join(tempDir('corral-k8s-cfg-'), 'kubeconfig'), { token: secret });
    const err = await sandbox(fake, { kubeconfig: config }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigurationError);
    expect(err.message).toMatch(/refused the credential \(401/);
    expect(err.message).not.toContain(secret);
  });

  it('an unreachable API server is a ConfigurationError naming it', async () => {
    const fake = await cluster();
    const config = join(tempDir('corral-k8s-cfg-'), 'kubeconfig');
    writeFileSync(config, readFileSync(fake.config, 'utf8').replace(fake.url, 'https://127.0.0.1:9'));
    const err = await sandbox(fake, { kubeconfig: config }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigurationError);
    expect(err.message).toMatch(/127\.0\.0\.1:9\/? cannot be reached/);
  });

  it('a watch that expires (410 Gone) starts again and the claim still becomes ready', async () => {
    const fake = await cluster({ goneOnFirstWatch: true, readyAfterMs: 300 });
    const r = await new SandboxShell(sandbox(fake), { cwd: fake.workdir }).exec('echo ok');
    expect(r.stdout).toBe('ok\n');
    expect(fake.log.filter((l) => l.query.watch === 'true').length).toBeGreaterThanOrEqual(2);
  });

  it('an API server that drops the connection mid-command is an error, not a hang, and the command is killed by corral', async () => {
    const fake = await cluster();
    const shell = new SandboxShell(sandbox(fake), { cwd: fake.workdir });
    await shell.exec('true');
    const command = 'echo $$ > drop.pid; sleep 30; echo late';
    fake.dropExec = { afterMs: 300, when: (argv) => argv.includes(command) };
    const before = fake.execs.length;
    const started = Date.now();
    const err = await shell.exec(command, { timeoutMs: 60_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err.message).toMatch(/connection to the API server ended|closed the exec stream/);
    expect(Date.now() - started).toBeLessThan(10_000);
    // The fake, as a kubelet, left the command running when its stream broke: only corral's kill
    // exec, by the command's pid line, ends it.
    const pid = Number(readFileSync(join(fake.workdir, 'drop.pid'), 'utf8'));
    expect(await until(() => !alive(pid))).toBe(true);
    expect(fake.execs.slice(before).some((e) => e.argv.join(' ').includes(`kill -9 -${pid}`))).toBe(true);
  });

  it('a client certificate from the kubeconfig is the credential where the server asks for one', async () => {
    const fake = await cluster({ clientCertificates: true });
    const config = fake.kubeconfig(join(tempDir('corral-k8s-cfg-'), 'kubeconfig'), { user: await fake.clientCertificate() });
    const r = await new SandboxShell(sandbox(fake, { kubeconfig: config }), { cwd: fake.workdir }).exec('echo mtls');
    expect(r.stdout).toBe('mtls\n');
    const err = await sandbox(fake).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigurationError);
  });

  it('reads KUBECONFIG when no kubeconfig is given, and context picks one of its contexts', async () => {
    const fake = await cluster();
    const config = fake.kubeconfig(join(tempDir('corral-k8s-cfg-'), 'kubeconfig'), { current: 'nowhere' });
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = config;
    try {
      const byContext = new KubernetesSandbox({ warmPool: 'python', context: 'fake', workdir: fake.workdir });
      sandboxes.push(byContext);
      expect((await byContext.run({ command: 'echo ctx', cwd: fake.workdir, env: {} })).stdout).toBe('ctx\n');
      const current = new KubernetesSandbox({ warmPool: 'python', workdir: fake.workdir });
      sandboxes.push(current);
      await expect(current.run({ command: 'true', cwd: fake.workdir, env: {} })).rejects.toThrow(/127\.0\.0\.1:9\/? cannot be reached/);
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  });

  it('an exec credential plugin that fails is named, and nothing it printed or was given is shown', async () => {
    const fake = await cluster();
    const config = join(tempDir('corral-k8s-cfg-'), 'kubeconfig');
    const text = readFileSync(fake.config, 'utf8').replace(/    token: .*/, [
      '    exec:',
      '      apiVersion: client.authentication.k8s.io/v1beta1',
      '      command: sh',
      "      args: ['-c', 'echo PLUGIN-PRINTED-SECRET >&2; echo \"{\\\"token\\\": \\\"PLUGIN-TOKEN\\\"}\"; exit 1', '--client-secret=ARG-SECRET']",
      '      env: [{ name: PLUGIN_SECRET, value: ENV-SECRET }]',
      '      interactiveMode: Never',
    ].join('\n'));
    writeFileSync(config, text);
    const err = await sandbox(fake, { kubeconfig: config }).run({ command: 'true', cwd: fake.workdir, env: {} }).catch((e) => e);
    expect(err).toBeInstanceOf(ConfigurationError);
    expect(err.message).toMatch(/credential could not be obtained/);
    for (const secret of ['PLUGIN-PRINTED-SECRET', 'PLUGIN-TOKEN', 'ARG-SECRET', 'ENV-SECRET']) expect(err.message).not.toContain(secret);
  });

  it('an abort while the claim is made leaves no claim behind once the sandbox is closed', async () => {
    const fake = await cluster({ readyAfterMs: 600 });
    const s = sandbox(fake);
    const ac = new AbortController();
    const run = s.run({ command: 'true', cwd: fake.workdir, env: {} }, { signal: ac.signal });
    expect(await until(() => fake.claims.size === 1)).toBe(true);
    ac.abort();
    expect((await run).aborted).toBe(true);
    await s.close();
    await new Promise((r) => setTimeout(r, 900));
    expect(fake.claims.size).toBe(0);
  });

  it('a pod whose claim expired is said to be gone, and the next call claims a new sandbox', async () => {
    const fake = await cluster();
    const shell = new SandboxShell(sandbox(fake), { cwd: fake.workdir });
    await shell.exec('true');
    const [first] = fake.claims.keys();
    fake.claims.delete(first);
    for (const [pod, claim] of fake.pods) if (claim === first) fake.pods.delete(pod);
    await expect(shell.exec('true')).rejects.toMatchObject({ code: 'NotFound', message: expect.stringMatching(/is gone.*claims a new sandbox/) });
    expect((await shell.exec('echo again')).stdout).toBe('again\n');
    expect([...fake.claims.keys()]).not.toContain(first);
    expect(fake.claims.size).toBe(1);
  });

  it('falls back to v4.channel.k8s.io where the server has no v5', async () => {
    const fake = await cluster({ protocols: ['v4.channel.k8s.io'] });
    const s = sandbox(fake);
    const r = await new SandboxShell(s, { cwd: fake.workdir }).exec('echo v4; exit 2');
    expect(r).toMatchObject({ stdout: 'v4\n', exitCode: 2 });
    expect(fake.execs.at(-1).protocol).toBe('v4.channel.k8s.io');
    // A write tells the pod its length, so it needs no end of stdin (which v4 cannot send).
    const ws = s.workspace();
    await ws.writeFile('over-v4.txt', 'written over v4\n');
    expect(await ws.readFile('over-v4.txt')).toBe('written over v4\n');
  });

  it("moves the claim's shutdownTime forward while the sandbox is in use", async () => {
    const fake = await cluster();
    const shell = new SandboxShell(sandbox(fake, { shutdownAfterMs: 2000 }), { cwd: fake.workdir });
    await shell.exec('true');
    await new Promise((r) => setTimeout(r, 700));
    await shell.exec('true');
    expect(await until(() => fake.patches.length > 0)).toBe(true);
    const p = fake.patches[0];
    expect(p.contentType).toMatch(/merge-patch/);
    expect(Date.parse(p.patch.spec.lifecycle.shutdownTime)).toBeGreaterThan(Date.now());
  });

  it("prune() deletes the claims a dead process of this machine left, and not this process's", async () => {
    const fake = await cluster();
    const mine = sandbox(fake);
    await mine.run({ command: 'true', cwd: fake.workdir, env: {} });
    const script = `const { KubernetesSandbox } = require(${JSON.stringify(join(process.cwd(), 'js/index.js'))});
      const s = new KubernetesSandbox({ warmPool: 'python', kubeconfig: ${JSON.stringify(fake.config)}, workdir: ${JSON.stringify(fake.workdir)} });
      s.run({ command: 'true', cwd: ${JSON.stringify(fake.workdir)}, env: {} }).then(() => { console.log('claimed'); setInterval(() => {}, 1000); });`;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise((r) => child.stdout.once('data', r));
    expect(fake.claims.size).toBe(2);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(await mine.prune()).toBe(1);
    expect(fake.claims.size).toBe(1);
    expect((await mine.run({ command: 'echo mine', cwd: fake.workdir, env: {} })).stdout).toBe('mine\n');
  });

  it('refuses options without a warm pool, and unknown options', () => {
    expect(() => new KubernetesSandbox({})).toThrow(ConfigurationError);
    expect(() => new KubernetesSandbox({})).toThrow(/warmPool/);
    expect(() => new KubernetesSandbox({ warmPool: 'p', workdir: 'relative' })).toThrow(/workdir/);
    expect(() => new KubernetesSandbox({ warmPool: 'p', contxt: 'x' })).toThrow(ConfigurationError);
  });
});

describe('KubernetesWorkspace: the file tools over exec', () => {
  let fake;
  let ws;
  let tools;
  beforeAll(async () => {
    fake = await cluster();
    ws = sandbox(fake).workspace();
    tools = Object.fromEntries(createFsTools(ws).map((t) => [t.name, t]));
  });
  const call = (name, args, ctx = {}) => tools[name].execute(args, { toolCallId: 'c', sessionId: 's', ...ctx });

  it('reads, writes, edits, lists, greps and globs the pod workdir', async () => {
    expect(ws.root).toBe(fake.workdir);
    await call('write_file', { path: 'src/app.js', content: 'const a = 1;\nconst b = 2;\n' });
    expect(readFileSync(join(fake.workdir, 'src/app.js'), 'utf8')).toBe('const a = 1;\nconst b = 2;\n');
    expect(await call('read_file', { path: 'src/app.js' })).toContain('const b = 2;');
    await call('edit_file', { path: 'src/app.js', old_string: 'const b = 2;', new_string: 'const b = 3;' });
    expect(readFileSync(join(fake.workdir, 'src/app.js'), 'utf8')).toBe('const a = 1;\nconst b = 3;\n');
    expect(await call('list_dir', { path: 'src' })).toContain('app.js');
    expect(await call('grep', { pattern: 'b = 3' })).toContain('src/app.js');
    expect(await call('glob', { pattern: '**/*.js' })).toContain('src/app.js');
  });

  it('keeps binary bytes and file modes exactly', async () => {
    const bytes = new Uint8Array([0, 1, 2, 250, 255, 10, 13, 0]);
    await ws.writeFileBytes('bin/blob', bytes);
    expect([...(await ws.readFileBytes('bin/blob'))]).toEqual([...bytes]);
    await ws.chmod('bin/blob', 0o750);
    expect(await ws.getMode('bin/blob')).toBe(0o750);
    await ws.writeFileBytes('bin/blob', new Uint8Array([1]));
    expect(await ws.getMode('bin/blob')).toBe(0o750);
    expect(await ws.stat('bin/blob')).toMatchObject({ type: 'file', size: 1 });
    expect(await ws.stat('missing')).toBeUndefined();
  });

  it('applies a patch and rewinds it through checkpoints', async () => {
    const checkpoints = new WorkspaceCheckpoints(ws);
    const tracked = Object.fromEntries(createFsTools(ws, { checkpoints, include: ['apply_patch'] }).map((t) => [t.name, t]));
    await ws.writeFile('notes.txt', 'one\ntwo\n');
    await tracked.apply_patch.execute({ input: '*** Begin Patch\n*** Update File: notes.txt\n@@\n one\n-two\n+zwei\n*** Add File: new.txt\n+fresh\n*** End Patch' }, { toolCallId: 'p', sessionId: 'rw', turn: 0 });
    expect(readFileSync(join(fake.workdir, 'notes.txt'), 'utf8')).toBe('one\nzwei\n');
    expect(readFileSync(join(fake.workdir, 'new.txt'), 'utf8')).toBe('fresh\n');
    expect(await checkpoints.rewind(0, { sessionId: 'rw' })).toMatchObject({ restored: ['notes.txt'], deleted: ['new.txt'] });
    expect(readFileSync(join(fake.workdir, 'notes.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(existsSync(join(fake.workdir, 'new.txt'))).toBe(false);
  });

  it('refuses a link that leads outside the workdir, and .git', async () => {
    writeFileSync(join(fake.podDir, 'outside.txt'), 'secret\n');
    mkdirSync(join(fake.workdir, '.git'));
    writeFileSync(join(fake.workdir, '.git', 'config'), '[core]\n');
    // The links are the pod's own, made in it.
    await inPod(fake, ['ln', '-s', posix.join(fake.podRoot, 'outside.txt'), posix.join(fake.workdir, 'leak')]);
    await inPod(fake, ['ln', '-s', '.git/config', posix.join(fake.workdir, 'cfg')]);
    await expect(ws.readFile('leak')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(ws.writeFile('leak', 'x')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(readFileSync(join(fake.podDir, 'outside.txt'), 'utf8')).toBe('secret\n');
    await expect(ws.readFile('../outside.txt')).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(ws.readFile('.git/config')).rejects.toMatchObject({ code: 'Denied' });
    await expect(ws.readFile('cfg')).rejects.toMatchObject({ code: 'Denied' });
    await expect(ws.rm('.', { recursive: true })).rejects.toMatchObject({ code: 'Denied' });
    expect(await ws.realPath('src/../src/app.js').catch((e) => e.code)).toBe('src/app.js');
  });

  it('refuses to replace a read-only file or a FIFO, leaving each as it was', async () => {
    writeFileSync(join(fake.workdir, 'ro.txt'), 'keep\n');
    chmodSync(join(fake.workdir, 'ro.txt'), 0o444);
    await expect(ws.writeFile('ro.txt', 'changed')).rejects.toMatchObject({ code: 'ReadOnly' });
    expect(readFileSync(join(fake.workdir, 'ro.txt'), 'utf8')).toBe('keep\n');
    await inPod(fake, ['mkfifo', posix.join(fake.workdir, 'pipe')]);
    await expect(ws.writeFile('pipe', 'x')).rejects.toMatchObject({ code: 'NotAFile' });
    await inPod(fake, ['test', '-p', posix.join(fake.workdir, 'pipe')]);
  });

  it('says what is missing, and what is a directory', async () => {
    await expect(ws.readFile('nope.txt')).rejects.toMatchObject({ code: 'NotFound' });
    await expect(ws.readFile('src')).rejects.toMatchObject({ code: 'IsADirectory' });
    await ws.mkdir('a/b/c');
    expect((await ws.readdir('a/b')).map((e) => [e.name, e.type])).toEqual([['c', 'directory']]);
    await expect(ws.rm('a')).rejects.toMatchObject({ code: 'IsADirectory' });
    await ws.rm('a', { recursive: true });
    expect(existsSync(join(fake.workdir, 'a'))).toBe(false);
  });
});

// The shell and file-system checks every provider of corral's passes, over a pod of the fake: each
// provider its own workdir and claim.
const shared = await cluster();
let providers = 0;
runConformance({
  name: 'KubernetesWorkspace and SandboxShell over KubernetesSandbox',
  makeProvider: () => {
    const workdir = posix.join(shared.podRoot, `conformance-${++providers}`);
    mkdirSync(workdir);
    const s = sandbox(shared, { workdir });
    return { fs: s.workspace(), shell: new SandboxShell(s, { cwd: workdir }) };
  },
  test,
  describe,
});

const REAL = process.env.KUBECONFIG && process.env.CORRAL_K8S_WARM_POOL;
describe.skipIf(!REAL)('KubernetesSandbox against the cluster KUBECONFIG names (CORRAL_K8S_WARM_POOL)', () => {
  it('claims a sandbox, runs a command and a file round trip, and releases the claim', async () => {
    const s = new KubernetesSandbox({ warmPool: process.env.CORRAL_K8S_WARM_POOL, namespace: process.env.CORRAL_K8S_NAMESPACE });
    try {
      const shell = new SandboxShell(s, { cwd: '/workspace' });
      expect((await shell.exec('echo hello', { timeoutMs: 60_000 })).stdout).toBe('hello\n');
      const ws = s.workspace();
      await ws.writeFile('corral-check.txt', 'round trip\n');
      expect(await ws.readFile('corral-check.txt')).toBe('round trip\n');
    } finally {
      await s.close();
    }
  });
});
