// The test Docker daemon's certificates (scripts/dockerd-test.sh), made with the tests' PKI
// (__test__/pki.mjs) as every test's are, in DIR: ca.pem; server-cert.pem and server-key.pem
// (127.0.0.1); cert.pem and key.pem, a client's; wrong-ca.pem, a CA that signed neither. P-256,
// valid for 7 days (a daemon's directory may be kept between runs).
// Usage: node scripts/docker-test-certs.mjs DIR
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { certificateAuthority } from '../__test__/pki.mjs';

const dir = process.argv[2];
if (!dir) throw new Error('usage: node scripts/docker-test-certs.mjs DIR');
mkdirSync(dir, { recursive: true });
const ca = await certificateAuthority({ name: 'corral test ca', key: 'ec', days: 7 });
const wrong = await certificateAuthority({ name: 'corral test wrong-ca', key: 'ec', days: 7 });
const server = await ca.issue({ subject: 'CN=127.0.0.1', ip: '127.0.0.1', usage: 'serverAuth', key: 'ec' });
const client = await ca.issue({ subject: 'CN=corral-test-client', usage: 'clientAuth', key: 'ec' });
const write = (name, text, mode = 0o644) => writeFileSync(join(dir, name), text, { mode });
write('ca.pem', ca.cert);
write('wrong-ca.pem', wrong.cert);
write('server-cert.pem', server.cert);
write('server-key.pem', server.key, 0o600);
write('cert.pem', client.cert);
// Written last: dockerd-test.sh takes the directory as made when key.pem is there.
write('key.pem', client.key, 0o600);
