// An admin server for workspace-defined tools: node examples/admin-server.mjs
//
//   CORRAL_ADMIN_TOKEN=secret CORRAL_TOOLS_DB=./tools.db node examples/admin-server.mjs
//   curl -X PUT http://127.0.0.1:8787/admin/workspace-tools/grep_repo \
//     -H "Authorization: Bearer secret" -H "Content-Type: application/json" \
//     -d '{"handler_kind":"shell_template","handler_payload":{"command":"grep -rn {pattern} ."},
//          "parameters":{"type":"object","properties":{"pattern":{"type":"string"}},"required":["pattern"]}}'
//
// One token, one workspace here; a real host maps each token to its tenant's workspace id.
import { createServer } from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import { WorkspaceToolRegistry, SqliteToolStore, createWorkspaceToolsHandler } from 'corral';

const token = process.env.CORRAL_ADMIN_TOKEN;
if (!token) {
  console.error('Set CORRAL_ADMIN_TOKEN to the bearer token the admin API accepts.');
  process.exit(1);
}
const same = (a, b) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

const registry = new WorkspaceToolRegistry({
  store: new SqliteToolStore(process.env.CORRAL_TOOLS_DB ?? 'workspace-tools.db'),
  onDispatch: (e) => console.log(JSON.stringify({ audit: e })),
});
const handler = createWorkspaceToolsHandler({
  registry,
  authenticate: (bearer) => (same(bearer, token) ? process.env.CORRAL_WORKSPACE ?? 'default' : null),
});

const port = Number(process.env.PORT ?? 8787);
createServer((req, res) => handler(req, res)).listen(port, '127.0.0.1', () => {
  console.log(`workspace tools admin API on http://127.0.0.1:${port}/admin/workspace-tools`);
});
