// "The tools": the six file tools, over NodeWorkspace, MemoryWorkspace and a provider written in JS.
import { describe, it, expect, afterAll } from 'vitest';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { NodeWorkspace, MemoryWorkspace, createFsTools, WorkspaceError } from 'corral';
import { ToolRegistry, executeTool } from 'corral/executor';
import { tempTree, jsProvider } from './helpers.mjs';

const FILES = {
  'README.md': '# Demo\n',
  'src/math.ts': 'export const add = (a: number, b: number) => a - b;\nexport const sub = (a: number, b: number) => a - b;\n',
  'src/util/strings.ts': 'export function shout(s: string) {\n  return s.toUpperCase();\n}\n',
  'src/index.js': "import { add } from './math';\nconsole.log(add(1, 2));\n",
  'node_modules/dep/index.ts': 'export const add = 1;\n',
  'docs/guide.md': 'Use add() to add.\n',
};

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

const providers = {
  NodeWorkspace: () => { const t = tempTree(FILES); trees.push(t); return { fs: new NodeWorkspace({ root: t.root }), read: (p) => readFileSync(join(t.root, p), 'utf8') }; },
  MemoryWorkspace: () => { const fs = new MemoryWorkspace({ files: FILES }); return { fs, read: (p) => fs.snapshot()[p] }; },
  'a JS provider': () => { const t = tempTree(FILES); trees.push(t); return { fs: jsProvider(t.root), read: (p) => readFileSync(join(t.root, p), 'utf8') }; },
};

for (const [label, make] of Object.entries(providers)) {
  describe(`file tools over ${label}`, () => {
    const setup = (options) => {
      const { fs, read } = make();
      const tools = createFsTools(fs, options);
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
      return { fs, read, tools, t: byName };
    };

    it('createFsTools returns the six tools as plain objects with schemas', () => {
      const { tools } = setup();
      expect(tools.map((t) => t.name)).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep']);
      for (const t of tools) {
        expect(Object.getPrototypeOf(t)).toBe(Object.prototype);
        expect(t.inputSchema).toBe(t.parameters);
        expect(t.parameters.type).toBe('object');
        expect(typeof t.description).toBe('string');
        expect(JSON.parse(JSON.stringify({ ...t })).name).toBe(t.name);
      }
      expect(setup().t.read_file.description).toContain('2,000 lines');
    });

    it('readOnly creates only the four reading tools', () => {
      const { tools } = setup({ readOnly: true });
      expect(tools.map((t) => t.name)).toEqual(['read_file', 'list_dir', 'glob', 'grep']);
    });

    it('read_file returns numbered lines', async () => {
      const { t } = setup();
      expect(await t.read_file.execute({ path: 'src/util/strings.ts' })).toBe(' 1\texport function shout(s: string) {\n 2\t  return s.toUpperCase();\n 3\t}');
      expect(await t.read_file.execute({ path: 'src/util/strings.ts', offset: 2, limit: 1 })).toBe(' 2\t  return s.toUpperCase();\n(Showing lines 2-2 of 3. Use offset 3 to continue.)');
    });

    it('read_file cut by maxReadLines says the offset to continue from', async () => {
      const { t } = setup({ maxReadLines: 1 });
      const out = await t.read_file.execute({ path: 'src/math.ts' });
      expect(out.split('\n').at(-1)).toBe('(Showing lines 1-1 of 2. Use offset 2 to continue.)');
    });

    it('read_file of a missing file is a NotFound tool error', async () => {
      const { t } = setup();
      await expect(t.read_file.execute({ path: 'nope.ts' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'NotFound' });
    });

    it('write_file creates missing parents and overwrites', async () => {
      const { t, read } = setup();
      expect(await t.write_file.execute({ path: 'out/deep/x.txt', content: 'one\n' })).toMatch(/^Created out\/deep\/x.txt/);
      expect(read('out/deep/x.txt')).toBe('one\n');
      expect(await t.write_file.execute({ path: 'out/deep/x.txt', content: 'two\n' })).toMatch(/^Overwrote/);
      expect(read('out/deep/x.txt')).toBe('two\n');
    });

    it('edit_file replaces exact text, refuses ambiguity and missing text, and detects an applied edit', async () => {
      const { t, read } = setup();
      await expect(t.edit_file.execute({ path: 'src/math.ts', old_string: 'a - b', new_string: 'a + b' })).rejects.toMatchObject({ code: 'Ambiguous' });
      expect(read('src/math.ts')).toContain('add = (a: number, b: number) => a - b');
      await t.edit_file.execute({ path: 'src/math.ts', old_string: 'add = (a: number, b: number) => a - b', new_string: 'add = (a: number, b: number) => a + b' });
      expect(read('src/math.ts')).toContain('add = (a: number, b: number) => a + b;');
      const again = await t.edit_file.execute({ path: 'src/math.ts', old_string: 'add = (a: number, b: number) => a - b', new_string: 'add = (a: number, b: number) => a + b' });
      expect(again).toMatch(/already applied/);
      const e = await t.edit_file.execute({ path: 'src/math.ts', old_string: 'mul(', new_string: 'multiply(' }).catch((x) => x);
      expect(e).toBeInstanceOf(WorkspaceError);
      expect(e.code).toBe('NoMatch');
      expect(await t.edit_file.execute({ path: 'src/math.ts', old_string: 'number', new_string: 'bigint', replace_all: true })).toMatch(/4 occurrences/);
    });

    it('list_dir sorts entries and marks directories with /', async () => {
      const { t } = setup();
      expect(await t.list_dir.execute({})).toBe('README.md\ndocs/\nnode_modules/\nsrc/');
      expect(await t.list_dir.execute({ path: 'src' })).toBe('index.js\nmath.ts\nutil/');
    });

    it('glob: * within one directory, ** across, ?, [abc], {a,b}; sorted; ignore skipped', async () => {
      const { t } = setup();
      expect(await t.glob.execute({ pattern: 'src/*.ts' })).toBe('src/math.ts');
      expect(await t.glob.execute({ pattern: '**/*.ts' })).toBe('src/math.ts\nsrc/util/strings.ts');
      expect(await t.glob.execute({ pattern: '**/*.{md,js}' })).toBe('README.md\ndocs/guide.md\nsrc/index.js');
      expect(await t.glob.execute({ pattern: 'src/[mi]*.?s' })).toBe('src/index.js\nsrc/math.ts');
      expect(await t.glob.execute({ pattern: '*.ts', path: 'src/util' })).toBe('src/util/strings.ts');
      expect(await t.glob.execute({ pattern: '*.py' })).toBe('No files matched.');
    });

    it('grep: path:line: text, JS regex, glob, ignore_case; node_modules skipped', async () => {
      const { t } = setup();
      expect(await t.grep.execute({ pattern: '\\badd\\(' })).toBe('docs/guide.md:1: Use add() to add.\nsrc/index.js:2: console.log(add(1, 2));');
      expect(await t.grep.execute({ pattern: 'export (const|function) \\w+', glob: '*.ts' })).toBe(
        'src/math.ts:1: export const add = (a: number, b: number) => a - b;\nsrc/math.ts:2: export const sub = (a: number, b: number) => a - b;\nsrc/util/strings.ts:1: export function shout(s: string) {',
      );
      expect(await t.grep.execute({ pattern: 'TOUPPERCASE', ignore_case: true, path: 'src/util' })).toBe('src/util/strings.ts:2:   return s.toUpperCase();');
      const withDeps = createFsTools(make().fs, { ignore: [] }).find((x) => x.name === 'grep');
      expect(await withDeps.execute({ pattern: 'add = 1' })).toBe('node_modules/dep/index.ts:1: export const add = 1;');
    });

    it('grep refuses an invalid regex and nested repetition as tool errors', async () => {
      const { t } = setup();
      for (const pattern of ['(', '(a+)+', '(\\w+\\s*)*']) {
        await expect(t.grep.execute({ pattern })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'InvalidPattern' });
      }
    });

    it('maxResults cuts glob and grep with a line that says so', async () => {
      const { t } = setup({ maxResults: 1 });
      expect(await t.glob.execute({ pattern: '**/*' })).toBe('README.md\n(Showing the first 1 of 5 matching files. Narrow the pattern or path.)');
      // grep stops once the first matches by path are settled: the total it gives is then a lower
      // bound (a JS provider's walk is breadth-first, so there every file is searched)…
      const [first, cut] = (await t.grep.execute({ pattern: 'add' })).split('\n');
      expect(first).toBe('docs/guide.md:1: Use add() to add.');
      expect(cut).toMatch(/^\(Showing the first 1 of (at least [34]|4) matches\. Narrow the pattern, path or glob, or continue with offset=1\.\)$/);
      // …and counting gives the whole.
      expect((await t.grep.execute({ pattern: 'add', output_mode: 'count' })).split('\n').at(-2)).toMatch(/^\(4 matches in \d files\)$/);
    });

    it('maxFilesScanned stops a walk and says so', async () => {
      const { t } = setup({ maxFilesScanned: 2 });
      const out = await t.glob.execute({ pattern: '**/*' });
      expect(out.split('\n').at(-1)).toMatch(/Stopped after scanning 2 files/);
      // Two entries scanned: files shown, directories (counted by a walk over a JS provider) not.
      expect(out.split('\n').length).toBeLessThanOrEqual(3);
      expect(out.split('\n').length).toBeGreaterThanOrEqual(2);
    });

    it('bad arguments are InvalidArguments naming the argument, and nothing is written', async () => {
      const { t, read } = setup();
      const e = await t.write_file.execute({ path: 'x.txt', content: 42 }).catch((x) => x);
      expect(e.code).toBe('InvalidArguments');
      expect(e.message).toContain('content');
      await expect(t.read_file.execute({})).rejects.toMatchObject({ code: 'InvalidArguments', message: expect.stringContaining('path') });
      await expect(t.read_file.execute({ path: 'README.md', offset: 0 })).rejects.toMatchObject({ code: 'InvalidArguments' });
      expect(() => read('x.txt')).toSatisfy((f) => { try { return f() === undefined; } catch { return true; } });
    });

    it('the registry turns a refused path into a tool error result and the run continues', async () => {
      const registry = new ToolRegistry();
      registry.registerMany(setup().tools);
      expect(registry.list().length).toBe(6);
      const r = await registry.execute('read_file', { path: '../../etc/passwd' });
      expect(r).toEqual({ error: 'WorkspaceError', toolName: 'read_file', message: expect.stringContaining('outside the workspace') });
      expect(await registry.execute('read_file', { path: 'README.md' })).toBe(' 1\t# Demo');
    });
  });
}

describe('edit_file and encodings', () => {
  it('refuses latin1 and UTF-16 files and leaves them unchanged; keeps a UTF-8 BOM', async () => {
    const t = tempTree({});
    trees.push(t);
    writeFileSync(join(t.root, 'latin1.txt'), Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    writeFileSync(join(t.root, 'utf16.txt'), Buffer.from('\ufeffhello', 'utf16le'));
    writeFileSync(join(t.root, 'bom.txt'), '\ufeffhello\n');
    writeFileSync(join(t.root, 'crlf.txt'), 'one\r\ntwo\r\n');
    const tools = createFsTools(new NodeWorkspace({ root: t.root }));
    const edit = tools.find((x) => x.name === 'edit_file');
    for (const p of ['latin1.txt', 'utf16.txt']) {
      const before = readFileSync(join(t.root, p));
      await expect(edit.execute({ path: p, old_string: 'ca', new_string: 'x' })).rejects.toMatchObject({ code: 'NotUtf8' });
      expect(readFileSync(join(t.root, p)).equals(before)).toBe(true);
    }
    await edit.execute({ path: 'bom.txt', old_string: 'hello', new_string: 'bye' });
    expect(readFileSync(join(t.root, 'bom.txt'), 'utf8')).toBe('\ufeffbye\n');
    const e = await edit.execute({ path: 'crlf.txt', old_string: 'one\ntwo', new_string: 'x' }).catch((x) => x);
    expect(e.code).toBe('NoMatch');
    expect(e.message).toMatch(/CRLF/);
  });
});

describe('executeTool', () => {
  it('rethrows errors that are not WorkspaceError', async () => {
    const boom = { name: 'boom', description: '', parameters: {}, inputSchema: {}, execute: async () => { throw new TypeError('bug'); } };
    await expect(executeTool(boom, {})).rejects.toThrow(TypeError);
  });
});

describe('read_file and list_dir that start in place', () => {
  // A small file or directory on a local disk is answered on the calling thread; a large one goes
  // on to the runtime from the same call. Both give the same results, errors and aborts.
  it('give whole results for a large file and a large directory, as for small ones', async () => {
    const big = Array.from({ length: 20_000 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const files = { 'big.txt': big, 'small.txt': 'one\ntwo\n' };
    for (let i = 0; i < 1500; i++) files[`many/entry-with-a-long-name-${String(i).padStart(5, '0')}.txt`] = 'x';
    const t = tempTree(files);
    trees.push(t);
    const tools = Object.fromEntries(createFsTools(new NodeWorkspace({ root: t.root }), { maxReadLines: 100_000, maxOutputChars: 10_000_000, maxResults: 10_000 }).map((x) => [x.name, x]));
    const read = await tools.read_file.execute({ path: 'big.txt' });
    expect(read.split("\n").filter((l) => /^ *\d+\tline \d+$/.test(l))).toHaveLength(20_000);
    expect(await tools.read_file.execute({ path: 'small.txt' })).toMatch(/^ *1\tone\n *2\ttwo/);
    const listed = (await tools.list_dir.execute({ path: 'many' })).split('\n');
    expect(listed).toHaveLength(1500);
    expect(listed[0]).toBe('entry-with-a-long-name-00000.txt');
    await expect(tools.read_file.execute({ path: 'missing.txt' })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'NotFound' });
    await expect(tools.list_dir.execute({ path: '../..' })).rejects.toBeInstanceOf(WorkspaceError);
    const aborted = AbortSignal.abort();
    await expect(tools.read_file.execute({ path: 'small.txt' }, { signal: aborted })).rejects.toThrow();
    await expect(tools.list_dir.execute({ path: 'many' }, { signal: aborted })).rejects.toThrow();
  });
});
