// Every process a command starts ends when Node ends, however it ends (process.exit, SIGTERM,
// SIGKILL): NodeWorkspace's commands, foreground and background, by their control group where
// one can be made (else their process group), LinuxSandbox's by their pid namespace.
import { describe, it, expect, afterAll, onTestFinished } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { linuxSandboxUsable, tempTree } from './helpers.mjs';

const trees = [];
afterAll(() => trees.forEach((t) => t.cleanup()));
const CHILD = join(__dirname, 'fixtures', 'owner-child.cjs');

/** The command lines of the processes whose command line holds `tag`. */
const tagged = (tag) => readdirSync('/proc').filter((p) => /^\d+$/.test(p)).flatMap((p) => {
  try {
    const line = readFileSync(`/proc/${p}/cmdline`, 'latin1');
    return line.includes(tag) ? [{ pid: Number(p), line: line.replaceAll('\0', ' ') }] : [];
  } catch { return []; }
});

// Root with a writable pids hierarchy: every command gets a control group.
const cgroups = process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/pids/cgroup.procs');

describe.runIf(process.platform === 'linux')('processes end with their owner', () => {
  for (const how of ['exit', 'term', 'kill']) {
    it(`after the owner's ${how}, no process of its commands is left${cgroups ? '' : ' in their process groups'}`, async () => {
      const t = tempTree({});
      trees.push(t);
      const tag = String(100000 + Math.floor(Math.random() * 800000));
      const child = spawn(process.execPath, [CHILD, t.root, tag, how, linuxSandboxUsable ? 'linux' : ''], { stdio: ['ignore', 'pipe', 'inherit'] });
      // A failed assertion never leaves the owner (or its commands) running.
      onTestFinished(() => {
        child.kill('SIGKILL');
        for (const p of tagged(tag)) try { process.kill(p.pid, 'SIGKILL'); } catch {}
      });
      let text = '';
      await new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => { text += d; if (/ready \d+\n/.test(text)) resolve(); });
        child.on('exit', () => (text.includes('ready') ? resolve() : reject(new Error(`no ready: ${text}`))));
      });
      // The owner counted its commands' sleeps before it ended (the positive control).
      expect(Number(/ready (\d+)/.exec(text)?.[1])).toBe(linuxSandboxUsable ? 6 : 4);
      if (how === 'term') child.kill('SIGTERM');
      if (how === 'kill') child.kill('SIGKILL');
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.on('exit', r)));
      let left = tagged(tag);
      for (let i = 0; i < 200 && left.length; i++) {
        await new Promise((r) => setTimeout(r, 50));
        left = tagged(tag);
      }
      for (const p of left) try { process.kill(p.pid, 'SIGKILL'); } catch {}
      // Without a control group a setsid process leaves its group: README says so.
      const shouldBeGone = cgroups ? left : left.filter((p) => !/sleep [57]/.test(p.line));
      expect(shouldBeGone.map((p) => p.line)).toEqual([]);
    }, 60_000);
  }
});
