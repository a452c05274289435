// The file handler (CoreDNS plugin/file/file.go): answers from its zones, refuses AXFR/IXFR (the
// transfer plugin serves those through the Transferer capability), drops NOTIFYs (a file zone has no
// primary), and reloads each zone from disk on its interval.

import { readFileSync, statSync } from 'node:fs';
import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { Opcode, Rcode, RRType } from '../../wire/constants.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { Fall } from '../pkg/fall.ts';
import { NotAuthoritativeError, type Transferer } from '../pkg/transfer.ts';
import { Result, type Zone } from '../pkg/zone/zone.ts';
import type { LookupAnswer } from '../pkg/zone/lookup.ts';
import { lookupRequest, transferZone, writeAnswer } from '../pkg/zone/answer.ts';
import { SerialUnchangedError, zoneFromText } from '../pkg/zone/load.ts';
import { goErrnoText, goOpenError } from '../pkg/zone/errors.ts';

/** One zone of the plugin and where it comes from; `zone` is swapped whole on reload. */
export class ZoneSource {
  readonly origin: string;
  /** The master file (root applied). */
  readonly file: string;
  zone: Zone;
  /** Reload interval in ms; 0: never. */
  readonly reloadMs: number;
  readonly reloadByMtime: boolean;
  /** The file's modification time (ms) when last read, for `reload_by_mtime`. */
  mtimeMs = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(origin: string, file: string, zone: Zone, reloadMs: number, reloadByMtime: boolean) {
    this.origin = origin;
    this.file = file;
    this.zone = zone;
    this.reloadMs = reloadMs;
    this.reloadByMtime = reloadByMtime;
  }

  /** One reload check (CoreDNS's ticker body): re-reads the file when its serial (or mtime) changed. */
  reloadOnce(log: ServerLogger): void {
    let serial = this.zone.serial;
    let mtime = 0;
    if (this.reloadByMtime) {
      let st;
      try {
        st = statSync(this.file);
      } catch (e) {
        log.error(`Failed to stat zone ${JSON.stringify(this.origin)} in ${JSON.stringify(this.file)}: stat ${this.file}: ${goErrnoText(e)}`);
        return;
      }
      if (st.mtimeMs <= this.mtimeMs) return;
      mtime = st.mtimeMs;
      serial = 0;
    }
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (e) {
      log.error(`Failed to open zone ${JSON.stringify(this.origin)} in ${JSON.stringify(this.file)}: ${goOpenError(this.file, e)}`);
      return;
    }
    let z: Zone;
    try {
      z = zoneFromText(text, this.origin, this.file, serial);
    } catch (e) {
      if (!(e instanceof SerialUnchangedError)) log.error(`Parsing zone ${JSON.stringify(this.origin)}: ${(e as Error).message}`);
      return;
    }
    this.zone = z;
    if (this.reloadByMtime) this.mtimeMs = mtime;
    log.info(`Successfully reloaded zone ${JSON.stringify(this.origin)} in ${JSON.stringify(this.file)} with ${z.serial} SOA serial`);
  }

  /** Starts the reload ticker (nothing when the interval is 0). */
  start(log: ServerLogger): void {
    if (this.reloadMs <= 0 || this.timer !== undefined) return;
    this.timer = setInterval(() => { this.reloadOnce(log); }, this.reloadMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}

export class File implements Handler, Transferer {
  readonly name = 'file';
  private readonly next: Handler | undefined;
  /** The zones in Corefile order. */
  readonly names: string[];
  readonly zones: ReadonlyMap<string, ZoneSource>;
  private readonly fall: Fall;
  private readonly log: ServerLogger;

  constructor(next: Handler | undefined, zones: ReadonlyMap<string, ZoneSource>, fall: Fall, log: ServerLogger) {
    this.next = next;
    this.zones = zones;
    this.names = [...zones.keys()];
    this.fall = fall;
    this.log = log;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    const zone = zonesMatches(this.names, qname);
    if (zone === '') {
      if (this.next === undefined) return Rcode.REFUSED;
      return nextOrFailure(this.name, this.next, req, w);
    }
    const src = this.zones.get(zone);
    if (src === undefined) return Rcode.SERVFAIL;
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    if (req.msg.opcode === Opcode.NOTIFY) {
      this.log.info(`Dropping notify from ${req.remoteAddress} for ${zone}`);
      return Rcode.NOERROR;
    }
    const z = src.zone;
    if (z.expired) {
      this.log.error(`Zone ${zone} is expired`);
      return Rcode.SERVFAIL;
    }
    const a = lookupRequest(z, req);
    if (a instanceof Promise) return a.then((r) => this.answer(req, w, r));
    return this.answer(req, w, a);
  }

  private answer(req: Request, w: ResponseWriter, a: LookupAnswer): HandlerResult {
    // Only an NXDOMAIN (or the NOERROR of an empty non-terminal) falls through.
    if (a.answer.length === 0 && (a.result === Result.NameError || a.result === Result.Success) && this.fall.through(req.name)) {
      return nextOrFailure(this.name, this.next, req, w);
    }
    return writeAnswer(req, w, a);
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    const matched = zonesMatches(this.names, zone);
    const src = matched === zone ? this.zones.get(zone) : undefined;
    if (src === undefined) throw new NotAuthoritativeError(zone);
    return transferZone(src.zone, serial);
  }
}
