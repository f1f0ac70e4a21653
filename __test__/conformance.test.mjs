// corral/conformance: corral's own providers and an example JS provider (remote-style, like the
// specification's) pass it; a deliberately broken provider fails it with messages that say what to fix.
import { describe, it, test, expect, afterAll } from 'vitest';
import { NodeWorkspace, MemoryWorkspace, SandboxShell, NoopSandbox } from 'corral';
import { runConformance } from 'corral/conformance';
import { tempTree, jsProvider } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const fresh = () => { const t = tempTree({}); trees.push(t); return t.root; };

runConformance({ name: 'NodeWorkspace', makeProvider: () => new NodeWorkspace({ root: fresh() }), test, describe });
runConformance({ name: 'MemoryWorkspace (files)', makeProvider: () => ({ fs: new MemoryWorkspace() }), test, describe });
runConformance({ name: 'SandboxShell over NoopSandbox', makeProvider: () => ({ shell: new SandboxShell(new NoopSandbox(), { cwd: fresh() }) }), test, describe });
runConformance({ name: 'a JS provider over a directory', makeProvider: () => ({ fs: jsProvider(fresh()) }), test, describe });

/** Runs the kit with a collecting runner and returns { title: error message | null }. */
async function collect(makeProvider) {
  const tests = [];
  runConformance({ makeProvider, test: (name, fn) => tests.push([name, fn]) });
  const out = {};
  for (const [name, fn] of tests) {
    try { await fn(); out[name] = null; } catch (e) { out[name] = `${e.name}: ${e.message}`; }
  }
  return out;
}

describe('a broken provider', () => {
  it('fails the checks it breaks, with messages that say what to fix', async () => {
    const base = () => jsProvider(fresh());
    const results = await collect(() => {
      const p = base();
      return {
        fs: {
          ...p,
          readFile: async (path) => { try { return await p.readFile(path); } catch { return ''; } }, // swallows NotFound
          readdir: async (path) => (await p.readdir(path)).map((e) => ({ ...e, name: `${path}/${e.name}` })), // paths, not names
        },
        shell: { async exec(cmd) { return { stdout: '', stderr: '', exitCode: cmd.includes('exit 3') ? 3 : 0 }; } }, // ignores everything
      };
    });
    expect(results['FsProvider: readFile of a missing file throws WorkspaceError NotFound']).toMatch(/readFile\('missing\.txt'\) must throw a WorkspaceError with code 'NotFound', but it resolved to ""/);
    expect(results['FsProvider: readdir lists names (not paths) with their types']).toMatch(/must list \{ name: 'a\.txt', type: 'file' \}/);
    expect(results['ShellProvider: exec runs a command and resolves to its stdout, stderr and exit code']).toMatch(/stdout must be 'out\\n'/);
    expect(results['ShellProvider: exec stops a command at timeoutMs and says timedOut']).toMatch(/timedOut: true/);
    expect(results['FsProvider: writeFile creates the file and its missing parent directories, and readFile reads it back']).toBeNull();
  });
});

describe('a shell that runs its commands with cmd.exe', () => {
  it("is checked with cmd.exe's commands, its \\r\\n line ends read as \\n", async () => {
    const seen = [];
    // Answers as cmd.exe would: echo ends its lines with \r\n, more copies stdin.
    const shell = {
      shell: 'C:\\Windows\\System32\\cmd.exe',
      async exec(command, options = {}) {
        seen.push(command);
        if (command === 'echo out& echo err>&2& exit 3') return { stdout: 'out\r\n', stderr: 'err\r\n', exitCode: 3, timedOut: false };
        if (command === 'more') return { stdout: options.stdin.replaceAll('\n', '\r\n'), stderr: '', exitCode: 0, timedOut: false };
        if (command === 'echo hi') return { stdout: 'hi\r\n', stderr: '', exitCode: 0, timedOut: false };
        if (command.startsWith('ping ')) return { stdout: '', stderr: '', exitCode: null, timedOut: options.signal?.aborted !== true, aborted: options.signal?.aborted === true };
        return { stdout: '', stderr: `'${command}' is not recognized\r\n`, exitCode: 9009, timedOut: false };
      },
    };
    const results = await collect(() => ({ shell }));
    const shellResults = Object.entries(results).filter(([name]) => name.startsWith('ShellProvider: '));
    expect(shellResults.length).toBeGreaterThan(0);
    for (const [name, error] of shellResults) expect(error, name).toBeNull();
    expect(seen).toContain('echo out& echo err>&2& exit 3');
    expect(seen).toContain('more');
    expect(seen.some((c) => /sleep|cat\b|;/.test(c))).toBe(false);
  });
});
