import { isNotifier } from '../pkg/transfer.ts';
import { fileLogger } from '../pkg/zone/log.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { normalizeHostExact, originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseIP } from '../../wire/ip.ts';
import { Fall } from '../pkg/fall.ts';
import { joinHostPort, splitHostPort } from '../pkg/httpserver.ts';
import { Secondary, type SecondaryEnv } from './secondary.ts';

/** What the block's `secondary` lines configure. */
export interface SecondaryOptions {
  /** Each zone (Corefile order) and its primaries (host:port, port 53 by default), in `transfer from` order. */
  zones: Map<string, string[]>;
  /** `fallthrough [ZONES...]`, shared by every line of the block. */
  fall: Fall;
  /** `catalog [MEMBER-ZONES...]`: the zones read as RFC 9432 catalogs, each with the member zones it may add ([]: any). */
  catalogs: Map<string, string[]>;
}

/** Go's net.ParseIP on an address with any `%zone` stripped (CoreDNS's stripZone). */
function isIP(s: string): boolean {
  const i = s.lastIndexOf('%');
  return parseIP(i >= 0 ? s.slice(0, i) : s) !== undefined;
}

/** CoreDNS's parse.HostPort(s, "53"). */
function hostPort(s: string): string {
  let host: string;
  let port = '';
  try {
    ({ host, port } = splitHostPort(s));
  } catch {
    if (!isIP(s)) throw new Error(`must specify an IP address: \`${s}'`);
    return joinHostPort(s, '53');
  }
  if (!isIP(host)) throw new Error(`must specify an IP address: \`${host}'`);
  return joinHostPort(host, port === '' ? '53' : port);
}

/** CoreDNS's parse.TransferIn: `transfer from ADDRESS...`. */
function transferIn(d: Dispenser): string[] {
  if (!d.nextArg()) throw d.argErr();
  const value = d.val();
  if (value !== 'from') throw d.errf(`unknown property ${value}`);
  const froms = d.remainingArgs();
  if (froms.length === 0) throw d.argErr();
  return froms.map((f) => {
    if (f === '*') throw new Error("can't use '*' in transfer from");
    return hostPort(f);
  });
}

/** CoreDNS's catalogMemberZonesFromArgs. */
function memberZonesFromArgs(args: readonly string[]): string[] {
  const zones: string[] = [];
  for (const a of args) {
    const n = normalizeHostExact(a);
    if (n.length === 0) throw new Error(`invalid catalog member zone ${JSON.stringify(a)}`);
    zones.push(...n);
  }
  return zones;
}

/** CoreDNS's mergeCatalogMemberZones: a second `catalog` adds its zones; either one without zones accepts any. */
function mergeMemberZones(existing: string[] | undefined, zones: readonly string[]): string[] {
  if (existing !== undefined && (existing.length === 0 || zones.length === 0)) return [];
  const merged = [...(existing ?? [])];
  for (const z of zones) if (!merged.includes(z)) merged.push(z);
  return merged;
}

export function parse(c: SetupContext): SecondaryOptions {
  const d = c.dispenser;
  const zones = new Map<string, string[]>();
  const catalogs = new Map<string, string[]>();
  const fall = new Fall();
  while (d.next()) {
    if (d.val() !== 'secondary') continue;
    const origins = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    for (const o of origins) zones.set(o, []);
    let hasTransfer = false;
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'transfer': {
          const f = transferIn(d);
          hasTransfer = true;
          for (const o of origins) zones.get(o)!.push(...f);
          break;
        }
        case 'catalog': {
          const members = memberZonesFromArgs(d.remainingArgs());
          for (const o of origins) catalogs.set(o, mergeMemberZones(catalogs.get(o), members));
          break;
        }
        case 'fallthrough':
          fall.setZonesFromArgs(d.remainingArgs());
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
    if (!hasTransfer) throw d.err('secondary zones require a transfer from property');
  }
  return { zones, fall, catalogs };
}

export const plugin: PluginDefinition = {
  name: 'secondary',
  setup(c) {
    const o = parse(c);
    const env: SecondaryEnv = { log: c.log, fileLog: fileLogger(c.instance.log), random: (n) => Math.floor(Math.random() * n) };
    const s = new Secondary(o.zones, o.fall, env, o.catalogs);
    // The block's transfer plugin, found before the first transfer starts (CoreDNS looks it up at start-up).
    c.onStartup(() => {
      const t = c.config.handlers.find((h) => h.name === 'transfer');
      env.notifier = t !== undefined && isNotifier(t) ? t : undefined;
    });
    for (const z of s.zones.values()) {
      if (z.transferFrom.length === 0) continue;
      c.onStartup(() => { void z.run(); });
      c.onShutdown(() => { z.stop(); });
    }
    c.onShutdown(() => { s.stopDynamic(); });
    c.addPlugin((next) => s.withNext(next));
  },
};
