// corral/openai-agents with the real @openai/agents Runner and a scripted model (no network):
// tool calls run on corral, a WorkspaceError is the tool's output, and approval interrupts the run.
import { describe, it, expect, afterAll } from 'vitest';
import { Agent, Runner, Usage, setTracingDisabled } from '@openai/agents';
import { NodeWorkspace, createFsTools, createShellTool } from 'corral';
import { toOpenAIAgentsTools } from 'corral/openai-agents';
import { tempTree } from './helpers.mjs';

setTracingDisabled(true);
// On Windows the shell is cmd.exe: `type` prints a file there.
const CAT = process.platform === 'win32' ? 'type a.txt' : 'cat a.txt';
const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

/** A model that answers each request with the next scripted output, and records the requests. */
function scriptedModel(steps) {
  const requests = [];
  let i = 0;
  const response = (output) => ({ usage: new Usage(), output, responseId: `r${i}` });
  return {
    requests,
    model: {
      async getResponse(request) {
        requests.push(request);
        const step = steps[i++];
        if (!step) return response([{ type: 'message', role: 'assistant', status: 'completed', id: `m${i}`, content: [{ type: 'output_text', text: 'done' }] }]);
        return response(step.map(([name, args], k) => ({ type: 'function_call', callId: `call_${i}_${k}`, name, arguments: JSON.stringify(args), status: 'completed', id: `fc${i}${k}` })));
      },
      async *getStreamedResponse() { throw new Error('not used'); },
    },
  };
}

const outputsOf = (request) => (Array.isArray(request.input) ? request.input : []).filter((it) => it.type === 'function_call_result').map((it) => it.output);

describe('toOpenAIAgentsTools', () => {
  it('runs corral tools in an Agent; a WorkspaceError is the tool output the model reads', async () => {
    const t = tempTree({ 'a.txt': 'hello\n' });
    trees.push(t);
    const ws = new NodeWorkspace({ root: t.root });
    const tools = toOpenAIAgentsTools([...createFsTools(ws), createShellTool(ws, { needsApproval: false, allow: [CAT] })]);
    const { model, requests } = scriptedModel([[['read_file', { path: 'a.txt' }], ['read_file', { path: '../x' }], ['shell', { command: CAT }]]]);
    const runner = new Runner({ modelProvider: { getModel: async () => model } });
    const result = await runner.run(new Agent({ name: 'coder', instructions: 'work', tools }), 'read it');
    expect(result.finalOutput).toBe('done');
    const outputs = outputsOf(requests.at(-1)).map((o) => (typeof o === 'string' ? o : o.text ?? JSON.stringify(o)));
    expect(outputs[0]).toBe(' 1\thello');
    expect(JSON.parse(outputs[1])).toMatchObject({ error: 'WorkspaceError', toolName: 'read_file' });
    expect(JSON.parse(outputs[2])).toMatchObject({ exitCode: 0, stdout: 'hello\n' });
    expect(tools.map((x) => x.name)).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'shell']);
  });

  it('a tool that needs approval interrupts the run instead of running', async () => {
    const t = tempTree({});
    trees.push(t);
    const ws = new NodeWorkspace({ root: t.root });
    const tools = toOpenAIAgentsTools([createShellTool(ws, { needsApproval: (c) => c.startsWith('touch') })]);
    const { model } = scriptedModel([[['shell', { command: 'touch made' }]]]);
    const runner = new Runner({ modelProvider: { getModel: async () => model } });
    const result = await runner.run(new Agent({ name: 'coder', instructions: 'work', tools }), 'make it');
    expect(result.interruptions?.length).toBe(1);
    expect(result.interruptions[0].rawItem.name).toBe('shell');
  });
});
