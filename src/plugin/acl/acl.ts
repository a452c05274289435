// acl: the first matching policy of each rule whose zones hold the query name decides
// whether the query goes on (allow), is refused (block), answered empty (filter) or
// left unanswered (drop). CoreDNS plugin/acl.

import type { Handler, HandlerResult, PluginLogger, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import type { Cidr } from '../../wire/ip.ts';
import { cidrContains, parseIPv4, parseIPv6Into } from '../../wire/ip.ts';
import { replyTo } from '../../wire/message.ts';
import { isSubdomain } from '../../wire/name.ts';
import { EdnsOption, ExtendedErrorCode, Rcode, RRType } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { CounterChild } from '../pkg/vec.ts';
import type { AclAction, AclRule } from './setup.ts';
import { aclMetrics, type AclMetrics } from './metrics.ts';
import type { CounterVec } from '../pkg/vec.ts';

const NONE = 0;
const ALLOW = 1;
const BLOCK = 2;
const FILTER = 3;
const DROP = 4;

const ACTIONS: Record<AclAction, number> = { allow: ALLOW, block: BLOCK, filter: FILTER, drop: DROP };

/** A policy ready for matching: IPv4 networks as numbers, IPv6 ones as CIDRs. */
interface Policy {
  readonly action: number;
  readonly anyType: boolean;
  readonly types: ReadonlySet<number>;
  /** Network addresses and masks of the IPv4 networks (unsigned 32-bit). */
  readonly v4addr: Uint32Array;
  readonly v4mask: Uint32Array;
  readonly v6: readonly Cidr[];
}

interface Rule {
  readonly zones: readonly string[];
  readonly policies: readonly Policy[];
}

/** The counters of one server: allowed, and per rule and zone the other three. */
interface Bound {
  readonly allowed: CounterChild;
  readonly blocked: CounterChild[][];
  readonly filtered: CounterChild[][];
  readonly dropped: CounterChild[][];
}

/** The EDE option data: INFO-CODE, no EXTRA-TEXT. */
function edeData(code: number): Uint8Array {
  return Uint8Array.of(code >> 8, code & 0xff);
}
const EDE_BLOCKED = edeData(ExtendedErrorCode.Blocked);
const EDE_FILTERED = edeData(ExtendedErrorCode.Filtered);

function compile(rules: readonly AclRule[]): Rule[] {
  return rules.map((r) => ({
    zones: r.zones,
    policies: r.policies.map((p) => {
      const v4 = p.nets.filter((n) => n.bytes.length === 4);
      const v4addr = new Uint32Array(v4.length);
      const v4mask = new Uint32Array(v4.length);
      v4.forEach((n, i) => {
        const b = n.bytes;
        const mask = n.bits === 0 ? 0 : (0xffffffff << (32 - n.bits)) >>> 0;
        v4mask[i] = mask;
        v4addr[i] = ((((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0) & mask) >>> 0;
      });
      return {
        action: ACTIONS[p.action],
        anyType: p.types.includes(RRType.None),
        types: new Set(p.types),
        v4addr,
        v4mask,
        v6: p.nets.filter((n) => n.bytes.length === 16),
      };
    }),
  }));
}

/** Index of the longest zone `qname` is in (CoreDNS plugin.Zones.Matches), -1 for none. */
function matchZone(zones: readonly string[], qname: string): number {
  let best = -1;
  let len = 0;
  for (let i = 0; i < zones.length; i++) {
    const z = zones[i];
    if (z.length > len && isSubdomain(qname, z)) {
      best = i;
      len = z.length;
    }
  }
  return best;
}

function blockedReply(req: Request, rcode: number, ede: Uint8Array): Message {
  const m = replyTo(req.msg);
  m.rcode = rcode;
  m.edns = { udpSize: 4096, version: 0, do: true, z: 0, options: [{ code: EdnsOption.EDE, data: ede }] };
  return m;
}

export class Acl implements Handler {
  readonly name = 'acl';
  private readonly next: Handler | undefined;
  private readonly rules: readonly Rule[];
  private readonly log: PluginLogger;
  private readonly bound = new Map<string, Bound>();
  /** The client's address of the query being matched: 4 (v4 in ip4), 6 (v6 in ip6), -1 unparsable, 0 not yet parsed. */
  private family = 0;
  private ip4 = 0;
  private readonly ip6 = new Uint8Array(16);

  private readonly m: AclMetrics;

  constructor(next: Handler | undefined, rules: readonly AclRule[], log: PluginLogger, metrics: AclMetrics = aclMetrics()) {
    this.next = next;
    this.rules = compile(rules);
    this.log = log;
    this.m = metrics;
  }

  private metrics(server: string): Bound {
    let b = this.bound.get(server);
    if (b === undefined) {
      const per = (vec: CounterVec): CounterChild[][] => this.rules.map((r) => r.zones.map((z) => vec.child(server, z, '')));
      const m = this.m;
      b = {
        allowed: m.allowedRequests.child(server, ''),
        blocked: per(m.blockedRequests),
        filtered: per(m.filteredRequests),
        dropped: per(m.droppedRequests),
      };
      this.bound.set(server, b);
    }
    return b;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const rules = this.rules;
    this.family = 0;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i];
      const zi = matchZone(rule.zones, qname);
      if (zi < 0) continue;
      const action = this.match(rule.policies, req);
      if (action === NONE) continue;
      if (action === ALLOW) break;
      const b = this.metrics(req.server);
      if (action === DROP) {
        b.dropped[i][zi].inc();
        return Rcode.NOERROR;
      }
      if (action === BLOCK) {
        w.writeMsg(blockedReply(req, Rcode.REFUSED, EDE_BLOCKED));
        b.blocked[i][zi].inc();
        return Rcode.NOERROR;
      }
      w.writeMsg(blockedReply(req, Rcode.NOERROR, EDE_FILTERED));
      b.filtered[i][zi].inc();
      return Rcode.NOERROR;
    }
    this.metrics(req.server).allowed.inc();
    return nextOrFailure(this.name, this.next, req, w);
  }

  /** Parse the client's address once per query (a `%zone` suffix is cut off, as CoreDNS does). */
  private parseClient(req: Request): void {
    let a = req.remoteAddress;
    const pct = a.indexOf('%');
    if (pct >= 0) a = a.slice(0, pct);
    const v4 = parseIPv4(a);
    if (v4 >= 0) {
      this.family = 4;
      this.ip4 = v4;
      return;
    }
    const b = this.ip6;
    if (!parseIPv6Into(a, b, 0)) {
      this.family = -1;
      return;
    }
    // An IPv4-mapped address is its IPv4 address (Go's To4).
    let mapped = b[10] === 0xff && b[11] === 0xff;
    for (let k = 0; mapped && k < 10; k++) if (b[k] !== 0) mapped = false;
    if (mapped) {
      this.family = 4;
      this.ip4 = ((b[12] << 24) | (b[13] << 16) | (b[14] << 8) | b[15]) >>> 0;
      return;
    }
    this.family = 6;
  }

  private match(policies: readonly Policy[], req: Request): number {
    if (this.family === 0) this.parseClient(req);
    if (this.family < 0) {
      this.log.error('Blocking request. Unable to parse source address: ' + req.remoteAddress);
      return BLOCK;
    }
    const qtype = req.qtype;
    for (let i = 0; i < policies.length; i++) {
      const p = policies[i];
      if (!p.anyType && !p.types.has(qtype)) continue;
      if (this.family === 4) {
        const ip = this.ip4;
        const addr = p.v4addr;
        const mask = p.v4mask;
        let hit = false;
        for (let k = 0; k < addr.length; k++) {
          if (((ip & mask[k]) >>> 0) === addr[k]) {
            hit = true;
            break;
          }
        }
        if (!hit) continue;
      } else {
        const nets = p.v6;
        let hit = false;
        for (let k = 0; k < nets.length; k++) {
          if (cidrContains(nets[k], this.ip6)) {
            hit = true;
            break;
          }
        }
        if (!hit) continue;
      }
      return p.action;
    }
    return NONE;
  }
}
