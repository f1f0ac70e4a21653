// Every subpath type-checks under tsc --strict in a consumer project.
import { NodeWorkspace, createFsTools } from 'corral';
import { toAiSdkTools } from 'corral/ai-sdk';
import { toOpenAIAgentsTools } from 'corral/openai-agents';
import { runConformance } from 'corral/conformance';
import { ToolRegistry } from 'corral/executor';
import { MemoryWorkspace } from 'corral/testing';

const tools = createFsTools(new NodeWorkspace({ root: '.' }));
export const forAi: Record<string, unknown> = toAiSdkTools(tools, { sessionId: 's' });
export const forAgents: unknown[] = toOpenAIAgentsTools(tools);
export const registry = new ToolRegistry().registerMany(tools);
runConformance({ makeProvider: () => new MemoryWorkspace(), test: (_name: string, _fn: () => Promise<void>) => undefined });
