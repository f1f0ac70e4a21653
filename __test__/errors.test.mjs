// "Errors": a WorkspaceError is a tool error the model reads; an error thrown by the program's own
// JavaScript (a provider, a stub, a store, a callback) is rethrown to the program as the very same
// object, whichever path it took through the core.
import { describe, it, expect } from 'vitest';
import {
  MemoryWorkspace, WorkspaceCheckpoints, createFsTools, createShellTool, SandboxShell, WorkspaceError,
} from 'corral';
import { executeTool } from 'corral/executor';

class ProgramBug extends Error {
  constructor() { super('a bug in the program'); this.name = 'ProgramBug'; this.detail = { id: 7 }; }
}

const provider = (bug) => ({
  async readFile() { throw bug; }, async writeFile() { throw bug; }, async stat() { throw bug; },
  async readdir() { throw bug; }, async mkdir() {}, async rm() {},
});

describe('an error the program throws comes back as the same object', () => {
  it('from a provider, through every file tool and the registry', async () => {
    const bug = new ProgramBug();
    for (const tool of createFsTools(provider(bug))) {
      const args = { read_file: { path: 'a' }, write_file: { path: 'a', content: 'x' }, edit_file: { path: 'a', old_string: 'x', new_string: 'y' }, list_dir: {}, glob: { pattern: '*' }, grep: { pattern: 'x' } }[tool.name];
      const e = await executeTool(tool, args).catch((x) => x);
      expect(e, tool.name).toBe(bug);
    }
  });

  it('from an exec stub, a checkpoint store, a shell args check and an approval predicate', async () => {
    const bug = new ProgramBug();
    const ws = new MemoryWorkspace({ exec: () => { throw bug; } });
    expect(await ws.exec('x').catch((e) => e)).toBe(bug);

    const store = { async load() { throw bug; }, async save() {}, async delete() {} };
    const checkpoints = new WorkspaceCheckpoints(new MemoryWorkspace(), { store });
    expect(await checkpoints.list({ sessionId: 's' }).catch((e) => e)).toBe(bug);

    const shell = createShellTool(new MemoryWorkspace(), { allow: [{ command: 'x', args: () => { throw bug; } }] });
    expect(await shell.execute({ command: 'x y' }).catch((e) => e)).toBe(bug);
    // A bug in the args check is not a refusal: needsApproval rejects with it too.
    expect(await shell.needsApproval({ command: 'x y' }).catch((e) => e)).toBe(bug);

    const asked = createShellTool(new MemoryWorkspace(), { needsApproval: async () => { throw bug; } });
    expect(await asked.needsApproval({ command: 'ls' }).catch((e) => e)).toBe(bug);
  });

  it('from a sandbox adapter', async () => {
    const bug = new ProgramBug();
    const shell = new SandboxShell({ async run() { throw bug; } }, { cwd: '/abs/path/in/sandbox' });
    expect(await shell.exec('ls').catch((e) => e)).toBe(bug);
  });

  it('a value that is not an Error comes back as it was', async () => {
    const ws = new MemoryWorkspace({ exec: () => { throw 'just a string'; } });
    expect(await ws.exec('x').catch((e) => e)).toBe('just a string');
  });

  it('a WorkspaceError a provider throws is a tool error with its code', async () => {
    const [read] = createFsTools(provider(new WorkspaceError('nope', 'Denied')));
    expect(await executeTool(read, { path: 'a' })).toMatchObject({ error: 'WorkspaceError', toolName: 'read_file', message: expect.stringContaining('nope') });
  });
});

describe('errors cross from the core with their code, in one place', () => {
  it("the addon's own errors carry the core's code and message, nothing else in the message", async () => {
    const { createRequire } = await import('node:module');
    const addon = createRequire(import.meta.url)('../js/binding.js');
    const fs = addon.NativeFs.memory(null);
    const rejected = await fs.readFile('missing.txt').catch((e) => e);
    expect(rejected).toBeInstanceOf(Error);
    expect([rejected.code, rejected.message]).toEqual(['NotFound', 'File not found: missing.txt']);
    let thrown;
    try { addon.NativeFs.local({ rot: '.' }); } catch (e) { thrown = e; }
    expect([thrown.code, thrown.message]).toEqual(['ConfigurationError', "NodeWorkspace: unknown option 'rot'; did you mean root?"]);
    expect(new Map(addon.errorCodes()).get('OutsideWorkspace')).toBe('workspace');
  });

  it("a program error whose code is also a core code comes back as the program's object", async () => {
    const bug = Object.assign(new Error('disk on fire'), { code: 'NotFound' });
    const [read] = createFsTools(provider(bug));
    expect(await executeTool(read, { path: 'a' }).catch((x) => x)).toBe(bug);
  });

  it('two copies of the facade in one process each throw their own classes', async () => {
    const { createRequire } = await import('node:module');
    const require = createRequire(import.meta.url);
    const path = require.resolve('../js/index.js');
    const first = require(path);
    delete require.cache[path];
    const second = require(path);
    expect(second.WorkspaceError).not.toBe(first.WorkspaceError);
    for (const copy of [first, second, first]) {
      const e = await new copy.MemoryWorkspace().readFile('missing.txt').catch((x) => x);
      expect(e).toBeInstanceOf(copy.WorkspaceError);
      expect(e.code).toBe('NotFound');
      expect(() => new copy.NodeWorkspace({ rot: '.' })).toThrow(copy.ConfigurationError);
    }
  });
});
