// createEditor applies V4A diffs with the core's patch engine in a mode that reproduces the
// OpenAI Agents SDK's own applyDiff: generated files and diffs (anchors, context with whitespace
// and line-ending variants, End of File, create mode, malformed lines) go through both, and give
// the same text or the same failure (a context or anchor not found: PatchMismatch; anything
// else: InvalidPatch).
import { describe, it, expect } from 'vitest';
import { applyDiff } from '@openai/agents';
import { createRequire } from 'node:module';

const { applyV4aDiff } = createRequire(import.meta.url)('../js/index.js')[Symbol.for('corral.internal')];

/** A small seeded generator (mulberry32), so a failure names a case that can be run again. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ['a', 'b', 'fn x() {', '}', '  return 1;', '', 'const y = 2;', '\t// note', 'a  ', ' b', 'a\u00a0', '\ufeffa', 'a\u0085', 'x\u3000', '@@', '***', '*** End of File', '+plus', '-minus'];

function generate(r) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const n = Math.floor(r() * 8);
  const lines = Array.from({ length: n }, () => pick(WORDS));
  const crlf = r() < 0.2;
  const finalNewline = r() < 0.7;
  const input = lines.join(crlf ? '\r\n' : '\n') + (finalNewline && n ? (crlf ? '\r\n' : '\n') : '');
  const mode = r() < 0.15 ? 'create' : 'default';
  const diff = [];
  const sections = 1 + Math.floor(r() * 3);
  for (let s = 0; s < sections; s++) {
    if (mode === 'create') {
      for (let i = 0; i < 1 + r() * 3; i++) diff.push(r() < 0.9 ? `+${pick(WORDS)}` : pick(WORDS));
      break;
    }
    const anchors = Math.floor(r() * 3);
    for (let i = 0; i < anchors; i++) diff.push(r() < 0.3 ? '@@' : `@@ ${r() < 0.6 && lines.length ? pick(lines) : pick(WORDS)}`);
    const start = Math.floor(r() * (lines.length + 1));
    const len = Math.floor(r() * 4);
    for (let i = 0; i < len; i++) {
      const src = lines[start + i] ?? pick(WORDS);
      const variant = r() < 0.2 ? `${src}  ` : r() < 0.1 ? ` ${src}` : src;
      const k = r();
      if (k < 0.4) diff.push(` ${variant}`);
      else if (k < 0.7) diff.push(`-${variant}`);
      else if (k < 0.9) diff.push(`+${pick(WORDS)}`);
      else diff.push(pick(['', 'junk', '***x', '***']));
    }
    if (r() < 0.15) diff.push('*** End of File');
  }
  const sep = r() < 0.1 ? '\r\n' : '\n';
  return { input, diff: diff.join(sep) + (r() < 0.5 ? sep : ''), mode };
}

const sdk = (input, diff, mode) => {
  try {
    return { text: applyDiff(input, diff, mode) };
  } catch (e) {
    const message = String(e?.message ?? e);
    return { code: /^Invalid (Context|EOF Context|Anchor)/.test(message) ? 'PatchMismatch' : 'InvalidPatch' };
  }
};
const core = (input, diff, mode) => {
  try {
    return { text: applyV4aDiff(input, diff, mode === 'create') };
  } catch (e) {
    return { code: e.code };
  }
};

describe('the core\'s V4A mode against the SDK\'s applyDiff', () => {
  it('gives the same text or the same failure for 5,000 generated files and diffs', () => {
    let applied = 0;
    for (let seed = 1; seed <= 5000; seed++) {
      const { input, diff, mode } = generate(rng(seed));
      const want = sdk(input, diff, mode);
      expect(core(input, diff, mode), `seed ${seed}: ${JSON.stringify({ input, diff, mode })}`).toEqual(want);
      if (want.text !== undefined) applied += 1;
    }
    // Both outcomes are exercised: a generator that only made failures would prove little.
    expect(applied).toBeGreaterThan(500);
    expect(applied).toBeLessThan(4900);
  });

  it('the documented cases: line endings kept, End of File, anchors, create mode', () => {
    for (const [input, diff, mode] of [
      ['a\r\nb\r\nc\r\n', '@@\n a\n-b\n+B\n c\n', 'default'],
      ['x\ny\nx\ny\n', '@@\n-y\n+Y\n*** End of File\n', 'default'],
      ['class A {\n  f() {}\n}\nclass B {\n  f() {}\n}\n', '@@ class B {\n-  f() {}\n+  g() {}\n', 'default'],
      ['', '+one\n+two\n', 'create'],
      ['a\n', '@@ one\n@@ two\n-a\n+b\n', 'default'],
    ]) {
      expect(core(input, diff, mode)).toEqual(sdk(input, diff, mode));
    }
  });
});
