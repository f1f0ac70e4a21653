import type { Tool, FsProvider, ShellProvider, CommandPattern, AdapterSessionOptions } from '../index';
// `@openai/agents` is an optional peer dependency: where it is absent, the SDK's types below are
// `any` and this file still compiles.
// @ts-ignore
import type * as agents from '@openai/agents';
// @ts-ignore
import type * as sandbox from '@openai/agents/sandbox';

/** The SDK's function tool, as `new Agent({ tools })` takes it. */
// @ts-ignore
export type OpenAIAgentsFunctionTool = agents.FunctionTool<any, any, string>;
/** The SDK's sandbox client, for `run(sandboxAgent, input, { sandbox: { client } })`. */
// @ts-ignore
export type OpenAIAgentsSandboxClient = sandbox.SandboxClient;
/** The SDK's patch editor, for `applyPatchTool({ editor })`. */
// @ts-ignore
export type OpenAIAgentsEditor = agents.Editor;

export interface OpenAIAgentsToolsOptions {
  /** The `@openai/agents` package; default require('@openai/agents'). */
  agents?: unknown;
  sessionId?: string;
  turn?: number;
}

/** corral's tools as function tools for `@openai/agents`' Agent. */
export declare function toOpenAIAgentsTools(tools: Tool[], options?: OpenAIAgentsToolsOptions): OpenAIAgentsFunctionTool[];

export interface CorralSandboxClientOptions extends AdapterSessionOptions {
  /** The workspace the sessions work in. */
  fs: FsProvider;
  /** Runs exec_command; default `fs` when it is also a ShellProvider. */
  shell?: ShellProvider;
  /** When set, only matching commands run (the shell tool's rules). */
  allow?: CommandPattern[];
  /** Commands that never run. */
  deny?: CommandPattern[];
}

/**
 * A workspace as the SDK's sandbox client (`backendId: 'corral'`): paths under the manifest's
 * root are workspace paths, commands run under allow/deny, and a session's end stops every
 * command it still runs.
 */
export declare function corralSandboxClient(options: CorralSandboxClientOptions): OpenAIAgentsSandboxClient;

/**
 * The editor `applyPatchTool({ editor })` takes: each V4A diff applied as the SDK's `applyDiff`
 * does, all or nothing, through the provider's confined writes. `root` is the workspace's
 * absolute name (default '/workspace').
 */
export declare function createEditor(fs: FsProvider, options?: AdapterSessionOptions & { root?: string }): OpenAIAgentsEditor;
