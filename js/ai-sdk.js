'use strict';
// corral/ai-sdk: corral's tools as the record the AI SDK's generateText/streamText take (ai 6 and 7,
// an optional peer dependency). The schema goes through the SDK's jsonSchema, approval through its
// needsApproval, the call's abortSignal and toolCallId reach the tool as ctx, a WorkspaceError
// becomes a result the model reads, and images go through toModelOutput.

const { executeTool } = require('./executor.js');
const { checkOptions } = require('./index.js')[Symbol.for('corral.internal')];

/**
 * `toAiSdkTools(tools, { ai?, sessionId?, turn? })`: `ai` is the SDK module (default: require('ai')).
 */
function toAiSdkTools(tools, options) {
  checkOptions('toAiSdkTools', options);
  options ??= {};
  const ai = options.ai ?? require('ai');
  const { tool, jsonSchema } = ai;
  if (typeof tool !== 'function' || typeof jsonSchema !== 'function') throw new TypeError("toAiSdkTools: options.ai must be the 'ai' package (ai 6 or 7).");
  const out = {};
  for (const t of tools) {
    const ctxOf = (call) => ({ signal: call?.abortSignal, toolCallId: call?.toolCallId, sessionId: options.sessionId, turn: options.turn });
    out[t.name] = tool({
      description: t.description,
      inputSchema: jsonSchema(t.inputSchema ?? t.parameters),
      ...(t.needsApproval === undefined ? {} : {
        needsApproval: typeof t.needsApproval === 'function' ? (input, call) => t.needsApproval(input, ctxOf(call)) : t.needsApproval,
      }),
      // A WorkspaceError is a result the model reads ({ error, toolName, message }); anything else throws.
      execute: (input, call) => executeTool(t, input, ctxOf(call)),
      ...(typeof t.toModelOutput === 'function' ? { toModelOutput: ({ output }) => (output?.error ? { type: 'json', value: output } : t.toModelOutput({ output })) } : {}),
    });
  }
  return out;
}

module.exports = { toAiSdkTools };
