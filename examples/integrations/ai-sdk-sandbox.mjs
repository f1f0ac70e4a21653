// A workspace as the AI SDK's own sandbox: node examples/integrations/ai-sdk-sandbox.mjs
// Tools written against `experimental_sandbox` (here one that runs a command) get corral's
// workspace: its paths confined, its commands under allow/deny. The model is the SDK's mock,
// scripted so the example runs offline.
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateText, stepCountIs, tool, jsonSchema } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { NodeWorkspace } from 'corral';
import { toAiSdkSandbox } from 'corral/ai-sdk';

const root = mkdtempSync(join(tmpdir(), 'corral-example-'));
writeFileSync(join(root, 'notes.md'), '# Notes\nship it\n');
const sandbox = toAiSdkSandbox(new NodeWorkspace({ root }), { allow: ['wc -l notes.md', 'cat notes.md'] });

// A tool of the app's, written against the SDK's sandbox interface only.
const bash = tool({
  description: 'Run a shell command in the sandbox.',
  inputSchema: jsonSchema({ type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }),
  execute: async ({ command }, { experimental_sandbox: sb, abortSignal }) => {
    try {
      return await sb.run({ command, abortSignal });
    } catch (e) {
      return { refused: `${e.code}: ${e.message}` };
    }
  },
});

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const calls = [['wc -l notes.md'], ['rm notes.md']];
let step = 0;
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const next = calls[step++];
    if (next) return { content: [{ type: 'tool-call', toolCallId: `c${step}`, toolName: 'bash', input: JSON.stringify({ command: next[0] }) }], finishReason: { unified: 'tool-calls', raw: 'tool-calls' }, usage, warnings: [] };
    const results = prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content).map((p) => p.output.value);
    return { content: [{ type: 'text', text: `${results[0].stdout.trim()}; ${results[1].refused}` }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
  },
});

const result = await generateText({ model, tools: { bash }, experimental_sandbox: sandbox, instructions: sandbox.description, prompt: 'Count the lines of the notes, then delete them.', stopWhen: stepCountIs(5) });
console.log(result.text);
rmSync(root, { recursive: true, force: true });
