// A pod's processes for the fake Kubernetes cluster (kubernetes-fake.mjs). A pod is Linux: where
// the tests run on Linux, its commands run on this machine; where they run under Wine, on the
// Linux side of the same machine, through this runner, which scripts/cross/windows-wine.sh starts
// there (`node __test__/pod-runner.mjs <port file>`) and names in CORRAL_TEST_POD_RUNNER — as a
// kubelet runs a pod's commands on another machine than the client's.
//
// The wire, one TCP connection on 127.0.0.1 per process: the client sends one JSON line
// (`{ "op": "spawn", "argv": [...], "dir": "<the pod's directory>" }`, or `{ "op": "path", "path" }`
// for the runner's name of a directory the client named), the runner answers one JSON line
// (`{ "pid" }`, `{ "path" }` or `{ "error" }`), then frames go both ways: a channel byte, a
// 4-byte big-endian length, the data. Client to runner: 0 stdin, 255 the end of stdin. Runner to
// client: 1 stdout, 2 stderr, 3 the exit (`{ "code", "signal" }`), after which it closes. A
// connection that closes ends the command's stdin and nothing else.
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { readdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The environment a pod's command starts with: its directory as home. */
const podEnv = (dir, path) => ({ PATH: path, HOME: dir, LANG: 'C.UTF-8' });

const frame = (ch, data) => {
  const body = Buffer.from(data);
  const head = Buffer.alloc(5);
  head[0] = ch;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
};

/** Calls `onLine(line)` once, then `onFrame(ch, data)` for each frame a socket receives. */
function reader(socket, onLine, onFrame) {
  let buf = Buffer.alloc(0);
  let lineRead = false;
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    if (!lineRead) {
      const nl = buf.indexOf(10);
      if (nl < 0) return;
      lineRead = true;
      const line = buf.subarray(0, nl).toString();
      buf = buf.subarray(nl + 1);
      let head;
      try {
        head = JSON.parse(line);
      } catch {
        socket.destroy();
        return;
      }
      onLine(head);
    }
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      const n = buf.readUInt32BE(1);
      onFrame(buf[0], buf.subarray(5, 5 + n));
      buf = buf.subarray(5 + n);
    }
  });
}

/**
 * A pod's command, started in `dir`: a child process with `pid`, `stdin` (write, end,
 * writableEnded), `stdout` and `stderr` ('data') and 'close' (code, signal). On this machine
 * when the runner is not named, else through it; `pid` is a number once the runner has said it.
 */
export function podSpawn(argv, dir) {
  const runner = process.env.CORRAL_TEST_POD_RUNNER;
  if (!runner) {
    return spawn(argv[0], argv.slice(1), { cwd: dir, detached: true, env: podEnv(dir, process.env.PATH), stdio: ['pipe', 'pipe', 'pipe'] });
  }
  const child = new EventEmitter();
  child.stdout = new EventEmitter();
  child.stderr = new EventEmitter();
  const socket = net.connect(Number(runner), '127.0.0.1');
  socket.on('error', (e) => child.emit('error', e));
  socket.write(`${JSON.stringify({ op: 'spawn', argv, dir })}\n`);
  child.stdin = {
    writableEnded: false,
    on() {},
    write(data) {
      if (!this.writableEnded && !socket.destroyed) socket.write(frame(0, data));
    },
    end() {
      if (this.writableEnded) return;
      this.writableEnded = true;
      if (!socket.destroyed) socket.write(frame(255, Buffer.alloc(0)));
    },
  };
  let ended = false;
  reader(
    socket,
    (head) => {
      if (head.error) {
        ended = true;
        child.emit('error', new Error(head.error));
        child.emit('close', 127, null);
      } else child.pid = head.pid;
    },
    (ch, data) => {
      if (ch === 1) child.stdout.emit('data', Buffer.from(data));
      else if (ch === 2) child.stderr.emit('data', Buffer.from(data));
      else if (ch === 3 && !ended) {
        ended = true;
        const { code, signal } = JSON.parse(data.toString());
        child.emit('close', code, signal);
        socket.end();
      }
    },
  );
  socket.on('close', () => {
    if (ended) return;
    ended = true;
    child.emit('close', null, 'SIGKILL');
  });
  return child;
}

/** The runner's name for a directory the client named (the same name where there is no runner). */
export async function podPath(dir) {
  const runner = process.env.CORRAL_TEST_POD_RUNNER;
  if (!runner) return dir;
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(runner), '127.0.0.1');
    socket.on('error', reject);
    socket.write(`${JSON.stringify({ op: 'path', path: dir })}\n`);
    reader(socket, (head) => {
      socket.end();
      if (head.error) reject(new Error(head.error));
      else resolve(head.path);
    }, () => {});
  });
}

// ---- the runner (Linux) -------------------------------------------------------------------------

/**
 * A Windows path as Wine maps it to this machine's: a drive letter's directory is the link
 * `$WINEPREFIX/dosdevices/<letter>:` points to, and a name matches whatever case the disk has.
 */
function linuxPath(windowsPath) {
  const m = /^([A-Za-z]):[\\/]?(.*)$/.exec(windowsPath);
  if (!m) return windowsPath.replaceAll('\\', '/');
  let dir = join(process.env.WINEPREFIX, 'dosdevices', `${m[1].toLowerCase()}:`);
  for (const name of m[2].split(/[\\/]+/).filter(Boolean)) {
    let found = name;
    try {
      found = readdirSync(dir).find((n) => n.toLowerCase() === name.toLowerCase()) ?? name;
    } catch {}
    dir = join(dir, found);
  }
  return dir;
}

/** The process groups of the commands this runner started (each a session of its own). */
const groups = new Set();

function serve(socket) {
  socket.on('error', () => {});
  let child;
  const send = (ch, data) => !socket.destroyed && socket.write(frame(ch, data));
  reader(
    socket,
    (req) => {
      if (req.op === 'path') {
        socket.end(`${JSON.stringify({ path: linuxPath(req.path) })}\n`);
        return;
      }
      const dir = linuxPath(req.dir);
      child = spawn(req.argv[0], req.argv.slice(1), { cwd: dir, detached: true, env: podEnv(dir, process.env.PATH), stdio: ['pipe', 'pipe', 'pipe'] });
      child.stdin.on('error', () => {});
      child.on('error', (e) => {
        if (child.pid === undefined) socket.end(`${JSON.stringify({ error: e.message })}\n`);
      });
      if (child.pid === undefined) return;
      groups.add(child.pid);
      socket.write(`${JSON.stringify({ pid: child.pid })}\n`);
      child.stdout.on('data', (d) => send(1, d));
      child.stderr.on('data', (d) => send(2, d));
      child.on('close', (code, signal) => {
        groups.delete(child.pid);
        send(3, JSON.stringify({ code, signal }));
        socket.end();
      });
    },
    (ch, data) => {
      if (ch === 0) child?.stdin?.write(data);
      else if (ch === 255) child?.stdin?.end();
    },
  );
  socket.on('close', () => {
    if (child?.stdin && !child.stdin.writableEnded) child.stdin.end();
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // Stopped (windows-wine.sh's end): the pods' commands go with it, as a pod's go with the pod.
  // (The fake's own close cannot reach them from Windows.)
  process.on('SIGTERM', () => {
    for (const g of groups) {
      try {
        process.kill(-g, 'SIGKILL');
      } catch {}
    }
    process.exit(0);
  });
  const server = net.createServer(serve);
  server.listen(0, '127.0.0.1', () => {
    writeFileSync(process.argv[2], String(server.address().port));
  });
}
