// Helpers for plugin unit tests: run a plugin's setup through the real server
// core (the same Instance, setup context, lifecycle hooks and logger a running
// server uses, without opening sockets), build requests by hand, record what a
// handler writes, capture log lines. Not used at run time.

import assert from 'node:assert/strict';
import { Instance } from '../../core/instance.ts';
import { PluginRegistry } from '../../core/registry.ts';
import { COREDNS_DIRECTIVES } from '../../core/directives.ts';
import { setLogSink } from '../../core/log.ts';
import { Request, type SubQueryRouter, type Transport } from '../../core/request.ts';
import type {
  BlockConfig, Handler, HandlerResult, LifecycleHook, PluginDefinition, PluginFactory, ResponseWriter, SetupContext,
} from '../plugin.ts';
import type { Message } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';
import { registry, type MetricsRegistry } from './metrics.ts';

export interface SetupResult {
  /** The instance the setup ran in (blocks, lineage store, logger). */
  instance: Instance;
  /** The handler factories the plugin added to the first block. */
  factories: readonly PluginFactory[];
  /** The first block's configuration. */
  config: BlockConfig;
  /** The lifecycle hooks the setup registered. */
  hooks: {
    startup: readonly LifecycleHook[];
    shutdown: readonly LifecycleHook[];
    finalShutdown: readonly LifecycleHook[];
    instanceStartup: readonly LifecycleHook[];
  };
  /** The handler chain built from the factories, ending in `last` (if given). */
  chain(last?: Handler): Handler;
  /**
   * Start as the server does, without sockets: the startup hooks (run before
   * the sockets open), then the instance-startup hooks (run once it serves).
   * Throws the first error of a hook.
   */
  start(): Promise<void>;
  /** Run the shutdown and final-shutdown hooks; returns their errors. */
  stop(): Promise<Error[]>;
  /** Turn [DEBUG] lines on or off (what the debug plugin does for a running server). */
  setDebug(on: boolean): void;
}

/**
 * Parse `corefile` and run `def.setup` for every block in which its directive
 * appears, exactly as the server core does at start (same setup context, same
 * error prefix `plugin/<name>: `, same file:line in parse errors). Other
 * directives in the Corefile are accepted and ignored. No socket is opened and
 * no hook runs until the test asks (`start()`, `stop()`).
 */
export async function runSetup(def: PluginDefinition, corefile: string): Promise<SetupResult> {
  const registry = new PluginRegistry();
  registry.register(def);
  for (const name of COREDNS_DIRECTIVES) {
    if (name !== def.name) registry.register({ name, setup() { /* ignored in a plugin's unit test */ } });
  }
  const instance = await Instance.create({ corefile, file: 'Corefile', defaultPort: '53', registry });
  const config = instance.blockConfigs()[0]!;
  const factories = instance.factoriesOf(0);
  return {
    instance,
    factories,
    config,
    hooks: {
      startup: instance.hookList('startup'),
      shutdown: instance.hookList('shutdown'),
      finalShutdown: instance.hookList('finalShutdown'),
      instanceStartup: instance.hookList('instanceStartup'),
    },
    chain(last?: Handler): Handler {
      let next: Handler | undefined = last;
      for (let i = factories.length - 1; i >= 0; i--) next = factories[i]!(next);
      if (next === undefined) throw new Error('no handler');
      return next;
    },
    async start() {
      const errors = await instance.runHooks('startup');
      if (errors.length > 0) throw errors[0];
      const later = await instance.runHooks('instanceStartup');
      if (later.length > 0) throw later[0];
    },
    async stop() {
      const errors = await instance.runHooks('shutdown');
      errors.push(...await instance.runHooks('finalShutdown'));
      return errors;
    },
    setDebug(on: boolean) { instance.log.debugEnabled = on; },
  };
}

/** The error message a setup fails with (prefixed), or '' when it succeeds. */
export async function setupError(def: PluginDefinition, corefile: string): Promise<string> {
  try {
    await runSetup(def, corefile);
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  return '';
}

/**
 * Run only a plugin's `parse` on `corefile`, through the real setup context
 * (as `runSetup` does, so an error comes prefixed `plugin/<name>: ` with the
 * file:line the server reports). Returns the options parsed for the first
 * block in which the directive appears.
 */
export async function parseOptions<T>(name: string, parse: (c: SetupContext) => T, corefile: string): Promise<T> {
  let out: { options: T } | undefined;
  await runSetup({
    name,
    setup(c) {
      const options = parse(c);
      out ??= { options };
    },
  }, corefile);
  if (out === undefined) throw new Error(`no block of the Corefile has the ${name} directive`);
  return out.options;
}

/**
 * One row of a parse table: a Corefile and what parsing it gives: the options
 * (see ParseTableOptions for how they compare), or the error the server
 * reports, as exact text (a string) or a pattern.
 */
export type ParseRow<V> = readonly [corefile: string, expected: V | string | RegExp];

export interface ParseTableOptions<T, V> {
  /** What of the options a row compares (default: the options themselves). */
  view?: (options: T) => V;
  /**
   * Compare only the fields a row names (each one exactly); the others are
   * not checked. Default false: the whole value must be deep-strict-equal.
   */
  partial?: boolean;
}

/**
 * Run a table of Corefiles through `parse` (with parseOptions) and check each
 * row's options or error text. A failing row is reported with its index and Corefile.
 */
export async function parseTable<T, V = T>(
  name: string,
  parse: (c: SetupContext) => T,
  rows: readonly ParseRow<NoInfer<Partial<V>>>[],
  opts: ParseTableOptions<T, V> = {},
): Promise<void> {
  for (const [i, [corefile, expected]] of rows.entries()) {
    try {
      let got: { options: T } | { error: string };
      try {
        got = { options: await parseOptions(name, parse, corefile) };
      } catch (e) {
        got = { error: e instanceof Error ? e.message : String(e) };
      }
      if (typeof expected === 'string' || expected instanceof RegExp) {
        assert.ok('error' in got, `expected an error, got options ${inspectValue(got)}`);
        if (typeof expected === 'string') assert.equal(got.error, expected);
        else assert.match(got.error, expected);
        continue;
      }
      if ('error' in got) assert.fail(`expected options, got the error: ${got.error}`);
      const actual: unknown = opts.view ? opts.view(got.options) : got.options;
      if (opts.partial === true && typeof actual === 'object' && actual !== null) {
        for (const [k, v] of Object.entries(expected)) {
          assert.deepStrictEqual((actual as Record<string, unknown>)[k], v, `field ${k}`);
        }
      } else {
        assert.deepStrictEqual(actual, expected);
      }
    } catch (e) {
      throw new Error(`row ${i} ${JSON.stringify(corefile)}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }
}

function inspectValue(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? `${x}n` : x));
  } catch {
    return String(v);
  }
}

export interface RequestOptions {
  type?: number;
  class?: number;
  proto?: Transport;
  remote?: string;
  port?: number;
  local?: string;
  edns?: { udpSize?: number; do?: boolean };
  id?: number;
  rd?: boolean;
  cd?: boolean;
  opcode?: number;
}

/** A Request for `name` as the server would build it (the wire form is encoded for real). */
export function makeRequest(name: string, o: RequestOptions = {}): Request {
  const q = newQuery(name, o.type ?? 1, o.class ?? 1);
  q.id = o.id ?? 4242;
  if (o.rd !== undefined) q.rd = o.rd;
  if (o.cd !== undefined) q.cd = o.cd;
  if (o.opcode !== undefined) q.opcode = o.opcode;
  if (o.edns) q.edns = { udpSize: o.edns.udpSize ?? 4096, version: 0, do: o.edns.do ?? false, z: 0, options: [] };
  const wire = encodeMessage(q);
  const msg = decodeMessage(wire);
  return new Request(msg, wire, o.proto ?? 'udp', o.remote ?? '127.0.0.1', o.port ?? 5353,
    o.local ?? '127.0.0.1', 53, 'dns://:53', process.hrtime.bigint());
}

/** A writer that keeps every reply. */
export class CaptureWriter implements ResponseWriter {
  readonly msgs: Message[] = [];
  writeMsg(reply: Message): void { this.msgs.push(reply); }
  writeWire(reply: Uint8Array): void { this.msgs.push(decodeMessage(reply)); }
  get last(): Message | undefined { return this.msgs[this.msgs.length - 1]; }
}

/** A handler that answers with a fixed reply builder and rcode, or throws. */
export class StubHandler implements Handler {
  readonly name: string;
  calls = 0;
  private readonly fn: (req: Request, w: ResponseWriter) => HandlerResult;
  constructor(name: string, fn: (req: Request, w: ResponseWriter) => HandlerResult) {
    this.name = name;
    this.fn = fn;
  }
  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    this.calls++;
    return this.fn(req, w);
  }
}

/** Collect log lines while `fn` runs (sync or async). */
export async function captureLog(fn: () => unknown): Promise<string[]> {
  const lines: string[] = [];
  const prev = setLogSink((l) => { lines.push(l); });
  try {
    await fn();
  } finally {
    setLogSink(prev);
  }
  return lines;
}

/** Resolve a HandlerResult to a number. */
export async function settle(r: HandlerResult): Promise<number> {
  return typeof r === 'number' ? r : await r;
}

/** A router that runs `chain` for a sub-query and captures its reply, as the server does. */
export function chainRouter(chain: () => Handler): SubQueryRouter {
  return {
    async exchange(req: Request): Promise<Message | undefined> {
      const w = new CaptureWriter();
      await settle(chain().serveDNS(req, w));
      return w.last;
    },
  };
}

/** Sum of the samples of metric `name` in `reg` whose labels include `labels` (0 when there is none). */
export async function metricValue(name: string, labels: Record<string, string> = {}, reg: MetricsRegistry = registry): Promise<number> {
  const m = reg.getSingleMetric(name);
  if (m === undefined) return 0;
  let sum = 0;
  for (const v of (await m.get()).values) {
    if (Object.entries(labels).every(([k, x]) => (v.labels as Record<string, string | number>)[k] === x)) sum += v.value;
  }
  return sum;
}
