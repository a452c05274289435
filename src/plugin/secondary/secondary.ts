// The secondary handler (CoreDNS plugin/secondary on file's Zone): zones transferred in (AXFR over TCP)
// from their primaries at startup, kept fresh with the SOA's refresh/retry/expire timers and on NOTIFY
// from a primary, answered with file's lookup.

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { replyTo } from '../../wire/message.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { NotAuthoritativeError, type Notifier, type Transferer } from '../pkg/transfer.ts';
import { Zone } from '../pkg/zone/zone.ts';
import { serveFromZone, transferZone } from '../pkg/zone/answer.ts';
import { splitHostPort } from '../pkg/httpserver.ts';
import { axfr, soaQuery } from './xfr.ts';
import { parseCatalog, type Catalog, type CatalogMember } from './catalog.ts';
import { isSubdomain } from '../../wire/name.ts';

/** RFC 1982 serial arithmetic (CoreDNS's file.less): is `a` older than `b`? */
export function serialLess(a: number, b: number): boolean {
  const MAX = 2147483647;
  if (a < b) return b - a <= MAX;
  return a - b > MAX;
}

/** Go's time.Duration String for whole milliseconds below a minute, as the backoff prints them. */
function goMs(ms: number): string {
  return ms < 1000 ? `${ms}ms` : `${ms / 1000}s`;
}

/** Node's longest timer delay; Go's tickers take any duration (a catalog's SOA timers are often huge). */
const MAX_TIMER_MS = 2147483647;

/** A ticker every `ms` milliseconds, for delays beyond Node's timer limit too. */
class Ticker {
  private timer: NodeJS.Timeout | undefined;
  private left = 0;
  private readonly ms: number;
  private readonly fn: () => void;

  constructor(ms: number, fn: () => void) {
    this.ms = ms;
    this.fn = fn;
    this.arm(ms);
  }

  private arm(ms: number): void {
    this.left = ms;
    const step = Math.min(ms, MAX_TIMER_MS);
    this.timer = setTimeout(() => {
      this.left -= step;
      if (this.left > 0) {
        this.arm(this.left);
        return;
      }
      this.arm(this.ms);
      this.fn();
    }, step);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** What the transfers and timers need from the outside: the loggers, and the clock for jitter. */
export interface SecondaryEnv {
  /** plugin/secondary's logger. */
  log: ServerLogger;
  /** plugin/file's logger: CoreDNS logs transfers and NOTIFYs from file's code. */
  fileLog: ServerLogger;
  /** A random integer in [0, n) (Go's rand.Intn), for the refresh/retry jitter. */
  random(n: number): number;
  /** The block's transfer plugin (set at start-up): NOTIFYs after each transfer in, as CoreDNS's TransferIn. */
  notifier?: Notifier;
}

/** One secondary zone: its primaries, the zone it serves, its update loop. */
export class SecondaryZone {
  readonly origin: string;
  /** The primaries, host:port. */
  readonly transferFrom: readonly string[];
  zone: Zone;
  private readonly env: SecondaryEnv;
  /** For a catalog zone (`catalog`): called with each transferred catalog, after the zone is replaced. */
  private readonly onCatalog: ((cat: Catalog, from: SecondaryZone) => void) | undefined;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly tickers = new Set<Ticker>();

  constructor(origin: string, transferFrom: readonly string[], env: SecondaryEnv, onCatalog?: (cat: Catalog, from: SecondaryZone) => void) {
    this.origin = origin;
    this.transferFrom = transferFrom;
    this.zone = new Zone(origin);
    this.env = env;
    this.onCatalog = onCatalog;
  }

  /** CoreDNS's TransferIn: AXFR from each primary in turn until one succeeds; the zone is replaced whole. */
  async transferIn(): Promise<void> {
    if (this.transferFrom.length === 0) return;
    let err: Error | undefined;
    let transferred: ResourceRecord[] = [];
    let candidate: Zone | undefined;
    let from = '';
    for (const tr of this.transferFrom) {
      let rrs: ResourceRecord[];
      try {
        rrs = await axfr(this.origin, tr);
      } catch (e) {
        err = e as Error;
        if (err.message.startsWith('dial ')) this.env.fileLog.error(`Failed to setup transfer \`${this.origin}' with \`${JSON.stringify(tr)}': ${err.message}`);
        else this.env.fileLog.error(`Failed to transfer \`${this.origin}' from ${JSON.stringify(tr)}: ${err.message}`);
        continue;
      }
      const c = new Zone(this.origin);
      try {
        // the catalog reads the records as transferred: keep them apart from the zone's (which edits owners)
        for (const rr of rrs) {
          if (this.onCatalog !== undefined) transferred.push({ ...rr });
          c.insert(rr);
        }
      } catch (e) {
        err = e as Error;
        transferred = [];
        this.env.fileLog.error(`Failed to parse transfer \`${this.origin}' from: ${JSON.stringify(tr)}: ${err.message}`);
        continue;
      }
      candidate = c;
      from = tr;
      err = undefined;
      break;
    }
    if (err !== undefined) throw err;
    if (candidate === undefined || this.stopped) return;
    // a catalog that does not parse leaves the zone as it was
    const cat = this.onCatalog === undefined ? undefined : parseCatalog(this.origin, transferred);
    this.zone = candidate;
    this.env.fileLog.info(`Transferred: ${this.origin} from ${from}`);
    this.env.notifier?.notify(this.origin).catch((e: unknown) => { this.env.fileLog.warning(`Failed sending notifies: ${(e as Error).message}`); });
    if (cat !== undefined) this.onCatalog!(cat, this);
  }

  /** Takes over the data of `other` (a catalog member moving between catalogs with its identity kept). */
  preserveFrom(other: SecondaryZone): void {
    this.zone = other.zone;
  }

  /**
   * CoreDNS's shouldTransfer: asks the primaries for the SOA over TCP; true when the primary's serial is
   * newer (or we have none). Throws the last exchange error when no primary answered with a SOA.
   */
  async shouldTransfer(): Promise<boolean> {
    let err: Error | undefined;
    let serial = -1;
    for (const tr of this.transferFrom) {
      err = undefined;
      let m;
      try {
        m = await soaQuery(this.origin, tr);
      } catch (e) {
        err = e as Error;
        continue;
      }
      if (m.rcode !== Rcode.NOERROR) continue;
      const soa = m.answer.find((a) => a.type === RRType.SOA);
      if (soa !== undefined) {
        serial = (soa.data as { serial: number }).serial;
        break;
      }
    }
    if (serial === -1) {
      if (err !== undefined) throw err;
      return false;
    }
    const ours = this.zone.soa;
    if (ours === undefined) return true;
    return serialLess(ours.data.serial, serial);
  }

  /** Is this NOTIFY from one of the zone's primaries (by IP)? */
  isNotifyFromPrimary(ip: string): boolean {
    for (const f of this.transferFrom) {
      let host: string;
      try {
        host = splitHostPort(f).host;
      } catch {
        continue;
      }
      if (host === ip) return true;
    }
    return false;
  }

  private sleep(ms: number): Promise<boolean> {
    if (this.stopped) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.timers.delete(t); resolve(this.stopped); }, ms);
      t.unref();
      this.timers.add(t);
    });
  }

  /** CoreDNS's transferAndUpdate: the first transfer with backoff (250 ms doubling to 10 s), then the timers. */
  async run(): Promise<void> {
    let dur = 250;
    for (;;) {
      try {
        await this.transferIn();
        break;
      } catch (e) {
        this.env.log.warning(`All '${this.origin}' masters failed to transfer, retrying in ${goMs(dur)}: ${(e as Error).message}`);
        if (await this.sleep(dur)) return;
        dur = Math.min(dur * 2, 10_000);
      }
    }
    if (this.stopped) return;
    await this.update();
  }

  /**
   * CoreDNS's UpdateWithTransfer: refresh, retry and expire tickers from the SOA (at least 1 s each);
   * a refresh (after up to 5 s of jitter) checks the primary's serial and transfers when it is newer; a
   * failure arms retry (up to 2 s of jitter) and expire, which marks the zone expired (SERVFAIL) until
   * a transfer succeeds. Ticks that come while a check runs are dropped but one, as Go's tickers do.
   */
  private async update(): Promise<void> {
    while (this.zone.soa === undefined) {
      if (await this.sleep(1000)) return;
    }
    let retryActive = false;
    for (;;) {
      if (this.stopped) return;
      const soa = this.zone.soa!.data;
      const refresh = Math.max(soa.refresh, 1) * 1000;
      const retry = Math.max(soa.retry, 1) * 1000;
      const expire = Math.max(soa.expire, 1) * 1000;
      const restart = await this.runTickers(refresh, retry, expire, () => retryActive, (v) => { retryActive = v; });
      if (!restart) return;
    }
  }

  /** Runs one set of tickers until a restart (true) or shutdown (false). */
  private runTickers(refresh: number, retry: number, expire: number, getRetry: () => boolean, setRetry: (v: boolean) => void): Promise<boolean> {
    type Tick = 'refresh' | 'retry' | 'expire';
    return new Promise<boolean>((resolve) => {
      const pending: Tick[] = [];
      let busy = false;
      const tickers: Ticker[] = [];
      const done = (restart: boolean): void => {
        for (const t of tickers) { t.stop(); this.tickers.delete(t); }
        resolve(restart);
      };
      const handle = async (t: Tick): Promise<'continue' | 'restart' | 'stop'> => {
        if (t === 'expire') {
          if (getRetry()) this.zone.expired = true;
          return 'continue';
        }
        if (t === 'retry') {
          if (!getRetry()) return 'continue';
          if (await this.sleep(this.env.random(2000))) return 'stop';
          let ok: boolean;
          try {
            ok = await this.shouldTransfer();
          } catch (e) {
            this.env.fileLog.warning(`Failed retry check ${(e as Error).message}`);
            return 'continue';
          }
          if (ok) {
            try {
              await this.transferIn();
            } catch {
              return 'continue';
            }
          }
          setRetry(false);
          return 'restart';
        }
        if (await this.sleep(this.env.random(5000))) return 'stop';
        let ok: boolean;
        try {
          ok = await this.shouldTransfer();
        } catch (e) {
          this.env.fileLog.warning(`Failed refresh check ${(e as Error).message}`);
          setRetry(true);
          return 'continue';
        }
        if (ok) {
          try {
            await this.transferIn();
          } catch {
            setRetry(true);
            return 'continue';
          }
        }
        setRetry(false);
        return 'restart';
      };
      const pump = async (): Promise<void> => {
        if (busy) return;
        busy = true;
        while (pending.length > 0) {
          const t = pending.shift()!;
          const r = await handle(t);
          if (this.stopped || r === 'stop') { busy = false; done(false); return; }
          if (r === 'restart') { busy = false; done(true); return; }
        }
        busy = false;
      };
      const tick = (t: Tick): void => {
        if (this.stopped) { done(false); return; }
        if (!pending.includes(t)) pending.push(t);
        void pump();
      };
      for (const [t, ms] of [['refresh', refresh], ['retry', retry], ['expire', expire]] as const) {
        const k = new Ticker(ms, () => { tick(t); });
        tickers.push(k);
        this.tickers.add(k);
      }
      this.onStop = () => { done(false); };
    });
  }

  private onStop: (() => void) | undefined;

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const t of this.tickers) t.stop();
    this.tickers.clear();
    this.onStop?.();
    this.onStop = undefined;
  }
}

/** A member zone a catalog added. */
interface DynamicZone {
  catalog: string;
  memberId: string;
  sz: SecondaryZone;
}

export class Secondary implements Handler, Transferer {
  readonly name = 'secondary';
  private next: Handler | undefined;
  /** The zones: the configured ones in Corefile order, then the catalogs' members as they come. */
  names: string[];
  readonly zones: Map<string, SecondaryZone>;
  private readonly fall: Fall;
  private readonly env: SecondaryEnv;
  private readonly fileLog: ServerLogger;
  /** The configured catalog zones and the member zones each accepts ([]: any). */
  private readonly catalogZones: ReadonlyMap<string, readonly string[]>;
  private readonly dynamic = new Map<string, DynamicZone>();
  /** The last catalog parsed for each catalog zone. */
  private readonly catalogs = new Map<string, Catalog>();
  /** The member zones each catalog has added. */
  private readonly catalogMembers = new Map<string, Set<string>>();
  private stopped = false;

  /**
   * `zones`: each configured zone and its primaries; `catalogZones`: which of them are catalogs, with the
   * member zones they may add. Zones given as SecondaryZone objects are used as they are (tests).
   */
  constructor(zones: ReadonlyMap<string, readonly string[] | SecondaryZone>, fall: Fall, env: SecondaryEnv,
    catalogZones: ReadonlyMap<string, readonly string[]> = new Map()) {
    this.env = env;
    this.fileLog = env.fileLog;
    this.fall = fall;
    this.catalogZones = catalogZones;
    this.zones = new Map();
    for (const [origin, from] of zones) {
      this.zones.set(origin, from instanceof SecondaryZone ? from : new SecondaryZone(origin, from, env,
        catalogZones.has(origin) ? (cat, cz) => { this.applyCatalog(origin, cat, cz); } : undefined));
    }
    this.names = [...this.zones.keys()];
  }

  private memberAllowed(origin: string, member: string): boolean {
    const zones = this.catalogZones.get(origin);
    if (zones === undefined) return false;
    if (zones.length === 0) return true;
    for (const z of zones) if (isSubdomain(member, z)) return true;
    return false;
  }

  /** CoreDNS's applyCatalog: adds, resets, migrates and removes the member zones of catalog `origin`. */
  private applyCatalog(origin: string, cat: Catalog, catalogZone: SecondaryZone): void {
    const log = this.env.log;
    const memberZones = new Set<string>();
    const starts: SecondaryZone[] = [];
    let rejected = 0;
    for (const member of cat.members) {
      if (!this.memberAllowed(origin, member.zone)) {
        rejected++;
        continue;
      }
      memberZones.add(member.zone);
      if (this.zones.has(member.zone)) {
        const dyn = this.dynamic.get(member.zone);
        if (dyn === undefined) {
          log.warning(`Skipping catalog member zone ${member.zone} from ${origin}: zone already exists`);
          continue;
        }
        if (dyn.catalog === origin) {
          if (dyn.memberId === member.id) continue;
          const previous = dyn.memberId;
          starts.push(this.replaceDynamic(member, origin, catalogZone, undefined));
          log.info(`Reset catalog member zone ${member.zone} from ${origin} after member ID changed from ${previous} to ${member.id}`);
          continue;
        }
        const source = this.catalogs.get(dyn.catalog)?.members.find((m) => m.zone === member.zone);
        if (source === undefined || source.changeOfOwnership !== origin) {
          log.warning(`Skipping catalog member zone ${member.zone} from ${origin}: zone already exists`);
          continue;
        }
        const preserved = dyn.memberId === source.id && source.id === member.id;
        starts.push(this.replaceDynamic(member, origin, catalogZone, preserved ? dyn.sz : undefined));
        if (preserved) {
          log.info(`Migrated catalog member zone ${member.zone} from catalog ${dyn.catalog} to ${origin}, preserving state for member ID ${source.id}`);
        } else {
          log.info(`Migrated catalog member zone ${member.zone} from catalog ${dyn.catalog} to ${origin} with state reset after member identity changed from ${source.id} to ${member.id}`);
        }
        continue;
      }
      starts.push(this.replaceDynamic(member, origin, catalogZone, undefined));
      log.info(`Added catalog member zone ${member.zone} from catalog ${origin}`);
    }
    for (const member of this.catalogMembers.get(origin) ?? []) {
      if (memberZones.has(member)) continue;
      const dyn = this.dynamic.get(member);
      if (dyn === undefined || dyn.catalog !== origin) continue;
      dyn.sz.stop();
      this.dynamic.delete(member);
      this.zones.delete(member);
      this.names = this.names.filter((n) => n !== member);
      log.info(`Removed catalog member zone ${member} from catalog ${origin}`);
    }
    this.catalogMembers.set(origin, memberZones);
    this.catalogs.set(origin, cat);
    if (rejected > 0) log.warning(`Skipped ${rejected} member zones from catalog ${origin}: outside configured member zones`);
    if (!this.stopped) for (const sz of starts) void sz.run();
    log.info(`Parsed catalog zone ${origin} with ${cat.members.length} member zones`);
  }

  private replaceDynamic(member: CatalogMember, origin: string, catalogZone: SecondaryZone, preserveFrom: SecondaryZone | undefined): SecondaryZone {
    this.dynamic.get(member.zone)?.sz.stop();
    const sz = new SecondaryZone(member.zone, [...catalogZone.transferFrom], this.env);
    if (preserveFrom !== undefined) sz.preserveFrom(preserveFrom);
    if (!this.zones.has(member.zone)) this.names.push(member.zone);
    this.zones.set(member.zone, sz);
    this.dynamic.set(member.zone, { catalog: origin, memberId: member.id, sz });
    return sz;
  }

  /** Stops the member zones' transfers (CoreDNS's stopDynamicZones). */
  stopDynamic(): void {
    this.stopped = true;
    for (const d of this.dynamic.values()) d.sz.stop();
  }

  withNext(next: Handler | undefined): this {
    this.next = next;
    return this;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const zone = zonesMatches(this.names, qname);
    if (zone === '') {
      if (this.next === undefined) return Rcode.REFUSED;
      return nextOrFailure(this.name, this.next, req, w);
    }
    const sz = this.zones.get(zone);
    if (sz === undefined) return Rcode.SERVFAIL;
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    if (req.msg.opcode === Opcode.NOTIFY) return this.notify(req, w, zone, sz);
    return serveFromZone(sz.zone, zone, req, w, this.fileLog, this.fall, this.name, this.next);
  }

  /** A NOTIFY from a primary is answered at once, then the serial is checked and the zone transferred. */
  private notify(req: Request, w: ResponseWriter, zone: string, sz: SecondaryZone): HandlerResult {
    const ip = req.remoteAddress;
    if (!sz.isNotifyFromPrimary(ip)) {
      this.fileLog.info(`Dropping notify from ${ip} for ${zone}`);
      return Rcode.NOERROR;
    }
    const m = replyTo(req.msg);
    m.aa = true;
    w.writeMsg(m);
    this.fileLog.info(`Notify from ${ip} for ${zone}: checking transfer`);
    return sz.shouldTransfer().then(async (ok) => {
      if (ok) {
        try {
          await sz.transferIn();
        } catch (e) {
          this.fileLog.warning(`Notify from ${ip} for ${zone}: transfer failed: ${(e as Error).message}`);
        }
      } else {
        this.fileLog.info(`Notify from ${ip} for ${zone}: no SOA serial increase seen`);
      }
      return Rcode.NOERROR;
    }, (e: unknown) => {
      this.fileLog.info(`Notify from ${ip} for ${zone}: no SOA serial increase seen`);
      this.fileLog.warning(`Notify from ${ip} for ${zone}: failed primary check: ${(e as Error).message}`);
      return Rcode.NOERROR;
    });
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    const matched = zonesMatches(this.names, zone);
    const sz = matched === zone ? this.zones.get(zone) : undefined;
    if (sz === undefined) throw new NotAuthoritativeError(zone);
    return transferZone(sz.zone, serial);
  }
}
