// SubprocessSandbox with a Docker daemon on TCP with TLS: the test daemon (scripts/dockerd-test.sh)
// also listens on 127.0.0.1 with --tlsverify and certificates the script made
// (CORRAL_DOCKER_TLS_HOST, CORRAL_DOCKER_CERT_PATH). Skipped without it.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SandboxShell, SubprocessSandbox, ConfigurationError, createCredentialBroker } from 'corral';
import { perTestTrees } from './helpers.mjs';
import { IMAGE, containersFor } from './docker-engine.mjs';

const TLS_HOST = process.env.CORRAL_DOCKER_TLS_HOST;
const CERTS = process.env.CORRAL_DOCKER_CERT_PATH;
const { tree, cleanups } = perTestTrees();
const file = (name) => join(CERTS, name);

/** Sets process.env for this test only (the addon reads it when a sandbox is made). */
function setEnv(vars) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  cleanups.push(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}

describe('SubprocessSandbox tls option checks', () => {
  it('refuses tls for a unix socket, a cert without its key, and a file that cannot be read, naming the option', () => {
    const cases = [
      [{ dockerHost: 'unix:///var/run/docker.sock', tls: { ca: '-----BEGIN CERTIFICATE-----' } }, /tls is for a daemon on TCP/],
      [{ dockerHost: 'tcp://127.0.0.1:1', tls: { cert: '/x/cert.pem' } }, /tls: cert and key go together/],
      [{ dockerHost: 'tcp://127.0.0.1:1', tls: { ca: '/nonexistent/ca.pem' } }, /tls\.ca: "\/nonexistent\/ca.pem" is neither PEM text nor a readable file/],
      [{ dockerHost: 'tcp://127.0.0.1:1', tls: { ca: '-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n' } }, /tls\.ca/],
      [{ dockerHost: 'tcp://127.0.0.1:1', tls: { ca: 'x', extra: 1 } }, /unknown option 'extra'/],
      [{ dockerHost: 'tcp://127.0.0.1:99999' }, /tcp:\/\/HOST:PORT/],
    ];
    for (const [options, message] of cases) {
      const make = () => new SubprocessSandbox({ image: IMAGE, protect: [], ...options });
      expect(make).toThrow(ConfigurationError);
      expect(make).toThrow(message);
    }
  });
});

describe.skipIf(!TLS_HOST)('SubprocessSandbox against a Docker daemon on 127.0.0.1 with TLS', () => {
  it('runs a command over TLS with tls given as files, and as PEM text', async () => {
    const t = tree();
    for (const tls of [
      { ca: file('ca.pem'), cert: file('cert.pem'), key: file('key.pem') },
      { ca: readFileSync(file('ca.pem'), 'utf8'), cert: readFileSync(file('cert.pem'), 'utf8'), key: readFileSync(file('key.pem'), 'utf8') },
    ]) {
      const shell = new SandboxShell(new SubprocessSandbox({ image: IMAGE, protect: [], dockerHost: TLS_HOST, tls }), { cwd: t.root });
      const r = await shell.exec('echo over tls > via-tls.txt; cat via-tls.txt; pwd', { timeoutMs: 30_000 });
      expect(r).toMatchObject({ exitCode: 0, stdout: `over tls\n${t.root}\n` });
    }
  });

  it('reads DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH as the docker CLI does', async () => {
    const t = tree();
    setEnv({ DOCKER_HOST: TLS_HOST, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: CERTS });
    const sandbox = new SubprocessSandbox({ image: IMAGE, protect: [], reuse: 'session' });
    cleanups.push(() => sandbox.close());
    const shell = new SandboxShell(sandbox, { cwd: t.root });
    expect(await shell.exec('echo from env')).toMatchObject({ exitCode: 0, stdout: 'from env\n' });
  });

  it('refuses a daemon whose certificate the given CA did not sign, clearly, and starts nothing', async () => {
    const t = tree();
    const sandbox = new SubprocessSandbox({ image: IMAGE, protect: [], dockerHost: TLS_HOST, tls: { ca: file('wrong-ca.pem'), cert: file('cert.pem'), key: file('key.pem') } });
    const e = await new SandboxShell(sandbox, { cwd: t.root }).exec('touch ran').catch((err) => err);
    expect(e).toBeInstanceOf(Error);
    expect(e.message).toMatch(/TLS handshake with the Docker daemon at tcp:\/\/127\.0\.0\.1:\d+ failed: invalid peer certificate: UnknownIssuer/);
    expect(e.message).toContain('tls.ca');
    expect(await containersFor(t.root)).toEqual([]);
  });

  it('says what is missing without a client certificate, and when TLS is not spoken at all', async () => {
    const t = tree();
    const noCert = new SubprocessSandbox({ image: IMAGE, protect: [], dockerHost: TLS_HOST, tls: { ca: file('ca.pem') } });
    const e1 = await new SandboxShell(noCert, { cwd: t.root }).exec('true').catch((err) => err);
    expect(e1.message).toMatch(/tls\.cert and tls\.key/);
    const plain = new SubprocessSandbox({ image: IMAGE, protect: [], dockerHost: TLS_HOST });
    const e2 = await new SandboxShell(plain, { cwd: t.root }).exec('true').catch((err) => err);
    expect(e2.message).toMatch(/speaks TLS: give tls/);
    expect(await containersFor(t.root)).toEqual([]);
  });

  it('refuses allowlisted egress through a daemon on TCP (the broker cannot listen on its network)', async () => {
    const t = tree();
    const broker = await createCredentialBroker({ rules: {} });
    cleanups.push(() => broker.close());
    const sandbox = new SubprocessSandbox({ image: IMAGE, protect: [], dockerHost: TLS_HOST, tls: { ca: file('ca.pem'), cert: file('cert.pem'), key: file('key.pem') }, network: { allow: ['example.com'] }, broker });
    const e = await new SandboxShell(sandbox, { cwd: t.root }).exec('true').catch((err) => err);
    expect(e.code).toBe('LOUSHO_SANDBOX_EGRESS_UNSUPPORTED');
    expect(e.message).toContain(TLS_HOST);
  });
});
