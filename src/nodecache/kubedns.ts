// The kube-dns ConfigMap as node-cache reads it (kubernetes/dns pkg/dns/config):
// a mounted directory, one file per key (`stubDomains` and `upstreamNameservers`
// as JSON, `federations`), polled and versioned by a SHA-256 over file names and
// contents, parsed, and validated both as kube-dns config and as `forward`
// targets. Invalid data never reaches the Corefile.

import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseIP } from '../wire/ip.ts';
import { goQuote } from '../corefile/address.ts';

export interface KubeDNSConfig {
  /** Domain → nameservers, in the JSON's order. */
  stubDomains: Map<string, string[]>;
  upstreamNameservers: string[];
  federations: Map<string, string>;
}

export function emptyKubeDNSConfig(): KubeDNSConfig {
  return { stubDomains: new Map(), upstreamNameservers: [], federations: new Map() };
}

export interface DirSnapshot {
  /** Hex SHA-256 over every file's name and contents; '' for an empty directory. */
  version: string;
  data: Map<string, string>;
}

/** Go-like text of a Node file-system error: `lstat /etc/kube-dns: no such file or directory`. */
export function fsErrorText(e: unknown, op: string, path: string): string {
  const m = e instanceof Error ? /^[A-Z]+: ([^,]+),/.exec(e.message) : null;
  return `${op} ${path}: ${m?.[1] ?? (e instanceof Error ? e.message : String(e))}`;
}

/** One scan of the directory (sync_dir.go load): regular files and links to them, not hidden, not recursing, in name order. */
export function loadConfigDir(dir: string): DirSnapshot {
  let st;
  try { st = lstatSync(dir); } catch (e) { throw new Error(fsErrorText(e, 'lstat', dir)); }
  if (!st.isDirectory()) throw new Error(`config path ${goQuote(dir)} is not a directory`);
  const hash = createHash('sha256');
  const data = new Map<string, string>();
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    // A ConfigMap mount holds `..data` and `..<timestamp>` (hidden or directories) and links to the files.
    if (lstatSync(path).isDirectory()) continue;
    if (name.startsWith('.')) continue;
    let buf: Buffer;
    try { buf = readFileSync(path); } catch (e) { throw new Error(fsErrorText(e, 'open', path)); }
    let text: string;
    try { text = new TextDecoder('utf-8', { fatal: true }).decode(buf); } catch { throw new Error(`non-utf8 data in ${path}`); }
    hash.update(name).update(Buffer.of(0)).update(buf).update(Buffer.of(0));
    data.set(name, text);
  }
  return { version: data.size > 0 ? hash.digest('hex') : '', data };
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const isLabel = (s: string): boolean => s.length <= 63 && DNS1123_LABEL.test(s);
const isSubdomain = (s: string): boolean => s.length <= 253 && DNS1123_SUBDOMAIN.test(s);
const isIP = (s: string): boolean => parseIP(s) !== undefined;

/** Go's net.SplitHostPort; undefined where Go returns an error. */
export function splitHostPort(s: string): { host: string; port: string } | undefined {
  const colon = s.lastIndexOf(':');
  if (colon < 0) return undefined; // missing port
  if (s[0] === '[') {
    const close = s.indexOf(']');
    if (close < 0 || close + 1 !== colon) return undefined;
    const host = s.slice(1, close);
    if (s.slice(close + 1).indexOf('[') >= 0 || s.indexOf(']', close + 1) >= 0) return undefined;
    return { host, port: s.slice(colon + 1) };
  }
  const host = s.slice(0, colon);
  if (host.includes(':') || host.includes('[') || host.includes(']')) return undefined; // too many colons
  return { host, port: s.slice(colon + 1) };
}

function parseFederations(value: string): Map<string, string> {
  const out = new Map<string, string>();
  if (value.trim() === '') return out;
  for (const part of value.split(',')) {
    const kv = part.trim();
    const eq = kv.indexOf('=');
    if (eq < 0) throw new Error('expected key=value pairs');
    out.set(kv.slice(0, eq).trim(), kv.slice(eq + 1).trim());
  }
  return out;
}

function parseStubDomains(value: string): Map<string, string[]> {
  const v: unknown = JSON.parse(value);
  const out = new Map<string, string[]>();
  if (v === null) return out;
  if (typeof v !== 'object' || Array.isArray(v)) throw new Error('json: cannot unmarshal into map[string][]string');
  for (const [k, list] of Object.entries(v as Record<string, unknown>)) {
    if (list === null) { out.set(k, []); continue; }
    if (!Array.isArray(list) || !list.every((x) => typeof x === 'string')) throw new Error(`json: cannot unmarshal the value of ${goQuote(k)} into []string`);
    out.set(k, list as string[]);
  }
  return out;
}

function parseUpstreams(value: string): string[] {
  const v: unknown = JSON.parse(value);
  if (v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error('json: cannot unmarshal into []string');
  return v as string[];
}

/** config.Validate: federations, stub domains, at most three upstreams as ip or ip:port. */
export function validateKubeDNS(c: KubeDNSConfig): void {
  for (const [name, domain] of c.federations) {
    if (!isLabel(name)) throw new Error(`${goQuote(name)} not a valid federation name`);
    if (!isSubdomain(domain)) throw new Error(`${goQuote(domain)} not a valid domain name`);
  }
  for (const [domain, list] of c.stubDomains) {
    if (!isSubdomain(domain)) throw new Error(`invalid domain name: ${goQuote(domain)}`);
    for (const ns of list) {
      const hp = splitHostPort(ns);
      const host = hp?.host ?? ns;
      const port = hp?.port ?? '';
      if (port !== '' && !(/^[0-9]+$/.test(port) && Number(port) <= 65535)) throw new Error(`invalid nameserver: ${goQuote(ns)}`);
      if (!isIP(host) && !isSubdomain(ns)) throw new Error(`invalid nameserver: ${goQuote(ns)}`);
    }
  }
  if (c.upstreamNameservers.length > 3) throw new Error('upstreamNameserver cannot have more than three entries');
  for (const ns of c.upstreamNameservers) {
    if (isIP(ns)) continue;
    const hp = splitHostPort(ns);
    if (hp === undefined) throw new Error(`address ${ns}: missing port in address`);
    if (!isIP(hp.host)) throw new Error(`bad IP address: ${goQuote(hp.host)}`);
    const p = /^[+-]?[0-9]+$/.test(hp.port) ? Number(hp.port) : NaN;
    if (!(p >= 1 && p <= 65535)) throw new Error(`bad port number: ${goQuote(hp.port)}`);
  }
}

const TRANSPORTS = ['tls', 'dns', 'quic', 'grpc', 'https3', 'https', 'unix'];

function transportOf(s: string): { trans: string; host: string } {
  for (const t of TRANSPORTS) if (s.startsWith(t + '://')) return { trans: t, host: s.slice(t.length + 3) };
  return { trans: 'dns', host: s };
}

function isFile(path: string): boolean {
  try { return statSync(path).isFile(); } catch { return false; }
}

/**
 * validateForwardProxy: each nameserver must be what `forward` accepts (parse.HostPortOrFile: an IP, IP:port,
 * or a resolv.conf-style file) over plain DNS or TLS.
 */
function validateForwardProxy(nameservers: string[]): void {
  if (nameservers.length === 0) return;
  for (const h of nameservers) {
    const { trans, host } = transportOf(h);
    if (host === '') throw new Error(`invalid address: ${goQuote(h)}`);
    const hp = splitHostPort(host);
    const addr = hp === undefined ? host.replace(/^\[+|\]+$/g, '') : hp.host;
    const noZone = addr.includes('%') ? addr.slice(0, addr.lastIndexOf('%')) : addr;
    if (trans !== 'unix' && !isIP(noZone)) {
      // A file's servers are plain DNS.
      if (isFile(host)) continue;
      throw new Error(`not an IP address or file ${goQuote(host)}`);
    }
    if (trans !== 'dns' && trans !== 'tls') throw new Error(`unsupported transport ${trans} of nameserver ${h}`);
  }
}

/** ValidateNodeLocalCacheConfig: the data can be compiled into a Corefile. */
export function validateNodeLocalCache(c: KubeDNSConfig): void {
  for (const [domain, list] of c.stubDomains) {
    try { validateForwardProxy(list); } catch (e) {
      throw new Error(`invalid nameservers [${list.join(' ')}] for the stub domain ${domain}: ${(e as Error).message}`);
    }
  }
  try { validateForwardProxy(c.upstreamNameservers); } catch (e) {
    throw new Error(`invalid upstream nameservers [${c.upstreamNameservers.join(' ')}]: ${(e as Error).message}`);
  }
}

/** A directory's data as kube-dns config (processUpdate): parse the three keys, then validate. */
export function configFromData(data: Map<string, string>): KubeDNSConfig {
  const c = emptyKubeDNSConfig();
  const parsers: Array<[string, (v: string) => void]> = [
    ['federations', (v) => { c.federations = parseFederations(v); }],
    ['stubDomains', (v) => { c.stubDomains = parseStubDomains(v); }],
    ['upstreamNameservers', (v) => { c.upstreamNameservers = parseUpstreams(v); }],
  ];
  for (const [key, parse] of parsers) {
    const value = data.get(key);
    if (value === undefined) continue;
    try { parse(value); } catch (e) { throw new Error(`Invalid configuration for ${key}, ignoring update: ${(e as Error).message}`); }
  }
  try { validateKubeDNS(c); } catch (e) { throw new Error(`Invalid configuration: ${(e as Error).message}, ignoring update`); }
  return c;
}

/**
 * A polled directory (config.NewFileSync): `once` reads it at start, `poll` returns the new config when the
 * version changed and the data is valid, undefined otherwise. A failed or invalid version is remembered, so
 * the same bad content is reported once.
 */
export class ConfigDirSync {
  readonly dir: string;
  private latestVersion = '';
  private readonly onError: (msg: string) => void;

  constructor(dir: string, onError: (msg: string) => void) {
    this.dir = dir;
    this.onError = onError;
  }

  once(): KubeDNSConfig {
    const snap = loadConfigDir(this.dir);
    this.latestVersion = snap.version;
    if (snap.version === '' && snap.data.size === 0) return emptyKubeDNSConfig();
    return configFromData(snap.data);
  }

  poll(): KubeDNSConfig | undefined {
    let snap: DirSnapshot;
    try { snap = loadConfigDir(this.dir); } catch (e) {
      this.onError(`Error loading config from ${this.dir}: ${(e as Error).message}`);
      return undefined;
    }
    if (snap.version === this.latestVersion) return undefined;
    this.latestVersion = snap.version;
    if (snap.version === '' && snap.data.size === 0) return emptyKubeDNSConfig();
    try { return configFromData(snap.data); } catch (e) {
      this.onError((e as Error).message);
      return undefined;
    }
  }
}
