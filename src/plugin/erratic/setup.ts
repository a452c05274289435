import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goQuote } from '../../corefile/address.ts';
import { parseDuration } from '../pkg/duration.ts';
import { Erratic } from './erratic.ts';

/** What `erratic { ... }` configures: 1 in N queries is dropped, delayed, truncated (0: never). */
export interface ErraticOptions {
  /** `drop [AMOUNT]` (default 2; 0 once `delay` or `truncate` is given without an amount-giving `drop`). */
  drop: number;
  /** `delay [AMOUNT [DURATION]]` (2 when given without AMOUNT). */
  delay: number;
  /** The delay in nanoseconds (100ms when `delay` is given without DURATION). */
  duration: bigint;
  /** `truncate [AMOUNT]` (2 when given without AMOUNT). */
  truncate: number;
  /** `large` (undocumented, as in CoreDNS): 30 A records in the reply to an A query. */
  large: boolean;
}

/** Go's strconv.ParseInt(s, 10, 32), with its error text. */
function parseInt32(s: string): number {
  if (!/^[+-]?[0-9]+$/.test(s)) throw new Error(`strconv.ParseInt: parsing ${goQuote(s)}: invalid syntax`);
  const n = Number(s);
  if (n > 0x7fffffff || n < -0x80000000) throw new Error(`strconv.ParseInt: parsing ${goQuote(s)}: value out of range`);
  return n;
}

/** An AMOUNT: a 32-bit integer, not negative (errors without a position, as CoreDNS's). */
function amount(s: string): number {
  const n = parseInt32(s);
  if (n < 0) throw new Error(`illegal amount value given ${goQuote(s)}`);
  return n;
}

/** Reads every `erratic` directive of the block; later settings win. */
export function parse(c: SetupContext): ErraticOptions {
  const d = c.dispenser;
  const o: ErraticOptions = { drop: 2, delay: 0, duration: 0n, truncate: 0, large: false };
  // Whether a `drop` with an AMOUNT was seen (a bare `drop` does not count, as in CoreDNS).
  let drop = false;
  while (d.next()) {
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'drop': {
          const args = d.remainingArgs();
          if (args.length > 1) throw d.argErr();
          if (args.length === 0) continue;
          o.drop = amount(args[0]);
          drop = true;
          break;
        }
        case 'delay': {
          const args = d.remainingArgs();
          if (args.length > 2) throw d.argErr();
          o.delay = 2;
          o.duration = 100_000_000n;
          if (args.length === 0) continue;
          o.delay = amount(args[0]);
          if (args.length > 1) o.duration = parseDuration(args[1]);
          break;
        }
        case 'truncate': {
          const args = d.remainingArgs();
          if (args.length > 1) throw d.argErr();
          o.truncate = 2;
          if (args.length === 0) continue;
          o.truncate = amount(args[0]);
          break;
        }
        case 'large':
          o.large = true;
          break;
        default:
          throw d.errf(`unknown property '${d.val()}'`);
      }
    }
  }
  if ((o.delay > 0 || o.truncate > 0) && !drop) o.drop = 0;
  return o;
}

export const plugin: PluginDefinition = {
  name: 'erratic',
  setup(c) {
    const o = parse(c);
    c.addPlugin(() => new Erratic(o));
  },
};
