// Judges a vitest run under Wine (scripts/cross/windows-wine.sh) against the exceptions file:
//   node results.mjs <vitest.json> <exceptions.txt> <test file…>
// A test that did not pass (failed or skipped) must be listed, with its reason; a listed test that
// passed, or that the run no longer has, is an error too. Prints passed / all.
//
// The exceptions file: one test per line, `<file> > <describe> > … > <test> | <reason>`, where `*`
// stands for any text (a line may name several tests: the docs' blocks, named by line number);
// blank lines and lines starting with # are ignored.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const [jsonPath, exceptionsPath, ...files] = process.argv.slice(2);
const run = JSON.parse(readFileSync(jsonPath, 'utf8'));
const ran = new Set(files.map((f) => basename(f)));

const listed = new Map();
const problems = [];
readFileSync(exceptionsPath, 'utf8').split('\n').forEach((line, i) => {
  if (!line.trim() || line.startsWith('#')) return;
  const bar = line.lastIndexOf(' | ');
  if (bar < 0 || !line.slice(bar + 3).trim()) problems.push(`${exceptionsPath}:${i + 1}: no reason given (\`<test> | <reason>\`)`);
  const key = (bar < 0 ? line : line.slice(0, bar)).trim();
  if (listed.has(key)) problems.push(`${exceptionsPath}:${i + 1}: listed twice: ${key}`);
  listed.set(key, i + 1);
});

/** The listed line that names `key`, if any. */
const patterns = [...listed].map(([key, line]) => ({
  key,
  line,
  re: new RegExp(`^${key.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`),
}));
const used = new Set();
const listing = (key) => {
  const p = patterns.find((x) => x.re.test(key));
  if (p) used.add(p.key);
  return p;
};

let passed = 0;
let all = 0;
for (const file of run.testResults) {
  const name = basename(file.name.replaceAll('\\', '/'));
  // A file that failed to load has no tests: it fails as a whole.
  if (file.assertionResults.length === 0 && file.status === 'failed') {
    const key = `${name} > (the file)`;
    all += 1;
    if (!listing(key)) problems.push(`failed to run and not listed: ${key}\n    ${String(file.message).split('\n')[0]}`);
    continue;
  }
  for (const t of file.assertionResults) {
    const key = [name, ...t.ancestorTitles, t.title].join(' > ');
    all += 1;
    if (t.status === 'passed') {
      passed += 1;
      const p = listing(key);
      if (p) problems.push(`${exceptionsPath}:${p.line}: listed but passes (remove it, or narrow it): ${key}`);
    } else if (!listing(key)) {
      const why = t.failureMessages?.[0]?.split('\n')[0] ?? '';
      problems.push(`${t.status === 'failed' ? 'failed' : 'skipped'} and not listed: ${key}${why ? `\n    ${why}` : ''}`);
    }
  }
}
for (const { key, line } of patterns) {
  if (ran.has(key.split(' > ')[0]) && !used.has(key)) problems.push(`${exceptionsPath}:${line}: no such test in this run: ${key}`);
}

console.log(`   under Wine: ${passed} of ${all} tests passed (${((100 * passed) / Math.max(all, 1)).toFixed(1)}%), ${all - passed} listed as exceptions`);
if (problems.length) {
  console.error(problems.map((p) => `   ${p}`).join('\n'));
  process.exit(1);
}
