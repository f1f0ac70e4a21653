'use strict';
// corral's JavaScript facade. It only adapts: plain tool objects, error classes, RegExp and
// AbortSignal adaptation, and JS providers wrapped into one dispatch callback the core can call.
// Every behaviour lives in the Rust core (crates/corral-core).

const native = require('./binding.js');

const SEP = '\u0001';

class WorkspaceError extends Error {
  constructor(message, code = 'Io', options) {
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

function errorRecord(e) {
  const code = e && typeof e.code === 'string' ? e.code : 'Io';
  const message = e && typeof e.message === 'string' ? e.message : String(e);
  return { err: { code, message } };
}

const toBase64 = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');

const FS_METHODS = ['readFile', 'writeFile', 'stat', 'readdir', 'mkdir', 'rm'];

function nativeFs(fs) {
  if (fs && nativeOf.has(fs)) return nativeOf.get(fs);
  if (!fs || typeof fs !== 'object' && typeof fs !== 'function') {
    throw new ConfigurationError('Expected an FsProvider: an object with readFile, writeFile, stat, readdir, mkdir and rm.');
  }
  const missing = FS_METHODS.filter((m) => typeof fs[m] !== 'function');
  if (missing.length) throw new ConfigurationError(`Expected an FsProvider; this object has no ${missing.join(', ')}.`);
  const ops = {
    readFile: (c) => fs.readFile(c.path),
    writeFile: (c) => fs.writeFile(c.path, c.content),
    stat: (c) => fs.stat(c.path),
    readdir: (c) => fs.readdir(c.path),
    mkdir: (c) => fs.mkdir(c.path),
    rm: (c) => fs.rm(c.path, { recursive: c.recursive }),
    readFileBytes: async (c) => toBase64(await fs.readFileBytes(c.path)),
    getMode: (c) => fs.getMode(c.path),
    chmod: (c) => fs.chmod(c.path, c.mode),
    realPath: (c) => fs.realPath(c.path),
  };
  const dispatch = async (call) => {
    try {
      const value = await ops[call.op](call);
      return { ok: value === undefined ? null : value };
    } catch (e) {
      return errorRecord(e);
    }
  };
  const handle = native.NativeFs.fromJs(dispatch, {
    readBytes: typeof fs.readFileBytes === 'function',
    mode: typeof fs.getMode === 'function' && typeof fs.chmod === 'function',
    realPath: typeof fs.realPath === 'function',
  });
  nativeOf.set(fs, handle);
  return handle;
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

const ctxData = (ctx) => ({ sessionId: ctx?.sessionId ?? 'default', turn: ctx?.turn ?? 0 });

/** A tool as a plain object: name, description, parameters (and inputSchema), needsApproval, execute. */
function defineTool(spec) {
  if (!spec || typeof spec.name !== 'string' || typeof spec.execute !== 'function') {
    throw new ConfigurationError('defineTool: a tool needs a string name and an execute function.');
  }
  const parameters = spec.parameters ?? spec.inputSchema ?? { type: 'object', properties: {} };
  const tool = { name: spec.name, description: spec.description ?? '', parameters, inputSchema: parameters };
  if (spec.needsApproval !== undefined) tool.needsApproval = spec.needsApproval;
  tool.execute = spec.execute;
  return tool;
}

function plainOptions(options, name) {
  if (options === undefined || options === null) return {};
  if (typeof options !== 'object') throw new ConfigurationError(`${name}: options must be an object.`);
  return options;
}

function createFsTools(fs, options) {
  const opts = plainOptions(options, 'createFsTools');
  const { needsApproval, checkpoints, ...data } = opts;
  if (needsApproval !== undefined && (needsApproval === null || typeof needsApproval !== 'object')) {
    throw new ConfigurationError('createFsTools: needsApproval must be an object keyed by tool name.');
  }
  const handle = nativeFs(fs);
  const ckpt = checkpoints === undefined ? undefined : nativeCheckpoints(checkpoints);
  const tools = lift(() => new native.NativeFsTools(handle, data, ckpt));
  return tools.specs().map((spec) =>
    defineTool({
      ...spec,
      needsApproval: needsApproval?.[spec.name],
      execute: (args, ctx) => withSignal(ctx?.signal, (token) => tools.call(spec.name, args === undefined ? null : args, ctxData(ctx), token)),
    }),
  );
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
    const o = plainOptions(options, 'NodeWorkspace');
    if (typeof o.root !== 'string') throw new ConfigurationError('NodeWorkspace: root must be a path to an existing directory.');
    const handle = lift(() => native.NativeFs.local(o.root));
    nativeOf.set(this, handle);
    Object.defineProperty(this, 'root', { value: handle.root, enumerable: true });
  }
  realPath(path) { return lift(() => nativeOf.get(this).realPath(path)); }
}
fsMethods(NodeWorkspace);

class MemoryWorkspace {
  constructor(options) {
    const o = plainOptions(options, 'MemoryWorkspace');
    const files = o.files ?? {};
    if (typeof files !== 'object') throw new ConfigurationError('MemoryWorkspace: files must be an object of path to content.');
    for (const [k, v] of Object.entries(files)) {
      if (typeof v !== 'string') throw new ConfigurationError(`MemoryWorkspace: files['${k}'] must be a string.`);
    }
    nativeOf.set(this, lift(() => native.NativeFs.memory(files)));
  }
  snapshot() { return { ...nativeOf.get(this).snapshot() }; }
}
fsMethods(MemoryWorkspace);

function normalizeWorkspacePath(path, flavor) {
  if (typeof path !== 'string') throw new WorkspaceError(`normalizeWorkspacePath: path must be a string, got ${typeof path}.`, 'InvalidArguments');
  return lift(() => native.normalizeWorkspacePath(path, flavor));
}

module.exports = {
  WorkspaceError,
  ConfigurationError,
  NodeWorkspace,
  MemoryWorkspace,
  createFsTools,
  defineTool,
  normalizeWorkspacePath,
  // internal plumbing shared by the other entry points
  __internal: { native, lift, liftError, withSignal, nativeFs, checkpointsOf, ctxData, plainOptions },
};
