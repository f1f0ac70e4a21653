'use strict';
// corral/conformance: checks a third-party FsProvider and/or ShellProvider against the contract
// corral's tools rely on, with any describe/test-style runner (node:test, vitest, jest):
//
//   import { test } from 'node:test';
//   import { runConformance } from 'corral/conformance';
//   runConformance({ makeProvider: async () => new MyRemoteWorkspace(...), test });
//
// `makeProvider()` gives a fresh, empty workspace for each check: an object that is an FsProvider,
// a ShellProvider, or both (or `{ fs, shell }`). Each check is one test whose failure message says
// what to fix.

const { createFsTools, createShellTool, WorkspaceError } = require('./index.js');
const { FS_METHODS, native } = require('./index.js')[Symbol.for('corral.internal')];

class ConformanceError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ConformanceError';
  }
}

const must = (ok, message) => {
  if (!ok) throw new ConformanceError(message);
};
const shown = (v) => {
  try {
    return typeof v === 'string' ? JSON.stringify(v.length > 80 ? `${v.slice(0, 80)}…` : v) : JSON.stringify(v);
  } catch {
    return String(v);
  }
};
const isFs = (p) => p && FS_METHODS.every((m) => typeof p[m] === 'function');
const isShell = (p) => p && typeof p.exec === 'function';

/** Resolves `promise` expecting a WorkspaceError with `code`. */
async function rejectsWith(promise, code, what) {
  let value;
  try {
    value = await promise;
  } catch (e) {
    must(e instanceof WorkspaceError || e?.name === 'WorkspaceError', `${what} must throw a WorkspaceError (with code '${code}'), not ${e?.name ?? typeof e}: ${e?.message ?? e}`);
    must(e.code === code, `${what} must throw a WorkspaceError with code '${code}', got code '${e.code}'`);
    return;
  }
  throw new ConformanceError(`${what} must throw a WorkspaceError with code '${code}', but it resolved to ${shown(value)}`);
}

const FS_CHECKS = {
  'writeFile creates the file and its missing parent directories, and readFile reads it back': async (fs) => {
    await fs.writeFile('deep/er/a.txt', 'héllo\n');
    const text = await fs.readFile('deep/er/a.txt');
    must(text === 'héllo\n', `readFile('deep/er/a.txt') must return what writeFile wrote ('héllo\\n'), got ${shown(text)}`);
    await fs.writeFile('deep/er/a.txt', 'second');
    must((await fs.readFile('deep/er/a.txt')) === 'second', 'writeFile must replace a file\'s whole content');
  },
  'readFile of a missing file throws WorkspaceError NotFound': async (fs) => {
    await rejectsWith(fs.readFile('missing.txt'), 'NotFound', "readFile('missing.txt')");
  },
  'stat tells files from directories and answers undefined for a missing path': async (fs) => {
    await fs.writeFile('d/f.txt', '12345');
    const file = await fs.stat('d/f.txt');
    must(file?.type === 'file', `stat('d/f.txt') must have type 'file', got ${shown(file)}`);
    must(file.size === 5, `stat('d/f.txt').size must be 5 (bytes), got ${shown(file.size)}`);
    const dir = await fs.stat('d');
    must(dir?.type === 'directory' || dir === undefined, `stat('d') must have type 'directory' (or be undefined for a provider that only knows files), got ${shown(dir)}`);
    const none = await fs.stat('nope');
    must(none === undefined || none === null, `stat('nope') must resolve to undefined for a missing path, got ${shown(none)}`);
  },
  'readdir lists names (not paths) with their types': async (fs) => {
    await fs.writeFile('r/a.txt', 'a');
    await fs.writeFile('r/sub/b.txt', 'b');
    const entries = await fs.readdir('r');
    must(Array.isArray(entries), `readdir('r') must resolve to an array, got ${shown(entries)}`);
    const byName = Object.fromEntries(entries.map((e) => [e.name, e.type]));
    must(byName['a.txt'] === 'file', `readdir('r') must list { name: 'a.txt', type: 'file' }, got ${shown(entries)}`);
    must(byName.sub === 'directory', `readdir('r') must list { name: 'sub', type: 'directory' }, got ${shown(entries)}`);
    must(entries.every((e) => !e.name.includes('/')), `readdir must give entry names, not paths: ${shown(entries)}`);
  },
  'mkdir is recursive and does not fail when the directory exists': async (fs) => {
    await fs.mkdir('m/n/o');
    await fs.mkdir('m/n/o');
    await fs.writeFile('m/n/o/x.txt', 'x');
    must((await fs.readFile('m/n/o/x.txt')) === 'x', 'a file written in a directory made by mkdir must read back');
  },
  'rm removes a file, and a directory with recursive': async (fs) => {
    await fs.writeFile('gone/a.txt', 'a');
    await fs.rm('gone/a.txt');
    must((await fs.stat('gone/a.txt')) == null, "rm('gone/a.txt') must remove the file");
    await fs.writeFile('gone/b/c.txt', 'c');
    await fs.rm('gone', { recursive: true });
    must((await fs.stat('gone/b/c.txt')) == null, "rm('gone', { recursive: true }) must remove the directory and what it holds");
  },
  'readFileBytes, when present, returns the exact bytes': async (fs) => {
    if (typeof fs.readFileBytes !== 'function') return;
    await fs.writeFile('bytes.txt', 'abc\u00e9');
    const b = await fs.readFileBytes('bytes.txt');
    must(b instanceof Uint8Array, `readFileBytes must resolve to a Uint8Array, got ${shown(b)}`);
    must(Buffer.from(b).equals(Buffer.from('abc\u00e9')), `readFileBytes('bytes.txt') must be the UTF-8 bytes of what was written, got ${shown([...b])}`);
  },
  'the file tools work over it: confinement, reads, writes, edits and search': async (fs) => {
    const tools = Object.fromEntries(createFsTools(fs).map((t) => [t.name, t]));
    await tools.write_file.execute({ path: 'src/app.js', content: 'const x = 1;\n' });
    must((await tools.read_file.execute({ path: 'src/app.js' })) === ' 1\tconst x = 1;', 'read_file over the provider must show the written file');
    await tools.edit_file.execute({ path: 'src/app.js', old_string: 'x = 1', new_string: 'x = 2' });
    must((await fs.readFile('src/app.js')) === 'const x = 2;\n', 'edit_file must change the file through writeFile');
    const grep = await tools.grep.execute({ pattern: 'x = 2' });
    must(grep === 'src/app.js:1: const x = 2;', `grep must find the line through readdir/stat/readFile, got ${shown(grep)}`);
    await rejectsWith(tools.read_file.execute({ path: '../outside' }), 'OutsideWorkspace', "read_file('../outside')");
    await rejectsWith(tools.read_file.execute({ path: '.git/config' }), 'Denied', "read_file('.git/config')");
    if (typeof fs.realPath === 'function') {
      const real = await fs.realPath('src/app.js');
      must(real === 'src/app.js', `realPath must answer a workspace-relative path ('src/app.js'), got ${shown(real)}`);
    }
  },
};

/** Whether a shell runs its commands with cmd.exe, as the core reads its command lines. */
const isCmd = (sh) => native.isCmdShell(typeof sh.shell === 'string' ? sh.shell : undefined);

/** The checks' commands in the shell's syntax. cmd.exe ends lines with \r\n: its output is compared
 * with them read as \n. */
const COMMANDS = {
  sh: { out: 'echo out; echo err >&2; exit 3', cat: 'cat', sleep: 'sleep 30', hi: 'echo hi', lines: (text) => text, note: '' },
  cmd: { out: 'echo out& echo err>&2& exit 3', cat: 'more', sleep: 'ping -n 31 127.0.0.1 >nul', hi: 'echo hi', lines: (text) => (typeof text === 'string' ? text.replaceAll('\r\n', '\n') : text), note: ' (cmd.exe: \\r\\n read as \\n)' },
};
const commandsOf = (sh) => COMMANDS[isCmd(sh) ? 'cmd' : 'sh'];

const SHELL_CHECKS = {
  'exec runs a command and resolves to its stdout, stderr and exit code': async (sh) => {
    const c = commandsOf(sh);
    const r = await sh.exec(c.out);
    must(r && typeof r === 'object', `exec must resolve to an ExecResult object, got ${shown(r)}`);
    must(c.lines(r.stdout) === 'out\n', `stdout must be 'out\\n'${c.note}, got ${shown(r.stdout)}`);
    must(c.lines(r.stderr) === 'err\n', `stderr must be 'err\\n'${c.note}, got ${shown(r.stderr)}`);
    must(r.exitCode === 3, `a non-zero exit must resolve (not reject) with exitCode 3, got ${shown(r.exitCode)}`);
    must(r.timedOut === false, `timedOut must be false for a command that finished, got ${shown(r.timedOut)}`);
  },
  'exec feeds stdin and closes it': async (sh) => {
    const c = commandsOf(sh);
    const r = await sh.exec(c.cat, { stdin: 'in\n', timeoutMs: 10_000 });
    must(c.lines(r.stdout) === 'in\n', `stdin must reach the command ('in\\n'${c.note}), got ${shown(r.stdout)}`);
  },
  'exec stops a command at timeoutMs and says timedOut': async (sh) => {
    const started = Date.now();
    const r = await sh.exec(commandsOf(sh).sleep, { timeoutMs: 300 });
    must(r.timedOut === true, `a command past timeoutMs must resolve with timedOut: true, got ${shown(r)}`);
    must(Date.now() - started < 10_000, 'exec must return soon after timeoutMs');
  },
  'exec stops a command when its signal aborts': async (sh) => {
    const ac = new AbortController();
    const started = Date.now();
    const running = sh.exec(commandsOf(sh).sleep, { signal: ac.signal, timeoutMs: 60_000 });
    setTimeout(() => ac.abort(), 200);
    const r = await running.catch((e) => ({ rejected: e }));
    must(Date.now() - started < 10_000, 'an aborted exec must end soon after the abort, not when the command would have ended');
    must(r.rejected || r.aborted === true || r.exitCode === null, `an aborted exec must resolve with aborted: true (or reject), got ${shown(r)}`);
  },
  'the shell tool works over it': async (sh) => {
    const c = commandsOf(sh);
    const tool = createShellTool(sh, { needsApproval: false });
    const r = await tool.execute({ command: c.hi });
    must(r.exitCode === 0 && c.lines(r.stdout) === 'hi\n', `the shell tool must run commands through exec, got ${shown(r)}`);
  },
};

/**
 * Registers one test per check. `makeProvider()` returns a fresh provider (or `{ fs, shell }`);
 * `test(name, fn)` is the runner's; `describe(name, fn)` groups them when given.
 */
function runConformance({ makeProvider, test, describe, name = 'corral conformance' }) {
  if (typeof makeProvider !== 'function' || typeof test !== 'function') {
    throw new TypeError('runConformance({ makeProvider, test }): makeProvider and test must be functions.');
  }
  const split = async () => {
    const p = await makeProvider();
    // A provider itself, or { fs, shell } (NodeWorkspace's own `shell` is the shell's name).
    const fs = isFs(p) ? p : isFs(p?.fs) ? p.fs : undefined;
    const shell = isShell(p) ? p : isShell(p?.shell) ? p.shell : undefined;
    return { fs, shell };
  };
  const register = () => {
    for (const [title, check] of Object.entries(FS_CHECKS)) {
      test(`FsProvider: ${title}`, async () => {
        const { fs } = await split();
        if (!fs) return;
        await check(fs);
      });
    }
    for (const [title, check] of Object.entries(SHELL_CHECKS)) {
      test(`ShellProvider: ${title}`, async () => {
        const { shell } = await split();
        if (!shell) return;
        await check(shell);
      });
    }
  };
  if (typeof describe === 'function') describe(name, register);
  else register();
}

module.exports = { runConformance, ConformanceError };
