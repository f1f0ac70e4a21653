// grep is fenced in: a time budget for matching, an abort that stops it at once, and the
// backtracking engine's step limit reported as a slow pattern.
import { describe, it, expect, afterAll } from 'vitest';
import { NodeWorkspace, MemoryWorkspace, createFsTools } from 'corral';
import { tempTree, jsProvider } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));

// Many files of many lines: enough matching work that a 1 ms budget cannot cover it.
const manyFiles = () => {
  const line = 'the quick brown fox jumps over the lazy dog 0123456789\n'.repeat(2000);
  return Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`d${i % 10}/f${i}.txt`, line]));
};

// A pattern that is slow on every line of a's: seconds per file.
const SLOW = '(?:a?){2000}a{2000}';
const slowFiles = () => Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`s${i}.txt`, `${'a'.repeat(2000)}\n`.repeat(200)]));

const providers = {
  NodeWorkspace: (files) => { const t = tempTree(files); trees.push(t); return new NodeWorkspace({ root: t.root }); },
  MemoryWorkspace: (files) => new MemoryWorkspace({ files }),
  'a JS provider': (files) => { const t = tempTree(files); trees.push(t); return jsProvider(t.root); },
};

for (const [label, make] of Object.entries(providers)) {
  describe(`grep limits over ${label}`, () => {
    it('a pattern that exhausts the backtracking engine is a Timeout tool error naming the files scanned', async () => {
      const grep = createFsTools(make({ 'a.txt': `${'a'.repeat(40)}!\n` })).find((t) => t.name === 'grep');
      const e = await grep.execute({ pattern: '^(a|a)*\\1$' }).catch((x) => x);
      expect(e.name).toBe('WorkspaceError');
      expect(e.code).toBe('Timeout');
      expect(e.message).toMatch(/\d+ files? scanned/);
    });

    it('matching beyond grepTimeoutMs stops with a Timeout error naming how many files were scanned', async () => {
      const grep = createFsTools(make(manyFiles()), { grepTimeoutMs: 1 }).find((t) => t.name === 'grep');
      // Counting needs every file: a search that shows the first matches could stop before the budget.
      const e = await grep.execute({ pattern: 'fox (jumps|leaps) over the [a-z]+ dog \\d{10}$', output_mode: 'count' }).catch((x) => x);
      expect(e.code).toBe('Timeout');
      expect(e.message).toMatch(/1 ms/);
      expect(e.message).toMatch(/\(\d+ files? scanned\)/);
    });

    it('a spent grepTimeoutMs rejects while a slow line is still being matched', async () => {
      const grep = createFsTools(make(slowFiles()), { grepTimeoutMs: 200 }).find((t) => t.name === 'grep');
      const started = Date.now();
      const e = await grep.execute({ pattern: SLOW }).catch((x) => x);
      expect(e.code).toBe('Timeout');
      expect(e.message).toMatch(/200 ms/);
      // The budget is answered within milliseconds of being spent; a bound this wide only
      // catches a search that ran on to the end of its line.
      expect(Date.now() - started).toBeLessThan(200 + 1500);
    });

    it('the same search within its budget finds every match', async () => {
      const grep = createFsTools(make(manyFiles()), { maxResults: 1 }).find((t) => t.name === 'grep');
      const out = await grep.execute({ pattern: 'fox (jumps|leaps) over', output_mode: 'count' });
      expect(out.split('\n').at(-2)).toMatch(/^\(400,000 matches in \d+ files\)$/);
    });

    it('an aborted signal stops grep with an Aborted tool error', async () => {
      const grep = createFsTools(make(manyFiles())).find((t) => t.name === 'grep');
      const already = new AbortController();
      already.abort();
      await expect(grep.execute({ pattern: 'fox' }, { signal: already.signal })).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Aborted' });
      // Lines on which this pattern is slow: the whole search would take far longer than the
      // abort's delay, so only a working abort ends it early.
      const slow = createFsTools(make(slowFiles())).find((t) => t.name === 'grep');
      const ac = new AbortController();
      let abortedAt = 0;
      const running = slow.execute({ pattern: SLOW }, { signal: ac.signal });
      setTimeout(() => { abortedAt = Date.now(); ac.abort(); }, 100);
      await expect(running).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Aborted' });
      // The call answers the signal while a line is still being matched (within milliseconds;
      // the bench measures it): a bound this wide only catches a search that ran on.
      expect(Date.now() - abortedAt).toBeLessThan(1500);
    });
  });
}

describe('grep over a large tree with an abort mid-way', () => {
  it('stops at once when the signal fires during the walk', async () => {
    const t = tempTree(Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`p${i % 30}/f${i}.txt`, `${'a'.repeat(2000)}\n`.repeat(50)])));
    trees.push(t);
    const grep = createFsTools(new NodeWorkspace({ root: t.root })).find((x) => x.name === 'grep');
    const ac = new AbortController();
    let abortedAt = 0;
    const p = grep.execute({ pattern: SLOW }, { signal: ac.signal });
    setTimeout(() => { abortedAt = Date.now(); ac.abort(); }, 50);
    await expect(p).rejects.toMatchObject({ name: 'WorkspaceError', code: 'Aborted' });
    expect(Date.now() - abortedAt).toBeLessThan(1500);
  });
});
