// Shared fixtures for the specs: temp directories and a provider written in plain JavaScript.
import { afterEach, afterAll } from 'vitest';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, writeFileSync, rmSync, realpathSync, symlinkSync, lstatSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join, dirname, relative } from 'node:path';
import { LinuxSandbox, normalizeWorkspacePath, WorkspaceError } from 'corral';
import { certificateAuthority } from './pki.mjs';

/** Whether LinuxSandbox can run here: Linux with mount, pid and network namespaces, and a user
 * namespace unless the tests run as root. */
export const linuxSandboxUsable = (() => {
  if (process.platform !== 'linux') return false;
  const p = LinuxSandbox.probe();
  const usable = p.mountNamespaces && p.pidNamespaces && p.netNamespaces && (process.getuid?.() === 0 || p.userNamespaces);
  // In CI a kernel without the namespaces fails the run instead of skipping the sandbox's tests.
  if (!usable && process.env.CI === 'true') throw new Error(`CI=true but this kernel gives LinuxSandbox no namespaces: ${JSON.stringify(p)}`);
  return usable;
})();

/** Whether symbolic links can be made here (not under Wine, which makes none, nor on a Windows
 * account without the right): link tests skip, with this reason, where they cannot. */
export const linksWork = (() => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-link-'));
  try {
    symlinkSync(join(dir, 'target'), join(dir, 'link'));
    return lstatSync(join(dir, 'link')).isSymbolicLink();
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
})();

/** Whether files have POSIX permission bits (not on Windows): mode tests skip elsewhere. */
export const posixModes = process.platform !== 'win32';

/** Whether this is Windows under Wine (scripts/cross/windows-wine.sh), whose gaps some tests skip
 * for, where a real Windows has what they need. */
export const underWine = process.platform === 'win32' && Object.keys(process.env).some((k) => k.startsWith('WINE'));

/** What `recordingAdapter` answers unless told otherwise. */
export const OK = { stdout: 'ran\n', stderr: '', exitCode: 0, timedOut: false };

/** A SandboxAdapter written in JS that records every request and signal, answering `answer(request, signal)`. */
export function recordingAdapter(answer = () => OK) {
  const calls = [];
  return {
    calls,
    get requests() { return calls.map((c) => c.request); },
    async run(request, options) {
      calls.push({ request, signal: options?.signal });
      return answer(request, options?.signal);
    },
  };
}

/** A fresh temp directory with `files` written into `root/`; returns { dir, root, cleanup }. */
export function tempTree(files = {}) {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-test-')));
  const root = join(dir, 'root');
  mkdirSync(root);
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true });
    writeFileSync(join(root, p), content);
  }
  return { dir, root, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** An FsProvider written in JavaScript over a directory, as a user would write one for a remote sandbox. */
export function jsProvider(root) {
  const abs = (p) => join(root, normalizeWorkspacePath(p, 'posix'));
  const wrap = (p, e) => {
    if (e?.code === 'ENOENT') return new WorkspaceError(`File not found: ${p}`, 'NotFound');
    return new WorkspaceError(`${e?.code ?? 'error'}: ${p}`, 'Io');
  };
  return {
    async readFile(p) { try { return await fsp.readFile(abs(p), 'utf8'); } catch (e) { throw wrap(p, e); } },
    async readFileBytes(p) { try { return new Uint8Array(await fsp.readFile(abs(p))); } catch (e) { throw wrap(p, e); } },
    async writeFile(p, c) { await fsp.mkdir(dirname(abs(p)), { recursive: true }); await fsp.writeFile(abs(p), c); },
    async stat(p) {
      try {
        const s = await fsp.lstat(abs(p));
        return { type: s.isSymbolicLink() ? 'symlink' : s.isDirectory() ? 'directory' : s.isFile() ? 'file' : 'other', size: s.size };
      } catch { return undefined; }
    },
    async readdir(p) {
      let entries;
      try { entries = await fsp.readdir(abs(p), { withFileTypes: true }); } catch (e) { throw wrap(p, e); }
      return entries.map((e) => ({ name: e.name, type: e.isSymbolicLink() ? 'symlink' : e.isDirectory() ? 'directory' : e.isFile() ? 'file' : 'other' }));
    },
    async mkdir(p) { await fsp.mkdir(abs(p), { recursive: true }); },
    async rm(p, o) { await fsp.rm(abs(p), { recursive: Boolean(o?.recursive) }); },
  };
}

/**
 * For a test file: `tree(files)` makes a temp tree with `sub/` in its root, removed after the
 * test; `cleanups` takes more functions to run after each test (last in, first run).
 */
export function perTestTrees() {
  const cleanups = [];
  afterEach(async () => {
    while (cleanups.length) await cleanups.pop()();
  });
  const tree = (files = {}) => {
    const t = tempTree({ 'sub/.keep': '', ...files });
    cleanups.push(() => t.cleanup());
    return t;
  };
  return { tree, cleanups };
}

export { rmSync };

/** Every file under `root`, workspace path → content: a tree on disk as a snapshot compares it. */
export function filesOnDisk(root, dir = root, out = {}) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) filesOnDisk(root, p, out);
    else out[relative(root, p).split('\\').join('/')] = readFileSync(p, 'utf8');
  }
  return out;
}

/** Whether process `pid` is there (signal 0 reaches it). */
export const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };

/** Whether process `pid` is gone within 10 s (a killed process takes a moment to be reaped). */
export async function gone(pid) {
  for (const started = Date.now(); Date.now() - started < 10_000 && alive(pid);) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

/** For a test file: `tree(files)` is tempTree(files), removed after the file's tests. */
export function treesForFile() {
  const trees = [];
  afterAll(() => trees.forEach((t) => t.cleanup()));
  return (files) => {
    const t = tempTree(files);
    trees.push(t);
    return t;
  };
}

const aiUsage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const aiFinish = (unified) => ({ unified, raw: unified });

/**
 * An AI SDK model (`Mock`: the SDK's MockLanguageModelV3) scripted by `steps`: each step answers
 * with its `[toolName, input]` tool calls, then 'done'; every prompt it got goes into `seen`.
 */
export function scriptedAiModel(Mock, steps, seen) {
  let i = 0;
  return new Mock({
    doGenerate: async (options) => {
      seen.push(options.prompt);
      const step = steps[i++];
      if (!step) return { content: [{ type: 'text', text: 'done' }], finishReason: aiFinish('stop'), usage: aiUsage, warnings: [] };
      return {
        content: step.map(([toolName, input], k) => ({ type: 'tool-call', toolCallId: `call_${i}_${k}`, toolName, input: JSON.stringify(input) })),
        finishReason: aiFinish('tool-calls'),
        usage: aiUsage,
        warnings: [],
      };
    },
  });
}

/**
 * A throwaway PostgreSQL (scripts/pg-test.sh): `{ url, stop(), resume(), cleanup() }`, or null
 * where PostgreSQL is not installed (the tests that need it are then skipped). With
 * CORRAL_TEST_PG_URL set, that server instead, with stop and resume null.
 */
export function startPostgres() {
  // A server started for this run by its caller (scripts/cross/windows-wine.sh starts one on the
  // Linux side for the run under Wine, where pg-test.sh cannot run): used as it is, never stopped.
  const given = process.env.CORRAL_TEST_PG_URL;
  if (given) return { url: given, stop: null, resume: null, cleanup: () => {} };
  if (process.platform === 'win32') return null;
  const script = new URL('../scripts/pg-test.sh', import.meta.url).pathname;
  const dir = mkdtempSync(join(tmpdir(), 'corral-pg-'));
  const run = (what) => spawnSync('bash', [script, what, dir], { encoding: 'utf8' });
  const r = run('start');
  if (r.status === 3) {
    rmSync(dir, { recursive: true, force: true });
    return null;
  }
  if (r.status !== 0) throw new Error(`pg-test.sh start: ${r.stderr}`);
  const must = (what) => { const x = run(what); if (x.status !== 0) throw new Error(`pg-test.sh ${what}: ${x.stderr}`); };
  return {
    url: r.stdout.trim(),
    stop: () => must('stop'),
    resume: () => must('resume'),
    cleanup: () => { run('stop'); rmSync(dir, { recursive: true, force: true }); },
  };
}

/**
 * A CA (RSA, named `name`) and a server certificate for 127.0.0.1 it signed (__test__/pki.mjs):
 * { ca (PEM text), key, cert, authority (the CA, to issue more) }.
 */
export async function certificates(name = 'test CA') {
  const authority = await certificateAuthority({ name });
  const { cert, key } = await authority.issue({ subject: 'CN=127.0.0.1', ip: '127.0.0.1', usage: 'serverAuth' });
  return { ca: authority.cert, key, cert, authority };
}
