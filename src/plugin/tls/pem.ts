// Reading the certificate, key and CA files as Go's tls.LoadX509KeyPair and CoreDNS's loadRoots do, with
// their error texts: PEM blocks of other types are skipped, the certificate must parse and match the key.
// What node:tls is given is rebuilt from the blocks Go would use, so stray blocks do not upset OpenSSL.

import { readFileSync } from 'node:fs';
import { X509Certificate, createPrivateKey, type KeyObject } from 'node:crypto';

interface PemBlock {
  type: string;
  /** The block as PEM text (header, base64, footer). */
  text: string;
}

/** Go's pem.Decode over a whole input: every well-formed block, in order. */
function pemBlocks(data: Buffer): PemBlock[] {
  const text = data.toString('latin1');
  const out: PemBlock[] = [];
  const re = /-----BEGIN ([^\r\n-]*)-----\r?\n([\s\S]*?)-----END \1-----/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const body = m[2]!.replace(/^[A-Za-z-]+:.*\r?\n/gm, '').replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body)) continue;
    out.push({ type: m[1]!, text: m[0] + '\n' });
  }
  return out;
}

/** Go's os error text for a failed open or read of `file`: `open FILE: no such file or directory`. */
export function goOpenError(file: string, e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT': return `open ${file}: no such file or directory`;
    case 'EACCES': return `open ${file}: permission denied`;
    case 'EISDIR': return `read ${file}: is a directory`;
    case 'ENOTDIR': return `open ${file}: not a directory`;
    default: return `open ${file}: ${(e as Error).message}`;
  }
}

function readGo(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Error(goOpenError(file, e));
  }
}

/** Go's `%v` of a string slice. */
function goList(types: string[]): string {
  return '[' + types.join(' ') + ']';
}

/**
 * tls.LoadX509KeyPair: the CERTIFICATE blocks of `certFile` and the first private key block of `keyFile`, which
 * must match the first certificate. Throws with Go's text (without `could not load TLS cert: `).
 */
export function loadKeyPair(certFile: string, keyFile: string): { cert: Buffer; key: Buffer } {
  const certData = readGo(certFile);
  const keyData = readGo(keyFile);
  const certs: PemBlock[] = [];
  const skipped: string[] = [];
  for (const b of pemBlocks(certData)) {
    if (b.type === 'CERTIFICATE') certs.push(b);
    else skipped.push(b.type);
  }
  if (certs.length === 0) {
    if (skipped.length === 0) throw new Error('tls: failed to find any PEM data in certificate input');
    if (skipped.length === 1 && skipped[0]!.endsWith('PRIVATE KEY')) {
      throw new Error('tls: failed to find certificate PEM data in certificate input, but did find a private key; PEM inputs may have been switched');
    }
    throw new Error(`tls: failed to find "CERTIFICATE" PEM block in certificate input after skipping PEM blocks of the following types: ${goList(skipped)}`);
  }
  const keySkipped: string[] = [];
  let keyBlock: PemBlock | undefined;
  for (const b of pemBlocks(keyData)) {
    if (b.type === 'PRIVATE KEY' || b.type.endsWith(' PRIVATE KEY')) {
      keyBlock = b;
      break;
    }
    keySkipped.push(b.type);
  }
  if (keyBlock === undefined) {
    if (keySkipped.length === 0) throw new Error('tls: failed to find any PEM data in key input');
    if (keySkipped.length === 1 && keySkipped[0] === 'CERTIFICATE') {
      throw new Error('tls: found a certificate rather than a key in the PEM for the private key');
    }
    throw new Error(`tls: failed to find PEM block with type ending in "PRIVATE KEY" in key input after skipping PEM blocks of the following types: ${goList(keySkipped)}`);
  }
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(certs[0]!.text);
  } catch {
    throw new Error('x509: malformed certificate');
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(keyBlock.text);
  } catch {
    throw new Error('tls: failed to parse private key');
  }
  if (!x509.checkPrivateKey(key)) throw new Error('tls: private key does not match public key');
  return { cert: Buffer.from(certs.map((b) => b.text).join(''), 'latin1'), key: Buffer.from(keyBlock.text, 'latin1') };
}

/** CoreDNS's loadRoots: the CERTIFICATE blocks of `caFile` that parse; throws CoreDNS's text when none does. */
export function loadRoots(caFile: string): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(caFile);
  } catch (e) {
    throw new Error(`plugin/tls: error reading ${caFile}: ${goOpenError(caFile, e)}`);
  }
  const good: string[] = [];
  for (const b of pemBlocks(data)) {
    if (b.type !== 'CERTIFICATE') continue;
    try {
      new X509Certificate(b.text);
      good.push(b.text);
    } catch { /* AppendCertsFromPEM skips what does not parse */ }
  }
  // CoreDNS formats the (nil) error of a failed AppendCertsFromPEM with %s.
  if (good.length === 0) throw new Error('plugin/tls: could not read root certs: %!s(<nil>)');
  return Buffer.from(good.join(''), 'latin1');
}
