#!/usr/bin/env node
'use strict';
// corral <tool> '<json args>' [--root DIR]   run one file tool against a directory
// corral tools [--root DIR]                   list the tools with their schemas
// corral mcp --root DIR [...]                  an MCP server on stdio (see mcp.js)
const { NodeWorkspace, createFsTools } = require('../index.js');
const { executeTool } = require('../executor.js');

const usage = `usage: corral <tool> '<json args>' [--root DIR]
       corral tools [--root DIR]
       corral mcp --root DIR [--allow CMD]... [--deny CMD]... [--read-only] [--sandbox none|linux|docker]
Runs one of corral's file tools (read_file, write_file, edit_file, list_dir, glob, grep) against
DIR (default: the current directory) and prints its result.`;

function parse(argv) {
  const out = { rest: [], root: '.' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--root') out.root = argv[++i];
    else if (argv[i].startsWith('--root=')) out.root = argv[i].slice(7);
    else if (argv[i] === '-h' || argv[i] === '--help') out.help = true;
    else out.rest.push(argv[i]);
  }
  return out;
}

async function main() {
  if (process.argv[2] === 'mcp') return require('../mcp.js').serve(process.argv.slice(3));
  const { rest, root, help } = parse(process.argv.slice(2));
  if (help || rest.length === 0) {
    console.log(usage);
    return help ? 0 : 2;
  }
  const tools = createFsTools(new NodeWorkspace({ root }));
  const [name, json] = rest;
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
