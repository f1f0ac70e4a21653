#!/usr/bin/env node
// Checks that a Rust crate's modules form layers: among the modules of one parent (a module and
// everything below it counted as one), no import circle. A parent and its own children may use
// each other (a child sees its parent's items); siblings may not go round in a circle. Test
// modules (`#[cfg(test)] mod …`) are left out.
//
//   node scripts/module-cycles.mjs crates/corral-core/src/lib.rs src/lib.rs
//
// Prints each circle with the imports that make it, and exits 1 when there is one.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';

/** The modules of a crate: path (['sandbox', 'linux']) → source without its test modules. */
function crateModules(rootFile) {
  const modules = new Map();
  const visit = (file, path) => {
    let src = readFileSync(file, 'utf8');
    // Inline test modules: `#[cfg(test)] mod tests { … }` to the end of the file (they come last).
    src = src.replace(/#\[cfg\((?:all\()?test\b[^\]]*\]\s*(?:#\[[^\]]*\]\s*)*mod \w+\s*\{[\s\S]*$/, '');
    modules.set(path.join('::'), { path, src });
    const own = basename(file) === 'lib.rs' || basename(file) === 'mod.rs' ? dirname(file) : join(dirname(file), basename(file, '.rs'));
    const decl = /((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod (\w+)\s*;/g;
    for (const m of src.matchAll(decl)) {
      if (/cfg\((?:all\()?test\b/.test(m[1])) continue;
      const name = m[2];
      const file2 = [join(own, `${name}.rs`), join(own, name, 'mod.rs')].find(existsSync);
      if (file2) visit(file2, [...path, name]);
    }
  };
  visit(rootFile, []);
  return modules;
}

/** The module paths a source refers to through `crate::`, `super::` and `self::`. */
function references({ path, src }, isModFile) {
  const out = [];
  for (const m of src.matchAll(/\b(crate|(?:super::)*super|self)::((?:\{[^}]*\}|[A-Za-z_]\w*)(?:::(?:\{[^}]*\}|[A-Za-z_]\w*))*)/g)) {
    let base;
    if (m[1] === 'crate') base = [];
    else if (m[1] === 'self') base = path;
    else base = path.slice(0, path.length - m[1].split('::').length);
    const first = m[2].split('::').filter((p) => !p.startsWith('{'));
    out.push([...base, ...first]);
  }
  return out;
}

function check(rootFile) {
  const modules = crateModules(rootFile);
  const names = new Set(modules.keys());
  // The longest module path a reference names.
  const target = (parts) => {
    for (let n = parts.length; n >= 0; n--) {
      const key = parts.slice(0, n).join('::');
      if (names.has(key)) return parts.slice(0, n);
    }
    return [];
  };
  // Sibling edges: for a reference from module A to module B, their common parent P and the
  // children of P that hold A and B.
  const edges = new Map(); // parentKey -> Map(childA -> Map(childB -> [why]))
  for (const mod of modules.values()) {
    for (const ref of references(mod)) {
      const to = target(ref);
      const from = mod.path;
      let k = 0;
      while (k < from.length && k < to.length && from[k] === to[k]) k++;
      if (k === from.length || k === to.length) continue; // the same module, a parent or a child
      const parent = from.slice(0, k).join('::');
      const a = from[k];
      const b = to[k];
      const byParent = edges.get(parent) ?? new Map();
      edges.set(parent, byParent);
      const byA = byParent.get(a) ?? new Map();
      byParent.set(a, byA);
      const why = byA.get(b) ?? [];
      byA.set(b, why);
      if (why.length < 3) why.push(`${from.join('::') || 'crate'} uses ${ref.join('::')}`);
    }
  }
  const circles = [];
  for (const [parent, graph] of edges) {
    // Tarjan's strongly connected components over the siblings.
    let i = 0;
    const index = new Map();
    const low = new Map();
    const stack = [];
    const on = new Set();
    const strong = (v) => {
      index.set(v, i);
      low.set(v, i++);
      stack.push(v);
      on.add(v);
      for (const w of graph.get(v)?.keys() ?? []) {
        if (!index.has(w)) {
          strong(w);
          low.set(v, Math.min(low.get(v), low.get(w)));
        } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
      }
      if (low.get(v) === index.get(v)) {
        const comp = [];
        let w;
        do {
          w = stack.pop();
          on.delete(w);
          comp.push(w);
        } while (w !== v);
        if (comp.length > 1) circles.push({ parent, comp: comp.sort(), graph });
      }
    };
    for (const v of graph.keys()) if (!index.has(v)) strong(v);
  }
  return { modules: modules.size, circles };
}

let failed = false;
for (const root of process.argv.slice(2)) {
  const { modules, circles } = check(root);
  console.log(`${root}: ${modules} modules, ${circles.length} import circle(s) among siblings`);
  for (const { parent, comp, graph } of circles) {
    failed = true;
    console.log(`  in ${parent || 'the crate root'}: ${comp.join(' <-> ')}`);
    for (const a of comp) {
      for (const [b, why] of graph.get(a) ?? []) if (comp.includes(b)) console.log(`    ${a} -> ${b}: ${why.join('; ')}`);
    }
  }
}
process.exit(failed ? 1 : 0);
