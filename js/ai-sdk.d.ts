import type { Tool, FsProvider, ShellProvider, CommandPattern, AdapterSessionOptions, AdapterFilesOptions, LinuxSandboxOptions, SubprocessSandboxOptions } from '../index';
// `ai` is an optional peer dependency: where it is absent (or is ai 6, which has no sandbox
// type), the SDK's types below are `any` and this file still compiles.
// @ts-ignore
import type * as ai from 'ai';

// `@ai-sdk/harness` is an optional peer dependency too: without it the harness types are `any`.
// @ts-ignore
import type * as harness from '@ai-sdk/harness';

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

/** The harness's sandbox provider (`HarnessV1SandboxProvider` of `@ai-sdk/harness`). */
// @ts-ignore
export type CorralHarnessSandboxProvider = harness.HarnessV1SandboxProvider;
/** A harness session (`HarnessV1NetworkSandboxSession`). */
// @ts-ignore
export type CorralHarnessSession = harness.HarnessV1NetworkSandboxSession;

/** What a session runs in: LinuxSandbox, or one kept Docker container (its own network and broker are the session's). */
export type CorralHarnessSandboxKind =
  | ({ kind: 'linux' } & Omit<LinuxSandboxOptions, 'network' | 'broker'>)
  | ({ kind: 'docker' } & Omit<SubprocessSandboxOptions, 'network' | 'broker' | 'networkName'>);

export interface CorralHarnessSandboxOptions {
  /** Host directory of the sessions: a session's files are under `<root>/<sessionId>`. Made on the first createSession. */
  root: string;
  /** Default `{ kind: 'linux' }`; limits go in `sandbox.limits`. */
  sandbox?: CorralHarnessSandboxKind;
  /** Ports forwarded from `127.0.0.1:<ephemeral>` on the host into each session (default [4000]). */
  ports?: number[];
  /** Outbound network policy of each session (default `{ mode: 'deny-all' }`). */
  // @ts-ignore
  network?: harness.HarnessV1NetworkPolicy;
  /** Header rules applied outside the sandbox by the session's broker. */
  // @ts-ignore
  requestTransformations?: harness.HarnessV1RequestTransformation[];
  /** Added to every command's environment (the base has HOME, TMPDIR, PATH, IS_SANDBOX=1 and the proxy). */
  env?: Record<string, string>;
  /** When set, only matching commands run. */
  allow?: CommandPattern[];
  /** Commands that never run. */
  deny?: CommandPattern[];
  /** PEM trusted for upstream TLS besides the system roots. */
  upstreamCa?: string | string[];
  /** The file tools' options for the session's reads and writes. */
  files?: AdapterFilesOptions;
}

/**
 * corral as the AI SDK harness's sandbox provider: each session is one sandbox on this machine
 * that persists (its network namespace, /tmp and home), with its ports forwarded from the host,
 * its network policy and request transformations held outside. Synchronous, no I/O.
 */
export declare function createCorralHarnessSandbox(options: CorralHarnessSandboxOptions): CorralHarnessSandboxProvider;
