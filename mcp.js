'use strict';
// `corral mcp`: corral's tools as an MCP server on stdio, built on @modelcontextprotocol/sdk.
// stdout carries only protocol messages; everything else goes to stderr.

const { Server } = require('@modelcontextprotocol/sdk/server/index.js');
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js');
const { ListToolsRequestSchema, CallToolRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
const corral = require('./index.js');
const { version } = require('./package.json');

const READ_TOOLS = new Set(['read_file', 'list_dir', 'glob', 'grep']);

const usage = `usage: corral mcp --root DIR [--allow CMD]... [--deny CMD]... [--read-only]
                  [--sandbox none|linux|docker] [--image IMAGE]
An MCP server on stdio with corral's file tools over DIR and a shell tool.
  --allow CMD    a command the shell may run (a string pattern; repeatable); without any, every
                 command is offered to the client for approval
  --deny CMD     a command the shell refuses (repeatable)
  --read-only    only read_file, list_dir, glob and grep: no write_file, edit_file or shell
  --sandbox      where commands run: none (on this machine, the default), linux (LinuxSandbox:
                 namespaces, the host read-only but DIR, no network, no daemon) or docker (a
                 container per command, needs --image and a Docker Engine)`;

function parse(argv) {
  const o = { allow: [], deny: [], readOnly: false, sandbox: 'none' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--root') o.root = value();
    else if (a === '--allow') o.allow.push(value());
    else if (a === '--deny') o.deny.push(value());
    else if (a === '--read-only') o.readOnly = true;
    else if (a === '--sandbox') o.sandbox = value();
    else if (a === '--image') o.image = value();
    else if (a === '-h' || a === '--help') o.help = true;
    else throw new Error(`unknown option '${a}'`);
  }
  return o;
}

/** The tools a server with these options offers. */
function toolsFor(o) {
  const workspace = new corral.NodeWorkspace({ root: o.root });
  const fsTools = corral.createFsTools(workspace, { readOnly: o.readOnly, readImages: true });
  if (o.readOnly) return fsTools;
  let shell = workspace;
  if (o.sandbox === 'linux') {
    shell = new corral.SandboxShell(new corral.LinuxSandbox(), { cwd: workspace.root });
  } else if (o.sandbox === 'docker') {
    if (!o.image) throw new Error('--sandbox docker needs --image IMAGE');
    shell = new corral.SandboxShell(new corral.SubprocessSandbox({ image: o.image }), { cwd: workspace.root });
  } else if (o.sandbox !== 'none') {
    throw new Error(`--sandbox must be none, linux or docker, not '${o.sandbox}'`);
  }
  const shellTool = corral.createShellTool(shell, {
    needsApproval: o.allow.length === 0,
    ...(o.allow.length ? { allow: o.allow } : {}),
    deny: o.deny,
  });
  return [...fsTools, shellTool];
}

/** An MCP tools/call result from a tool's result. */
function content(result) {
  if (typeof result === 'string') return { content: [{ type: 'text', text: result }] };
  if (result?.type === 'image') {
    return { content: [{ type: 'text', text: `[Image ${result.path} (${result.mediaType}, ${result.bytes} bytes).]` }, { type: 'image', data: result.data, mimeType: result.mediaType }] };
  }
  return { content: [{ type: 'text', text: JSON.stringify(result, null, 2) }], structuredContent: result };
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
  if (o.help || !o.root) {
    console.error(usage);
    return o.help ? 0 : 2;
  }
  const tools = toolsFor(o);
  const byName = new Map(tools.map((t) => [t.name, t]));
  const server = new Server({ name: 'corral', version }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: tools.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      annotations: READ_TOOLS.has(t.name) ? { readOnlyHint: true } : { readOnlyHint: false, destructiveHint: true },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name, arguments: args } = request.params;
    const tool = byName.get(name);
    if (!tool) return { content: [{ type: 'text', text: `Unknown tool: ${name}. Tools: ${[...byName.keys()].join(', ')}.` }], isError: true };
    try {
      return content(await tool.execute(args ?? {}, { signal: extra.signal, toolCallId: String(extra.requestId) }));
    } catch (e) {
      if (e?.name === 'WorkspaceError') return { content: [{ type: 'text', text: `${e.code}: ${e.message}` }], isError: true };
      console.error(`corral mcp: ${name} failed: ${e?.stack ?? e}`);
      return { content: [{ type: 'text', text: `Internal error in ${name}: ${e?.message ?? e}` }], isError: true };
    }
  });
  await server.connect(new StdioServerTransport());
  console.error(`corral mcp: serving ${tools.length} tools over ${o.root} on stdio`);
  return undefined;
}

module.exports = { serve, toolsFor, parse };
