// corral's tools in a Vercel AI SDK agent: node examples/integrations/ai-sdk.mjs
// The model here is the SDK's own mock, scripted to call two tools, so the example runs offline;
// swap in a real model (openai('gpt-5'), anthropic(...)) and it is the same code.
import { generateText, stepCountIs } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { MemoryWorkspace, createFsTools, createShellTool } from 'corral';
import { toAiSdkTools } from 'corral/ai-sdk';

const workspace = new MemoryWorkspace({
  files: { 'src/math.js': 'export const add = (a, b) => a - b;\n' },
  exec: (command) => ({ stdout: command === 'npm test' ? 'ok 1 - add\n' : '' }),
});
const tools = toAiSdkTools([...createFsTools(workspace), createShellTool(workspace, { needsApproval: false, allow: ['npm test'] })]);

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const steps = [
  [{ toolName: 'edit_file', input: { path: 'src/math.js', old_string: 'a - b', new_string: 'a + b' } }],
  [{ toolName: 'shell', input: { command: 'npm test' } }],
];
let step = 0;
const model = new MockLanguageModelV3({
  doGenerate: async () => {
    const calls = steps[step++];
    if (!calls) return { content: [{ type: 'text', text: 'Fixed add() and the tests pass.' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
    return { content: calls.map((c, i) => ({ type: 'tool-call', toolCallId: `call_${step}_${i}`, toolName: c.toolName, input: JSON.stringify(c.input) })), finishReason: { unified: 'tool-calls', raw: 'tool-calls' }, usage, warnings: [] };
  },
});

const result = await generateText({ model, tools, prompt: 'Fix add() in src/math.js and run the tests.', stopWhen: stepCountIs(5) });
console.log(result.text);
console.log(workspace.snapshot()['src/math.js'].trim());
