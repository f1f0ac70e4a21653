'use strict';
// createCorralHarnessSandbox (corral/ai-sdk): corral as the AI SDK harness's sandbox provider
// (`HarnessV1SandboxProvider` of @ai-sdk/harness, an optional peer dependency), so a harness
// adapter such as Claude Code runs inside a corral session on this machine. A session is the
// core's SessionSandbox (one sandbox that persists: its network namespace, /tmp and home, its
// broker and port forwarders); this file adapts it to the harness's shapes.

const { WorkspaceError, ConfigurationError, NodeWorkspace } = require('./index.js');
const internal = require('./index.js')[Symbol.for('corral.internal')];
const { Commands, sandboxSurface, toBytes } = require('./sandbox-session.js');

const { native, optionData, functionsCallback, keep, shellOfNative, fileOps } = internal;

/** The harness's error for a capability a session lacks, from @ai-sdk/harness where it is installed. */
function unsupported(message) {
  let Cls;
  try {
    Cls = require('@ai-sdk/harness').HarnessCapabilityUnsupportedError;
  } catch {
    Cls = undefined;
  }
  if (typeof Cls === 'function') return new Cls({ message });
  const e = new Error(message);
  e.name = 'HarnessCapabilityUnsupportedError';
  return e;
}

/** Options as the core reads them, with the functions they hold (header values). */
function data(value) {
  const fns = [];
  const d = optionData(value ?? null, fns);
  return { d, f: functionsCallback(fns), fns };
}

/**
 * `createCorralHarnessSandbox(options)`: a `HarnessV1SandboxProvider`. Synchronous, no I/O: the
 * options are checked now, each session is made by `createSession`.
 */
function createCorralHarnessSandbox(options) {
  if (native.NativeSession === undefined) {
    throw new ConfigurationError('createCorralHarnessSandbox: sessions run in LinuxSandbox, which needs Linux.');
  }
  const given = data(options);
  native.NativeSession.checkOptions(given.d, given.f);
  const { allow, deny, files } = options;
  const rules = { ...(allow === undefined ? {} : { allow }), ...(deny === undefined ? {} : { deny }) };
  // One onFirstCreate at a time per identity: a second session of it waits, then copies its state.
  const firsts = new Map();

  async function open(make, abortSignal) {
    abortSignal?.throwIfAborted();
    const { d, f, fns } = data(options);
    const handle = keep(await make(d, f), fns);
    try {
      abortSignal?.throwIfAborted();
      return session(handle, rules, files);
    } catch (e) {
      await handle.destroy().catch(() => {});
      throw e;
    }
  }

  return {
    specificationVersion: 'harness-sandbox-v1',
    providerId: 'corral',
    async createSession({ sessionId, abortSignal, identity, onFirstCreate } = {}) {
      if (identity !== undefined && typeof identity !== 'string') throw new ConfigurationError('createSession: identity must be a string.');
      if (sessionId !== undefined && typeof sessionId !== 'string') throw new ConfigurationError('createSession: sessionId must be a string.');
      const request = { sessionId, identity };
      const run = async () => {
        const s = await open((d, f) => native.NativeSession.create(d, f, request), abortSignal);
        const handle = s[HANDLE];
        if (typeof onFirstCreate === 'function' && !handle.startedFromIdentity) {
          try {
            await onFirstCreate(s.restricted(), { abortSignal });
            if (identity !== undefined) await handle.saveIdentity(identity);
          } catch (e) {
            await s.destroy().catch(() => {});
            throw e;
          }
        }
        return s;
      };
      if (identity === undefined) return run();
      const before = firsts.get(identity) ?? Promise.resolve();
      const mine = before.catch(() => {}).then(run);
      firsts.set(identity, mine);
      try {
        return await mine;
      } finally {
        if (firsts.get(identity) === mine) firsts.delete(identity);
      }
    },
    async resumeSession({ sessionId, abortSignal } = {}) {
      if (typeof sessionId !== 'string') throw new ConfigurationError('resumeSession: sessionId must be a string.');
      return open((d, f) => native.NativeSession.resume(d, f, sessionId), abortSignal);
    },
  };
}

const HANDLE = Symbol('corral.session');

/** A session as the harness's `HarnessV1NetworkSandboxSession`. */
function session(handle, rules, files) {
  const ws = new NodeWorkspace({ root: handle.dir });
  const ops = fileOps(ws, files, { sessionId: handle.id });
  const commands = new Commands(shellOfNative(handle.shell()), rules);
  const at = (path) => {
    if (typeof path !== 'string') throw new WorkspaceError(`path must be a string, got ${typeof path}.`, 'InvalidArguments');
    return handle.filePath(path);
  };
  const surface = sandboxSurface({
    description: `A sandbox on this machine. The workspace is ${handle.defaultWorkingDirectory} (commands start there); /tmp and the home, ${handle.home}, are kept between commands. Files are read and written only under these three directories. Outbound network access follows the session's network policy.`,
    read: async (path) => {
      const bytes = await ops.read(at(path));
      return bytes === null ? null : toBytes(bytes);
    },
    write: (path, bytes) => ops.write(at(path), bytes),
    stat: (path) => ops.stat(at(path)),
    list: (path) => ops.list(at(path)),
    remove: (path) => ops.delete(at(path)),
    commands,
    where: async ({ command, workingDirectory, env }) => {
      if (workingDirectory !== undefined && typeof workingDirectory !== 'string') throw new WorkspaceError('workingDirectory must be a string.', 'InvalidArguments');
      return [command, { cwd: handle.workingDir(workingDirectory ?? null), env }];
    },
  });
  const restricted = Object.freeze({ ...surface });
  let stopped;
  const stop = () => {
    stopped ??= (async () => {
      await commands.close().catch(() => {});
      await handle.stop();
    })();
    return stopped;
  };
  const endpoint = async ({ port, protocol } = {}) => {
    const url = handle.portUrl(Number(port), protocol ?? 'http');
    if (url === null || url === undefined) throw unsupported(`Port ${port} is not exposed`);
    return url;
  };
  return Object.freeze({
    ...surface,
    [HANDLE]: handle,
    id: handle.id,
    defaultWorkingDirectory: handle.defaultWorkingDirectory,
    get ports() { return handle.ports; },
    getPortEndpoint: async (o) => ({ url: await endpoint(o) }),
    getPortUrl: endpoint,
    async setPorts(ports, { abortSignal } = {}) {
      abortSignal?.throwIfAborted();
      await handle.setPorts(ports);
    },
    async setNetworkPolicy(policy) {
      handle.setNetworkPolicy(optionData(policy ?? null));
    },
    async setRequestTransformations(list) {
      const { d, f, fns } = data(list);
      keep(handle, fns);
      handle.setTransformations(d, f);
    },
    async addRequestTransformations(list) {
      const { d, f, fns } = data(list);
      keep(handle, fns);
      handle.addTransformations(d, f);
    },
    stop,
    async destroy() {
      await stop();
      await handle.destroy();
    },
    restricted: () => restricted,
  });
}

module.exports = { createCorralHarnessSandbox };
