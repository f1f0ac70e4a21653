// The integration examples in examples/integrations run as the README shows them.
import { describe, it, expect } from 'vitest';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const example = (name) => fileURLToPath(new URL(`../examples/integrations/${name}`, import.meta.url));

describe('examples/integrations', { timeout: 60_000 }, () => {
  it('ai-sdk.mjs fixes the bug through the AI SDK and the tests pass', async () => {
    const { stdout } = await run(process.execPath, [example('ai-sdk.mjs')]);
    expect(stdout).toBe('Fixed add() and the tests pass.\nexport const add = (a, b) => a + b;\n');
  });
  it('openai-agents.mjs answers from the workspace through the Agents SDK', async () => {
    const { stdout } = await run(process.execPath, [example('openai-agents.mjs')]);
    expect(stdout).toBe('The notes say: ship it\n');
  });
  it('ai-sdk-sandbox.mjs runs a tool over experimental_sandbox and the rules refuse a command', async () => {
    const { stdout } = await run(process.execPath, [example('ai-sdk-sandbox.mjs')]);
    expect(stdout).toBe("2 notes.md; CommandRefused: Command refused: it is not on the allow list (allowed: 'wc -l notes.md', 'cat notes.md').\n");
  });
  it('openai-agents-sandbox.mjs patches and runs in a SandboxAgent, and a command off the allow list is refused', async () => {
    const { stdout } = await run(process.execPath, [example('openai-agents-sandbox.mjs')]);
    expect(stdout).toBe([
      'Fixed add().',
      'export const add = (a, b) => a + b;',
      'export const add = (a, b) => a + b;',
      "exec_command failed: Command refused: it is not on the allow list (allowed: 'cat math.js').",
      '',
    ].join('\n'));
  });
  it('mcp-client.mjs lists the read-only tools and greps over MCP', async () => {
    const { stdout } = await run(process.execPath, [example('mcp-client.mjs')]);
    expect(stdout).toBe('tools: read_file, list_dir, glob, grep\nsrc/math.js:2: function add(a, b) {\n');
  });
});
