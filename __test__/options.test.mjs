// Every options object is read in one place: unknown keys are refused with the nearest valid
// key, types are checked and numbers bounded, for every constructor.
import { describe, it, expect, afterAll } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  NodeWorkspace, MemoryWorkspace, WorkspaceCheckpoints, SandboxShell, NoopSandbox, SubprocessSandbox, createFsTools,
  createShellTool, createCredentialBroker, ConfigurationError,
} from 'corral';
import { tempTree } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const root = () => { const t = tempTree({}); trees.push(t); return t.root; };

const configError = (fn, message) => {
  let err;
  try { fn(); } catch (e) { err = e; }
  expect(err).toBeInstanceOf(ConfigurationError);
  expect(err.message).toMatch(message);
};

describe('an unknown option is a ConfigurationError naming the nearest valid key', () => {
  it.each([
    ['createFsTools', () => createFsTools(new MemoryWorkspace(), { maxResult: 3 }), /createFsTools: unknown option 'maxResult'; did you mean maxResults\?/],
    ['createShellTool', () => createShellTool(new MemoryWorkspace(), { defaultTimeout: 5 }), /did you mean defaultTimeoutMs\?/],
    ['NodeWorkspace', () => new NodeWorkspace({ root: root(), inherit_env: true }), /NodeWorkspace: unknown option 'inherit_env'; did you mean inheritEnv\?/],
    ['MemoryWorkspace', () => new MemoryWorkspace({ file: {} }), /did you mean files\?/],
    ['WorkspaceCheckpoints', () => new WorkspaceCheckpoints(new MemoryWorkspace(), { maxturns: 3 }), /did you mean maxTurns\?/],
    ['SandboxShell', () => new SandboxShell(new NoopSandbox(), { cwd: root(), envs: {} }), /did you mean env\?/],
    ['SubprocessSandbox', () => new SubprocessSandbox({ image: 'x', netwrok: 'none' }), /did you mean network\?/],
  ])('%s', (_, make, message) => configError(make, message));

  it('createCredentialBroker', async () => {
    await expect(createCredentialBroker({ rules: {}, allowPrivat: [] })).rejects.toMatchObject({ name: 'ConfigurationError', message: expect.stringMatching(/did you mean allowPrivate\?/) });
  });

  it('a key far from every valid one lists the valid keys', () => {
    configError(() => createFsTools(new MemoryWorkspace(), { colour: 'red' }), /Valid options: readOnly, needsApproval, maxReadLines/);
  });

  it('needsApproval of the file tools names tools, with a suggestion for a typo', () => {
    configError(() => createFsTools(new MemoryWorkspace(), { needsApproval: { write_fil: true } }), /needsApproval names no tool 'write_fil'; did you mean write_file\?/);
    configError(() => createFsTools(new MemoryWorkspace(), { needsApproval: true }), /needsApproval must be an object keyed by tool name/);
  });
});

describe('numbers are bounded integers', () => {
  it.each([1e300, -1, 0, 2.5, '10', Infinity])('maxResults %j is refused', (n) => {
    configError(() => createFsTools(new MemoryWorkspace(), { maxResults: n }), /maxResults must be an integer from 1 to/);
  });
  it('timeouts and caps of the shell tool and the checkpoints are bounded too', () => {
    configError(() => createShellTool(new MemoryWorkspace(), { maxTimeoutMs: 1e300 }), /maxTimeoutMs must be an integer/);
    configError(() => new WorkspaceCheckpoints(new MemoryWorkspace(), { maxFileBytes: 1e300 }), /maxFileBytes must be an integer/);
  });
  it('values within bounds are taken', async () => {
    const [read] = createFsTools(new MemoryWorkspace({ files: { 'a.txt': 'a\nb\nc\n' } }), { maxReadLines: 2 });
    expect(await read.execute({ path: 'a.txt' })).toMatch(/Showing lines 1-2 of 3/);
  });
});

describe('types are checked in the same place', () => {
  it('a wrong type names the option', () => {
    configError(() => createFsTools(new MemoryWorkspace(), { readOnly: 'yes' }), /createFsTools: readOnly must be a boolean/);
    configError(() => createShellTool(new MemoryWorkspace(), { needsApproval: 'ask' }), /needsApproval must be true, false or a predicate/);
    configError(() => createShellTool(new MemoryWorkspace(), { allow: [{ command: 'x', args: 'y' }] }), /allow rule 'x': args must be a function/);
    configError(() => new MemoryWorkspace({ files: { a: 1 } }), /files must be an object of path to content/);
    configError(() => new MemoryWorkspace({ exec: 'x' }), /exec must be a function/);
    configError(() => new NodeWorkspace({}), /root must be a path/);
    configError(() => new SubprocessSandbox({ image: '' }), /image must be a non-empty string/);
    configError(() => new SubprocessSandbox({ image: 'x', network: { allow: ['a'], extra: 1 } }), /network must be 'none', 'default' or \{ allow/);
  });
  it('options that are not an object are refused', () => {
    configError(() => createFsTools(new MemoryWorkspace(), 3), /createFsTools: options must be an object/);
    configError(() => new NodeWorkspace('dir'), /NodeWorkspace: options must be an object/);
  });
});

describe('defineTool and WorkspaceToolRegistry options, checked in the core', () => {
  it('defineTool fills the defaults and keeps the schema object it was given', async () => {
    const { defineTool } = await import('corral');
    const execute = async () => 'ok';
    const plain = defineTool({ name: 'plain', execute });
    expect(plain).toMatchObject({ name: 'plain', description: '', parameters: { type: 'object', properties: {} } });
    expect(plain.inputSchema).toBe(plain.parameters);
    const schema = { type: 'object', properties: { q: { type: 'string' } } };
    expect(defineTool({ name: 'a', execute, inputSchema: schema }).parameters).toBe(schema);
    const other = { type: 'object' };
    expect(defineTool({ name: 'b', execute, parameters: other, inputSchema: schema }).parameters).toBe(other);
    expect(await plain.execute({})).toBe('ok');
  });

  it('defineTool refuses a tool without a name or execute, and a description or schema of the wrong kind', async () => {
    const { defineTool, ConfigurationError } = await import('corral');
    const execute = () => 1;
    for (const [spec, message] of [
      [{ name: '', execute }, /needs a string name and an execute function/],
      [{ name: 'x' }, /needs a string name and an execute function/],
      [null, /needs a string name and an execute function/],
      [{ name: 'x', execute, description: 5 }, /description must be a string/],
      [{ name: 'x', execute, parameters: 'object' }, /parameters must be a JSON Schema object/],
    ]) {
      expect(() => defineTool(spec)).toThrow(ConfigurationError);
      expect(() => defineTool(spec)).toThrow(message);
    }
  });

  it('WorkspaceToolRegistry names an unknown option with the nearest one, and refuses values of the wrong kind', async () => {
    const { WorkspaceToolRegistry, ConfigurationError } = await import('corral');
    expect(() => new WorkspaceToolRegistry({ onDispatc: () => {} })).toThrow(/unknown option 'onDispatc'; did you mean onDispatch\?/);
    expect(() => new WorkspaceToolRegistry({ onDispatch: 3 })).toThrow(/onDispatch must be a function/);
    expect(() => new WorkspaceToolRegistry({ store: 'db.sqlite' })).toThrow(ConfigurationError);
    expect(() => new WorkspaceToolRegistry({ store: { get() {} } })).toThrow(/missing put/);
    expect(() => new WorkspaceToolRegistry({ store: null, onDispatch: undefined })).not.toThrow();
    expect(() => new WorkspaceToolRegistry()).not.toThrow();
  });
});

describe('setup mistakes fail at setup', () => {
  it('a shell tool cwd outside the workspace is a ConfigurationError when the tool is made, naming no host path', () => {
    const ws = new MemoryWorkspace({ files: { 'a.txt': 'a' } });
    for (const cwd of ['../', '/etc', 'a/../../b']) {
      let e;
      try { createShellTool(ws, { cwd }); } catch (x) { e = x; }
      expect(e, cwd).toBeInstanceOf(ConfigurationError);
      expect(e.message).toMatch(/cwd/);
    }
    expect(() => createShellTool(ws, { cwd: 'pkg/' })).not.toThrow();
  });

  it('a spillDir that cannot be made is a ConfigurationError when the tool is made; one that can is made then', () => {
    const t = tempTree({ 'a.txt': 'a' });
    try {
      const ws = new NodeWorkspace({ root: t.root });
      expect(() => createShellTool(ws, { spillDir: 'a.txt/out' })).toThrow(ConfigurationError);
      createShellTool(ws, { spillDir: '.corral/output' });
      expect(existsSync(join(t.root, '.corral/output'))).toBe(true);
    } finally {
      t.cleanup();
    }
  });
});

describe("a call's options are read in the core too: a misspelled key is a bad argument", () => {
  it('exec options name the unknown key with the nearest valid one, and run nothing', async () => {
    const { WorkspaceError } = await import('corral');
    const dir = root();
    const ws = new NodeWorkspace({ root: dir });
    const err = await ws.exec('touch ran', { timeoutMS: 1000 }).catch((e) => e);
    expect(err).toBeInstanceOf(WorkspaceError);
    expect(err.code).toBe('InvalidArguments');
    expect(err.message).toMatch(/unknown option 'timeoutMS'; did you mean timeoutMs\?/);
    expect(existsSync(join(dir, 'ran'))).toBe(false);
    await expect(ws.exec('true', { cwd: 5 })).rejects.toThrow(/exec options: cwd has the wrong type/);
    const echo = process.platform === 'win32' ? ['echo %X%', 'y\r\n'] : ['echo $X', 'y\n'];
    expect((await ws.exec(echo[0], { env: { X: 'y' }, timeoutMs: 5000, cwd: '.' })).stdout).toBe(echo[1]);
  });

  it("a sandbox's run request does too", async () => {
    const { WorkspaceError } = await import('corral');
    const dir = root();
    const sandbox = new NoopSandbox();
    const err = await sandbox.run({ command: 'touch ran', cwd: dir, env: {}, timeoutMs: 1000, stdn: 'x' }).catch((e) => e);
    expect(err).toBeInstanceOf(WorkspaceError);
    expect(err.code).toBe('InvalidArguments');
    expect(err.message).toMatch(/unknown option 'stdn'; did you mean stdin\?/);
    expect(existsSync(join(dir, 'ran'))).toBe(false);
    const cat = process.platform === 'win32' ? `"${process.execPath}" -e "process.stdin.pipe(process.stdout)"` : 'cat';
    expect((await sandbox.run({ command: cat, cwd: dir, env: {}, timeoutMs: 5000, stdin: 'in' })).stdout).toBe('in');
  });
});

describe('the options of calls and small constructors are read in the core as well', () => {
  it("broker.listen names a misspelled key, and the sandboxes refuse a broker createCredentialBroker did not make", async () => {
    const { LinuxSandbox, FileWorkspaceCheckpointStore, normalizeWorkspacePath, workspacePrompt } = await import('corral');
    const broker = await createCredentialBroker({});
    try {
      await expect(broker.listen({ host: '127.0.0.1', client: '127.0.0.0/8' })).rejects.toThrow(/listen: unknown option 'client'; did you mean clients\?/);
      await expect(broker.listen({ host: '127.0.0.1' })).rejects.toThrow(ConfigurationError);
    } finally {
      await broker.close();
    }
    const fake = { url: 'http://127.0.0.1:1', env: {} };
    configError(() => new SubprocessSandbox({ image: 'x', broker: fake }), /SubprocessSandbox: broker must come from createCredentialBroker\(\)/);
    configError(() => new LinuxSandbox({ broker: fake }), /LinuxSandbox: broker must come from createCredentialBroker\(\)|does not run Linux/);
    for (const dir of ['', 5, undefined]) configError(() => new FileWorkspaceCheckpointStore(dir), /FileWorkspaceCheckpointStore: dir must be a directory path/);
    configError(() => normalizeWorkspacePath('a', 'dos'), /flavor must be 'posix' or 'win32', got 'dos'/);
    configError(() => workspacePrompt([], { nam: 'x' }), /workspacePrompt: unknown option 'nam'; did you mean name\?/);
  });
});
