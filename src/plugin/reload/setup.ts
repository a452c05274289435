// reload [INTERVAL] [JITTER]
//
// Logs the SHA-512 of the running configuration at every (re)start, then polls
// the Corefile every INTERVAL ± JITTER/2 through the loader used at start and
// reloads when the hash of the parsed server blocks changed. A failed reload
// keeps the old configuration and counts in coredns_reload_failed_total.

import type { InstanceServices, PluginDefinition, PluginLogger, ReloadControl, SetupContext } from '../plugin.ts';
import { parseCorefile } from '../../corefile/parser.ts';
import { serverBlocksSha512 } from '../../corefile/hash.ts';
import { parseDuration } from '../pkg/duration.ts';
import { reloadMetrics, type ReloadMetrics } from './metrics.ts';

const NS_PER_S = 1000000000n;
export const DEFAULT_INTERVAL = 30n * NS_PER_S;
export const DEFAULT_JITTER = 15n * NS_PER_S;
export const MIN_INTERVAL = 2n * NS_PER_S;
export const MIN_JITTER = 1n * NS_PER_S;


const UNUSED = 0;
const MAYBE_USED = 1;
const USED = 2;

/** Settings of one server across its reloads (CoreDNS keeps them in a package variable). */
interface LineageState {
  intervalNs: bigint;
  usage: number;
  quit: boolean;
}

function stateFor(inst: InstanceServices): LineageState {
  return inst.lineage.store('reload/state', () => ({ intervalNs: DEFAULT_INTERVAL, usage: UNUSED, quit: false }));
}

/** What `reload [INTERVAL] [JITTER]` configures. */
export interface ReloadOptions {
  /** How often the Corefile is checked, in nanoseconds (default 30s, at least 2s). */
  interval: bigint;
  /** The spread around INTERVAL, in nanoseconds (default 15s; 0 or at least 1s), capped at INTERVAL/2. */
  jitter: bigint;
}

/** INTERVAL and JITTER as CoreDNS validates them (the errors are CoreDNS's). */
function intervalAndJitter(args: readonly string[]): ReloadOptions {
  let i = DEFAULT_INTERVAL;
  if (args.length > 0) i = parseDuration(args[0]!);
  if (i < MIN_INTERVAL) throw new Error('interval value must be greater or equal to 2s');
  let j = DEFAULT_JITTER;
  if (args.length > 1) j = parseDuration(args[1]!);
  if (j !== 0n && j < MIN_JITTER) throw new Error('jitter value must be 0 or greater or equal to 1s');
  if (j > 0n && j > i / 2n) j = i / 2n;
  return { interval: i, jitter: j };
}

/** The effective period: INTERVAL plus an offset drawn uniformly from [-JITTER/2, +JITTER/2). */
function periodOf(o: ReloadOptions, random: () => number): bigint {
  let i = o.interval;
  const j = o.jitter;
  if (j > 0n) i += BigInt(Math.floor(random() * Number(j))) - j / 2n;
  return i;
}

/**
 * INTERVAL and JITTER as CoreDNS validates them; returns the effective period:
 * INTERVAL plus an offset drawn uniformly from [-JITTER/2, +JITTER/2), with
 * JITTER capped at INTERVAL/2.
 */
export function period(args: readonly string[], random: () => number = Math.random): bigint {
  return periodOf(intervalAndJitter(args), random);
}

/** Reads `reload [INTERVAL] [JITTER]`; only the first `reload` line of a block is read, as in CoreDNS. */
export function parse(c: SetupContext): ReloadOptions {
  const d = c.dispenser;
  d.next(); // 'reload'
  const args = d.remainingArgs();
  if (args.length > 2) throw d.argErr();
  return intervalAndJitter(args);
}

/** The hash CoreDNS logs and compares: SHA-512 of the parsed server blocks. */
function hashOf(contents: string, file: string, log: PluginLogger): string {
  const blocks = parseCorefile(contents, file, {
    isDirective: () => true,
    env: process.env,
    warn: (msg) => { log.warning(msg); },
  });
  return serverBlocksSha512(blocks);
}

/** Polls one running configuration's Corefile until a reload away from it succeeds. */
class Watcher {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private sha: string;
  private readonly control: ReloadControl;
  private readonly state: LineageState;
  private readonly log: PluginLogger;

  private readonly metrics: ReloadMetrics;

  constructor(sha: string, control: ReloadControl, state: LineageState, log: PluginLogger, metrics: ReloadMetrics) {
    this.metrics = metrics;
    this.sha = sha;
    this.control = control;
    this.state = state;
    this.log = log;
  }

  start(periodNs: bigint): void {
    const ms = Number(periodNs / 1000000n);
    this.timer = setInterval(() => { void this.tick(); }, ms);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async tick(): Promise<void> {
    if (this.busy || this.timer === undefined) return;
    let input: { contents: string; file: string };
    try {
      input = this.control.readCorefile();
    } catch {
      return; // unreadable: try again next time
    }
    let s: string;
    try {
      s = hashOf(input.contents, input.file, this.log);
    } catch (e) {
      this.log.warning(`Corefile parse failed: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    if (s === this.sha) return;
    this.metrics.reloadInfo.remove({ hash: 'sha512', value: this.sha });
    // Do not retry the same file, even when it turns out to be wrong.
    this.sha = s;
    // Unless the new configuration sets reload up again, it is not used any more.
    this.state.usage = MAYBE_USED;
    if (this.state.quit) return;
    this.busy = true;
    let err: Error | undefined;
    try {
      err = await this.control.reload(input.contents, input.file);
    } finally {
      this.busy = false;
    }
    this.metrics.reloadInfo.set({ hash: 'sha512', value: s }, 1);
    if (err !== undefined) {
      this.log.error(`Corefile changed but reload failed: starting with listener file descriptors: ${err.message}`);
      this.metrics.failedCount.inc();
      return;
    }
    if (this.state.usage === MAYBE_USED) this.state.usage = UNUSED;
    this.stop();
  }
}

export const plugin: PluginDefinition = {
  name: 'reload',
  setup(c) {
    const p = periodOf(parse(c), Math.random);

    const state = stateFor(c.instance);
    state.intervalNs = p;
    state.usage = USED;
    state.quit = false;

    // Once per instance, whatever the number of blocks with `reload`.
    let first = false;
    c.instance.shared('reload/instance', () => { first = true; return true; });
    if (!first) return;
    const inst = c.instance;
    const log = c.log;
    let watcher: Watcher | undefined;
    c.onInstanceStartup(() => {
      if (state.usage === UNUSED) return;
      const sha = serverBlocksSha512(inst.serverBlocks);
      log.info(`Running configuration SHA512 = ${sha}`);
      const control = inst.reloadControl;
      if (control === undefined) return;
      watcher = new Watcher(sha, control, state, log, reloadMetrics(inst.metrics));
      watcher.start(state.intervalNs);
    });
    // Replaced (or stopping): this configuration's watcher ends.
    c.onShutdown(() => { watcher?.stop(); });
    c.onFinalShutdown(() => {
      state.quit = true;
      watcher?.stop();
    });
  },
};
