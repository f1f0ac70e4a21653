'use strict';
// corral/ai-sdk: corral's tools as the record the AI SDK's generateText/streamText take (ai 6 and 7,
// an optional peer dependency). The schema goes through the SDK's jsonSchema, approval through its
// needsApproval, the call's abortSignal and toolCallId reach the tool as ctx, a WorkspaceError
// becomes a result the model reads, and images go through toModelOutput. And a workspace as the
// SDK's own sandbox (toAiSdkSandbox): its paths confined, its commands under allow/deny.

const { executeTool } = require('./executor.js');
const { WorkspaceError, ConfigurationError } = require('./index.js');
const { checkOptions, fileOps } = require('./index.js')[Symbol.for('corral.internal')];
const { workspacePath, sandboxRoot, Commands, READ_WAIT_MS, lostOutput } = require('./sandbox-session.js');

/**
 * `toAiSdkTools(tools, { ai?, sessionId?, turn? })`: `ai` is the SDK module (default: require('ai')).
 */
function toAiSdkTools(tools, options) {
  checkOptions('toAiSdkTools', options);
  options ??= {};
  const ai = options.ai ?? require('ai');
  const { tool, jsonSchema } = ai;
  if (typeof tool !== 'function' || typeof jsonSchema !== 'function') throw new TypeError("toAiSdkTools: options.ai must be the 'ai' package (ai 6 or 7).");
  const out = {};
  for (const t of tools) {
    const ctxOf = (call) => ({ signal: call?.abortSignal, toolCallId: call?.toolCallId, sessionId: options.sessionId, turn: options.turn });
    out[t.name] = tool({
      description: t.description,
      inputSchema: jsonSchema(t.inputSchema ?? t.parameters),
      ...(t.needsApproval === undefined ? {} : {
        needsApproval: typeof t.needsApproval === 'function' ? (input, call) => t.needsApproval(input, ctxOf(call)) : t.needsApproval,
      }),
      // A WorkspaceError is a result the model reads ({ error, toolName, message }); anything else throws.
      execute: (input, call) => executeTool(t, input, ctxOf(call)),
      ...(typeof t.toModelOutput === 'function' ? { toModelOutput: ({ output }) => (output?.error ? { type: 'json', value: output } : t.toModelOutput({ output })) } : {}),
    });
  }
  return out;
}

/**
 * `toAiSdkSandbox(fs, { shell?, allow?, deny?, description?, root?, files?, sessionId?, turn? })`:
 * a workspace as AI SDK 7's `Experimental_SandboxSession`, for `generateText({ experimental_sandbox })`.
 * Its reads and writes take the file tools' path in the core (`files`: their options, `.git`
 * denied by default); `allow`/`deny` are command patterns.
 */
function toAiSdkSandbox(fs, options) {
  checkOptions('toAiSdkSandbox', options);
  options ??= {};
  const ops = fileOps(fs, options.files, options);
  const root = sandboxRoot(options.root); // A bad root is a ConfigurationError now, not on the first call.
  const shell = options.shell ?? (typeof fs.exec === 'function' ? fs : undefined);
  const rules = { ...(options.allow === undefined ? {} : { allow: options.allow }), ...(options.deny === undefined ? {} : { deny: options.deny }) };
  const commands = shell === undefined ? undefined : new Commands(shell, rules);
  const at = (path) => workspacePath(root, path, fs.root);
  const read = async (path) => {
    const bytes = await ops.read(at(path));
    return bytes === null ? null : toBytes(bytes);
  };
  const start = async ({ command, workingDirectory, env, stdin }) => {
    if (commands === undefined) {
      throw new WorkspaceError('This sandbox has no shell: pass toAiSdkSandbox(fs, { shell }) to run commands.', 'CommandRefused');
    }
    const cwd = workingDirectory === undefined ? undefined : await ops.workingDir(at(workingDirectory), String(workingDirectory));
    return commands.start(command, { cwd, env, input: stdin === true });
  };

  return {
    description: options.description ?? `A workspace, ${root}: relative paths and paths under ${root} name its files; no other path is reachable. Commands start in ${root} and run under the workspace's rules, so some may be refused.`,
    async readFile({ path }) {
      const bytes = await read(path);
      return bytes === null ? null : new ReadableStream({ start(c) { if (bytes.length) c.enqueue(bytes); c.close(); } });
    },
    async readBinaryFile({ path }) {
      return read(path);
    },
    async readTextFile({ path, encoding, startLine, endLine }) {
      const first = lineNumber('startLine', startLine, 1);
      const last = lineNumber('endLine', endLine, Infinity);
      const bytes = await read(path);
      if (bytes === null) return null;
      const text = decode(bytes, encoding);
      if (startLine === undefined && endLine === undefined) return text;
      // The lines as they are in the file, each with its line break.
      return (text.match(/[^\n]*\n|[^\n]+$/g) ?? []).slice(first - 1, last).join('');
    },
    async writeFile({ path, content }) {
      return ops.write(at(path), await collect(content));
    },
    async writeBinaryFile({ path, content }) {
      if (!(content instanceof Uint8Array)) throw new WorkspaceError('writeBinaryFile: content must be a Uint8Array.', 'InvalidArguments');
      return ops.write(at(path), content);
    },
    async writeTextFile({ path, content, encoding }) {
      if (typeof content !== 'string') throw new WorkspaceError('writeTextFile: content must be a string.', 'InvalidArguments');
      return ops.write(at(path), encode(content, encoding));
    },
    async stat({ path }) {
      const s = await ops.stat(at(path));
      if (s === null) return null;
      return { type: s.type === 'file' || s.type === 'directory' ? s.type : 'other', size: s.size };
    },
    async listDirectory({ path }) {
      const entries = await ops.list(at(path));
      return entries === null ? null : entries.map((e) => ({ name: e.name, type: ['file', 'directory', 'symlink'].includes(e.type) ? e.type : 'other' }));
    },
    async deleteFile({ path }) {
      return ops.delete(at(path));
    },
    async run({ abortSignal, ...request }) {
      abortSignal?.throwIfAborted();
      const p = spawnProcess(await start({ ...request, stdin: false }), abortSignal, false);
      let out;
      try {
        out = await Promise.all([text(p.stdout, RUN_OUTPUT_BYTES), text(p.stderr, RUN_OUTPUT_BYTES)]);
      } catch (e) {
        await p.kill();
        await p.wait().catch(() => {});
        throw e;
      }
      const { exitCode } = await p.wait();
      return { exitCode, stdout: out[0], stderr: out[1] };
    },
    async spawn({ abortSignal, ...request }) {
      abortSignal?.throwIfAborted();
      return spawnProcess(await start(request), abortSignal, request.stdin === true);
    },
  };
}

// Output a reader has not taken stays queued up to this many bytes a stream; past it the rest is
// dropped and a line says how much (the process never blocks on a reader).
const STREAM_QUEUE_BYTES = 16 * 1024 * 1024;
// What `run` collects of each stream: past it the command is stopped and `run` rejects.
const RUN_OUTPUT_BYTES = 32 * 1024 * 1024;

/** A running command as the SDK's SandboxProcess: streams fed by reads of its output while it runs. */
function spawnProcess(cmd, abortSignal, withInput) {
  const streams = [0, 1].map(() => {
    const s = { dropped: 0, cancelled: false };
    // A reader that cancels a stream takes no more of it; the process runs on.
    s.stream = new ReadableStream({ start(c) { s.controller = c; }, cancel() { s.cancelled = true; } }, new ByteLengthQueuingStrategy({ highWaterMark: 1024 * 1024 }));
    return s;
  });
  const push = (s, bytes) => {
    if (!bytes.length || s.cancelled) return;
    if (s.dropped > 0 || s.controller.desiredSize < -STREAM_QUEUE_BYTES) {
      s.dropped += bytes.length;
      return;
    }
    s.controller.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  };
  const finish = () => {
    for (const s of streams.filter((x) => !x.cancelled)) {
      if (s.dropped) s.controller.enqueue(new TextEncoder().encode(`\n[... ${s.dropped} bytes of output dropped: the stream was not read ...]\n`));
      s.controller.close();
    }
  };
  let abortReason;
  const onAbort = () => {
    abortReason = abortSignal.reason;
    cmd.kill().catch(() => {});
  };
  abortSignal?.addEventListener('abort', onAbort, { once: true });
  // Aborted while it started: stopped now.
  if (abortSignal?.aborted) onAbort();
  const pumped = (async () => {
    try {
      for (;;) {
        const r = await cmd.read(READ_WAIT_MS);
        // Output lost between reads is an error on the streams, never a gap they hide.
        if (r.cut > 0) {
          cmd.kill().catch(() => {});
          throw lostOutput(r.cut);
        }
        push(streams[0], r.stdout);
        push(streams[1], r.stderr);
        if (!r.running) break;
      }
      finish();
    } catch (e) {
      for (const s of streams.filter((x) => !x.cancelled)) s.controller.error(e);
      throw e;
    } finally {
      abortSignal?.removeEventListener('abort', onAbort);
    }
    if (abortReason !== undefined) throw abortReason;
    return { exitCode: cmd.exit.exitCode };
  })();
  pumped.catch(() => {}); // Seen by wait(); a process nobody waits for is no unhandled rejection.
  const handle = {
    stdout: streams[0].stream,
    stderr: streams[1].stream,
    wait: () => pumped,
    kill: async () => { await cmd.kill(); },
  };
  if (withInput) {
    handle.stdin = new WritableStream({
      write: (chunk) => cmd.write(toBytes(chunk)),
      close: () => cmd.write(new Uint8Array(0), true),
      abort: () => cmd.write(new Uint8Array(0), true).catch(() => {}),
    });
  }
  return handle;
}

function lineNumber(name, v, dflt) {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < 1) throw new WorkspaceError(`${name} must be a whole number from 1 (lines count from 1).`, 'InvalidArguments');
  return v;
}

const toBytes = (b) => (b instanceof Uint8Array ? b : ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b));

function decode(bytes, encoding) {
  const enc = encoding ?? 'utf-8';
  try {
    return new TextDecoder(enc, { ignoreBOM: true }).decode(bytes);
  } catch {
    throw new WorkspaceError(`Unknown encoding: ${enc}`, 'InvalidArguments');
  }
}

// The text encodings a string can be written in (Node's names for them), each read back by
// TextDecoder under the same label.
const WRITABLE = { 'utf-8': 'utf8', utf8: 'utf8', 'utf-16le': 'utf16le', utf16le: 'utf16le', latin1: 'latin1', 'iso-8859-1': 'latin1', ascii: 'latin1', 'us-ascii': 'latin1' };

function encode(text, encoding) {
  const label = (encoding ?? 'utf-8').toLowerCase();
  const enc = WRITABLE[label];
  if (!enc) throw new WorkspaceError(`Cannot write text as ${encoding}: use utf-8, utf-16le or latin1.`, 'InvalidArguments');
  const bytes = Buffer.from(text, enc);
  // A character the encoding has no code for is refused, not replaced.
  if (bytes.toString(enc) !== text || (label.includes('ascii') && bytes.some((b) => b > 0x7f))) {
    throw new WorkspaceError(`The text has characters ${encoding} cannot encode.`, 'InvalidArguments');
  }
  return toBytes(bytes);
}

/** A stream's bytes; past `limit` bytes, a TooLarge WorkspaceError. */
async function collect(stream, limit = Infinity) {
  if (!stream || typeof stream.getReader !== 'function') throw new WorkspaceError('writeFile: content must be a ReadableStream of bytes.', 'InvalidArguments');
  const parts = [];
  let size = 0;
  for await (const chunk of stream) {
    const bytes = toBytes(chunk);
    size += bytes.length;
    if (size > limit) throw new WorkspaceError(`The command wrote more than ${limit / 1048576} MiB to one stream: it was stopped (spawn streams output of any size).`, 'TooLarge');
    parts.push(bytes);
  }
  return toBytes(Buffer.concat(parts));
}

async function text(stream, limit) {
  return new TextDecoder().decode(await collect(stream, limit));
}

module.exports = { toAiSdkTools, toAiSdkSandbox };
