// dnssec's Corefile syntax (CoreDNS plugin/dnssec/setup.go), messages kept.

import { dnssecMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { nameMatches } from '../pkg/zones.ts';
import { SigCache } from './cache.ts';
import { Dnssec, staleSigs } from './dnssec.ts';
import { readKeyFiles, type SigningKey } from './keys.ts';

/** What `dnssec [ZONES...] { key file KEY...; cache_capacity CAPACITY }` configures. */
export interface DnssecOptions {
  /** The zones signed (the block's zones when none are given). */
  zones: string[];
  /** The keys, in the order given. */
  keys: SigningKey[];
  /** `cache_capacity`: the signature cache's capacity (default 10000). */
  capacity: number;
  /** Some keys have the SEP bit set and some do not: KSKs sign the DNSKEY set, ZSKs the rest. */
  splitkeys: boolean;
}

export const DEFAULT_CAPACITY = 10000;

/** Go strconv.Atoi, with Go's error text. */
function atoi(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = Number(s);
  if (!Number.isSafeInteger(n) || Math.abs(n) > 2 ** 63) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return n;
}

/**
 * The text CoreDNS gives when a key cannot be fetched from AWS Secrets Manager without credentials; nodens
 * has no AWS client, so `key aws_secretsmanager` always fails this way.
 */
export const AWS_UNSUPPORTED = 'operation error Secrets Manager: GetSecretValue, get identity: get credentials: '
  + 'failed to refresh cached credentials, AWS Secrets Manager is not supported by nodens';

function keyParse(c: SetupContext): SigningKey[] {
  const d = c.dispenser;
  const keys: SigningKey[] = [];
  if (!d.nextArg()) throw d.argErr();
  switch (d.val()) {
    case 'file': {
      const ks = d.remainingArgs();
      if (ks.length === 0) throw d.argErr();
      for (const k of ks) {
        let base = k;
        // Kmiek.nl.+013+26205.key, .private or no extension (both suffixes tested on the name as given)
        if (k.endsWith('.key')) base = k.slice(0, -4);
        if (k.endsWith('.private')) base = k.slice(0, -8);
        keys.push(readKeyFiles(base + '.key', base + '.private'));
      }
      break;
    }
    case 'aws_secretsmanager': {
      const ks = d.remainingArgs();
      if (ks.length === 0) throw d.argErr();
      throw new Error(AWS_UNSUPPORTED);
    }
    default:
      // CoreDNS ignores any other source; the tokens after it are read as the next property
      break;
  }
  return keys;
}

/** Reads the block's `dnssec` directive (once per block); key files are read here, as CoreDNS does. */
export function parse(c: SetupContext): DnssecOptions {
  const d = c.dispenser;
  let zones: string[] = [];
  const keys: SigningKey[] = [];
  let capacity = DEFAULT_CAPACITY;
  let i = 0;
  while (d.next()) {
    if (i > 0) throw new Error('plugin/dnssec: this plugin can only be used once per Server Block');
    i++;
    zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    while (d.nextBlock()) {
      const x = d.val();
      switch (x) {
        case 'key':
          for (const k of keyParse(c)) keys.push(k);
          break;
        case 'cache_capacity':
          if (!d.nextArg()) throw d.argErr();
          capacity = atoi(d.val());
          break;
        default:
          throw d.errf(`unknown property '${x}'`);
      }
    }
  }
  let zsk = 0;
  let ksk = 0;
  for (const k of keys) {
    if (k.ksk) ksk++;
    else if (k.zsk) zsk++;
  }
  const splitkeys = zsk > 0 && ksk > 0;
  for (const k of keys) {
    const kname = k.dnskey.name;
    if (!zones.some((z) => nameMatches(kname, z))) {
      throw new Error(`key ${kname} (keyid: ${k.tag}) can not sign any of the zones`);
    }
  }
  return { zones, keys, capacity, splitkeys };
}

export const plugin: PluginDefinition = {
  name: 'dnssec',
  setup(c) {
    const o = parse(c);
    const cache = new SigCache(o.capacity);
    let timer: NodeJS.Timeout | undefined;
    c.onStartup(() => {
      if (timer !== undefined) return;
      // every 8 hours, drop the signatures that reached 75% of their validity (CoreDNS periodicClean)
      timer = setInterval(() => {
        const now = Math.floor(Date.now() / 1000);
        cache.sweep((sigs) => staleSigs(sigs, now));
      }, 8 * 3600 * 1000);
      timer.unref();
    });
    c.onShutdown(() => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
    });
    c.addPlugin((next) => {
      const h = new Dnssec(o.zones, o.keys, o.splitkeys, cache, dnssecMetrics(c.instance.metrics));
      h.next = next;
      return h;
    });
  },
};
