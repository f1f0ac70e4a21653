// corral as an MCP server, driven by the MCP SDK's client: node examples/integrations/mcp-client.mjs [DIR]
// Claude Code, Cursor and Codex start the same server from their config (see docs/integrations.md).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { fileURLToPath } from 'node:url';

const root = process.argv[2] ?? fileURLToPath(new URL('../project', import.meta.url));
const bin = fileURLToPath(new URL('../../bin/corral.js', import.meta.url));
const client = new Client({ name: 'example', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: process.execPath, args: [bin, 'mcp', '--root', root, '--read-only'] }));
const { tools } = await client.listTools();
console.log(`tools: ${tools.map((t) => t.name).join(', ')}`);
const found = await client.callTool({ name: 'grep', arguments: { pattern: 'function add' } });
console.log(found.content[0].text);
await client.close();
