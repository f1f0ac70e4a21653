// Every subpath type-checks under tsc --strict in a consumer project, and the adapters give the
// SDKs' own types (the SDKs are installed here; package.test.mjs checks a project without them).
import { generateText, type ToolSet, type Experimental_SandboxSession } from 'ai';
import { Agent, applyPatchTool, type FunctionTool, type Editor } from '@openai/agents';
import type { SandboxClient } from '@openai/agents/sandbox';
import { NodeWorkspace, createFsTools } from 'corral';
import { toAiSdkTools, toAiSdkSandbox, createCorralHarnessSandbox } from 'corral/ai-sdk';
import type { HarnessV1SandboxProvider, HarnessV1NetworkSandboxSession } from '@ai-sdk/harness';
import { toOpenAIAgentsTools, corralSandboxClient, createEditor } from 'corral/openai-agents';
import { runConformance } from 'corral/conformance';
import { ToolRegistry } from 'corral/executor';
import { MemoryWorkspace } from 'corral/testing';

const workspace = new NodeWorkspace({ root: '.' });
const tools = createFsTools(workspace);
export const forAi: ToolSet = toAiSdkTools(tools, { sessionId: 's' });
export const sandbox: Experimental_SandboxSession = toAiSdkSandbox(workspace, { deny: ['rm'] });
export const forAgents: FunctionTool<any, any, string>[] = toOpenAIAgentsTools(tools);
export const client: SandboxClient = corralSandboxClient({ fs: workspace, allow: ['npm test'] });
export const editor: Editor = createEditor(workspace);
export const agent = new Agent({ name: 'a', tools: [...forAgents, applyPatchTool({ editor })] });
export const run = (model: Parameters<typeof generateText>[0]['model']) => generateText({ model, tools: forAi, experimental_sandbox: sandbox, prompt: 'hi' });
export const registry = new ToolRegistry().registerMany(tools);
runConformance({ makeProvider: () => new MemoryWorkspace(), test: (_name: string, _fn: () => Promise<void>) => undefined });
export const harnessSandbox: HarnessV1SandboxProvider = createCorralHarnessSandbox({
  root: '/var/tmp/sessions',
  sandbox: { kind: 'linux', limits: { memoryBytes: 2 ** 31 } },
  ports: [4000],
  network: { mode: 'custom', allowedHosts: ['registry.npmjs.org'], deniedCIDRs: ['169.254.0.0/16'] },
  requestTransformations: [{ match: { host: 'api.anthropic.com' }, transform: { headers: { 'x-api-key': 'real' } } }],
});
export const harnessSession = (): PromiseLike<HarnessV1NetworkSandboxSession> => harnessSandbox.createSession({ identity: 'claude-code' });
