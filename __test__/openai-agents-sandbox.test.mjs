// corral/openai-agents as the SDK's own sandbox and patch editor: a SandboxAgent run by the real
// Runner over corralSandboxClient with the SDK's ScriptedModel (exec_command, write_stdin,
// apply_patch, view_image, then the session's end), the session's methods as the SDK calls them,
// and createEditor under applyPatchTool in a plain Agent.
import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync, writeFileSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, run, applyPatchTool, setTracingDisabled } from '@openai/agents';
import { SandboxAgent, Manifest } from '@openai/agents/sandbox';
import { ScriptedModel, functionCall, assistantMessage } from '@openai/agents/testing';
import { NodeWorkspace, MemoryWorkspace } from 'corral';
import { corralSandboxClient, createEditor } from 'corral/openai-agents';
import { treesForFile, gone, linksWork } from './helpers.mjs';

setTracingDisabled(true);
// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them,
// node doing what sh's read, $$, sleep, seq and head do.
const win = process.platform === 'win32';
/** `node -e <script>` as the shell reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;
/** What the shell's echo ends a line with. */
const EOL = win ? '\r\n' : '\n';
/**
 * How long to give a command to print its first lines: there it is node, which under load takes a
 * second or more to start where sh's echo prints at once.
 */
const startup = (ms) => (win ? Math.max(ms, 3000) : ms);
/** Prints its pid, then lives 60 s. */
const PID_SLEEP = win ? nodeE('console.log(process.pid); setTimeout(() => {}, 60000)') : 'echo $$; exec sleep 60';
const tree = treesForFile();

const patchCall = (callId, operation) => ({ type: 'apply_patch_call', callId, status: 'completed', operation });
/** What the runner sent back for each tool call, by call id. */
function outputs(model) {
  const out = {};
  for (const c of model.calls) {
    for (const item of c.request.input) {
      if (item.type === 'function_call_result') out[item.callId] = item.output.type === 'text' ? item.output.text : item.output;
      if (item.type === 'apply_patch_call_output') out[item.callId] = { status: item.status, output: item.output };
    }
  }
  return out;
}
const PNG = Buffer.from('89504e470d0a1a0a0000000d494844520000000200000002080600000000000000', 'hex');

describe('corralSandboxClient under a SandboxAgent', () => {
  it('serves exec_command, write_stdin, apply_patch and view_image, refuses a path and a command, and stops what still runs', async () => {
    const t = tree({ 'a.txt': 'alpha\nbeta\n' });
    writeFileSync(join(t.root, 'pic.png'), PNG);
    const ws = new NodeWorkspace({ root: t.root });
    const model = new ScriptedModel([
      [
        functionCall('exec_command', { cmd: win ? 'type a.txt' : 'cat a.txt' }, { callId: 'cat' }),
        functionCall('exec_command', { cmd: 'rm a.txt' }, { callId: 'rm' }),
        functionCall('exec_command', {
          cmd: win
            ? nodeE("console.log('ready'); const rl = require('readline').createInterface({ input: process.stdin }); rl.once('line', (l) => { console.log('got ' + l); rl.close(); process.stdin.destroy(); })")
            : 'echo ready; read x; echo "got $x"',
          yield_time_ms: 300,
        }, { callId: 'long' }),
      ],
      [
        // Calls of one turn run at once: this one starts after 'long' has its session id (1).
        functionCall('exec_command', { cmd: PID_SLEEP, yield_time_ms: startup(300) }, { callId: 'left' }),
        functionCall('write_stdin', { session_id: 1, chars: 'hello\n', yield_time_ms: 5000 }, { callId: 'stdin' }),
        patchCall('edit', { type: 'update_file', path: '/workspace/a.txt', diff: '@@\n alpha\n-beta\n+BETA\n' }),
        patchCall('evil', { type: 'create_file', path: '/etc/corral-evil', diff: '+x\n' }),
        patchCall('miss', { type: 'update_file', path: 'a.txt', diff: '@@\n-nope\n+x\n' }),
        functionCall('view_image', { path: 'pic.png' }, { callId: 'img' }),
      ],
      [assistantMessage('done')],
    ]);
    const agent = new SandboxAgent({ name: 'coder', model, instructions: 'Work in the sandbox.' });
    const result = await run(agent, 'go', { sandbox: { client: corralSandboxClient({ fs: ws, deny: ['rm'] }) } });
    expect(result.finalOutput).toBe('done');
    const out = outputs(model);
    expect(out.cat).toMatch(/^Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\nProcess exited with code 0\nOutput:\nalpha\nbeta\n$/);
    expect(out.rm).toMatch(/Process exited with code 1\nOutput:\nexec_command failed: .*deny pattern 'rm'/);
    // What 'long' wrote comes once, in its first answer or (on a slow machine) in the next.
    expect(out.long).toMatch(/Process running with session ID 1\nOutput:\n(ready\n)?$/);
    expect(out.stdin).toMatch(/Process exited with code 0\nOutput:\n(ready\n)?got hello\n$/);
    expect(`${out.long}${out.stdin}`.match(/ready/g)).toHaveLength(1);
    expect(out.edit).toEqual({ status: 'completed', output: 'Updated /workspace/a.txt' });
    expect(out.evil).toMatchObject({ status: 'failed', output: expect.stringContaining('outside the workspace') });
    expect(out.miss).toMatchObject({ status: 'failed', output: expect.stringContaining('Invalid Context') });
    expect(JSON.stringify(out.img)).toContain('image');
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('alpha\nBETA\n');
    expect(existsSync('/etc/corral-evil')).toBe(false);
    // The command still running when the run ended was stopped by the session's end.
    const pid = Number(out.left.match(/Output:\n(\d+)/)[1]);
    expect(await gone(pid)).toBe(true);
  });

  it('makes the manifest entries in the workspace and reads paths under its root', async () => {
    const t = tree({});
    const hostFile = join(t.dir, 'seed.txt');
    writeFileSync(hostFile, 'seed');
    const client = corralSandboxClient({ fs: new NodeWorkspace({ root: t.root }) });
    expect(client.backendId).toBe('corral');
    const manifest = new Manifest({
      root: '/repo',
      entries: { src: { type: 'dir', children: { 'a.txt': { type: 'file', content: 'A' } } }, 'bin.dat': { type: 'file', content: new Uint8Array([0xff, 0]) }, 'seed.txt': { type: 'local_file', src: hostFile } },
    });
    const session = await client.create({ manifest });
    expect(session.state.manifest.root).toBe('/repo');
    expect(readFileSync(join(t.root, 'src/a.txt'), 'utf8')).toBe('A');
    expect([...readFileSync(join(t.root, 'bin.dat'))]).toEqual([0xff, 0]);
    expect(readFileSync(join(t.root, 'seed.txt'), 'utf8')).toBe('seed');
    expect(Buffer.from(await session.readFile({ path: '/repo/src/a.txt' })).toString()).toBe('A');
    expect([...await session.readFile({ path: 'bin.dat', maxBytes: 1 })]).toEqual([0xff]);
    expect((await session.listDir({ path: '/repo' })).sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'bin.dat', path: 'bin.dat', type: 'file' }, { name: 'seed.txt', path: 'seed.txt', type: 'file' }, { name: 'src', path: 'src', type: 'dir' },
    ]);
    expect(await session.listDir({ path: 'src' })).toEqual([{ name: 'a.txt', path: 'src/a.txt', type: 'file' }]);
    await expect(session.readFile({ path: '/workspace/src/a.txt' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(session.listDir({ path: '/etc' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(await session.pathExists('src/a.txt')).toBe(true);
    expect(await session.directoryExists('src/a.txt')).toBe(false);
    await session.close();
    await expect(client.create({ manifest: new Manifest({ entries: { 'first.txt': { type: 'file', content: 'x' }, r: { type: 'git_repo', repo: 'a/b' } } }) })).rejects.toMatchObject({ name: 'ConfigurationError' });
    // Refused before anything was written.
    expect(existsSync(join(t.root, 'first.txt'))).toBe(false);
  });

  it('runs long commands by session id: only new output, Ctrl-C, an unknown id, and output cut to maxOutputTokens', async () => {
    const t = tree({ sub: '' });
    mkdirSync(join(t.root, 'dir'));
    const session = await corralSandboxClient({ fs: new NodeWorkspace({ root: t.root }) }).create();
    expect(session.supportsPty()).toBe(true);
    const first = await session.exec({
      cmd: win
        ? nodeE("console.log('one'); require('readline').createInterface({ input: process.stdin }).once('line', (l) => console.log('two ' + l)); setTimeout(() => {}, 60000)")
        : 'echo one; read x; echo "two $x"; exec sleep 60',
      yieldTimeMs: startup(200),
    });
    expect(first).toMatchObject({ sessionId: 1 });
    expect(first.exitCode).toBeUndefined();
    expect(first.output).toBe(first.stdout);
    const next = await session.writeStdin({ sessionId: 1, chars: 'x\n', yieldTimeMs: startup(1000) });
    expect(next).toMatch(/Process running with session ID 1\nOutput:\n/);
    // Each answer has only what the one before did not: together, everything once.
    expect(first.output + next.split('Output:\n')[1]).toBe('one\ntwo x\n');
    expect(await session.writeStdin({ sessionId: 1, chars: '\u0003', yieldTimeMs: 2000 })).toMatch(/Process exited with code 130\nOutput:\n$/);
    expect(await session.writeStdin({ sessionId: 1 })).toMatch(/Process exited with code 1\nOutput:\nwrite_stdin failed: session not found: 1$/);
    const seq = win ? nodeE('for (let i = 1; i <= 2000; i++) console.log(i)') : 'seq 1 2000';
    const cut = await session.exec({ cmd: seq, maxOutputTokens: 10 });
    expect(cut.exitCode).toBe(0);
    expect(cut.originalTokenCount).toBeGreaterThan(10);
    expect(cut.output).toMatch(/^1\n2\n.*tokens truncated.*\n2000\n$/s);
    expect(await session.execCommand({ cmd: seq, maxOutputTokens: 10 })).toMatch(/\nOriginal token count: \d+\nOutput:\n/);
    // One answer holds the last MiB of the output, as the SDK's own sandbox does.
    const big = await session.exec({ cmd: win ? nodeE("process.stdout.write('a'.repeat(3000000) + '\\nend\\n')") : 'head -c 3000000 /dev/zero | tr "\\0" a; echo; echo end' });
    expect(big.output).toMatch(/^\[\.\.\.\d+ bytes truncated from process output\.\.\.\]\na+\nend\n$/);
    expect(big.output.length).toBeLessThan(1024 * 1024 + 100);
    const pwd = win ? 'cd' : 'pwd';
    expect(await session.exec({ cmd: pwd, workdir: '/workspace/dir' })).toMatchObject({ exitCode: 0, stdout: `${join(t.root, 'dir')}${EOL}` });
    await expect(session.exec({ cmd: pwd, workdir: '/etc' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(await session.execCommand({ cmd: pwd, workdir: '/etc' })).toMatch(/exec_command failed: Path is outside the workspace/);
    await session.stop();
    await session.shutdown();
    await session.delete();
  });

  it('runs commands with the manifest environment the runner gives the session', async () => {
    const t = tree({});
    const model = new ScriptedModel([[functionCall('exec_command', { cmd: win ? 'echo %GREETING%' : 'echo "$GREETING"' }, { callId: 'env' })], [assistantMessage('ok')]]);
    const agent = new SandboxAgent({ name: 'env', model, defaultManifest: new Manifest({ environment: { GREETING: 'hi there' } }) });
    await run(agent, 'go', { sandbox: { client: corralSandboxClient({ fs: new NodeWorkspace({ root: t.root }) }) } });
    expect(outputs(model).env).toMatch(new RegExp(`Output:\nhi there${EOL}$`));
  });

  it("keeps what a command wrote before Ctrl-C, applies the manifest's environment, and answers a failed read as text", async () => {
    const t = tree({});
    const session = await corralSandboxClient({ fs: new NodeWorkspace({ root: t.root }) }).create({ manifest: new Manifest({ environment: { WHO: 'manifest' } }) });
    const first = await session.exec({ cmd: win ? nodeE("console.log('by ' + process.env.WHO); setTimeout(() => {}, 60000)") : 'echo "by $WHO"; exec sleep 60', yieldTimeMs: 300 });
    expect(first.sessionId).toBe(1);
    const second = await session.exec({ cmd: win ? nodeE("console.log('line1'); console.log('line2'); setTimeout(() => {}, 60000)") : 'echo line1; echo line2; exec sleep 60', yieldTimeMs: 0 });
    await new Promise((r) => setTimeout(r, startup(300)));
    const stopped = await session.writeStdin({ sessionId: second.sessionId, chars: '\u0003', yieldTimeMs: 2000 });
    expect(stopped).toMatch(/Process exited with code 130\nOutput:\n/);
    expect(`${second.output}${stopped.split('Output:\n')[1]}`).toBe('line1\nline2\n');
    expect(first.output + (await session.writeStdin({ sessionId: 1, yieldTimeMs: 100 })).split('Output:\n')[1]).toBe('by manifest\n');
    await session.close();
    expect(await session.writeStdin({ sessionId: 1 })).toMatch(/write_stdin failed/);
  });

  it('has no write_stdin where the shell cannot pass input, and viewImage says what is wrong', async () => {
    const ws = new MemoryWorkspace({ files: { 'a.txt': 'text', 'big/x': '' }, exec: () => ({ stdout: 'ran\n' }) });
    const session = await corralSandboxClient({ fs: ws }).create();
    expect(session.supportsPty()).toBe(false);
    await expect(session.viewImage({ path: 'nope.png' })).rejects.toThrow(/not found/);
    await expect(session.viewImage({ path: 'big' })).rejects.toThrow(/not a file/);
    await expect(session.viewImage({ path: 'a.txt' })).rejects.toThrow(/not a supported image/);
    await ws.writeFileBytes('p.png', PNG);
    expect(await session.viewImage({ path: '/workspace/p.png' })).toMatchObject({ type: 'image', image: { mediaType: 'image/png' } });
    await session.close();
  });
});

describe('createEditor under applyPatchTool', () => {
  it('applies V4A diffs as the SDK does, all or nothing, confined to the workspace', async () => {
    const t = tree({ 'src/app.txt': 'alpha\r\nbeta\r\ngamma\r\n', 'old.txt': 'x\ny\n', 'gone.txt': 'bye\n', 'keep.txt': 'one\ntwo\n' });
    const editor = createEditor(new NodeWorkspace({ root: t.root }));
    const model = new ScriptedModel([
      [
        patchCall('crlf', { type: 'update_file', path: 'src/app.txt', diff: '@@\n alpha\n-beta\n+BETA\n gamma\n' }),
        patchCall('new', { type: 'create_file', path: 'docs/README.md', diff: '+# Title\n+body\n+\n' }),
        patchCall('move', { type: 'update_file', path: 'old.txt', moveTo: 'moved/new.txt', diff: '@@\n x\n-y\n+Y\n' }),
        patchCall('del', { type: 'delete_file', path: 'gone.txt' }),
        patchCall('half', { type: 'update_file', path: 'keep.txt', diff: '@@\n-one\n+ONE\n@@\n-three\n+THREE\n' }),
        patchCall('exists', { type: 'create_file', path: 'keep.txt', diff: '+new\n' }),
        patchCall('out', { type: 'update_file', path: '../outside.txt', diff: '@@\n-a\n+b\n' }),
      ],
      [assistantMessage('patched')],
    ]);
    const result = await run(new Agent({ name: 'patcher', model, tools: [applyPatchTool({ editor })] }), 'patch');
    expect(result.finalOutput).toBe('patched');
    const out = outputs(model);
    expect(out.crlf.status).toBe('completed');
    expect(readFileSync(join(t.root, 'src/app.txt'), 'utf8')).toBe('alpha\r\nBETA\r\ngamma\r\n');
    expect(readFileSync(join(t.root, 'docs/README.md'), 'utf8')).toBe('# Title\nbody\n');
    expect(existsSync(join(t.root, 'old.txt'))).toBe(false);
    expect(readFileSync(join(t.root, 'moved/new.txt'), 'utf8')).toBe('x\nY\n');
    expect(existsSync(join(t.root, 'gone.txt'))).toBe(false);
    // One hunk of two does not match: nothing of the operation is written.
    expect(out.half).toMatchObject({ status: 'failed', output: expect.stringContaining('Invalid Context') });
    expect(readFileSync(join(t.root, 'keep.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(out.exists).toMatchObject({ status: 'failed', output: expect.stringContaining('already exists') });
    expect(out.out).toMatchObject({ status: 'failed', output: expect.stringContaining('outside the workspace') });
  });

  it.skipIf(!linksWork)('refuses to patch a file that is not UTF-8 and deletes a link itself', async () => {
    const t = tree({ 'keep.txt': 'k\n' });
    writeFileSync(join(t.root, 'bin.txt'), Buffer.from([0xff, 0xfe, 0x0a, 0x61, 0x0a]));
    symlinkSync(join(t.root, 'keep.txt'), join(t.root, 'link.txt'));
    const editor = createEditor(new NodeWorkspace({ root: t.root }));
    await expect(editor.updateFile({ type: 'update_file', path: 'bin.txt', diff: '@@\n-a\n+b\n' })).rejects.toMatchObject({ code: 'NotUtf8' });
    expect([...readFileSync(join(t.root, 'bin.txt'))]).toEqual([0xff, 0xfe, 0x0a, 0x61, 0x0a]);
    await editor.deleteFile({ type: 'delete_file', path: 'link.txt' });
    expect(existsSync(join(t.root, 'link.txt'))).toBe(false);
    expect(readFileSync(join(t.root, 'keep.txt'), 'utf8')).toBe('k\n');
  });

  it('throws WorkspaceErrors with codes a caller can tell apart', async () => {
    const t = tree({ 'a.txt': 'a\n' });
    const editor = createEditor(new NodeWorkspace({ root: t.root }));
    await expect(editor.updateFile({ type: 'update_file', path: 'a.txt', diff: '@@\n-zzz\n+b\n' })).rejects.toMatchObject({ code: 'PatchMismatch' });
    await expect(editor.updateFile({ type: 'update_file', path: 'a.txt', diff: '@@\n?bad\n' })).rejects.toMatchObject({ code: 'InvalidPatch' });
    await expect(editor.updateFile({ type: 'update_file', path: 'nope.txt', diff: '@@\n-a\n+b\n' })).rejects.toMatchObject({ code: 'NotFound' });
    await expect(editor.deleteFile({ type: 'delete_file', path: '/etc/passwd' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(readFileSync(join(t.root, 'a.txt'), 'utf8')).toBe('a\n');
    expect(() => createEditor({})).toThrow(expect.objectContaining({ name: 'ConfigurationError' }));
  });
});
