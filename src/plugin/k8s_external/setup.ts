// k8s_external's Corefile syntax (CoreDNS plugin/k8s_external/setup.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { Fall } from '../pkg/fall.ts';
import { isExternaler } from '../pkg/external.ts';
import { External } from './external.ts';

/** What `k8s_external [ZONE...] { apex APEX; ttl TTL; headless; fallthrough [ZONE...] }` configures. */
export interface K8sExternalOptions {
  /** The zones answered (the block's zones when none are given); a later `k8s_external` line replaces them. */
  zones: string[];
  /** `apex APEX`: the label under which the nameserver records live (default `dns`), as written. */
  apex: string;
  /** `ttl TTL`: the TTL of the answers and the SOA minimum, 0-3600 (default 5). */
  ttl: number;
  /** `headless`: answer headless services' endpoints too. */
  headless: boolean;
  /** `fallthrough [ZONE...]`: pass NXDOMAIN names on to the next plugin. */
  fall: Fall;
}

/** Go's strconv.Atoi on a 64-bit platform, with its error texts. */
function atoi(s: string): bigint {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const n = BigInt(s);
  if (n > 9223372036854775807n || n < -9223372036854775808n) {
    throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  }
  return n;
}

/** Reads every `k8s_external` line of the block; options of later lines add to those of earlier ones. */
export function parse(c: SetupContext): K8sExternalOptions {
  const d = c.dispenser;
  const o: K8sExternalOptions = { zones: [], apex: 'dns', ttl: 5, headless: false, fall: new Fall() };
  while (d.next()) {
    o.zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'ttl': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          const t = atoi(args[0]!);
          if (t < 0n || t > 3600n) throw d.errf(`ttl must be in range [0, 3600]: ${t}`);
          o.ttl = Number(t);
          break;
        }
        case 'apex': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          o.apex = args[0]!;
          break;
        }
        case 'headless':
          o.headless = true;
          break;
        case 'fallthrough':
          o.fall.setZonesFromArgs(d.remainingArgs());
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'k8s_external',
  setup(c) {
    const o = parse(c);
    const e = new External(o);
    // As CoreDNS: at startup, once every plugin of the block is in place.
    c.onStartup(() => {
      const k = c.config.handlers.find((h) => h.name === 'kubernetes');
      if (k === undefined) throw new Error('plugin/k8s_external: kubernetes plugin not loaded');
      if (!isExternaler(k)) throw new Error('plugin/k8s_external: kubernetes plugin does not implement the Externaler interface');
      e.x = k;
    });
    c.addPlugin((next) => { e.next = next; return e; });
  },
};
