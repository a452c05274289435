// loop's extended mode (`loop { ... }`): runtime detection, containment and
// diagnosis of forwarding loops in every zone of the block, for every query
// type, for as long as the server runs. See README.md and docs/loop-safety.md.
//
// Three detectors, none of which can fire on a legitimately repeated query:
//  1. hop trace: every query handed to forward carries an EDNS0 option listing
//     the nodens blocks it passed; a query that arrives with this block's own
//     nonce in it has come back: certain loop (nodens → … → nodens rings);
//  2. probes: `<R1>.<R2>.<zone>` HINFO sent through one upstream at a time
//     (start, every upstream change, periodically, on a trigger); R2 is a MAC
//     of R1, so only this block claims it when it comes back — that upstream
//     loops (also through forwarders that drop EDNS options: dnsmasq, unbound);
//  3. trigger: a query identical to one this block has in flight upstream,
//     arriving from that upstream's address (or a local address when the
//     upstream is local), schedules a probe at once. It never decides alone.

import dgram from 'node:dgram';
import type { BlockConfig, Handler, HandlerResult, PluginLogger, Readiness, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { Message, EdnsOption } from '../../wire/types.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newMessage, replyTo } from '../../wire/message.ts';
import { findOptRecord, withoutOpt } from '../../wire/scan.ts';
import { EdnsOption as OptionCode, Rcode, RRClass, RRType, typeToString } from '../../wire/constants.ts';
import { asciiLower, isSubdomain } from '../../wire/name.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { nameMatches } from '../pkg/zones.ts';
import { loopMetrics, type LoopMetrics } from './metrics.ts';
import {
  BlockIdentity, HOP_TRACE_OPTION, LOOP_EDE_CODE, MAX_LISTED_HOPS, PROBE_MARKER,
  canonicalIp, classifyAddress, decodeTrace, edeOption, encodeTrace, formatPath, hostPort, isLocalAddress,
  localAddresses, originText, remedyFor, splitAddr, type Hop, type HopTrace, type OriginLike,
} from '../pkg/loopguard.ts';
import { UPSTREAM_USED, isUpstreamControl, type UpstreamControl, type UpstreamView } from '../pkg/upstreams.ts';
import { fatalMessage, joinHostPort } from './loop.ts';


export interface GuardOptions {
  /** contain: SERVFAIL+EDE and quarantine; exit: CoreDNS's fatal exit (with the diagnosis first). */
  action: 'contain' | 'exit';
  /** A query that has passed more nodens hops than this is treated as looping. */
  maxHops: number;
  /** Probe every upstream this often (0: only at start, on change and on triggers). */
  probeIntervalMs: number;
  /** Re-probe a quarantined upstream this often; the quarantine ends when the probe no longer comes back. */
  recheckMs: number;
  /** Add the hop-trace option to queries handed to forward. */
  trace: boolean;
  /** Report not-ready (ready plugin) while a loop is unresolved. */
  readiness: boolean;
  /** One probe's reply timeout. */
  probeTimeoutMs: number;
}

export const DEFAULT_GUARD_OPTIONS: GuardOptions = {
  action: 'contain', maxHops: 8, probeIntervalMs: 60_000, recheckMs: 10_000, trace: true, readiness: true, probeTimeoutMs: 2000,
};


export interface Quarantine {
  fwd: UpstreamControl;
  addr: string;
  zone: string;
  since: number;
  timer: NodeJS.Timeout | undefined;
}

interface PendingProbe {
  guard: LoopGuard;
  fwd: UpstreamControl;
  up: UpstreamView;
  zone: string;
  name: string;
  sentAt: number;
  done: boolean;
  reason: string;
}

/** Probes in flight in one server (shared by its blocks), by name: a probe may come back before its reply does. */
export type PendingProbes = Map<string, PendingProbe>;

interface Detection {
  zone: string;
  fwd: UpstreamControl | undefined;
  upstream: string;
  origin: OriginLike | undefined;
  path: string;
  query: string;
  remote: string;
  how: string;
}

export class LoopGuard implements Handler, Readiness {
  readonly name = 'loop';
  next: Handler | undefined;
  readonly opts: GuardOptions;
  readonly identity: BlockIdentity;
  private readonly config: BlockConfig;
  private readonly log: PluginLogger;
  private forwards: UpstreamControl[] = [];
  private readonly inflight = new Map<string, number>();
  private readonly quarantines = new Map<string, Quarantine>();
  private readonly lastProbe = new Map<string, number>();
  private readonly seenUpstreams = new Map<UpstreamControl, Set<string>>();
  private locals: Set<string> = new Set();
  private timers: NodeJS.Timeout[] = [];
  private stopped = true;
  /** Other blocks' listen addresses (filled at start). */
  private listens: Array<{ hosts: string[]; port: number; self: boolean; key: string }> = [];
  private readonly edeMark: string;

  private readonly pendingProbes: PendingProbes;

  /** `secret` and `probes` are the server's (its lineage store): shared by its blocks, never by another server. */
  private readonly m: LoopMetrics;

  constructor(config: BlockConfig, opts: GuardOptions, log: PluginLogger, secret: Uint8Array, probes: PendingProbes, metrics: LoopMetrics = loopMetrics()) {
    this.m = metrics;
    this.pendingProbes = probes;
    this.config = config;
    this.opts = opts;
    this.log = log;
    this.identity = new BlockIdentity(config.keys.join(' ') + '|' + config.listenHosts.join(' '), secret);
    this.edeMark = `nodens[${this.identity.id}]`;
  }

  // ---- lifecycle -------------------------------------------------------------------------------

  /** Called once the instance serves: find the forwards, check and probe every upstream, start timers. */
  start(blocks: readonly BlockConfig[]): void {
    this.stopped = false;
    const hs = this.config.handlers;
    const me = hs.indexOf(this);
    this.forwards = hs.slice(me + 1).filter(isUpstreamControl);
    this.locals = localAddresses();
    this.listens = blocks.map((b) => ({ hosts: b.listenHosts, port: Number(b.port), self: b === this.config, key: b.keys[0] ?? '' }));
    this.checkUpstreams(true);
    const poll = setInterval(() => { this.checkUpstreams(false); }, 1000);
    poll.unref();
    this.timers.push(poll);
    if (this.opts.probeIntervalMs > 0) {
      const t = setInterval(() => { this.probeAll('periodic'); }, this.opts.probeIntervalMs);
      t.unref();
      this.timers.push(t);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    for (const q of this.quarantines.values()) {
      if (q.timer !== undefined) clearInterval(q.timer);
      this.m.allQuarantines.delete(q);
    }
    this.quarantines.clear();
    this.m.quarantinedGauge.set(this.m.allQuarantines.size);
    for (const [n, p] of this.pendingProbes) if (p.guard === this) this.pendingProbes.delete(n);
  }

  /** A loop anywhere in the server makes /ready of every block say `loop`. */
  readonly readinessScope = 'server';

  /** ready plugin: false while a loop is unresolved (unless `readiness off`). */
  ready(): boolean {
    return !this.opts.readiness || this.quarantines.size === 0;
  }

  unresolved(): number { return this.quarantines.size; }

  // ---- serving -----------------------------------------------------------------------------------

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const name = req.name;
    if (this.identity.isProbe(name)) return this.answerProbe(req, w);
    // req.edns, not req.msg.edns: a query the server only scanned is not decoded for this.
    const edns = req.edns;
    let trace: HopTrace | undefined;
    if (edns !== undefined && edns.options.length > 0) {
      const opt = edns.options.find((o) => o.code === HOP_TRACE_OPTION);
      if (opt !== undefined) trace = decodeTrace(opt.data);
      if (trace !== undefined) {
        for (let i = 0; i < trace.path.length; i++) {
          if (this.identity.hasNonce(trace.path[i]!.nonce)) return this.cameBack(req, w, trace, i);
        }
        if (trace.hops >= this.opts.maxHops) return this.tooManyHops(req, w, trace);
      }
    }
    const fwd = this.forwardFor(name);
    if (fwd === undefined) return nextOrFailure(this.name, this.next, req, w);
    const key = name + '|' + req.qtype + '|' + req.qclass;
    if (this.inflight.has(key)) this.trigger(req, fwd);
    if (this.quarantines.size > 0 && this.allQuarantined(fwd)) return this.refuseQuarantined(req, w, fwd, trace);

    this.inflight.set(key, (this.inflight.get(key) ?? 0) + 1);
    const writer = new GuardWriter(this, req, w, edns === undefined && this.opts.trace);
    // With the trace on, the rest of the chain (forward) sees a derived query carrying the hop-trace option;
    // the client's writer and the plugins before this one keep the query as received.
    const onward = this.opts.trace ? req.derive({ msg: this.tagged(req, req.msg, trace) }) : req;
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, onward, writer);
    } catch (e) {
      this.settle(key);
      throw e;
    }
    if (typeof r === 'number') {
      this.settle(key);
      return r;
    }
    return r.finally(() => { this.settle(key); });
  }

  private settle(key: string): void {
    const n = (this.inflight.get(key) ?? 1) - 1;
    if (n <= 0) this.inflight.delete(key); else this.inflight.set(key, n);
  }

  private tagged(req: Request, msg: Message, incoming: HopTrace | undefined): Message {
    const me = this.hereHop(req);
    const path = incoming === undefined ? [me] : [...incoming.path.slice(0, MAX_LISTED_HOPS - 1), me];
    const t: HopTrace = { hops: (incoming?.hops ?? 0) + 1, path };
    const opt: EdnsOption = { code: HOP_TRACE_OPTION, data: encodeTrace(t) };
    const e = msg.edns;
    const options = e === undefined ? [opt] : [...e.options.filter((o) => o.code !== HOP_TRACE_OPTION), opt];
    return {
      ...msg,
      edns: e === undefined ? { udpSize: 512, version: 0, do: false, z: 0, options } : { ...e, options },
    };
  }

  private forwardFor(name: string): UpstreamControl | undefined {
    for (const f of this.forwards) {
      const from = f.upstreamZone;
      if (!nameMatches(from, name)) continue;
      if (name !== from && f.upstreamExceptions.some((ig) => nameMatches(ig, name))) continue;
      return f;
    }
    return undefined;
  }

  private allQuarantined(fwd: UpstreamControl): boolean {
    const ups = fwd.upstreams();
    if (ups.length === 0) return false;
    for (const u of ups) if (!u.quarantined) return false;
    return true;
  }

  /** The block's own hop for a path (the address the query arrived on). */
  private hereHop(req: Request): Hop {
    // A wildcard listener reports its bind address, not the packet's destination: leave it out.
    const a = req.localAddress;
    return { nonce: this.identity.nonce, addr: classifyAddress(a) === 'unspecified' ? '' : a, port: req.localPort };
  }

  private failWith(req: Request, w: ResponseWriter, text: string): number {
    const reply = replyTo(req.msg);
    reply.rcode = Rcode.SERVFAIL;
    // EDE only for clients that sent an OPT (RFC 6891: no OPT in a reply to a query without one).
    if (req.msg.edns !== undefined) {
      const ede = edeOption(LOOP_EDE_CODE, text);
      reply.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [ede] };
      // Also through the request, so the client still sees it when cache sits in front and drops the OPT.
      req.addExtendedError(ede);
    }
    w.writeMsg(reply);
    return 0; // written (CoreDNS: a plugin that wrote its SERVFAIL reports success)
  }

  /** Our own query came back: answer it (ending the lap) with SERVFAIL+EDE that names us. */
  private cameBack(req: Request, w: ResponseWriter, trace: HopTrace, at: number): number {
    const path = formatPath([...trace.path.slice(at), this.hereHop(req)]);
    const remote = joinHostPort(req.remoteAddress, String(req.remotePort));
    return this.failWith(req, w, `${this.edeMark} forwarding loop: ${path}; from ${remote}`);
  }

  private tooManyHops(req: Request, w: ResponseWriter, trace: HopTrace): number {
    const path = formatPath([...trace.path, this.hereHop(req)]);
    const zone = req.zone;
    this.m.detections.inc({ zone, upstream: '' });
    this.log.error(`Forwarding loop suspected for zone ${JSON.stringify(zone)}: query "${qdesc(req)}" has passed ${trace.hops} nodens hops (limit ${this.opts.maxHops}): ${path}; answered SERVFAIL; ${remedyFor(undefined)}`);
    return this.failWith(req, w, `nodens: too many forwarding hops (${trace.hops}): ${path}`);
  }

  private refuseQuarantined(req: Request, w: ResponseWriter, fwd: UpstreamControl, trace: HopTrace | undefined): number {
    if (trace !== undefined) {
      const at = this.senderInLoop(trace, fwd);
      if (at >= 0) return this.cameBackFor(req, w, trace, at);
    }
    const ups = fwd.upstreams().map((u) => u.addr).join(', ');
    return this.failWith(req, w, `nodens: forwarding loop: every upstream for ${fwd.upstreamZone} (${ups}) loops back to this server and is quarantined`);
  }

  /**
   * The index of the latest hop of `trace` that is the address of an upstream this block quarantined, or -1.
   * Such a hop is a nodens block that sent us this query while the place we would send it on is that block
   * itself: forwarding it would close the loop there.
   * Addresses must match exactly (a wildcard listener leaves its hop's address empty and never matches, so a
   * block elsewhere is never blamed for a loop it is not part of).
   */
  private senderInLoop(trace: HopTrace, fwd: UpstreamControl): number {
    for (let i = trace.path.length - 1; i >= 0; i--) {
      const h = trace.path[i]!;
      if (h.addr === '' || this.identity.hasNonce(h.nonce)) continue;
      const q = this.quarantines.get(hostPort(canonicalIp(h.addr), h.port));
      if (q !== undefined && q.fwd === fwd) return i;
    }
    return -1;
  }

  /**
   * A query from a block that is our quarantined upstream: answer what that block itself would answer had we
   * forwarded it back (SERVFAIL with EDE in its own name, see cameBack), so that its guard learns of the loop
   * from this reply and contains it at its end, instead of sending us every looping query (issue 16).
   * The same answer reaches that block's probes, which then keep its quarantine of us on recheck.
   */
  private cameBackFor(req: Request, w: ResponseWriter, trace: HopTrace, at: number): number {
    const sender = trace.path[at]!;
    const path = formatPath([...trace.path.slice(at), this.hereHop(req), sender]);
    const here = this.hereHop(req);
    return this.failWith(req, w, `nodens[${Buffer.from(sender.nonce).toString('hex')}] forwarding loop: ${path}; from ${hostPort(here.addr, here.port)}`);
  }

  /** A reply from forward carried our own loop EDE: the upstream used is part of a loop. */
  onLoopReply(req: Request, text: string): void {
    const upstream = req.value(UPSTREAM_USED) ?? '';
    const fwd = this.forwardFor(req.name);
    const up = fwd?.upstreams().find((u) => u.addr === upstream);
    const m = /forwarding loop: (.*); from (\S+)$/.exec(text);
    this.detected({
      zone: req.zone, fwd, upstream, origin: up?.origin, path: m?.[1] ?? '', query: qdesc(req), remote: m?.[2] ?? '',
      how: 'the query came back carrying this server\'s hop nonce',
    });
  }

  isOwnLoopText(text: string): boolean { return text.startsWith(this.edeMark); }

  // ---- detection outcome ---------------------------------------------------------------------------

  private detected(d: Detection): void {
    if (this.stopped) return;
    const qkey = `${d.upstream}`;
    const already = this.quarantines.get(qkey);
    if (already !== undefined && this.opts.action === 'contain') return; // one line per detection, not per query
    this.m.detections.inc({ zone: d.zone, upstream: d.upstream });
    const where = d.fwd === undefined ? '' : ` (${originText(d.origin)})`;
    const path = d.path === '' ? '' : `; path ${d.path}`;
    const then = this.opts.action === 'exit' ? 'stopping (loop { action exit })' : 'upstream quarantined, looping queries answered SERVFAIL with an Extended DNS Error';
    this.log.error(`Loop detected for zone ${JSON.stringify(d.zone)} through upstream ${d.upstream || '?'}${where}: ${d.how}${path}; query "${d.query}"; ${then}; ${remedyFor(d.origin)}`);
    if (this.opts.action === 'exit') {
      const [qtype, ...rest] = d.query.split(' ');
      this.log.fatal(fatalMessage(d.remote || '?', d.upstream || '?', d.zone, rest.join(' '), qtype));
    }
    if (d.fwd === undefined || d.upstream === '') return;
    this.quarantine(d.fwd, d.upstream, d.zone);
  }

  private quarantine(fwd: UpstreamControl, addr: string, zone: string): void {
    fwd.quarantine(addr, true);
    const q: Quarantine = { fwd, addr, zone, since: Date.now(), timer: undefined };
    q.timer = setInterval(() => {
      const up = fwd.upstreams().find((u) => u.addr === addr);
      if (up === undefined) { this.lift(q, 'it is no longer configured'); return; }
      this.probe(fwd, up, zone, 'recheck');
    }, this.opts.recheckMs);
    q.timer.unref();
    this.quarantines.set(addr, q);
    this.m.allQuarantines.add(q);
    this.m.quarantinedGauge.set(this.m.allQuarantines.size);
  }

  private lift(q: Quarantine, why: string): void {
    if (q.timer !== undefined) clearInterval(q.timer);
    this.quarantines.delete(q.addr);
    this.m.allQuarantines.delete(q);
    this.m.quarantinedGauge.set(this.m.allQuarantines.size);
    q.fwd.quarantine(q.addr, false);
    this.log.info(`Loop through upstream ${q.addr} for zone ${JSON.stringify(q.zone)} is gone (${why}) after ${((Date.now() - q.since) / 1000).toFixed(1)}s; upstream back in rotation`);
  }

  // ---- probes ---------------------------------------------------------------------------------------

  /** The zone a probe for block zone `z` through `fwd` uses, or undefined when fwd never sees names of z. */
  private probeZone(z: string, fwd: UpstreamControl): string | undefined {
    const from = fwd.upstreamZone;
    let zone: string | undefined;
    if (isSubdomain(z, from)) zone = z;
    else if (isSubdomain(from, z)) zone = from;
    if (zone === undefined) return undefined;
    if (fwd.upstreamExceptions.some((ig) => isSubdomain(zone!, ig))) return undefined;
    return zone;
  }

  private probeAll(reason: string, only?: (f: UpstreamControl, u: UpstreamView) => boolean): void {
    for (const fwd of this.forwards) {
      for (const up of fwd.upstreams()) {
        if (only !== undefined && !only(fwd, up)) continue;
        if (up.quarantined && this.quarantines.has(up.addr)) continue; // the recheck timer handles those
        for (const z of this.config.zones) {
          const zone = this.probeZone(z, fwd);
          if (zone !== undefined) this.probe(fwd, up, zone, reason);
        }
      }
    }
  }

  /** Send one probe through `up` (plain DNS over UDP, to that upstream alone). */
  probe(fwd: UpstreamControl, up: UpstreamView, zone: string, reason: string): void {
    if (this.stopped || up.kind !== 'dns') return;
    const hp = splitAddr(up.addr);
    if (hp === undefined) return;
    const rl = up.addr + '|' + zone;
    const now = Date.now();
    if (reason === 'trigger' && now - (this.lastProbe.get(rl) ?? 0) < 1000) return;
    this.lastProbe.set(rl, now);
    const name = this.identity.probeName(zone);
    const p: PendingProbe = { guard: this, fwd, up, zone, name, sentAt: now, done: false, reason };
    this.pendingProbes.set(name, p);
    const m = newMessage();
    m.id = (Math.random() * 0x10000) | 0;
    m.rd = true;
    m.question.push({ name, type: RRType.HINFO, class: RRClass.IN });
    const listen = this.config.listenHosts[0] ?? '';
    const t: HopTrace = { hops: 1, path: [{ nonce: this.identity.nonce, addr: listen, port: Number(this.config.port) }] };
    m.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [{ code: HOP_TRACE_OPTION, data: encodeTrace(t) }] };
    const wire = encodeMessage(m);
    const sock = dgram.createSocket(hp.host.includes(':') ? 'udp6' : 'udp4');
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      clearTimeout(timer);
      try { sock.close(); } catch { /* closed */ }
      // Keep the name a little longer: a slow lap may still bring it back.
      setTimeout(() => { if (this.pendingProbes.get(name) === p) this.pendingProbes.delete(name); }, 10_000).unref();
    };
    const timer = setTimeout(() => { close(); }, this.opts.probeTimeoutMs);
    timer.unref();
    sock.on('error', () => { close(); });
    sock.on('message', (b) => {
      if (b.length < 2 || b.readUInt16BE(0) !== m.id) return;
      close();
      let reply: Message;
      try { reply = decodeMessage(b); } catch { return; }
      const marker = reply.answer.find((rr) => rr.type === RRType.HINFO && asciiLower(rr.name) === name
        && Buffer.from((rr.data as { cpu: Uint8Array }).cpu).toString() === PROBE_MARKER);
      if (marker !== undefined) {
        const os = Buffer.from((marker.data as { os: Uint8Array }).os).toString();
        this.probeLooped(p, os.replace(/^\S+ /, ''), '');
        return;
      }
      // The upstream answered in this block's name (cameBackFor): it holds the loop's quarantine and would
      // have sent the probe straight back here.
      if (reply.rcode === Rcode.SERVFAIL) {
        for (const t of edeTexts(b)) {
          if (!this.isOwnLoopText(t)) continue;
          const m = /forwarding loop: (.*); from (\S+)$/.exec(t);
          this.probeLooped(p, m?.[1] ?? '', m?.[2] ?? '');
          return;
        }
      }
      this.probeClear(p);
    });
    sock.send(wire, hp.port, hp.host);
  }

  /** A probe came back to this block (here, or via the reply's marker). */
  probeLooped(p: PendingProbe, path: string, remote: string): void {
    if (p.done) return;
    p.done = true;
    if (this.quarantines.has(p.up.addr)) return; // still looping: stay quarantined
    this.detected({
      zone: p.zone, fwd: p.fwd, upstream: p.up.addr, origin: p.up.origin, path, remote,
      query: `HINFO ${p.name}`, how: `probe (${p.reason}) sent to that upstream came back to this server after ${Date.now() - p.sentAt} ms`,
    });
  }

  private probeClear(p: PendingProbe): void {
    if (p.done) return;
    p.done = true;
    const q = this.quarantines.get(p.up.addr);
    if (q !== undefined) this.lift(q, 'a probe through it was answered without coming back');
  }

  /** A probe of this block arrived: answer it with the marker (ends the lap) and settle it if it is ours here. */
  private answerProbe(req: Request, w: ResponseWriter): number {
    const name = req.name;
    const opt = req.msg.edns?.options.find((o) => o.code === HOP_TRACE_OPTION);
    const trace = opt === undefined ? undefined : decodeTrace(opt.data);
    const pathHops = [...(trace?.path ?? []), this.hereHop(req)];
    const path = formatPath(pathHops);
    const remote = joinHostPort(req.remoteAddress, String(req.remotePort));
    const p = this.pendingProbes.get(name);
    if (p !== undefined && p.guard === this) this.probeLooped(p, path, remote);
    const reply = replyTo(req.msg);
    reply.aa = true;
    reply.answer.push({
      name: req.qname, type: RRType.HINFO, class: RRClass.IN, ttl: 0,
      data: { cpu: Buffer.from(PROBE_MARKER), os: Buffer.from(`${this.identity.id} ${path}`) },
    });
    w.writeMsg(reply);
    return 0;
  }

  /** A query identical to one in flight arrived: if it comes from where that upstream would send it, probe now. */
  private trigger(req: Request, fwd: UpstreamControl): void {
    const src = canonicalIp(req.remoteAddress);
    const srcLocal = isLocalAddress(src, this.locals);
    this.probeAll('trigger', (f, u) => {
      if (f !== fwd) return false;
      const hp = splitAddr(u.addr);
      if (hp === undefined) return false;
      if (canonicalIp(hp.host) === src) return true;
      return srcLocal && isLocalAddress(hp.host, this.locals);
    });
  }

  // ---- self-awareness -------------------------------------------------------------------------------

  /** Look at every forward's upstreams; report the suspicious ones and probe new ones. */
  private checkUpstreams(initial: boolean): void {
    if (this.stopped) return;
    for (const fwd of this.forwards) {
      let seen = this.seenUpstreams.get(fwd);
      if (seen === undefined) { seen = new Set(); this.seenUpstreams.set(fwd, seen); }
      const ups = fwd.upstreams();
      const now = new Set(ups.map((u) => u.addr));
      const added = ups.filter((u) => !seen.has(u.addr));
      for (const gone of [...seen].filter((a) => !now.has(a))) {
        seen.delete(gone);
        const q = this.quarantines.get(gone);
        if (q !== undefined) this.lift(q, 'it is no longer configured');
      }
      if (added.length === 0) continue;
      if (!initial) this.locals = localAddresses();
      for (const u of added) {
        seen.add(u.addr);
        this.selfCheck(fwd, u);
      }
      const names = new Set(added.map((u) => u.addr));
      this.probeAll(initial ? 'start' : 'upstream change', (f, u) => f === fwd && names.has(u.addr));
    }
  }

  private selfCheck(fwd: UpstreamControl, u: UpstreamView): void {
    const hp = splitAddr(u.addr);
    if (hp === undefined) return;
    const host = canonicalIp(hp.host);
    const cls = classifyAddress(host);
    const local = isLocalAddress(host, this.locals);
    const zone = fwd.upstreamZone;
    const from = originText(u.origin);
    // This block first: for names of its zone the listener routes to it before any other block.
    const order = [...this.listens.filter((l) => l.self), ...this.listens.filter((l) => !l.self)];
    for (const l of order) {
      if (l.port !== hp.port) continue;
      const hit = l.hosts.some((h) => (h === '' ? local : canonicalIp(h) === host));
      if (!hit) continue;
      if (l.self) {
        this.log.warning(`Upstream ${u.addr} for zone ${JSON.stringify(zone)} (${from}) is this server block's own listen address: every query forwarded there comes straight back; ${remedyFor(u.origin)}`);
      } else {
        this.log.info(`Upstream ${u.addr} for zone ${JSON.stringify(zone)} (${from}) is served by this server (block ${l.key}); fine as long as that block does not forward back here`);
      }
      return;
    }
    if (u.origin.source === 'resolvconf' && cls === 'loopback') {
      this.log.warning(`Upstream ${u.addr} for zone ${JSON.stringify(zone)} (${from}) is a loopback address taken from a resolv.conf: in a pod or container that is the pod itself, on a host it is a local stub resolver that may forward back here; ${remedyFor(u.origin)}`);
      return;
    }
    if (cls === 'link-local' && this.listens.some((l) => l.hosts.some((h) => canonicalIp(h) === host))) {
      this.log.warning(`Upstream ${u.addr} for zone ${JSON.stringify(zone)} (${from}) is a link-local address this server binds (node-local cache address): queries forwarded there come back to this server; ${remedyFor(u.origin)}`);
    }
  }
}

function qdesc(req: Request): string {
  return `${typeToString(req.qtype)} ${req.qname}`;
}

/** EXTRA-TEXT of the EDE options of a wire reply, if any. */
function edeTexts(b: Uint8Array): string[] {
  const at = findOptRecord(b);
  if (at < 0) return [];
  let p = at + 1 + 8;
  if (p + 2 > b.length) return [];
  const rdlen = (b[p]! << 8) | b[p + 1]!;
  p += 2;
  const end = Math.min(b.length, p + rdlen);
  const out: string[] = [];
  while (p + 4 <= end) {
    const code = (b[p]! << 8) | b[p + 1]!;
    const len = (b[p + 2]! << 8) | b[p + 3]!;
    p += 4;
    if (code === OptionCode.EDE && len >= 2 && p + len <= end) out.push(Buffer.from(b.subarray(p + 2, p + len)).toString('utf8'));
    p += len;
  }
  return out;
}

/** Sits between loop and forward: notices our loop EDE in replies; removes the OPT we added for the client. */
class GuardWriter implements ResponseWriter {
  private readonly guard: LoopGuard;
  private readonly req: Request;
  private readonly inner: ResponseWriter;
  private readonly strip: boolean;

  constructor(guard: LoopGuard, req: Request, inner: ResponseWriter, strip: boolean) {
    this.guard = guard;
    this.req = req;
    this.inner = inner;
    this.strip = strip;
  }

  writeWire(reply: Uint8Array): void {
    if (reply.length >= 12 && (reply[3]! & 0x0f) === Rcode.SERVFAIL) {
      for (const t of edeTexts(reply)) {
        if (!this.guard.isOwnLoopText(t)) continue;
        this.guard.onLoopReply(this.req, t);
        if (this.req.msg.edns !== undefined) this.req.addExtendedError(edeOption(LOOP_EDE_CODE, t));
      }
    }
    this.inner.writeWire(this.strip ? withoutOpt(reply) : reply);
  }

  writeMsg(reply: Message): void {
    if (this.strip) reply.edns = undefined;
    this.inner.writeMsg(reply);
  }
}


export { loopMetrics };
