import { dns64Metrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { parseCidr } from '../../wire/ip.ts';
import { parsePrefix } from '../pkg/rfc6052.ts';
import type { Cidr } from '../../wire/ip.ts';
import { Dns64 } from './dns64.ts';

/** What `dns64 [PREFIX] { ... }` configures. */
export interface Dns64Options {
  /** The IPv6 prefix the IPv4 addresses are embedded in (default `64:ff9b::/96`). */
  prefix: Cidr;
  /** `translate_all`: synthesise even when the reply has AAAA records. */
  translateAll: boolean;
  /** `allow_ipv4`: also translate for clients that came over IPv4. */
  allowIPv4: boolean;
}

/** dns64's PREFIX and `prefix`. */
function prefixArg(d: Dispenser, text: string): Cidr {
  return parsePrefix(d, text, (net) => `invalid prefix length ${net}`);
}

/** Reads every `dns64` directive of the block; later settings win. */
export function parse(c: SetupContext): Dns64Options {
  const d = c.dispenser;
  const o: Dns64Options = { prefix: parseCidr('64:ff9b::/96')!, translateAll: false, allowIPv4: false };
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length === 1) {
      o.prefix = prefixArg(d, args[0]);
      // As CoreDNS: a block after PREFIX is not read as options (its lines are taken as
      // further directive lines).
      continue;
    }
    if (args.length > 0) throw d.argErr();
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'prefix':
          if (!d.nextArg()) throw d.argErr();
          o.prefix = prefixArg(d, d.val());
          break;
        case 'translate_all':
          o.translateAll = true;
          break;
        case 'allow_ipv4':
          o.allowIPv4 = true;
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'dns64',
  setup(c) {
    const o = parse(c);
    const translated = dns64Metrics(c.instance.metrics);
    c.addPlugin((next) => new Dns64(next, o, translated));
  },
};
