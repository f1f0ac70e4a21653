import type { Tool, FsProvider, ShellProvider, CommandPattern, AdapterSessionOptions } from '../index';
// `ai` is an optional peer dependency: where it is absent (or is ai 6, which has no sandbox
// type), the SDK's types below are `any` and this file still compiles.
// @ts-ignore
import type * as ai from 'ai';

/** The `ai` tool record `generateText({ tools })` takes. */
// @ts-ignore
export type AiSdkToolSet = ai.ToolSet;
/** AI SDK 7's sandbox session, for `generateText({ experimental_sandbox })`. */
// @ts-ignore
export type AiSdkSandboxSession = ai.Experimental_SandboxSession;

export interface AiSdkToolsOptions {
  /** The `ai` package (6 or 7); default require('ai'). */
  ai?: unknown;
  /** Given to every call as ctx.sessionId (checkpoints key on it). */
  sessionId?: string;
  /** Given to every call as ctx.turn. */
  turn?: number;
}

/** corral's tools as the record `generateText({ tools })` takes. */
export declare function toAiSdkTools(tools: Tool[], options?: AiSdkToolsOptions): AiSdkToolSet;

export interface AiSdkSandboxOptions extends AdapterSessionOptions {
  /** Runs `run` and `spawn`; default `fs` when it is also a ShellProvider. */
  shell?: ShellProvider;
  /** When set, only matching commands run (the shell tool's rules). */
  allow?: CommandPattern[];
  /** Commands that never run. */
  deny?: CommandPattern[];
  /** The text the model reads about the sandbox; by default one that names no host path. */
  description?: string;
  /** The workspace's absolute name in the sandbox: paths under it are workspace paths (default '/workspace'). */
  root?: string;
}

/**
 * A workspace as AI SDK 7's `Experimental_SandboxSession`: paths confined to the workspace
 * (absolute ones only under `root`), commands under allow/deny as background processes.
 */
export declare function toAiSdkSandbox(fs: FsProvider, options?: AiSdkSandboxOptions): AiSdkSandboxSession;
