// Reading resolv.conf-style files as miekg/dns ClientConfigFromFile does:
// only `nameserver` lines count (any value, `%zone` dropped later), comments
// start with `#` or `;`, everything else is parsed and ignored; port 53.

import { readFileSync } from 'node:fs';

export interface NameserverLine {
  address: string;
  line: number;
}

export function parseResolvConf(text: string): NameserverLine[] {
  const out: NameserverLine[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    if (raw.length > 0 && (raw[0] === '#' || raw[0] === ';')) continue;
    const f = raw.split(/[ \t\r\f\v]+/).filter((x) => x.length > 0);
    if (f.length < 1) continue;
    if (f[0] === 'nameserver' && f.length > 1) out.push({ address: f[1]!, line: i + 1 });
  }
  return out;
}

/** Reads the file; throws Node's error when it cannot be read. */
export function readResolvConf(path: string): NameserverLine[] {
  return parseResolvConf(readFileSync(path, 'utf8'));
}

/** `fe80::1%eth0` → `fe80::1`. */
export function stripZone(s: string): string {
  const i = s.indexOf('%');
  return i < 0 ? s : s.slice(0, i);
}
