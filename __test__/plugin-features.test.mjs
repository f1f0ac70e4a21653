// What the plugin-workspace peer offers, through the public API: images, binary and non-UTF-8
// files, multi-edit, fuzzy edits, onEdit diffs, protect, grep context/literal/limit, links in
// list_dir, ignore paths, non-files, the shell's stdin, spillDir and onProgress, workspacePrompt.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, readFileSync, symlinkSync, mkdirSync, existsSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  NodeWorkspace, MemoryWorkspace, SandboxShell, NoopSandbox, createFsTools, createShellTool, workspacePrompt, ConfigurationError,
} from 'corral';
import { tempTree, jsProvider, linksWork } from './helpers.mjs';

// On Windows the host's shell is cmd.exe: the commands written in `sh` have a form for it beside
// them, with node itself standing in for the Unix tools cmd.exe lacks.
const win = process.platform === 'win32';
/** `node -e <script>` as cmd.exe reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;
/** `seq 1 n` under cmd.exe (its lines end with \r\n). */
const cmdSeq = (n) => `for /l %i in (1,1,${n}) do @echo %i`;

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const tree = (files = {}) => { const t = tempTree(files); trees.push(t); return t; };
const toolsOf = (fs, o) => Object.fromEntries(createFsTools(fs, o).map((t) => [t.name, t]));

/** A PNG header (signature + IHDR) of the given size, with some trailing bytes. */
const png = (w, h, extra = 16) => {
  const b = Buffer.alloc(33 + extra);
  Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').copy(b, 0);
  b.writeUInt32BE(w, 16);
  b.writeUInt32BE(h, 20);
  b[24] = 8; b[25] = 6;
  return b;
};

// Providers that hold bytes: on disk, and a JS provider with readFileBytes.
const byteProviders = {
  NodeWorkspace: (files) => { const t = tree(); for (const [p, c] of Object.entries(files)) { mkdirSync(join(t.root, p, '..'), { recursive: true }); writeFileSync(join(t.root, p), c); } return { fs: new NodeWorkspace({ root: t.root }), t }; },
  'a JS provider': (files) => { const t = tree(); for (const [p, c] of Object.entries(files)) { mkdirSync(join(t.root, p, '..'), { recursive: true }); writeFileSync(join(t.root, p), c); } return { fs: jsProvider(t.root), t }; },
};
const textProviders = {
  ...byteProviders,
  MemoryWorkspace: (files) => ({ fs: new MemoryWorkspace({ files }), t: null }),
};

for (const [label, make] of Object.entries(byteProviders)) {
  describe(`read_file over ${label}: images and binary files`, () => {
    it('with readImages an image is recognised by its bytes and returned as plain image data, whatever its name', async () => {
      const bytes = png(640, 480);
      const { fs } = make({ 'docs/chart.txt': bytes });
      const { read_file } = toolsOf(fs, { readImages: true });
      const out = await read_file.execute({ path: 'docs/chart.txt' });
      expect(out).toEqual({ type: 'image', path: 'docs/chart.txt', mediaType: 'image/png', bytes: bytes.length, width: 640, height: 480, data: bytes.toString('base64') });
      expect(JSON.parse(JSON.stringify(out))).toEqual(out);
      expect(read_file.toModelOutput({ output: out })).toEqual({ type: 'content', value: [
        { type: 'text', text: `[Image docs/chart.txt (image/png, ${bytes.length} bytes).]` },
        { type: 'image-data', data: bytes.toString('base64'), mediaType: 'image/png' },
      ] });
      expect(read_file.toModelOutput({ output: 'text' })).toEqual({ type: 'text', value: 'text' });
    });

    it('an image too large a side, too many bytes or with no size in its header is a note to read a smaller copy', async () => {
      const { fs } = make({ 'wide.png': png(9000, 10), 'cut.png': png(10, 10).subarray(0, 20), 'heavy.png': png(100, 100, 4 * 1024 * 1024) });
      const { read_file } = toolsOf(fs, { readImages: true });
      const wide = await read_file.execute({ path: 'wide.png' });
      expect(wide).toMatch(/^\(The image wide\.png \(image\/png, \d+ bytes, 9000x10 px\) is not sent: it is larger than 8,000 pixels a side\. Read a smaller copy/);
      expect(await read_file.execute({ path: 'cut.png' })).toMatch(/cut\.png \(image\/png, 20 bytes\) is not sent: its header gives no size\. Read a smaller copy/);
      expect(await read_file.execute({ path: 'heavy.png' })).toMatch(/is not sent: it is larger than 3\.75 MiB/);
    });

    it('without readImages an image, like any binary file, is one line naming it, its size and its type', async () => {
      const { fs } = make({ 'a.png': png(4, 4), 'tool.bin': Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2]), 'data.bin': Buffer.from([1, 0, 2]) });
      const { read_file } = toolsOf(fs);
      expect(read_file.toModelOutput).toBeUndefined();
      expect(await read_file.execute({ path: 'a.png' })).toBe('(a.png is a binary file: 49 bytes, image/png. Its bytes are not shown.)');
      expect(await read_file.execute({ path: 'tool.bin' })).toBe('(tool.bin is a binary file: 7 bytes, an ELF executable. Its bytes are not shown.)');
      expect(await read_file.execute({ path: 'data.bin' })).toBe('(data.bin is a binary file: 3 bytes, binary data. Its bytes are not shown.)');
    });

    it('text that is not valid UTF-8 shows U+FFFD and a line saying so, before the continuation line', async () => {
      const latin1 = Buffer.concat([Buffer.from('caf'), Buffer.from([0xe9]), Buffer.from('\nline 2\nline 3\n')]);
      const { fs } = make({ 'l1.txt': latin1 });
      const { read_file } = toolsOf(fs, { maxReadLines: 2 });
      const lines = (await read_file.execute({ path: 'l1.txt' })).split('\n');
      expect(lines[0]).toBe(' 1\tcaf\uFFFD');
      expect(lines[2]).toMatch(/^\(l1\.txt is not valid UTF-8/);
      expect(lines[3]).toBe('(Showing lines 1-2 of 3. Use offset 3 to continue.)');
    });
  });
}

for (const [label, make] of Object.entries(textProviders)) {
  describe(`edits over ${label}`, () => {
    const source = 'const a = 1;\nconst b = 2;\nconst c = 3;\nconst d = 4;\n';

    it('several edits at once are all or nothing, matched against the file as it was, with the line each starts on', async () => {
      const { fs } = make({ 'src.js': source });
      const { edit_file, read_file } = toolsOf(fs);
      const out = await edit_file.execute({ path: 'src.js', edits: [
        { old_string: 'const c = 3;', new_string: 'const c = 30;\nconst c2 = 31;' },
        { old_string: 'const a = 1;', new_string: 'const a = 10;' },
        { old_string: 'const d = 4;', new_string: 'const d = 40;' },
      ] });
      expect(out).toBe('Edited src.js with 3 edits:\n  1. line 3\n  2. line 1\n  3. line 5');
      expect(await read_file.execute({ path: 'src.js' })).toBe(' 1\tconst a = 10;\n 2\tconst b = 2;\n 3\tconst c = 30;\n 4\tconst c2 = 31;\n 5\tconst d = 40;');
    });

    it('one edit that does not match, or two that overlap, and nothing is written', async () => {
      const { fs } = make({ 'src.js': source });
      const { edit_file, read_file } = toolsOf(fs);
      await expect(edit_file.execute({ path: 'src.js', edits: [{ old_string: 'const a = 1;', new_string: 'x' }, { old_string: 'nope', new_string: 'y' }] }))
        .rejects.toMatchObject({ code: 'NoMatch', message: expect.stringMatching(/^edit 2: old_string was not found/) });
      await expect(edit_file.execute({ path: 'src.js', edits: [{ old_string: 'const a = 1;\nconst b', new_string: 'x' }, { old_string: 'b = 2', new_string: 'y' }] }))
        .rejects.toMatchObject({ code: 'Ambiguous', message: expect.stringMatching(/edits 1 and 2 overlap/) });
      expect(await read_file.execute({ path: 'src.js' })).toMatch(/^ 1\tconst a = 1;/);
    });

    it('bad edits arguments are InvalidArguments', async () => {
      const { fs } = make({ 'src.js': source });
      const { edit_file } = toolsOf(fs);
      for (const args of [
        { path: 'src.js', edits: [] },
        { path: 'src.js', edits: Array.from({ length: 101 }, (_, i) => ({ old_string: `x${i}`, new_string: 'y' })) },
        { path: 'src.js', edits: [{ old_string: 'a' }] },
        { path: 'src.js', edits: [{ old_string: '', new_string: 'b' }] },
        { path: 'src.js', edits: 'const a' },
        { path: 'src.js', edits: [{ old_string: 'a', new_string: 'b' }], old_string: 'a', new_string: 'b' },
        { path: 'src.js' },
        { path: 'src.js', old_string: 'a' },
      ]) {
        await expect(edit_file.execute(args), JSON.stringify(args).slice(0, 60)).rejects.toMatchObject({ code: 'InvalidArguments' });
      }
    });

    it('fuzzyEdit matches once more with whitespace runs, curly quotes and dashes normalised, and says so', async () => {
      const { fs } = make({ 'doc.md': 'Say \u201chello\u201d \u2013 then\tleave.  \nNext line\n' });
      const { edit_file, read_file } = toolsOf(fs, { fuzzyEdit: true });
      const out = await edit_file.execute({ path: 'doc.md', old_string: 'Say "hello" - then leave.\nNext', new_string: 'Say bye.\nNext' });
      expect(out).toMatch(/replaced 1 occurrence\. old_string was not found exactly; it matched once whitespace, quotes and dashes were normalised/);
      expect(await read_file.execute({ path: 'doc.md' })).toBe(' 1\tSay bye.\n 2\tNext line');
      const strict = toolsOf(fs);
      await expect(strict.edit_file.execute({ path: 'doc.md', old_string: 'Say  bye.', new_string: 'zzz' })).rejects.toMatchObject({ code: 'NoMatch' });
    });

    it('a fuzzy match that is not unique is Ambiguous', async () => {
      const { fs } = make({ 'a.txt': 'a  b\na\tb\n' });
      const { edit_file } = toolsOf(fs, { fuzzyEdit: true });
      await expect(edit_file.execute({ path: 'a.txt', old_string: 'a b', new_string: 'c' })).rejects.toMatchObject({ code: 'Ambiguous' });
    });

    it('onEdit gets a unified diff with the call context, and the model gets the short summary', async () => {
      const { fs } = make({ 'a.txt': 'one\ntwo\n' });
      const events = [];
      const { edit_file, write_file } = toolsOf(fs, { onEdit: (e) => { events.push(e); } });
      const out = await edit_file.execute({ path: 'a.txt', old_string: 'two', new_string: 'TWO' }, { sessionId: 's', turn: 3, toolCallId: 'call-1' });
      expect(out).toBe('Edited a.txt: replaced 1 occurrence.');
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ path: 'a.txt', sessionId: 's', turn: 3, toolCallId: 'call-1' });
      expect(events[0].diff).toMatch(/^--- a\/a\.txt\n\+\+\+ b\/a\.txt\n@@ -1,2 \+1,2 @@\n one\n-two\n\+TWO\n/);
      await write_file.execute({ path: 'new.txt', content: 'n\n' });
      expect(events[1].diff).toContain('+n');
      await write_file.execute({ path: 'new.txt', content: 'n\n' });
      expect(events).toHaveLength(2);
    });

    it('what onEdit throws becomes a process warning, not a failed call', async () => {
      const { fs } = make({ 'a.txt': 'x\n' });
      const warnings = [];
      const onWarning = (w) => warnings.push(w);
      process.on('warning', onWarning);
      try {
        const { write_file } = toolsOf(fs, { onEdit: () => { throw new Error('listener bug'); } });
        expect(await write_file.execute({ path: 'a.txt', content: 'y\n' })).toMatch(/^Overwrote/);
        await new Promise((r) => setTimeout(r, 20));
        expect(warnings.map((w) => w.message)).toContain('listener bug');
      } finally {
        process.off('warning', onWarning);
      }
    });

    it('protect globs refuse write_file and edit_file with Protected, and reading stays allowed', async () => {
      const { fs } = make({ 'dist/app.js': 'built\n', 'src/a.js': 'a\n' });
      const { write_file, edit_file, read_file } = toolsOf(fs, { protect: ['dist/**', '*.lock'] });
      await expect(write_file.execute({ path: 'dist/app.js', content: 'x' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Protected' });
      await expect(edit_file.execute({ path: 'dist/app.js', old_string: 'built', new_string: 'x' })).rejects.toMatchObject({ code: 'Protected' });
      await expect(write_file.execute({ path: 'yarn.lock', content: 'x' })).rejects.toMatchObject({ code: 'Protected' });
      expect(await read_file.execute({ path: 'dist/app.js' })).toBe(' 1\tbuilt');
      expect(await write_file.execute({ path: 'src/b.js', content: 'b\n' })).toMatch(/^Created/);
    });

    it('grep shows context lines as path-12- text with -- between groups, and takes literal and limit', async () => {
      const { fs } = make({ 'a.txt': 'x\nhit(1)\ny\nz\nw\nhit(2)\n' });
      const { grep } = toolsOf(fs);
      expect(await grep.execute({ pattern: 'hit', context: 1 })).toBe('a.txt-1- x\na.txt:2: hit(1)\na.txt-3- y\n--\na.txt-5- w\na.txt:6: hit(2)');
      expect(await grep.execute({ pattern: 'hit(2)', literal: true })).toBe('a.txt:6: hit(2)');
      expect(await grep.execute({ pattern: 'hit', limit: 1 })).toMatch(/^a\.txt:2: hit\(1\)\n\(Showing the first 1 of 2 matches/);
      await expect(grep.execute({ pattern: 'hit', context: 11 })).rejects.toMatchObject({ code: 'InvalidArguments' });
    });

    it('an ignore entry with a / is a path from the root; a plain name matches anywhere', async () => {
      const { fs } = make({ 'build/out/a.txt': 'hit\n', 'src/build/out/b.txt': 'hit\n', 'src/cache/c.txt': 'hit\n', 'cache/d.txt': 'hit\n' });
      const { grep } = toolsOf(fs, { ignore: ['build/out', 'cache'] });
      expect(await grep.execute({ pattern: 'hit' })).toBe('src/build/out/b.txt:1: hit');
    });
  });
}

describe('links and non-files on disk', () => {
  it.skipIf(!linksWork)('list_dir ends links with @', async () => {
    const t = tree({ 'docs/a.md': 'a' });
    symlinkSync('docs', join(t.root, 'docs-link'));
    symlinkSync('docs/a.md', join(t.root, 'a-link'));
    const { list_dir } = toolsOf(new NodeWorkspace({ root: t.root }));
    expect(await list_dir.execute({})).toBe('a-link@\ndocs-link@\ndocs/');
    const js = toolsOf(jsProvider(t.root));
    expect(await js.list_dir.execute({})).toBe('a-link@\ndocs-link@\ndocs/');
  });

  // Windows has no FIFOs in its file system.
  it.skipIf(win)('a FIFO is NotAFile for every tool, never waited on, and walks skip it', async () => {
    const t = tree({ 'a.txt': 'hit\n' });
    execFileSync('mkfifo', [join(t.root, 'pipe')]);
    const tools = toolsOf(new NodeWorkspace({ root: t.root }));
    await expect(tools.read_file.execute({ path: 'pipe' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(tools.write_file.execute({ path: 'pipe', content: 'x' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(tools.edit_file.execute({ path: 'pipe', old_string: 'a', new_string: 'b' })).rejects.toMatchObject({ code: 'NotAFile' });
    await expect(tools.grep.execute({ pattern: 'x', path: 'pipe' })).rejects.toMatchObject({ code: 'NotAFile' });
    expect(await tools.grep.execute({ pattern: 'hit' })).toBe('a.txt:1: hit');
    expect(await tools.glob.execute({ pattern: '*' })).toBe('a.txt');
  });
});

describe('the shell tool: stdin, spillDir, onProgress', () => {
  it('stdin is given to the command', async () => {
    const t = tree();
    const shell = createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: false });
    expect(await shell.execute({ command: win ? nodeE("process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase()))") : 'tr a-z A-Z', stdin: 'hello\n' })).toMatchObject({ exitCode: 0, stdout: 'HELLO\n' });
    const seen = [];
    const ws = new MemoryWorkspace({ exec: (c, o) => { seen.push(o.stdin); return {}; } });
    await createShellTool(ws, { needsApproval: false }).execute({ command: 'x', stdin: 'in' });
    expect(seen).toEqual(['in']);
  });

  it('spillDir saves a cut stream whole, names it on the result and in the note, and protects it', async () => {
    const t = tree();
    const ws = new NodeWorkspace({ root: t.root });
    const shell = createShellTool(ws, { needsApproval: false, maxOutputChars: 100, spillDir: '.corral/output' });
    const r = await shell.execute({ command: win ? nodeE("for (let i = 1; i <= 2000; i++) console.log(i); console.error('short')") : 'seq 1 2000; echo short >&2' }, { toolCallId: 'call_7' });
    expect(r.outputFile).toBe('.corral/output/call_7.stdout.log');
    expect(r.errorFile).toBeUndefined();
    expect(r.note).toContain('.corral/output/call_7.stdout.log');
    const saved = readFileSync(join(t.root, '.corral/output/call_7.stdout.log'), 'utf8');
    expect(saved.split('\n').filter(Boolean)).toHaveLength(2000);
    const { write_file, edit_file, read_file } = toolsOf(ws);
    await expect(write_file.execute({ path: '.corral/output/call_7.stdout.log', content: 'x' })).rejects.toMatchObject({ code: 'Protected' });
    await expect(edit_file.execute({ path: '.corral/output/call_7.stdout.log', old_string: '1', new_string: 'x' })).rejects.toMatchObject({ code: 'Protected' });
    expect(await read_file.execute({ path: '.corral/output/call_7.stdout.log', limit: 1 })).toMatch(/^ 1\t1\n/);
  });

  it('spillDir keeps the newest 50 files', async () => {
    const t = tree();
    const shell = createShellTool(new NodeWorkspace({ root: t.root }), { needsApproval: false, maxOutputChars: 10, spillDir: 'out' });
    for (let i = 0; i < 53; i++) await shell.execute({ command: win ? cmdSeq(50) : 'seq 1 50' }, { toolCallId: `c${String(i).padStart(2, '0')}` });
    const files = readdirSync(join(t.root, 'out')).sort();
    expect(files).toHaveLength(50);
    expect(files[0]).toBe('c03.stdout.log');
  });

  it('spillDir over a shell that is not a file provider needs spillFs', async () => {
    const t = tree();
    const sandbox = new SandboxShell(new NoopSandbox(), { cwd: t.root });
    expect(() => createShellTool(sandbox, { spillDir: 'out' })).toThrow(ConfigurationError);
    const shell = createShellTool(sandbox, { needsApproval: false, maxOutputChars: 10, spillDir: 'out', spillFs: new NodeWorkspace({ root: t.root }) });
    const r = await shell.execute({ command: win ? cmdSeq(100) : 'seq 1 100' });
    expect(r.outputFile).toMatch(/^out\/run-[0-9a-f]{16}\.stdout\.log$/);
    expect(existsSync(join(t.root, r.outputFile))).toBe(true);
  });

  const progressOf = async (shell, command, toolCallId = 'p1') => {
    const events = [];
    let settled = false;
    let firstWhileRunning = false;
    const tool = createShellTool(shell, { needsApproval: false, progressMs: 50, onProgress: (e) => { events.push(e); if (!settled) firstWhileRunning = true; } });
    const r = await tool.execute({ command }, { toolCallId });
    settled = true;
    return { r, events, firstWhileRunning };
  };

  it('onProgress publishes output in order while a command runs on NodeWorkspace', async () => {
    const t = tree();
    const { r, events, firstWhileRunning } = await progressOf(new NodeWorkspace({ root: t.root }), win ? nodeE("console.log('one'); setTimeout(() => { console.error('two'); setTimeout(() => console.log('three'), 300); }, 300)") : 'echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three');
    expect(r.stdout).toBe('one\nthree\n');
    expect(firstWhileRunning).toBe(true);
    expect(events.every((e) => e.toolCallId === 'p1')).toBe(true);
    expect(events.map((e) => `${e.stream}:${e.text}`)).toEqual(['stdout:one\n', 'stderr:two\n', 'stdout:three\n']);
  });

  it('onProgress streams through SandboxShell on the host', async () => {
    const t = tree();
    const { events, firstWhileRunning } = await progressOf(new SandboxShell(new NoopSandbox(), { cwd: t.root }), win ? nodeE("console.log('a'); setTimeout(() => console.log('b'), 300)") : 'echo a; sleep 0.3; echo b');
    expect(firstWhileRunning).toBe(true);
    expect(events.map((e) => e.text).join('')).toBe('a\nb\n');
  });

  it('a JS provider streams by calling options.onOutput; one that does not gets one event per stream at the end', async () => {
    const streaming = { async exec(command, options) { options.onOutput('stdout', 'x'); await new Promise((r) => setTimeout(r, 200)); options.onOutput('stdout', 'y'); return { stdout: 'xy', stderr: '', exitCode: 0, timedOut: false }; } };
    const a = await progressOf(streaming, 'run');
    expect(a.firstWhileRunning).toBe(true);
    expect(a.events.map((e) => e.text)).toEqual(['x', 'y']);
    const quiet = { async exec() { return { stdout: 'out', stderr: 'err', exitCode: 0, timedOut: false }; } };
    const b = await progressOf(quiet, 'run');
    expect(b.events.map((e) => `${e.stream}:${e.text}`)).toEqual(['stdout:out', 'stderr:err']);
  });
});

describe('workspacePrompt', () => {
  it('describes the workspace by its name, the tools and limits, the shell and what is protected, never the host path', () => {
    const t = tree();
    const ws = new NodeWorkspace({ root: t.root });
    const tools = [
      ...createFsTools(ws, { protect: ['dist/**'], maxReadLines: 500 }),
      createShellTool(ws, { allow: ['npm test', { command: 'node --test', args: () => true }], deny: ['rm -rf'], spillDir: '.corral/output' }),
      { name: 'deploy', description: 'Deploys the app. Needs a token.', parameters: {}, execute: async () => 'ok' },
    ];
    const p = workspacePrompt(tools);
    expect(p).toMatch(/^## Workspace\nYou work in the workspace `root`/);
    expect(p).toContain('read_file shows up to 500 lines');
    expect(p).toContain("Only these commands run: 'npm test', 'node --test …' (arguments checked); others are refused. Always refused: 'rm -rf'.");
    expect(p).toContain('Protected from writes: dist/**, .corral/output (saved output).');
    expect(p).toContain('Other tools: `deploy` (Deploys the app.).');
    expect(p).not.toContain(t.dir);
    expect(workspacePrompt(tools, { name: 'shop' })).toContain('`shop`');
    expect(() => workspacePrompt(tools, { nam: 'x' })).toThrow(/did you mean name\?/);
  });
});
