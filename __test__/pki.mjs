// The tests' own PKI: a CA and the certificates it signs, made in process with @peculiar/x509 over
// Node's WebCrypto, the same way on every platform (no openssl command, which Windows lacks).
// Keys are PKCS#8 PEM ("BEGIN PRIVATE KEY"), certificates X.509 v3 PEM, signed with SHA-256, valid
// from a minute ago for the CA's `days` (2 unless told).
// @peculiar/x509 resolves its parts with tsyringe, which needs the Reflect metadata API first.
import 'reflect-metadata';
import { webcrypto, KeyObject } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

const ALGORITHMS = {
  rsa: { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
  ec: { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' },
};
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const DAY = 24 * 3600 * 1000;

const keyPair = (type) => webcrypto.subtle.generateKey(ALGORITHMS[type], true, ['sign', 'verify']);
const keyPem = (key) => KeyObject.from(key).export({ type: 'pkcs8', format: 'pem' });
/** A positive 128-bit serial number (hex), as a CA picks at random. */
const serial = () => {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] & 0x7f) | 0x01;
  return Buffer.from(bytes).toString('hex');
};
const validity = (days) => ({ notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + days * DAY) });

/**
 * A CA: self-signed, `basicConstraints=critical,CA:TRUE` and `keyUsage=critical,keyCertSign,cRLSign`,
 * with a subject key identifier. `name` is its CN; `key` 'rsa' (2048 bits) or 'ec' (P-256); `days`
 * how long it and what it signs are valid.
 * Returns { cert, key } (PEM text) and issue(), which signs a leaf certificate with it.
 */
export async function certificateAuthority({ name, key: type = 'rsa', days = 2 } = {}) {
  const keys = await keyPair(type);
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${name}`,
    ...validity(days),
    keys,
    signingAlgorithm: ALGORITHMS[type],
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return {
    cert: caCert.toString('pem') + '\n',
    key: keyPem(keys.privateKey),
    /**
     * A certificate this CA signed, for a new key of `key` type ('rsa' or 'ec'). `subject` as in
     * 'CN=agent, O=corral'; `ip` a subjectAltName IP address; `usage` 'serverAuth' or 'clientAuth'
     * (extendedKeyUsage); `critical` marks basicConstraints (CA:FALSE) critical; `digitalSignature`
     * adds `keyUsage=critical,digitalSignature`. Returns { cert, key } (PEM text).
     */
    async issue({ subject, ip, usage, key: leafType = 'rsa', critical = false, digitalSignature = false }) {
      const leafKeys = await keyPair(leafType);
      const extensions = [];
      if (ip) extensions.push(new x509.SubjectAlternativeNameExtension([{ type: 'ip', value: ip }]));
      extensions.push(new x509.BasicConstraintsExtension(false, undefined, critical));
      if (digitalSignature) extensions.push(new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true));
      extensions.push(new x509.ExtendedKeyUsageExtension([{ serverAuth: SERVER_AUTH, clientAuth: CLIENT_AUTH }[usage]]));
      extensions.push(await x509.SubjectKeyIdentifierExtension.create(leafKeys.publicKey));
      extensions.push(await x509.AuthorityKeyIdentifierExtension.create(caCert));
      const leaf = await x509.X509CertificateGenerator.create({
        serialNumber: serial(),
        subject,
        issuer: caCert.subjectName,
        ...validity(days),
        publicKey: leafKeys.publicKey,
        signingKey: keys.privateKey,
        signingAlgorithm: ALGORITHMS[type],
        extensions,
      });
      return { cert: leaf.toString('pem') + '\n', key: keyPem(leafKeys.privateKey) };
    },
  };
}
