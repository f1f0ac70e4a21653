import type { Tool } from '../index';

export interface OpenAIAgentsToolsOptions {
  /** The `@openai/agents` package; default require('@openai/agents'). */
  agents?: unknown;
  sessionId?: string;
  turn?: number;
}

/** corral's tools as function tools for `@openai/agents`' Agent. */
export declare function toOpenAIAgentsTools(tools: Tool[], options?: OpenAIAgentsToolsOptions): any[];
