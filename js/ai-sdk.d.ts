import type { Tool } from '../index';

export interface AiSdkToolsOptions {
  /** The `ai` package (6 or 7); default require('ai'). */
  ai?: unknown;
  /** Given to every call as ctx.sessionId (checkpoints key on it). */
  sessionId?: string;
  /** Given to every call as ctx.turn. */
  turn?: number;
}

/** corral's tools as the record `generateText({ tools })` takes. */
export declare function toAiSdkTools(tools: Tool[], options?: AiSdkToolsOptions): Record<string, any>;
