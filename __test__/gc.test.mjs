// Wrapped JS providers, shells, adapters, stubs and stores can be garbage-collected: the core holds
// its callbacks strongly, so they reach what they serve only weakly, and the objects that use them
// keep them alive from JavaScript. Run in a child process with --expose-gc.
import { describe, it, expect } from 'vitest';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./fixtures/gc-child.cjs', import.meta.url));

describe('garbage collection', () => {
  it('a thousand dropped providers, stub workspaces, shells, adapters and stores are collected, and tools keep the provider they use alive', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', CHILD], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop());
    for (const kind of ['provider', 'memoryWithStub', 'shell', 'adapter', 'store']) {
      expect(out[kind], kind).toBeGreaterThanOrEqual(950);
    }
    expect(out.toolsStillRead).toBe(' 1\tkept alive');
  });
});
