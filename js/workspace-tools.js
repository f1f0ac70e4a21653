'use strict';
// Workspace-defined tools: template tools, the registry and its stores, and the admin HTTP
// handler. It only adapts: the rules (spec checks, quoting, merge order, routing and status codes)
// are the core's; this file moves values and HTTP bytes between them and JavaScript.

module.exports = function workspaceTools({ native, nativeShell, nativeRedactor, callback, weakCallback, keep, optionData, checkOptions, withSignal, ctxData, defineTool, ConfigurationError }) {
  const sessionOf = (ctx) => native.sessionOf(ctxData(ctx ?? {}));
  /** A Tool from a WorkspaceToolSpec, run through `shell` with the shell tool's result. */
  function createTemplateTool(spec, options) {
    return templateTool(spec, options, nativeRedactor(options?.redact));
  }

  /** createTemplateTool with the native handle of the Redactor its `redact` names, if any. */
  function templateTool(spec, options, red) {
    const shell = options?.shell;
    if (shell == null) throw new ConfigurationError('createTemplateTool: options.shell (a ShellProvider) is required.');
    const handle = nativeShell(shell);
    const tool = keep(new native.NativeTemplateTool(optionData(spec ?? null), handle, optionData({ ...options, needsApproval: typeof options?.needsApproval === 'function' ? true : options?.needsApproval }), red), handle, red);
    const { needsApproval, ...data } = tool.spec();
    return defineTool({
      ...data,
      needsApproval: typeof options?.needsApproval === 'function' ? options.needsApproval : needsApproval,
      execute: (args, ctx) => withSignal(ctx?.signal, (token) => tool.call(args === undefined ? null : args, ctxData(ctx), token)),
    });
  }

  const storeOf = new WeakMap();
  const storeDispatch = (store, c) => {
    switch (c.op) {
      case 'get': return Promise.resolve(store.get(c.workspaceId, c.name)).then((v) => v ?? null);
      case 'put': return store.put(c.workspaceId, c.spec);
      case 'delete': return store.delete(c.workspaceId, c.name);
      default: return store.list(c.workspaceId);
    }
  };

  /** Specs in memory. */
  class MemoryToolStore {
    constructor() { storeOf.set(this, native.NativeToolStore.memory()); }
  }

  /** Specs in an embedded SQLite database file: survives restarts, safe for several processes. */
  class SqliteToolStore {
    constructor(path) {
      if (typeof path !== 'string' || !path) throw new ConfigurationError('SqliteToolStore: path must be a file path.');
      storeOf.set(this, native.NativeToolStore.sqlite(path));
      Object.defineProperty(this, 'path', { value: path, enumerable: true });
    }
  }

  /**
   * Specs in a PostgreSQL table that several API servers share:
   * `new PostgresToolStore({ connectionString, schema?, poolSize? })`.
   */
  class PostgresToolStore {
    constructor(options) {
      const store = native.NativeToolStore.postgres(optionData(options ?? null));
      storeOf.set(this, store);
      Object.defineProperty(this, 'schema', { value: store.schema, enumerable: true });
    }
    /** Ends its connections; a registry over it then fails its calls. */
    async close() { storeOf.get(this).close(); }
  }

  function nativeToolStore(store) {
    if (store == null) return undefined;
    if (storeOf.has(store)) return storeOf.get(store);
    for (const m of ['get', 'put', 'delete', 'list']) {
      if (typeof store[m] !== 'function') throw new ConfigurationError(`WorkspaceToolRegistry: store must implement get, put, delete and list (missing ${m}).`);
    }
    const handle = keep(native.NativeToolStore.fromJs(weakCallback(store, storeDispatch)), store);
    storeOf.set(store, handle);
    return handle;
  }

  const registryOf = new WeakMap();

  class WorkspaceToolRegistry {
    constructor(options) {
      native.checkToolRegistryOptions(optionData(options ?? null));
      const { store, onDispatch } = options ?? {};
      const storeHandle = nativeToolStore(store);
      registryOf.set(this, { native: keep(new native.NativeToolRegistry(storeHandle), storeHandle), onDispatch });
    }
    upsert(workspaceId, spec) { return registryOf.get(this).native.upsert(workspaceId, optionData(spec ?? null), undefined); }
    get(workspaceId, name) { return registryOf.get(this).native.get(workspaceId, name).then((v) => v ?? undefined); }
    list(workspaceId) { return registryOf.get(this).native.list(workspaceId); }
    delete(workspaceId, name) { return registryOf.get(this).native.delete(workspaceId, name); }

    /**
     * The tools of one workspace: the built-ins in their order, a same-named workspace tool in its
     * place, then the workspace's other tools by name; every call audited through onDispatch.
     */
    async toolsFor(workspaceId, options) {
      checkOptions('toolsFor', options);
      const { shell, builtins = [], ...templateOptions } = options ?? {};
      // One redactor for the workspace tools and the audit events (the core resolves the option).
      const red = native.redactorFor(optionData({ redact: options?.redact }), nativeRedactor(options?.redact));
      const specs = await this.list(workspaceId);
      const byName = new Map(specs.map((s) => [s.name, s]));
      const order = native.mergeTools(builtins.map((t) => t.name), specs.map((s) => s.name));
      const { onDispatch } = registryOf.get(this);
      return order.map((m) => {
        const kind = m.builtin !== undefined ? 'builtin' : 'workspace';
        const tool = kind === 'builtin' ? builtins[m.builtin] : templateTool(byName.get(m.workspace), { shell, ...templateOptions, redact: red !== null }, red ?? undefined);
        return onDispatch ? audited(tool, kind, workspaceId, onDispatch, red) : tool;
      });
    }
  }

  /** The tool with every call reported to onDispatch (awaited: an audit failure rejects the call). */
  function audited(tool, kind, workspaceId, onDispatch, red) {
    return {
      ...tool,
      execute: async (args, ctx) => {
        const started = performance.now();
        // The event carries the arguments as the redactor shows them.
        const seen = red ? red.redactJson(args ?? null, sessionOf(ctx)) : args;
        let ok = true;
        let error;
        let result;
        try {
          result = await tool.execute(args, ctx);
        } catch (e) {
          ok = false;
          const message = String(e?.message ?? e);
          error = { code: typeof e?.code === 'string' ? e.code : String(e?.name ?? 'Error'), message: red ? red.redact(message, sessionOf(ctx)) : message };
          await onDispatch({ workspaceId, sessionId: sessionOf(ctx), toolName: tool.name, kind, args: seen, ok, error, durationMs: performance.now() - started });
          throw e;
        }
        await onDispatch({ workspaceId, sessionId: sessionOf(ctx), toolName: tool.name, kind, args: seen, ok, durationMs: performance.now() - started });
        return result;
      },
    };
  }

  /**
   * Reads a request body; `null` as soon as it is known to pass `max` bytes (a `Content-Length`
   * over it, or byte max + 1 arriving), after which nothing more is read.
   */
  function readBody(req, max) {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > max) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const chunks = [];
      let size = 0;
      const onData = (c) => {
        size += c.length;
        if (size > max) {
          req.off('data', onData);
          req.pause();
          resolve(null);
          return;
        }
        chunks.push(c);
      };
      req.on('data', onData);
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
  }

  function send(res, status, body, headers = {}, sent = undefined) {
    const text = body === undefined ? '' : JSON.stringify(body);
    res.writeHead(status, { ...(body === undefined ? {} : { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }), ...headers });
    res.end(text, sent);
  }

  /**
   * Writes what the core answered; after a body too large to read, closes the connection: its
   * sending side at once (the answer reaches a client that is still sending, where a reset
   * would discard it), the rest after a moment, nothing more read meanwhile.
   */
  function answer(req, res, a) {
    const headers = { ...(a.allow ? { allow: a.allow } : {}), ...(a.close ? { connection: 'close' } : {}) };
    const close = () => {
      const socket = req.socket;
      if (!socket) return;
      socket.end();
      setTimeout(() => socket.destroy(), LINGER_MS).unref();
    };
    send(res, a.status, a.body ?? undefined, headers, a.close ? close : undefined);
  }

  // How long a connection closed after a refused body lingers half-closed.
  const LINGER_MS = 2000;

  /**
   * `(req, res) => Promise<void>` for node:http: the admin API over a registry. The core decides
   * every answer (adminStart, then the registry's admin); this reads the request and writes.
   */
  function createWorkspaceToolsHandler(options) {
    checkOptions('createWorkspaceToolsHandler', options);
    const { registry, authenticate } = options;
    if (registry != null && !registryOf.has(registry)) throw new ConfigurationError('createWorkspaceToolsHandler: registry must be a WorkspaceToolRegistry.');
    return async (req, res) => {
      try {
        const url = req.url ?? '';
        const start = native.adminStart(registry != null, req.method, url, req.headers.authorization ?? undefined);
        if (start.answer) return answer(req, res, start.answer);
        const workspaceId = await authenticate(start.token, req);
        const known = typeof workspaceId === 'string' && workspaceId ? workspaceId : undefined;
        const body = known && start.readBody > 0 ? await readBody(req, start.readBody) : undefined;
        // Over the limit: answered at once, while the client may still be sending.
        if (body === null) return answer(req, res, native.adminTooLarge());
        return answer(req, res, await registryOf.get(registry).native.admin(known, req.method, url, body, false));
      } catch (e) {
        // The store's own words (a database path, a driver's message) stay on the server.
        console.error('corral: the workspace tools handler failed:', e);
        if (!res.headersSent) send(res, 500, { error: 'InternalError', message: 'The request failed inside the server; its log has the cause.' });
        else res.destroy(e);
      }
    };
  }

  return { createTemplateTool, MemoryToolStore, SqliteToolStore, PostgresToolStore, WorkspaceToolRegistry, createWorkspaceToolsHandler };
};
