// `loop` alone: CoreDNS's plugin, exactly. `loop { ... }`: nodens's loop guard
// (runtime detection, containment, diagnosis) — see README.md.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { parseDuration, toMillis } from '../pkg/duration.ts';
import { Loop, joinHostPort } from './loop.ts';
import { DEFAULT_GUARD_OPTIONS, LoopGuard, loopMetrics, type GuardOptions, type PendingProbes } from './guard.ts';
import { serverSecret } from '../pkg/loopguard.ts';

const ERR_ONCE = 'plugin/loop: this plugin can only be used once per Server Block';

/** What `loop` or `loop { ... }` configures. */
export interface LoopOptions {
  /** The loop guard's settings (`loop { ... }`, defaults filled in); undefined: plain `loop` (CoreDNS mode). */
  guard: GuardOptions | undefined;
}

function onOff(c: SetupContext, v: string): boolean {
  if (v === 'on') return true;
  if (v === 'off') return false;
  throw c.dispenser.errf(`expected on or off, got '${v}'`);
}

function durationMs(c: SetupContext, v: string, zeroOk: boolean): number {
  let ms: number;
  try {
    ms = toMillis(parseDuration(v));
  } catch (e) {
    throw c.dispenser.errf(e instanceof Error ? e.message : String(e));
  }
  if (ms < 0 || (!zeroOk && ms === 0)) throw c.dispenser.errf(`invalid duration '${v}'`);
  return ms;
}

/**
 * Reads the block's `loop` directive (once per block). `plainIsGuard`: a plain `loop` means `loop { }`
 * (nodens node-cache, where the guard is on for the Corefile node-cache writes).
 */
export function parse(c: SetupContext, plainIsGuard = false): LoopOptions {
  const d = c.dispenser;
  let i = 0;
  let guard: GuardOptions | undefined;
  while (d.next()) {
    if (i > 0) throw new Error(ERR_ONCE);
    i++;
    let block = false;
    const g: GuardOptions = { ...DEFAULT_GUARD_OPTIONS };
    while (d.nextBlock()) {
      block = true;
      const opt = d.val();
      const args = d.remainingArgs();
      const one = (): string => {
        if (args.length !== 1) throw d.argErr();
        return args[0]!;
      };
      switch (opt) {
        case 'action': {
          const v = one();
          if (v !== 'contain' && v !== 'exit') throw d.errf(`action must be contain or exit, got '${v}'`);
          g.action = v;
          break;
        }
        case 'max_hops': {
          const v = one();
          const n = Number(v);
          if (!/^[0-9]+$/.test(v) || n < 2 || n > 255) throw d.errf(`max_hops must be an integer from 2 to 255, got '${v}'`);
          g.maxHops = n;
          break;
        }
        case 'probe_interval': g.probeIntervalMs = durationMs(c, one(), true); break;
        case 'recheck': g.recheckMs = durationMs(c, one(), false); break;
        case 'trace': g.trace = onOff(c, one()); break;
        case 'readiness': g.readiness = onOff(c, one()); break;
        default:
          throw d.errf(`unknown property '${opt}'`);
      }
    }
    if (!block && d.val() === '}') block = true; // `loop {}`
    if (!block && d.nextArg()) throw d.argErr();
    if (block || plainIsGuard) guard = g;
  }
  return { guard };
}

/** The plugin; with `plainIsGuard` a plain `loop` runs the guard with its defaults (node-cache mode). */
export function loopPlugin(plainIsGuard: boolean): PluginDefinition {
  return {
    name: 'loop',
    setup(c) { setup(c, plainIsGuard); },
  };
}

export const plugin: PluginDefinition = loopPlugin(false);

function setup(c: SetupContext, plainIsGuard: boolean): void {
  const { guard } = parse(c, plainIsGuard);
  const cfg = c.config;
  if (guard === undefined) {
    const l = new Loop(cfg.zones[0] ?? '.', c.log);
    c.addPlugin((next) => { l.next = next; return l; });
    let stopped = false;
    c.onStartup(() => {
      // A background task, as CoreDNS's goroutine: the sockets open after this hook returns.
      const addr = joinHostPort(cfg.listenHosts[0] ?? '', cfg.port);
      void l.probeLoop(addr, () => stopped);
    });
    c.onShutdown(() => { stopped = true; });
    return;
  }
  const lineage = c.instance.lineage;
  const g = new LoopGuard(cfg, guard, c.log, lineage.store('loop/secret', serverSecret),
    lineage.store('loop/probes', (): PendingProbes => new Map()), loopMetrics(c.instance.metrics));
  c.addPlugin((next) => { g.next = next; return g; });
  c.onInstanceStartup(() => { g.start(c.instance.blockConfigs()); });
  c.onShutdown(() => { g.stop(); });
}
