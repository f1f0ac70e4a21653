// The corral bin: `node bin/corral.js <tool> '<json args>' --root DIR` and `corral tools`.
import { describe, it, expect, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempTree } from './helpers.mjs';

const BIN = fileURLToPath(new URL('../bin/corral.js', import.meta.url));
const t = tempTree({ 'notes.md': '# Notes\nalpha line\n', 'src/a.ts': 'export const alpha = 1;\n' });
writeFileSync(join(t.dir, 'secret.txt'), 'outside the root\n');
afterAll(() => t.cleanup());

const corral = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 20_000 });
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

describe('the corral CLI', () => {
  it('tools lists the six file tools as one JSON object per line', () => {
    const r = corral('tools', '--root', t.root);
    expect(r.status).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.name)).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep']);
    for (const l of lines) {
      expect(typeof l.description).toBe('string');
      expect(l.parameters.type).toBe('object');
    }
  });

  it('a tool run prints its result and exits 0', () => {
    const read = corral('read_file', '{"path":"notes.md"}', '--root', t.root);
    expect(read.status).toBe(0);
    expect(read.stdout).toBe(' 1\t# Notes\n 2\talpha line\n');
    const edit = corral('edit_file', JSON.stringify({ path: 'src/a.ts', old_string: '= 1', new_string: '= 2' }), `--root=${t.root}`);
    expect(edit.status).toBe(0);
    expect(edit.stdout).toMatch(/^Edited src\/a\.ts/);
    expect(readFileSync(join(t.root, 'src/a.ts'), 'utf8')).toBe('export const alpha = 2;\n');
    const grep = corral('grep', '{"pattern":"alpha"}', '--root', t.root);
    expect(grep.status).toBe(0);
    expect(grep.stdout.trim().split('\n').sort()).toEqual(['notes.md:2: alpha line', 'src/a.ts:1: export const alpha = 2;']);
  });

  it('a refused path prints the WorkspaceError and exits 1, touching nothing', () => {
    const r = corral('read_file', '{"path":"../secret.txt"}', '--root', t.root);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^WorkspaceError: Path is outside the workspace: \.\.\/secret\.txt/);
    expect(r.stderr).not.toContain('outside the root\n');
    const w = corral('write_file', '{"path":".git/config","content":"x"}', '--root', t.root);
    expect(w.status).toBe(1);
    expect(w.stderr).toMatch(/^WorkspaceError: .*\.git/);
    expect(readFileSync(join(t.dir, 'secret.txt'), 'utf8')).toBe('outside the root\n');
  });

  it('arguments that are not valid JSON exit 2 with a message', () => {
    const r = corral('read_file', '{path: notes.md}', '--root', t.root);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/not valid JSON/);
  });

  it('an unknown tool or no arguments at all exits 2 and says what is available', () => {
    const unknown = corral('delete_everything', '{}', '--root', t.root);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown tool 'delete_everything'.*read_file/);
    const bare = corral();
    expect(bare.status).toBe(2);
    expect(bare.stdout).toMatch(/^usage: corral/);
  });

  it('a flag the tool call does not know exits 2 naming the nearest known flag, and writes nothing', () => {
    const r = corral('write_file', '{"path":"new.txt","content":"x"}', '--root', t.root, '--read-only');
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^corral: unknown flag '--read-only'; did you mean '--root'\?/);
    expect(existsSync(join(t.root, 'new.txt'))).toBe(false);
    const tools = corral('tools', '--rot', t.root);
    expect(tools.status).toBe(2);
    expect(tools.stderr).toMatch(/unknown flag '--rot'; did you mean '--root'\?/);
    const extra = corral('write_file', '{"path":"new.txt","content":"x"}', 'read-only', '--root', t.root);
    expect(extra.status).toBe(2);
    expect(extra.stderr).toMatch(/^corral: unexpected argument 'read-only'/);
    expect(existsSync(join(t.root, 'new.txt'))).toBe(false);
  });

  it('a flag corral mcp does not know exits 2 naming the nearest known flag, before serving', () => {
    const r = corral('mcp', '--root', t.root, '--allwo', 'ls');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^corral mcp: unknown flag '--allwo'; did you mean '--allow'\?/);
    expect(r.stderr).not.toContain('serving');
  });

  it('--version prints the package version', () => {
    for (const args of [['--version'], ['mcp', '--version']]) {
      const r = corral(...args);
      expect(r.status, args.join(' ')).toBe(0);
      expect(r.stdout).toBe(`${version}\n`);
    }
  });

  it('--help prints the usage with every flag and exits 0, for corral and corral mcp', () => {
    const r = corral('--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: corral/);
    for (const flag of ['--root', '--help', '--version']) expect(r.stdout).toContain(flag);
    const mcp = corral('mcp', '--help');
    expect(mcp.status).toBe(0);
    expect(mcp.stderr).toMatch(/^usage: corral mcp --root DIR/);
    for (const flag of ['--allow', '--deny', '--client-approves', '--read-only', '--tools', '--sandbox', '--image', '--help', '--version']) expect(mcp.stderr).toContain(flag);
  });
});
