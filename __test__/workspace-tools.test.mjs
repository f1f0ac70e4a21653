// Workspace-defined tools through the public API: template tools run for real, the registry and
// its stores (SQLite with two processes writing at once), the audit hook, and the admin HTTP
// handler on a real http.Server on 127.0.0.1, driven by the peer spec's curl examples.
import { describe, it, expect, afterAll, beforeAll, vi } from 'vitest';
import { createServer, request as httpRequest } from 'node:http';
import { spawn, execFileSync, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, realpathSync, rmSync, mkdirSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  NodeWorkspace, MemoryWorkspace, SandboxShell, NoopSandbox, createFsTools, createTemplateTool, WorkspaceToolRegistry,
  MemoryToolStore, SqliteToolStore, createWorkspaceToolsHandler, ConfigurationError,
} from 'corral';
import { tempTree } from './helpers.mjs';

const INDEX = fileURLToPath(new URL('../js/index.js', import.meta.url));
const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files) => { const t = tempTree(files); trees.push(t); return t; };
const tmp = () => { const d = realpathSync(mkdtempSync(join(tmpdir(), 'corral-wt-'))); trees.push({ cleanup: () => rmSync(d, { recursive: true, force: true }) }); return d; };

const echoSpec = (name = 'echo_arg') => ({
  name,
  description: 'Echo one argument.',
  parameters: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
  handler_kind: 'shell_template',
  handler_payload: { command: "printf '%s|' {x}" },
});

// On Windows a shell_template runs `bash -c ^"…^"` through cmd.exe. Where no bash is at hand (under
// Wine), a program that prints its arguments (scripts/cross/wine/argv.c, named by CORRAL_ARGV_EXE)
// stands in for it and shows what bash is given.
const win = process.platform === 'win32';
const ARGV_EXE = win ? process.env.CORRAL_ARGV_EXE : undefined;
/** shlex.quote, as the template quotes each value for bash. */
const shq = (s) => (/^[A-Za-z0-9@%+=:,./_-]+$/.test(s) ? s : `'${s.replaceAll("'", `'"'"'`)}'`);

const hasPython = (() => { try { execFileSync('python3', ['-c', '1']); return true; } catch { return false; } })();

describe('template tools', () => {
  const shells = {
    NodeWorkspace: () => new NodeWorkspace({ root: tree({}).root }),
    'SandboxShell over NoopSandbox': () => new SandboxShell(new NoopSandbox(), { cwd: tree({}).root }),
  };
  for (const [label, make] of Object.entries(shells)) {
    it(`injection values arrive as one literal argument through ${label}`, async () => {
      const tool = createTemplateTool(echoSpec(), { shell: make() });
      expect(tool.needsApproval).toBe(false);
      if (ARGV_EXE) {
        const bin = join(tmp(), 'bin');
        mkdirSync(bin);
        copyFileSync(ARGV_EXE, join(bin, 'bash.exe'));
        const path = process.env.PATH;
        process.env.PATH = `${bin};${path}`;
        try {
          for (const x of ['; rm -rf /tmp/nothing', '$(id)', '`id`', "a'b\"c", 'a && b', 'a | b', '', '--flag', '*']) {
            const r = await tool.execute({ x });
            expect(r.exitCode, JSON.stringify(x)).toBe(0);
            expect(r.stdout.replaceAll('\r\n', '\n'), JSON.stringify(x)).toBe(`-c\nprintf '%s|' ${shq(x)}\n`);
          }
          // cmd.exe ends a command at a line break, however it is quoted: refused before anything runs.
          await expect(tool.execute({ x: 'one\ntwo' })).rejects.toMatchObject({ code: 'InvalidArguments' });
        } finally {
          process.env.PATH = path;
        }
        return;
      }
      for (const x of ['; rm -rf /tmp/nothing', '$(id)', '`id`', "a'b\"c", 'one\ntwo', 'a && b', 'a | b', '', '--flag', '*']) {
        expect(await tool.execute({ x }), JSON.stringify(x)).toMatchObject({ exitCode: 0, stdout: `${x}|` });
      }
    });
  }

  it('arguments are checked against parameters before anything runs', async () => {
    const t = tree({});
    const tool = createTemplateTool({ ...echoSpec(), handler_payload: { command: 'touch ran; echo {x}' } }, { shell: new NodeWorkspace({ root: t.root }) });
    await expect(tool.execute({ x: 3 })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'InvalidArguments' });
    await expect(tool.execute({})).rejects.toMatchObject({ code: 'InvalidArguments' });
    expect(existsSync(join(t.root, 'ran'))).toBe(false);
  });

  it('a non-zero exit is a result, and numbers and objects are substituted as JSON text', async () => {
    const tool = createTemplateTool({ name: 'j', handler_kind: 'shell_template', handler_payload: { command: 'echo {v}; exit 4' } }, { shell: new NodeWorkspace({ root: tree({}).root }) });
    expect(await tool.execute({ v: { a: [1, 2] } })).toMatchObject({ exitCode: 4, stdout: '{"a":[1,2]}\n' });
  });

  it.skipIf(!hasPython)('python_template renders without quoting and runs python3 -c', async () => {
    const tool = createTemplateTool({ name: 'py', parameters: { type: 'object', properties: { n: { type: 'integer' } } }, handler_kind: 'python_template', handler_payload: { code: 'print({n} * 2)' } }, { shell: new NodeWorkspace({ root: tree({}).root }) });
    expect(await tool.execute({ n: 21 })).toMatchObject({ exitCode: 0, stdout: '42\n' });
  });

  it('a bad placeholder, kind, name or schema is a ConfigurationError when the tool is made', () => {
    const shell = new MemoryWorkspace();
    for (const bad of [
      { ...echoSpec(), handler_payload: { command: 'echo {x.y}' } },
      { ...echoSpec(), handler_payload: { command: 'echo {0}' } },
      { ...echoSpec(), handler_payload: { command: 'echo {x:>4}' } },
      { ...echoSpec(), handler_payload: { command: 'echo {x!r}' } },
      { ...echoSpec(), handler_payload: { command: 'echo {x' } },
      { ...echoSpec(), handler_kind: 'perl_template' },
      { ...echoSpec(), name: 'has space' },
      { ...echoSpec(), parameters: { type: 7 } },
    ]) {
      expect(() => createTemplateTool(bad, { shell }), JSON.stringify(bad).slice(0, 80)).toThrow(ConfigurationError);
    }
  });
});

describe('the registry', () => {
  it('a workspace never sees, changes or deletes another workspace\'s tools, and lists by name', async () => {
    const r = new WorkspaceToolRegistry();
    await r.upsert('acme', echoSpec('zed'));
    await r.upsert('acme', echoSpec('alpha'));
    await r.upsert('globex', echoSpec('alpha'));
    expect((await r.list('acme')).map((s) => s.name)).toEqual(['alpha', 'zed']);
    expect(await r.get('globex', 'zed')).toBeUndefined();
    expect(await r.delete('globex', 'zed')).toBe(false);
    expect(await r.get('acme', 'zed')).toMatchObject({ name: 'zed', description: 'Echo one argument.' });
    await expect(r.upsert('acme', { ...echoSpec(), handler_payload: { command: '{bad.x}' } })).rejects.toThrow(ConfigurationError);
  });

  it('toolsFor merges the workspace tools over the built-ins, only in that workspace', async () => {
    const ws = new NodeWorkspace({ root: tree({ 'a.txt': 'a\n' }).root });
    const builtins = createFsTools(ws).slice(0, 3);
    const r = new WorkspaceToolRegistry();
    await r.upsert('acme', { ...echoSpec('write_file'), handler_payload: { command: "echo 'custom write'" }, parameters: {} });
    await r.upsert('acme', echoSpec('deploy'));
    const acme = await r.toolsFor('acme', { shell: ws, builtins });
    expect(acme.map((t) => t.name)).toEqual(['read_file', 'write_file', 'edit_file', 'deploy']);
    expect(await acme[1].execute({})).toMatchObject({ stdout: 'custom write\n' });
    const other = await r.toolsFor('globex', { shell: ws, builtins });
    expect(other.map((t) => t.name)).toEqual(['read_file', 'write_file', 'edit_file']);
    expect(await other[1].execute({ path: 'b.txt', content: 'b' })).toMatch(/^Created b\.txt/);
  });

  it('onDispatch audits every call of every tool, built-ins and failures included', async () => {
    const ws = new NodeWorkspace({ root: tree({ 'a.txt': 'a\n' }).root });
    const events = [];
    const r = new WorkspaceToolRegistry({ onDispatch: async (e) => { events.push(e); } });
    await r.upsert('acme', echoSpec('deploy'));
    const [read, deploy] = await r.toolsFor('acme', { shell: ws, builtins: createFsTools(ws).slice(0, 1) });
    await read.execute({ path: 'a.txt' }, { sessionId: 's1' });
    await expect(read.execute({ path: 'missing.txt' }, { sessionId: 's1' })).rejects.toMatchObject({ code: 'NotFound' });
    await deploy.execute({ x: 'go' }, { sessionId: 's1' });
    expect(events.map(({ durationMs, ...e }) => e)).toEqual([
      { workspaceId: 'acme', sessionId: 's1', toolName: 'read_file', kind: 'builtin', args: { path: 'a.txt' }, ok: true },
      { workspaceId: 'acme', sessionId: 's1', toolName: 'read_file', kind: 'builtin', args: { path: 'missing.txt' }, ok: false, error: { code: 'NotFound', message: 'File not found: missing.txt' } },
      { workspaceId: 'acme', sessionId: 's1', toolName: 'deploy', kind: 'workspace', args: { x: 'go' }, ok: true },
    ]);
    expect(events.every((e) => typeof e.durationMs === 'number' && e.durationMs >= 0)).toBe(true);
  });

  it('an audit hook that throws rejects the call: audit failures are loud', async () => {
    const ws = new MemoryWorkspace({ files: { 'a.txt': 'a' } });
    const r = new WorkspaceToolRegistry({ onDispatch: () => { throw new Error('audit down'); } });
    const [read] = await r.toolsFor('acme', { shell: ws, builtins: createFsTools(ws) });
    await expect(read.execute({ path: 'a.txt' })).rejects.toThrow('audit down');
  });
});

describe('stores', () => {
  it('a SqliteToolStore survives a restart', async () => {
    const path = join(tmp(), 'tools.db');
    await new WorkspaceToolRegistry({ store: new SqliteToolStore(path) }).upsert('acme', echoSpec('kept'));
    const again = new WorkspaceToolRegistry({ store: new SqliteToolStore(path) });
    expect(await again.get('acme', 'kept')).toMatchObject({ name: 'kept', handler_kind: 'shell_template' });
  });

  it('two processes writing 100 specs each into one SQLite file leave all 200 there', async () => {
    const path = join(tmp(), 'shared.db');
    new SqliteToolStore(path);
    const writer = (who) => new Promise((resolve, reject) => {
      const script = `const c = require(${JSON.stringify(INDEX)});
        const r = new c.WorkspaceToolRegistry({ store: new c.SqliteToolStore(${JSON.stringify(path)}) });
        (async () => { for (let i = 0; i < 100; i++) await r.upsert('acme', { name: '${who}_' + i, handler_kind: 'shell_template', handler_payload: { command: 'true' } }); })()
          .then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });`;
      const p = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d) => { err += d; });
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(err))));
    });
    await Promise.all([writer('a'), writer('b')]);
    const specs = await new WorkspaceToolRegistry({ store: new SqliteToolStore(path) }).list('acme');
    expect(specs).toHaveLength(200);
  });

  it('a store written in JS is called with checked specs only', async () => {
    const data = new Map();
    const calls = [];
    const store = {
      async get(w, n) { calls.push('get'); return data.get(`${w}/${n}`); },
      async put(w, s) { calls.push('put'); data.set(`${w}/${s.name}`, s); },
      async delete(w, n) { calls.push('delete'); return data.delete(`${w}/${n}`); },
      async list(w) { calls.push('list'); return [...data.entries()].filter(([k]) => k.startsWith(`${w}/`)).map(([, v]) => v); },
    };
    const r = new WorkspaceToolRegistry({ store });
    await r.upsert('acme', echoSpec('one'));
    await expect(r.upsert('acme', { ...echoSpec('two'), handler_kind: 'nope' })).rejects.toThrow(ConfigurationError);
    expect(calls).toEqual(['put']);
    expect((await r.list('acme')).map((s) => s.name)).toEqual(['one']);
    expect(await r.delete('acme', 'one')).toBe(true);
    expect(new MemoryToolStore()).toBeInstanceOf(MemoryToolStore);
  });
});

describe('the admin HTTP handler', () => {
  let server;
  let base;
  const tokens = { 'acme-token': 'acme', 'globex-token': 'globex' };
  const registry = new WorkspaceToolRegistry({ store: new MemoryToolStore() });
  beforeAll(async () => {
    const handler = createWorkspaceToolsHandler({ registry, authenticate: async (token) => tokens[token] ?? null });
    server = createServer((req, res) => handler(req, res));
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${server.address().port}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const call = async (method, path, { token = 'acme-token', body } = {}) => {
    const r = await fetch(`${base}${path}`, { method, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' }, body });
    const text = await r.text();
    return { status: r.status, allow: r.headers.get('allow'), body: text ? JSON.parse(text) : undefined };
  };

  it('the peer spec\'s curl examples work verbatim', async () => {
    const env = { ...process.env, BIGWAVE_ADMIN_TOKEN: 'acme-token' };
    // curl runs beside this process's server: it must not block the event loop that answers it.
    const curl = async (args) => {
      const { stdout } = await promisify(execFile)('curl', ['-s', '--max-time', '20', '-w', '\n%{http_code}', ...args], { env, encoding: 'utf8' });
      const at = stdout.lastIndexOf('\n');
      return { body: stdout.slice(0, at), code: stdout.slice(at + 1) };
    };
    const put = await curl(['-X', 'PUT', `${base}/admin/workspace-tools/grep_repo`, '-H', `Authorization: Bearer ${env.BIGWAVE_ADMIN_TOKEN}`, '-H', 'Content-Type: application/json', '-d', `{
        "name": "grep_repo",
        "description": "Search the repo for a regex pattern.",
        "parameters": {
          "type": "object",
          "properties": {
            "pattern": { "type": "string" }
          },
          "required": ["pattern"]
        },
        "handler_kind": "shell_template",
        "handler_payload": {
          "command": "grep -rn {pattern} /workspace"
        }
      }`]);
    expect(put.code).toBe('200');
    expect(JSON.parse(put.body)).toMatchObject({ name: 'grep_repo', handler_kind: 'shell_template', handler_payload: { command: 'grep -rn {pattern} /workspace' } });
    const list = await curl([`${base}/admin/workspace-tools`, '-H', `Authorization: Bearer ${env.BIGWAVE_ADMIN_TOKEN}`]);
    expect(list.code).toBe('200');
    expect(JSON.parse(list.body).map((s) => s.name)).toContain('grep_repo');
    const del = await curl(['-X', 'DELETE', `${base}/admin/workspace-tools/grep_repo`, '-H', `Authorization: Bearer ${env.BIGWAVE_ADMIN_TOKEN}`]);
    expect(del).toEqual({ body: '', code: '204' });
  });

  it('answers every case with its documented status and a JSON error', async () => {
    expect((await call('PUT', '/admin/workspace-tools/a_tool', { body: JSON.stringify({ ...echoSpec('other_name') }) })))
      .toMatchObject({ status: 200, body: { name: 'a_tool' } });
    expect(await call('GET', '/admin/workspace-tools/a_tool')).toMatchObject({ status: 200, body: { name: 'a_tool' } });
    expect(await call('GET', '/admin/workspace-tools', { token: null })).toMatchObject({ status: 401, body: { error: 'Unauthorized' } });
    expect(await call('GET', '/admin/workspace-tools', { token: 'wrong' })).toMatchObject({ status: 401 });
    expect(await call('GET', '/admin/elsewhere')).toMatchObject({ status: 404, body: { error: 'NotFound' } });
    expect(await call('POST', '/admin/workspace-tools')).toMatchObject({ status: 405, allow: 'GET', body: { error: 'MethodNotAllowed' } });
    expect(await call('PATCH', '/admin/workspace-tools/a_tool')).toMatchObject({ status: 405, allow: 'GET, PUT, DELETE' });
    // The workspace fence: another workspace's tool is not found, never forbidden.
    expect(await call('GET', '/admin/workspace-tools/a_tool', { token: 'globex-token' })).toMatchObject({ status: 404 });
    expect(await call('DELETE', '/admin/workspace-tools/a_tool', { token: 'globex-token' })).toMatchObject({ status: 404 });
    expect((await call('GET', '/admin/workspace-tools', { token: 'globex-token' })).body).toEqual([]);
    for (const body of ['{not json', '[1,2]', JSON.stringify({ ...echoSpec(), handler_kind: 'ruby' }), JSON.stringify({ ...echoSpec(), parameters: 'x' }), JSON.stringify({ ...echoSpec(), handler_payload: { command: 'echo {a.b}' } })]) {
      expect(await call('PUT', '/admin/workspace-tools/b_tool', { body }), body).toMatchObject({ status: 400, body: { error: 'BadRequest' } });
    }
    expect(await call('PUT', '/admin/workspace-tools/bad%20name', { body: JSON.stringify(echoSpec()) })).toMatchObject({ status: 400 });
    for (const method of ['GET', 'DELETE']) {
      for (const bad of ['bad%20name', '%zz', 'a%2Fb']) {
        expect(await call(method, `/admin/workspace-tools/${bad}`), `${method} ${bad}`).toMatchObject({ status: 400, body: { error: 'BadRequest' } });
      }
    }
    expect(await call('PUT', '/admin/workspace-tools/big', { body: 'x'.repeat(1024 * 1024 + 10) })).toMatchObject({ status: 413, body: { error: 'PayloadTooLarge' } });
    expect(await call('GET', '/admin/workspace-tools/b_tool')).toMatchObject({ status: 404 });
    expect(await call('DELETE', '/admin/workspace-tools/a_tool')).toMatchObject({ status: 204, body: undefined });
    expect(await call('DELETE', '/admin/workspace-tools/a_tool')).toMatchObject({ status: 404 });
  });

  it('a body past 1 MiB is a 413 at once, and the rest is never read', async () => {
    // Declared: answered before a byte of the body is sent.
    const declared = await new Promise((resolve, reject) => {
      const req = httpRequest(`${base}/admin/workspace-tools/big`, { method: 'PUT', headers: { authorization: 'Bearer acme-token', 'content-length': String(64 * 1024 * 1024) } });
      req.on('response', (res) => { let t = ''; res.on('data', (d) => { t += d; }); res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(t), connection: res.headers.connection })); });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(declared).toMatchObject({ status: 413, body: { error: 'PayloadTooLarge' }, connection: 'close' });
    // Streamed without a length: the answer comes while the client is still sending, and the
    // connection is closed under it.
    const streamed = await new Promise((resolve) => {
      const req = httpRequest(`${base}/admin/workspace-tools/big`, { method: 'PUT', headers: { authorization: 'Bearer acme-token', 'transfer-encoding': 'chunked' } });
      let sent = 0;
      let status;
      const chunk = Buffer.alloc(64 * 1024, 'x');
      req.on('response', (res) => { status = res.statusCode; res.resume(); });
      const done = () => resolve({ status, sent });
      req.on('error', done);
      req.on('close', done);
      const pump = () => {
        while (sent < 256 * 1024 * 1024 && status === undefined) {
          sent += chunk.length;
          if (!req.write(chunk)) return req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(streamed.status).toBe(413);
    expect(streamed.sent).toBeLessThan(64 * 1024 * 1024);
  });

  it('503 without a registry, and 500 with a message that names nothing of the store', async () => {
    const secret = new Error('SQLITE_IOERR: disk I/O error at /var/lib/acme/tools.db');
    const broken = new WorkspaceToolRegistry({ store: { async get() { throw secret; }, async put() { throw secret; }, async delete() { return false; }, async list() { throw secret; } } });
    const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
    for (const [reg, status] of [[undefined, 503], [broken, 500]]) {
      const handler = createWorkspaceToolsHandler({ registry: reg, authenticate: () => 'acme' });
      const s = createServer((req, res) => handler(req, res));
      await new Promise((r) => s.listen(0, '127.0.0.1', r));
      const r = await fetch(`http://127.0.0.1:${s.address().port}/admin/workspace-tools`, { headers: { authorization: 'Bearer t' } });
      expect(r.status).toBe(status);
      const body = await r.json();
      expect(body.message).toBeTruthy();
      expect(body.message).not.toMatch(/SQLITE|\/var\/lib/);
      if (status === 500) expect(body.error).toBe('InternalError');
      await new Promise((r) => s.close(r));
    }
    expect(logged).toHaveBeenCalled();
    logged.mockRestore();
  });
});
