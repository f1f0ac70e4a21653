// The corral bin: `node bin/corral.js <tool> '<json args>' --root DIR` and `corral tools`.
import { describe, it, expect, afterAll } from 'vitest';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempTree } from './helpers.mjs';

const BIN = fileURLToPath(new URL('../bin/corral.js', import.meta.url));
const t = tempTree({ 'notes.md': '# Notes\nalpha line\n', 'src/a.ts': 'export const alpha = 1;\n' });
writeFileSync(join(t.dir, 'secret.txt'), 'outside the root\n');
afterAll(() => t.cleanup());

const corral = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });

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
});
