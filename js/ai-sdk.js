'use strict';
// corral/ai-sdk: corral's tools as the record the AI SDK's generateText/streamText take (ai 6 and 7,
// an optional peer dependency). The schema goes through the SDK's jsonSchema, approval through its
// needsApproval, the call's abortSignal and toolCallId reach the tool as ctx, a WorkspaceError
// becomes a result the model reads, and images go through toModelOutput. And a workspace as the
// SDK's own sandbox (toAiSdkSandbox): its paths confined, its commands under allow/deny.

const { executeTool } = require('./executor.js');
const { WorkspaceError, ConfigurationError } = require('./index.js');
const { checkOptions, fileOps } = require('./index.js')[Symbol.for('corral.internal')];
const { workspacePath, sandboxRoot, Commands, sandboxSurface, toBytes } = require('./sandbox-session.js');

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
  const where = async ({ command, workingDirectory, env }) => {
    if (commands === undefined) {
      throw new WorkspaceError('This sandbox has no shell: pass toAiSdkSandbox(fs, { shell }) to run commands.', 'CommandRefused');
    }
    const cwd = workingDirectory === undefined ? undefined : await ops.workingDir(at(workingDirectory), String(workingDirectory));
    return [command, { cwd, env }];
  };

  return sandboxSurface({
    description: options.description ?? `A workspace, ${root}: relative paths and paths under ${root} name its files; no other path is reachable. Commands start in ${root} and run under the workspace's rules, so some may be refused.`,
    read,
    write: (path, bytes) => ops.write(at(path), bytes),
    stat: (path) => ops.stat(at(path)),
    list: (path) => ops.list(at(path)),
    remove: (path) => ops.delete(at(path)),
    commands,
    where,
  });
}

const { createCorralHarnessSandbox } = require('./harness.js');

module.exports = { toAiSdkTools, toAiSdkSandbox, createCorralHarnessSandbox };
