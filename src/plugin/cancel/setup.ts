// cancel's Corefile syntax (CoreDNS plugin/cancel/cancel.go).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { DurationError, parseDuration, toMillis } from '../pkg/duration.ts';
import { Cancel } from './cancel.ts';

/** CoreDNS's default: just over forward's 5 s budget. */
export const DEFAULT_CANCEL_MS = 5001;

/** What `cancel [TIMEOUT]` configures. */
export interface CancelOptions {
  /** How long a query may take before it is given up, in milliseconds. */
  timeoutMs: number;
}

/** Reads every `cancel` line of the block; the last one wins, as in CoreDNS. */
export function parse(c: SetupContext): CancelOptions {
  const d = c.dispenser;
  let timeoutMs = DEFAULT_CANCEL_MS;
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length === 0) {
      timeoutMs = DEFAULT_CANCEL_MS;
    } else if (args.length === 1) {
      const a = args[0]!;
      let ns: bigint;
      try {
        ns = parseDuration(a);
      } catch (e) {
        if (e instanceof DurationError) throw new Error(`invalid duration: ${JSON.stringify(a)}`);
        throw e;
      }
      if (ns <= 0n) throw new Error(`invalid negative duration: ${JSON.stringify(a)}`);
      timeoutMs = toMillis(ns);
    } else {
      throw d.argErr();
    }
  }
  return { timeoutMs };
}

export const plugin: PluginDefinition = {
  name: 'cancel',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new Cancel(o.timeoutMs, next));
  },
};
