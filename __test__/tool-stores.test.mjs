// The registry's stores through the public API: one contract, three stores (memory, SQLite,
// PostgreSQL on a server the test starts), and several processes sharing one database: exact
// counts after concurrent writes, and a change one process makes seen by another on its next call.
// Without PostgreSQL installed its tests are skipped, never passed.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { WorkspaceToolRegistry, MemoryToolStore, SqliteToolStore, PostgresToolStore } from 'corral';
import { startPostgres } from './helpers.mjs';

const INDEX = fileURLToPath(new URL('../js/index.js', import.meta.url));
const pg = startPostgres();
const dir = mkdtempSync(join(tmpdir(), 'corral-stores-'));
const closers = [];
afterAll(async () => {
  for (const c of closers) await c();
  pg?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const spec = (name, command = 'true') => ({ name, handler_kind: 'shell_template', handler_payload: { command } });
const stores = {
  memory: { make: () => new MemoryToolStore(), source: null },
  sqlite: {
    make: () => new SqliteToolStore(join(dir, `s${n++}.db`)),
    shared: (i) => new SqliteToolStore(join(dir, `shared${i}.db`)),
    source: (i) => `new c.SqliteToolStore(${JSON.stringify(join(dir, `shared${i}.db`))})`,
  },
  postgres: {
    make: (schema = `s${n++}`) => {
      const s = new PostgresToolStore({ connectionString: pg.url, schema, poolSize: 4 });
      closers.push(() => s.close());
      return s;
    },
    shared: (i) => stores.postgres.make(`shared${i}`),
    source: (i) => `new c.PostgresToolStore({ connectionString: ${JSON.stringify(pg?.url)}, schema: 'shared${i}' })`,
    skip: !pg,
  },
};

for (const [label, { make, skip }] of Object.entries(stores)) {
  describe.skipIf(skip)(`the store contract over ${label}`, () => {
    it('upserts, gets, lists in code-unit order, keeps workspaces apart and deletes', async () => {
      const r = new WorkspaceToolRegistry({ store: make() });
      expect(await r.list('acme')).toEqual([]);
      for (const name of ['b', 'a', 'Z', '_x', 'a-1']) await r.upsert('acme', spec(name));
      await r.upsert('acme', spec('a', 'echo 2'));
      await r.upsert('other', spec('a', 'echo 3'));
      expect((await r.list('acme')).map((s) => s.name)).toEqual(['Z', '_x', 'a', 'a-1', 'b']);
      expect((await r.get('acme', 'a')).handler_payload.command).toBe('echo 2');
      expect((await r.get('other', 'a')).handler_payload.command).toBe('echo 3');
      expect(await r.get('acme', 'missing')).toBeFalsy();
      expect(await r.delete('acme', 'a')).toBe(true);
      expect(await r.delete('acme', 'a')).toBe(false);
      expect((await r.list('acme')).map((s) => s.name)).toEqual(['Z', '_x', 'a-1', 'b']);
    });

    it("gives a spec back with its keys in the order they were written (a tool's parameters keep their order)", async () => {
      const r = new WorkspaceToolRegistry({ store: make() });
      await r.upsert('acme', { ...spec('p', 'echo {alpha} {b}'), parameters: { type: 'object', properties: { alpha: { type: 'string' }, b: { type: 'string' } } } });
      expect(Object.keys((await r.get('acme', 'p')).parameters.properties)).toEqual(['alpha', 'b']);
      expect(Object.keys((await r.list('acme'))[0].parameters.properties)).toEqual(['alpha', 'b']);
    });
  });
}

/** Runs `body` (with `c` the package and `r` a registry over the store) in a child process. */
function child(storeSource, body) {
  return new Promise((resolve, reject) => {
    const script = `const c = require(${JSON.stringify(INDEX)});
      const r = new c.WorkspaceToolRegistry({ store: ${storeSource} });
      (async () => { ${body} })().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });`;
    const p = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(err))));
  });
}

for (const [label, { source, shared, skip }] of Object.entries(stores).filter(([, s]) => s.source)) {
  describe.skipIf(skip)(`several processes over one ${label} database`, { timeout: 120_000 }, () => {
    it('two processes with 100 concurrent upserts and 25 deletes each end with exact counts', async () => {
      const writes = (who) => `await Promise.all(Array.from({ length: 100 }, async (_, i) => {
          await r.upsert('acme', { name: '${who}_' + i, handler_kind: 'shell_template', handler_payload: { command: 'true' } });
          if (i % 4 === 0 && !(await r.delete('acme', '${who}_' + i))) throw new Error('not deleted');
        }));`;
      await Promise.all([child(source(1), writes('a')), child(source(1), writes('b'))]);
      const r = new WorkspaceToolRegistry({ store: shared(1) });
      const names = (await r.list('acme')).map((s) => s.name);
      expect(names).toHaveLength(150);
      expect(names.filter((x) => x.startsWith('a_'))).toHaveLength(75);
    });

    it('a change one process makes is seen by a registry in another on its next call', async () => {
      const here = new WorkspaceToolRegistry({ store: shared(2) });
      expect(await here.get('acme', 'made_there')).toBeFalsy();
      await child(source(2), "await r.upsert('acme', { name: 'made_there', handler_kind: 'shell_template', handler_payload: { command: 'echo 1' } });");
      expect((await here.get('acme', 'made_there')).handler_payload.command).toBe('echo 1');
      await child(source(2), "await r.upsert('acme', { name: 'made_there', handler_kind: 'shell_template', handler_payload: { command: 'echo 2' } });");
      expect((await here.get('acme', 'made_there')).handler_payload.command).toBe('echo 2');
      await child(source(2), "await r.delete('acme', 'made_there');");
      expect(await here.get('acme', 'made_there')).toBeFalsy();
    });
  });
}

describe.skipIf(!pg)('PostgresToolStore at the edges', () => {
  it('a malformed connection string is a ConfigurationError now, without the password', () => {
    for (const connectionString of ['nonsense', 'postgres://u:Sup3rSecret@h/d?sslmode=bogus', '']) {
      let error;
      try { new PostgresToolStore({ connectionString }); } catch (e) { error = e; }
      expect(error?.name).toBe('ConfigurationError');
      expect(error.message).not.toContain('Sup3rSecret');
    }
    expect(() => new PostgresToolStore({ connectionString: pg.url, schema: 'bad;name' })).toThrow(/schema must be/);
  });

  it('a wrong password rejects the first call with a clear error that does not name it', async () => {
    const wrong = pg.url.replace(/corral:[^@]*@/, 'corral:WrongPassw0rd@');
    const r = new WorkspaceToolRegistry({ store: new PostgresToolStore({ connectionString: wrong }) });
    const e = await r.list('acme').catch((x) => x);
    expect(e.message).toMatch(/password authentication failed/);
    expect(e.message).not.toContain('WrongPassw0rd');
  });

  // (Only a server this process started can be stopped and started again.)
  it.skipIf(!pg?.stop)('a server that stops is an error within seconds, and the call after its restart succeeds', async () => {
    const store = stores.postgres.make('restart');
    const r = new WorkspaceToolRegistry({ store });
    await r.upsert('acme', spec('kept'));
    pg.stop();
    try {
      const started = Date.now();
      await expect(r.list('acme')).rejects.toMatchObject({ code: 'Io' });
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      pg.resume();
    }
    let names;
    for (let i = 0; i < 3 && !names; i++) names = await r.list('acme').then((s) => s.map((x) => x.name), () => undefined);
    expect(names).toEqual(['kept']);
  });

  it('close() ends its connections: a later call rejects', async () => {
    const store = stores.postgres.make('closing');
    const r = new WorkspaceToolRegistry({ store });
    await r.list('acme');
    await store.close();
    await expect(r.list('acme')).rejects.toMatchObject({ name: 'WorkspaceError' });
  });
});
