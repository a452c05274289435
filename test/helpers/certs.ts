// Certificates made by the tests with openssl (a missing openssl is a loud failure, never a skip): a CA,
// a server certificate for 127.0.0.1 and localhost signed by it, a client certificate signed by it, and a
// self-signed certificate nobody trusts.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  ca: string;
  caKey: string;
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
  /** A self-signed certificate no test trusts. */
  otherCert: string;
  otherKey: string;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('openssl is not installed: apt-get install -y openssl');
    throw e;
  }
}

let made: TestCerts | undefined;

/** One set per test process (EC P-256, valid for a day). */
export function testCerts(): TestCerts {
  if (made !== undefined) return made;
  const dir = mkdtempSync(join(tmpdir(), 'nodens-certs-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=nodens test CA'], dir);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  openssl(['req', ...ec, '-keyout', 'key.pem', '-out', 'server.csr', '-subj', '/CN=localhost'], dir);
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'cert.pem',
    '-days', '1', '-extfile', 'server.ext'], dir);
  openssl(['req', ...ec, '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/CN=client'], dir);
  openssl(['x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.pem',
    '-days', '1', '-extfile', 'client.ext'], dir);
  openssl(['req', '-x509', ...ec, '-keyout', 'other.key', '-out', 'other.pem', '-days', '1', '-subj', '/CN=stranger'], dir);
  made = {
    dir, ca: join(dir, 'ca.pem'), caKey: join(dir, 'ca.key'), cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem'),
    clientCert: join(dir, 'client.pem'), clientKey: join(dir, 'client.key'),
    otherCert: join(dir, 'other.pem'), otherKey: join(dir, 'other.key'),
  };
  return made;
}
