// "Secrets stay out of the model": what the tools give the model has each secret replaced by a
// marker, edits through markers are exact, and `redact: false` is the reference's output.
import { describe, it, expect, afterAll } from 'vitest';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { NodeWorkspace, createFsTools, createShellTool, createRedactor, WorkspaceToolRegistry, MemoryToolStore, ConfigurationError } from 'corral';
import { createEditor } from 'corral/openai-agents';
import { tempTree } from './helpers.mjs';

// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them.
const win = process.platform === 'win32';
/** `cat` of workspace files. */
const cat = (...paths) => (win ? paths.map((p) => `type ${p.replaceAll('/', '\\')}`).join('& ') : `cat ${paths.join(' ')}`);
/** `node -e <script>` as cmd.exe reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

/** A token of `n` characters cycling through `alphabet` (synthesized: valid in form, never real). */
const fill = (alphabet, n, seed) => Array.from({ length: n }, (_, i) => alphabet[(i * 7 + seed) % alphabet.length]).join('');
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const OPENAI = `sk-proj-${fill(ALNUM, 74, 1)}T3BlbkFJ${fill(ALNUM, 74, 2)}`;
const NPM = `npm_${fill(ALNUM, 36, 3)}`;
const AWS_ID = `AKIA${fill('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16, 4)}`;
const GITHUB = `ghp_${fill(ALNUM, 36, 5)}`;
const PEM_BODY = Array.from({ length: 12 }, (_, i) => fill(ALNUM, 64, i)).join('\n');
const PEM = `-----BEGIN RSA PRIVATE KEY-----\n${PEM_BODY}\n-----END RSA PRIVATE KEY-----\n`;
// A value of the Node process's environment under a secret-like name: a secret by name.
const ENV_VALUE = `env-${fill(ALNUM, 24, 6)}`;
process.env.CORRAL_REDACT_TEST_TOKEN = ENV_VALUE;

// Source files that merely look random: none of it is a secret (nor holds one of the above).
const PLAIN = [...ALNUM].reverse().join('');
const ORDINARY = {
  'package-lock.json': JSON.stringify({ packages: { 'node_modules/a': { version: '1.0.0', integrity: `sha512-${fill(PLAIN, 86, 7)}==`, resolved: 'https://registry.npmjs.org/a/-/a-1.0.0.tgz' } } }, null, 2),
  'src/ids.ts': `export const ID = '3f2b8c1e-9d4a-4f6b-8e2c-1a5d7b9c0e3f';\nexport const COMMIT = '${fill('fedcba9876543210', 40, 8)}';\n`,
  'src/logo.ts': `export const LOGO = 'data:image/png;base64,iVBORw0KGgo${fill(PLAIN, 200, 9)}';\n`,
  'dist/app.min.js': `!function(e){var t={};function n(r){if(t[r])return t[r].exports}n.m=e}([function(e,t){e.exports="${fill(PLAIN, 120, 10)}"}]);\n`,
};

const FILES = {
  '.env': `OPENAI_API_KEY=${OPENAI}\nDEBUG=0\n`,
  '.npmrc': `//registry.npmjs.org/:_authToken=${NPM}\n`,
  'keys/id_rsa': PEM,
  'aws/credentials': `[default]\naws_access_key_id = ${AWS_ID}\nregion = eu-west-1\n`,
  'src/config.ts': `export const token = '${GITHUB}';\nexport const other = 1;\n`,
  ...ORDINARY,
};

function setup(options = {}) {
  const t = tempTree(FILES);
  trees.push(t);
  const ws = new NodeWorkspace({ root: t.root });
  const redactor = options.redact ?? createRedactor();
  const fsTools = Object.fromEntries(createFsTools(ws, { include: ['apply_patch'], redact: redactor }).map((x) => [x.name, x]));
  const made = createShellTool(ws, { needsApproval: false, background: true, redact: redactor, env: { CORRAL_REDACT_TEST_TOKEN: ENV_VALUE }, ...options.shell });
  const [shell, ...processTools] = Array.isArray(made) ? made : [made];
  const proc = Object.fromEntries(processTools.map((x) => [x.name, x]));
  const disk = (p) => readFileSync(join(t.root, p), 'utf8');
  return { t, ws, fs: fsTools, shell, proc, disk, redactor, close: () => made.close?.() };
}

const SECRETS = [OPENAI, NPM, AWS_ID, GITHUB, ENV_VALUE, ...PEM_BODY.split('\n')];
const expectNoSecret = (text) => {
  for (const s of SECRETS) expect(text).not.toContain(s);
};

describe('redaction at the boundary (on by default)', () => {
  it('read_file shows markers for the secrets of .env, .npmrc, a PEM key and AWS credentials', async () => {
    const { fs } = setup();
    const env = await fs.read_file.execute({ path: '.env' });
    expect(env).toMatch(/^ *1\tOPENAI_API_KEY=\[secret:openai-api-key#1\]\n *2\tDEBUG=0$/);
    expect(await fs.read_file.execute({ path: '.npmrc' })).toMatch(/^ *1\t\/\/registry.npmjs.org\/:_authToken=\[secret:npm-access-token#2\]$/);
    const pem = await fs.read_file.execute({ path: 'keys/id_rsa' });
    expectNoSecret(pem);
    // A multi-line secret keeps its line count: the numbering stays true.
    expect(pem.split('\n')).toHaveLength(PEM.trimEnd().split('\n').length);
    expect(pem.split('\n').every((l) => /^ *\d+\t\[secret:private-key#\d+\]$/.test(l))).toBe(true);
    expect(await fs.read_file.execute({ path: 'aws/credentials' })).toContain('aws_access_key_id = [secret:aws-access-key-id#');
  });

  it('a token far down a long file is a marker where read_file shows it', async () => {
    const { t, fs } = setup();
    const lines = Array.from({ length: 3000 }, (_, i) => `line ${i + 1}`);
    lines[2499] = `token = "${GITHUB}"`;
    writeFileSync(join(t.root, 'long.txt'), `${lines.join('\n')}\n`);
    const first = await fs.read_file.execute({ path: 'long.txt' });
    expect(first).not.toContain('ghp_');
    const there = await fs.read_file.execute({ path: 'long.txt', offset: 2490, limit: 20 });
    expect(there).toContain('2500\ttoken = "[secret:github-pat#');
    expectNoSecret(there);
    expectNoSecret(await fs.read_file.execute({ path: 'long.txt', offset: -600 }));
  });

  it('a cut by characters shows no secret: not one a shorter marker lets in, nor a key block it cuts', async () => {
    const { t, ws } = setup();
    const read = createFsTools(ws, { maxOutputChars: 400 }).find((x) => x.name === 'read_file');
    // A long token on line 1 becomes a short marker, so line 3 fits in the cut after all.
    const PYPI = `pypi-AgEIcHlwaS5vcmc${fill(ALNUM, 900, 11)}`;
    writeFileSync(join(t.root, 'tokens.txt'), `upload = ${PYPI}\nx\ngithub = ${GITHUB}\n${'filler line\n'.repeat(100)}`);
    const shown = await read.execute({ path: 'tokens.txt' });
    expect(shown).toMatch(/^ *1\tupload = \[secret:pypi-upload-token#\d+\]\n *2\tx\n *3\tgithub = \[secret:github-pat#\d+\]\n/);
    expect(shown).not.toContain(PYPI.slice(0, 40));
    expectNoSecret(shown);
    // A key block that begins before the cut and ends after it.
    writeFileSync(join(t.root, 'key.txt'), `key:\n${PEM}`);
    const key = await read.execute({ path: 'key.txt' });
    expect(key).toMatch(/^ *1\tkey:\n *2\t\[secret:private-key#\d+\]\n *3\t\[secret:private-key#\d+\]/);
    expectNoSecret(key);
  });

  it('a secret is never shown in part by a cut: the file is redacted whole before it', async () => {
    const { fs } = setup();
    const cut = await fs.read_file.execute({ path: 'keys/id_rsa', offset: 3, limit: 2 });
    expectNoSecret(cut);
    expect(cut).toMatch(/^ *3\t\[secret:private-key#\d+\]\n *4\t\[secret:private-key#\d+\]/);
  });

  it('grep lines show markers, a PEM body line included', async () => {
    const { fs } = setup();
    const out = await fs.grep.execute({ pattern: 'API_KEY|_authToken|aws_access|ghp_|' + PEM_BODY.split('\n')[3].slice(0, 20) });
    expectNoSecret(out);
    expect(out).toContain('.env:1: OPENAI_API_KEY=[secret:openai-api-key#');
    expect(out).toContain('keys/id_rsa:5: [secret:private-key#');
    expect(out).toContain("src/config.ts:1: export const token = '[secret:github-pat#");
  });

  it('cat and env through the shell tool show markers, and so does a background read', async () => {
    const { shell, proc, close } = setup();
    const typed = await shell.execute({ command: cat('.env', '.npmrc', 'aws/credentials', 'keys/id_rsa') });
    expectNoSecret(JSON.stringify(typed));
    expect(typed.stdout).toContain('OPENAI_API_KEY=[secret:openai-api-key#');
    const env = await shell.execute({ command: win ? 'set' : 'env' });
    expect(env.stdout).toMatch(/CORRAL_REDACT_TEST_TOKEN=\[secret:env#\d+\]/);
    expectNoSecret(env.stdout);
    const started = await shell.execute({ command: win ? 'type .env& echo done' : 'cat .env; echo done', run_in_background: true });
    let read = '';
    for (let i = 0; i < 50 && !read.includes('done'); i++) read += (await proc.process_output.execute({ id: started.id, wait_ms: 200 })).stdout;
    expect(read).toContain('[secret:openai-api-key#');
    expectNoSecret(read);
    await close();
  });

  it('process_stop gives what the process printed last redacted too', async () => {
    const { shell, proc, close } = setup();
    const started = await shell.execute({ command: win ? 'type .npmrc& ping -n 31 127.0.0.1 >nul' : 'sleep 0.3; cat .npmrc; sleep 30', run_in_background: true });
    await new Promise((r) => setTimeout(r, 1000));
    const stopped = await proc.process_stop.execute({ id: started.id });
    expect(JSON.stringify(stopped)).toContain('[secret:npm-access-token#');
    expectNoSecret(JSON.stringify(stopped));
    await close();
  });

  it('a line of a key the model quotes back in a patch is not shown by the error that repeats it', async () => {
    const { fs } = setup();
    const shown = await fs.read_file.execute({ path: 'keys/id_rsa' });
    const marker = shown.split('\n')[4].split('\t')[1];
    const e = await fs.apply_patch.execute({ input: `*** Begin Patch\n*** Update File: keys/id_rsa\n@@\n ${marker} zz\n-nothing\n+x\n*** End Patch` }).catch((x) => x);
    expect(e).toBeInstanceOf(Error);
    expectNoSecret(e.message);
  });

  it('text without a secret is byte for byte what redact: false returns', async () => {
    const on = setup();
    const off = setup({ redact: false });
    for (const path of Object.keys(ORDINARY)) {
      const a = await on.fs.read_file.execute({ path });
      expect(a).toBe(await off.fs.read_file.execute({ path }));
    }
    const args = { pattern: 'export|integrity|function' };
    expect(await on.fs.grep.execute(args)).toContain('integrity');
    const files = { pattern: 'integrity|COMMIT|LOGO|exports' };
    expect(await on.fs.grep.execute(files)).toBe(await off.fs.grep.execute(files));
    const all = { command: cat(...Object.keys(ORDINARY)) };
    expect(await on.shell.execute(all)).toEqual(await off.shell.execute(all));
  });

  it('redact: false gives the reference output, secrets and all', async () => {
    const { fs, shell } = setup({ redact: false });
    expect(await fs.read_file.execute({ path: '.env' })).toBe(` 1\tOPENAI_API_KEY=${OPENAI}\n 2\tDEBUG=0`);
    expect((await shell.execute({ command: cat('.npmrc') })).stdout).toBe(`//registry.npmjs.org/:_authToken=${NPM}\n`);
  });

  it('errors are redacted too', async () => {
    const { fs } = setup();
    const e = await fs.read_file.execute({ path: `missing/${GITHUB}.txt` }).catch((x) => x);
    expect(e.code).toBe('NotFound');
    expect(e.message).toContain('[secret:github-pat#');
    expect(e.message).not.toContain(GITHUB);
  });

  it('a secret split between two chunks of progress is never sent in pieces', async () => {
    const events = [];
    const { shell } = setup({ shell: { background: false, progressMs: 20, onProgress: (e) => events.push(e) } });
    const half = Math.floor(GITHUB.length / 2);
    const r = await shell.execute({ command: win ? nodeE(`process.stdout.write('token=${GITHUB.slice(0, half)}'); setTimeout(() => process.stdout.write('${GITHUB.slice(half)} end\\n'), 300)`) : `printf 'token=${GITHUB.slice(0, half)}'; sleep 0.3; printf '${GITHUB.slice(half)} end\\n'` });
    expect(r.stdout).toMatch(/^token=\[secret:github-pat#\d+\] end\n$/);
    const streamed = events.filter((e) => e.stream === 'stdout').map((e) => e.text).join('');
    expect(streamed).toBe(r.stdout);
    for (const e of events) expect(e.text).not.toContain(GITHUB.slice(0, 8));
  });

  it('onDispatch events carry redacted arguments', async () => {
    const { ws } = setup();
    const events = [];
    const registry = new WorkspaceToolRegistry({ store: new MemoryToolStore(), onDispatch: (e) => events.push(e) });
    const [read] = await registry.toolsFor('w', { builtins: createFsTools(ws, { redact: false }).filter((x) => x.name === 'read_file') });
    await read.execute({ path: `${GITHUB}.txt` }).catch(() => {});
    expect(events).toHaveLength(1);
    expect(JSON.stringify(events[0])).not.toContain(GITHUB);
    expect(events[0].args.path).toMatch(/^\[secret:github-pat#\d+\]\.txt$/);
  });

  it('a redact option of the wrong kind is a ConfigurationError', () => {
    const ws = new NodeWorkspace({ root: setup().t.root });
    expect(() => createFsTools(ws, { redact: 'yes' })).toThrow(ConfigurationError);
    expect(() => createShellTool(ws, { redact: { rules: 'all' } })).toThrow(/rules must be 'default' or false/);
    expect(() => createRedactor({ value: ['x'] })).toThrow(/did you mean values/);
  });
});

describe('markers round-trip in edits', () => {
  it('edit_file through a marker leaves every other byte identical', async () => {
    const { fs, disk } = setup();
    const before = disk('.env');
    const shown = await fs.read_file.execute({ path: '.env' });
    const marker = shown.match(/\[secret:openai-api-key#\d+\]/)[0];
    await fs.edit_file.execute({ path: '.env', old_string: `OPENAI_API_KEY=${marker}\nDEBUG=0`, new_string: `OPENAI_API_KEY=${marker}\nDEBUG=1` });
    expect(disk('.env')).toBe(before.replace('DEBUG=0', 'DEBUG=1'));
  });

  it('a value cat showed through the shell tool is restored by edit_file with the same redactor', async () => {
    const { fs, shell, disk } = setup();
    const before = disk('src/config.ts');
    const shown = await shell.execute({ command: cat('src/config.ts') });
    const marker = shown.stdout.match(/\[secret:github-pat#\d+\]/)[0];
    await fs.edit_file.execute({ path: 'src/config.ts', edits: [{ old_string: `token = '${marker}'`, new_string: `token = '${marker}' // kept` }] });
    expect(disk('src/config.ts')).toBe(before.replace(`'${GITHUB}'`, `'${GITHUB}' // kept`));
  });

  it('write_file and apply_patch restore markers into the file that holds the value, and nowhere else', async () => {
    const { fs, disk } = setup();
    const shown = await fs.read_file.execute({ path: 'aws/credentials' });
    const marker = shown.match(/\[secret:aws-access-key-id#\d+\]/)[0];
    await fs.write_file.execute({ path: 'aws/credentials', content: `[default]\naws_access_key_id = ${marker}\nregion = us-east-1\n` });
    expect(disk('aws/credentials')).toBe(`[default]\naws_access_key_id = ${AWS_ID}\nregion = us-east-1\n`);
    // A new file gets the marker as text: a value never travels to a file that did not hold it.
    await fs.write_file.execute({ path: 'copy.txt', content: `id=${marker}\n` });
    expect(disk('copy.txt')).toBe(`id=${marker}\n`);
    await fs.apply_patch.execute({ input: `*** Begin Patch\n*** Update File: aws/credentials\n@@\n [default]\n-aws_access_key_id = ${marker}\n+aws_access_key_id = ${marker}\n+output = json\n region = us-east-1\n*** End Patch` });
    expect(disk('aws/credentials')).toBe(`[default]\naws_access_key_id = ${AWS_ID}\noutput = json\nregion = us-east-1\n`);
  });

  it('an environment value is never written into the workspace, and a marker never issued is text', async () => {
    const { t, fs, shell, disk } = setup();
    writeFileSync(join(t.root, 'leak.txt'), `v=${ENV_VALUE}\n`);
    const shown = await fs.read_file.execute({ path: 'leak.txt' });
    const marker = shown.match(/\[secret:env#\d+\]/)[0];
    const e = await fs.edit_file.execute({ path: 'leak.txt', old_string: `v=${marker}`, new_string: 'v=1' }).catch((x) => x);
    expect(e.code).toBe('NoMatch');
    expect(disk('leak.txt')).toBe(`v=${ENV_VALUE}\n`);
    await fs.write_file.execute({ path: 'never.txt', content: '[secret:github-pat#999]\n' });
    expect(disk('never.txt')).toBe('[secret:github-pat#999]\n');
    // A whole-file write would replace the value by the marker's text: refused, the file as it was.
    const w = await fs.write_file.execute({ path: 'leak.txt', content: `v=${marker}\nmore\n` }).catch((x) => x);
    expect(w.code).toBe('InvalidArguments');
    expect(disk('leak.txt')).toBe(`v=${ENV_VALUE}\n`);
    void shell;
  });

  it("the OpenAI Agents editor's diffs restore the markers the default tools showed, exactly", async () => {
    const t = tempTree(FILES);
    trees.push(t);
    const ws = new NodeWorkspace({ root: t.root });
    // Both on the process's shared redactor (redact: true), in one session.
    const read = createFsTools(ws).find((x) => x.name === 'read_file');
    const shown = await read.execute({ path: '.env' }, { sessionId: 'agent-1' });
    const marker = shown.match(/\[secret:openai-api-key#\d+\]/)[0];
    const editor = createEditor(ws, { sessionId: 'agent-1' });
    await editor.updateFile({ path: '.env', diff: `@@\n OPENAI_API_KEY=${marker}\n-DEBUG=0\n+DEBUG=1\n` });
    expect(readFileSync(join(t.root, '.env'), 'utf8')).toBe(`OPENAI_API_KEY=${OPENAI}\nDEBUG=1\n`);
  });

  it('markers stay text in shell commands', async () => {
    const { fs, shell, disk } = setup();
    const shown = await fs.read_file.execute({ path: 'src/config.ts' });
    const marker = shown.match(/\[secret:github-pat#\d+\]/)[0];
    await shell.execute({ command: win ? nodeE(`require('fs').writeFileSync('out.txt', '${marker}')`) : `printf '%s' '${marker}' > out.txt` });
    expect(disk('out.txt')).toBe(marker);
  });
});
