// Helpers for plugin unit tests: run a setup against a Corefile snippet, build
// requests by hand, record what a handler writes, capture log lines.
// Not used at run time.

import { parseCorefile } from '../../corefile/parser.ts';
import { Dispenser } from '../../corefile/dispenser.ts';
import { COREDNS_DIRECTIVES } from '../../core/directives.ts';
import { pluginLogger, setLogSink } from '../../core/log.ts';
import { Request, type Transport } from '../../core/request.ts';
import { parseKey, zoneAddrString } from '../../corefile/address.ts';
import type {
  BlockConfig, Handler, HandlerResult, LifecycleHook, PluginDefinition, PluginFactory, ResponseWriter, SetupContext,
} from '../plugin.ts';
import type { Message } from '../../wire/types.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';

export interface SetupResult {
  factories: PluginFactory[];
  config: BlockConfig;
  hooks: { startup: LifecycleHook[]; shutdown: LifecycleHook[]; finalShutdown: LifecycleHook[] };
  /** The handler chain built from the factories, ending in `last` (if given). */
  chain(last?: Handler): Handler;
}

/**
 * Parse `corefile` (one server block), and run `def.setup` on the tokens of its
 * directive the way the core does. Throws the setup's error prefixed with
 * `plugin/<name>: `, like the core.
 */
export async function runSetup(def: PluginDefinition, corefile: string): Promise<SetupResult> {
  const blocks = parseCorefile(corefile, 'Corefile', { isDirective: (n) => COREDNS_DIRECTIVES.includes(n) });
  const sb = blocks[0];
  const addrs = sb.keys.flatMap((k) => parseKey(k.text, '53'));
  const config: BlockConfig = {
    zones: addrs.map((a) => a.zone),
    keys: addrs.map(zoneAddrString),
    port: addrs[0]?.port ?? '53',
    transport: addrs[0]?.transport ?? 'dns',
    listenHosts: [''],
    debug: false,
    stacktrace: false,
    pluginNames: [],
    handlers: [],
    file: 'Corefile',
    line: sb.keys[0]?.line ?? 0,
  };
  const factories: PluginFactory[] = [];
  const hooks = { startup: [] as LifecycleHook[], shutdown: [] as LifecycleHook[], finalShutdown: [] as LifecycleHook[] };
  const tokens = sb.tokens.get(def.name) ?? [];
  const shared = new Map<string, unknown>();
  const ctx: SetupContext = {
    dispenser: new Dispenser(tokens),
    config,
    instance: {
      registerReadiness() { /* not needed */ },
      readinessReporters: () => new Map(),
      shared<T>(key: string, create: () => T): T {
        if (!shared.has(key)) shared.set(key, create());
        return shared.get(key) as T;
      },
      corefilePath: 'Corefile',
      serverBlocks: blocks,
      blockConfigs: () => [config],
      observeServing() { /* no listeners in unit tests */ },
      reloadControl: undefined,
    },
    log: pluginLogger(def.name),
    addPlugin(f) { factories.push(f); },
    onStartup(fn) { hooks.startup.push(fn); },
    onShutdown(fn) { hooks.shutdown.push(fn); },
    onFinalShutdown(fn) { hooks.finalShutdown.push(fn); },
    onRestart() { /* unused */ },
    onRestartFailed() { /* unused */ },
    onInstanceStartup() { /* unused */ },
  };
  try {
    await def.setup(ctx);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const prefix = `plugin/${def.name}: `;
    throw new Error(msg.startsWith(prefix) ? msg : prefix + msg);
  }
  return {
    factories,
    config,
    hooks,
    chain(last?: Handler): Handler {
      let next: Handler | undefined = last;
      for (let i = factories.length - 1; i >= 0; i--) next = factories[i](next);
      if (next === undefined) throw new Error('no handler');
      return next;
    },
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
