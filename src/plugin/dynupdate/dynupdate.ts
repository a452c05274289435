// The dynupdate handler (CoreDNS 1.15.0 plugin/dynupdate dynupdate.go, update.go): one writable authoritative
// zone. Queries in the zone are answered from the current snapshot with file's lookup; opcode UPDATE (which
// the block admits through BlockConfig.allowOpcode) is applied as one RFC 2136 transaction: prerequisites,
// the key's permissions, the update section's checks, then the changes on a private copy, the limits, the
// serial, a new snapshot, the database commit, and only then the new snapshot is served and NOERROR sent.
//
// Updates run synchronously, start to end, in one turn of the event loop (the database write included), so
// they are serialized without a lock and no query ever sees half an update; a burst of updates waits in the
// listeners' own bounded queues, not in an unbounded queue of this plugin.

import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { Opcode, RRClass, RRType, Rcode } from '../../wire/constants.ts';
import { replyTo } from '../../wire/message.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { Fall } from '../pkg/fall.ts';
import { VALIDATED_KEY_NAME } from '../pkg/tsig.ts';
import { NotAuthoritativeError, type Notifier, type Transferer } from '../pkg/transfer.ts';
import type { ZoneBypasser } from '../pkg/bypass.ts';
import { serveFromZone, transferZone } from '../pkg/zone/answer.ts';
import {
  bumpSerial, canonicalName, checkLimits, copyRecord, findRR, inZone, isQueryMetaType, knownType, nameInUse, noRdata,
  rrsetOf, sameRR, sameRRset, serialGreater, soaData, unsupportedType, validPrerequisiteType, type Limits,
} from './rules.ts';
import { buildSnapshot, type SharedStore, type Snapshot } from './store.ts';

/** `*` as the owner name of an allow rule: every name in the zone. */
export const ALL_NAMES = '*';

/** One `allow KEY NAME TYPE...` rule. */
export interface Permission {
  /** Normalized key name. */
  readonly key: string;
  /** Canonical owner name, or ALL_NAMES. */
  readonly name: string;
  readonly types: ReadonlySet<number>;
  /** `*` as the type: every supported operation. */
  readonly allTypes: boolean;
}

/** What the handler needs of its setup: the zone, the rules, the limits and where its data comes from. */
export interface DynUpdateConfig {
  readonly zone: string;
  readonly permissions: readonly Permission[];
  readonly limits: Limits;
  /** The store of the database (opened on first use); undefined: memory only. */
  readonly acquire: (() => SharedStore) | undefined;
  readonly release: (s: SharedStore) => void;
}

const NO_FALL = new Fall();

export class DynUpdate implements Handler, Transferer, ZoneBypasser {
  readonly name = 'dynupdate';
  next: Handler | undefined;
  readonly zone: string;
  /** The block's transfer plugin, set at start-up: best-effort NOTIFY after each committed change. */
  notifier: Notifier | undefined;
  private readonly c: DynUpdateConfig;
  private readonly log: ServerLogger;
  /** file's logger: the snapshot is a file zone, and its NOTIFY line is file's (as CoreDNS's view is a file.File). */
  private readonly fileLog: ServerLogger;
  /** Memory-only mode's generation (or the validated one until the database is first used). */
  private mem: Snapshot;
  private store: SharedStore | undefined;
  private closed = false;
  private notifyPending = false;
  private notifyRunning = false;

  constructor(c: DynUpdateConfig, initial: Snapshot, log: ServerLogger, fileLog: ServerLogger) {
    this.c = c;
    this.zone = c.zone;
    this.mem = initial;
    this.log = log;
    this.fileLog = fileLog;
  }

  cacheBypassZones(): string[] {
    return [this.zone];
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const opcode = (req.flags >> 11) & 0xf;
    if (opcode === Opcode.UPDATE) return this.serveUpdate(req, w);
    if (!inZone(this.zone, req.name)) return nextOrFailure(this.name, this.next, req, w);
    let snap: Snapshot;
    try {
      snap = this.snapshot();
    } catch (e) {
      throw new PluginError(Rcode.SERVFAIL, (e as Error).message);
    }
    // file's ServeDNS on the snapshot.
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    if (opcode === Opcode.NOTIFY) {
      this.fileLog.info(`Dropping notify from ${req.remoteAddress} for ${this.zone}`);
      return Rcode.NOERROR;
    }
    return serveFromZone(snap.zone, this.zone, req, w, this.fileLog, NO_FALL, this.name, this.next);
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    if (canonicalName(zone) !== this.zone) throw new NotAuthoritativeError(zone);
    return transferZone(this.snapshot().zone, serial);
  }

  /** The generation served now; the database is opened (and created from the seed) on first use. */
  private snapshot(): Snapshot {
    this.ensureStore();
    return this.store === undefined ? this.mem : this.store.snapshot;
  }

  private ensureStore(): void {
    if (this.closed) throw new Error('dynamic zone is closed');
    if (this.c.acquire === undefined || this.store !== undefined) return;
    this.store = this.c.acquire();
  }

  /** The instance stops (reload or shutdown): the database is released once no instance uses it. */
  close(): void {
    this.closed = true;
    const s = this.store;
    this.store = undefined;
    if (s !== undefined) this.c.release(s);
  }

  private serveUpdate(req: Request, w: ResponseWriter): HandlerResult {
    const msg = req.msg;
    const q = msg.question[0];
    if (msg.question.length !== 1 || q === undefined || q.type !== RRType.SOA || q.class !== RRClass.IN) {
      return this.reply(req, w, Rcode.FORMERR);
    }
    const zone = canonicalName(q.name);
    // Query-only backends could acknowledge an UPDATE without applying it: another zone is NOTAUTH, never next.
    if (zone !== this.zone) return this.reply(req, w, Rcode.NOTAUTH);
    const key = req.value(VALIDATED_KEY_NAME);
    if (typeof key !== 'string') {
      this.log.debug(`refusing UPDATE for ${zone} without a validated TSIG identity`);
      return this.reply(req, w, Rcode.REFUSED);
    }
    const [rcode, err] = this.applyUpdate(key, msg.answer, msg.authority);
    if (err !== undefined) this.log.error(`UPDATE for ${zone} failed: ${err}`);
    return this.reply(req, w, rcode);
  }

  private reply(req: Request, w: ResponseWriter, rcode: number): number {
    const m = replyTo(req.msg);
    m.opcode = Opcode.UPDATE;
    m.rcode = rcode;
    m.aa = true;
    w.writeMsg(m);
    return Rcode.NOERROR;
  }

  /** One RFC 2136 transaction: the rcode, and the error to log. */
  applyUpdate(key: string, prerequisites: readonly ResourceRecord[], updates: readonly ResourceRecord[]): [number, string | undefined] {
    const [changed, rcode, err] = this.updateLocked(key, prerequisites, updates);
    if (changed && this.notifier !== undefined) {
      this.notifyPending = true;
      if (!this.notifyRunning) {
        this.notifyRunning = true;
        void this.notifyLoop();
      }
    }
    return [rcode, err];
  }

  /** Bursts coalesce: at most one NOTIFY round in flight per instance, and one more after it if changes came meanwhile. */
  private async notifyLoop(): Promise<void> {
    while (!this.closed && this.notifyPending && this.notifier !== undefined) {
      this.notifyPending = false;
      try {
        await this.notifier.notify(this.zone);
      } catch (e) {
        this.log.warning(`NOTIFY for ${this.zone} after UPDATE failed: ${(e as Error).message}`);
      }
    }
    this.notifyRunning = false;
  }

  private updateLocked(key: string, prerequisites: readonly ResourceRecord[], updates: readonly ResourceRecord[]): [boolean, number, string | undefined] {
    // The key first: a valid TSIG of a key no rule names must not probe the zone.
    if (!this.configuredKey(key)) return [false, Rcode.REFUSED, undefined];
    const l = this.c.limits;
    if (prerequisites.length > l.updateRecords || updates.length > l.updateRecords - prerequisites.length) {
      return [false, Rcode.REFUSED, undefined];
    }
    let current: Snapshot;
    try {
      current = this.snapshot();
    } catch (e) {
      return [false, Rcode.SERVFAIL, (e as Error).message];
    }
    const records = current.records;
    // RFC 2136 order: prerequisites against the current zone, then permissions, then the update section's prescan.
    let rcode = this.checkPrerequisites(records, prerequisites);
    if (rcode === Rcode.NOERROR) rcode = this.authorize(key, updates);
    if (rcode === Rcode.NOERROR) rcode = this.validateUpdates(updates);
    if (rcode !== Rcode.NOERROR) return [false, rcode, undefined];

    const { candidate, changed, explicitSoa } = this.apply(records, updates);
    if (!changed) return [false, Rcode.NOERROR, undefined];
    try {
      checkLimits(candidate, l);
    } catch (e) {
      return [false, Rcode.REFUSED, (e as Error).message];
    }
    if (!explicitSoa) bumpSerial(candidate);
    let next: Snapshot;
    try {
      next = buildSnapshot(candidate, this.zone, l);
    } catch (e) {
      return [false, Rcode.SERVFAIL, `building candidate zone: ${(e as Error).message}`];
    }
    if (this.store !== undefined) {
      try {
        this.store.commit(next);
      } catch (e) {
        return [false, Rcode.SERVFAIL, `committing zone: ${(e as Error).message}`];
      }
    } else {
      this.mem = next;
    }
    return [true, Rcode.NOERROR, undefined];
  }

  private checkPrerequisites(records: readonly ResourceRecord[], prerequisites: readonly ResourceRecord[]): number {
    const valueDependent = new Map<string, { name: string; type: number; want: ResourceRecord[] }>();
    for (const rr of prerequisites) {
      if (rr.ttl !== 0) return Rcode.FORMERR;
      if (!inZone(this.zone, rr.name)) return Rcode.NOTZONE;
      if (unsupportedType(rr.type)) return Rcode.NOTIMP;
      switch (rr.class) {
        case RRClass.ANY:
          if (!noRdata(rr) || !validPrerequisiteType(rr.type, true)) return Rcode.FORMERR;
          if (rr.type === RRType.ANY) {
            if (!nameInUse(records, rr.name)) return Rcode.NXDOMAIN;
          } else if (rrsetOf(records, rr.name, rr.type).length === 0) {
            return Rcode.NXRRSET;
          }
          break;
        case RRClass.NONE:
          if (!noRdata(rr) || !validPrerequisiteType(rr.type, true)) return Rcode.FORMERR;
          if (rr.type === RRType.ANY) {
            if (nameInUse(records, rr.name)) return Rcode.YXDOMAIN;
          } else if (rrsetOf(records, rr.name, rr.type).length !== 0) {
            return Rcode.YXRRSET;
          }
          break;
        case RRClass.IN: {
          if (!validPrerequisiteType(rr.type, false)) return Rcode.FORMERR;
          const name = canonicalName(rr.name);
          const k = `${rr.type} ${name}`;
          let set = valueDependent.get(k);
          if (set === undefined) valueDependent.set(k, set = { name, type: rr.type, want: [] });
          set.want.push(rr);
          break;
        }
        default:
          return Rcode.FORMERR;
      }
    }
    for (const set of valueDependent.values()) {
      if (!sameRRset(rrsetOf(records, set.name, set.type), set.want)) return Rcode.NXRRSET;
    }
    return Rcode.NOERROR;
  }

  private configuredKey(key: string): boolean {
    const k = canonicalName(key);
    return this.c.permissions.some((p) => p.key === k);
  }

  private allows(key: string, name: string, type: number): boolean {
    const k = canonicalName(key), n = canonicalName(name);
    for (const p of this.c.permissions) {
      if (p.key !== k || (p.name !== ALL_NAMES && p.name !== n)) continue;
      if (p.allTypes || p.types.has(type)) return true;
    }
    return false;
  }

  private authorize(key: string, updates: readonly ResourceRecord[]): number {
    for (const rr of updates) if (!this.allows(key, rr.name, rr.type)) return Rcode.REFUSED;
    return Rcode.NOERROR;
  }

  private validateUpdates(updates: readonly ResourceRecord[]): number {
    for (const rr of updates) {
      if (!inZone(this.zone, rr.name)) return Rcode.NOTZONE;
      if (!knownType(rr.type) || rr.type === 0) return Rcode.FORMERR;
      switch (rr.class) {
        case RRClass.IN:
          if (isQueryMetaType(rr.type)) return Rcode.FORMERR;
          if (rr.type === RRType.SOA) {
            if (canonicalName(rr.name) !== this.zone) return Rcode.FORMERR;
            const soa = soaData(rr);
            // RFC 2136 4.2 and 7.11: no serial zero.
            if (soa === undefined || soa.serial === 0) return Rcode.FORMERR;
          }
          break;
        case RRClass.ANY:
          if (rr.ttl !== 0 || !noRdata(rr) || (isQueryMetaType(rr.type) && rr.type !== RRType.ANY)) return Rcode.FORMERR;
          break;
        case RRClass.NONE:
          if (rr.ttl !== 0 || rr.type === RRType.ANY || isQueryMetaType(rr.type)) return Rcode.FORMERR;
          break;
        default:
          return Rcode.FORMERR;
      }
      if (unsupportedType(rr.type)) return Rcode.NOTIMP;
    }
    return Rcode.NOERROR;
  }

  /**
   * RFC 2136 3.4.2 on a private copy: what changed, and whether an accepted SOA update gave the new serial
   * (otherwise the serial is incremented after any real change). Records that would break the zone's
   * invariants (CNAME beside other data, the apex SOA and last NS) are silently skipped, as the RFC says.
   */
  private apply(current: readonly ResourceRecord[], updates: readonly ResourceRecord[]): { candidate: ResourceRecord[]; changed: boolean; explicitSoa: boolean } {
    let records = current.map(copyRecord);
    let changed = false, explicitSoa = false;
    const zone = this.zone;
    const remove = (match: (rr: ResourceRecord) => boolean): boolean => {
      const kept = records.filter((rr) => !match(rr));
      const removed = kept.length !== records.length;
      records = kept;
      return removed;
    };
    for (const rr of updates) {
      const name = canonicalName(rr.name);
      const apex = name === zone;
      const at = (x: ResourceRecord): boolean => canonicalName(x.name) === name;
      switch (rr.class) {
        case RRClass.IN:
          if (rr.type === RRType.SOA) {
            const cur = records.find((x) => soaData(x) !== undefined && canonicalName(x.name) === zone);
            const incoming = soaData(rr);
            if (incoming === undefined || cur === undefined || !serialGreater(incoming.serial, soaData(cur)!.serial)) continue;
            remove((x) => at(x) && x.type === RRType.SOA);
            records.push(copyRecord(rr));
            changed = true;
            explicitSoa = true;
          } else if (rr.type === RRType.CNAME) {
            if (records.some((x) => at(x) && x.type !== RRType.CNAME)) continue;
            const existing = records.filter((x) => at(x) && x.type === RRType.CNAME);
            if (existing.length === 1 && sameRR(existing[0]!, rr) && existing[0]!.ttl === rr.ttl) continue;
            remove((x) => at(x) && x.type === RRType.CNAME);
            records.push(copyRecord(rr));
            changed = true;
          } else {
            if (records.some((x) => at(x) && x.type === RRType.CNAME)) continue;
            const i = findRR(records, rr);
            if (i >= 0) {
              if (records[i]!.ttl !== rr.ttl) {
                records[i] = copyRecord(rr);
                changed = true;
              }
              continue;
            }
            records.push(copyRecord(rr));
            changed = true;
          }
          break;
        case RRClass.ANY:
          if (rr.type === RRType.ANY) {
            changed = remove((x) => at(x) && !(apex && (x.type === RRType.SOA || x.type === RRType.NS))) || changed;
            continue;
          }
          if (apex && (rr.type === RRType.SOA || rr.type === RRType.NS)) continue;
          changed = remove((x) => at(x) && x.type === rr.type) || changed;
          break;
        case RRClass.NONE: {
          if (apex && rr.type === RRType.SOA) continue;
          if (apex && rr.type === RRType.NS && records.filter((x) => at(x) && x.type === RRType.NS).length <= 1) continue;
          const i = findRR(records, rr);
          if (i >= 0) {
            records.splice(i, 1);
            changed = true;
          }
          break;
        }
      }
    }
    return { candidate: records, changed, explicitSoa };
  }
}
