// loadbalance's Corefile syntax (CoreDNS plugin/loadbalance/setup.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { parseDuration } from '../pkg/duration.ts';
import { LoadBalance } from './loadbalance.ts';
import { parseCidr, type Cidr } from '../../wire/ip.ts';
import { WeightedRR } from './weighted.ts';

/** What `loadbalance [round_robin | weighted FILE { reload DURATION }] { prefer CIDR... }` configures. */
export interface LoadBalanceOptions {
  /** `weighted FILE`: the weight file and how often it is re-read (ms; 0: never); undefined for round_robin. */
  weighted: { file: string; reloadMs: number } | undefined;
  /** `prefer CIDR...`: subnets whose addresses are moved to the front, in order. */
  prefer: Cidr[];
}

/** Reads every `loadbalance` line of the block; the last policy wins, `prefer` subnets add up. */
export function parse(c: SetupContext): LoadBalanceOptions {
  const d = c.dispenser;
  let weighted: LoadBalanceOptions['weighted'];
  const prefer: Cidr[] = [];
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length > 0) {
      switch (args[0]) {
        case 'round_robin':
          if (args.length > 1) throw d.errf(`unknown property for ${args[0]}`);
          weighted = undefined;
          break;
        case 'weighted': {
          if (args.length < 2) throw d.err('missing weight file argument');
          if (args.length > 2) throw d.err('unexpected argument(s)');
          let reloadMs = 30000;
          while (d.nextBlock()) {
            if (d.val() === 'reload') {
              const t = d.remainingArgs();
              if (t.length < 1) throw d.err('reload duration value is missing');
              if (t.length > 1) throw d.err('unexpected argument');
              try {
                reloadMs = Number(parseDuration(t[0]!) / 1000000n);
              } catch {
                throw d.errf(`invalid reload duration '${t[0]}'`);
              }
            } else {
              throw d.errf(`unknown property '${d.val()}'`);
            }
          }
          weighted = { file: args[1]!, reloadMs };
          break;
        }
        default:
          throw new Error(`unknown policy: ${args[0]}`);
      }
    }
    while (d.nextBlock()) {
      if (d.val() === 'prefer') {
        for (const cidr of d.remainingArgs()) {
          const parsed = parseCidr(cidr);
          // Go's net.ParseCIDR error text
          if (parsed === undefined) throw d.errf(`invalid CIDR ${JSON.stringify(cidr)}: invalid CIDR address: ${cidr}`);
          prefer.push(parsed);
        }
      } else {
        throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  return { weighted, prefer };
}

export const plugin: PluginDefinition = {
  name: 'loadbalance',
  setup(c) {
    const o = parse(c);
    const weighted = o.weighted === undefined ? undefined : new WeightedRR(o.weighted.file, o.weighted.reloadMs, c.log);
    const w = weighted;
    if (w !== undefined) {
      c.onStartup(() => { w.start(); });
      c.onShutdown(() => { w.stop(); });
    }
    const lb = new LoadBalance(weighted, o.prefer);
    c.addPlugin((next) => { lb.next = next; return lb; });
  },
};
