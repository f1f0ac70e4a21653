'use strict';
// What the SDKs' sandbox sessions (corral/ai-sdk's toAiSdkSandbox, corral/openai-agents'
// corralSandboxClient) share: the sandbox's paths as workspace paths, and commands as background
// processes of one shell under the shell tool's rules — the same processes the process tools
// run, so a command's output, input, lifetime and kill work the same in all three.

const os = require('node:os');
const { WorkspaceError, ConfigurationError } = require('./index.js');
const internal = require('./index.js')[Symbol.for('corral.internal')];

// Every command of one runner belongs to this session (a runner serves one SDK session).
const SESSION = 'sandbox';
// How a spawned command's output is streamed, as the core bounds it: what a process keeps of each
// stream between two reads, how long one read waits, and what a stream queues for its reader.
const { keepBytes: KEEP_BYTES, readWaitMs: READ_WAIT_MS, queueBytes: STREAM_QUEUE_BYTES } = internal.sessionStreams();

/**
 * `path` as the workspace path the provider is given: see docs/integrations.md, "The SDKs' own sandboxes".
 * `hostRoot` (a NodeWorkspace's directory, where commands see the workspace) names it too.
 */
function workspacePath(root, path, hostRoot) {
  if (typeof path !== 'string') throw new WorkspaceError(`path must be a string, got ${typeof path}.`, 'InvalidArguments');
  return internal.sandboxPath(root, path, typeof hostRoot === 'string' ? hostRoot : undefined);
}

/** A session's `root` option, checked by the core (its default when none is given). */
function sandboxRoot(root) {
  if (root !== undefined && root !== null && typeof root !== 'string') throw new ConfigurationError(`root must be a string, got ${typeof root}.`);
  return internal.sandboxRoot(root ?? null);
}

// One decoder for every command's output (a decode without `stream` keeps no state between calls).
const UTF8 = new TextDecoder();

/** A process's exit as the number the SDKs want: the code, or 128 + the signal like a shell. */
function exitCodeOf(r) {
  if (typeof r.exitCode === 'number') return r.exitCode;
  const n = r.signal ? os.constants.signals[r.signal] : undefined;
  return typeof n === 'number' ? 128 + n : 1;
}

/** A command and its `{ cwd?, env?, input? }` as the core's process runner takes them. */
function processRequest(command, { cwd, env, input }) {
  if (typeof command !== 'string') throw new WorkspaceError('command must be a string.', 'InvalidArguments');
  const request = { input: Boolean(input), keepBytes: KEEP_BYTES };
  if (cwd !== undefined) request.cwd = cwd;
  if (env !== undefined) request.env = env;
  return [command, request];
}

/** Runs commands of one session as background processes. */
class Commands {
  constructor(shell, options) {
    this.runner = internal.processRunner(shell, options);
  }

  /** Starts `command` (rules first: a refused command rejects with CommandRefused and never runs). */
  async start(command, { cwd, env, input } = {}) {
    return new Command(this, await this.runner.spawnProcess(...processRequest(command, { cwd, env, input }), SESSION));
  }

  /** Runs `command` to its end (rules first, as `start`): `{ exitCode, stdout, stderr }`. The core
   * keeps each stream whole up to its bound, past which it stops the command and rejects; an
   * abort of `abortSignal` stops it and rejects with the signal's reason. */
  async run(command, { cwd, env } = {}, abortSignal) {
    const r = await internal.withSignal(abortSignal, (token) => this.runner.runProcess(...processRequest(command, { cwd, env }), SESSION, token));
    if (abortSignal?.aborted) throw abortSignal.reason;
    return { exitCode: exitCodeOf(r), stdout: UTF8.decode(r.stdout), stderr: UTF8.decode(r.stderr) };
  }

  /** Stops every process (each with its whole process group or sandbox). */
  async close() {
    await this.runner.close();
  }
}

/** A wait in ms as the addon takes it (an unsigned 32-bit integer); the core caps it. */
const u32 = (n) => Math.min(Math.max(0, Math.floor(Number(n)) || 0), 0xffff_ffff);

/** One command: read its output as it comes, write its input, kill it. */
class Command {
  constructor(commands, id) {
    this.runner = commands.runner;
    this.id = id;
    this.exit = undefined;
  }

  /** The output not read before (`stdout`, `stderr` Buffers), waiting up to `waitMs` for some. */
  async read(waitMs = 0, signal) {
    const r = await internal.withSignal(signal, (token) => this.runner.readProcess(this.id, u32(waitMs), SESSION, token));
    return this.note(r);
  }

  /** Kills it (its whole process group or sandbox) and waits for its end; idempotent. What it
   * wrote last stays for the next read. */
  async kill() {
    await this.runner.killProcess(this.id, SESSION);
  }

  note(r) {
    if (!r.running && this.exit === undefined) {
      this.exit = { exitCode: exitCodeOf(r), timedOut: r.timedOut, aborted: r.aborted, note: r.note ?? undefined };
    }
    return r;
  }

  /** Writes to its input (resolves when queued); `close` ends the input after the bytes. */
  write(bytes, close = false) {
    return this.runner.writeProcess(this.id, internal.asBuffer(bytes), close, SESSION);
  }
}

/** The error for output that came faster than it was read: `cut` bytes were lost. */
const lostOutput = (cut) => new WorkspaceError(`${cut} bytes of the command's output were lost: it wrote more than ${KEEP_BYTES / 1048576} MiB between two reads.`, 'TooLarge');

/**
 * The SDK's `SandboxSession` members over a session's file operations (`read` resolves to bytes
 * or null; paths as the SDK gave them) and its `Commands`, with `where(request)`, which resolves
 * to the command and where it runs (`[command, { cwd, env }]`) for the SDK's request.
 */
function sandboxSurface({ description, read, write, stat, list, remove, commands, where }) {
  return {
    description,
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
      return write(path, await collect(content));
    },
    async writeBinaryFile({ path, content }) {
      if (!(content instanceof Uint8Array)) throw new WorkspaceError('writeBinaryFile: content must be a Uint8Array.', 'InvalidArguments');
      return write(path, content);
    },
    async writeTextFile({ path, content, encoding }) {
      if (typeof content !== 'string') throw new WorkspaceError('writeTextFile: content must be a string.', 'InvalidArguments');
      return write(path, encode(content, encoding));
    },
    async stat({ path }) {
      const s = await stat(path);
      if (s === null) return null;
      return { type: s.type === 'file' || s.type === 'directory' ? s.type : 'other', size: s.size };
    },
    async listDirectory({ path }) {
      const entries = await list(path);
      return entries === null ? null : entries.map((e) => ({ name: e.name, type: ['file', 'directory', 'symlink'].includes(e.type) ? e.type : 'other' }));
    },
    async deleteFile({ path }) {
      return remove(path);
    },
    async run({ abortSignal, ...request }) {
      abortSignal?.throwIfAborted();
      const [command, at] = await where(request);
      return commands.run(command, at, abortSignal);
    },
    async spawn({ abortSignal, ...request }) {
      abortSignal?.throwIfAborted();
      const [command, at] = await where(request);
      const input = request.stdin === true;
      return spawnProcess(await commands.start(command, { ...at, input }), abortSignal, input);
    },
  };
}

/** Reads `cmd`'s output until it ends, handing each chunk to `take(i, bytes)` (0: stdout, 1:
 * stderr). An abort of `abortSignal` kills it; output lost between reads (an error, never a gap
 * hidden), or a `take` that throws, kills it and rejects once it has ended. Resolves with the exit
 * code and the abort's reason, if it was aborted. */
async function pump(cmd, abortSignal, take) {
  let abortReason;
  const onAbort = () => {
    abortReason = abortSignal.reason;
    cmd.kill().catch(() => {});
  };
  abortSignal?.addEventListener('abort', onAbort, { once: true });
  // Aborted while it started: stopped now.
  if (abortSignal?.aborted) onAbort();
  try {
    for (;;) {
      const r = await cmd.read(READ_WAIT_MS);
      if (r.cut > 0) throw lostOutput(r.cut);
      if (r.stdout.length) take(0, r.stdout);
      if (r.stderr.length) take(1, r.stderr);
      if (!r.running) break;
    }
  } catch (e) {
    await cmd.kill().catch(() => {});
    while (await cmd.read(READ_WAIT_MS).then((r) => r.running, () => false));
    throw e;
  } finally {
    abortSignal?.removeEventListener('abort', onAbort);
  }
  return { exitCode: cmd.exit.exitCode, abortReason };
}

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
  const pumped = pump(cmd, abortSignal, (i, bytes) => push(streams[i], bytes)).then(
    ({ exitCode, abortReason }) => {
      finish();
      if (abortReason !== undefined) throw abortReason;
      return { exitCode };
    },
    (e) => {
      for (const s of streams.filter((x) => !x.cancelled)) s.controller.error(e);
      throw e;
    },
  );
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

/** A stream's bytes, whole. */
async function collect(stream) {
  if (!stream || typeof stream.getReader !== 'function') throw new WorkspaceError('writeFile: content must be a ReadableStream of bytes.', 'InvalidArguments');
  const parts = [];
  for await (const chunk of stream) parts.push(toBytes(chunk));
  return toBytes(Buffer.concat(parts));
}

module.exports = { workspacePath, sandboxRoot, exitCodeOf, Commands, READ_WAIT_MS, lostOutput, sandboxSurface, toBytes };
