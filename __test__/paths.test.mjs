// "What is enforced": path normalization and the .git rules.
import { describe, it, expect } from 'vitest';
import { normalizeWorkspacePath, WorkspaceError, MemoryWorkspace, createFsTools } from 'corral';

const refused = (fn) => {
  try { fn(); } catch (e) { return e; }
  throw new Error('expected a refusal');
};

describe('normalizeWorkspacePath', () => {
  it('normalizes ordinary paths to relative, slash-separated form', () => {
    expect(normalizeWorkspacePath('./src//a/../b.ts')).toBe('src/b.ts');
    expect(normalizeWorkspacePath('src\\lib\\x.ts', 'posix')).toBe('src/lib/x.ts');
    expect(normalizeWorkspacePath('.')).toBe('.');
  });

  const everywhere = ['../secret', 'src/../../secret', '/etc/passwd', 'C:\\Windows', 'C:secret', '\\\\server\\share', '//server/share', '\\\\?\\C:\\', 'src/..\\..\\secret', 'a\0b'];
  for (const flavor of ['posix', 'win32', undefined]) {
    for (const p of everywhere) {
      it(`refuses ${JSON.stringify(p)} with flavor ${flavor ?? 'both'}`, () => {
        const e = refused(() => normalizeWorkspacePath(p, flavor));
        expect(e).toBeInstanceOf(WorkspaceError);
        expect(e.name).toBe('WorkspaceError');
        expect(e.code).toBe('OutsideWorkspace');
        expect(e.message).not.toContain(process.cwd());
      });
    }
  }

  it('refuses an absolute path that points inside the root', () => {
    expect(refused(() => normalizeWorkspacePath(`${process.cwd()}/package.json`)).code).toBe('OutsideWorkspace');
  });

  it('applies the Windows-only rules for win32 and with no flavor', () => {
    for (const p of ['a.txt:stream', 'CON', 'nul.txt', 'COM1', 'LPT9', '...', '.. ', 'a/. .']) {
      expect(refused(() => normalizeWorkspacePath(p, 'win32')).code, p).toBe('OutsideWorkspace');
      expect(refused(() => normalizeWorkspacePath(p)).code, p).toBe('OutsideWorkspace');
    }
    expect(normalizeWorkspacePath('a.txt:stream', 'posix')).toBe('a.txt:stream');
    expect(normalizeWorkspacePath('CON', 'posix')).toBe('CON');
  });

  it('rejects a non-string path with a WorkspaceError naming the problem', () => {
    const e = refused(() => normalizeWorkspacePath(42));
    expect(e.code).toBe('InvalidArguments');
    expect(e.message).toMatch(/string/);
  });
});

describe('the file tools keep out of .git', () => {
  const ws = () => new MemoryWorkspace({ files: { '.git/config': '[http] extraheader = AUTHORIZATION: basic abc', 'sub/.git': 'gitdir: /host/path', '.gitignore': 'dist\n', '.github/ci.yml': 'on: push\n', 'src/a.ts': 'a\n' } });
  const tool = (tools, name) => tools.find((t) => t.name === name);

  for (const p of ['.git/config', 'sub/.git', './.git/config', 'a/../.git/config', '.git\\config', '.git/', '.GIT/config', '.git./config', '.git /config', 'GIT~1/config']) {
    it(`read_file refuses ${p}`, async () => {
      const tools = createFsTools(ws());
      await expect(tool(tools, 'read_file').execute({ path: p })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Denied' });
    });
  }

  it('write_file and edit_file refuse .git paths and write nothing', async () => {
    const w = ws();
    const tools = createFsTools(w);
    await expect(tool(tools, 'write_file').execute({ path: '.git/hooks/pre-commit', content: 'x' })).rejects.toMatchObject({ code: 'Denied' });
    await expect(tool(tools, 'edit_file').execute({ path: '.git/config', old_string: 'basic', new_string: 'x' })).rejects.toMatchObject({ code: 'Denied' });
    expect(w.snapshot()['.git/config']).toContain('basic abc');
    expect(w.snapshot()['.git/hooks/pre-commit']).toBeUndefined();
  });

  it('.gitignore and .github are not affected', async () => {
    const tools = createFsTools(ws());
    expect(await tool(tools, 'read_file').execute({ path: '.gitignore' })).toBe(' 1\tdist');
    expect(await tool(tools, 'list_dir').execute({})).toBe('.github/\n.gitignore\nsrc/\nsub/');
  });

  it('listings leave .git out even with ignore: []', async () => {
    const tools = createFsTools(ws(), { ignore: [] });
    const all = await tool(tools, 'glob').execute({ pattern: '**/*' });
    expect(all.split('\n')).toEqual(['.github/ci.yml', '.gitignore', 'src/a.ts']);
    const g = await tool(tools, 'grep').execute({ pattern: 'AUTHORIZATION|gitdir' });
    expect(g).toBe('No matches found.');
  });

  it('deny adds names and [] turns the check off', async () => {
    const w = new MemoryWorkspace({ files: { '.env': 'KEY=1', 'app/secrets/k': 'k', '.git/config': 'c' } });
    const strict = createFsTools(w, { deny: ['.git', '.env', 'secrets'] });
    await expect(tool(strict, 'read_file').execute({ path: '.env' })).rejects.toMatchObject({ code: 'Denied' });
    await expect(tool(strict, 'read_file').execute({ path: 'app/secrets/k' })).rejects.toMatchObject({ code: 'Denied' });
    const open = createFsTools(w, { deny: [] });
    expect(await tool(open, 'read_file').execute({ path: '.git/config' })).toBe(' 1\tc');
  });
});
