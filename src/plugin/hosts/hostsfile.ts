// Parsing /etc/hosts-style text into lookup maps (CoreDNS plugin/hosts/hostsfile.go).

import { formatIPv4, formatIPv4Number, formatIPv6Go, isIPv4Mapped, parseIPv4, parseIPv6 } from '../../wire/ip.ts';
import { nextLabel } from '../../wire/name.ts';
import { normalizeName } from '../../corefile/address.ts';
import { zonesMatches } from '../pkg/zones.ts';
import type { PluginLogger } from '../plugin.ts';

/** Lookup maps of one source (the file, or the inline entries). Addresses are canonical text. */
export class HostsMap {
  /** Lower-cased FQDN → IPv4 addresses. */
  readonly name4 = new Map<string, string[]>();
  readonly name6 = new Map<string, string[]>();
  /** Wildcard owner (`*.example.org.`) → addresses. */
  readonly wild4 = new Map<string, string[]>();
  readonly wild6 = new Map<string, string[]>();
  /** Canonical address → names (for PTR). */
  readonly addr = new Map<string, string[]>();
  /** Addresses and names dropped as longer than MAX_FIELD_SIZE (each logged). */
  dropped = 0;

  /** CoreDNS Map.Len(): all addresses of all names plus all reverse names. */
  get length(): number {
    let l = 0;
    for (const m of [this.name4, this.name6, this.wild4, this.wild6]) for (const v of m.values()) l += v.length;
    for (const v of this.addr.values()) l += v.length;
    return l;
  }
}

export interface ParsedIP {
  family: 1 | 2;
  /** As Go's net.IP.String() prints it (IPv4-mapped IPv6 prints as IPv4). */
  text: string;
}

/** Go's net.ParseIP after dropping an IPv6 zone (`%eth0`); undefined when invalid. */
export function parseHostIP(s: string): ParsedIP | undefined {
  const pct = s.indexOf('%');
  if (pct >= 0) s = s.slice(0, pct);
  const v4 = parseIPv4(s);
  if (v4 >= 0) return { family: 1, text: formatIPv4Number(v4) };
  const b = parseIPv6(s);
  if (b === undefined) return undefined;
  if (isIPv4Mapped(b, 0)) return { family: 1, text: formatIPv4(b, 12) };
  return { family: 2, text: formatIPv6Go(b, 0) };
}

// CoreDNS 1.15.0's isSpace: ASCII white space only (1.14.7 split with bytes.Fields, Unicode spaces too).
function isSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/** A field longer than this many bytes is dropped (CoreDNS maxFieldSize): no DNS name is that long. */
export const MAX_FIELD_SIZE = 1024;

/** The fields of a line (split around runs of ASCII white space). */
function fields(line: string): string[] {
  const out: string[] = [];
  let start = -1;
  for (let i = 0; i < line.length; i++) {
    if (isSpace(line.charCodeAt(i))) {
      if (start >= 0) {
        out.push(line.slice(start, i));
        start = -1;
      }
    } else if (start < 0) start = i;
  }
  if (start >= 0) out.push(line.slice(start));
  return out;
}

function add(m: Map<string, string[]>, k: string, v: string): void {
  const l = m.get(k);
  if (l === undefined) m.set(k, [v]);
  else l.push(v);
}

function oversized(field: string): boolean {
  return field.length > MAX_FIELD_SIZE || (field.length * 3 > MAX_FIELD_SIZE && Buffer.byteLength(field, 'utf8') > MAX_FIELD_SIZE);
}

/**
 * Parses hosts text; names outside `origins` are ignored; `autoReverse` fills the PTR map. A field longer
 * than MAX_FIELD_SIZE bytes is dropped with an error line naming `source` and the line (CoreDNS 1.15.0):
 * an address drops its line, a name only itself.
 */
export function parseHosts(text: string, origins: readonly string[], autoReverse: boolean, source = '', log?: PluginLogger): HostsMap {
  const hmap = new HostsMap();
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    let raw = lines[n]!;
    const hash = raw.indexOf('#');
    if (hash >= 0) raw = raw.slice(0, hash);
    const f = fields(raw);
    if (f.length === 0) continue;
    if (oversized(f[0])) {
      hmap.dropped++;
      log?.error(`${source}, line ${n + 1}: address longer than ${MAX_FIELD_SIZE} bytes, dropping the line`);
      continue;
    }
    if (f.length < 2) continue;
    const ip = parseHostIP(f[0]);
    if (ip === undefined) continue;
    for (let i = 1; i < f.length; i++) {
      if (oversized(f[i])) {
        hmap.dropped++;
        log?.error(`${source}, line ${n + 1}: name longer than ${MAX_FIELD_SIZE} bytes, dropping the name`);
        continue;
      }
      const name = normalizeName(f[i]); // CoreDNS plugin.Name.Normalize: Go's strings.ToLower(dns.Fqdn(s))
      if (zonesMatches(origins, name) === '') continue;
      if (name.length >= 2 && name[0] === '*' && name[1] === '.') {
        add(ip.family === 1 ? hmap.wild4 : hmap.wild6, name, ip.text);
        continue;
      }
      add(ip.family === 1 ? hmap.name4 : hmap.name6, name, ip.text);
      if (autoReverse) add(hmap.addr, ip.text, name);
    }
  }
  return hmap;
}

/** `*.` + the name without its first label; '' for the root (miekg NextLabel "shot"). */
export function wildcardFor(qname: string): string {
  const i = nextLabel(qname, 0);
  return i >= qname.length ? '' : '*.' + qname.slice(i);
}

/** Exact entries of `host`, else those of its wildcard; undefined when none. */
export function lookupIn(exact: Map<string, string[]>, wild: Map<string, string[]>, host: string): string[] | undefined {
  const e = exact.get(host);
  if (e !== undefined) return e;
  if (wild.size === 0) return undefined;
  const pattern = wildcardFor(host);
  return pattern === '' ? undefined : wild.get(pattern);
}
