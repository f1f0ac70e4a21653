// node bench/workspace-tools.mjs: workspace-defined tools — the registry's toolsFor plus one
// dispatch of a template tool (over MemoryToolStore and SqliteToolStore), and the admin handler's
// PUT and GET throughput over SQLite on a real http.Server (loopback). Medians of 7. Not a test.
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { MemoryWorkspace, WorkspaceToolRegistry, MemoryToolStore, SqliteToolStore, createFsTools, createWorkspaceToolsHandler } from 'corral';

const dir = mkdtempSync(join(tmpdir(), 'corral-bench-wt-'));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const spec = (name) => ({ name, parameters: { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] }, handler_kind: 'shell_template', handler_payload: { command: 'echo {x}' } });

// A programmed shell: the figure is corral's own work, not a process start.
const ws = new MemoryWorkspace({ exec: () => ({ stdout: 'ok\n' }) });
const builtins = createFsTools(ws);
for (const [label, store] of [['MemoryToolStore', new MemoryToolStore()], ['SqliteToolStore', new SqliteToolStore(join(dir, 'a.db'))]]) {
  const registry = new WorkspaceToolRegistry({ store, onDispatch: () => {} });
  for (let i = 0; i < 20; i++) await registry.upsert('acme', spec(`tool_${String(i).padStart(2, '0')}`));
  const runs = [];
  for (let r = 0; r < 7; r++) {
    const t0 = performance.now();
    for (let i = 0; i < 200; i++) {
      const tools = await registry.toolsFor('acme', { shell: ws, builtins });
      await tools[tools.length - 1].execute({ x: 'hi' });
    }
    runs.push((performance.now() - t0) / 200);
  }
  console.log(`toolsFor (6 built-ins + 20 workspace tools) + one dispatch, ${label}: ${(median(runs) * 1000).toFixed(0)} µs median`);
}

const registry = new WorkspaceToolRegistry({ store: new SqliteToolStore(join(dir, 'h.db')) });
const server = http.createServer(createWorkspaceToolsHandler({ registry, authenticate: () => 'acme' }));
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}/admin/workspace-tools`;
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const request = (method, path, body) => new Promise((resolve, reject) => {
  const req = http.request(`${base}${path}`, { method, agent, headers: { authorization: 'Bearer t', 'content-type': 'application/json' } }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode)); });
  req.on('error', reject);
  req.end(body);
});
for (const [label, make] of [['PUT', (i) => request('PUT', `/t_${i % 500}`, JSON.stringify(spec('x')))], ['GET', (i) => request('GET', `/t_${i % 500}`)]]) {
  const rates = [];
  for (let r = 0; r < 7; r++) {
    const n = 400;
    const t0 = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: 8 }, async () => { while (next < n) await make(next++); }));
    rates.push(n / ((performance.now() - t0) / 1000));
  }
  console.log(`admin handler ${label} over SQLite, 8 concurrent clients: ${median(rates).toFixed(0)} requests/s median`);
}
agent.destroy();
server.close();
rmSync(dir, { recursive: true, force: true });
