import { siitMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { goQuote } from '../../corefile/address.ts';
import { formatIPNetGo, formatIPv4, formatIPv6Go, ipv4Of, parseCidr, parseIP } from '../../wire/ip.ts';
import type { Cidr } from '../../wire/ip.ts';
import { Siit } from './siit.ts';
import { parsePrefix } from '../pkg/rfc6052.ts';

/** What `siit { ... }` configures. */
export interface SiitOptions {
  /** `ipv6_prefix`: the RFC 6052 prefix the IPv4 addresses are embedded in (default `64:ff9b::/96`). */
  prefix: Cidr;
  /**
   * `eam IPV4 IPV6`: explicit address mappings, keyed by the IPv6 address as Go prints it, valued
   * by the IPv4 address in dotted form; a later mapping of the same IPv6 address wins.
   */
  eam: Map<string, string>;
}

/** siit's `ipv6_prefix`: as dns64's, and the "u" octet must be zero. */
function prefixArg(d: Dispenser, text: string): Cidr {
  const c = parsePrefix(d, text, (net) => `invalid prefix length ${net}: must be one of /32, /40, /48, /56, /64, /96`);
  // RFC 6052 2.2: the "u" octet (bits 64-71) is zero.
  if (c.bytes[8] !== 0) throw d.errf(`invalid prefix ${goQuote(formatIPNetGo(c))}: reserved octet (byte 8) must be zero`);
  return c;
}

/** Go's net.IP.String() of an address (4 or 16 bytes), `<nil>` for none. */
function ipString(ip: Uint8Array | undefined): string {
  if (ip === undefined) return '<nil>';
  return ip.length === 4 ? formatIPv4(ip, 0) : formatIPv6Go(ip, 0);
}

function parseEam(d: Dispenser, eam: Map<string, string>): void {
  const args = d.remainingArgs();
  if (args.length !== 2) throw d.argErr();
  const v4 = parseIP(args[0]);
  if (v4 === undefined) throw d.errf(`invalid IP address: ${goQuote(ipString(v4))}`);
  const four = ipv4Of(v4);
  if (four === undefined) throw d.errf(`invalid IPv4 address: ${goQuote(ipString(v4))}`);
  const v6 = parseIP(args[1]);
  if (v6 === undefined) throw d.errf(`invalid IP address: ${goQuote(ipString(v6))}`);
  if (ipv4Of(v6) !== undefined) throw d.errf(`invalid IPv6 address: ${goQuote(ipString(v6))}`);
  eam.set(formatIPv6Go(v6, 0), formatIPv4(four, 0));
}

/** Reads every `siit` directive of the block; later settings win, mappings accumulate. */
export function parse(c: SetupContext): SiitOptions {
  const d = c.dispenser;
  const o: SiitOptions = { prefix: parseCidr('64:ff9b::/96')!, eam: new Map() };
  while (d.next()) {
    if (d.remainingArgs().length > 0) throw d.argErr();
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'ipv6_prefix':
          if (!d.nextArg()) throw d.argErr();
          o.prefix = prefixArg(d, d.val());
          break;
        case 'eam':
          parseEam(d, o.eam);
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'siit',
  setup(c) {
    const o = parse(c);
    const translated = siitMetrics(c.instance.metrics);
    c.addPlugin((next) => new Siit(next, o, translated));
  },
};
