// Reading resolv.conf-style files as miekg/dns ClientConfigFromFile does:
// comments start with `#` or `;`; `nameserver` lines give the servers (any
// value, `%zone` dropped later, port 53); `search` (or `domain`) the search
// list, the last such line winning. Everything else is ignored. Used by forward
// (TO files), the kubernetes plugin (autopath's search list) and doctor.

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

/**
 * The search list as miekg keeps it: the names of the last `search` line, or
 * the one name of a later `domain` line; as written (callers normalise).
 */
export function parseResolvConfSearch(text: string): string[] {
  let search: string[] = [];
  for (const raw of text.split('\n')) {
    if (raw.length > 0 && (raw[0] === '#' || raw[0] === ';')) continue;
    const f = raw.split(/[ \t\r\f\v]+/).filter((x) => x.length > 0);
    if (f[0] === 'search') search = f.slice(1);
    else if (f[0] === 'domain') search = f.length > 1 ? [f[1]!] : [];
  }
  return search;
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
