'use strict';
// Flags of the corral bin, for `corral <tool>` and `corral mcp` alike: a command takes only the
// flags its --help lists; any other is an error that names the nearest known flag.

/**
 * Parses `argv` against `known`, a map from each flag to its kind: 'switch' (true when given),
 * 'value' (the next argument, or `--flag=value`) or 'list' (a value, repeatable). Returns
 * `{ flags, positional }`, `flags` keyed by the flag as `known` writes it; throws an Error whose
 * message says what is wrong.
 */
function parseFlags(argv, known) {
  const flags = {};
  const positional = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('-')) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const kind = Object.hasOwn(known, flag) ? known[flag] : undefined;
    if (kind === undefined) throw new Error(`unknown flag '${flag}'; did you mean '${nearest(flag, Object.keys(known))}'?`);
    if (kind === 'switch') {
      if (eq > 0) throw new Error(`${flag} takes no value`);
      flags[flag] = true;
      continue;
    }
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    // `--root --read-only` is a forgotten value, not a directory named --read-only.
    if (value === undefined || (eq < 0 && value.startsWith('-'))) throw new Error(`${flag} needs a value`);
    if (kind === 'list') (flags[flag] ??= []).push(value);
    else flags[flag] = value;
  }
  return { flags, positional };
}

/** The known flag most like `flag`. */
function nearest(flag, known) {
  let best = known[0];
  for (const k of known) if (similarity(flag, k) > similarity(flag, best)) best = k;
  return best;
}

/**
 * Jaro-Winkler similarity, 0 to 1: letters in common near the same place, fewer for swapped
 * ones, more for a shared start (a typo rarely comes first: `--read-only` is nearer `--root`
 * than `--version`).
 */
function similarity(a, b) {
  const reach = Math.max(0, (Math.max(a.length, b.length) >> 1) - 1);
  const taken = [];
  const fromA = [];
  for (let i = 0; i < a.length; i++) {
    for (let j = Math.max(0, i - reach); j < Math.min(b.length, i + reach + 1); j++) {
      if (!taken[j] && a[i] === b[j]) {
        taken[j] = true;
        fromA.push(a[i]);
        break;
      }
    }
  }
  const m = fromA.length;
  if (m === 0) return 0;
  const fromB = [...b].filter((_, j) => taken[j]);
  const swapped = fromA.filter((c, k) => c !== fromB[k]).length / 2;
  const jaro = (m / a.length + m / b.length + (m - swapped) / m) / 3;
  let prefix = 0;
  while (prefix < 4 && a[prefix] === b[prefix]) prefix++;
  return jaro + prefix * 0.1 * (1 - jaro);
}

module.exports = { parseFlags };
