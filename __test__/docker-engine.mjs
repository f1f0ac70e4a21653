// The real Docker Engine the sandbox tests use when CORRAL_DOCKER_HOST names one
// (scripts/dockerd-test.sh: a private daemon on a unix socket, image corral-busybox), and the
// Engine API calls the tests make on it to see what a sandbox left behind.
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export const DOCKER_HOST = process.env.CORRAL_DOCKER_HOST;
// In CI a missing engine fails the run on Linux, where scripts/test.sh starts one: the tests that
// need one never pass by being skipped there. (Under Wine none runs; those tests are listed.)
if (process.env.CI === 'true' && process.platform === 'linux' && !DOCKER_HOST) {
  throw new Error('CI=true but CORRAL_DOCKER_HOST names no Docker Engine: scripts/test.sh starts one as root (it needs docker.io and busybox-static).');
}
export const IMAGE = 'corral-busybox:latest';

/** A GET on the real engine's socket (unversioned path); resolves the parsed JSON. */
export function engineGet(path) {
  return engineCall('GET', path);
}

/** A call without a body on the real engine's socket; resolves the parsed JSON (or null). */
export function engineCall(method, path) {
  const socketPath = DOCKER_HOST.replace(/^unix:\/\//, '');
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path, method, headers: { host: 'docker' } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode >= 300) return reject(new Error(`${method} ${path}: ${res.statusCode}`));
        const text = Buffer.concat(chunks).toString();
        resolve(text ? JSON.parse(text) : null);
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every container, running or not, that mounts `dir` or a directory below it. */
export async function containersFor(dir) {
  const all = await engineGet('/containers/json?all=1');
  return all.filter((c) => (c.Mounts ?? []).some((m) => m.Source === dir || m.Source?.startsWith(`${dir}/`)));
}

/** Polls until no container mounts `dir` (up to 10 s); returns what is left. */
export async function containersGone(dir) {
  let left = [];
  for (let i = 0; i < 100; i++) {
    left = await containersFor(dir);
    if (left.length === 0) break;
    await sleep(100);
  }
  return left;
}

