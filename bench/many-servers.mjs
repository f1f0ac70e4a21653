// node bench/many-servers.mjs: createWorkspaceToolsHandler on 4 processes over one store, SQLite
// (one file) against PostgreSQL (a server this bench starts with scripts/pg-test.sh): PUT, GET,
// DELETE and toolsFor (6 built-ins + 20 workspace tools) + one dispatch, in requests per second and p99 latency, from 16 keep-alive
// clients spread over the 4 servers. Medians of 3 runs. Not a test.
import http from 'node:http';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { startPostgres } from '../__test__/helpers.mjs';

const INDEX = fileURLToPath(new URL('../js/index.js', import.meta.url));
const PROCESSES = 4;
const CLIENTS = 16;
const REQUESTS = Number(process.env.REQUESTS ?? 1600);
const dir = mkdtempSync(join(tmpdir(), 'corral-bench-many-'));
const pg = startPostgres();
const children = new Set();
// However the bench ends, its servers and its PostgreSQL go with it.
process.on('exit', () => {
  children.forEach((c) => c.kill());
  pg?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p99 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)];
const spec = (name) => ({ name, parameters: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] }, handler_kind: 'shell_template', handler_payload: { command: 'echo {x}' } });

/** One API server: the admin handler, and /bench/tools (toolsFor over 6 built-ins + one dispatch). */
function server(storeSource) {
  const script = `const c = require(${JSON.stringify(INDEX)});
    const http = require('node:http');
    const registry = new c.WorkspaceToolRegistry({ store: ${storeSource} });
    const ws = new c.MemoryWorkspace({ exec: () => ({ stdout: 'ok\\n' }) });
    const builtins = c.createFsTools(ws);
    const admin = c.createWorkspaceToolsHandler({ registry, authenticate: () => 'acme' });
    const s = http.createServer(async (req, res) => {
      if (req.url !== '/bench/tools') return admin(req, res);
      try {
        const tools = await registry.toolsFor('acme', { shell: ws, builtins });
        await tools.find((t) => t.name === 'fixed').execute({ x: 'hi' });
        res.end('ok');
      } catch (e) { res.statusCode = 500; res.end(String(e)); }
    });
    s.keepAliveTimeout = 60_000;
    s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(child);
  return new Promise((resolve) => createInterface({ input: child.stdout }).once('line', (port) => resolve({ child, port: Number(port) })));
}

async function measure(ports, make) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  const request = (port, method, path, body) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers: { authorization: 'Bearer t', 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode < 300 || res.statusCode === 404 ? resolve() : reject(new Error(`${method} ${path}: ${res.statusCode}`))));
    });
    req.on('error', (e) => reject(new Error(`${method} ${path} on ${port}: ${e.message}`)));
    req.end(body);
  });
  const latencies = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async (_, c) => {
    while (next < REQUESTS) {
      const i = next++;
      const [method, path, body] = make(i);
      const s = performance.now();
      await request(ports[(c + i) % ports.length], method, path, body);
      latencies.push(performance.now() - s);
    }
  }));
  agent.destroy();
  return { rate: REQUESTS / ((performance.now() - t0) / 1000), p99: p99(latencies) };
}

const stores = [['SQLite', `new c.SqliteToolStore(${JSON.stringify(join(dir, 'tools.db'))})`]];
if (pg) stores.push(['PostgreSQL', `new c.PostgresToolStore({ connectionString: ${JSON.stringify(pg.url)} })`]);
else console.log('(PostgreSQL is not installed: only SQLite is measured)');

console.log(`${PROCESSES} API servers over one store, ${CLIENTS} keep-alive clients, ${REQUESTS} requests a run, median of 3:`);
for (const [label, source] of stores) {
  const servers = await Promise.all(Array.from({ length: PROCESSES }, () => server(source)));
  const ports = servers.map((s) => s.port);
  // toolsFor first, over 20 workspace tools (one of them dispatched); then 400 more come and go.
  const ops = [
    ['toolsFor + dispatch', () => ['GET', '/bench/tools']],
    ['PUT', (i) => ['PUT', `/admin/workspace-tools/t_${i % 400}`, JSON.stringify(spec('x'))]],
    ['GET', (i) => ['GET', `/admin/workspace-tools/t_${i % 400}`]],
    ['DELETE', (i) => ['DELETE', `/admin/workspace-tools/t_${i % 400}`]],
  ];
  await measure(ports, (i) => ['PUT', `/admin/workspace-tools/${i % 20 ? `w_${i % 20}` : 'fixed'}`, JSON.stringify(spec('x'))]);
  for (const [op, make] of ops) {
    const runs = [];
    for (let r = 0; r < 3; r++) {
      if (op === 'DELETE') await measure(ports, (i) => ['PUT', `/admin/workspace-tools/t_${i % 400}`, JSON.stringify(spec('x'))]);
      runs.push(await measure(ports, make));
    }
    console.log(`  ${label.padEnd(10)} ${op.padEnd(20)} ${median(runs.map((x) => x.rate)).toFixed(0).padStart(6)} requests/s   p99 ${median(runs.map((x) => x.p99)).toFixed(1)} ms`);
  }
  for (const s of servers) s.child.kill();
}
