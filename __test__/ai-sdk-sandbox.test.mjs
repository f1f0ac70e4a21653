// corral/ai-sdk's toAiSdkSandbox as AI SDK 7's own sandbox: generateText({ experimental_sandbox })
// with the SDK's MockLanguageModelV3 scripted to call tools that use the sandbox as the SDK hands
// it to them, then each method of the session as the SDK's type describes it.
import { describe, it, expect } from 'vitest';
import { existsSync, readFileSync, writeFileSync, symlinkSync, mkdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import * as ai from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { NodeWorkspace, MemoryWorkspace } from 'corral';
import { toAiSdkSandbox } from 'corral/ai-sdk';
import { treesForFile, scriptedAiModel, gone, linksWork } from './helpers.mjs';

// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them,
// node doing what sh's read, sleep, seq, yes and pipes of bytes do.
const win = process.platform === 'win32';
/** `node -e <script>` as the shell reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;
/** What the shell's echo ends a line with. */
const EOL = win ? '\r\n' : '\n';
/** A command that makes an empty file. */
const touch = (name) => (win ? `copy nul ${name}` : `touch ${name}`);
/** The command that prints the working directory. */
const PWD = win ? 'cd' : 'pwd';

const tree = treesForFile();
const scripted = (steps, seen) => scriptedAiModel(MockLanguageModelV3, steps, seen);

// Tools written against the SDK's sandbox, as an app or a library would write them: each uses
// the sandbox the SDK passes in the execute options.
const schema = (properties) => ai.jsonSchema({ type: 'object', properties, required: Object.keys(properties) });
const sandboxTools = {
  read: ai.tool({
    inputSchema: schema({ path: { type: 'string' } }),
    execute: async ({ path }, { experimental_sandbox: sb }) => (await sb.readTextFile({ path })) ?? 'missing',
  }),
  write: ai.tool({
    inputSchema: schema({ path: { type: 'string' }, content: { type: 'string' } }),
    execute: async ({ path, content }, { experimental_sandbox: sb }) => {
      await sb.writeTextFile({ path, content });
      return 'written';
    },
  }),
  run: ai.tool({
    inputSchema: schema({ command: { type: 'string' } }),
    execute: async ({ command }, { experimental_sandbox: sb, abortSignal }) => sb.run({ command, abortSignal }),
  }),
};

const toolParts = (prompt) => prompt.filter((m) => m.role === 'tool').flatMap((m) => m.content);

describe('toAiSdkSandbox in generateText', () => {
  it('serves the tools of a multi-step run: a write, a read, a command, then a refused path and a refused command', async () => {
    const t = tree({ 'src/math.js': 'export const add = (a, b) => a - b;\n' });
    const sandbox = toAiSdkSandbox(new NodeWorkspace({ root: t.root }), { deny: ['rm'] });
    const seen = [];
    const model = scripted([
      [['write', { path: '/workspace/src/math.js', content: 'export const add = (a, b) => a + b;\n' }]],
      [['read', { path: 'src/math.js' }], ['run', { command: win ? `type src\\math.js& ${nodeE("process.stderr.write('oops\\n'); process.exitCode = 2")}` : 'cat src/math.js; echo oops >&2; exit 2' }]],
      [['read', { path: '/etc/passwd' }], ['read', { path: '../outside.txt' }], ['run', { command: 'rm -rf src' }]],
    ], seen);
    const result = await ai.generateText({ model, tools: sandboxTools, experimental_sandbox: sandbox, prompt: 'fix add', stopWhen: ai.stepCountIs(10) });
    expect(result.text).toBe('done');
    const parts = toolParts(seen.at(-1));
    expect(parts.map((p) => p.output.type)).toEqual(['text', 'text', 'json', 'error-text', 'error-text', 'error-text']);
    expect(parts[1].output.value).toBe('export const add = (a, b) => a + b;\n');
    expect(parts[2].output.value).toEqual({ exitCode: 2, stdout: 'export const add = (a, b) => a + b;\n', stderr: 'oops\n' });
    expect(parts[3].output.value).toMatch(/outside the workspace.*only paths under \/workspace/);
    expect(parts[4].output.value).toMatch(/outside the workspace/);
    expect(parts[5].output.value).toMatch(/deny pattern 'rm'/);
    expect(readFileSync(join(t.root, 'src/math.js'), 'utf8')).toContain('a + b');
    expect(existsSync(join(t.root, 'src'))).toBe(true);
  });
});

describe('toAiSdkSandbox as an Experimental_SandboxSession', () => {
  it('names the root in its description and no host path', () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    expect(sb.description).toContain('/workspace');
    expect(sb.description).not.toContain(t.root);
    expect(toAiSdkSandbox(new NodeWorkspace({ root: t.root }), { root: '/repo' }).description).toContain('/repo');
    expect(toAiSdkSandbox(new NodeWorkspace({ root: t.root }), { description: 'mine' }).description).toBe('mine');
  });

  it('refuses a bad root or a misspelled option when it is made', () => {
    const ws = new NodeWorkspace({ root: tree({}).root });
    expect(() => toAiSdkSandbox(ws, { root: 'workspace' })).toThrow(expect.objectContaining({ name: 'ConfigurationError' }));
    expect(() => toAiSdkSandbox(ws, { alow: ['ls'] })).toThrow(/did you mean allow/);
    expect(() => toAiSdkSandbox({})).toThrow(expect.objectContaining({ name: 'ConfigurationError' }));
  });

  it('reads files as streams, bytes and line ranges, and a missing file as null', async () => {
    const t = tree({ 'a.txt': 'one\ntwo\r\nthree' });
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    expect(await new Response(await sb.readFile({ path: 'a.txt' })).text()).toBe('one\ntwo\r\nthree');
    expect(Buffer.from(await sb.readBinaryFile({ path: '/workspace/a.txt' })).toString()).toBe('one\ntwo\r\nthree');
    expect(await sb.readTextFile({ path: 'a.txt', startLine: 2 })).toBe('two\r\nthree');
    expect(await sb.readTextFile({ path: 'a.txt', startLine: 1, endLine: 2 })).toBe('one\ntwo\r\n');
    expect(await sb.readTextFile({ path: 'a.txt', startLine: 3, endLine: 99 })).toBe('three');
    expect(await sb.readTextFile({ path: 'a.txt', startLine: 9 })).toBe('');
    await expect(sb.readTextFile({ path: 'a.txt', startLine: 0 })).rejects.toMatchObject({ code: 'InvalidArguments' });
    for (const read of ['readFile', 'readBinaryFile', 'readTextFile']) expect(await sb[read]({ path: 'nope/x' })).toBeNull();
    expect(await sb.stat({ path: 'nope' })).toBeNull();
    expect(await sb.listDirectory({ path: 'nope' })).toBeNull();
    expect(await sb.deleteFile({ path: 'nope' })).toBe(false);
  });

  it('writes streams, bytes that are not UTF-8, and text, making parent directories', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x80]);
    await sb.writeFile({ path: 'deep/a/s.bin', content: new Blob([bytes, bytes]).stream() });
    expect([...readFileSync(join(t.root, 'deep/a/s.bin'))]).toEqual([...bytes, ...bytes]);
    await sb.writeBinaryFile({ path: '/workspace/b/x.bin', content: bytes });
    expect([...readFileSync(join(t.root, 'b/x.bin'))]).toEqual([...bytes]);
    await sb.writeTextFile({ path: 'c/t.txt', content: 'héllo' });
    expect(readFileSync(join(t.root, 'c/t.txt'), 'utf8')).toBe('héllo');
    await sb.writeTextFile({ path: 'c/l.txt', content: 'é', encoding: 'latin1' });
    expect([...readFileSync(join(t.root, 'c/l.txt'))]).toEqual([0xe9]);
    await expect(sb.writeTextFile({ path: 'c', content: 'x' })).rejects.toMatchObject({ code: 'IsADirectory' });
    await expect(sb.writeBinaryFile({ path: '/tmp/x', content: bytes })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(existsSync('/tmp/x') && readFileSync('/tmp/x').equals(Buffer.from(bytes))).toBe(false);
  });

  it('writes bytes that are not UTF-8 through a MemoryWorkspace too', async () => {
    const ws = new MemoryWorkspace();
    const sb = toAiSdkSandbox(ws);
    await sb.writeBinaryFile({ path: 'x.bin', content: new Uint8Array([0xff, 0x00]) });
    expect([...await sb.readBinaryFile({ path: 'x.bin' })]).toEqual([0xff, 0x00]);
  });

  it.skipIf(!linksWork)('stats through links, lists without following them, and deletes a link itself', async () => {
    const t = tree({ 'dir/f.txt': 'abc' });
    symlinkSync(join(t.root, 'dir'), join(t.root, 'link'));
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    expect(await sb.stat({ path: 'dir/f.txt' })).toEqual({ type: 'file', size: 3 });
    expect((await sb.stat({ path: 'link' })).type).toBe('directory');
    const entries = await sb.listDirectory({ path: '/workspace' });
    expect(entries.sort((a, b) => a.name.localeCompare(b.name))).toEqual([{ name: 'dir', type: 'directory' }, { name: 'link', type: 'symlink' }]);
    await expect(sb.listDirectory({ path: 'dir/f.txt' })).rejects.toMatchObject({ name: 'WorkspaceError' });
    await expect(sb.deleteFile({ path: 'dir' })).rejects.toMatchObject({ code: 'IsADirectory' });
    expect(await sb.deleteFile({ path: 'link' })).toBe(true);
    expect(() => readlinkSync(join(t.root, 'link'))).toThrow();
    expect(readFileSync(join(t.root, 'dir/f.txt'), 'utf8')).toBe('abc');
    expect(await sb.deleteFile({ path: 'dir/f.txt' })).toBe(true);
    expect(existsSync(join(t.root, 'dir/f.txt'))).toBe(false);
  });

  it('runs commands in a working directory with variables, and refuses one the rules refuse before it runs', async () => {
    const t = tree({ 'sub/keep.txt': 'x' });
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }), { allow: ['echo', PWD, { command: win ? 'cmd' : 'sh', args: () => true }] });
    const r = await sb.run({ command: PWD, workingDirectory: '/workspace/sub' });
    expect(r).toEqual({ exitCode: 0, stdout: `${join(t.root, 'sub')}${EOL}`, stderr: '' });
    // (The rules refuse cmd.exe's %, which expands anywhere: set shows the variable there.)
    expect(await sb.run({ command: win ? 'cmd /c set GREETING' : "sh -c 'echo $GREETING'", env: { GREETING: 'hi' } })).toMatchObject({ stdout: win ? `GREETING=hi${EOL}` : 'hi\n' });
    await expect(sb.run({ command: touch('made') })).rejects.toMatchObject({ code: 'CommandRefused' });
    await expect(sb.spawn({ command: touch('made') })).rejects.toMatchObject({ code: 'CommandRefused' });
    expect(existsSync(join(t.root, 'made'))).toBe(false);
    await expect(sb.run({ command: PWD, workingDirectory: '/etc' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(sb.run({ command: PWD, workingDirectory: 'nope' })).rejects.toMatchObject({ code: 'NotFound' });
  });

  it('spawns a process whose output streams while it runs, with input, and a kill that ends its whole group', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const p = await sb.spawn({
      command: win
        ? nodeE("process.stdout.write('ready\\n'); let d = ''; process.stdin.on('data', (c) => d += c).on('end', () => { console.log('got ' + d.split('\\n')[0]); console.error('bye'); })")
        : 'echo ready; read line; echo "got $line"; echo bye >&2',
      stdin: true,
    });
    const reader = p.stdout.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('ready\n');
    const w = p.stdin.getWriter();
    await w.write(new TextEncoder().encode('abc\n'));
    await w.close();
    let rest = '';
    for (let c = await reader.read(); !c.done; c = await reader.read()) rest += new TextDecoder().decode(c.value);
    expect(rest).toBe('got abc\n');
    expect(await new Response(p.stderr).text()).toBe('bye\n');
    expect(await p.wait()).toEqual({ exitCode: 0 });

    // A kill ends the process and what it started.
    const q = await sb.spawn({
      command: win
        ? nodeE("console.log(require('child_process').spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']).pid)")
        : '(sleep 60; touch late) & echo $!; wait',
    });
    const child = Number((new TextDecoder().decode((await q.stdout.getReader().read()).value)).trim());
    await q.kill();
    await q.kill();
    // 128 + the signal, as a shell says; Windows has no signals, and a killed command fails there.
    expect((await q.wait()).exitCode).toBeGreaterThan(win ? 0 : 128);
    expect(await gone(child)).toBe(true);
  });

  it('aborts a run and a spawned process: wait() rejects with the reason and the process is gone', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const ac = new AbortController();
    const started = Date.now();
    const run = sb.run({ command: win ? 'ping -n 61 127.0.0.1 >nul' : 'sleep 60', abortSignal: ac.signal });
    setTimeout(() => ac.abort(new Error('stop now')), 100);
    await expect(run).rejects.toThrow('stop now');
    expect(Date.now() - started).toBeLessThan(30_000);
    const ac2 = new AbortController();
    const p = await sb.spawn({ command: win ? nodeE('console.log(process.pid); setTimeout(() => {}, 60000)') : 'echo $$; sleep 60', abortSignal: ac2.signal });
    const pid = Number((new TextDecoder().decode((await p.stdout.getReader().read()).value)).trim());
    ac2.abort(new Error('bye'));
    await expect(p.wait()).rejects.toThrow('bye');
    expect(await gone(pid)).toBe(true);
    const aborted = AbortSignal.abort(new Error('already'));
    await expect(sb.spawn({ command: touch('never'), abortSignal: aborted })).rejects.toThrow('already');
    expect(existsSync(join(t.root, 'never'))).toBe(false);
  });

  it('rejects stdin: true before starting where the shell cannot pass input, and has no commands without a shell', async () => {
    const ws = new MemoryWorkspace({ exec: () => ({ stdout: 'ran\n' }) });
    const sb = toAiSdkSandbox(ws);
    let ran = 0;
    const counting = { exec: async () => { ran++; return { stdout: '', stderr: '', exitCode: 0, timedOut: false }; }, spawn: undefined };
    const sb2 = toAiSdkSandbox(ws, { shell: counting });
    await expect(sb2.spawn({ command: 'cat', stdin: true })).rejects.toMatchObject({ name: 'WorkspaceError' });
    expect(ran).toBe(0);
    await expect(sb.spawn({ command: 'cat', stdin: true })).rejects.toMatchObject({ name: 'WorkspaceError' });
    const plain = { readFile: ws.readFile.bind(ws), writeFile: ws.writeFile.bind(ws), stat: ws.stat.bind(ws), readdir: ws.readdir.bind(ws), mkdir: ws.mkdir.bind(ws), rm: ws.rm.bind(ws) };
    await expect(toAiSdkSandbox(plain).run({ command: 'ls' })).rejects.toMatchObject({ code: 'CommandRefused' });
  });
});

describe('toAiSdkSandbox at the edges', () => {
  it('streams a large output whole, byte for byte', async () => {
    const t = tree({});
    const big = Buffer.alloc(8 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    writeFileSync(join(t.root, 'big.bin'), big);
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const cat = win ? nodeE("require('fs').createReadStream('big.bin').pipe(process.stdout)") : 'cat big.bin';
    const p = await sb.spawn({ command: cat });
    const got = Buffer.from(await new Response(p.stdout).arrayBuffer());
    expect(got.length).toBe(big.length);
    expect(got.equals(big)).toBe(true);
    expect(await p.wait()).toEqual({ exitCode: 0 });
    // The bytes through a pipe of the shell, counted by 16 at its other end.
    const r = await sb.run({ command: win ? `${cat} | ${nodeE("let n = 0; process.stdin.on('data', (c) => n += c.length).on('end', () => console.log(n / 16))")}` : 'cat big.bin | od -An -tx1 | wc -l' });
    expect(Number(r.stdout.trim())).toBe(big.length / 16);
  });

  it('closes the input of a command that asks for none, and bounds what run collects', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const cat = win ? nodeE("process.stdin.resume().on('end', () => console.log('after'))") : 'cat; echo after';
    expect(await sb.run({ command: cat })).toEqual({ exitCode: 0, stdout: 'after\n', stderr: '' });
    const started = Date.now();
    const yes = win ? nodeE("const y = () => process.stdout.write('y\\n'.repeat(8192), y); y()") : 'yes';
    await expect(sb.run({ command: yes })).rejects.toMatchObject({ code: 'TooLarge' });
    expect(Date.now() - started).toBeLessThan(60_000);
  });

  it('a reader that cancels a stream leaves wait() and the other stream alone', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const p = await sb.spawn({
      command: win
        ? nodeE("console.log('first'); setTimeout(() => { for (let i = 1; i <= 20000; i++) console.log(i); console.error('done'); }, 300)")
        : 'echo first; sleep 0.3; seq 1 20000; echo done >&2',
    });
    const reader = p.stdout.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('first\n');
    await reader.cancel();
    expect(await new Response(p.stderr).text()).toBe('done\n');
    expect(await p.wait()).toEqual({ exitCode: 0 });
  });

  it('refuses a signal aborted before the call: nothing runs', async () => {
    const t = tree({});
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    await expect(sb.run({ command: touch('ran'), abortSignal: AbortSignal.abort(new Error('early')) })).rejects.toThrow('early');
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(join(t.root, 'ran'))).toBe(false);
  });

  it("ends a finished process's input without an error, and refuses text an encoding cannot hold", async () => {
    const t = tree({ 'a.txt': 'x' });
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const p = await sb.spawn({ command: 'true', stdin: true });
    await p.wait();
    await p.stdin.getWriter().close();
    await expect(sb.writeTextFile({ path: 'l.txt', content: 'é€', encoding: 'latin1' })).rejects.toMatchObject({ code: 'InvalidArguments' });
    await expect(sb.writeTextFile({ path: 'h.txt', content: 'zz41', encoding: 'hex' })).rejects.toMatchObject({ code: 'InvalidArguments' });
    expect(existsSync(join(t.root, 'l.txt')) || existsSync(join(t.root, 'h.txt'))).toBe(false);
    await expect(sb.deleteFile({ path: 'a.txt/.' })).rejects.toMatchObject({ code: 'NotAFile' });
    expect(existsSync(join(t.root, 'a.txt'))).toBe(true);
  });

  it("reads a path under the workspace's real directory, as a command prints it", async () => {
    const t = tree({ 'a.txt': 'hello' });
    const sb = toAiSdkSandbox(new NodeWorkspace({ root: t.root }));
    const { stdout } = await sb.run({ command: PWD });
    expect(await sb.readTextFile({ path: join(stdout.trim(), 'a.txt') })).toBe('hello');
    await expect(sb.readTextFile({ path: `${t.dir}/other.txt` })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
  });
});

describe('toAiSdkSandbox with a JS provider', () => {
  it('confines paths before the provider sees them', async () => {
    const t = tree({ 'a.txt': 'x' });
    mkdirSync(join(t.dir, 'secret'));
    writeFileSync(join(t.dir, 'secret/s.txt'), 'secret');
    const seen = [];
    const ws = new NodeWorkspace({ root: t.root });
    const spy = new Proxy(ws, { get: (o, k) => (typeof o[k] === 'function' ? (...a) => { seen.push(a[0]); return o[k](...a); } : o[k]) });
    const sb = toAiSdkSandbox(spy, { shell: ws });
    await expect(sb.readTextFile({ path: join(t.dir, 'secret/s.txt') })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    await expect(sb.readTextFile({ path: '/workspace/../secret/s.txt' })).rejects.toMatchObject({ code: 'OutsideWorkspace' });
    expect(seen.every((p) => !p.startsWith('/'))).toBe(true);
  });
});
