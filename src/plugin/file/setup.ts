import { readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, normalize } from 'node:path';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { formatDuration, parseDuration, toMillis } from '../pkg/duration.ts';
import { Fall } from '../pkg/fall.ts';
import { File } from './file.ts';
import { isNotifier } from '../pkg/transfer.ts';
import { ZoneSource } from '../pkg/zone/source.ts';
import { zoneFromText } from '../pkg/zone/load.ts';
import { Zone } from '../pkg/zone/zone.ts';
import { goOpenError } from '../pkg/zone/errors.ts';

/** One `file DBFILE [ZONES...]` line. */
export interface FileEntry {
  /** DBFILE, with the block's root prepended when relative. */
  path: string;
  /** The zones it is loaded as (the block's zones when none are given). */
  origins: string[];
  /** Reload check interval in nanoseconds (`reload`; default 1m; 0: never). Carries over to later lines. */
  reload: bigint;
  /** `reload_by_mtime`: reload when the file's modification time moves, not on a new serial. Carries over. */
  reloadByMtime: boolean;
}

/** What the block's `file` lines configure. */
export interface FileOptions {
  entries: FileEntry[];
  /** `fallthrough [ZONES...]` (shared by every line of the block). */
  fall: Fall;
}

/** Reads every `file` line of the block. */
export function parse(c: SetupContext): FileOptions {
  const d = c.dispenser;
  const entries: FileEntry[] = [];
  const fall = new Fall();
  let reload = 60_000_000_000n;
  let reloadByMtime = false;
  while (d.next()) {
    if (!d.nextArg()) throw d.argErr();
    let path = d.val();
    const origins = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    if (!isAbsolute(path) && c.config.root !== '') path = goJoin(c.config.root, path);
    const entry: FileEntry = { path, origins, reload, reloadByMtime };
    entries.push(entry);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'fallthrough':
          fall.setZonesFromArgs(d.remainingArgs());
          break;
        case 'reload': {
          const t = d.remainingArgs();
          if (t.length < 1) throw new Error('reload duration value is expected');
          try {
            reload = parseDuration(t[0]!);
          } catch (e) {
            throw new Error('plugin/file: plugin/file: ' + (e as Error).message);
          }
          break;
        }
        case 'reload_by_mtime':
          reloadByMtime = true;
          break;
        case 'upstream':
          // accepted and ignored, as CoreDNS still does
          d.remainingArgs();
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
    entry.reload = reload;
    entry.reloadByMtime = reloadByMtime;
  }
  return { entries, fall };
}

/** Go's filepath.Join: joined and cleaned. */
function goJoin(a: string, b: string): string {
  const j = normalize(join(a, b));
  return j.length > 1 && j.endsWith('/') ? j.slice(0, -1) : j;
}

/** Go's filepath.Clean for the paths CoreDNS keeps. */
function goClean(p: string): string {
  if (p === '') return '.';
  const n = normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

/**
 * Loads the zones of `o` as CoreDNS's fileParse does: a file that cannot be opened leaves its zones
 * empty (SERVFAIL until a reload reads them) with a warning, or is an error when reloading is off.
 */
export function loadZones(o: FileOptions, log: SetupContext['log']): Map<string, ZoneSource> {
  const zones = new Map<string, ZoneSource>();
  let openErr: string | undefined;
  let last: FileEntry | undefined;
  for (const e of o.entries) {
    last = e;
    let text: string | undefined;
    let mtimeMs = 0;
    try {
      text = readFileSync(goClean(e.path), 'utf8');
      mtimeMs = statSync(goClean(e.path)).mtimeMs;
    } catch (err) {
      openErr = goOpenError(goClean(e.path), err);
    }
    for (const origin of e.origins) {
      const zone = text === undefined ? new Zone(origin) : zoneFromText(text, origin, e.path);
      const src = new ZoneSource(origin, goClean(e.path), zone, toMillis(e.reload), e.reloadByMtime);
      if (e.reloadByMtime && text !== undefined) src.mtimeMs = mtimeMs;
      zones.set(origin, src);
    }
  }
  if (openErr !== undefined && last !== undefined) {
    if (last.reload === 0n) throw new Error('plugin/file: plugin/file: ' + openErr);
    log.warning(`Failed to open ${JSON.stringify(openErr)}: trying again in ${formatDuration(last.reload)}`);
  }
  return zones;
}

export const plugin: PluginDefinition = {
  name: 'file',
  setup(c) {
    const o = parse(c);
    const zones = loadZones(o, c.log);
    // The block's transfer plugin: NOTIFYs for every zone now, after each reload, and after a failed
    // Corefile reload (CoreDNS's file setup; the start-up NOTIFYs' errors are not logged).
    const notifyAll = (): void => {
      const t = c.config.handlers.find((h) => h.name === 'transfer');
      const n = t !== undefined && isNotifier(t) ? t : undefined;
      for (const src of zones.values()) src.notifier = n;
      if (n === undefined) return;
      // One zone after the other, as CoreDNS's goroutine does.
      let chain = Promise.resolve();
      for (const name of zones.keys()) chain = chain.then(() => n.notify(name)).catch(() => { /* ignored, as CoreDNS */ });
    };
    c.onStartup(notifyAll);
    c.onRestartFailed(notifyAll);
    for (const src of zones.values()) {
      c.onStartup(() => { src.start(c.log); });
      c.onShutdown(() => { src.stop(); });
    }
    c.addPlugin((next) => new File(next, zones, o.fall, c.log));
  },
};
