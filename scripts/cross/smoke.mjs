// The smoke test of a built addon, run by a Node of the target's platform (an arm64 Node under
// emulation in CI: scripts/cross/smoke-arm64.sh; natively on the release workflow's macOS and
// Windows runners): the file tools, grep and the shell, through the public API.
// It never starts another Node (an emulated Node cannot fork one without binfmt_misc); the
// commands the shell runs are the host's own programs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const { NodeWorkspace, createFsTools, createShellTool, WorkspaceError } = require('../../js/index.js');
const { targetName } = require('../../js/load-binding.js');

const expected = process.env.CORRAL_SMOKE_ARCH;
const root = realpathSync(mkdtempSync(join(tmpdir(), 'corral-smoke-')));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));

test('the addon of this architecture is the one loaded', () => {
  if (expected) assert.equal(process.arch, expected);
  const libc = process.report.getReport().header.glibcVersionRuntime ? 'glibc' : 'musl';
  const file = `corral.${targetName({ platform: process.platform, arch: process.arch, libc })}.node`;
  const loaded = process.report.getReport().sharedObjects.filter((p) => p.endsWith('.node'));
  assert.ok(loaded.some((p) => p.endsWith(file)), `${file} among ${loaded.join(', ')}`);
});

test('the file tools read, write, edit, list and glob inside the root', async () => {
  writeFileSync(join(root, 'a.txt'), 'alpha\nbeta\n');
  const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root })).map((t) => [t.name, t]));
  assert.equal(await tools.read_file.execute({ path: 'a.txt' }), ' 1\talpha\n 2\tbeta');
  await tools.write_file.execute({ path: 'src/b.ts', content: 'export const b = 1;\n' });
  await tools.edit_file.execute({ path: 'src/b.ts', old_string: '= 1', new_string: '= 2' });
  assert.equal(readFileSync(join(root, 'src/b.ts'), 'utf8'), 'export const b = 2;\n');
  assert.match(await tools.list_dir.execute({ path: '.' }), /src\//);
  assert.match(await tools.glob.execute({ pattern: '**/*.ts' }), /src\/b\.ts/);
});

test('grep finds a pattern with its line number', async () => {
  const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root })).map((t) => [t.name, t]));
  assert.equal(await tools.grep.execute({ pattern: 'b+e' }), 'a.txt:2: beta');
});

test('a path outside the root is refused with a WorkspaceError', async () => {
  const [read] = createFsTools(new NodeWorkspace({ root }));
  await assert.rejects(read.execute({ path: '../../etc/passwd' }), (e) => e instanceof WorkspaceError && e.code === 'OutsideWorkspace');
});

test('the shell runs a command in the root and reports its exit code', async () => {
  const shell = createShellTool(new NodeWorkspace({ root }), { needsApproval: false });
  // sh on unix, cmd.exe on Windows (the release workflow runs this script there too).
  const command = process.platform === 'win32' ? 'type a.txt & exit 3' : 'cat a.txt; exit 3';
  assert.deepEqual(await shell.execute({ command }), { exitCode: 3, stdout: 'alpha\nbeta\n', stderr: '' });
});
