// Per-command overhead of a Docker-backed SandboxShell against plain NodeWorkspace.exec (a
// benchmark, not a test). Needs a Docker Engine with the image corral-busybox:latest, e.g.:
//
//   scripts/dockerd-test.sh start /tmp/corral-dockerd
//   CORRAL_DOCKER_HOST=unix:///tmp/corral-dockerd/docker.sock node bench/sandbox.mjs [runs]
//   scripts/dockerd-test.sh stop /tmp/corral-dockerd
//
// Prints the median wall time of `exec('true')` for both over `runs` (default 10) alternating runs,
// after one warm-up each (API negotiation, page cache), and the difference.
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { NodeWorkspace, SandboxShell, SubprocessSandbox } from '../index.js';

const dockerHost = process.env.CORRAL_DOCKER_HOST ?? process.env.DOCKER_HOST;
if (!dockerHost) {
  console.error('Set CORRAL_DOCKER_HOST (or DOCKER_HOST) to a Docker Engine with corral-busybox:latest; see scripts/dockerd-test.sh.');
  process.exit(2);
}
const runs = Number(process.argv[2] ?? 10);
const image = process.env.CORRAL_BENCH_IMAGE ?? 'corral-busybox:latest';

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-bench-sandbox-')));
try {
  const shell = new SandboxShell(new SubprocessSandbox({ image, dockerHost }), { cwd: dir });
  const ws = new NodeWorkspace({ root: dir });

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

  await time(shell);
  await time(ws);
  const boxed = [];
  const plain = [];
  for (let i = 0; i < runs; i++) {
    boxed.push(await time(shell));
    plain.push(await time(ws));
  }
  const b = median(boxed);
  const p = median(plain);
  console.log(`exec('true'), median of ${runs} runs each (engine ${dockerHost}, image ${image}):`);
  console.log(`  NodeWorkspace.exec                      ${p.toFixed(1).padStart(8)} ms   (min ${Math.min(...plain).toFixed(1)}, max ${Math.max(...plain).toFixed(1)})`);
  console.log(`  SandboxShell(SubprocessSandbox).exec    ${b.toFixed(1).padStart(8)} ms   (min ${Math.min(...boxed).toFixed(1)}, max ${Math.max(...boxed).toFixed(1)})`);
  console.log(`  overhead per command                    ${(b - p).toFixed(1).padStart(8)} ms   (${(b / p).toFixed(1)}x)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
