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
// What a process keeps of each stream between two reads: the SDKs read all of it, so a bound
// reached means output came faster than it could be read (reported, never spliced).
const KEEP_BYTES = 16 * 1024 * 1024;
// How long one read waits for output before it asks again (also how soon an exit is seen).
const READ_WAIT_MS = 1000;

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

/** A process's exit as the number the SDKs want: the code, or 128 + the signal like a shell. */
function exitCodeOf(r) {
  if (typeof r.exitCode === 'number') return r.exitCode;
  const n = r.signal ? os.constants.signals[r.signal] : undefined;
  return typeof n === 'number' ? 128 + n : 1;
}

/** Runs commands of one session as background processes. */
class Commands {
  constructor(shell, options) {
    this.runner = internal.processRunner(shell, options);
  }

  /** Starts `command` (rules first: a refused command rejects with CommandRefused and never runs). */
  async start(command, { cwd, env, input } = {}) {
    if (typeof command !== 'string') throw new WorkspaceError('command must be a string.', 'InvalidArguments');
    const request = { input: Boolean(input), keepBytes: KEEP_BYTES };
    if (cwd !== undefined) request.cwd = cwd;
    if (env !== undefined) request.env = env;
    return new Command(this, await this.runner.spawnProcess(command, request, SESSION));
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

module.exports = { workspacePath, sandboxRoot, exitCodeOf, Commands, READ_WAIT_MS, lostOutput };
