// node bench/broker.mjs: the credential broker's added latency and throughput against direct
// requests to the same local upstream, in the same run (loopback only). Not a test.
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { createCredentialBroker } from 'corral';

const N = Number(process.argv[2]) || 2000;
const CONCURRENCY = 32;

const upstream = http.createServer((req, res) => res.end(`ok ${req.headers.authorization ? 'auth' : 'none'}`));
await new Promise((r) => upstream.listen(0, '127.0.0.2', r));
const port = upstream.address().port;
// The header as a JS function (called per request, through the event loop) or a fixed string.
const fnBroker = await createCredentialBroker({ rules: { '127.0.0.2': { authorization: () => 'Bearer bench-token' } }, allowPrivate: ['127.0.0.2'] });
const strBroker = await createCredentialBroker({ rules: { '127.0.0.2': { authorization: 'Bearer bench-token' } }, allowPrivate: ['127.0.0.2'] });
let proxy = new URL(fnBroker.url);

function get(agent, viaProxy) {
  return new Promise((resolve, reject) => {
    const target = `http://127.0.0.2:${port}/x`;
    const opts = viaProxy
      ? { host: proxy.hostname, port: proxy.port, path: target, headers: { host: `127.0.0.2:${port}` }, agent }
      : { host: '127.0.0.2', port, path: '/x', agent };
    http.get(opts, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

async function latency(viaProxy) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const xs = [];
  for (let i = 0; i < 200; i++) await get(agent, viaProxy); // warm-up
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const body = await get(agent, viaProxy);
    xs.push(performance.now() - t0);
    if (body !== (viaProxy ? 'ok auth' : 'ok none')) throw new Error(`unexpected body ${body}`);
  }
  agent.destroy();
  xs.sort((a, b) => a - b);
  return { p50: xs[Math.floor(N / 2)], p99: xs[Math.floor(N * 0.99)] };
}

async function throughput(viaProxy) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => { while (next++ < N * 2) await get(agent, viaProxy); }));
  const s = (performance.now() - t0) / 1000;
  agent.destroy();
  return (N * 2) / s;
}

const us = (ms) => `${(ms * 1000).toFixed(0)} µs`;
const direct = await latency(false);
const td = await throughput(false);
console.log(`direct: latency p50 ${us(direct.p50)} p99 ${us(direct.p99)} (keep-alive, sequential, ${N} requests); throughput ${td.toFixed(0)} req/s (${CONCURRENCY} keep-alive clients)`);
for (const [label, broker] of [['header from a JS function', fnBroker], ['header as a string', strBroker]]) {
  proxy = new URL(broker.url);
  const b = await latency(true);
  const tb = await throughput(true);
  console.log(`via broker, ${label}: latency p50 ${us(b.p50)} p99 ${us(b.p99)}, added p50 ${us(b.p50 - direct.p50)}; throughput ${tb.toFixed(0)} req/s (${((tb / td) * 100).toFixed(0)}% of direct)`);
}
console.log('(client, broker and upstream share this machine\'s cores)');
await fnBroker.close();
await strBroker.close();
upstream.close();
