// hosts: answers A, AAAA and PTR queries from a hosts file and inline entries.

import { readFileSync, statSync } from 'node:fs';
import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { parseIPv4, parseIPv6Into } from '../../wire/ip.ts';
import { reverseToAddress } from '../../wire/name.ts';
import { goQuote } from '../../corefile/address.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { HostsMap, lookupIn, parseHosts, parseHostIP } from './hostsfile.ts';
import { hostsMetrics, type HostsMetrics } from './metrics.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';

export interface HostsOptions {
  path: string;
  origins: string[];
  ttl: number;
  autoReverse: boolean;
  /** Reload interval in milliseconds; 0 disables. */
  reloadMs: number;
  fall: Fall;
  fallthroughUnsupported: boolean;
  inline: string[];
}

/**
 * The last file parsed, by the same identity the reload check uses (path, mtime, size) and the options that shape
 * the map: the blocks of a Corefile that serve one hosts file (plain DNS and DoT, say), and the instances a reload
 * makes, share one map instead of parsing it again. Maps are never changed once built; held weakly. Not for a file
 * whose parse logged dropped fields: each instance logs those itself, as CoreDNS's do.
 */
let lastParse: { path: string; mtimeNs: bigint; size: bigint; origins: string; autoReverse: boolean; map: WeakRef<HostsMap> } | undefined;

function sharedParse(path: string, mtimeNs: bigint, size: bigint, origins: string, autoReverse: boolean): HostsMap | undefined {
  const p = lastParse;
  if (p === undefined || p.path !== path || p.mtimeNs !== mtimeNs || p.size !== size || p.autoReverse !== autoReverse || p.origins !== origins) return undefined;
  const m = p.map.deref();
  return m !== undefined && m.dropped === 0 ? m : undefined;
}

/** The loaded data: swapped as a whole on reload, read without locking. */
export class Hostsfile {
  readonly path: string;
  readonly origins: string[];
  readonly autoReverse: boolean;
  hmap = new HostsMap();
  inline = new HostsMap();
  private mtimeNs = -1n;
  private size = -1n;
  private readonly log: PluginLogger | undefined;

  private readonly metrics: HostsMetrics;

  constructor(path: string, origins: string[], autoReverse: boolean, inline: string[], log?: PluginLogger, metrics: HostsMetrics = hostsMetrics()) {
    this.metrics = metrics;
    this.path = path;
    this.origins = origins;
    this.autoReverse = autoReverse;
    this.log = log;
    if (inline.length > 0) this.inline = parseHosts(inline.join('\n'), origins, autoReverse, 'Inline hosts entries', log);
  }

  /** Re-read the file when its mtime or size changed (CoreDNS readHosts). Missing file: keep what we have. */
  readHosts(): void {
    let st;
    try {
      st = statSync(this.path, { bigint: true });
    } catch {
      return;
    }
    if (st.isDirectory()) return;
    if (st.mtimeNs === this.mtimeNs && st.size === this.size) return;
    const origins = this.origins.join(' ');
    let m = sharedParse(this.path, st.mtimeNs, st.size, origins, this.autoReverse);
    if (m === undefined) {
      let text: string;
      try {
        text = readFileSync(this.path, 'utf8');
      } catch {
        return;
      }
      m = parseHosts(text, this.origins, this.autoReverse, `Hosts file ${goQuote(this.path)}`, this.log);
      lastParse = { path: this.path, mtimeNs: st.mtimeNs, size: st.size, origins, autoReverse: this.autoReverse, map: new WeakRef(m) };
    }
    this.log?.debug(`Parsed hosts file into ${m.length} entries`);
    this.hmap = m;
    this.mtimeNs = st.mtimeNs;
    this.size = st.size;
    this.metrics.hostsEntries.set({ hostsfile: this.path }, this.inline.length + m.length);
    this.metrics.hostsReloadTimestamp.set(Number(st.mtimeNs) / 1e9);
  }

  lookupV4(host: string): string[] {
    return concat(lookupIn(this.hmap.name4, this.hmap.wild4, host), lookupIn(this.inline.name4, this.inline.wild4, host));
  }

  lookupV6(host: string): string[] {
    return concat(lookupIn(this.hmap.name6, this.hmap.wild6, host), lookupIn(this.inline.name6, this.inline.wild6, host));
  }

  hasAddress(host: string): boolean {
    return lookupIn(this.hmap.name4, this.hmap.wild4, host) !== undefined ||
      lookupIn(this.inline.name4, this.inline.wild4, host) !== undefined ||
      lookupIn(this.hmap.name6, this.hmap.wild6, host) !== undefined ||
      lookupIn(this.inline.name6, this.inline.wild6, host) !== undefined;
  }

  lookupAddr(addr: string | undefined): string[] {
    if (addr === undefined) return EMPTY;
    const ip = parseHostIP(addr);
    if (ip === undefined) return EMPTY;
    return concat(this.hmap.addr.get(ip.text), this.inline.addr.get(ip.text));
  }
}

const EMPTY: string[] = [];

function concat(a: string[] | undefined, b: string[] | undefined): string[] {
  if (a === undefined) return b ?? EMPTY;
  if (b === undefined) return a;
  return a.concat(b);
}

export class Hosts implements Handler {
  readonly name = 'hosts';
  readonly next: Handler | undefined;
  readonly file: Hostsfile;
  readonly origins: string[];
  readonly ttl: number;
  readonly fall: Fall;
  readonly fallthroughUnsupported: boolean;

  constructor(next: Handler | undefined, file: Hostsfile, opts: Pick<HostsOptions, 'ttl' | 'fall' | 'fallthroughUnsupported'>) {
    this.next = next;
    this.file = file;
    this.origins = file.origins;
    this.ttl = opts.ttl;
    this.fall = opts.fall;
    this.fallthroughUnsupported = opts.fallthroughUnsupported;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const qtype = req.qtype;
    if (zonesMatches(this.origins, qname) === '' && qtype !== RRType.PTR) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    let answer: ResourceRecord[] = [];
    const ttl = this.ttl;
    switch (qtype) {
      case RRType.PTR: {
        const names = this.file.lookupAddr(reverseToAddress(qname));
        if (names.length === 0) return nextOrFailure(this.name, this.next, req, w);
        answer = new Array<ResourceRecord>(names.length);
        for (let i = 0; i < names.length; i++) {
          answer[i] = { name: qname, type: RRType.PTR, class: RRClass.IN, ttl, data: { target: names[i] } };
        }
        break;
      }
      case RRType.A:
      case RRType.AAAA: {
        const ips = qtype === RRType.A ? this.file.lookupV4(qname) : this.file.lookupV6(qname);
        if (ips.length > 0 && req.hasWire) {
          const out = answerWire(req, qtype, ips, ttl);
          if (out !== undefined) {
            w.writeWire(out);
            return 0;
          }
        }
        answer = new Array<ResourceRecord>(ips.length);
        for (let i = 0; i < ips.length; i++) {
          answer[i] = { name: qname, type: qtype, class: RRClass.IN, ttl, data: { address: ips[i] } };
        }
        break;
      }
      default:
        if (this.fallthroughUnsupported && this.fall.through(qname)) {
          return nextOrFailure(this.name, this.next, req, w);
        }
    }
    if (answer.length === 0 && !this.file.hasAddress(qname)) {
      if (this.fall.through(qname)) return nextOrFailure(this.name, this.next, req, w);
      // No SOA to build an NXDOMAIN with: SERVFAIL, written by the server.
      return Rcode.SERVFAIL;
    }
    const reply = replyTo(req.msg);
    reply.aa = true;
    reply.answer = answer;
    w.writeMsg(reply);
    return 0;
  }
}

/**
 * The reply to an A or AAAA question with `ips` in wire form, built from the query's bytes: what
 * `replyTo` + the answer records + the server's encoder would produce, without building a Message or
 * running the encoder. A reply that fits the client goes out uncompressed (Scrub), so it is the header,
 * the question as received and each record with the lower-cased question name as owner (what
 * encoding `req.name` writes). The writer adds the OPT and, when the reply is too large for the client,
 * decodes and truncates it. Undefined when the question uses a compression pointer or an address does
 * not parse: the caller builds the Message instead. Only for a request whose bytes are at hand
 * (`req.hasWire`): encoding a derived query to copy its question would cost more than it saves.
 */
function answerWire(req: Request, qtype: number, ips: readonly string[], ttl: number): Buffer | undefined {
  const q = req.wire;
  const qEnd = req.questionEnd;
  if (qEnd < 0 || qEnd > q.length) return undefined;
  const nameLen = qEnd - 4 - 12;
  // The name's labels end exactly at its root byte: no pointer (a pointer's target would have to be copied).
  let p = 12;
  while (p < 12 + nameLen - 1) {
    const l = q[p]!;
    if ((l & 0xc0) !== 0) return undefined;
    p += l + 1;
  }
  if (p !== 12 + nameLen - 1 || q[p] !== 0) return undefined;
  const rdlen = qtype === RRType.A ? 4 : 16;
  const rrLen = nameLen + 10 + rdlen;
  const out = Buffer.allocUnsafe(qEnd + ips.length * rrLen);
  // Header: miekg's SetReply (ID and opcode; RD and CD for QUERY) with AA; one question, the answers.
  const opcode = (q[2]! >> 3) & 0x0f;
  out[0] = q[0]!;
  out[1] = q[1]!;
  out[2] = 0x80 | (opcode << 3) | 0x04 | (opcode === 0 ? q[2]! & 0x01 : 0);
  out[3] = opcode === 0 ? q[3]! & 0x10 : 0;
  out[4] = 0; out[5] = 1;
  out[6] = ips.length >> 8; out[7] = ips.length & 0xff;
  out[8] = 0; out[9] = 0; out[10] = 0; out[11] = 0;
  out.set(q.subarray(12, qEnd), 12);
  let o = qEnd;
  for (let i = 0; i < ips.length; i++) {
    // Owner: the question name lower-cased (ASCII letters only, as asciiLower on the presentation form).
    for (let k = 12; k < 12 + nameLen; k++) {
      const c = q[k]!;
      out[o++] = c >= 65 && c <= 90 ? c | 0x20 : c;
    }
    out[o++] = qtype >> 8; out[o++] = qtype & 0xff;
    out[o++] = 0; out[o++] = RRClass.IN;
    out.writeUInt32BE(ttl >>> 0, o);
    o += 4;
    out[o++] = 0; out[o++] = rdlen;
    if (qtype === RRType.A) {
      const v = parseIPv4(ips[i]!);
      if (v < 0) return undefined;
      out.writeUInt32BE(v >>> 0, o);
    } else if (!parseIPv6Into(ips[i]!, out, o)) return undefined;
    o += rdlen;
  }
  return out;
}
