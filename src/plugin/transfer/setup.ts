// transfer's Corefile syntax (CoreDNS plugin/transfer/setup.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goQuote, originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseIP } from '../../wire/ip.ts';
import { isTransferer } from '../pkg/transfer.ts';
import { joinHostPort, splitHostPort } from '../pkg/httpserver.ts';
import { stripZone } from '../pkg/resolvconf.ts';
import { Transfer, type XfrEntry } from './transfer.ts';

/** What the block's `transfer [ZONE...] { to ADDRESS...; source ADDRESS }` lines configure. */
export interface TransferOptions {
  /** One entry per `transfer` line, in Corefile order. */
  entries: XfrEntry[];
}

/** CoreDNS's parse.HostPort(s, "53"): `IP` or `IP:PORT` (IPv6 bracketed) to `host:port`. */
function hostPort(s: string): string {
  let host: string;
  let port: string;
  try {
    ({ host, port } = splitHostPort(s));
  } catch {
    if (parseIP(stripZone(s)) === undefined) throw new Error(`must specify an IP address: \`${s}'`);
    return joinHostPort(s, '53');
  }
  if (parseIP(stripZone(host)) === undefined) throw new Error(`must specify an IP address: \`${host}'`);
  return joinHostPort(host, port === '' ? '53' : port);
}

/** Reads every `transfer` line of the block. */
export function parse(c: SetupContext): TransferOptions {
  const d = c.dispenser;
  const entries: XfrEntry[] = [];
  while (d.next()) {
    const zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    const to: string[] = [];
    let source: string | undefined;
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'to': {
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          for (const host of args) to.push(host === '*' ? host : hostPort(host));
          break;
        }
        case 'source': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          if (source !== undefined) throw new Error('plugin/transfer: plugin/transfer: ' + d.err('source already specified').message);
          if (parseIP(args[0]!) === undefined) throw new Error('plugin/transfer: plugin/transfer: ' + d.errf(`invalid source address ${goQuote(args[0]!)}`).message);
          source = args[0]!;
          break;
        }
        default:
          throw new Error('plugin/transfer: plugin/transfer: ' + d.errf(`unknown property ${goQuote(d.val())}`).message);
      }
    }
    if (to.length === 0) throw new Error('plugin/transfer: plugin/transfer: ' + d.err("'to' is required").message);
    entries.push({ zones, to, source });
  }
  return { entries };
}

export const plugin: PluginDefinition = {
  name: 'transfer',
  setup(c) {
    const o = parse(c);
    const t = new Transfer(o.entries, c.log);
    c.addPlugin((next) => { t.next = next; return t; });
    c.onStartup(() => {
      // Every handler of the block that can hand out a zone, in chain order.
      t.transferers = c.config.handlers.filter(isTransferer);
    });
  },
};
