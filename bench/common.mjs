// What the bench scripts share: medians, timing, finding a peer program, the linux-source corpus
// and a process's peak memory.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

export const here = dirname(fileURLToPath(import.meta.url));

export const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

/** `fn` once to warm up (page cache, JIT), then `runs` times: the median and the last result. */
export async function time(fn, runs) {
  await fn();
  const xs = [];
  let out;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    out = await fn();
    xs.push(performance.now() - t0);
  }
  return { ms: median(xs), out };
}

/** The path of a program on PATH, or null. */
export function which(cmd) {
  const r = spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** Debian's linux-source tree, unpacked once into bench/.corpus/linux; null when not installed. */
export function linuxTree() {
  const src = existsSync('/usr/src') ? readdirSync('/usr/src').find((f) => /^linux-source-.*\.tar\.(xz|bz2)$/.test(f)) : undefined;
  if (!src) return null;
  const dest = join(here, '.corpus', 'linux');
  if (!existsSync(join(dest, '.done'))) {
    console.log(`unpacking /usr/src/${src} into bench/.corpus/linux (once)…`);
    mkdirSync(dest, { recursive: true });
    execFileSync('tar', ['-xf', `/usr/src/${src}`, '-C', dest, '--strip-components=1'], { stdio: 'inherit' });
    writeFileSync(join(dest, '.done'), '');
  }
  return dest;
}

/** Runs `script` (ES module text) in a fresh node process: its peak RSS (VmHWM) in MB. */
export function peakRss(script) {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `${script}\nconst s = (await import('node:fs')).readFileSync('/proc/self/status', 'utf8'); console.log(/VmHWM:\\s+(\\d+)/.exec(s)[1]);`], { encoding: 'utf8', cwd: join(here, '..') });
  if (r.status !== 0) throw new Error(r.stderr);
  return Number(r.stdout.trim().split('\n').at(-1)) / 1024;
}
