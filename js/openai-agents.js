'use strict';
// corral/openai-agents: corral's tools as function tools for @openai/agents (an optional peer
// dependency): the JSON Schema as non-strict parameters, needsApproval mapped to the SDK's
// approval flow, the run's abort signal and the call's id as ctx, and a WorkspaceError returned
// as the tool's output for the model to read. And a workspace as the SDK's own sandbox
// (corralSandboxClient, for a SandboxAgent) and patch editor (createEditor, for applyPatchTool).

const nodeFs = require('node:fs');
const nodePath = require('node:path');
const { executeTool } = require('./executor.js');
const { WorkspaceError, ConfigurationError } = require('./index.js');
const { checkOptions, imageMediaType, fileOps } = require('./index.js')[Symbol.for('corral.internal')];
const { workspacePath, sandboxRoot, Commands } = require('./sandbox-session.js');

/** `toOpenAIAgentsTools(tools, { agents?, sessionId?, turn? })`: `agents` defaults to require('@openai/agents'). */
function toOpenAIAgentsTools(tools, options) {
  checkOptions('toOpenAIAgentsTools', options);
  options ??= {};
  const agents = options.agents ?? require('@openai/agents');
  if (typeof agents.tool !== 'function') throw new TypeError("toOpenAIAgentsTools: options.agents must be the '@openai/agents' package.");
  return tools.map((t) => {
    const ctxOf = (details, callId) => ({ signal: details?.signal, toolCallId: callId ?? details?.toolCall?.callId, sessionId: options.sessionId, turn: options.turn });
    return agents.tool({
      name: t.name,
      description: t.description,
      parameters: { ...(t.inputSchema ?? t.parameters), additionalProperties: true },
      strict: false,
      ...(t.needsApproval === undefined ? {} : {
        needsApproval: typeof t.needsApproval === 'function' ? async (_runContext, input, callId) => Boolean(await t.needsApproval(input, ctxOf(undefined, callId))) : Boolean(t.needsApproval),
      }),
      execute: async (input, _runContext, details) => {
        const out = await executeTool(t, input, ctxOf(details));
        return typeof out === 'string' ? out : JSON.stringify(out);
      },
    });
  });
}

/** The SDK's sandbox module, loaded when a session is made (an optional peer dependency). */
const sdkSandbox = () => require('@openai/agents/sandbox');
/** The SDK's own exec text and output cut (`@openai/agents-core/sandbox/internal`, found from
 * where `@openai/agents` is, as a strict package manager lays it out). */
let internals;
function sdkInternal() {
  internals ??= require(require.resolve('@openai/agents-core/sandbox/internal', { paths: [nodePath.dirname(require.resolve('@openai/agents'))] }));
  return internals;
}

/**
 * `corralSandboxClient({ fs, shell?, allow?, deny?, files?, sessionId?, turn? })`: a
 * `SandboxClient` for `run(sandboxAgent, input, { sandbox: { client } })`. Its sessions' reads
 * and writes (the manifest, the file API, the editor) take the file tools' path in the core.
 */
function corralSandboxClient(options) {
  checkOptions('corralSandboxClient', options);
  const { fs } = options;
  const ops = fileOps(fs, options.files, options);
  const shell = options.shell ?? (typeof fs.exec === 'function' ? fs : undefined);
  const rules = { ...(options.allow === undefined ? {} : { allow: options.allow }), ...(options.deny === undefined ? {} : { deny: options.deny }) };
  return {
    backendId: 'corral',
    async create(args, manifestOptions) {
      // The runner's own Manifest is used as it is: the app may load the SDK as ES modules and
      // this file as CommonJS, and a Manifest cloned across the two copies is not one.
      const isManifest = (m) => typeof m?.iterEntries === 'function' && typeof m?.root === 'string';
      const manifest = isManifest(args) ? args : isManifest(args?.manifest) ? args.manifest
        : sdkSandbox().normalizeSandboxClientCreateArgs(args, manifestOptions).manifest;
      const session = new CorralSandboxSession(fs, ops, shell, rules, manifest);
      await session.materialize();
      return session;
    },
  };
}

// The SDK's defaults: exec_command waits 10 s before it answers with a session id, write_stdin
// 250 ms; an image is at most 10 MiB.
const EXEC_YIELD_MS = 10_000;
const STDIN_YIELD_MS = 250;
const MAX_IMAGE_BYTES = 10 * 1024 * 1024;
const CTRL_C = '\u0003';

/** One session over a workspace: commands as background processes, paths under the manifest's root. */
class CorralSandboxSession {
  constructor(fs, ops, shell, rules, manifest) {
    this.fs = fs;
    this.ops = ops;
    this.root = sandboxRoot(manifest.root); // A manifest root that is not absolute is refused here.
    this.state = { manifest, environment: {} };
    this.commands = shell === undefined ? undefined : new Commands(shell, rules);
    this.sessions = new Map();
    this.nextSessionId = 1;
  }

  at(path) {
    return workspacePath(this.root, path, this.fs.root);
  }

  /** Writes the manifest's entries (files, directories, and copies of host files the app named). */
  async materialize() {
    const env = await this.state.manifest.resolveEnvironment?.();
    if (env && typeof env === 'object') this.state.environment = { ...env };
    // Every entry checked (kind and path) before the first is written.
    const entries = [...this.state.manifest.iterEntries()].map(({ absolutePath, entry }) => {
      if (!['dir', 'file', 'local_file', 'local_dir'].includes(entry.type)) {
        throw new ConfigurationError(`corralSandboxClient: a manifest entry of type '${entry.type}' (${absolutePath}) cannot be made in a workspace; corral makes file, dir, local_file and local_dir entries.`);
      }
      return { rel: this.at(absolutePath), entry };
    });
    for (const { rel, entry } of entries) {
      switch (entry.type) {
        case 'dir': await this.ops.mkdir(rel); break;
        case 'file': await this.ops.write(rel, toBytes(entry.content)); break;
        case 'local_file': await this.ops.write(rel, nodeFs.readFileSync(entry.src)); break;
        default: await copyDir(this.ops, entry.src, rel);
      }
    }
  }

  supportsPty() {
    return this.commands?.runner.takesInput === true;
  }

  /** Runs `cmd`; answers when it ends or after `yieldTimeMs`, with a `sessionId` while it runs. */
  async exec(args) {
    const started = Date.now();
    if (this.commands === undefined) throw new WorkspaceError('This sandbox has no shell: pass corralSandboxClient({ fs, shell }) to run commands.', 'CommandRefused');
    const cwd = args.workdir === undefined || args.workdir === null ? undefined : await this.ops.workingDir(this.at(args.workdir), String(args.workdir));
    const cmd = await this.commands.start(args.cmd, { cwd, env: { ...this.state.environment }, input: this.supportsPty() });
    const out = await collect(cmd, args.yieldTimeMs ?? EXEC_YIELD_MS);
    let sessionId;
    if (cmd.exit === undefined) {
      sessionId = this.nextSessionId++;
      this.sessions.set(sessionId, cmd);
    }
    return result(out, cmd, sessionId, started, args.maxOutputTokens);
  }

  /** `exec` as the text the model reads; a failure is text too (the SDK would hide it). */
  async execCommand(args) {
    const started = Date.now();
    try {
      return formatExec(await this.exec(args));
    } catch (e) {
      return failed('exec_command', e, started);
    }
  }

  /** Writes `chars` to a running command (Ctrl-C stops it) and answers with the output not read before. */
  async writeStdin({ sessionId, chars = '', yieldTimeMs = STDIN_YIELD_MS, maxOutputTokens }) {
    const started = Date.now();
    const cmd = this.sessions.get(sessionId);
    if (cmd === undefined) return formatExec({ output: `write_stdin failed: session not found: ${sessionId}`, exitCode: 1, wallTimeSeconds: 0 });
    try {
      const interrupted = chars.includes(CTRL_C);
      const input = chars.split(CTRL_C).join('');
      if (input) {
        // A command that does not read its input does not hold the call past its wait: the rest
        // is written while it runs.
        const written = cmd.write(Buffer.from(input)).catch((e) => { if (e?.name !== 'WorkspaceError') throw e; });
        await Promise.race([written, new Promise((r) => setTimeout(r, Math.max(0, yieldTimeMs)).unref?.())]);
      }
      if (interrupted) await cmd.kill();
      const out = await collect(cmd, yieldTimeMs);
      if (cmd.exit !== undefined) this.sessions.delete(sessionId);
      const r = result(out, cmd, cmd.exit === undefined ? sessionId : undefined, started, maxOutputTokens);
      // Ctrl-C ends it as an interrupt does in a terminal.
      if (interrupted && cmd.exit !== undefined) r.exitCode = 130;
      return formatExec(r);
    } catch (e) {
      return failed('write_stdin', e, started);
    }
  }

  async readFile({ path, maxBytes }) {
    const found = await this.ops.read(this.at(path));
    if (found === null) throw new WorkspaceError(`File not found: ${path}`, 'NotFound');
    const bytes = toBytes(found);
    return Number.isInteger(maxBytes) && maxBytes >= 0 && maxBytes < bytes.length ? bytes.slice(0, maxBytes) : bytes;
  }

  async listDir({ path }) {
    const entries = await this.ops.list(this.at(path));
    if (entries === null) throw new WorkspaceError(`Directory not found: ${path}`, 'NotFound');
    return entries.map((e) => ({
      name: e.name,
      path: e.path,
      type: e.type === 'file' ? 'file' : e.type === 'directory' ? 'dir' : 'other',
    }));
  }

  async pathExists(path) {
    return (await this.ops.stat(this.at(path))) !== null;
  }

  async directoryExists(path) {
    return (await this.ops.stat(this.at(path)))?.type === 'directory';
  }

  /** An image file for the model: `{ type: 'image', image: { data, mediaType } }`. */
  async viewImage({ path }) {
    const rel = this.at(path);
    const s = await this.ops.stat(rel);
    if (s === null) throw new WorkspaceError(`Image file not found: ${path}`, 'NotFound');
    if (s.type !== 'file') throw new WorkspaceError(`Image path ${path} is not a file`, 'NotAFile');
    if (s.size > MAX_IMAGE_BYTES) throw new WorkspaceError(`Image ${path} exceeded the allowed size of 10MB`, 'TooLarge');
    const data = await this.readFile({ path });
    const mediaType = imageMediaType(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    if (!mediaType) throw new WorkspaceError(`${path} is not a supported image file (PNG, JPEG, GIF or WebP)`, 'InvalidArguments');
    return { type: 'image', image: { data, mediaType } };
  }

  createEditor() {
    return editorOver(this.ops, this.root, this.fs.root);
  }

  async running() {
    return true;
  }

  // The runner ends a session with stop, shutdown and delete, or close: each stops every command
  // still running. None removes a file: the workspace is the app's, not the session's.
  async stop() { await this.close(); }
  async shutdown() { await this.close(); }
  async delete() { await this.close(); }
  async close() {
    this.sessions.clear();
    await this.commands?.close();
  }
}

/** A failure as the text the model reads (the SDK shows a thrown error as a generic line). */
function failed(tool, e, started) {
  if (e?.name !== 'WorkspaceError' && e?.name !== 'ConfigurationError') throw e;
  return formatExec({ output: `${tool} failed: ${e.message}`, exitCode: 1, wallTimeSeconds: (Date.now() - started) / 1000 });
}

// What one answer keeps of a command's output, as the SDK's own sandbox does: its last MiB.
const ANSWER_BYTES = 1024 * 1024;

/** The last `ANSWER_BYTES` of what was added, and how many bytes came before them. */
class Tail {
  constructor() { this.parts = []; this.size = 0; this.dropped = 0; }
  push(bytes) {
    this.parts.push(bytes);
    this.size += bytes.length;
    while (this.size > ANSWER_BYTES) {
      const over = this.size - ANSWER_BYTES;
      const first = this.parts[0];
      if (first.length <= over) {
        this.parts.shift();
        this.size -= first.length;
        this.dropped += first.length;
      } else {
        this.parts[0] = first.subarray(over);
        this.size -= over;
        this.dropped += over;
      }
    }
  }
  text() {
    const kept = Buffer.concat(this.parts).toString('utf8');
    return this.dropped ? `[...${this.dropped} bytes truncated from process output...]\n${kept}` : kept;
  }
}

/** What a command wrote until it ended or `yieldMs` passed: stdout, stderr and both in order read. */
async function collect(cmd, yieldMs) {
  const deadline = Date.now() + Math.max(0, Number(yieldMs) || 0);
  const out = { stdout: new Tail(), stderr: new Tail(), both: new Tail() };
  for (;;) {
    const r = await cmd.read(Math.max(0, deadline - Date.now()));
    if (r.stdout.length) { out.stdout.push(r.stdout); out.both.push(r.stdout); }
    if (r.stderr.length) { out.stderr.push(r.stderr); out.both.push(r.stderr); }
    // The model reads text: output lost between reads is said where it was.
    if (r.cut > 0) out.both.push(Buffer.from(`\n[... ${r.cut} bytes of output lost: more came between two reads than is kept ...]\n`));
    if (!r.running || Date.now() >= deadline) return out;
  }
}

const text = (tail) => tail.text();

/** A `SandboxExecResult`. */
function result(out, cmd, sessionId, started, maxOutputTokens) {
  const { text: output, originalTokenCount } = sdkInternal().truncateOutput(text(out.both), maxOutputTokens);
  const r = { output, stdout: text(out.stdout), stderr: text(out.stderr), wallTimeSeconds: (Date.now() - started) / 1000 };
  if (sessionId !== undefined) r.sessionId = sessionId;
  else r.exitCode = cmd.exit.exitCode;
  if (originalTokenCount !== undefined) r.originalTokenCount = originalTokenCount;
  return r;
}

/** The SDK's own exec text: chunk id, wall time, the process's state, then its output. */
const formatExec = (r) => sdkInternal().formatExecResponse(r);

const toBytes = (b) => (typeof b === 'string' ? Buffer.from(b) : b instanceof Uint8Array ? b : new Uint8Array(b.buffer ?? b, b.byteOffset ?? 0, b.byteLength));

async function copyDir(ops, src, rel) {
  await ops.mkdir(rel);
  for (const e of nodeFs.readdirSync(src, { withFileTypes: true })) {
    const from = nodePath.join(src, e.name);
    const to = rel === '.' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) await copyDir(ops, from, to);
    else if (e.isFile()) await ops.write(to, nodeFs.readFileSync(from));
  }
}

/**
 * `createEditor(fs, { root?, files?, sessionId?, turn? })`: the `Editor` `applyPatchTool({ editor })`
 * takes. Each operation's V4A diff is applied by the core as the SDK's own `applyDiff` does, and
 * written through the file tools' path (all or nothing).
 */
function createEditor(fs, options) {
  checkOptions('createEditor', options);
  return editorOver(fileOps(fs, options?.files, options ?? {}), sandboxRoot(options?.root), fs.root);
}

function editorOver(ops, root, hostRoot) {
  const at = (path) => workspacePath(root, path, hostRoot);
  return {
    async createFile({ path, diff }) {
      await ops.edit('create', at(path), diff);
      return { status: 'completed', output: `Created ${path}` };
    },
    async updateFile({ path, diff, moveTo }) {
      const moved = await ops.edit('update', at(path), diff, moveTo === undefined || moveTo === null ? undefined : at(moveTo));
      return { status: 'completed', output: moved ? `Updated ${path} and moved it to ${moveTo}` : `Updated ${path}` };
    },
    async deleteFile({ path }) {
      await ops.edit('delete', at(path));
      return { status: 'completed', output: `Deleted ${path}` };
    },
  };
}

module.exports = { toOpenAIAgentsTools, corralSandboxClient, createEditor };
