// Shared by the health/ready/prometheus/reload end-to-end tests: HTTP GET,
// Prometheus text parsing, DNS queries, polling.

import http from 'node:http';
import dnsPacket from 'dns-packet';
import { exchange } from '../helpers/client.ts';

export interface HttpReply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** GET http://127.0.0.1:port/path (no keep-alive), bounded in time. Rejects on connection errors. */
export function get(port: number, path: string, timeoutMs = 3000, host = '127.0.0.1'): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path, agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body, headers: res.headers }); });
      res.on('error', reject);
    });
    req.on('timeout', () => { req.destroy(new Error(`GET ${path} on :${port} timed out`)); });
    req.on('error', reject);
  });
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

/** Parse the Prometheus text exposition format (what both CoreDNS and nodens serve). */
export function parseMetrics(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const familyOf = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: 'untyped', help: '', samples: [] };
      families.set(name, f);
    }
    return f;
  };
  let current: Family | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('# HELP ')) {
      const rest = line.slice(7);
      const sp = rest.indexOf(' ');
      familyOf(rest.slice(0, sp)).help = rest.slice(sp + 1);
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      current = familyOf(name!);
      current.type = type!;
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (m === null) throw new Error(`cannot parse metrics line: ${line}`);
    const labels: Record<string, string> = {};
    if (m[3] !== undefined && m[3] !== '') {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let lm: RegExpExecArray | null;
      while ((lm = re.exec(m[3])) !== null) labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const sampleName = m[1]!;
    let base = sampleName;
    if (current !== undefined && sampleName.startsWith(current.name)) base = current.name;
    else {
      for (const suffix of ['_bucket', '_sum', '_count']) {
        if (sampleName.endsWith(suffix) && families.has(sampleName.slice(0, -suffix.length))) base = sampleName.slice(0, -suffix.length);
      }
    }
    familyOf(base).samples.push({ name: sampleName, labels, value: Number(m[4]) });
  }
  return families;
}

/** The value of the one sample of `name` whose labels include `want` (undefined when none). */
export function value(families: Map<string, Family>, name: string, want: Record<string, string> = {}): number | undefined {
  const base = name.replace(/_(bucket|sum|count)$/, '');
  const f = families.get(name) ?? families.get(base);
  if (f === undefined) return undefined;
  let total: number | undefined;
  for (const s of f.samples) {
    if (s.name !== name) continue;
    if (Object.entries(want).every(([k, v]) => s.labels[k] === v)) total = (total ?? 0) + s.value;
  }
  return total;
}

export async function scrape(port: number): Promise<Map<string, Family>> {
  const r = await get(port, '/metrics');
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}: ${r.body}`);
  return parseMetrics(r.body);
}

let nextId = 1;

/** One DNS query over UDP (or TCP); returns the decoded reply. */
export async function query(port: number, name: string, type = 'A', opts: { tcp?: boolean; klass?: string; dnssec?: boolean } = {}): Promise<dnsPacket.Packet & { rcode?: string }> {
  const id = (nextId++ & 0xffff) || 1;
  const q = dnsPacket.encode({
    type: 'query', id, flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ type: type as dnsPacket.RecordType, name, class: (opts.klass ?? 'IN') as dnsPacket.RecordClass }],
    additionals: opts.dnssec ? [{ type: 'OPT', name: '.', udpPayloadSize: 1232, flags: dnsPacket.DNSSEC_OK }] as dnsPacket.Answer[] : [],
  });
  const r = await exchange(port, q, { tcp: opts.tcp });
  return dnsPacket.decode(r);
}

/** Poll `fn` until it returns a value that is not undefined/false, or fail after `ms`. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 10000, every = 100): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
