#!/usr/bin/env node
'use strict';
// corral <tool> '<json args>' [--root DIR]   run one file tool against a directory
// corral tools [--root DIR]                   list the tools with their schemas
// corral mcp --root DIR [...]                  an MCP server on stdio (see mcp.js)
const { parseFlags } = require('../js/flags.js');

const usage = `usage: corral <tool> '<json args>' [--root DIR]
       corral tools [--root DIR]
       corral mcp --root DIR [--allow CMD]... [--deny CMD]... [--client-approves] [--read-only]
                  [--sandbox none|linux|docker] [--image IMAGE]   (corral mcp --help says more)
       corral --help | --version
Runs one of corral's file tools (read_file, write_file, edit_file, list_dir, glob, grep) against
DIR and prints its result.
  --root DIR    the workspace (default: the current directory)
  --help, -h    this text
  --version     corral's version`;

const FLAGS = { '--root': 'value', '--help': 'switch', '-h': 'switch', '--version': 'switch' };

async function main() {
  if (process.argv[2] === 'mcp') return require('../js/mcp.js').serve(process.argv.slice(3));
  let flags;
  let rest;
  try {
    ({ flags, positional: rest } = parseFlags(process.argv.slice(2), FLAGS));
  } catch (e) {
    console.error(`corral: ${e.message}\n${usage}`);
    return 2;
  }
  if (flags['--version']) {
    console.log(require('../package.json').version);
    return 0;
  }
  const help = flags['--help'] || flags['-h'];
  if (help || rest.length === 0) {
    console.log(usage);
    return help ? 0 : 2;
  }
  const [name, json] = rest;
  const most = name === 'tools' ? 1 : 2;
  if (rest.length > most) {
    console.error(`corral: unexpected argument '${rest[most]}'\n${usage}`);
    return 2;
  }
  const { NodeWorkspace, createFsTools } = require('../js/index.js');
  const { executeTool } = require('../js/executor.js');
  const tools = createFsTools(new NodeWorkspace({ root: flags['--root'] ?? '.' }));
  if (name === 'tools') {
    for (const t of tools) console.log(JSON.stringify({ name: t.name, description: t.description, parameters: t.parameters }));
    return 0;
  }
  const tool = tools.find((t) => t.name === name);
  if (!tool) {
    console.error(`corral: unknown tool '${name}'. Tools: ${tools.map((t) => t.name).join(', ')}`);
    return 2;
  }
  let args;
  try {
    args = json === undefined ? {} : JSON.parse(json);
  } catch (e) {
    console.error(`corral: the arguments are not valid JSON: ${e.message}`);
    return 2;
  }
  const result = await executeTool(tool, args);
  if (typeof result === 'string') {
    console.log(result);
    return 0;
  }
  console.error(`${result.error}: ${result.message}`);
  return 1;
}

main().then((code) => { if (code !== undefined) process.exitCode = code; }, (e) => { console.error(`corral: ${e.message}`); process.exitCode = 1; });
