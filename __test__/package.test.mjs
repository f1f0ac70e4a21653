// "The package": packed with npm pack, installed from the tarball into a fresh project, and used
// the way users will use it — require, import, and the corral bin through npx.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, readdirSync, existsSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const PKG = fileURLToPath(new URL('..', import.meta.url));
const NODE_FILE = 'corral.linux-x64-gnu.node';

let dir;
let tarball;
let entries;
let project;

beforeAll(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-pack-')));
  const packDir = join(dir, 'pack');
  mkdirSync(packDir);
  const { stdout } = await run('npm', ['pack', '--pack-destination', packDir, '--json'], { cwd: PKG, maxBuffer: 64 * 1024 * 1024 });
  const [info] = JSON.parse(stdout);
  tarball = join(packDir, info.filename);
  const list = await run('tar', ['-tzf', tarball], { maxBuffer: 64 * 1024 * 1024 });
  entries = list.stdout.split('\n').filter(Boolean).map((e) => e.replace(/^package\//, ''));

  project = join(dir, 'project');
  mkdirSync(project);
  await run('npm', ['init', '-y'], { cwd: project });
  await run('npm', ['install', tarball, '--no-audit', '--no-fund'], { cwd: project, maxBuffer: 64 * 1024 * 1024 });
  mkdirSync(join(project, 'work'));
  writeFileSync(join(project, 'work', 'hello.txt'), 'hello x world\nnothing here\n');
}, 180_000);

afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

describe('npm pack', { timeout: 180_000 }, () => {
  it('the tarball holds the entry points, the addon, its loader and the bin, and no tests or Rust sources', () => {
    for (const f of ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'executor.js', 'executor.mjs', 'executor.d.ts',
      'testing.js', 'testing.mjs', 'testing.d.ts', 'binding.js', NODE_FILE, 'bin/corral.js', 'mcp.js', 'workspace-tools.js',
      'ai-sdk.js', 'ai-sdk.mjs', 'ai-sdk.d.ts', 'openai-agents.js', 'openai-agents.mjs', 'openai-agents.d.ts',
      'conformance.js', 'conformance.mjs', 'conformance.d.ts']) {
      expect(entries, f).toContain(f);
    }
    expect(entries.filter((e) => e.startsWith('__test__/') || e.startsWith('crates/') || e.startsWith('src/') || e.startsWith('target/'))).toEqual([]);
    expect(entries.filter((e) => e.endsWith('.rs') || e === 'Cargo.toml')).toEqual([]);
  });

  it('the per-platform packages live under the project\'s npm scope and hold only their addon', async () => {
    const main = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
    const optional = Object.keys(main.optionalDependencies);
    expect(optional.length).toBe(main.napi.targets.length);
    expect(optional.every((n) => n.startsWith('@corral-rs/binding-'))).toBe(true);
    expect(readFileSync(join(PKG, 'binding.js'), 'utf8')).toContain("require('@corral-rs/binding-linux-x64-gnu')");
    for (const d of readdirSync(join(PKG, 'npm'))) {
      const pkg = JSON.parse(readFileSync(join(PKG, 'npm', d, 'package.json'), 'utf8'));
      expect(optional, d).toContain(pkg.name);
      expect(pkg.files, d).toEqual([pkg.main]);
      expect(pkg.main, d).toMatch(/^corral\..+\.node$/);
      const { stdout } = await run('npm', ['pack', '--dry-run', '--json'], { cwd: join(PKG, 'npm', d) });
      const files = JSON.parse(stdout)[0].files.map((f) => f.path).filter((f) => !['package.json', 'README.md', pkg.main].includes(f));
      expect(files, d).toEqual([]);
    }
    // The SDKs a user brings are optional peers; installing corral pulls in the MCP SDK only.
    expect(main.peerDependenciesMeta).toEqual({ ai: { optional: true }, '@openai/agents': { optional: true } });
    expect(Object.keys(main.dependencies)).toEqual(['@modelcontextprotocol/sdk']);
  });
});

describe('installed from the tarball into a fresh project', { timeout: 180_000 }, () => {
  it('installs even though the optional per-platform packages are not published', () => {
    const installed = JSON.parse(readFileSync(join(project, 'node_modules', 'corral', 'package.json'), 'utf8'));
    expect(installed.name).toBe('corral');
    expect(Object.keys(installed.optionalDependencies ?? {})).toContain('@corral-rs/binding-linux-x64-gnu');
    expect(existsSync(join(project, 'node_modules', 'corral', NODE_FILE))).toBe(true);
    expect(readdirSync(join(project, 'node_modules', 'corral', 'bin'))).toContain('corral.js');
    expect(JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')).dependencies.corral).toMatch(/corral-.*\.tgz$/);
  });

  it("require('corral') gives working tools", async () => {
    const script = `
      const { NodeWorkspace, createFsTools, WorkspaceError } = require('corral');
      const { executeTool } = require('corral/executor');
      const { MemoryWorkspace } = require('corral/testing');
      (async () => {
        const tools = createFsTools(new NodeWorkspace({ root: 'work' }));
        const read = tools.find((t) => t.name === 'read_file');
        const refused = await executeTool(read, { path: '../package.json' });
        const memory = new MemoryWorkspace({ files: { 'a.md': 'alpha' } });
        console.log(JSON.stringify({
          names: tools.map((t) => t.name),
          read: await read.execute({ path: 'hello.txt' }),
          refused,
          isClass: typeof WorkspaceError === 'function',
          memory: memory.snapshot(),
          resolved: require.resolve('corral'),
        }));
      })().catch((e) => { console.error(e); process.exit(1); });
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: project });
    const out = JSON.parse(stdout);
    expect(out.names).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep']);
    expect(out.read).toBe(' 1\thello x world\n 2\tnothing here');
    expect(out.refused).toMatchObject({ error: 'WorkspaceError', toolName: 'read_file' });
    expect(out.refused.message).toMatch(/outside the workspace/);
    expect(out.isClass).toBe(true);
    expect(out.memory).toEqual({ 'a.md': 'alpha' });
    expect(out.resolved).toBe(join(project, 'node_modules', 'corral', 'index.js'));
  });

  it("import from 'corral' and 'corral/executor' gives working tools", async () => {
    writeFileSync(join(project, 'use.mjs'), `
      import { createFsTools, MemoryWorkspace, WorkspaceCheckpoints } from 'corral';
      import { ToolRegistry } from 'corral/executor';
      const fs = new MemoryWorkspace({ files: { 'src/a.ts': 'export const alpha = 1;\\n' } });
      const checkpoints = new WorkspaceCheckpoints(fs);
      const registry = new ToolRegistry().registerMany(createFsTools(fs, { checkpoints }));
      const grep = await registry.execute('grep', { pattern: 'alpha' });
      const edit = await registry.execute('edit_file', { path: 'src/a.ts', old_string: '= 1', new_string: '= 2' }, { sessionId: 's', turn: 0 });
      const after = fs.snapshot()['src/a.ts'];
      const rewind = await checkpoints.rewind(0, { sessionId: 's' });
      const refused = await registry.execute('write_file', { path: '.git/config', content: 'x' });
      console.log(JSON.stringify({ grep, edit, after, rewind, restored: fs.snapshot()['src/a.ts'], refused }));
    `);
    const { stdout } = await run(process.execPath, ['use.mjs'], { cwd: project });
    const out = JSON.parse(stdout);
    expect(out.grep).toBe('src/a.ts:1: export const alpha = 1;');
    expect(out.edit).toMatch(/^Edited src\/a\.ts/);
    expect(out.after).toBe('export const alpha = 2;\n');
    expect(out.rewind).toEqual({ dryRun: false, restored: ['src/a.ts'], deleted: [], skipped: [] });
    expect(out.restored).toBe('export const alpha = 1;\n');
    expect(out.refused).toMatchObject({ error: 'WorkspaceError', toolName: 'write_file' });
  });

  it('every subpath loads from the installed package', async () => {
    const script = `
      const subpaths = ['corral/ai-sdk', 'corral/openai-agents', 'corral/conformance', 'corral/executor', 'corral/testing'];
      console.log(JSON.stringify(subpaths.map((p) => Object.keys(require(p)).sort())));
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: project });
    expect(JSON.parse(stdout)).toEqual([['toAiSdkTools'], ['toOpenAIAgentsTools'], ['ConformanceError', 'runConformance'], ['ToolRegistry', 'executeTool'], ['MemoryWorkspace']]);
  });

  it('npx corral mcp --help prints its usage on stderr from the installed bin', async () => {
    const r = await run('npx', ['corral', 'mcp', '--help'], { cwd: project }).catch((e) => e);
    expect(r.stderr).toContain('usage: corral mcp --root DIR');
  });

  it('npx corral runs a tool from the installed bin and prints the match', async () => {
    const { stdout } = await run('npx', ['corral', 'grep', '{"pattern":"x"}', '--root', join(project, 'work')], { cwd: project });
    expect(stdout.trim()).toBe('hello.txt:1: hello x world');
  });
});
