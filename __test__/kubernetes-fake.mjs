// A fake Kubernetes API server for the KubernetesSandbox tests: HTTPS on 127.0.0.1 with a CA of
// its own and a bearer token, speaking the real wire protocol — the agent-sandbox custom objects
// (SandboxWarmPool, SandboxClaim with list, watch, merge patch and delete; Sandbox), pods, and
// pods/exec as a WebSocket upgrade with the v5 and v4 channel subprotocols. Each exec runs its
// argv for real in `podDir`, in a session of its own as a container runtime starts it, and —
// as a kubelet does — closing the exec stream does not stop the command. A pod is Linux: under
// Wine its commands run on the Linux side, through the pod runner (pod-runner.mjs).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { WebSocketServer } from 'ws';
import { certificates } from './helpers.mjs';
import { podSpawn } from './pod-runner.mjs';

const CLAIMS = '/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/';

const status = (code, reason, message) => ({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
const exitStatus = (code, signal) =>
  code === 0
    ? { metadata: {}, status: 'Success' }
    : {
        metadata: {},
        status: 'Failure',
        message: `command terminated with non-zero exit code: ${code ?? 128 + 9}`,
        reason: 'NonZeroExitCode',
        details: { causes: [{ reason: 'ExitCode', message: String(code ?? (signal === 'SIGKILL' ? 137 : 143)) }] },
      };

function merge(target, patch) {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (typeof v === 'object' && !Array.isArray(v) && typeof target[k] === 'object' && target[k] !== null) merge(target[k], v);
    else target[k] = v;
  }
  return target;
}

/**
 * Starts the fake. Options: `podDir` (where commands run), `token`,
 * `pools` (warm pool names), `namespace`, `readyAfterMs`, `outcome` ('ready' | 'never' |
 * { reason, message }), `protocols` (the exec subprotocols it accepts, in its order of preference),
 * `goneOnFirstWatch` (the first claim watch gets a 410 Gone), `anyPod` (execs in any pod name: for
 * the official client's check).
 */
export async function startFakeCluster(options) {
  const o = { token: 'fake-token-0123456789', pools: ['python'], namespace: 'agents', readyAfterMs: 100, outcome: 'ready', protocols: ['v5.channel.k8s.io', 'v4.channel.k8s.io'], goneOnFirstWatch: false, ...options };
  const { ca, key, cert, authority } = await certificates('fake cluster CA');
  let rv = 100;
  const claims = new Map();
  const sandboxes = new Map();
  const pods = new Map(); // pod name → the claim it serves
  const history = []; // { rv, type, object } of claims
  const watchers = new Set();
  const log = []; // every request: { method, path, query }
  const execs = []; // { pod, container, argv, protocol, pid, done }
  const patches = [];
  const deleted = [];
  let watches = 0;
  const fake = { ca, token: o.token, claims, sandboxes, pods, log, execs, patches, deleted, options: o, dropExec: null };

  const emit = (type, object) => {
    const ev = { rv: Number(object.metadata.resourceVersion), type, object: structuredClone(object) };
    history.push(ev);
    for (const w of watchers) w(ev);
  };
  const bump = (obj) => (obj.metadata.resourceVersion = String(++rv));

  const settle = (claim) => {
    const name = claim.metadata.name;
    const c = claims.get(name);
    if (!c) return;
    const outcome = o.outcome;
    const now = new Date().toISOString();
    if (outcome === 'ready') {
      const sb = `sb-${randomBytes(3).toString('hex')}`;
      const pod = `pod-${randomBytes(3).toString('hex')}`;
      pods.set(pod, name);
      sandboxes.set(sb, { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', metadata: { name: sb, namespace: o.namespace, annotations: { 'agents.x-k8s.io/pod-name': pod } } });
      c.status = { sandbox: { name: sb }, conditions: [{ type: 'Ready', status: 'True', reason: 'DependenciesReady', message: 'ready', lastTransitionTime: now }] };
    } else if (outcome === 'never') {
      c.status = { conditions: [{ type: 'Ready', status: 'False', reason: 'DependenciesNotReady', message: 'pod is pending', lastTransitionTime: now }] };
    } else {
      c.status = { conditions: [{ type: 'Ready', status: 'False', reason: outcome.reason, message: outcome.message ?? '', lastTransitionTime: now }] };
    }
    bump(c);
    emit('MODIFIED', c);
  };

  const send = (res, code, body) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const readBody = (req) => new Promise((resolve) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => resolve(b ? JSON.parse(b) : null));
  });
  // With `clientCertificates`, a client certificate the fake's CA signed is the credential; else the token.
  const authorized = (req) => (o.clientCertificates ? req.socket.authorized === true : req.headers.authorization === `Bearer ${o.token}`);

  const server = https.createServer({ key, cert, ...(o.clientCertificates ? { ca, requestCert: true, rejectUnauthorized: false } : {}) }, async (req, res) => {
    const url = new URL(req.url, 'https://x');
    const path = url.pathname;
    log.push({ method: req.method, path, query: Object.fromEntries(url.searchParams) });
    if (!authorized(req)) return send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    let m;
    if ((m = /^\/apis\/extensions\.agents\.x-k8s\.io\/v1beta1\/namespaces\/([^/]+)\/sandboxwarmpools\/([^/]+)$/.exec(path))) {
      if (req.method === 'GET' && m[1] === o.namespace && o.pools.includes(m[2])) {
        return send(res, 200, { apiVersion: 'extensions.agents.x-k8s.io/v1beta1', kind: 'SandboxWarmPool', metadata: { name: m[2], namespace: m[1] }, spec: { replicas: 1, sandboxTemplateRef: { name: 'tpl' } } });
      }
      return send(res, 404, status(404, 'NotFound', `sandboxwarmpools.extensions.agents.x-k8s.io "${m[2]}" not found`));
    }
    if ((m = /^\/apis\/extensions\.agents\.x-k8s\.io\/v1beta1\/namespaces\/([^/]+)\/sandboxclaims(?:\/([^/]+))?$/.exec(path))) {
      const [, ns, name] = m;
      if (ns !== o.namespace) return send(res, 404, status(404, 'NotFound', `namespaces "${ns}" not found`));
      if (!name && req.method === 'POST') {
        const body = await readBody(req);
        const claimName = body.metadata.name ?? `${body.metadata.generateName ?? 'claim-'}${randomBytes(3).toString('hex')}`;
        const c = { ...body, metadata: { ...body.metadata, name: claimName, namespace: ns, uid: randomBytes(8).toString('hex'), creationTimestamp: new Date().toISOString() } };
        delete c.metadata.generateName;
        bump(c);
        claims.set(claimName, c);
        emit('ADDED', c);
        setTimeout(() => settle(c), o.readyAfterMs);
        return send(res, 201, c);
      }
      if (!name && req.method === 'GET' && url.searchParams.get('watch') === 'true') {
        watches++;
        const since = Number(url.searchParams.get('resourceVersion') || 0);
        const field = url.searchParams.get('fieldSelector') ?? '';
        const only = /^metadata\.name=(.+)$/.exec(field)?.[1];
        res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
        res.flushHeaders();
        if (o.goneOnFirstWatch && watches === 1) {
          res.write(JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', 'too old resource version') }) + '\n');
          return res.end();
        }
        const write = (ev) => {
          if (ev.rv > since && (!only || ev.object.metadata.name === only)) res.write(JSON.stringify({ type: ev.type, object: ev.object }) + '\n');
        };
        history.forEach(write);
        watchers.add(write);
        req.on('close', () => watchers.delete(write));
        return;
      }
      if (!name && req.method === 'GET') {
        const selector = (url.searchParams.get('labelSelector') ?? '').split(',').filter(Boolean).map((kv) => kv.split('='));
        const items = [...claims.values()].filter((c) => selector.every(([k, v]) => c.metadata.labels?.[k] === v));
        return send(res, 200, { apiVersion: 'extensions.agents.x-k8s.io/v1beta1', kind: 'SandboxClaimList', metadata: { resourceVersion: String(rv) }, items });
      }
      const c = claims.get(name);
      if (!c) return send(res, 404, status(404, 'NotFound', `sandboxclaims.extensions.agents.x-k8s.io "${name}" not found`));
      if (req.method === 'GET') return send(res, 200, c);
      if (req.method === 'PATCH') {
        const patch = await readBody(req);
        patches.push({ name, patch, contentType: req.headers['content-type'] });
        merge(c, patch);
        bump(c);
        emit('MODIFIED', c);
        return send(res, 200, c);
      }
      if (req.method === 'DELETE') {
        claims.delete(name);
        deleted.push(name);
        for (const [pod, claim] of pods) if (claim === name) pods.delete(pod);
        bump(c);
        emit('DELETED', c);
        return send(res, 200, c);
      }
    }
    if ((m = /^\/apis\/agents\.x-k8s\.io\/v1beta1\/namespaces\/([^/]+)\/sandboxes\/([^/]+)$/.exec(path))) {
      const sb = sandboxes.get(m[2]);
      return sb ? send(res, 200, sb) : send(res, 404, status(404, 'NotFound', `sandboxes.agents.x-k8s.io "${m[2]}" not found`));
    }
    if ((m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(path)) && req.method === 'GET') {
      if (!pods.has(m[2]) && !o.anyPod) return send(res, 404, status(404, 'NotFound', `pods "${m[2]}" not found`));
      return send(res, 200, { apiVersion: 'v1', kind: 'Pod', metadata: { name: m[2], namespace: m[1] }, spec: { containers: [{ name: 'main', image: 'busybox' }, { name: 'sidecar', image: 'busybox' }] } });
    }
    return send(res, 404, status(404, 'NotFound', `the server could not find the requested resource (${req.method} ${path})`));
  });

  const wss = new WebSocketServer({ noServer: true, handleProtocols: (offered) => o.protocols.find((p) => offered.has(p)) ?? false });
  const frame = (ch, data) => Buffer.concat([Buffer.from([ch]), Buffer.from(data)]);
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url, 'https://x');
    log.push({ method: 'UPGRADE', path: url.pathname, query: Object.fromEntries(url.searchParams), protocols: req.headers['sec-websocket-protocol'] });
    if (!authorized(req)) return socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n' + JSON.stringify(status(401, 'Unauthorized', 'Unauthorized')));
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/exec$/.exec(url.pathname);
    if (!m || (!pods.has(m[2]) && !o.anyPod)) {
      const body = JSON.stringify(status(404, 'NotFound', `pods "${m?.[2]}" not found`));
      return socket.end(`HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      const argv = url.searchParams.getAll('command');
      const withStdin = url.searchParams.get('stdin') === 'true';
      const child = podSpawn(argv, o.podDir);
      child.on('error', () => {});
      child.stdin.on('error', () => {});
      const record = { pod: m[2], container: url.searchParams.get('container'), argv, protocol: ws.protocol, stdin: withStdin, done: false };
      // Through the pod runner, the pid is known once it has answered (before any output).
      Object.defineProperty(record, 'pid', { enumerable: true, get: () => child.pid });
      execs.push(record);
      if (!withStdin) child.stdin.end();
      child.stdout.on('data', (d) => ws.readyState === ws.OPEN && ws.send(frame(1, d)));
      child.stderr.on('data', (d) => ws.readyState === ws.OPEN && ws.send(frame(2, d)));
      ws.on('message', (msg) => {
        const buf = Buffer.from(msg);
        if (buf[0] === 0 && buf.length > 1) child.stdin.write(buf.subarray(1));
        else if (buf[0] === 255 && buf[1] === 0) child.stdin.end();
      });
      // A kubelet keeps the command running when the stream closes; v4 has no other end of stdin.
      ws.on('close', () => {
        if (!child.stdin.writableEnded) child.stdin.end();
      });
      ws.on('error', () => {});
      // A connection that breaks: the socket is destroyed without a status (`dropExec`: { afterMs, when(argv) }).
      if (fake.dropExec?.when(argv)) setTimeout(() => socket.destroy(), fake.dropExec.afterMs);
      child.on('close', (code, signal) => {
        record.done = true;
        record.code = code;
        if (ws.readyState === ws.OPEN) {
          ws.send(frame(3, JSON.stringify(exitStatus(code, signal))));
          ws.close(1000);
        }
      });
    });
  });

  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `https://127.0.0.1:${server.address().port}`;
  /** A kubeconfig for this server in `file` (token, CA and namespace as given). */
  fake.kubeconfig = (file, { token = o.token, namespace = o.namespace, user = null, current = 'fake', server = fake.url } = {}) => {
    const b64 = (t) => Buffer.from(t).toString('base64');
    const auth = user ? `    client-certificate-data: ${b64(user.cert)}\n    client-key-data: ${b64(user.key)}` : `    token: ${token}`;
    writeFileSync(file, `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: ${server}
    certificate-authority-data: ${b64(ca)}
- name: nowhere
  cluster:
    server: https://127.0.0.1:9
    certificate-authority-data: ${b64(ca)}
users:
- name: agent
  user:
${auth}
contexts:
- name: fake
  context:
    cluster: fake
    user: agent
    namespace: ${namespace}
- name: nowhere
  context:
    cluster: nowhere
    user: agent
    namespace: ${namespace}
current-context: ${current}
`);
    return file;
  };
  /** A client certificate and key the fake's CA signed (PEM), for `clientCertificates`. */
  fake.clientCertificate = () => authority.issue({ subject: 'CN=agent, O=corral', usage: 'clientAuth' });
  fake.close = () => new Promise((r) => {
    for (const e of execs) if (!e.done) try { process.kill(-e.pid, 'SIGKILL'); } catch {}
    for (const c of wss.clients) c.terminate();
    server.closeAllConnections?.();
    server.close(() => r());
  });
  return fake;
}
