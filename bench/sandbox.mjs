// Per-command cost of a sandboxed shell against plain NodeWorkspace.exec (a benchmark, not a
// test): LinuxSandbox where the kernel offers namespaces, and a Docker-backed SubprocessSandbox
// when CORRAL_DOCKER_HOST (or DOCKER_HOST) names an Engine with corral-busybox:latest, e.g.:
//
//   scripts/dockerd-test.sh start /tmp/corral-dockerd
//   CORRAL_DOCKER_HOST=unix:///tmp/corral-dockerd/docker.sock node bench/sandbox.mjs [runs]
//   scripts/dockerd-test.sh stop /tmp/corral-dockerd
//
// Prints the median wall time of `exec('true')` for each over `runs` (default 20) alternating
// runs, after one warm-up each (API negotiation, page cache), and the ratio to the plain shell.
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LinuxSandbox, NodeWorkspace, SandboxShell, SubprocessSandbox } from '../js/index.js';

const dockerHost = process.env.CORRAL_DOCKER_HOST ?? process.env.DOCKER_HOST;
const runs = Number(process.argv[2] ?? 20);
const image = process.env.CORRAL_BENCH_IMAGE ?? 'corral-busybox:latest';
const probe = LinuxSandbox.probe();

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-bench-sandbox-')));
const sessions = [];
try {
  const shells = [['NodeWorkspace.exec', new NodeWorkspace({ root: dir })]];
  if (probe.mountNamespaces && probe.pidNamespaces && probe.netNamespaces) {
    shells.push(['SandboxShell(LinuxSandbox).exec', new SandboxShell(new LinuxSandbox(), { cwd: dir })]);
    shells.push(['  with limits (pids, memory: cgroup)', new SandboxShell(new LinuxSandbox({ limits: { pids: 256, memoryBytes: 1 << 30 }, allowWeaker: true }), { cwd: dir })]);
  } else {
    console.log('LinuxSandbox: skipped (this kernel lacks namespaces)');
  }
  if (dockerHost) {
    shells.push([`SandboxShell(SubprocessSandbox).exec`, new SandboxShell(new SubprocessSandbox({ image, dockerHost }), { cwd: dir })]);
    const kept = new SubprocessSandbox({ image, dockerHost, reuse: 'session' });
    sessions.push(kept);
    shells.push([`  reuse: 'session' (exec in a kept container)`, new SandboxShell(kept, { cwd: dir })]);
  } else console.log('SubprocessSandbox: skipped (set CORRAL_DOCKER_HOST to a Docker Engine with corral-busybox:latest)');

  const time = async (provider) => {
    const t0 = performance.now();
    const r = await provider.exec('true', { timeoutMs: 60_000 });
    const ms = performance.now() - t0;
    if (r.exitCode !== 0) throw new Error(`exec('true') failed: ${JSON.stringify(r)}`);
    return ms;
  };
  const median = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
  };

  const samples = shells.map(() => []);
  for (const [, s] of shells) await time(s);
  for (let i = 0; i < runs; i++) for (const [k, [, s]] of shells.entries()) samples[k].push(await time(s));
  const base = median(samples[0]);
  console.log(`exec('true'), median of ${runs} alternating runs each:`);
  for (const [k, [label]] of shells.entries()) {
    const m = median(samples[k]);
    console.log(`  ${label.padEnd(46)} ${m.toFixed(1).padStart(8)} ms   (min ${Math.min(...samples[k]).toFixed(1)}, max ${Math.max(...samples[k]).toFixed(1)})   ${(m / base).toFixed(1)}x`);
  }
} finally {
  for (const s of sessions) await s.close();
  rmSync(dir, { recursive: true, force: true });
}
