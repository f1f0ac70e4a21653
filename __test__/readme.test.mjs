// "The docs run": every ```ts and ```js block of README.md and docs/*.md is type-checked with `tsc --strict`
// and then run with node, each in a directory of its own holding a fresh copy of examples/project
// (the blocks' `./project`). A comment on the line before a block says when it does not run:
//   <!-- readme-test: typecheck-only (why) -->  it needs the internet or another machine: tsc only
//   <!-- readme-test: docker -->                runs where CORRAL_DOCKER_HOST names an engine, else skipped
//   <!-- readme-test: linux-sandbox -->         runs where LinuxSandbox can (namespaces, a cgroup), else skipped
//   <!-- readme-test: skip (why) -->            not a program: neither checked nor run, listed as skipped
// The blocks are written under target/ so that `import 'corral'` is this checkout (self-reference).
// Nothing a block runs may reach past 127.0.0.1: those blocks are typecheck-only.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { LinuxSandbox } from 'corral';
import { linuxSandboxUsable } from './helpers.mjs';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const DIRECTIVE = /^<!--\s*readme-test:\s*(typecheck-only|docker|linux-sandbox|skip)\b\s*(?:\((.*)\))?\s*-->$/;


/** The ```ts / ```js blocks of a Markdown text: { n, line, lang, heading, mode, reason, code }. */
function readmeBlocks(markdown, path) {
  const lines = markdown.split('\n');
  const blocks = [];
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const h = /^(#+)\s+(.*)$/.exec(lines[i]);
    if (h) { heading = h[2]; continue; }
    const open = /^```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`${path}:${i + 1}: a code block that never closes`);
    const lang = open[1];
    if (['ts', 'typescript', 'js', 'javascript'].includes(lang)) {
      let before = i - 1;
      while (before >= 0 && lines[before].trim() === '') before--;
      const d = DIRECTIVE.exec(lines[before]?.trim() ?? '');
      blocks.push({
        path, line: i + 1, lang: lang.startsWith('t') ? 'ts' : 'js', heading, directive: Boolean(d),
        mode: d?.[1] ?? 'run', reason: d?.[2] ?? '', code: lines.slice(i + 1, end).join('\n'),
      });
    }
    i = end;
  }
  return blocks;
}

// README.md and every page of docs/, in that order.
const PAGES = ['README.md', ...readdirSync(join(REPO, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const blocks = PAGES.flatMap((p) => readmeBlocks(readFileSync(join(REPO, p), 'utf8'), p)).map((b, i) => ({ ...b, n: i + 1 }));
const dockerHost = process.env.CORRAL_DOCKER_HOST;
const linuxSandboxFull = linuxSandboxUsable && LinuxSandbox.probe().cgroups !== null;

/** Why a block is not run here, or null when it runs. */
function notRunBecause(b) {
  if (b.mode === 'skip') return `skipped: ${b.reason || 'no reason given'}`;
  if (b.mode === 'typecheck-only') return `type-checked only: ${b.reason || 'no reason given'}`;
  if (b.mode === 'docker' && !dockerHost) return 'skipped: needs a Docker Engine (CORRAL_DOCKER_HOST is not set)';
  if (b.mode === 'linux-sandbox' && !linuxSandboxFull) return 'skipped: LinuxSandbox (namespaces and a writable cgroup) is not available here';
  return null;
}

const file = (b) => `block${String(b.n).padStart(2, '0')}`;
const title = (b) => `${b.path}:${b.line} (${b.heading})`;
let dir;
const diagnostics = new Map(); // file name → tsc errors for that block

beforeAll(async () => {
  mkdirSync(join(REPO, 'target'), { recursive: true });
  dir = mkdtempSync(join(REPO, 'target', 'readme-test-'));
  chmodSync(dir, 0o755); // LinuxSandbox as root runs commands as an unprivileged user, who must reach cwd
  mkdirSync(join(dir, 'src'));
  const checked = blocks.filter((b) => b.mode !== 'skip');
  for (const b of checked) writeFileSync(join(dir, 'src', `${file(b)}.${b.lang === 'ts' ? 'mts' : 'mjs'}`), `${b.code}\n`);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', types: ['node'],
      allowJs: true, checkJs: true, skipLibCheck: true, rootDir: 'src', outDir: 'out', pretty: false,
    },
    include: ['src'],
  }));
  // One tsc for every block (it still emits when a block has errors; those blocks fail below).
  const tsc = join(REPO, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir, maxBuffer: 16 << 20 }).catch((e) => e);
  let last = 'tsc';
  for (const line of `${r.stdout ?? ''}`.split('\n').filter((l) => l.trim())) {
    const m = /^src\/(block\d+)\.m[tj]s\((\d+),\d+\): (error .*)$/.exec(line);
    if (!/^\s/.test(line)) last = m ? m[1] : 'tsc';
    diagnostics.set(last, [...(diagnostics.get(last) ?? []), m ? `line ${m[2]}: ${m[3]}` : line.trim()]);
  }
}, 180_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  const notRun = blocks.map((b) => [b, notRunBecause(b)]).filter(([, why]) => why);
  if (notRun.length) console.info(`Blocks of the docs not run here:\n${notRun.map(([b, why]) => `  ${title(b)}: ${why}`).join('\n')}`);
});

describe('README.md and docs/', () => {
  it('have code blocks to check, and every directive is one the test knows', () => {
    expect(blocks.length).toBeGreaterThan(10);
    expect(PAGES.length).toBeGreaterThan(5);
    for (const page of PAGES) {
      const directives = readFileSync(join(REPO, page), 'utf8').split('\n').filter((l) => l.includes('readme-test:'));
      expect(directives.filter((l) => !DIRECTIVE.test(l.trim())), page).toEqual([]);
      expect(blocks.filter((b) => b.path === page && b.directive).length, `${page}: a directive not right before a ts/js block`).toBe(directives.length);
    }
    expect(diagnostics.get('tsc') ?? []).toEqual([]);
  });

  for (const b of blocks) {
    describe(title(b), () => {
      it.skipIf(b.mode === 'skip')(`type-checks with tsc --strict${b.mode === 'skip' ? ` (skipped: ${b.reason})` : ''}`, () => {
        expect(diagnostics.get(file(b)) ?? []).toEqual([]);
      });

      const why = notRunBecause(b);
      it.skipIf(why !== null)(`runs with node${why ? ` (${why})` : ''}`, async () => {
        const cwd = join(dir, file(b));
        cpSync(join(REPO, 'examples', 'project'), join(cwd, 'project'), { recursive: true });
        const env = { ...process.env, ...(b.mode === 'docker' ? { DOCKER_HOST: dockerHost } : {}) };
        const r = await run(process.execPath, [join(dir, 'out', `${file(b)}.mjs`)], { cwd, env, timeout: 120_000, maxBuffer: 16 << 20 })
          .catch((e) => e);
        expect(r.code ?? 0, `${r.stderr}`).toBe(0);
      }, 150_000);
    });
  }
});
