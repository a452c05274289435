// The auto handler (CoreDNS plugin/auto): zones loaded from the master files of a directory whose names
// match a regexp, the origin made from the match with a template; the directory is walked again on the
// reload interval (zones added for new files, dropped for vanished ones) and each zone reloads from its
// file when its serial changes. Answers with file's lookup; AXFR/IXFR are refused here (the transfer
// plugin serves them through the Transferer capability).

import { lstatSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { basename, join, normalize } from 'node:path';
import type { Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { fqdn } from '../../wire/name.ts';
import { zonesMatches } from '../pkg/zones.ts';
import { nextOrFailure } from '../pkg/next.ts';
import type { GoRegexp } from '../pkg/regexp.ts';
import { NotAuthoritativeError, type Notifier, type Transferer } from '../pkg/transfer.ts';
import { toMillis } from '../pkg/duration.ts';
import { zoneFromText } from '../pkg/zone/load.ts';
import { ZoneSource } from '../pkg/zone/source.ts';
import { goErrnoText, goOpenError } from '../pkg/zone/errors.ts';
import { lookupRequest, transferZone, writeAnswer } from '../pkg/zone/answer.ts';
import type { AutoOptions } from './setup.ts';

/** CoreDNS's matches(): the origin a file name gives, or undefined when the regexp does not match it. */
export function originFor(re: GoRegexp, template: string, filename: string): string | undefined {
  const groups = re.findSubmatch(basename(filename));
  if (groups === undefined) return undefined;
  return fqdn(re.expandMatch(template, groups));
}

/** Go's filepath.Clean. */
function goClean(p: string): string {
  if (p === '') return '.';
  const n = normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

export class Auto implements Handler, Transferer {
  readonly name = 'auto';
  private next: Handler | undefined;
  private readonly origins: readonly string[];
  private readonly o: AutoOptions;
  /** The loaded zones by origin (as the template made it). */
  readonly zones = new Map<string, ZoneSource>();
  /** The keys of `zones`, for zone matching on the query path. */
  private names: string[] = [];
  private readonly log: ServerLogger;
  /** The logger of the zones' own reloads (CoreDNS's file plugin's). */
  private readonly fileLog: ServerLogger;
  /** The block's transfer plugin (set at start-up): NOTIFYs after each walk and each zone reload. */
  notifier: Notifier | undefined;

  constructor(next: Handler | undefined, o: AutoOptions, log: ServerLogger, fileLog: ServerLogger) {
    this.next = next;
    this.o = o;
    this.origins = o.origins;
    this.log = log;
    this.fileLog = fileLog;
  }

  /** The handler with the rest of the chain (the chain is built after setup). */
  withNext(next: Handler | undefined): this {
    this.next = next;
    return this;
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const qname = req.name;
    if (zonesMatches(this.origins, qname) === '') return nextOrFailure(this.name, this.next, req, w);
    const zone = zonesMatches(this.names, qname);
    if (zone === '') {
      if (this.next === undefined) return Rcode.REFUSED;
      return nextOrFailure(this.name, this.next, req, w);
    }
    const src = this.zones.get(zone);
    if (src === undefined) return Rcode.SERVFAIL;
    const qtype = req.qtype;
    if (qtype === RRType.AXFR || qtype === RRType.IXFR) return Rcode.REFUSED;
    const a = lookupRequest(src.zone, req);
    if (a instanceof Promise) return a.then((r) => writeAnswer(req, w, r));
    return writeAnswer(req, w, a);
  }

  transfer(zone: string, serial: number): AsyncIterable<ResourceRecord[]> {
    const src = this.zones.get(zone);
    if (src === undefined) throw new NotAuthoritativeError(zone);
    return transferZone(src.zone, serial);
  }

  /**
   * CoreDNS's Auto.Notify after each walk: a NOTIFY for every zone, one after the other; the last error is
   * logged as a warning.
   */
  async notifyAll(): Promise<void> {
    const n = this.notifier;
    if (n === undefined) return;
    let err: unknown;
    for (const origin of [...this.names]) {
      try {
        await n.notify(origin);
      } catch (e) {
        err = e;
      }
    }
    if (err !== undefined) this.log.warning((err as Error).message);
  }

  /** CoreDNS's Walk: loads new zone files, repoints known zones, drops the zones whose file is gone. */
  walk(): void {
    let dir = this.o.directory;
    try {
      dir = realpathSync(dir);
    } catch {
      // CoreDNS walks the path as given when it cannot be resolved
    }
    const toDelete = new Map<string, boolean>();
    for (const n of this.names) toDelete.set(n, true);
    const seen = new Map<string, string>();
    const visit = (path: string): void => {
      let st;
      try {
        st = lstatSync(path);
      } catch (e) {
        this.log.warning(`error reading ${path}: lstat ${path}: ${goErrnoText(e)}`);
        return;
      }
      if (st.isDirectory()) {
        let names: string[];
        try {
          names = readdirSync(path).sort();
        } catch (e) {
          this.log.warning(`error reading ${path}: open ${path}: ${goErrnoText(e)}`);
          return;
        }
        for (const n of names) visit(join(path, n));
        return;
      }
      this.file(path, toDelete, seen);
    };
    visit(dir);
    for (const [origin, del] of toDelete) {
      if (!del) continue;
      this.remove(origin);
      this.log.info(`Deleting zone \`${origin}'`);
    }
  }

  private file(path: string, toDelete: Map<string, boolean>, seen: Map<string, string>): void {
    const origin = originFor(this.o.regexp, this.o.template, path);
    if (origin === undefined) return;
    const cleanPath = goClean(path);
    const previous = seen.get(origin);
    if (previous !== undefined && previous !== cleanPath) {
      this.log.warning(`Multiple zone files match origin ${JSON.stringify(origin)}: using ${JSON.stringify(previous)} instead of ${JSON.stringify(cleanPath)}`);
      toDelete.set(origin, false);
      return;
    }
    seen.set(origin, cleanPath);
    const known = this.zones.get(origin);
    if (known !== undefined) {
      toDelete.set(origin, false);
      known.file = cleanPath;
      return;
    }
    let text: string;
    try {
      text = readFileSync(cleanPath, 'utf8');
    } catch (e) {
      this.log.warning(`Opening ${path} failed: ${goOpenError(cleanPath, e)}`);
      return;
    }
    let src: ZoneSource;
    try {
      // serial 0: CoreDNS's Parse call treats a SOA serial of 0 as unchanged and refuses the zone
      src = new ZoneSource(origin, path, zoneFromText(text, origin, path, 0), toMillis(this.o.reload), false);
    } catch (e) {
      this.log.warning(`Parse zone \`${origin}': ${(e as Error).message}`);
      return;
    }
    this.zones.set(origin, src);
    this.names.push(origin);
    src.notifier = this.notifier;
    src.start(this.fileLog);
    this.log.info(`Inserting zone \`${origin}' from: ${path}`);
    toDelete.set(origin, false);
  }

  private remove(origin: string): void {
    this.zones.get(origin)?.stop();
    this.zones.delete(origin);
    this.names = [...this.zones.keys()];
  }

  /** Stops every zone's reload ticker. */
  shutdown(): void {
    for (const z of this.zones.values()) z.stop();
  }
}
