/// <reference types="node" />
// corral — a workspace for AI coding agents. Hand-written types of the public API.

export type JSONSchema = { [key: string]: unknown };

export interface ToolContext {
  /** Aborts the call; a running command is killed with its process group. */
  signal?: AbortSignal;
  /** Default 'default' (checkpoints key on it). */
  sessionId?: string;
  /** Default 0: the 0-based index of the user message being answered. */
  turn?: number;
  toolCallId?: string;
}

export interface Tool<A = any, R = any> {
  name: string;
  description: string;
  parameters: JSONSchema;
  inputSchema: JSONSchema;
  needsApproval?: boolean | ((args: A, ctx?: ToolContext) => boolean | Promise<boolean>);
  execute(args: A, ctx?: ToolContext): Promise<R>;
}

export declare function defineTool<A = any, R = any>(spec: {
  name: string;
  description?: string;
  parameters?: JSONSchema;
  inputSchema?: JSONSchema;
  needsApproval?: Tool<A, R>['needsApproval'];
  execute(args: A, ctx?: ToolContext): Promise<R>;
}): Tool<A, R>;

export type WorkspaceErrorCode =
  | 'NotFound' | 'OutsideWorkspace' | 'Denied' | 'NotAFile' | 'IsADirectory' | 'TooLarge' | 'NotUtf8'
  | 'NoMatch' | 'Ambiguous' | 'InvalidPattern' | 'InvalidArguments' | 'Timeout' | 'Aborted'
  | 'CommandRefused' | 'ReadOnly' | 'Protected' | 'InvalidPatch' | 'PatchMismatch' | 'Exists' | 'NotRead' | 'Stale' | 'Io';

export declare class WorkspaceError extends Error {
  constructor(message: string, code?: WorkspaceErrorCode | string, options?: { cause?: unknown });
  constructor(message: string, options: { code?: WorkspaceErrorCode | string; cause?: unknown });
  readonly name: 'WorkspaceError';
  code: WorkspaceErrorCode | string;
}

/**
 * What a sandbox run rejects with when allowlisted egress cannot be enforced (Docker Desktop,
 * rootless Docker, a remote daemon, a reused non-internal network, an Engine before 25.0.5).
 */
export interface SandboxEgressError extends Error {
  name: 'SandboxEgressError';
  code: 'LOUSHO_SANDBOX_EGRESS_UNSUPPORTED';
}

export declare class ConfigurationError extends Error {
  constructor(message: string, options?: { cause?: unknown });
  readonly name: 'ConfigurationError';
  readonly code: 'ConfigurationError';
}

export type EntryType = 'file' | 'directory' | 'symlink' | 'other';

export interface FsProvider {
  readFile(path: string): Promise<string>;
  /** Creates parent directories. */
  writeFile(path: string, content: string): Promise<void>;
  stat(path: string): Promise<{ type: EntryType; size: number } | undefined>;
  readdir(path: string): Promise<{ name: string; type: EntryType }[]>;
  /** Recursive, no error if present. */
  mkdir(path: string): Promise<void>;
  rm(path: string, options?: { recursive?: boolean }): Promise<void>;
  readFileBytes?(path: string): Promise<Uint8Array>;
  /** Bytes as they are (content that is not UTF-8); creates parent directories like writeFile. */
  writeFileBytes?(path: string, bytes: Uint8Array): Promise<void>;
  getMode?(path: string): Promise<number>;
  chmod?(path: string, mode: number): Promise<void>;
  /** Workspace-relative. */
  realPath?(path: string): Promise<string>;
}

export interface ExecOptions {
  cwd?: string;
  timeoutMs?: number;
  env?: Record<string, string>;
  signal?: AbortSignal;
  stdin?: string;
  /**
   * Given to a JS ShellProvider when the shell tool wants the output while the command runs
   * (onProgress): call it with each piece of output as it comes.
   */
  onOutput?: (stream: 'stdout' | 'stderr', text: string) => void;
  /** The tool call's session, turn and id (the shell tool fills them from its `ctx`): a SandboxShell with `checkpoints` records a command's changes under them (default `'default'` and 0). */
  sessionId?: string;
  turn?: number;
  toolCallId?: string;
}

/** What a command changed in its working directory (`changes: 'overlay'`); paths relative to cwd, a new empty directory as `dir/`. */
export interface ExecChanges {
  added: string[];
  modified: string[];
  deleted: string[];
  /** Not applied: `protected` (a new `.git`), `changed on the host` (a conflict), or why it failed. */
  refused: { path: string; reason: string }[];
  /** Kept in a layer, not applied. */
  pending: boolean;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  timedOut: boolean;
  aborted?: boolean;
  signal?: string;
  /** From a sandbox with limits: the limit that stopped the command (memory, cpu, pids, file size). */
  note?: string;
  /** Overlay mode (`LinuxSandbox({ changes: 'overlay' })`): what the command changed. */
  changes?: ExecChanges;
}

export interface ShellProvider {
  /** 'sh', 'bash', 'cmd.exe', … */
  readonly shell?: string;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /**
   * Optional: a command that keeps running (background processes). Its output goes to
   * `options.onOutput` as it comes; `wait()` resolves when it ends; `kill()` stops all of it.
   */
  spawn?(command: string, options: ExecOptions & { onOutput(stream: 'stdout' | 'stderr', text: string): void }): SpawnedProcess | Promise<SpawnedProcess>;
}

/** What a ShellProvider's spawn() gives. */
export interface SpawnedProcess {
  pid?: number;
  write(text: string): void | Promise<void>;
  closeStdin(): void | Promise<void>;
  kill(): void | Promise<void>;
  wait(): Promise<ExecResult>;
}

export interface NodeWorkspaceOptions {
  /** An existing directory; every path is confined to it. */
  root: string;
  /** Added for every command. */
  env?: Record<string, string>;
  /** Host variables copied for every command, or true for the whole host environment. */
  inheritEnv?: string[] | boolean;
}

export declare class NodeWorkspace implements FsProvider, ShellProvider {
  constructor(options: NodeWorkspaceOptions);
  /** The real, absolute root. */
  readonly root: string;
  readonly shell: string;
  readFile(path: string): Promise<string>;
  writeFile(path: string, content: string): Promise<void>;
  stat(path: string): Promise<{ type: EntryType; size: number } | undefined>;
  readdir(path: string): Promise<{ name: string; type: EntryType }[]>;
  mkdir(path: string): Promise<void>;
  rm(path: string, options?: { recursive?: boolean }): Promise<void>;
  readFileBytes(path: string): Promise<Uint8Array>;
  writeFileBytes(path: string, bytes: Uint8Array): Promise<void>;
  getMode(path: string): Promise<number>;
  chmod(path: string, mode: number): Promise<void>;
  realPath(path: string): Promise<string>;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
}

export type ExecStub = (command: string, options: ExecOptions) => Partial<ExecResult> | Promise<Partial<ExecResult>>;

export interface RecordedCommand {
  command: string;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

export declare class MemoryWorkspace implements FsProvider, ShellProvider {
  constructor(options?: { files?: Record<string, string>; exec?: ExecStub });
  /** Every command exec() received. */
  readonly commands: RecordedCommand[];
  snapshot(): Record<string, string>;
  readFile(path: string): Promise<string>;
  writeFile(path: string, content: string): Promise<void>;
  stat(path: string): Promise<{ type: EntryType; size: number } | undefined>;
  readdir(path: string): Promise<{ name: string; type: EntryType }[]>;
  mkdir(path: string): Promise<void>;
  rm(path: string, options?: { recursive?: boolean }): Promise<void>;
  readFileBytes(path: string): Promise<Uint8Array>;
  writeFileBytes(path: string, bytes: Uint8Array): Promise<void>;
  getMode(path: string): Promise<number>;
  chmod(path: string, mode: number): Promise<void>;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
}

export declare function normalizeWorkspacePath(path: string, flavor?: 'posix' | 'win32'): string;
/** A shell-tool needsApproval predicate: a line needs no approval only when every simple command in it (joined by `&&`, `||`, `;`, `|`) is on the list and passes corral's read-only table, with no substitution, output redirection, background `&`, subshell, or path outside the working directory. Throws a ConfigurationError for a name the table has no read-only form for (`awk`, `sh`, `git push`, …). */
export declare function readOnlyCommands(commands: string[]): (command: string) => boolean;

export type FsToolName = 'read_file' | 'write_file' | 'edit_file' | 'list_dir' | 'glob' | 'grep';

/**
 * The file tools' options an adapter's reads and writes take (`files` of `toAiSdkSandbox`,
 * `corralSandboxClient` and `createEditor`): the same path as `createFsTools`, `.git` denied by
 * default.
 */
export type AdapterFilesOptions = Pick<FsToolsOptions, 'deny' | 'protect' | 'readOnly' | 'requireRead' | 'checkpoints' | 'onEdit' | 'maxReadLines' | 'maxOutputChars' | 'maxGrepFileBytes'>;

/** What an adapter's changes are recorded under (checkpoints, `onEdit`). */
export interface AdapterSessionOptions {
  /** The file tools' options for its reads and writes. */
  files?: AdapterFilesOptions;
  /** The session its changes belong to (default 'default'). */
  sessionId?: string;
  /** The turn its changes belong to: a number, or a function read at each change. */
  turn?: number | (() => number);
}

export interface FsToolsOptions {
  /** Only create read_file, list_dir, glob and grep. */
  readOnly?: boolean;
  needsApproval?: Partial<Record<FsToolName, boolean | ((args: any, ctx?: ToolContext) => boolean | Promise<boolean>)>>;
  maxReadLines?: number;
  maxOutputChars?: number;
  maxResults?: number;
  maxFilesScanned?: number;
  grepTimeoutMs?: number;
  /** grep skips files larger than this and names them (up to 5, then a count). Default 2,097,152 bytes. */
  maxGrepFileBytes?: number;
  /** Directory names glob and grep skip. Default ['.git', 'node_modules']. */
  ignore?: string[];
  /** Entry names no tool reads, lists, searches or writes. Default ['.git']. */
  deny?: string[];
  checkpoints?: WorkspaceCheckpoints;
  /** read_file returns PNG, JPEG, GIF and WebP files (by their bytes) as images. Default false. */
  readImages?: boolean;
  /** Globs (glob's syntax) write_file and edit_file refuse with Protected. Default []. */
  protect?: string[];
  /** edit_file matches once more with whitespace, quotes and dashes normalised. Default false. */
  fuzzyEdit?: boolean;
  /** Told of every change write_file and edit_file make; not awaited, its errors become warnings. */
  onEdit?: (event: EditEvent) => void | Promise<void>;
  /**
   * The stale-file guard: edit_file, apply_patch and write_file over an existing file are refused
   * (NotRead) unless this session (ctx.sessionId) read the file, and (Stale) when it changed since.
   * Default false.
   */
  requireRead?: boolean;
  /** Tools to add after the six, in this order. Default []. */
  include?: Array<'apply_patch' | 'move_file' | 'delete_file' | 'make_dir' | 'file_info' | 'read_files'>;
  /** Secrets in what the tools give the model become markers (see docs/secrets.md). Default true. */
  redact?: RedactOption;
}

/**
 * `true` (default): the process's shared redactor; `false`: the reference's exact outputs;
 * options: a redactor of the surface's own; a Redactor: that one (pass one to every surface of one agent).
 */
export type RedactOption = boolean | Redactor | RedactorOptions;

export interface RedactorOptions {
  /** Exact values to treat as secrets (restored into a file that holds them). */
  values?: string[];
  /** The named rule set ('default') or none. Default 'default'. */
  rules?: 'default' | false;
  /** Exact values never redacted. */
  allow?: string[];
}

/** One set of secrets and one numbering of markers per session: `[secret:<rule>#<n>]`. */
export interface Redactor {
  /** `text` with each secret replaced by its marker in `sessionId` (default 'default'). */
  redact(text: string, sessionId?: string): string;
}

export declare function createRedactor(options?: RedactorOptions): Redactor;

export interface EditEvent {
  path: string;
  /** A unified diff (`--- a/path`, `+++ b/path`). */
  diff: string;
  sessionId: string;
  turn: number;
  toolCallId?: string | null;
}

/** What read_file resolves to for an image, with readImages. */
export interface ImageResult {
  type: 'image';
  path: string;
  mediaType: 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';
  /** The file's size in bytes. */
  bytes: number;
  width: number;
  height: number;
  /** The file, in base64. */
  data: string;
}

/** The AI SDK's tool output, as read_file's toModelOutput gives it. */
export type ModelOutput =
  | { type: 'text'; value: string }
  | { type: 'content'; value: ({ type: 'text'; text: string } | { type: 'image-data'; data: string; mediaType: string })[] };

export interface FsTool extends Tool<any, string | ImageResult> {
  /** read_file with readImages only. */
  toModelOutput?: (arg: { output: string | ImageResult }) => ModelOutput;
}

export declare function createFsTools(fs: FsProvider, options?: FsToolsOptions): FsTool[];

/** Arguments of edit_file: one replacement, or several at once with edits. */
export interface EditFileArgs {
  path: string;
  old_string?: string;
  new_string?: string;
  replace_all?: boolean;
  edits?: { old_string: string; new_string: string; replace_all?: boolean }[];
}

/** A system-prompt section about the workspace the tools work in. */
export declare function workspacePrompt(tools: Tool[], options?: { name?: string }): string;

/** A rule that pins a command's arguments: `{ command: 'npm test' }` matches exactly that line. */
export interface CommandRule {
  command: string;
  /** Called with the rest of the line after the command and its space ('' when there is none). */
  args?: (rest: string) => boolean | Promise<boolean>;
}

export type CommandPattern = string | CommandRule | RegExp;

export interface ShellToolOptions {
  /** true (default), false, or a predicate over the command string. */
  needsApproval?: boolean | ((command: string) => boolean | Promise<boolean>);
  /** When set, only matching commands may run. */
  allow?: CommandPattern[];
  /** Matching commands are refused. */
  deny?: CommandPattern[];
  /** Default 120,000. */
  defaultTimeoutMs?: number;
  /** Default 600,000: a larger timeout_ms is lowered to this. */
  maxTimeoutMs?: number;
  /** Default 30,000 characters per stream; the middle is replaced by a marker beyond that. */
  maxOutputChars?: number;
  /** Working directory, relative to the workspace. */
  cwd?: string;
  /** Extra variables for every command. */
  env?: Record<string, string>;
  /** Default 'shell'. */
  name?: string;
  /** Where a stream's whole output goes when it is cut (a workspace directory). */
  spillDir?: string;
  /** Where spillDir files are written when the shell is not a file provider itself. */
  spillFs?: FsProvider;
  /** Output while a command runs, gathered for progressMs at a time. */
  onProgress?: (event: ProgressEvent) => void | Promise<void>;
  /** Default 250. */
  progressMs?: number;
  /** run_in_background and the process tools: createShellTool then returns an array. Default false. */
  background?: boolean;
  /** How long a background process may run. Default 1,800,000 (30 minutes). */
  backgroundTimeoutMs?: number;
  /** Secrets in output, notes, progress and errors become markers (see docs/secrets.md). Default true. */
  redact?: RedactOption;
}

export interface ProgressEvent {
  toolCallId?: string | null;
  stream: 'stdout' | 'stderr';
  text: string;
}

export interface ShellToolArgs {
  command: string;
  timeout_ms?: number;
  stdin?: string;
  /** With background: true. */
  run_in_background?: boolean;
}

/** What process_output and process_stop give, and a background start. */
export interface BackgroundProcessResult {
  id: string;
  running: boolean;
  stdout: string;
  stderr: string;
  exitCode?: number | null;
  signal?: string;
  note?: string;
}

/** createShellTool with background: true: the shell tool, then process_output, process_input, process_stop and process_list. */
export type BackgroundShellTools = [
  Tool<ShellToolArgs, ShellToolResult | BackgroundProcessResult>,
  Tool<{ id: string; wait_ms?: number }, BackgroundProcessResult>,
  Tool<{ id: string; text: string; close?: boolean }, { id: string; written: number; closed: boolean }>,
  Tool<{ id: string }, BackgroundProcessResult>,
  Tool<Record<string, never>, Array<{ id: string; command: string; running: boolean; exitCode?: number | null }>>,
] & {
  /** Stops every background process of the tool set. */
  close(): Promise<void>;
};

export interface ShellToolResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut?: true;
  aborted?: true;
  note?: string;
  /** With spillDir: where the whole stdout was saved. */
  outputFile?: string;
  /** With spillDir: where the whole stderr was saved. */
  errorFile?: string;
}

export declare function createShellTool(shell: ShellProvider, options: ShellToolOptions & { background: true }): BackgroundShellTools;
export declare function createShellTool(shell: ShellProvider, options?: ShellToolOptions): Tool<ShellToolArgs, ShellToolResult>;

export interface CheckpointData { [key: string]: unknown }

export interface WorkspaceCheckpointStore {
  load(sessionId: string): Promise<CheckpointData | undefined>;
  save(sessionId: string, data: CheckpointData): Promise<void>;
  delete(sessionId: string): Promise<void>;
}

/** One JSON file per session, written atomically (temp file, then rename). */
export declare class FileWorkspaceCheckpointStore implements WorkspaceCheckpointStore {
  constructor(dir: string);
  readonly dir: string;
  load(sessionId: string): Promise<CheckpointData | undefined>;
  save(sessionId: string, data: CheckpointData): Promise<void>;
  delete(sessionId: string): Promise<void>;
}

export interface RewindReport {
  dryRun: boolean;
  restored: string[];
  deleted: string[];
  skipped: { path: string; reason: 'changed-since' | 'not-a-file' | 'too-large' }[];
}

export declare class WorkspaceCheckpoints {
  /**
   * `keepSkipped` (default false): a real rewind keeps the backups of the files it skipped (the
   * reference forgets them): the checkpoint stays in list() with only those paths, and a later
   * `rewind(n, { force: true })` restores them.
   */
  /** `maxTurnBytes` (default 100 MB): the most bytes of backups one turn keeps of what commands changed; a change past it still applies and is named as not undoable. */
  constructor(fs: FsProvider, options?: { store?: WorkspaceCheckpointStore; maxTurns?: number; maxFileBytes?: number; keepSkipped?: boolean; maxTurnBytes?: number });
  /** `sessionId` defaults to `'default'`, as the tools' context does. */
  list(options?: { sessionId?: string }): Promise<{ turn: number; paths: string[] }[]>;
  rewind(toTurn: number, options?: { sessionId?: string; dryRun?: boolean; force?: boolean }): Promise<RewindReport>;
  clear(options?: { sessionId?: string }): Promise<void>;
}

/** A header's value: a string, a function called per request, or Basic credentials (sent as `Basic base64(username:password)`). */
export type HeaderValue = string | (() => string | Promise<string>) | { basic: { username: string; password: string } };

/** How a path, a query parameter or a header is matched; `regex` is JavaScript RegExp syntax. */
export type BrokerMatcher = { exact: string } | { startsWith: string } | { regex: string };

/**
 * A request transformation: a request matching `match` gets each `transform.headers` entry set,
 * replacing a header of that name, outside the sandbox. Transformations apply after the rules, to
 * what the broker reads (plain http:// through the proxy and the path form); a host must still be
 * allowed (rules or `allow`) to be reached.
 */
export interface BrokerTransformation {
  match: {
    /** Exact host, IP literal or *.suffix. */
    host: string;
    path?: BrokerMatcher;
    /** Any of these methods. */
    method?: string[];
    /** Each entry must match some query parameter (percent-decoded). */
    queryString?: { key?: BrokerMatcher; value?: BrokerMatcher }[];
    /** Each entry must match some request header, as the client sent it (names compared in lower case). */
    headers?: { key?: BrokerMatcher; value?: BrokerMatcher }[];
  };
  transform: { headers: Record<string, HeaderValue> };
}

export interface CredentialBrokerOptions {
  /** Host (exact, IP literal or *.suffix) to the headers added to its requests. */
  rules: Record<string, Record<string, HeaderValue>>;
  /** An injected value that comes back in a response's headers or textual body becomes `[secret]` (docs/secrets.md). Default true. */
  scrub?: boolean;
  /** More hosts reachable without injected headers. */
  allow?: string[];
  /** Hosts allowed to resolve to loopback, link-local or private addresses. */
  allowPrivate?: string[];
  /** Listening address, default 127.0.0.1. */
  host?: string;
  /** Default 0: an ephemeral port. */
  port?: number;
  /** Extra CA certificates (PEM) trusted for the upstream TLS of the path form. */
  ca?: string | string[];
  /** Request transformations, applied after the rules. */
  transformations?: BrokerTransformation[];
  /**
   * 'terminate': HTTPS to a host with a rule or a transformation is decrypted by the broker (its
   * own CA, whose key never leaves this process), so its headers are set there too; the upstream's
   * TLS is verified against the system's trust store plus `ca`. Other hosts are tunnelled untouched.
   */
  tls?: 'terminate';
}

export interface CredentialBroker {
  /** The proxy, http://127.0.0.1:<port> by default. */
  readonly url: string;
  /**
   * HTTP_PROXY, HTTPS_PROXY, NO_PROXY and lower-case forms; with `tls: 'terminate'` also
   * NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO,
   * naming a bundle of the system roots plus the broker's CA.
   */
  readonly env: Record<string, string>;
  /** With `tls: 'terminate'`: the broker's CA certificate (PEM). */
  readonly ca?: string;
  /** http://127.0.0.1:<port>/__broker/<host>: forwarded to https://<host> with the headers added. */
  baseUrl(host: string): string;
  /** Adds a listener on another address that serves only peers from the `clients` subnet. */
  listen(options: { host: string; clients: string; allow?: string[] }): Promise<string>;
  /** Replaces every transformation, for the requests that follow. */
  setTransformations(transformations: BrokerTransformation[]): void;
  /** Replaces the transformations with the same match and header names and appends the rest (adding twice changes nothing). */
  addTransformations(transformations: BrokerTransformation[]): void;
  /** Stops every listener and destroys open sockets. */
  close(): Promise<void>;
}

export declare function createCredentialBroker(options: CredentialBrokerOptions): Promise<CredentialBroker>;

/** One command for a sandbox adapter. */
export interface SandboxRequest {
  command: string;
  /** Absolute host path the command runs in. */
  cwd: string;
  /** Exactly the variables the command gets. */
  env: Record<string, string>;
  timeoutMs: number;
  stdin?: string;
}

/** The second argument of `SandboxAdapter.run`. */
export interface SandboxRunOptions {
  signal?: AbortSignal;
}

export interface SandboxAdapter {
  run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult>;
  close?(): Promise<void>;
}

/** Runs commands on the host (no isolation), with NodeWorkspace's small base environment. */
export declare class NoopSandbox implements SandboxAdapter {
  constructor();
  run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult>;
  close(): Promise<void>;
}

export type SandboxNetwork = 'none' | 'default' | { allow: string[] };

export interface SubprocessSandboxOptions {
  /** The image each command runs in, as `sh -c "<command>"`. */
  image: string;
  /** Default 'none'. `{ allow }` needs a broker; without one it means no network. */
  network?: SandboxNetwork;
  broker?: CredentialBroker;
  /** The internal network for `{ allow }`; default lousho-egress-<random>. */
  networkName?: string;
  /** unix:///path/to/docker.sock or tcp://HOST:PORT (https://HOST:PORT asks for TLS); default DOCKER_HOST, then /var/run/docker.sock. */
  dockerHost?: string;
  /**
   * TLS to a daemon on TCP: each the PEM text or the path of a file holding it. `ca` signed the
   * daemon's certificate (default: the public web's roots); `cert` and `key`, together, are the
   * client certificate a daemon started with --tlsverify asks for. Default: DOCKER_TLS_VERIFY and
   * DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem), as the docker CLI reads them.
   */
  tls?: { ca?: string; cert?: string; key?: string };
  /** The container's memory (no swap beyond it), pids (default 4096) and cpu/fsize/nofile ulimits; an OOM kill is named in the note. */
  limits?: SandboxLimits;
  /**
   * 'command' (default): a new container per command. 'session': one container per SandboxShell
   * cwd, started on its first command and removed on close(); each command runs in it through the
   * exec API, and a timeout or abort kills that command's processes only. Limits then hold for the
   * container as a whole.
   */
  reuse?: 'command' | 'session';
  /**
   * Kept read-only inside the container: an entry without '/' is a name matched at any depth of
   * the mounted cwd, one with '/' a path from it. Default ['.git'] (the reference mounts all of
   * cwd writable; `protect: []` does that). Found when a container starts: a kept container
   * ('session') protects what existed then. A daemon on TCP needs `protect: []`.
   */
  protect?: string[];
  /**
   * Default 'direct'. 'overlay': as LinuxSandbox's — each command's container gets an overlay of
   * cwd, mounted on this machine, and what it changed is applied when it ends
   * (`ExecResult.changes`). Needs this process to be root on Linux, an Engine on a local unix
   * socket and `reuse: 'command'`; else a ConfigurationError.
   */
  changes?: 'direct' | 'overlay';
}

/** Each command in a Docker container (Docker Engine API), cwd bind-mounted at the same path. */
export declare class SubprocessSandbox implements SandboxAdapter {
  constructor(options: SubprocessSandboxOptions);
  /** The validated network policy. */
  readonly network: SandboxNetwork;
  readonly networkName: string;
  run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult>;
  /** Removes the kept containers ('session'), stops the egress listener and removes the network if this sandbox created it. */
  close(): Promise<void>;
  /** Removes the containers corral labelled whose owner, a process of this machine, no longer runs. Resolves with how many. */
  prune(): Promise<number>;
}

export interface SandboxLimits {
  /** The command's memory (a control group; RLIMIT_AS per process with allowWeaker). */
  memoryBytes?: number;
  /** Forks past this many processes are refused. */
  pids?: number;
  /** CPU time of the whole command where cgroups allow, else of each process. */
  cpuSeconds?: number;
  fileSizeBytes?: number;
  openFiles?: number;
}

export interface LinuxSandboxOptions {
  /**
   * Default 'none' (loopback only). `{ allow }` with a broker: HTTP(S)_PROXY inside name a loopback
   * address that reaches the broker and nothing else; without a broker it means no network.
   */
  network?: 'none' | { allow: string[] };
  broker?: CredentialBroker;
  limits?: SandboxLimits;
  /** Absolute directories the command may write besides the request's cwd (default none but a private /tmp). */
  writable?: string[];
  /**
   * Kept read-only inside: an entry without '/' is a name matched at any depth of every writable
   * tree, one with '/' a path from cwd. Default ['.git']; every `.git` (directory or file) present
   * when a command starts is read-only whatever this says.
   */
  protect?: string[];
  /** Paths that look empty inside; default the user's home directory, less cwd. */
  hide?: string[];
  /**
   * Where the machine lacks a layer the options need, fall back instead of failing at
   * construction: per-process limits without a control group; as root without user namespaces or
   * idmapped mounts, commands run as root with fewer capabilities. Default false.
   */
  allowWeaker?: boolean;
  /**
   * When this process is root: the unprivileged host user commands run as (their group is always
   * 65534), in a user namespace whose root it is, with the writable paths idmapped so root-owned
   * files stay root's on disk. Default 65534.
   */
  hostUid?: number;
  /** Let the command make AF_UNIX sockets (socketpair always works). Default false. */
  allowUnixSockets?: boolean;
  /**
   * Default 'direct'. 'overlay': each command runs over an overlay of its cwd (`writable` paths
   * outside it stay direct); the host tree is untouched while it runs, and when it ends what it
   * changed is applied (a new `.git` and paths the host changed meanwhile are refused) and
   * reported as `ExecResult.changes`. Needs overlayfs in a user namespace (Linux 5.11 or later).
   */
  changes?: 'direct' | 'overlay';
}

export interface LinuxSandboxProbe {
  userNamespaces: boolean;
  mountNamespaces: boolean;
  pidNamespaces: boolean;
  netNamespaces: boolean;
  seccomp: boolean;
  landlock: boolean;
  cgroups: 'v1' | 'v2' | null;
}

/**
 * Each command in new user, mount, pid, network, IPC and UTS namespaces: the host read-only,
 * cwd (and `writable`) read-write, `hide` paths empty, loopback only, a seccomp filter, and the
 * limits. No daemon, nothing to install. Linux only.
 */
export declare class LinuxSandbox implements SandboxAdapter {
  constructor(options?: LinuxSandboxOptions);
  /** What the machine offers. */
  static probe(): LinuxSandboxProbe;
  run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult>;
  close(): Promise<void>;
}

export interface KubernetesSandboxOptions {
  /** The `SandboxWarmPool` (kubernetes-sigs/agent-sandbox) each sandbox is claimed from. */
  warmPool: string;
  /** Default: the kubeconfig context's namespace, else 'default'. */
  namespace?: string;
  /** A kubeconfig path. Default: the in-cluster service account, then `KUBECONFIG`, then `~/.kube/config`. */
  kubeconfig?: string;
  context?: string;
  /** Default: the pod's first container. */
  container?: string;
  /** The pod directory `workspace()` is. Default '/workspace'. */
  workdir?: string;
  /** The claim's `shutdownTime` is this far ahead, moved forward while the sandbox is in use. Default 3,600,000. */
  shutdownAfterMs?: number;
  /** How long the claim may take to become `Ready`. Default 120,000. */
  readyTimeoutMs?: number;
  /** Set as `ulimit` values inside the pod (memory as address space, pids per user). */
  limits?: SandboxLimits;
}

/**
 * Each command in a pod of a kubernetes-sigs/agent-sandbox warm pool: the first use claims a
 * sandbox (a `SandboxClaim`, watched until Ready), each command is a `pods/exec` over WebSocket
 * (v5, v4 as fallback), a timeout or abort kills its process group in the pod. `close()` deletes
 * the claim.
 */
export declare class KubernetesSandbox implements SandboxAdapter {
  constructor(options: KubernetesSandboxOptions);
  /** The pod's workdir as an FsProvider (file operations by exec). */
  workspace(): KubernetesWorkspace;
  /** Deletes the claims of this machine whose owner process no longer runs; resolves with how many. */
  prune(): Promise<number>;
  run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult>;
  close(): Promise<void>;
}

/** A pod's workdir as an FsProvider, confined to it (links resolved in the pod), `.git` denied; every method of FsProvider. */
export interface KubernetesWorkspace extends Required<FsProvider> {}
export declare class KubernetesWorkspace {
  private constructor();
  /** The workdir in the pod. */
  readonly root: string;
}

/** A ShellProvider over any SandboxAdapter. */
export declare class SandboxShell implements ShellProvider {
  /**
   * `checkpoints` (an adapter with `changes: 'overlay'`, a WorkspaceCheckpoints over a
   * NodeWorkspace whose root is `cwd`): every command's changes are recorded under the call's
   * session and turn before they apply, so `rewind` undoes them. `applyChanges` (default
   * 'auto'): 'manual' keeps each command's changeset pending (later commands see it) until
   * `applyChanges`. `changesDir`: where each command's layer is made (default under the OS temp
   * directory; never inside `cwd`).
   */
  constructor(adapter: SandboxAdapter, options: { cwd: string; env?: Record<string, string>; inheritEnv?: string[] | boolean; checkpoints?: WorkspaceCheckpoints; applyChanges?: 'auto' | 'manual'; changesDir?: string });
  readonly shell: string;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /** With applyChanges: 'manual': the changesets kept pending, oldest first (`diff` unified, binary files named). */
  pendingChanges(): Promise<PendingChangeset[]>;
  /** Applies the pending changesets up to and including `id` (all without one), oldest first. */
  applyChanges(id?: string): Promise<{ id: string; changes: ExecChanges }[]>;
  /** Discards changeset `id` and every one after it (all without one); their ids. */
  discardChanges(id?: string): Promise<string[]>;
}

export interface PendingChangeset {
  id: string;
  command: string;
  changes: { path: string; kind: 'added' | 'modified' | 'deleted' }[];
  diff: string;
  /** Left by a process that no longer runs, perhaps half applied (listed by a new SandboxShell over the same cwd, in either mode; applied only when asked). */
  interrupted?: true;
}

// ---------------------------------------------------------------------------------------------
// Workspace-defined tools

export interface WorkspaceToolSpec {
  /** /^[A-Za-z0-9_-]{1,64}$/ */
  name: string;
  /** Default ''. */
  description?: string;
  /** JSON Schema of the arguments; default {}. */
  parameters?: Record<string, unknown>;
  handler_kind: 'shell_template' | 'python_template';
  /** shell_template: { command }; python_template: { code } or { command }. `substitution: 'raw'` pastes values as they are (the peer's way): no quoting, no placement checks, and the tool needs approval by default. */
  handler_payload: { command?: string; code?: string; substitution?: 'raw' };
}

export interface TemplateToolOptions {
  shell: ShellProvider;
  /** Default 120,000. */
  timeoutMs?: number;
  /** Default 30,000 characters per stream. */
  maxOutputChars?: number;
  /** Default false (true for a `substitution: 'raw'` spec): an operator registered the tool, and its arguments are quoted (Python: literals). */
  needsApproval?: boolean | ((args: any, ctx?: ToolContext) => boolean | Promise<boolean>);
  /** As the shell tool's. Default true. */
  redact?: RedactOption;
}

export declare function createTemplateTool(spec: WorkspaceToolSpec, options: TemplateToolOptions): Tool<Record<string, unknown>, ShellToolResult>;

export interface ToolStore {
  get(workspaceId: string, name: string): Promise<WorkspaceToolSpec | undefined | null>;
  put(workspaceId: string, spec: Required<WorkspaceToolSpec>): Promise<void>;
  delete(workspaceId: string, name: string): Promise<boolean>;
  list(workspaceId: string): Promise<WorkspaceToolSpec[]>;
}

/** Specs in memory. */
export declare class MemoryToolStore {
  constructor();
}

/** Specs in an embedded SQLite database file: survives restarts, safe for several processes at once. */
export declare class SqliteToolStore {
  constructor(path: string);
  readonly path: string;
}

export interface PostgresToolStoreOptions {
  /** `postgres://user:password@host:port/database`; `?sslmode=require|verify-ca|verify-full` and
   * `sslrootcert=FILE` ask for TLS (the system's roots when no file is named). */
  connectionString: string;
  /** The schema the table is made in (default `corral`): letters, digits and `_`. */
  schema?: string;
  /** The most connections at once (default 8). */
  poolSize?: number;
}

/**
 * Specs in a PostgreSQL (13 or later) table that several API servers share: made and migrated
 * on first use, atomic upserts, lists in code-unit order. A bad connectionString is a
 * ConfigurationError now; an unreachable server rejects the call (within seconds), and the next
 * call reconnects. No error names the password.
 */
export declare class PostgresToolStore {
  constructor(options: PostgresToolStoreOptions);
  readonly schema: string;
  /** Ends its connections. */
  close(): Promise<void>;
}

export interface DispatchEvent {
  workspaceId: string;
  sessionId: string;
  toolName: string;
  kind: 'builtin' | 'workspace';
  args: unknown;
  ok: boolean;
  error?: { code: string; message: string };
  durationMs: number;
}

export declare class WorkspaceToolRegistry {
  constructor(options?: { store?: MemoryToolStore | SqliteToolStore | PostgresToolStore | ToolStore; onDispatch?: (event: DispatchEvent) => void | Promise<void> });
  upsert(workspaceId: string, spec: WorkspaceToolSpec): Promise<Required<WorkspaceToolSpec>>;
  get(workspaceId: string, name: string): Promise<Required<WorkspaceToolSpec> | undefined>;
  list(workspaceId: string): Promise<Required<WorkspaceToolSpec>[]>;
  delete(workspaceId: string, name: string): Promise<boolean>;
  toolsFor(workspaceId: string, options: { shell: ShellProvider; builtins?: Tool[]; timeoutMs?: number; maxOutputChars?: number; redact?: RedactOption }): Promise<Tool[]>;
}

export interface WorkspaceToolsHandlerOptions {
  registry?: WorkspaceToolRegistry;
  /** The workspace id a bearer token stands for, or null to refuse it. */
  authenticate(token: string, req: import('node:http').IncomingMessage): string | null | undefined | Promise<string | null | undefined>;
}

export declare function createWorkspaceToolsHandler(options: WorkspaceToolsHandlerOptions): (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => Promise<void>;
