// "The package": packed with npm pack, installed from the tarball into a fresh project, and used
// the way users will use it — require, import, and the corral bin through npx.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { statSync, mkdtempSync, mkdirSync, writeFileSync, readFileSync, readdirSync, existsSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const PKG = fileURLToPath(new URL('..', import.meta.url));
// The addon of this machine, named as the loader names it.
const { targetName } = createRequire(import.meta.url)('../js/load-binding.js');
const TARGET = targetName({
  platform: process.platform,
  arch: process.arch,
  libc: process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl') : null,
});
const NODE_FILE = `corral.${TARGET}.node`;

let dir;
let tarball;
let entries;
let project;

beforeAll(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'corral-pack-')));
  const packDir = join(dir, 'pack');
  mkdirSync(packDir);
  // The addon npm test builds is a debug build: packed here on purpose (see the test below).
  const env = { ...process.env, CORRAL_PACK_DEBUG: '1' };
  const { stdout } = await run('npm', ['pack', '--pack-destination', packDir, '--json'], { cwd: PKG, env, maxBuffer: 64 * 1024 * 1024 });
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
  it('refuses a debug addon unless told to pack it, and packs a release one', async () => {
    const size = statSync(join(PKG, 'js', NODE_FILE)).size;
    const packDir = join(dir, 'refused');
    mkdirSync(packDir);
    const env = { ...process.env, CORRAL_PACK_DEBUG: '' };
    const packed = run('npm', ['pack', '--dry-run', '--pack-destination', packDir], { cwd: PKG, env, maxBuffer: 64 * 1024 * 1024 });
    if (size > 40 * 1024 * 1024) {
      const e = await packed.then(() => null, (err) => err);
      expect(e?.stderr).toMatch(/is a debug build .*npm run build/);
    } else {
      await expect(packed).resolves.toBeTruthy();
    }
  });

  it('the tarball holds the entry points, the addon, its loader and the bin, and no tests or Rust sources', () => {
    const js = ['index.js', 'index.mjs', 'executor.js', 'executor.mjs', 'executor.d.ts', 'testing.js', 'testing.mjs', 'testing.d.ts',
      'binding.js', 'load-binding.js', NODE_FILE, 'mcp.js', 'workspace-tools.js', 'ai-sdk.js', 'ai-sdk.mjs', 'ai-sdk.d.ts',
      'openai-agents.js', 'openai-agents.mjs', 'openai-agents.d.ts', 'conformance.js', 'conformance.mjs', 'conformance.d.ts'];
    for (const f of ['package.json', 'index.d.ts', 'bin/corral.js', ...js.map((f) => `js/${f}`)]) {
      expect(entries, f).toContain(f);
    }
    // The top level is the package's own: its manifest, its types, its bin; the JavaScript is under js/.
    expect(entries.filter((e) => !e.includes('/')).sort()).toEqual(['LICENSE', 'README.md', 'index.d.ts', 'package.json']);
    expect(entries.filter((e) => e.startsWith('__test__/') || e.startsWith('crates/') || e.startsWith('src/') || e.startsWith('target/'))).toEqual([]);
    expect(entries.filter((e) => e.endsWith('.rs') || e === 'Cargo.toml')).toEqual([]);
  });

  it('the per-platform packages live under the project\'s npm scope and hold only their addon', async () => {
    const main = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
    const optional = Object.keys(main.optionalDependencies);
    expect(optional.length).toBe(main.napi.targets.length);
    expect(optional.every((n) => n.startsWith('@corral-rs/binding-'))).toBe(true);
    expect(readFileSync(join(PKG, 'js', 'binding.js'), 'utf8')).toContain(`require('@corral-rs/binding-${TARGET}')`);
    for (const d of readdirSync(join(PKG, 'npm'))) {
      const pkg = JSON.parse(readFileSync(join(PKG, 'npm', d, 'package.json'), 'utf8'));
      expect(optional, d).toContain(pkg.name);
      expect(pkg.files, d).toEqual([pkg.main]);
      expect(pkg.main, d).toMatch(/^corral\..+\.node$/);
      const { stdout } = await run('npm', ['pack', '--dry-run', '--json'], { cwd: join(PKG, 'npm', d) });
      const files = JSON.parse(stdout)[0].files.map((f) => f.path).filter((f) => !['package.json', 'README.md', pkg.main].includes(f));
      expect(files, d).toEqual([]);
    }
    // The SDKs a user brings are optional peers; installing corral pulls in the MCP server SDK only.
    expect(main.peerDependenciesMeta).toEqual({ ai: { optional: true }, '@openai/agents': { optional: true } });
    expect(Object.keys(main.dependencies)).toEqual(['@modelcontextprotocol/server']);
  });
});

describe('installed from the tarball into a fresh project', { timeout: 180_000 }, () => {
  it('installs even though the optional per-platform packages are not published', () => {
    const installed = JSON.parse(readFileSync(join(project, 'node_modules', 'corral', 'package.json'), 'utf8'));
    expect(installed.name).toBe('corral');
    expect(Object.keys(installed.optionalDependencies ?? {})).toContain(`@corral-rs/binding-${TARGET}`);
    expect(existsSync(join(project, 'node_modules', 'corral', 'js', NODE_FILE))).toBe(true);
    expect(readdirSync(join(project, 'node_modules', 'corral', 'bin'))).toContain('corral.js');
    expect(JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')).dependencies.corral).toMatch(/corral-.*\.tgz$/);
  });

  it("README's first install works: a project links the checkout with npm install <dir>", async () => {
    const linked = join(dir, 'linked');
    mkdirSync(linked);
    await run('npm', ['init', '-y'], { cwd: linked });
    await run('npm', ['install', PKG, '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: linked, maxBuffer: 64 * 1024 * 1024 });
    const { stdout } = await run(process.execPath, ['-e', "const c = require('corral'); console.log(typeof c.createFsTools, require.resolve('corral'))"], { cwd: linked });
    expect(stdout.split(' ')[0]).toBe('function');
    expect(realpathSync(stdout.trim().split(' ')[1])).toBe(join(realpathSync(PKG), 'js', 'index.js'));
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
    expect(out.resolved).toBe(join(project, 'node_modules', 'corral', 'js', 'index.js'));
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
    expect(JSON.parse(stdout)).toEqual([['createCorralHarnessSandbox', 'toAiSdkSandbox', 'toAiSdkTools'], ['corralSandboxClient', 'createEditor', 'toOpenAIAgentsTools'], ['ConformanceError', 'runConformance'], ['ToolRegistry', 'executeTool'], ['MemoryWorkspace']]);
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

// How a release ships: corral's tarball without an addon, and the addon of each platform in a
// package of its own (npm/<target>), which npm installs beside it.
describe('a platform package installed beside corral', { timeout: 180_000 }, () => {
  let split;
  beforeAll(async () => {
    const splitDir = join(dir, 'split');
    // The platform package of this machine, its addon copied in as the release does.
    const platformDir = join(splitDir, 'platform');
    mkdirSync(platformDir, { recursive: true });
    for (const f of ['package.json', 'README.md']) writeFileSync(join(platformDir, f), readFileSync(join(PKG, 'npm', TARGET, f)));
    writeFileSync(join(platformDir, NODE_FILE), readFileSync(join(PKG, 'js', NODE_FILE)));
    const platform = JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', splitDir], { cwd: platformDir })).stdout)[0];
    // corral itself, packed from a copy of its files without any addon.
    const mainDir = join(splitDir, 'main');
    for (const f of entries.filter((e) => !e.endsWith('.node'))) {
      mkdirSync(join(mainDir, f, '..'), { recursive: true });
      writeFileSync(join(mainDir, f), readFileSync(join(PKG, f)));
    }
    // A copy of the package's files: no scripts/, so no prepack (the addon is not in it anyway).
    const main = JSON.parse((await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', splitDir], { cwd: mainDir, maxBuffer: 64 * 1024 * 1024 })).stdout)[0];
    split = { dir: splitDir, platform, main, project: join(splitDir, 'project') };
    mkdirSync(split.project);
    await run('npm', ['init', '-y'], { cwd: split.project });
    await run('npm', ['install', join(split.dir, main.filename), join(split.dir, platform.filename), '--no-audit', '--no-fund'],
      { cwd: split.project, maxBuffer: 64 * 1024 * 1024 });
  }, 180_000);

  it('the platform package holds its addon, its package.json and README, nothing else', () => {
    expect(split.platform.name).toBe(`@corral-rs/binding-${TARGET}`);
    expect(split.platform.files.map((f) => f.path).sort()).toEqual([NODE_FILE, 'README.md', 'package.json'].sort());
    expect(split.main.files.filter((f) => f.path.endsWith('.node'))).toEqual([]);
  });

  it("require('corral') loads the addon from the platform package and its tools work", async () => {
    const script = `
      const { createFsTools, NodeWorkspace } = require('corral');
      const grep = createFsTools(new NodeWorkspace({ root: '.' })).find((t) => t.name === 'grep');
      grep.execute({ pattern: '"name"', glob: 'package.json' }).then((found) => console.log(JSON.stringify({
        found,
        addons: process.report.getReport().sharedObjects.filter((p) => p.endsWith('.node')),
      })));
    `;
    const { stdout } = await run(process.execPath, ['-e', script], { cwd: split.project });
    const out = JSON.parse(stdout);
    expect(out.found).toBe('package.json:2:   "name": "project",');
    expect(out.addons).toEqual([join(split.project, 'node_modules', '@corral-rs', `binding-${TARGET}`, NODE_FILE)]);
    expect(existsSync(join(split.project, 'node_modules', 'corral', 'js', NODE_FILE))).toBe(false);
  });

  it('the SDK adapters type-check under tsc --strict where neither SDK is installed', async () => {
    expect(existsSync(join(split.project, 'node_modules', 'ai'))).toBe(false);
    expect(existsSync(join(split.project, 'node_modules', '@openai', 'agents'))).toBe(false);
    writeFileSync(join(split.project, 'adapters.ts'), [
      "import { NodeWorkspace, createFsTools } from 'corral';",
      "import { toAiSdkTools, toAiSdkSandbox } from 'corral/ai-sdk';",
      "import { toOpenAIAgentsTools, corralSandboxClient, createEditor } from 'corral/openai-agents';",
      "const ws = new NodeWorkspace({ root: '.' });",
      'export const all = [toAiSdkTools(createFsTools(ws)), toAiSdkSandbox(ws), toOpenAIAgentsTools(createFsTools(ws)), corralSandboxClient({ fs: ws }), createEditor(ws)];',
    ].join('\n'));
    writeFileSync(join(split.project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, skipLibCheck: false, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', types: ['node'], typeRoots: [join(PKG, 'node_modules', '@types')] },
      files: ['adapters.ts'],
    }));
    const tsc = join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
    const r = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: split.project }).catch((e) => e);
    expect(`${r.stdout ?? ''}${r.stderr ?? ''}`).toBe('');
  });
});

// What README.md says about the installed package (issue 20): the files it tells a user to run are
// in the tarball, paths that exist only in the repository say so, the MCP snippets start a server
// from a project with corral installed, and the missing-addon message is the one it shows.
// README.md and the pages of docs/ it leads to, as one text.
const README = ['README.md', ...readdirSync(join(PKG, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)]
  .map((p) => readFileSync(join(PKG, p), 'utf8')).join('\n\n');

/** README.md and docs/ cut into paragraphs (a fenced block is one), each with the headings above it. */
function readmeParagraphs() {
  const out = [];
  let headings = [];
  let lines = [];
  let fenced = false;
  const flush = () => { if (lines.length) out.push({ text: lines.join('\n'), headings: headings.join(' ') }); lines = []; };
  for (const line of README.split('\n')) {
    if (line.startsWith('```')) {
      if (!fenced) flush();
      lines.push(line);
      fenced = !fenced;
      if (!fenced) flush();
    } else if (fenced) lines.push(line);
    else if (line.trim() === '') flush();
    else {
      const h = /^(#+) /.exec(line);
      if (h) headings = [...headings.slice(0, h[1].length - 1), line];
      lines.push(line);
    }
  }
  flush();
  return out;
}

/** Starts `command args` in `cwd` as an MCP server and returns the names from tools/list. */
async function mcpToolNames(command, args, cwd) {
  const child = spawn(command, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const send = (msg) => child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...msg })}\n`);
  try {
    const replies = createInterface({ input: child.stdout });
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'readme', version: '0' } } });
    for await (const line of replies) {
      const msg = JSON.parse(line);
      if (msg.id === 1) {
        send({ method: 'notifications/initialized' });
        send({ id: 2, method: 'tools/list' });
      } else if (msg.id === 2) {
        return msg.result.tools.map((t) => t.name);
      }
    }
    throw new Error(`${command} ${args.join(' ')} ended without listing its tools: ${stderr}`);
  } finally {
    child.kill();
  }
}

describe('what README.md and docs/ say about the package', { timeout: 180_000 }, () => {
  it('every file it tells a user of the installed package to run is in the tarball', () => {
    const named = [...README.matchAll(/node_modules\/corral\/([\w./-]+)/g)].map((m) => m[1]);
    expect(named).toContain('examples/admin-server.mjs');
    for (const f of named) expect(entries, `README names node_modules/corral/${f}`).toContain(f);
  });

  it('a path that is only in the repository is said to be so where it is named', () => {
    const unsaid = [];
    const seen = new Set();
    for (const { text, headings } of readmeParagraphs()) {
      // A path in backticks of its own, or the script of a `node …` command (in prose or a code block).
      const spans = text.startsWith('```') ? [] : [...text.matchAll(/`([^`\s]+)`/g)].map((m) => m[1]);
      const paths = [...spans, ...[...text.matchAll(/\bnode ([\w./-]+)/g)].map((m) => m[1])].filter((p) => /^(?:\.?[\w-]+\/)+[\w.-]*$|^[\w-]+(?:\.[\w-]+)+$/.test(p));
      for (const p of new Set(paths)) {
        if (!existsSync(join(PKG, p)) || entries.some((e) => e === p || e.startsWith(p.endsWith('/') ? p : `${p}/`))) continue;
        seen.add(p);
        if (!/repository|checkout|clone/i.test(`${headings}\n${text}`)) unsaid.push(`${p}: ${text.slice(0, 80)}`);
      }
    }
    expect(unsaid).toEqual([]);
    expect([...seen]).toEqual(expect.arrayContaining(['bench/README.md', 'examples/integrations/ai-sdk.mjs', 'scripts/dockerd-test.sh']));
  });

  it('the MCP snippets for Claude Code, Cursor and Codex start a server from a project with corral installed', async () => {
    const claude = /^claude mcp add corral -- (.*)$/m.exec(README)[1].match(/"[^"]*"|\S+/g).map((w) => w.replace(/^"|"$/g, ''));
    const cursor = JSON.parse(/^```json\n(.*)\n```$/m.exec(README)[1]).mcpServers.corral;
    const codexToml = /\[mcp_servers\.corral\]\ncommand = (".*")\nargs = (\[.*\])/.exec(README);
    const snippets = {
      'Claude Code': [claude[0], claude.slice(1)],
      Cursor: [cursor.command, cursor.args],
      Codex: [JSON.parse(codexToml[1]), JSON.parse(codexToml[2])],
    };
    for (const [client, [command, args]] of Object.entries(snippets)) {
      expect([client, command, args.slice(0, 4)]).toEqual([client, 'npx', ['corral', 'mcp', '--root', '.']]);
      const names = await mcpToolNames(command, args, project);
      expect(names, client).toEqual(expect.arrayContaining(['read_file', 'write_file', 'edit_file', 'grep', 'shell']));
    }
  });
});

describe('when no native addon fits the machine', { timeout: 60_000 }, () => {
  // Pretends to be another machine before corral's loader (binding.js, generated by napi) looks.
  const pretend = (platform, arch) => {
    const file = join(project, `pretend-${platform}-${arch}.cjs`);
    writeFileSync(file, `Object.defineProperty(process, 'platform', { value: '${platform}' });\n` +
      `Object.defineProperty(process, 'arch', { value: '${arch}' });\n`);
    return file;
  };
  const load = (preload) => run(process.execPath, ['-r', preload, '-e',
    "try { require('corral'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }"], { cwd: project });

  it('the installed package says what it looked for and how to build it, as README.md shows', async () => {
    const { stdout } = await load(pretend('freebsd', 'x64'));
    const { code, message } = JSON.parse(stdout);
    expect(code).toBe('CORRAL_NO_NATIVE_ADDON');
    expect(README).toContain(`\`\`\`text\n${message}\n\`\`\``);
    expect(message).toContain('freebsd x64');
    expect(message).toContain('@corral-rs/binding-freebsd-x64');
    expect(message).toContain('npm install && npm run build');
    expect(message).not.toMatch(/npm has a bug|4828/);
  });

  it('on a published platform it names the optional package and why it can be missing', async () => {
    const { stdout } = await load(pretend('darwin', 'arm64'));
    const { code, message } = JSON.parse(stdout);
    expect(code).toBe('CORRAL_NO_NATIVE_ADDON');
    expect(message).toMatch(/^corral: no native addon for this machine: darwin arm64, napi target darwin-arm64\./);
    expect(message).toContain('corral.darwin-arm64.node');
    expect(message).toContain("@corral-rs/binding-darwin-arm64@0.1.0 holds it: it is one of corral's optionalDependencies");
    expect(message).toContain('--omit=optional');
    expect(message).not.toMatch(/npm has a bug|4828/);
  });

  it('names an addon that is there but fails to load, and the libc it looked for', () => {
    const { loadBinding } = createRequire(import.meta.url)(join(project, 'node_modules', 'corral', 'js', 'load-binding.js'));
    const napiError = new Error('Cannot find native binding. npm has a bug related to optional dependencies');
    napiError.cause = new Error('/x/corral.linux-x64-musl.node: Error relocating: __fstat64: symbol not found');
    let thrown;
    try {
      loadBinding(() => { throw napiError; }, { platform: 'linux', arch: 'x64', libc: 'musl' });
    } catch (e) { thrown = e; }
    expect(thrown.cause).toBe(napiError);
    expect(thrown.message.split('\n').slice(0, 3)).toEqual([
      'corral: no native addon for this machine: linux x64 (musl), napi target linux-x64-musl.',
      'Looked for corral.linux-x64-musl.node in corral\'s js/ directory, then the package @corral-rs/binding-linux-x64-musl.',
      'An addon was found but did not load: /x/corral.linux-x64-musl.node: Error relocating: __fstat64: symbol not found',
    ]);
    const other = new Error('something else');
    expect(() => loadBinding(() => { throw other; })).toThrow(other);
  });
});
