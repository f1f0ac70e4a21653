'use strict';
// corral/openai-agents: corral's tools as function tools for @openai/agents (an optional peer
// dependency): the JSON Schema as non-strict parameters, needsApproval mapped to the SDK's
// approval flow, the run's abort signal and the call's id as ctx, and a WorkspaceError returned
// as the tool's output for the model to read.

const { executeTool } = require('./executor.js');
const { checkOptions } = require('./index.js')[Symbol.for('corral.internal')];

/** `toOpenAIAgentsTools(tools, { agents?, sessionId?, turn? })`: `agents` defaults to require('@openai/agents'). */
function toOpenAIAgentsTools(tools, options) {
  checkOptions('toOpenAIAgentsTools', options);
  options ??= {};
  const agents = options.agents ?? require('@openai/agents');
  if (typeof agents.tool !== 'function') throw new TypeError("toOpenAIAgentsTools: options.agents must be the '@openai/agents' package.");
  return tools.map((t) => {
    const ctxOf = (details, callId) => ({ signal: details?.signal, toolCallId: callId ?? details?.toolCall?.callId, sessionId: options.sessionId, turn: options.turn });
    return agents.tool({
      name: t.name,
      description: t.description,
      parameters: { ...(t.inputSchema ?? t.parameters), additionalProperties: true },
      strict: false,
      ...(t.needsApproval === undefined ? {} : {
        needsApproval: typeof t.needsApproval === 'function' ? async (_runContext, input, callId) => Boolean(await t.needsApproval(input, ctxOf(undefined, callId))) : Boolean(t.needsApproval),
      }),
      execute: async (input, _runContext, details) => {
        const out = await executeTool(t, input, ctxOf(details));
        return typeof out === 'string' ? out : JSON.stringify(out);
      },
    });
  });
}

module.exports = { toOpenAIAgentsTools };
