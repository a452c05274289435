// A zone read from a master file and its reload ticker (CoreDNS's file.Zone Reload): file and auto.

import { readFileSync, statSync } from 'node:fs';
import type { ServerLogger } from '../../plugin.ts';
import type { Notifier } from '../transfer.ts';
import type { Zone } from './zone.ts';
import { SerialUnchangedError, zoneFromText } from './load.ts';
import { goErrnoText, goOpenError } from './errors.ts';

/** One zone of file or auto and where it comes from; `zone` is swapped whole on reload. */
export class ZoneSource {
  readonly origin: string;
  /** The master file (root applied); auto points it at the file its directory walk found. */
  file: string;
  zone: Zone;
  /** Reload interval in ms; 0: never. */
  readonly reloadMs: number;
  readonly reloadByMtime: boolean;
  /** The file's modification time (ms) when last read, for `reload_by_mtime`. */
  mtimeMs = 0;
  private timer: NodeJS.Timeout | undefined;
  /** The block's transfer plugin, told after each reload with a new serial (set at start-up). */
  notifier: Notifier | undefined;

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
    this.notifier?.notify(this.origin).catch((e: unknown) => { log.warning(`Failed sending notifies: ${(e as Error).message}`); });
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
