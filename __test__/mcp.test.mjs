// `corral mcp` tested over a real stdio transport, spawning the bin, with both generations of the
// MCP SDK's own clients: SDK 1.x (protocol 2025-11-25) and SDK v2 pinned to 2026-07-28.
import { describe, it, expect, afterAll, beforeAll, beforeEach, afterEach } from 'vitest';
import { writeFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { Client as ClientV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioClientTransportV2 } from '@modelcontextprotocol/client/stdio';
import { linuxSandboxUsable as linuxUsable, tempTree } from './helpers.mjs';

const BIN = fileURLToPath(new URL('../bin/corral.js', import.meta.url));

// On Windows the shell is cmd.exe: the commands written in `sh` have a form for it beside them.
const win = process.platform === 'win32';
/** `node -e <script>` as the shell reads it (the script has no double quotes). */
const nodeE = (script) => `"${process.execPath}" -e "${script}"`;
/** A command that makes an empty file. */
const touch = (name) => (win ? `copy nul ${name}` : `touch ${name}`);
/** What the shell's echo ends a line with. */
const EOL = win ? '\r\n' : '\n';
const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

/** The protocol revisions the server speaks, each with the SDK client that speaks it. */
const ERAS = ['2025-11-25', '2026-07-28'];
const MODERN = '2026-07-28';

/**
 * A client of `corral mcp args` speaking `era`; with `answer`, it declares elicitation and answers
 * each request with it (a 2026 `input_required` is answered through the same handler). `call`
 * takes a tools/call's params and request options (signal, onprogress) in either SDK's form.
 */
async function connect(args, { answer, era = ERAS[0] } = {}) {
  const modern = era === MODERN;
  const capabilities = answer ? { capabilities: { elicitation: modern ? { form: {} } : {} } } : {};
  const client = modern
    ? new ClientV2({ name: 'corral-test', version: '1.0.0' }, { ...capabilities, versionNegotiation: { mode: { pin: MODERN } } })
    : new Client({ name: 'corral-test', version: '1.0.0' }, answer ? capabilities : undefined);
  const asked = [];
  if (answer) {
    const handler = async (request) => {
      asked.push(request.params);
      return typeof answer === 'function' ? answer(request.params) : answer;
    };
    if (modern) client.setRequestHandler('elicitation/create', handler);
    else client.setRequestHandler(ElicitRequestSchema, handler);
  }
  const stderr = [];
  const Transport = modern ? StdioClientTransportV2 : StdioClientTransport;
  const transport = new Transport({ command: process.execPath, args: [BIN, 'mcp', ...args], stderr: 'pipe' });
  transport.stderr?.on('data', (d) => stderr.push(String(d)));
  await client.connect(transport);
  const call = (params, options) => (modern ? client.callTool(params, options) : client.callTool(params, undefined, options));
  return { client, call, stderr, asked, close: () => client.close() };
}

/** The allowed commands of the first tree: print src/a.js, and a script that waits 1 s then makes `marker`. */
const CAT = win ? 'type src\\a.js' : 'cat src/a.js';
const SLOW = win ? 'slow.cmd' : 'sh slow.sh';

for (const era of ERAS) {
describe(`corral mcp (${era} client)`, () => {
  let t;
  let conn;
  beforeAll(async () => {
    t = tempTree(win
      ? { 'src/a.js': 'const a = 1;\n', 'slow.cmd': '@ping -n 2 127.0.0.1 >nul\r\n@copy nul marker >nul\r\n' }
      : { 'src/a.js': 'const a = 1;\n', 'slow.sh': 'sleep 1\ntouch marker\n' });
    trees.push(t);
    writeFileSync(join(t.root, 'logo.png'), Buffer.from('89504e470d0a1a0a0000000d494844520000000200000002080600000000000000', 'hex'));
    conn = await connect(['--root', t.root, '--allow', CAT, '--allow', SLOW], { era });
  });
  afterAll(() => conn?.close());

  it('lists every tool with its schema and read-only or destructive hints', async () => {
    const { tools } = await conn.client.listTools();
    expect(tools.map((x) => x.name)).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'shell']);
    const by = Object.fromEntries(tools.map((x) => [x.name, x]));
    expect(by.read_file.inputSchema.required).toEqual(['path']);
    expect(by.grep.annotations).toMatchObject({ readOnlyHint: true });
    for (const n of ['write_file', 'edit_file', 'shell']) expect(by[n].annotations).toMatchObject({ destructiveHint: true });
  });

  it('calls tools: text content, a WorkspaceError as isError, an image as image content, an unknown tool cleanly', async () => {
    const read = await conn.client.callTool({ name: 'read_file', arguments: { path: 'src/a.js' } });
    expect(read).toMatchObject({ content: [{ type: 'text', text: ' 1\tconst a = 1;' }] });
    expect(read.isError).toBeFalsy();
    const refused = await conn.client.callTool({ name: 'read_file', arguments: { path: '../x' } });
    expect(refused.isError).toBe(true);
    expect(refused.content[0].text).toMatch(/^OutsideWorkspace: /);
    const img = await conn.client.callTool({ name: 'read_file', arguments: { path: 'logo.png' } });
    expect(img.content[1]).toMatchObject({ type: 'image', mimeType: 'image/png' });
    const unknown = await conn.client.callTool({ name: 'nope', arguments: {} });
    expect(unknown.isError).toBe(true);
    const shell = await conn.client.callTool({ name: 'shell', arguments: { command: CAT } });
    expect(shell.structuredContent).toMatchObject({ exitCode: 0, stdout: 'const a = 1;\n' });
    // Readable text, not escaped JSON: stdout, then [stderr] and its text, then the exit code.
    expect(shell.content).toEqual([{ type: 'text', text: 'const a = 1;\n[exit code 0]' }]);
    const denied = await conn.client.callTool({ name: 'shell', arguments: { command: 'rm -rf src' } });
    expect(denied.isError).toBe(true);
    expect(existsSync(join(t.root, 'src/a.js'))).toBe(true);
  });

  it('the shell declares its structured result, and a long command reports progress to a client that asked', async () => {
    const { tools } = await conn.client.listTools();
    const shell = tools.find((x) => x.name === 'shell');
    expect(shell.outputSchema).toMatchObject({ type: 'object', required: ['stdout', 'stderr'] });
    expect(tools.find((x) => x.name === 'read_file').outputSchema).toBeUndefined();
    const free = await connect(['--root', t.root, '--client-approves'], { era });
    try {
      const command = win ? nodeE("process.stdout.write('out'); process.stderr.write('err\\n'); process.exitCode = 3") : 'printf out; echo err >&2; exit 3';
      const both = await free.client.callTool({ name: 'shell', arguments: { command } });
      expect(both.content[0].text).toBe('out\n[stderr]\nerr\n[exit code 3]');
      const seen = [];
      const slow = win ? nodeE("console.log('first'); setTimeout(() => console.log('second'), 1000)") : 'echo first; sleep 1; echo second';
      const r = await free.call({ name: 'shell', arguments: { command: slow } },
        { onprogress: (p) => seen.push(p), timeout: 30_000 });
      expect(r.structuredContent).toMatchObject({ exitCode: 0, stdout: 'first\nsecond\n' });
      expect(seen.length).toBeGreaterThan(0);
      expect(seen[0].message).toContain('first');
      expect(seen.map((p) => p.progress)).toEqual(seen.map((_, i) => i + 1));
    } finally {
      await free.close();
    }
  });

  it('a cancellation from the client aborts the running call, and the server keeps serving', async () => {
    const ac = new AbortController();
    const started = Date.now();
    const running = conn.call({ name: 'shell', arguments: { command: SLOW } }, { signal: ac.signal });
    setTimeout(() => ac.abort(), 300);
    await expect(running).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(3000); // a hang bound: the command sleeps 1 s, and the marker check below is the proof
    // The command was killed: it never got to its second line.
    await new Promise((r) => setTimeout(r, 1500));
    expect(existsSync(join(t.root, 'marker'))).toBe(false);
    const again = await conn.client.callTool({ name: 'list_dir', arguments: {} });
    expect(again.content[0].text).toContain('src/');
  });

  it('--tools all adds the agent tools with hints, and --read-only still serves only reading tools', async () => {
    const all = await connect(['--root', t.root, '--tools', 'all'], { era });
    try {
      const { tools } = await all.client.listTools();
      const names = tools.map((x) => x.name);
      expect(names).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'apply_patch', 'move_file', 'delete_file', 'make_dir', 'file_info', 'read_files',
        'shell', 'process_output', 'process_input', 'process_stop', 'process_list']);
      const hints = Object.fromEntries(tools.map((x) => [x.name, x.annotations]));
      expect(hints.file_info).toEqual({ readOnlyHint: true });
      expect(hints.delete_file).toEqual({ readOnlyHint: false, destructiveHint: true });
      expect(hints.process_output).toEqual({ readOnlyHint: true });
      expect(tools.find((x) => x.name === 'shell').inputSchema.properties.run_in_background.type).toBe('boolean');
      const r = await all.client.callTool({ name: 'read_files', arguments: { paths: ['nope.txt'] } });
      expect(r.content[0].text).toBe('==> nope.txt <==\n(File not found: nope.txt)');
    } finally {
      await all.close();
    }
    const ro = await connect(['--root', t.root, '--read-only', '--tools', 'all'], { era });
    try {
      const { tools } = await ro.client.listTools();
      expect(tools.map((x) => x.name)).toEqual(['read_file', 'list_dir', 'glob', 'grep', 'file_info', 'read_files']);
    } finally {
      await ro.close();
    }
  });

  it('redacts secrets in results and progress by default; --no-redact gives them as they are', async () => {
    const key = `ghp_${'aB3dE6gH9kLmN2pQ5sT8vW1yZ4cF7jR0uX6w'.slice(0, 36)}`;
    const own = tempTree({ '.npmrc': `token=${key}\n` });
    trees.push(own);
    const on = await connect(['--root', own.root, '--read-only'], { era });
    const off = await connect(['--root', own.root, '--read-only', '--no-redact'], { era });
    try {
      const shown = await on.client.callTool({ name: 'read_file', arguments: { path: '.npmrc' } });
      expect(shown.content[0].text).toMatch(/^ 1\ttoken=\[secret:github-pat#\d+\]$/);
      const plain = await off.client.callTool({ name: 'read_file', arguments: { path: '.npmrc' } });
      expect(plain.content[0].text).toBe(` 1\ttoken=${key}`);
    } finally {
      await on.close();
      await off.close();
    }
  });

  it('--read-only offers only the read tools', async () => {
    const ro = await connect(['--root', t.root, '--read-only'], { era });
    try {
      const { tools } = await ro.client.listTools();
      expect(tools.map((x) => x.name)).toEqual(['read_file', 'list_dir', 'glob', 'grep']);
      expect(ro.stderr.join('')).toContain('serving 4 tools');
    } finally {
      await ro.close();
    }
  });

  it.skipIf(!linuxUsable)('--sandbox linux runs the shell in LinuxSandbox: the root is writable, the host is not', async () => {
    writeFileSync(join(t.root, 'probe.sh'), 'echo in > made.txt; echo x > /etc/corral-mcp-escape; cat made.txt\n');
    const sb = await connect(['--root', t.root, '--sandbox', 'linux', '--allow', 'sh probe.sh'], { era });
    try {
      const r = await sb.client.callTool({ name: 'shell', arguments: { command: 'sh probe.sh' } });
      expect(r.isError, JSON.stringify(r)).toBeFalsy();
      expect(r.structuredContent.stdout).toBe('in\n');
      expect(r.structuredContent.stderr).toMatch(/Read-only file system/);
      expect(existsSync(join(t.root, 'made.txt'))).toBe(true);
      expect(existsSync('/etc/corral-mcp-escape')).toBe(false);
    } finally {
      await sb.close();
    }
  });

  it('an unknown --sandbox is refused with the usage', async () => {
    const e = await connect(['--root', t.root, '--sandbox', 'vm'], { era }).catch((err) => err);
    expect(e).toBeInstanceOf(Error);
  });
});

describe(`corral mcp asks before a command runs (${era} client)`, () => {
  const RUN_SCHEMA = { type: 'object', properties: { run: { type: 'boolean', title: 'Run this command' } }, required: ['run'] };
  const ACCEPT = { action: 'accept', content: { run: true } };
  let t;
  let root;
  let conns;
  beforeEach(() => {
    t = tempTree();
    // A root with a name of its own, so the approval message can be checked for it.
    root = join(t.dir, 'approval-proj');
    mkdirSync(root);
    writeFileSync(join(root, 'keep.txt'), 'keep\n');
    conns = [];
  });
  afterEach(async () => {
    for (const c of conns) await c.close();
    t.cleanup();
  });
  const open = async (args, options) => {
    const c = await connect(args, { ...options, era });
    conns.push(c);
    return c;
  };
  const shell = (c, command) => c.client.callTool({ name: 'shell', arguments: { command } });

  it('a client that cannot ask its user gets a command --allow does not name refused, naming both ways out', async () => {
    const c = await open(['--root', root]);
    const escape = join(t.dir, 'x');
    const command = `cd / && id > ${escape}`;
    const r = await shell(c, command);
    expect(r.isError).toBe(true);
    expect(r.content[0].text).toMatch(/^Not run: this command needs approval and this client cannot ask for it/);
    expect(r.content[0].text).toContain(`--allow '${command}'`);
    expect(r.content[0].text).toContain('--client-approves');
    expect(existsSync(escape)).toBe(false);
  });

  it('a command the user approves runs; the request names the command and the root by its name only', async () => {
    const c = await open(['--root', root], { answer: ACCEPT });
    const r = await shell(c, 'echo approved > made.txt');
    expect(r.isError, JSON.stringify(r)).toBeFalsy();
    expect(existsSync(join(root, 'made.txt'))).toBe(true);
    expect(c.asked).toHaveLength(1);
    expect(c.asked[0].message).toContain('echo approved > made.txt');
    expect(c.asked[0].message).toContain('approval-proj');
    expect(c.asked[0].message).not.toContain(t.dir);
    expect(c.asked[0].requestedSchema).toEqual(RUN_SCHEMA);
  });

  it('the request shows the command\'s stdin and escapes what could hide the rest of it', async () => {
    const c = await open(['--root', root], { answer: { action: 'decline' } });
    await c.client.callTool({ name: 'shell', arguments: { command: 'sh\r' + ' '.repeat(200) + '\u202eecho hi', stdin: 'rm -rf ~\n' } });
    const m = c.asked[0].message;
    expect(m).toContain('rm -rf ~');
    expect(m).toContain('\\u{d}');
    expect(m).toContain('\\u{202e}');
    expect(m).not.toMatch(/[\r\u202e]/);
  });

  for (const [what, answer] of [
    ['declines', { action: 'decline' }],
    ['cancels', { action: 'cancel' }],
    ['accepts without run', { action: 'accept', content: { run: false } }],
  ]) {
    it(`a command runs not when the user ${what}`, async () => {
      const c = await open(['--root', root], { answer });
      const r = await shell(c, 'echo approved > made.txt');
      expect(r.isError).toBe(true);
      expect(r.content[0].text).toMatch(/^Not run: the user declined/);
      expect(c.asked).toHaveLength(1);
      expect(existsSync(join(root, 'made.txt'))).toBe(false);
    });
  }

  it('--allow runs a matching command without asking, --deny refuses one without asking, any other is asked', async () => {
    const rm = win ? 'del' : 'rm';
    const c = await open(['--root', root, '--allow', touch('allowed.txt'), '--deny', rm], { answer: { action: 'decline' } });
    const allowed = await shell(c, touch('allowed.txt'));
    expect(allowed.isError, JSON.stringify(allowed)).toBeFalsy();
    expect(existsSync(join(root, 'allowed.txt'))).toBe(true);
    const denied = await shell(c, `${rm} keep.txt`);
    expect(denied.isError).toBe(true);
    expect(denied.content[0].text).not.toMatch(/^Not run/);
    expect(existsSync(join(root, 'keep.txt'))).toBe(true);
    expect(c.asked).toHaveLength(0);
    const other = await shell(c, touch('other.txt'));
    expect(other.content[0].text).toMatch(/^Not run: the user declined/);
    expect(c.asked).toHaveLength(1);
    expect(existsSync(join(root, 'other.txt'))).toBe(false);
  });

  it('--client-approves runs a command that is not denied without asking, and refuses a denied one', async () => {
    const c = await open(['--root', root, '--client-approves', '--deny', 'rm'], { answer: ACCEPT });
    const r = await shell(c, 'echo ran > made.txt');
    expect(r.isError, JSON.stringify(r)).toBeFalsy();
    expect(existsSync(join(root, 'made.txt'))).toBe(true);
    const denied = await shell(c, 'rm keep.txt');
    expect(denied.isError).toBe(true);
    expect(existsSync(join(root, 'keep.txt'))).toBe(true);
    expect(c.asked).toHaveLength(0);
  });

  it('text for the input of a background command the user approved is put to the user too', async () => {
    // The attack: the user approves `sh` in the background; the model then writes a command to
    // its standard input, which ran unasked.
    const answers = [ACCEPT, { action: 'decline' }];
    const c = await open(['--root', root, '--tools', 'all'], { answer: () => answers.shift() ?? { action: 'decline' } });
    // On Windows the shell that reads commands from its input is cmd.
    const started = await c.client.callTool({ name: 'shell', arguments: { command: win ? 'cmd' : 'sh', run_in_background: true } });
    expect(started.isError, JSON.stringify(started)).toBeFalsy();
    const { id } = started.structuredContent;
    expect(c.asked[0].message).toMatch(/^Run this command in the background in approval-proj\?/);
    expect(c.asked[0].message).toContain('standard input is put to you too');
    const line = (name) => (win ? `${touch(name)}& echo done\r\n` : `${touch(name)}; echo done\n`);
    const input = await c.client.callTool({ name: 'process_input', arguments: { id, text: line('unasked.txt') } });
    expect(input.isError).toBe(true);
    expect(input.content[0].text).toMatch(/^Not run: the user declined/);
    expect(c.asked).toHaveLength(2);
    expect(c.asked[1].message).toContain(`standard input of the background command ${id}`);
    expect(c.asked[1].message).toContain(line('unasked.txt').trimEnd());
    // Closing its input writes no text: nothing to ask.
    const closed = await c.client.callTool({ name: 'process_input', arguments: { id, text: '', close: true } });
    expect(closed.isError, JSON.stringify(closed)).toBeFalsy();
    expect(c.asked).toHaveLength(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(join(root, 'unasked.txt'))).toBe(false);
    // The positive control: approved, the same text runs.
    const d = await open(['--root', root, '--tools', 'all'], { answer: ACCEPT });
    const again = await d.client.callTool({ name: 'shell', arguments: { command: win ? 'cmd' : 'sh', run_in_background: true } });
    const id2 = again.structuredContent.id;
    const ok = await d.client.callTool({ name: 'process_input', arguments: { id: id2, text: line('asked.txt'), close: true } });
    expect(ok.isError, JSON.stringify(ok)).toBeFalsy();
    for (let i = 0; i < 100 && !existsSync(join(root, 'asked.txt')); i++) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(join(root, 'asked.txt'))).toBe(true);
    expect(d.asked).toHaveLength(2);
  });

  it('an --allow entry for a script runner beside the file tools is warned about on stderr, not in the tool description', async () => {
    const c = await open(['--root', root, '--allow', 'npm test', '--allow', 'git status']);
    for (let i = 0; i < 100 && !c.stderr.join('').includes('warning'); i++) await new Promise((r) => setTimeout(r, 20));
    const text = c.stderr.join('');
    expect(text).toContain("corral mcp: warning: --allow 'npm test' runs code the model can change");
    expect(text).toContain('--read-only');
    expect(text).not.toContain("'git status'");
    const { tools } = await c.client.listTools();
    expect(tools.find((x) => x.name === 'shell').description).not.toContain('warning');
    const quiet = await open(['--root', root, '--allow', 'npm test', '--read-only']);
    await quiet.client.listTools();
    expect(quiet.stderr.join('')).not.toContain('warning');
  });

  it('the shell tool says what runs without asking', async () => {
    const describe = async (args, options) => {
      const c = await open(['--root', root, ...args], options);
      const { tools } = await c.client.listTools();
      return tools.find((x) => x.name === 'shell').description;
    };
    expect(await describe(['--allow', 'npm test', '--deny', 'rm'])).toMatch(/These commands run without asking: `npm test`.*any other command is refused: this client cannot ask.*Refused without asking: `rm`/);
    expect(await describe(['--allow', 'npm test'], { answer: ACCEPT })).toMatch(/These commands run without asking: `npm test`.*any other command is put to the user/);
    expect(await describe([], { answer: ACCEPT })).toMatch(/Every command is put to the user/);
    expect(await describe(['--client-approves'])).toMatch(/Every command runs without asking here/);
  });
});
}

/** `corral mcp args` spoken to line by line: `request(method, params)` resolves with the answer. */
function raw(args) {
  const child = spawn(process.execPath, [BIN, 'mcp', ...args], { stdio: ['pipe', 'pipe', 'ignore'] });
  const waiting = new Map();
  let next = 1;
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
      const m = JSON.parse(buf.slice(0, i));
      waiting.get(m.id)?.(m);
    }
  });
  const request = (method, params) => new Promise((res) => {
    const id = next++;
    waiting.set(id, res);
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });
  return { request, close: () => child.kill() };
}

/** A 2026-07-28 request's `_meta`: its version, client and capabilities. */
const envelope = (capabilities) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': capabilities,
});

describe('corral mcp on the wire, 2026-07-28', () => {
  let t;
  beforeEach(() => {
    t = tempTree({ 'a.txt': 'hi\n' });
  });
  afterEach(() => t.cleanup());

  it('answers server/discover with the 2026 revision and its tools capability, and the v2 client speaks it', async () => {
    const c = raw(['--root', t.root]);
    try {
      const { result } = await c.request('server/discover', { _meta: envelope({}) });
      expect(result.supportedVersions).toContain(MODERN);
      expect(result.capabilities.tools).toBeDefined();
      expect(result._meta['io.modelcontextprotocol/serverInfo'].name).toBe('corral');
    } finally {
      c.close();
    }
    const v2 = await connect(['--root', t.root], { era: MODERN });
    try {
      expect(v2.client.getProtocolEra()).toBe('modern');
    } finally {
      await v2.close();
    }
  });

  it('an approval answer counts once and only for the call it was asked for: unasked, replayed or for another command, nothing runs', async () => {
    // The attack: a client (or whatever sits between it and the server) sends an "accept"
    // without having asked, or replays one for a harmless command with another command.
    const c = raw(['--root', t.root]);
    const meta = envelope({ elicitation: { form: {} } });
    const accept = { approval: { action: 'accept', content: { run: true } } };
    const shell = (command, more = {}) => c.request('tools/call', { name: 'shell', arguments: { command }, _meta: meta, ...more });
    try {
      const unasked = await shell(touch('unasked.txt'), { inputResponses: accept });
      expect(unasked.result.resultType).toBe('input_required');
      expect(unasked.result.inputRequests.approval.params.message).toContain(touch('unasked.txt'));
      expect(existsSync(join(t.root, 'unasked.txt'))).toBe(false);
      const asked = await shell('echo harmless');
      const { requestState } = asked.result;
      expect(typeof requestState).toBe('string');
      const replayed = await shell(touch('replayed.txt'), { inputResponses: accept, requestState });
      expect(replayed.result.resultType).toBe('input_required');
      expect(existsSync(join(t.root, 'replayed.txt'))).toBe(false);
      const forged = await shell(touch('forged.txt'), { inputResponses: accept, requestState: `${requestState}x` });
      // A state this server did not seal is refused by the SDK before the tool is reached.
      expect(forged.error?.code, JSON.stringify(forged)).toBe(-32602);
      expect(existsSync(join(t.root, 'forged.txt'))).toBe(false);
      // The positive control: the same call with its own state runs, once.
      const ran = await shell('echo harmless', { inputResponses: accept, requestState });
      expect(ran.result.isError, JSON.stringify(ran)).toBeFalsy();
      expect(ran.result.structuredContent.stdout).toBe(`harmless${EOL}`);
      const again = await shell('echo harmless', { inputResponses: accept, requestState });
      expect(again.result.resultType).toBe('input_required');
    } finally {
      c.close();
    }
  });
});

describe('corral mcp with the MCP Inspector CLI', () => {
  // Its bin as its package.json names it (node_modules/.bin holds a link, or on Windows a shim).
  const pkg = new URL('../node_modules/@modelcontextprotocol/inspector/', import.meta.url);
  const INSPECTOR = fileURLToPath(new URL(JSON.parse(readFileSync(new URL('package.json', pkg), 'utf8')).bin['mcp-inspector'], pkg));
  const inspect = (era, root, ...args) =>
    spawnSync(process.execPath, [INSPECTOR, '--cli', '--protocol-era', era, '--format', 'json', process.execPath, BIN, 'mcp', '--root', root, ...args], { encoding: 'utf8', timeout: 60_000 });
  let t;
  beforeAll(() => {
    t = tempTree({ 'a.txt': 'hi\n' });
    trees.push(t);
  });

  for (const era of ['legacy', 'modern']) {
    it(`lists the tools and calls one, and a command it cannot ask for is refused (${era})`, () => {
      const list = inspect(era, t.root, '--method', 'tools/list');
      expect(list.status, list.stderr).toBe(0);
      const names = JSON.parse(list.stdout).result.tools.map((x) => x.name);
      expect(names).toEqual(['read_file', 'write_file', 'edit_file', 'list_dir', 'glob', 'grep', 'shell']);
      const read = inspect(era, t.root, '--method', 'tools/call', '--tool-name', 'read_file', '--tool-arg', 'path=a.txt');
      expect(read.status, read.stderr).toBe(0);
      expect(JSON.stringify(JSON.parse(read.stdout))).toContain(' 1\\thi');
      const shell = inspect(era, t.root, '--method', 'tools/call', '--tool-name', 'shell', '--tool-arg', `command=${touch('made.txt')}`);
      expect(shell.stdout).toContain('Not run: this command needs approval and this client cannot ask for it');
      expect(existsSync(join(t.root, 'made.txt'))).toBe(false);
    });
  }
});
