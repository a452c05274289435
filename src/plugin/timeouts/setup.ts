// timeouts's Corefile syntax (CoreDNS plugin/timeouts/timeouts.go): the
// server's connection timeouts, stored in the block's config for the core's
// listeners (see README: what plain DNS-over-TCP does with each).

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { DurationError, formatDuration, parseDuration } from '../pkg/duration.ts';

/** What `timeouts { read|write|idle DURATION; maxtcpqueries N }` configures; undefined: the server's default. */
export interface TimeoutsOptions {
  /** `read`: time allowed for the first query of a connection (ms). */
  readTimeoutMs: number | undefined;
  /** `write`: time allowed for a reply to be sent (ms). */
  writeTimeoutMs: number | undefined;
  /** `idle`: time allowed between queries of a connection (ms). */
  idleTimeoutMs: number | undefined;
  /** `maxtcpqueries`: queries served on one TCP connection before it is closed (-1: unlimited). */
  maxTcpQueries: number | undefined;
}

const S = 1000000000n;
const MS = 1000000n;

/** Go's strconv.Atoi with its error text (64-bit int). */
function atoi(s: string): number {
  const m = /^[+-]?([0-9]+)$/.exec(s);
  if (m === null) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
  const v = BigInt(s);
  if (v > (1n << 63n) - 1n || v < -(1n << 63n)) throw new Error(`strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`);
  return Number(v);
}

/** CoreDNS's durations.NewDurationFromArg: a bare integer means seconds. */
function durationFromArg(arg: string): bigint {
  let a = arg;
  try {
    atoi(a);
    a += 's';
  } catch { /* not an integer: a Go duration */ }
  try {
    return parseDuration(a);
  } catch (e) {
    if (e instanceof DurationError) throw new Error(`failed to parse duration '${a}'`);
    throw e;
  }
}

/** Reads every `timeouts` block of the server block; later values replace earlier ones. */
export function parse(c: SetupContext): TimeoutsOptions {
  const d = c.dispenser;
  const o: TimeoutsOptions = { readTimeoutMs: undefined, writeTimeoutMs: undefined, idleTimeoutMs: undefined, maxTcpQueries: undefined };
  while (d.next()) {
    if (d.remainingArgs().length > 0) throw new Error('plugin/timeouts: plugin/timeouts: ' + d.argErr().message);
    let n = 0;
    while (d.nextBlock()) {
      const opt = d.val();
      const args = d.remainingArgs();
      if (args.length !== 1) throw d.argErr();
      const arg = args[0]!;
      if (opt === 'maxtcpqueries') {
        let v: number;
        try {
          v = atoi(arg);
        } catch (e) {
          throw d.errf(`invalid value for maxtcpqueries '${arg}': ${(e as Error).message}`);
        }
        if (v === 0 || v < -1) throw d.errf(`maxtcpqueries provided '${v}' needs to be -1 (unlimited) or a positive integer`);
        o.maxTcpQueries = v;
        n++;
        continue;
      }
      let t: bigint;
      try {
        t = durationFromArg(arg);
      } catch (e) {
        throw d.err((e as Error).message);
      }
      if (t < S || t > 24n * 3600n * S) throw d.errf(`timeout provided '${formatDuration(t)}' needs to be between 1 second and 24 hours`);
      const ms = Number(t / MS);
      if (opt === 'read') o.readTimeoutMs = ms;
      else if (opt === 'write') o.writeTimeoutMs = ms;
      else if (opt === 'idle') o.idleTimeoutMs = ms;
      else throw d.errf(`unknown option: '${opt}'`);
      n++;
    }
    if (n === 0) throw new Error('plugin/timeouts: plugin/timeouts: ' + d.err('timeouts block with no timeouts specified').message);
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'timeouts',
  setup(c) {
    const o = parse(c);
    // No handler: the values are the server's, applied by its listeners.
    if (o.readTimeoutMs !== undefined) c.config.readTimeoutMs = o.readTimeoutMs;
    if (o.writeTimeoutMs !== undefined) c.config.writeTimeoutMs = o.writeTimeoutMs;
    if (o.idleTimeoutMs !== undefined) c.config.idleTimeoutMs = o.idleTimeoutMs;
    if (o.maxTcpQueries !== undefined) c.config.maxTcpQueries = o.maxTcpQueries;
  },
};
