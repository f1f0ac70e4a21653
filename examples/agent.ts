// A coding agent wired the way the specification's examples wire it, type-checked with
// `tsc --strict` against corral's index.d.ts (npm test runs it). The model is a script here.
import {
  NodeWorkspace,
  MemoryWorkspace,
  createFsTools,
  createShellTool,
  createCredentialBroker,
  SandboxShell,
  SubprocessSandbox,
  NoopSandbox,
  WorkspaceCheckpoints,
  FileWorkspaceCheckpointStore,
  WorkspaceError,
  readOnlyCommands,
  workspacePrompt,
  normalizeWorkspacePath,
  type Tool,
  type ToolContext,
  type FsProvider,
  type ShellProvider,
  type SandboxAdapter,
  type SandboxRequest,
  type SandboxRunOptions,
  type ExecResult,
} from 'corral';
import { ToolRegistry } from 'corral/executor';

type ToolCall = { name: string; args: Record<string, unknown> };

export async function runAgent(root: string, calls: ToolCall[]): Promise<unknown[]> {
  const workspace = new NodeWorkspace({ root, env: { NODE_ENV: 'test' }, inheritEnv: ['CI'] });
  const checkpoints = new WorkspaceCheckpoints(workspace, { store: new FileWorkspaceCheckpointStore(`${root}/../.checkpoints`) });
  const tools: Tool[] = [
    ...createFsTools(workspace, { checkpoints, deny: ['.git', '.env'], needsApproval: { write_file: true, edit_file: ({ path }: { path: string }) => !path.startsWith('src/') } }),
    createShellTool(workspace, {
      needsApproval: readOnlyCommands(['ls', 'cat', 'git status', 'git diff', 'git log']),
      allow: [
        { command: 'npm test' },
        { command: 'node --test', args: (rest: string) => rest === '' || rest.split(' ').every((f) => /^[\w-]+(\/[\w-]+)*\.test\.js$/.test(f)) },
        /^npm (test|run lint)$/,
        'git status',
      ],
      deny: ['rm -rf', /\bsudo\b/],
      defaultTimeoutMs: 60_000,
    }),
  ];
  const registry = new ToolRegistry();
  registry.registerMany(tools);
  const ctx: ToolContext = { sessionId: 'demo', turn: 0, signal: new AbortController().signal };
  const results: unknown[] = [];
  for (const call of calls) {
    const tool = registry.get(call.name);
    const gate = tool?.needsApproval;
    const ask = typeof gate === 'function' ? await gate(call.args, ctx) : Boolean(gate);
    results.push(ask ? { pending: call.name } : await registry.execute(call.name, call.args, ctx));
  }
  console.log(await checkpoints.list({ sessionId: 'demo' }));
  const preview = await checkpoints.rewind(0, { sessionId: 'demo', dryRun: true });
  console.log(preview.restored, preview.deleted, preview.skipped.map((s) => s.reason));
  // The options are optional, as at run time (sessionId 'default').
  console.log(await checkpoints.list(), await checkpoints.rewind(0, { dryRun: true }));
  // A predicate is called with the arguments alone.
  const edit = registry.get('edit_file');
  if (typeof edit?.needsApproval === 'function') console.log(await edit.needsApproval({ path: 'src/a.ts' }));
  return results;
}

/** An adapter written against the exported types. */
export const echoAdapter: SandboxAdapter = {
  async run(request: SandboxRequest, options?: SandboxRunOptions): Promise<ExecResult> {
    return { stdout: options?.signal?.aborted ? '' : request.command, stderr: '', exitCode: 0, timedOut: false };
  },
};

export async function memoryExample(): Promise<Record<string, string>> {
  const workspace = new MemoryWorkspace({
    files: { 'src/math.ts': 'export const add = (a: number, b: number) => a - b;\n' },
    exec: (command) => (command === 'npm test' ? { stdout: '1 passed\n' } : { exitCode: 1, stderr: 'unknown command\n' }),
  });
  const [, , edit] = createFsTools(workspace);
  await edit.execute({ path: 'src/math.ts', old_string: 'a - b', new_string: 'a + b' });
  const shell = createShellTool(workspace, { needsApproval: false });
  const r = await shell.execute({ command: 'npm test' });
  console.log(r.exitCode, r.stdout, workspace.commands.map((c) => c.command));
  return workspace.snapshot();
}

export async function brokerExample(): Promise<void> {
  const token = 'ghp_example';
  const broker = await createCredentialBroker({ rules: { 'api.github.com': { authorization: () => `Bearer ${token}` } }, allow: ['registry.npmjs.org'] });
  const workspace = new NodeWorkspace({ root: './project', env: { ...broker.env } });
  await workspace.exec(`curl -s ${broker.baseUrl('api.github.com')}/user`);
  await broker.close();
}

// Writing your own provider, as the specification shows.
declare const remote: {
  read(path: string): Promise<string | null>;
  write(path: string, data: string): Promise<void>;
  list(path: string): Promise<{ name: string; dir: boolean }[]>;
  run(cmd: string, opts: { cwd: string; timeoutMs?: number }): Promise<{ out: string; err: string; code: number }>;
};
const base = '/home/user/project';
const abs = (path: string) => `${base}/${normalizeWorkspacePath(path, 'posix')}`;

export const remoteFs: FsProvider = {
  async readFile(path) {
    const data = await remote.read(abs(path));
    if (data === null) throw new WorkspaceError(`File not found: ${path}`);
    return data;
  },
  writeFile: (path, content) => remote.write(abs(path), content),
  async stat(path) {
    const data = await remote.read(abs(path));
    return data === null ? undefined : { type: 'file', size: data.length };
  },
  async readdir(path) {
    return (await remote.list(abs(path))).map((e) => ({ name: e.name, type: e.dir ? 'directory' : 'file' }));
  },
  async mkdir(path) { await remote.run(`mkdir -p '${abs(path)}'`, { cwd: base }); },
  async rm(path, options) { await remote.run(`rm ${options?.recursive ? '-r ' : ''}'${abs(path)}'`, { cwd: base }); },
};

export const remoteShell: ShellProvider = {
  async exec(command, options = {}) {
    const r = await remote.run(command, { cwd: abs(options.cwd ?? '.'), timeoutMs: options.timeoutMs });
    return { stdout: r.out, stderr: r.err, exitCode: r.code, timedOut: false };
  },
};

export async function sandboxExample(root: string): Promise<void> {
  const workspace = new NodeWorkspace({ root });
  const shell = new SandboxShell(new SubprocessSandbox({ image: 'node:20-alpine', network: 'none' }), {
    cwd: workspace.root,
    env: { NODE_ENV: 'test' },
    inheritEnv: ['CI'],
  });
  const tools = [...createFsTools(workspace), createShellTool(shell, { needsApproval: false })];
  console.log(tools.length);
  const broker = await createCredentialBroker({ rules: { 'api.github.com': { authorization: () => 'Bearer x' } } });
  const sandbox = new SubprocessSandbox({ image: 'node:20-alpine', network: { allow: ['registry.npmjs.org'] }, broker });
  const tool = createShellTool(new SandboxShell(sandbox, { cwd: '/abs/path/to/project' }), { needsApproval: false });
  console.log(tool.name, sandbox.network);
  const host = new SandboxShell(new NoopSandbox(), { cwd: root, inheritEnv: true });
  await host.exec('true');
  await sandbox.close();
  await broker.close();
}

export async function pluginFeatures(workspace: NodeWorkspace): Promise<string> {
  const [read, , edit] = createFsTools(workspace, { readImages: true, fuzzyEdit: true, protect: ['dist/**'], onEdit: (e) => console.log(e.diff) });
  const out = await read.execute({ path: 'logo.png' });
  if (typeof out !== 'string') console.log(out.width, out.height, read.toModelOutput?.({ output: out }));
  await edit.execute({ path: 'src/a.ts', edits: [{ old_string: 'a', new_string: 'b' }] });
  const shell = createShellTool(workspace, { spillDir: '.corral/output', onProgress: ({ stream, text }) => console.log(stream, text) });
  const r = await shell.execute({ command: 'npm test', stdin: '' }, { toolCallId: 'c1' });
  return workspacePrompt([read, edit, shell]) + (r.outputFile ?? '');
}
