'use strict';
// `corral mcp`: corral's tools as an MCP server on stdio, built on the official SDK v2
// (@modelcontextprotocol/server). One server speaks both protocol eras: 2025-11-25 clients
// (initialize, server-initiated elicitation) and 2026-07-28 clients (server/discover, stateless
// requests, input_required results); `serveStdio` pins each connection to its era.
// stdout carries only protocol messages; everything else goes to stderr.

const { basename, resolve } = require('node:path');
const { createHash, randomBytes } = require('node:crypto');
const { Server, inputRequired, inputResponse, createRequestStateCodec, CLIENT_CAPABILITIES_META_KEY } = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');
const corral = require('./index.js');
// The addon itself (loaded once per process), for what the core decides that is not public API.
const addon = require('./load-binding.js').loadBinding();
const { parseFlags } = require('./flags.js');
const { version } = require('../package.json');

const usage = `usage: corral mcp --root DIR [--allow CMD]... [--deny CMD]... [--client-approves] [--read-only]
                  [--tools default|all] [--sandbox none|linux|docker] [--image IMAGE] [--no-redact]
                  [--help] [--version]
An MCP server on stdio with corral's file tools over DIR and a shell tool.
  --allow CMD         a command that runs without asking (a string pattern; repeatable)
  --deny CMD          a command that is refused without asking (repeatable)
                      Any other command is put to the client's user (MCP elicitation) and runs
                      only if they approve; a client that cannot ask gets it refused.
  --client-approves   every command not denied runs: the client asks its user before each call
  --read-only         only the tools that do not write (read_file, list_dir, glob, grep, and with
                      --tools all file_info and read_files): no write_file, edit_file or shell
  --tools all         also the tools agents are trained on: apply_patch, move_file, delete_file,
                      make_dir, file_info, read_files, and background processes (run_in_background,
                      process_output, process_input, process_stop, process_list)
                      (default: the six file tools and the shell)
  --sandbox           where commands run: none (on this machine, the default), linux (LinuxSandbox:
                      namespaces, the host read-only but DIR, no network, no daemon) or docker (a
                      container per command, needs --image and a Docker Engine)
  --image IMAGE       the container image for --sandbox docker
  --no-redact         results as they are: secrets in files and output are not replaced by
                      [secret:<rule>#<n>] markers (default: they are)
  --help, -h          this text
  --version           corral's version`;

const FLAGS = {
  '--root': 'value', '--allow': 'list', '--deny': 'list', '--client-approves': 'switch', '--read-only': 'switch',
  '--tools': 'value', '--sandbox': 'value', '--image': 'value', '--no-redact': 'switch', '--help': 'switch', '-h': 'switch', '--version': 'switch',
};

function parse(argv) {
  const { flags: f, positional } = parseFlags(argv, FLAGS);
  if (positional.length) throw new Error(`unexpected argument '${positional[0]}'`);
  return {
    root: f['--root'],
    allow: f['--allow'] ?? [],
    deny: f['--deny'] ?? [],
    clientApproves: f['--client-approves'] === true,
    readOnly: f['--read-only'] === true,
    redact: f['--no-redact'] !== true,
    // Which tools the flags give is the core's (`mcpPlan`); a bad value is refused there.
    plan: addon.mcpPlan(f['--tools'] ?? null, f['--sandbox'] ?? null, f['--image'] ?? null, f['--read-only'] === true),
    image: f['--image'],
    help: f['--help'] === true || f['-h'] === true,
    version: f['--version'] === true,
  };
}

/** The tools a server with these options offers; `onProgress` hears a running command's output. */
function toolsFor(o, onProgress) {
  const workspace = new corral.NodeWorkspace({ root: o.root });
  const { include, sandbox, background } = o.plan;
  const fsTools = corral.createFsTools(workspace, { readOnly: o.readOnly, readImages: true, include, redact: o.redact });
  if (sandbox === null) return fsTools;
  const shell = {
    none: () => workspace,
    linux: () => new corral.SandboxShell(new corral.LinuxSandbox(), { cwd: workspace.root }),
    docker: () => new corral.SandboxShell(new corral.SubprocessSandbox({ image: o.image }), { cwd: workspace.root }),
  }[sandbox]();
  // Who approves a command is the core's (--allow runs unasked, --deny is refused, any other
  // is asked): the shell tool gets no `allow`, so a command --allow does not match is put to
  // the user, not refused.
  const policy = corral[Symbol.for('corral.internal')].mcpPolicy(shell, o.allow, o.deny, o.clientApproves);
  const shellTools = corral.createShellTool(shell, {
    deny: o.deny,
    needsApproval: (command) => policy.needsApproval(command),
    background,
    redact: o.redact,
    ...(onProgress ? { onProgress } : {}),
  });
  const tools = [...fsTools, ...(background ? shellTools : [shellTools])];
  Object.defineProperty(tools, 'policy', { value: policy, enumerable: false });
  return tools;
}

/**
 * Whether the client of this request can put a question to its user (a form elicitation): on a
 * 2025 connection as it declared at `initialize`, on a 2026 request as the request declares.
 */
function canAsk(server, era, ctx) {
  if (era !== 'modern') return server.getClientCapabilities()?.elicitation?.form !== undefined;
  const e = ctx?.mcpReq?.envelope?.[CLIENT_CAPABILITIES_META_KEY]?.elicitation;
  return e !== undefined && e !== null && (e.form !== undefined || Object.keys(e).length === 0);
}

const notRun = (text) => ({ content: [{ type: 'text', text }], isError: true });

/** A human has this long to answer an approval request (the SDK's default is a minute). */
const APPROVAL_TIMEOUT_MS = 10 * 60_000;

const RUN_SCHEMA = { type: 'object', properties: { run: { type: 'boolean', title: 'Run this command' } }, required: ['run'] };

/**
 * A 2026 approval's state: sealed (HMAC, a key of this process, ten minutes) and naming the call
 * it was asked for, so an answer comes back only for the same tool with the same arguments.
 */
const approvals = createRequestStateCodec({ key: randomBytes(32), ttlSeconds: APPROVAL_TIMEOUT_MS / 1000, bind: (ctx) => ctx.mcpReq.method });
const callDigest = (name, args) => createHash('sha256').update(JSON.stringify([name, args])).digest('hex');
/** The sealed states an answer was taken with, until they expire: each counts once (a replay is asked again). */
const answered = new Map();
function spend(nonce) {
  const now = Date.now();
  for (const [n, expires] of answered) if (expires < now) answered.delete(n);
  answered.set(nonce, now + APPROVAL_TIMEOUT_MS);
}

/**
 * Undefined when this call may run; else the result that says why it did not, or (a 2026
 * request) the `input_required` result that asks. A call its tool says needs approval runs only
 * when the client's user accepts it with `run: true`. The decision and every text are the core's.
 */
async function approval(server, era, tool, args, rootName, ctx) {
  const needed = typeof tool.needsApproval === 'function' ? await tool.needsApproval(args) : tool.needsApproval === true;
  const decision = addon.mcpDecide(Boolean(needed), canAsk(server, era, ctx), tool.name, args);
  if (decision.action === 'run') return undefined;
  if (decision.action === 'refuse') return notRun(decision.text);
  const message = tool.approvalPrompt(args, rootName);
  if (era === 'modern') {
    const digest = callDigest(tool.name, args);
    const answer = inputResponse(ctx.mcpReq.inputResponses, 'approval');
    // An answer counts only with the state this server sealed for this very call, and once.
    const state = ctx.mcpReq.requestState();
    if (answer.kind === 'missing' || state?.digest !== digest || answered.has(state.nonce)) {
      return inputRequired({
        inputRequests: { approval: inputRequired.elicit({ message, requestedSchema: RUN_SCHEMA }) },
        requestState: await approvals.mint({ digest, nonce: randomBytes(16).toString('hex') }, ctx),
      });
    }
    spend(state.nonce);
    if (answer.kind !== 'elicit') return notRun(addon.mcpAnswered(false, `the answer was not a form's (${answer.kind})`));
    return fromAnswer(answer);
  }
  let answer;
  try {
    answer = await ctx.mcpReq.elicitInput(
      { mode: 'form', message, requestedSchema: RUN_SCHEMA },
      { signal: ctx.mcpReq.signal, relatedRequestId: ctx.mcpReq.id, timeout: APPROVAL_TIMEOUT_MS },
    );
  } catch (e) {
    return notRun(addon.mcpAnswered(false, String(e?.message ?? e)));
  }
  return fromAnswer(answer);
}

/** What a form's answer decides: undefined (run) on accept with `run: true`, else why not. */
function fromAnswer(answer) {
  const text = addon.mcpAnswered(answer.action === 'accept' && answer.content?.run === true, null);
  return text === null ? undefined : notRun(text);
}

/** What the shell tool's structured result holds (its MCP `outputSchema`). */
const SHELL_OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    exitCode: { type: ['integer', 'null'] },
    stdout: { type: 'string' },
    stderr: { type: 'string' },
    timedOut: { type: 'boolean' },
    aborted: { type: 'boolean' },
    note: { type: 'string' },
    outputFile: { type: 'string' },
    errorFile: { type: 'string' },
    id: { type: 'string', description: 'A background process: its id.' },
    running: { type: 'boolean', description: 'A background process: whether it still runs.' },
  },
  required: ['stdout', 'stderr'],
};

/** A command's result as a person reads it: stdout, then [stderr] and its text, then the exit code. */
function commandText(r) {
  let text = r.stdout;
  const line = (s) => { text += `${text && !text.endsWith('\n') ? '\n' : ''}${s}`; };
  if (r.stderr) line(`[stderr]\n${r.stderr}`);
  if (r.running === true) line(`[running in the background as ${r.id}]`);
  else line(`[exit code ${r.exitCode ?? 'none'}]`);
  if (r.note) line(`[note] ${r.note}`);
  return text;
}

/** An MCP tools/call result from a tool's result. */
function content(result) {
  if (typeof result === 'string') return { content: [{ type: 'text', text: result }] };
  if (result?.type === 'image') {
    return { content: [{ type: 'text', text: `[Image ${result.path} (${result.mediaType}, ${result.bytes} bytes).]` }, { type: 'image', data: result.data, mimeType: result.mediaType }] };
  }
  if (typeof result?.stdout === 'string' && typeof result?.stderr === 'string') {
    return { content: [{ type: 'text', text: commandText(result) }], structuredContent: result };
  }
  // Structured content is an object; a list goes as text.
  const structured = result !== null && typeof result === 'object' && !Array.isArray(result) ? { structuredContent: result } : {};
  return { content: [{ type: 'text', text: JSON.stringify(result, null, 2) }], ...structured };
}

/** Starts the server on stdio. */
async function serve(argv) {
  let o;
  try {
    o = parse(argv);
  } catch (e) {
    console.error(`corral mcp: ${e.message}\n${usage}`);
    return 2;
  }
  if (o.version) {
    console.log(version);
    return 0;
  }
  if (o.help || !o.root) {
    console.error(usage);
    return o.help ? 0 : 2;
  }
  // The progress tokens of the calls running now, by the tools' toolCallId (one per call: two
  // requests may have ids that read alike, 1 and "1").
  let calls = 0;
  const progress = new Map();
  const onProgress = ({ toolCallId, text }) => {
    const p = progress.get(toolCallId);
    if (!p) return;
    p.count += 1;
    p.send({ method: 'notifications/progress', params: { progressToken: p.token, progress: p.count, message: text.slice(0, 2000) } }).catch(() => {});
  };
  const tools = toolsFor(o, onProgress);
  const warning = addon.mcpAllowWarning(o.allow, o.plan.sandbox);
  if (warning) console.error(warning);
  const byName = new Map(tools.map((t) => [t.name, t]));
  // The user is told the root's name, never its host path.
  const rootName = basename(resolve(o.root)) || '/';
  // One server per connection (and one for a 2026 client's discovery probe), all over the same tools.
  const handle = serveStdio(({ era }) => {
    const server = new Server({ name: 'corral', version }, { capabilities: { tools: {} }, requestState: { verify: approvals.verify } });
    server.setRequestHandler('tools/list', async (_request, ctx) => ({
      tools: tools.map((t) => ({
        name: t.name,
        description: t.name === 'shell' ? `${t.description} ${tools.policy.note(canAsk(server, era, ctx))}` : t.description,
        inputSchema: t.inputSchema,
        ...(t.name === 'shell' ? { outputSchema: SHELL_OUTPUT_SCHEMA } : {}),
        annotations: addon.toolAnnotations(t.name),
      })),
    }));
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const { name, arguments: args = {} } = request.params;
      const tool = byName.get(name);
      if (!tool) return { content: [{ type: 'text', text: `Unknown tool: ${name}. Tools: ${[...byName.keys()].join(', ')}.` }], isError: true };
      const toolCallId = `call-${++calls}`;
      const token = ctx.mcpReq._meta?.progressToken;
      if (token !== undefined) progress.set(toolCallId, { token, count: 0, send: (n) => ctx.mcpReq.notify(n) });
      try {
        const refused = await approval(server, era, tool, args, rootName, ctx);
        if (refused) return refused;
        return content(await tool.execute(args, { signal: ctx.mcpReq.signal, toolCallId }));
      } catch (e) {
        if (e?.name === 'WorkspaceError') return { content: [{ type: 'text', text: `${e.code}: ${e.message}` }], isError: true };
        console.error(`corral mcp: ${name} failed: ${e?.stack ?? e}`);
        return { content: [{ type: 'text', text: `Internal error in ${name}: ${e?.message ?? e}` }], isError: true };
      } finally {
        progress.delete(toolCallId);
      }
    });
    // Why a request was refused before a handler ran (a sealed state forged, expired or bound
    // elsewhere) goes to stderr.
    server.onerror = (e) => console.error(`corral mcp: ${e?.message ?? e}`);
    return server;
  }, { onerror: (e) => console.error(`corral mcp: ${e?.message ?? e}`) });
  void handle;
  console.error(`corral mcp: serving ${tools.length} tools over ${o.root} on stdio`);
  return undefined;
}

module.exports = { serve, toolsFor, parse };
