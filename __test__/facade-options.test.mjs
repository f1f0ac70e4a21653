// The options of the facade's own functions (the SDK adapters, toolsFor, the admin handler) are
// checked by the core like every constructor's: a misspelled key is a ConfigurationError naming
// the nearest valid one, and a value of the wrong kind says what it must be.
import { describe, it, expect } from 'vitest';
import * as ai from 'ai';
import * as agents from '@openai/agents';
import { ConfigurationError, MemoryWorkspace, WorkspaceToolRegistry, createFsTools, createWorkspaceToolsHandler } from 'corral';
import { toAiSdkTools } from 'corral/ai-sdk';
import { toOpenAIAgentsTools } from 'corral/openai-agents';

// The subpath modules reach corral through require(); a test runner may load a second copy of
// the facade for its own imports, so the class is checked by name and code.
const isConfigurationError = (e) => e?.name === 'ConfigurationError' && e.code === 'ConfigurationError';

const tools = createFsTools(new MemoryWorkspace({ files: { 'a.txt': 'a' } }));

function thrown(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected a throw');
}

describe('options of the facade functions', () => {
  it('toAiSdkTools refuses a misspelled key, naming the one meant', () => {
    const e = thrown(() => toAiSdkTools(tools, { ai, sesionId: 's1' }));
    expect(isConfigurationError(e)).toBe(true);
    expect(e.message).toBe("toAiSdkTools: unknown option 'sesionId'; did you mean sessionId?");
    expect(Object.keys(toAiSdkTools(tools, { ai, sessionId: 's1', turn: 2 }))).toContain('read_file');
  });

  it('toOpenAIAgentsTools refuses a turn that is not a number', () => {
    const e = thrown(() => toOpenAIAgentsTools(tools, { agents, turn: '2' }));
    expect(isConfigurationError(e)).toBe(true);
    expect(e.message).toMatch(/^toOpenAIAgentsTools: turn must be a number/);
    expect(toOpenAIAgentsTools(tools, { agents }).map((t) => t.name)).toContain('grep');
  });

  it('toolsFor refuses a misspelled key instead of passing it on to the template tools', async () => {
    const registry = new WorkspaceToolRegistry();
    const e = await registry.toolsFor('acme', { builtin: tools }).catch((err) => err);
    expect(e).toBeInstanceOf(ConfigurationError);
    expect(e.message).toBe("toolsFor: unknown option 'builtin'; did you mean builtins?");
    expect((await registry.toolsFor('acme', { builtins: tools })).map((t) => t.name)).toEqual(tools.map((t) => t.name));
  });

  it('createWorkspaceToolsHandler needs authenticate and refuses an unknown key', () => {
    const registry = new WorkspaceToolRegistry();
    expect(thrown(() => createWorkspaceToolsHandler({ registry })).message).toBe(
      'createWorkspaceToolsHandler: authenticate (authenticate(token, req)) is required.');
    expect(thrown(() => createWorkspaceToolsHandler({ registry, authenticate: 'x' })).message).toMatch(/authenticate must be a function/);
    const e = thrown(() => createWorkspaceToolsHandler({ registry, authenticate: () => 'a', authorize: () => true }));
    expect(e).toBeInstanceOf(ConfigurationError);
    expect(e.message).toMatch(/^createWorkspaceToolsHandler: unknown option 'authorize'/);
    expect(typeof createWorkspaceToolsHandler({ registry, authenticate: () => 'a' })).toBe('function');
  });
});
