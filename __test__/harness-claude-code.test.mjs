// End to end: the real Claude Code, through the real AI SDK harness adapter
// (@ai-sdk/harness-claude-code), runs inside a corral harness session on this machine. The
// adapter's bootstrap installs its bridge and the Claude Code CLI with pnpm from the npm registry
// this machine is configured with, through the session's network policy; the model is a fake
// Anthropic Messages API served here over HTTPS on 127.0.0.1 with its own CA. The provider's
// request transformation puts the real key on the model's requests outside the sandbox.
//
// pnpm is the pinned devDependency, copied into the session's home; its store is kept between
// runs outside the clone (a `writable` path). Where the registry cannot be reached the test is
// skipped, except under CI=true, where that fails.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import https from 'node:https';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync, accessSync, constants } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import { createClaudeCode } from '@ai-sdk/harness-claude-code';
import { createCorralHarnessSandbox } from 'corral/ai-sdk';
import { certificates, linuxSandboxUsable as usable, tempTree } from './helpers.mjs';

const REAL_KEY = 'sk-ant-api03-' + 'corral0test0real0key0'.repeat(3);
const PLACEHOLDER = 'placeholder-not-a-key';
const REPLY = 'corral says hi from the fake model';
const PNPM_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'pnpm');

const registry = new URL(execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim());

/** Whether the registry answers from here (a HEAD of pnpm's document, 15 s at most). */
async function registryReachable() {
  try {
    const r = await fetch(new URL('pnpm', registry), { method: 'HEAD', signal: AbortSignal.timeout(15_000) });
    return r.status < 500;
  } catch {
    return false;
  }
}

/** A directory for the pnpm store that outlives the test (outside any clone). */
function storeDir() {
  for (const d of ['/var/cache/corral-test/pnpm-store', '/var/tmp/corral-test-pnpm-store']) {
    try {
      mkdirSync(d, { recursive: true });
      accessSync(d, constants.W_OK);
      return d;
    } catch {}
  }
  throw new Error('No writable directory for the pnpm store under /var/cache or /var/tmp.');
}

/** The Anthropic Messages API as Claude Code calls it: every message gets REPLY (streamed or not). */
function fakeModel({ key, cert }) {
  const seen = [];
  const server = https.createServer({ key, cert }, (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ url: req.url, apiKey: req.headers['x-api-key'], authorization: req.headers.authorization });
      if (!req.url.startsWith('/v1/messages')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return res.end('{"type":"error","error":{"type":"not_found_error","message":"not here"}}');
      }
      if (req.url.startsWith('/v1/messages/count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{"input_tokens":10}');
      }
      let request = {};
      try { request = JSON.parse(body); } catch {}
      const message = { id: 'msg_corral', type: 'message', role: 'assistant', model: request.model ?? 'claude', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 0 } };
      if (!request.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ ...message, content: [{ type: 'text', text: REPLY }], stop_reason: 'end_turn', usage: { input_tokens: 10, output_tokens: 7 } }));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
      event('message_start', { message });
      event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: REPLY } });
      event('content_block_stop', { index: 0 });
      event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 7 } });
      event('message_stop', {});
      res.end();
    });
  });
  return { server, seen };
}

function* files(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* files(p);
    else if (e.isFile()) yield p;
  }
}

/** Every process on this machine whose environment holds `text` (its pid and command). */
function environmentsHolding(text) {
  const found = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, 'latin1').includes(text)) found.push(`${pid} ${readFileSync(`/proc/${pid}/cmdline`, 'latin1').replace(/\0/g, ' ')}`);
    } catch {}
  }
  return found;
}

const reachable = usable ? await registryReachable() : false;
if (usable && !reachable && process.env.CI === 'true') {
  throw new Error(`CI=true but the npm registry ${registry.href} cannot be reached: the Claude Code test needs it.`);
}

describe.skipIf(!usable || !reachable)('Claude Code inside corral, through @ai-sdk/harness-claude-code', () => {
  let tree, model, port, ca, root;
  const sessions = [];
  let bootstraps = 0;

  beforeAll(async () => {
    tree = tempTree();
    root = join(tree.dir, 'sessions');
    const certs = await certificates('fake model CA');
    ca = certs.ca;
    model = fakeModel(certs);
    await new Promise((r) => model.server.listen(0, '127.0.0.1', r));
    port = model.server.address().port;
  });

  afterAll(async () => {
    for (const s of sessions) await s.destroy().catch(() => {});
    model?.server.closeAllConnections?.();
    await new Promise((r) => (model ? model.server.close(r) : r()));
    tree?.cleanup();
  });

  /** The provider as a user would make it, with pnpm put on the session's PATH before the bootstrap. */
  function provider() {
    const store = storeDir();
    const corral = createCorralHarnessSandbox({
      root,
      ports: [4000],
      sandbox: { kind: 'linux', writable: [store] },
      network: { mode: 'custom', allowedHosts: [registry.hostname], allowedCIDRs: ['127.0.0.1/32'] },
      upstreamCa: ca,
      requestTransformations: [{ match: { host: '127.0.0.1' }, transform: { headers: { 'x-api-key': REAL_KEY } } }],
      env: {
        PATH: '/home/agent/.local/bin:/usr/local/bin:/usr/bin:/bin',
        npm_config_registry: registry.href,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      },
    });
    return {
      ...corral,
      async createSession(options = {}) {
        const first = options.onFirstCreate;
        const s = await corral.createSession({
          ...options,
          onFirstCreate: first && (async (session, o) => {
            bootstraps += 1;
            for (const f of files(PNPM_DIR)) {
              await session.writeBinaryFile({ path: `/home/agent/.local/lib/pnpm/${relative(PNPM_DIR, f)}`, content: readFileSync(f) });
            }
            await session.writeTextFile({ path: '/home/agent/.local/bin/pnpm', content: '#!/bin/sh\nexec node /home/agent/.local/lib/pnpm/bin/pnpm.cjs "$@"\n' });
            const r = await session.run({ command: `chmod +x ~/.local/bin/pnpm && mkdir -p /tmp/harness/claude-code && ln -s ${store} /tmp/harness/claude-code/.pnpm-store` });
            expect(r.exitCode, r.stderr).toBe(0);
            await first(session, o);
          }),
        });
        sessions.push(s);
        return s;
      },
    };
  }

  it('answers from the model; the real key reaches the model and is nowhere inside; a second session skips the bootstrap', async () => {
    const agent = new HarnessAgent({
      harness: createClaudeCode({ auth: { anthropic: { apiKey: PLACEHOLDER, baseUrl: `https://127.0.0.1:${port}` } } }),
      sandbox: provider(),
    });
    const session = await agent.createSession();
    const result = await agent.generate({ session, prompt: 'Say hi.' });
    expect(result.text).toBe(REPLY);
    expect(bootstraps).toBe(1);

    const calls = model.seen.filter((s) => s.url.startsWith('/v1/messages'));
    expect(calls.length).toBeGreaterThan(0);
    for (const c of calls) expect(c.apiKey).toBe(REAL_KEY);

    // While Claude Code's bridge runs: no process here has the key in its environment, and no
    // file of any session (nor the identity's saved state) holds it.
    expect(environmentsHolding(REAL_KEY)).toEqual([]);
    expect(environmentsHolding(PLACEHOLDER).length).toBeGreaterThan(0); // the scan does see the bridge's environment
    const grep = spawnSync('grep', ['-rlF', REAL_KEY, root], { encoding: 'utf8' });
    expect(grep.status, grep.stdout).toBe(1); // nothing found

    // A second session of the same agent starts from the saved bootstrap.
    const second = await agent.createSession();
    const again = await agent.generate({ session: second, prompt: 'Say hi again.' });
    expect(again.text).toBe(REPLY);
    expect(bootstraps).toBe(1);
  }, 900_000);
});
