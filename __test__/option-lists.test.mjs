// Each constructor's accepted keys and the declarations in index.d.ts cannot drift: every
// options object is given a key no one would write, the core's refusal lists the keys it takes
// ("Valid options: …"), and those are compared with the properties index.d.ts declares for it
// (read with the TypeScript compiler's own type checker).
import { describe, it, expect } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import {
  NodeWorkspace, MemoryWorkspace, createFsTools, createShellTool, LinuxSandbox, NoopSandbox, SubprocessSandbox, SandboxShell,
  WorkspaceCheckpoints, createCredentialBroker, PostgresToolStore, WorkspaceToolRegistry, createTemplateTool,
} from 'corral';
import { toAiSdkSandbox } from 'corral/ai-sdk';
import { corralSandboxClient, createEditor } from 'corral/openai-agents';

const DTS = {
  index: fileURLToPath(new URL('../index.d.ts', import.meta.url)),
  aiSdk: fileURLToPath(new URL('../js/ai-sdk.d.ts', import.meta.url)),
  openai: fileURLToPath(new URL('../js/openai-agents.d.ts', import.meta.url)),
};
const program = ts.createProgram(Object.values(DTS), { strict: true, noEmit: true, skipLibCheck: true, types: [] });
const checker = program.getTypeChecker();

/** The property names of a declaration: an interface or type alias, or a class constructor's (or a function's) parameter. */
function declared(file, name, param) {
  const source = program.getSourceFile(file);
  let found;
  ts.forEachChild(source, (n) => {
    if (n.name?.text === name) found = n;
  });
  if (!found) throw new Error(`${name} is not declared in ${file}`);
  let type;
  if (param === undefined) {
    type = checker.getDeclaredTypeOfSymbol(checker.getSymbolAtLocation(found.name));
  } else {
    const sig = ts.isClassDeclaration(found) ? found.members.find((m) => ts.isConstructorDeclaration(m)) : found;
    type = checker.getNonNullableType(checker.getTypeAtLocation(sig.parameters[param]));
  }
  return checker.getPropertiesOfType(type).map((p) => p.name).sort();
}

const PROBE = 'zzzzzzzzzzzzzzzzzzzz';
/** The keys the core takes, as its refusal of an unknown key lists them. */
async function accepted(make) {
  try {
    await make({ [PROBE]: 1 });
  } catch (e) {
    const m = /Valid options: (.*)\.$/.exec(e.message);
    if (m) return m[1].split(', ').sort();
    throw e;
  }
  throw new Error('an unknown key was accepted');
}

const dir = mkdtempSync(join(tmpdir(), 'corral-options-'));
const ws = new NodeWorkspace({ root: dir });
const without = (keys, ...drop) => keys.filter((k) => !drop.includes(k));

describe('option lists and declarations are one list', () => {
  const cases = [
    ['NodeWorkspace', (o) => new NodeWorkspace({ root: dir, ...o }), [DTS.index, 'NodeWorkspaceOptions']],
    ['MemoryWorkspace', (o) => new MemoryWorkspace(o), [DTS.index, 'MemoryWorkspace', 0]],
    ['createFsTools', (o) => createFsTools(ws, o), [DTS.index, 'FsToolsOptions']],
    ['createShellTool', (o) => createShellTool(ws, o), [DTS.index, 'ShellToolOptions']],
    ['LinuxSandbox', (o) => new LinuxSandbox(o), [DTS.index, 'LinuxSandboxOptions']],
    ['SubprocessSandbox', (o) => new SubprocessSandbox({ image: 'x', ...o }), [DTS.index, 'SubprocessSandboxOptions']],
    // (NoopSandbox where LinuxSandbox cannot be made: SandboxShell reads its keys the same way.)
    ['SandboxShell', (o) => new SandboxShell(process.platform === 'linux' ? new LinuxSandbox({ allowWeaker: true }) : new NoopSandbox(), { cwd: dir, ...o }), [DTS.index, 'SandboxShell', 1]],
    ['WorkspaceCheckpoints', (o) => new WorkspaceCheckpoints(ws, o), [DTS.index, 'WorkspaceCheckpoints', 1]],
    ['createCredentialBroker', (o) => createCredentialBroker(o), [DTS.index, 'CredentialBrokerOptions']],
    ['PostgresToolStore', (o) => new PostgresToolStore({ connectionString: 'postgres://u@127.0.0.1/x', ...o }), [DTS.index, 'PostgresToolStoreOptions']],
    ['WorkspaceToolRegistry', (o) => new WorkspaceToolRegistry(o), [DTS.index, 'WorkspaceToolRegistry', 0]],
    ['createTemplateTool', (o) => createTemplateTool({ name: 't', handler_kind: 'shell_template', handler_payload: { command: 'true' } }, { shell: ws, ...o }), [DTS.index, 'TemplateToolOptions']],
    ['files of an adapter', (o) => toAiSdkSandbox(ws, { files: o }), [DTS.index, 'AdapterFilesOptions']],
    ['toAiSdkSandbox', (o) => toAiSdkSandbox(ws, o), [DTS.aiSdk, 'AiSdkSandboxOptions']],
    ['corralSandboxClient', (o) => corralSandboxClient({ fs: ws, ...o }), [DTS.openai, 'CorralSandboxClientOptions']],
    ['createEditor', (o) => createEditor(ws, o), [DTS.openai, 'createEditor', 1]],
  ];
  for (const [name, make, [file, decl, param]] of cases) {
    // LinuxSandbox is a ConfigurationError before it reads an option on any other system.
    it.skipIf(name === 'LinuxSandbox' && process.platform !== 'linux')(`${name}: the keys the core takes are the keys its declaration has`, async () => {
      const core = await accepted(make);
      expect(core.length).toBeGreaterThan(0);
      expect(core).toEqual(without(declared(file, decl, param), PROBE));
    });
  }
});
