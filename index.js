'use strict';
// corral's JavaScript facade. It only adapts: plain tool objects, error classes, RegExp and
// AbortSignal adaptation, and JS providers wrapped into one dispatch callback the core can call.
// Every behaviour lives in the Rust core (crates/corral-core).

const native = require('./binding.js');

const SEP = '\u0001';

class WorkspaceError extends Error {
  /** `new WorkspaceError(message, code?, options?)`; `(message, { cause })` works too. */
  constructor(message, code = 'Io', options) {
    if (code !== null && typeof code === 'object') {
      options = code;
      code = options.code ?? 'Io';
    }
    super(message, options);
    this.name = 'WorkspaceError';
    this.code = code;
  }
}

class ConfigurationError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'ConfigurationError';
    this.code = 'ConfigurationError';
  }
}

// napi's own argument-conversion failures (a number where a string belongs, …).
const NAPI_ARG_CODES = new Set(['InvalidArg', 'ObjectExpected', 'StringExpected', 'NumberExpected', 'BooleanExpected', 'ArrayExpected', 'FunctionExpected']);

/** Turns an error from the native side into the documented error class with its `code`. */
function liftError(e) {
  if (!e || typeof e.message !== 'string') return e;
  const i = e.message.indexOf(SEP);
  if (i > 0) {
    const code = e.message.slice(0, i);
    const message = e.message.slice(i + 1);
    if (code === 'ConfigurationError') return new ConfigurationError(message);
    if (code === 'LOUSHO_SANDBOX_EGRESS_UNSUPPORTED') {
      const err = new Error(message);
      err.name = 'SandboxEgressError';
      err.code = code;
      return err;
    }
    return new WorkspaceError(message, code);
  }
  if (NAPI_ARG_CODES.has(e.code)) return new WorkspaceError(`Invalid argument: ${e.message}`, 'InvalidArguments');
  return e;
}

function lift(fn) {
  let r;
  try {
    r = fn();
  } catch (e) {
    throw liftError(e);
  }
  return r && typeof r.then === 'function' ? r.catch((e) => { throw liftError(e); }) : r;
}

/** The native handle of a provider; JS objects are wrapped once. */
const nativeOf = new WeakMap();

// Errors thrown by user JavaScript (a provider, a stub, a callback) that are not WorkspaceErrors
// are bugs or failures for the program, not tool errors for the model: the callback rejects with
// them, the core carries the rejection (napi keeps the JS value) and it is rethrown as it was.
const isOurs = (e) => e instanceof WorkspaceError || e instanceof ConfigurationError || e?.name === 'WorkspaceError' || e?.code === 'LOUSHO_SANDBOX_EGRESS_UNSUPPORTED';

function errorRecord(e) {
  const code = typeof e.code === 'string' ? e.code : e.name === 'ConfigurationError' ? 'ConfigurationError' : 'Io';
  return { err: { code, message: String(e.message) } };
}

const toBase64 = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');

const FS_METHODS = ['readFile', 'writeFile', 'stat', 'readdir', 'mkdir', 'rm'];

// The dispatchers are defined out here, not inside the functions that create the callbacks:
// a closure created there would share its scope, and with it the object it must not keep.
const fsDispatch = (fs, call) => FS_OPS[call.op](fs, call);
const stubDispatch = (stub, c) => stub(c.command, c.options);
const functionsDispatch = (fns, { index, args }) => fns[index](...args);
// A JS shell's run; when the core wants the output as it comes, the provider gets onOutput.
const shellDispatch = (runs) => (target, c) => {
  if (c.op === 'abort') return runs.abort(c.id);
  const onOutput = c.stream ? (stream, text) => native.shellOutput(c.id, stream, String(text)) : undefined;
  return runs.run(c.id, (signal) => target.exec(c.command, onOutput ? { ...c.options, signal, onOutput } : { ...c.options, signal }));
};

/** The calls the core makes on a JS FsProvider. */
const FS_OPS = {
  readFile: (fs, c) => fs.readFile(c.path),
  writeFile: (fs, c) => fs.writeFile(c.path, c.content),
  stat: (fs, c) => fs.stat(c.path),
  readdir: (fs, c) => fs.readdir(c.path),
  mkdir: (fs, c) => fs.mkdir(c.path),
  rm: (fs, c) => fs.rm(c.path, { recursive: c.recursive }),
  readFileBytes: async (fs, c) => toBase64(await fs.readFileBytes(c.path)),
  getMode: (fs, c) => fs.getMode(c.path),
  chmod: (fs, c) => fs.chmod(c.path, c.mode),
  realPath: (fs, c) => fs.realPath(c.path),
};

function nativeFs(fs) {
  if (fs && nativeOf.has(fs)) return nativeOf.get(fs);
  if (!fs || typeof fs !== 'object' && typeof fs !== 'function') {
    throw new ConfigurationError('Expected an FsProvider: an object with readFile, writeFile, stat, readdir, mkdir and rm.');
  }
  const missing = FS_METHODS.filter((m) => typeof fs[m] !== 'function');
  if (missing.length) throw new ConfigurationError(`Expected an FsProvider; this object has no ${missing.join(', ')}.`);
  const handle = native.NativeFs.fromJs(weakCallback(fs, fsDispatch), {
    readBytes: typeof fs.readFileBytes === 'function',
    mode: typeof fs.getMode === 'function' && typeof fs.chmod === 'function',
    realPath: typeof fs.realPath === 'function',
  });
  nativeOf.set(fs, keep(handle, fs));
  return handle;
}

/** A JS function as the core's one callback shape: always async, never throws, `{ ok }` or `{ err }`. */
function callback(fn) {
  return async (arg) => {
    try {
      const value = await fn(arg);
      return { ok: value === undefined ? null : value };
    } catch (e) {
      if (isOurs(e)) return errorRecord(e);
      throw e;
    }
  };
}

// The core holds each callback strongly (a GC root), so a callback may reach what it serves (a
// provider, a stub, a store, the option functions) only weakly; the native object that uses it
// keeps it alive from JavaScript instead (keep). Otherwise a provider would keep its own native
// wrapper, and so itself, alive forever.
const kKeep = Symbol('corral.keep');

/** Makes `holder` keep `targets` alive; returns `holder`. */
function keep(holder, ...targets) {
  for (const t of targets) if (t != null) (holder[kKeep] ??= new Set()).add(t);
  return holder;
}

/** callback(fn) with `fn(target, arg)` given `target` through a WeakRef. */
function weakCallback(target, fn) {
  const ref = new WeakRef(target);
  return callback((arg) => {
    const t = ref.deref();
    if (t === undefined) throw new Error('corral: an object was garbage-collected while the core still used it.');
    return fn(t, arg);
  });
}

const shellOf = new WeakMap();

/** The native handle of a ShellProvider; JS objects are wrapped once. */
function nativeShell(shell) {
  if (shell && shellOf.has(shell)) return shellOf.get(shell);
  if (!shell || typeof shell.exec !== 'function') throw new ConfigurationError('Expected a ShellProvider: an object with an exec(command, options) method.');
  const runs = abortableRuns();
  const dispatch = weakCallback(shell, shellDispatch(runs));
  const handle = native.NativeShell.fromJs(dispatch, typeof shell.shell === 'string' ? shell.shell : undefined);
  shellOf.set(shell, keep(handle, shell));
  return handle;
}

/** The runs of a JS shell or adapter, each with an AbortController the core fires by id. */
function abortableRuns() {
  const running = new Map();
  return {
    abort(id) {
      running.get(id)?.abort();
      return null;
    },
    async run(id, fn) {
      const controller = new AbortController();
      running.set(id, controller);
      try {
        return await fn(controller.signal);
      } finally {
        running.delete(id);
      }
    },
  };
}

function execMethod(cls) {
  cls.prototype.exec = function exec(command, options) {
    const { signal, ...rest } = options ?? {};
    return withSignal(signal, (token) => shellOf.get(this).exec(command, rest, token));
  };
}

/** Runs `fn(token)` with a native cancel token that follows `signal`. */
async function withSignal(signal, fn) {
  if (!signal) return lift(() => fn(undefined));
  const token = new native.CancelToken();
  const onAbort = () => token.cancel();
  if (signal.aborted) token.cancel();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await lift(() => fn(token));
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

const ctxData = (ctx) => optionData({ sessionId: ctx?.sessionId, turn: ctx?.turn, toolCallId: ctx?.toolCallId });

/** A listener called without waiting for it: what it throws goes to process.emitWarning. */
function notifier(fn) {
  const warn = (e) => process.emitWarning(e instanceof Error ? e : new Error(String(e)), 'CorralListenerWarning');
  return (event) => {
    try {
      const r = fn(event);
      if (r && typeof r.then === 'function') r.then(undefined, warn);
    } catch (e) {
      warn(e);
    }
  };
}

// What workspacePrompt reads of corral's own tools: not enumerable, so copies and JSON leave it out.
const kInfo = Symbol('corral.info');
const describedBy = (tool, native) => Object.defineProperty(tool, kInfo, { value: () => native.info() });

/**
 * A system-prompt section about the workspace the tools work in: its name (never the host path),
 * the tools and their limits, the shell and the commands it allows, what is protected.
 */
function workspacePrompt(tools, options) {
  if (!Array.isArray(tools)) throw new ConfigurationError('workspacePrompt: tools must be an array of tools.');
  const list = tools.map((t) => ({ name: String(t?.name ?? ''), description: String(t?.description ?? ''), info: t?.[kInfo]?.() ?? null }));
  return lift(() => native.workspacePrompt(list, optionData(options ?? null)));
}

/** A tool as a plain object: name, description, parameters (and inputSchema), needsApproval, execute. */
function defineTool(spec) {
  const d = lift(() => native.defineToolData(optionData(spec ?? null)));
  const parameters = d.parametersFrom ? spec[d.parametersFrom] : d.parameters;
  const tool = { name: d.name, description: d.description, parameters, inputSchema: parameters };
  if (spec.needsApproval !== undefined) tool.needsApproval = spec.needsApproval;
  tool.execute = spec.execute;
  return tool;
}


/**
 * An options object as data the core can read: what JSON cannot hold is tagged (a function as
 * { $js: 'function' }, any other object that is not plain data as { $js: 'object' }); undefined
 * is dropped. The core decides what each option may be.
 */
function optionData(value, fns) {
  if (typeof value === 'function') {
    if (!fns) return { $js: 'function' };
    fns.push(value);
    return { $js: 'function', index: fns.length - 1 };
  }
  if (value instanceof RegExp) return { $js: 'regexp', source: value.source, flags: value.flags };
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value); // JSON has no Infinity or NaN
  if (value === null || typeof value !== 'object') return typeof value === 'bigint' ? Number(value) : value;
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : optionData(v, fns)));
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return { $js: 'object' };
  const out = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = optionData(v, fns);
  return out;
}

/** The functions optionData collected, called by the core as fns[index](...args). */
const functionsCallback = (fns) => (fns.length ? weakCallback(fns, functionsDispatch) : undefined);

function createFsTools(fs, options) {
  const handle = nativeFs(fs);
  const ckpt = options?.checkpoints == null ? undefined : nativeCheckpoints(options.checkpoints);
  const fns = [];
  // onEdit is told, not awaited: what it throws or rejects with becomes a process warning.
  const data = optionData(typeof options?.onEdit === 'function' ? { ...options, onEdit: notifier(options.onEdit) } : options ?? null, fns);
  const tools = keep(lift(() => new native.NativeFsTools(handle, data, ckpt, functionsCallback(fns))), handle, ckpt, fns);
  const needsApproval = options?.needsApproval;
  return tools.specs().map(({ imageOutput, ...spec }) => {
    const tool = defineTool({
      ...spec,
      needsApproval: needsApproval?.[spec.name],
      execute: (args, ctx) => withSignal(ctx?.signal, (token) => tools.call(spec.name, args === undefined ? null : args, ctxData(ctx), token)),
    });
    if (imageOutput) tool.toModelOutput = ({ output }) => native.readFileModelOutput(output);
    return describedBy(tool, tools);
  });
}

function createShellTool(shell, options) {
  const fns = [];
  const handle = nativeShell(shell);
  // Whole outputs (spillDir) are written through the shell when it is a file provider too.
  const spillFs = options?.spillFs != null ? nativeFs(options.spillFs) : nativeOf.get(shell);
  const given = typeof options?.onProgress === 'function' ? { ...options, onProgress: notifier(options.onProgress) } : options ?? null;
  const tool = keep(lift(() => new native.NativeShellTool(handle, optionData(given, fns), functionsCallback(fns), spillFs)), handle, fns, spillFs);
  return describedBy(defineTool({
    ...tool.spec(),
    // A command allow/deny refuse is never offered to a human: execute() throws CommandRefused.
    needsApproval: (args) => lift(() => tool.needsApproval(args ?? null)),
    execute: (args, ctx) => withSignal(ctx?.signal, (token) => tool.call(args === undefined ? null : args, ctxData(ctx), token)),
  }), tool);
}

/**
 * A local HTTP proxy that adds auth headers for the hosts you name, so a command only ever sees
 * the proxy's address. Resolves to { url, env, baseUrl(host), listen({ host, clients, allow }), close() }.
 */
async function createCredentialBroker(options) {
  const fns = [];
  const b = keep(await lift(() => native.NativeBroker.start(optionData(options ?? null, fns), functionsCallback(fns))), fns);
  const broker = {
    url: b.url,
    env: b.env,
    baseUrl: (host) => b.baseUrl(host),
    listen: ({ host, clients, allow = [] } = {}) => lift(() => b.listen(host, clients, allow)),
    close: () => lift(() => b.close()),
  };
  brokerOf.set(broker, b);
  return broker;
}
const brokerOf = new WeakMap();

const adapterOf = new WeakMap();

/** The native handle of a SandboxAdapter; JS objects ({ run(request, { signal }), close?() }) are wrapped once. */
function nativeAdapter(adapter) {
  if (adapter && adapterOf.has(adapter)) return adapterOf.get(adapter);
  if (!adapter || typeof adapter.run !== 'function') throw new ConfigurationError('Expected a SandboxAdapter: an object with run(request, { signal }).');
  const runs = abortableRuns();
  const ops = {
    abort: (a, c) => runs.abort(c.id),
    close: (a) => (typeof a.close === 'function' ? a.close() : null),
    run: (a, c) => runs.run(c.id, (signal) => a.run(c.request, { signal })),
  };
  const handle = native.NativeSandbox.fromJs(weakCallback(adapter, (a, c) => ops[c.op](a, c)));
  adapterOf.set(adapter, keep(handle, adapter));
  return handle;
}

function adapterMethods(cls) {
  Object.assign(cls.prototype, {
    run(request, options) { return withSignal(options?.signal, (token) => adapterOf.get(this).run(request, token)); },
    close() { return lift(() => adapterOf.get(this).close()); },
  });
}

/** Runs commands on the host, with NodeWorkspace's small base environment. */
class NoopSandbox {
  constructor() { adapterOf.set(this, native.NativeSandbox.noop()); }
}
adapterMethods(NoopSandbox);

/** Runs each command as `sh -c` in a Docker container (Docker Engine API): a new one per command, or one kept per SandboxShell cwd. */
class SubprocessSandbox {
  constructor(options) {
    const broker = options?.broker;
    if (broker != null && !brokerOf.has(broker)) throw new ConfigurationError('SubprocessSandbox: broker must come from createCredentialBroker().');
    const nb = broker == null ? undefined : brokerOf.get(broker);
    const handle = keep(lift(() => native.NativeSandbox.subprocess(optionData(options ?? null), nb)), nb);
    adapterOf.set(this, handle);
    Object.defineProperty(this, 'network', { value: Object.freeze(handle.network), enumerable: true });
  }
  /** The internal network name used for allowlisted egress. */
  get networkName() { return adapterOf.get(this).networkName; }
  /** Removes the containers a crashed process of this machine left behind; resolves with how many. */
  prune() { return lift(() => adapterOf.get(this).prune()); }
}
adapterMethods(SubprocessSandbox);

/** A SandboxAdapter built on the kernel's own isolation: namespaces, seccomp, rlimits and cgroups. */
class LinuxSandbox {
  constructor(options) {
    const broker = options?.broker;
    if (broker != null && !brokerOf.has(broker)) throw new ConfigurationError('LinuxSandbox: broker must come from createCredentialBroker().');
    const nb = broker == null ? undefined : brokerOf.get(broker);
    adapterOf.set(this, keep(lift(() => native.NativeSandbox.linux(optionData(options ?? null), nb)), nb));
  }
  /** What the machine offers: { userNamespaces, mountNamespaces, pidNamespaces, netNamespaces, seccomp, landlock, cgroups }. */
  static probe() { return native.NativeSandbox.linuxProbe(); }
}
adapterMethods(LinuxSandbox);

/** A ShellProvider over any SandboxAdapter. */
class SandboxShell {
  constructor(adapter, options) {
    const adapterHandle = nativeAdapter(adapter);
    shellOf.set(this, keep(lift(() => native.NativeShell.sandbox(adapterHandle, optionData(options ?? null))), adapterHandle));
  }
  get shell() { return shellOf.get(this).shell; }
}
execMethod(SandboxShell);

class FileWorkspaceCheckpointStore {
  constructor(dir) {
    if (typeof dir !== 'string' || !dir) throw new ConfigurationError('FileWorkspaceCheckpointStore: dir must be a directory path.');
    storeOf.set(this, lift(() => native.NativeStore.file(dir)));
    Object.defineProperty(this, 'dir', { value: dir, enumerable: true });
  }
  load(sessionId) { return lift(() => storeOf.get(this).load(sessionId)).then((v) => v ?? undefined); }
  save(sessionId, data) { return lift(() => storeOf.get(this).save(sessionId, data)); }
  delete(sessionId) { return lift(() => storeOf.get(this).delete(sessionId)); }
}
const storeOf = new WeakMap();

function nativeStore(store) {
  if (store === undefined) return undefined;
  if (storeOf.has(store)) return storeOf.get(store);
  for (const m of ['load', 'save', 'delete']) {
    if (typeof store?.[m] !== 'function') throw new ConfigurationError(`WorkspaceCheckpoints: store must implement load, save and delete (missing ${m}).`);
  }
  const ops = { load: (st, c) => st.load(c.sessionId), save: (st, c) => st.save(c.sessionId, c.data), delete: (st, c) => st.delete(c.sessionId) };
  const handle = native.NativeStore.fromJs(weakCallback(store, (st, c) => ops[c.op](st, c)));
  storeOf.set(store, keep(handle, store));
  return handle;
}

class WorkspaceCheckpoints {
  constructor(fs, options) {
    const [fsHandle, storeHandle] = [nativeFs(fs), nativeStore(options?.store ?? undefined)];
    checkpointsOf.set(this, keep(lift(() => new native.NativeCheckpoints(fsHandle, optionData(options ?? null), storeHandle)), fsHandle, storeHandle));
  }
  list(options) { return lift(() => checkpointsOf.get(this).list(optionData(options ?? null))); }
  rewind(toTurn, options) { return lift(() => checkpointsOf.get(this).rewind(toTurn, optionData(options ?? null))); }
  clear(options) { return lift(() => checkpointsOf.get(this).clear(optionData(options ?? null))); }
}

function nativeCheckpoints(c) {
  const h = c && checkpointsOf.get(c);
  if (!h) throw new ConfigurationError('createFsTools: checkpoints must be a WorkspaceCheckpoints.');
  return h;
}
const checkpointsOf = new WeakMap();

function fsMethods(cls) {
  Object.assign(cls.prototype, {
    readFile(path) { return lift(() => nativeOf.get(this).readFile(path)); },
    readFileBytes(path) { return lift(() => nativeOf.get(this).readFileBytes(path)).then((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)); },
    writeFile(path, content) { return lift(() => nativeOf.get(this).writeFile(path, content)); },
    stat(path) { return lift(() => nativeOf.get(this).stat(path)).then((s) => s ?? undefined); },
    readdir(path) { return lift(() => nativeOf.get(this).readdir(path)); },
    mkdir(path) { return lift(() => nativeOf.get(this).mkdir(path)); },
    rm(path, options) { return lift(() => nativeOf.get(this).rm(path, Boolean(options?.recursive))); },
    getMode(path) { return lift(() => nativeOf.get(this).getMode(path)); },
    chmod(path, mode) { return lift(() => nativeOf.get(this).chmod(path, mode)); },
  });
}

class NodeWorkspace {
  constructor(options) {
    const data = optionData(options ?? null);
    const handle = lift(() => native.NativeFs.local(data));
    nativeOf.set(this, handle);
    shellOf.set(this, lift(() => native.NativeShell.local(data)));
    Object.defineProperty(this, 'root', { value: handle.root, enumerable: true });
  }
  get shell() { return shellOf.get(this).shell; }
  realPath(path) { return lift(() => nativeOf.get(this).realPath(path)); }
}
fsMethods(NodeWorkspace);
execMethod(NodeWorkspace);

class MemoryWorkspace {
  constructor(options) {
    nativeOf.set(this, lift(() => native.NativeFs.memory(optionData(options ?? null))));
    const stub = options?.exec;
    const run = typeof stub === 'function' ? weakCallback(stub, stubDispatch) : undefined;
    shellOf.set(this, keep(native.NativeShell.memory(run), stub));
  }
  /** Every command exec() received: { command, cwd, env, timeoutMs }. */
  get commands() { return shellOf.get(this).commands(); }
  snapshot() { return Object.fromEntries(nativeOf.get(this).snapshot()); }
}
fsMethods(MemoryWorkspace);
execMethod(MemoryWorkspace);

/**
 * A needsApproval predicate for the shell tool: a command line needs no approval only when every
 * simple command in it (joined by `&&`, `||`, `;`, `|`) is on the list and passes corral's
 * read-only table, with no substitution, output redirection, background `&`, subshell, or path
 * outside the working directory.
 */
function readOnlyCommands(commands) {
  if (!Array.isArray(commands) || commands.some((c) => typeof c !== 'string')) {
    throw new ConfigurationError('readOnlyCommands: commands must be an array of strings.');
  }
  const ro = lift(() => new native.NativeReadOnlyCommands(commands));
  return (command) => typeof command !== 'string' || ro.needsApproval(command);
}

function normalizeWorkspacePath(path, flavor) {
  if (typeof path !== 'string') throw new WorkspaceError(`normalizeWorkspacePath: path must be a string, got ${typeof path}.`, 'InvalidArguments');
  return lift(() => native.normalizeWorkspacePath(path, flavor));
}

const { createTemplateTool, MemoryToolStore, SqliteToolStore, WorkspaceToolRegistry, createWorkspaceToolsHandler } = require('./workspace-tools.js')({
  native, lift, nativeShell, callback, weakCallback, keep, optionData, withSignal, ctxData, defineTool, ConfigurationError,
});

module.exports = {
  WorkspaceError,
  ConfigurationError,
  NodeWorkspace,
  MemoryWorkspace,
  createFsTools,
  createShellTool,
  createCredentialBroker,
  SandboxShell,
  NoopSandbox,
  SubprocessSandbox,
  LinuxSandbox,
  WorkspaceCheckpoints,
  FileWorkspaceCheckpointStore,
  defineTool,
  normalizeWorkspacePath,
  readOnlyCommands,
  workspacePrompt,
  createTemplateTool,
  MemoryToolStore,
  SqliteToolStore,
  WorkspaceToolRegistry,
  createWorkspaceToolsHandler,
};
