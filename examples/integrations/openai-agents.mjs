// corral's tools in an OpenAI Agents SDK agent: node examples/integrations/openai-agents.mjs
// A scripted model stands in for OpenAI's (no network); with a real one, drop `modelProvider`.
import { Agent, Runner, Usage, setTracingDisabled } from '@openai/agents';
import { MemoryWorkspace, createFsTools } from 'corral';
import { toOpenAIAgentsTools } from 'corral/openai-agents';

setTracingDisabled(true);
const workspace = new MemoryWorkspace({ files: { 'notes.md': '# Notes\nship it\n' } });
const agent = new Agent({ name: 'reader', instructions: 'Answer from the workspace.', tools: toOpenAIAgentsTools(createFsTools(workspace, { readOnly: true })) });

let turn = 0;
const model = {
  async getResponse(request) {
    turn += 1;
    if (turn === 1) return { usage: new Usage(), responseId: 'r1', output: [{ type: 'function_call', id: 'fc1', callId: 'c1', name: 'read_file', arguments: '{"path":"notes.md"}', status: 'completed' }] };
    const read = request.input.find((i) => i.type === 'function_call_result');
    const text = typeof read.output === 'string' ? read.output : read.output.text;
    return { usage: new Usage(), responseId: 'r2', output: [{ type: 'message', id: 'm1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `The notes say: ${text.split('\n')[1].split('\t')[1]}` }] }] };
  },
  async *getStreamedResponse() { throw new Error('not used'); },
};

const result = await new Runner({ modelProvider: { getModel: async () => model } }).run(agent, 'What do the notes say?');
console.log(result.finalOutput);
