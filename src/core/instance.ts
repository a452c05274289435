// An instance is one running configuration: the Corefile parsed into server
// blocks, every plugin set up (directive by directive, in plugin.cfg order),
// the chains built, and the blocks grouped into listen addresses. A reload
// builds a new instance and hands the listeners over to it.

import type {
  BlockConfig, Handler, InstanceServices, LifecycleHook, Lineage, MetadataCollector, PluginFactory, ReloadControl,
  ProxyProtocol, RouteFilter, ServerTlsConfig, SetupContext, UdpWriterFactory,
} from '../plugin/plugin.ts';
import { parseCorefile, type ServerBlock } from '../corefile/parser.ts';
import { parseKey, zoneAddrString, type ZoneAddr } from '../corefile/address.ts';
import { Dispenser } from '../corefile/dispenser.ts';
import type { Token } from '../corefile/token.ts';
import { isDomainName } from '../wire/name.ts';
import type { PluginRegistry } from './registry.ts';
import { DnsListener, type ServerListener } from './listener.ts';
import type { DohListener, HttpsListenerOptions } from './doh.ts';
import type { GrpcListener, GrpcListenerOptions } from './grpc.ts';
import {
  DEFAULT_GRPC_MAX_CONNECTIONS, DEFAULT_GRPC_MAX_STREAMS, DEFAULT_HTTPS_MAX_CONNECTIONS, DEFAULT_HTTPS_MAX_STREAMS, tlsConflict,
} from './tls.ts';
import { subQueryRouter, type ConnectionLimits, type RoutedBlock, type ServeTable } from './serve.ts';
import { Logger } from './log.ts';
import { isBareSetupError, processMetricsRegistry, type MetricsRegistry } from '../plugin/plugin.ts';
import { defaultCorefile } from './loader.ts';

export interface InstanceOptions {
  /** Corefile contents. */
  corefile: string;
  /** Path the contents came from, as printed in errors (`Corefile`, the -conf value, `/dev/stdin`). */
  file: string;
  /** -dns.port: the port of keys without one. */
  defaultPort: string;
  registry: PluginRegistry;
  env?: Record<string, string | undefined>;
  reloadControl?: ReloadControl;
  /** The server's logger (default: a new one on the default sink). */
  logger?: Logger;
  /** The server this instance belongs to (default: a lineage of its own). */
  lineage?: Lineage;
  /** The server's metrics registry (default: the process's). */
  metrics?: MetricsRegistry;
  /**
   * Called before each directive's setup in each block, with where the directive is written
   * (`nodens validate` places the setup's warnings with it).
   */
  onSetup?: (directive: string, file: string, line: number) => void;
}

/** The store of one server across its reloads. */
export class LineageStore implements Lineage {
  private readonly values = new Map<string, unknown>();
  store<T>(key: string, create: () => T): T {
    if (!this.values.has(key)) this.values.set(key, create());
    return this.values.get(key) as T;
  }
}

/** Thrown for configuration problems; the message is what CoreDNS prints. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

class Block implements BlockConfig {
  readonly zones: string[];
  readonly keys: string[];
  readonly port: string;
  readonly transport: string;
  listenHosts: string[] = [''];
  debug = false;
  stacktrace = false;
  root = '';
  readTimeoutMs?: number;
  writeTimeoutMs?: number;
  idleTimeoutMs?: number;
  maxTcpQueries?: number;
  tls?: ServerTlsConfig;
  maxHttpsConnections?: number;
  maxHttpsStreams?: number;
  maxGrpcConnections?: number;
  maxGrpcStreams?: number;
  readonly pluginNames: string[] = [];
  readonly handlers: Handler[] = [];
  readonly file: string;
  readonly line: number;
  readonly addrs: ZoneAddr[];
  readonly tokens: Map<string, Token[]>;
  readonly factories: PluginFactory[] = [];
  chain: Handler | undefined;
  viewName = '';
  readonly filters: RouteFilter[] = [];
  collector: MetadataCollector | undefined;
  udpWriter: UdpWriterFactory | undefined;
  proxyProtocol: ProxyProtocol | undefined;
  numSockets?: number;
  /** Opcodes beyond QUERY and NOTIFY this block's chain accepts (allowOpcode); undefined: none. */
  opcodes: Set<number> | undefined;

  constructor(addrs: ZoneAddr[], block: ServerBlock, file: string) {
    this.addrs = addrs;
    this.zones = addrs.map((a) => a.zone);
    this.keys = addrs.map(zoneAddrString);
    this.port = addrs[0]!.port;
    this.transport = addrs[0]!.transport;
    this.tokens = block.tokens;
    this.file = block.keys[0]?.file ?? file;
    this.line = block.keys[0]?.line ?? 0;
  }

  addFilter(viewName: string, filter: RouteFilter): void {
    if (this.viewName !== '' && this.viewName !== viewName) throw new Error('multiple views defined in server block');
    this.viewName = viewName;
    this.filters.push(filter);
  }

  setMetadataCollector(collect: MetadataCollector): void {
    this.collector ??= collect;
  }

  setUdpWriter(factory: UdpWriterFactory): void {
    this.udpWriter = factory;
  }

  setProxyProtocol(p: ProxyProtocol): void {
    this.proxyProtocol = p;
  }

  allowOpcode(opcode: number): void {
    (this.opcodes ??= new Set()).add(opcode);
  }
}

export interface Hooks {
  instanceStartup: LifecycleHook[];
  startup: LifecycleHook[];
  shutdown: LifecycleHook[];
  finalShutdown: LifecycleHook[];
  restart: LifecycleHook[];
  restartFailed: LifecycleHook[];
}

export class Instance implements InstanceServices {
  readonly corefilePath: string;
  readonly serverBlocks: ServerBlock[];
  reloadControl: ReloadControl | undefined;
  readonly log: Logger;
  readonly lineage: Lineage;
  readonly metrics: MetricsRegistry;
  readonly env: Readonly<Record<string, string | undefined>>;
  private readonly blocks: Block[] = [];
  private readonly tables = new Map<string, ServeTable>();
  private readonly hostsOf = new Map<string, { host: string; port: string; transport: string }>();
  /** The listeners of each address: one, or *multisocket*'s count (each its own SO_REUSEPORT sockets). */
  private readonly listenersByAddr = new Map<string, ServerListener[]>();
  /** *multisocket*: sockets per address, from the first block on the address that sets it (CoreDNS's group[0]). */
  private readonly socketsOf = new Map<string, number>();
  /** Per `tls://`, `https://` and `grpc://` address: the certificate its blocks share, and the DoH or gRPC limits. */
  private readonly secureOf = new Map<string, HttpsListenerOptions | GrpcListenerOptions>();
  private readonly hooks: Hooks = { instanceStartup: [], startup: [], shutdown: [], finalShutdown: [], restart: [], restartFailed: [] };
  private readonly sharedValues = new Map<string, unknown>();
  /** Some block has `debug`. */
  private anyDebug = false;

  private constructor(file: string, blocks: ServerBlock[], opts: InstanceOptions, env: Record<string, string | undefined>) {
    this.corefilePath = file;
    this.serverBlocks = blocks;
    this.reloadControl = opts.reloadControl;
    this.log = opts.logger ?? new Logger();
    this.metrics = opts.metrics ?? processMetricsRegistry;
    this.lineage = opts.lineage ?? new LineageStore();
    this.env = env;
  }

  /** Parse and set up, without opening sockets or running startup hooks. */
  static async create(opts: InstanceOptions): Promise<Instance> {
    const { registry } = opts;
    const env = opts.env ?? process.env;
    const logger = opts.logger ?? new Logger();
    const parseOpts = {
      isDirective: (name: string) => registry.has(name),
      env,
      warn: (msg: string) => { logger.std('[WARNING] ' + msg); },
    };
    let file = opts.file;
    let serverBlocks = parseCorefile(opts.corefile, file, parseOpts);
    if (serverBlocks.length === 0) {
      // CoreDNS runs its default when a Corefile yields no server block at all.
      const d = defaultCorefile(opts.defaultPort);
      file = d.file;
      serverBlocks = parseCorefile(d.contents, d.file, parseOpts);
    }
    const inst = new Instance(file, serverBlocks, { ...opts, logger }, env);
    for (const sb of serverBlocks) {
      const addrs: ZoneAddr[] = [];
      for (const key of sb.keys) addrs.push(...parseKey(key.text, opts.defaultPort));
      if (addrs.length === 0) continue;
      inst.blocks.push(new Block(addrs, sb, file));
    }
    await inst.setupPlugins(registry, opts.onSetup);
    inst.buildTables();
    return inst;
  }

  private async setupPlugins(registry: PluginRegistry, onSetup: InstanceOptions['onSetup']): Promise<void> {
    for (const name of registry.directives()) {
      const def = registry.get(name)!;
      for (const block of this.blocks) {
        const tokens = block.tokens.get(name);
        if (tokens === undefined) continue;
        if (onSetup !== undefined && tokens[0] !== undefined) onSetup(name, tokens[0].file, tokens[0].line);
        const ctx = this.setupContext(name, block, new Dispenser(tokens));
        try {
          await def.setup(ctx);
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          const prefix = `plugin/${name}: `;
          // An error a CoreDNS setup returns without plugin.Error (bareSetupError) prints as it is.
          throw new StartupError(msg.startsWith(prefix) || isBareSetupError(e) ? msg : prefix + msg);
        }
      }
    }
    for (const block of this.blocks) {
      let next: Handler | undefined;
      for (let i = block.factories.length - 1; i >= 0; i--) next = block.factories[i]!(next);
      block.chain = next;
      for (let h = block.chain; h !== undefined; h = nextOf(h)) {
        block.handlers.push(h);
        block.pluginNames.push(h.name);
      }
    }
  }

  private setupContext(name: string, block: Block, dispenser: Dispenser): SetupContext {
    const hooks = this.hooks;
    return {
      dispenser,
      config: block,
      instance: this,
      log: this.log.plugin(name),
      addPlugin: (f) => { block.factories.push(tracked(f)); },
      onStartup: (fn) => { hooks.startup.push(fn); },
      onShutdown: (fn) => { hooks.shutdown.push(fn); },
      onFinalShutdown: (fn) => { hooks.finalShutdown.push(fn); },
      onRestart: (fn) => { hooks.restart.push(fn); },
      onRestartFailed: (fn) => { hooks.restartFailed.push(fn); },
      onInstanceStartup: (fn) => { hooks.instanceStartup.push(fn); },
    };
  }

  /** Group every (zone, listen host) of every block by listen address, with CoreDNS's overlap rules. */
  private buildTables(): void {
    const registered = new Map<string, string>(); // full zoneAddr → its string
    const unbound = new Map<string, string>();    // zoneAddr without address → first registered
    const zonesByAddr = new Map<string, Map<string, Block[]>>();
    const flags = new Map<string, { chaos: boolean; debug: boolean; stacktrace: boolean; filtered: boolean }>();
    const connByAddr = new Map<string, ConnectionLimits>();
    const udpWriterByAddr = new Map<string, UdpWriterFactory>();
    const proxyByAddr = new Map<string, ProxyProtocol>();
    const opcodesByAddr = new Map<string, Set<number>>();
    for (const block of this.blocks) {
      for (const za of block.addrs) {
        if (za.transport !== 'dns' && za.transport !== 'tls' && za.transport !== 'https' && za.transport !== 'grpc') {
          // DoQ and DoH3 servers are not built: Node.js 24 has no QUIC (see src/plugin/tls/README.md).
          throw new StartupError(`cannot serve ${zoneAddrString(za)} - transport ${za.transport} is not supported by nodens`);
        }
        for (const host of block.listenHosts) {
          const akey = zoneAddrString({ ...za, address: host });
          const ukey = zoneAddrString(za);
          // A block with a view may share its zone and port with others: checked for overlap, never registered.
          const filtered = block.filters.length > 0;
          const exists = registered.has(akey);
          if (exists && !filtered) throw new StartupError(`cannot serve ${akey} - it is already defined`);
          const already = exists ? undefined : unbound.get(ukey);
          if (already !== undefined) {
            if (host === '') throw new StartupError(`cannot serve ${akey} - zone overlap listener capacity with ${already}`);
            if (registered.has(ukey)) throw new StartupError(`cannot serve ${akey} - zone overlap listener capacity with ${ukey}`);
          }
          if (!filtered) {
            registered.set(akey, akey);
            if (!unbound.has(ukey)) unbound.set(ukey, akey);
          }

          const addr = listenAddress(za.transport, host, za.port);
          let zones = zonesByAddr.get(addr);
          if (zones === undefined) {
            zones = new Map();
            zonesByAddr.set(addr, zones);
            this.hostsOf.set(addr, { host, port: za.port, transport: za.transport });
            // multisocket: CoreDNS's makeServersForGroup takes the count of the group's first config.
            this.socketsOf.set(addr, block.numSockets ?? 1);
            flags.set(addr, { chaos: false, debug: false, stacktrace: false, filtered: false });
          }
          const list = zones.get(za.zone);
          if (list === undefined) zones.set(za.zone, [block]);
          else list.push(block);
          const f = flags.get(addr)!;
          if (block.filters.length > 0 || block.collector !== undefined || list !== undefined) f.filtered = true;
          if (block.tokens.has('chaos') || block.tokens.has('forward') || block.tokens.has('proxy')) f.chaos = true;
          if (block.debug) f.debug = true;
          if (block.stacktrace) f.stacktrace = true;
          // timeouts: as CoreDNS's NewServer, the last block on an address that sets a value wins.
          let c = connByAddr.get(addr);
          if (c === undefined) connByAddr.set(addr, c = {});
          if (block.readTimeoutMs !== undefined) c.readTimeoutMs = block.readTimeoutMs;
          if (block.writeTimeoutMs !== undefined) c.writeTimeoutMs = block.writeTimeoutMs;
          if (block.idleTimeoutMs !== undefined) c.idleTimeoutMs = block.idleTimeoutMs;
          if (block.maxTcpQueries !== undefined) c.maxTcpQueries = block.maxTcpQueries;
          // A UDP write discipline (shed): as CoreDNS's NewServer, the last block on the address with one wins.
          if (block.udpWriter !== undefined) udpWriterByAddr.set(addr, block.udpWriter);
          // proxyproto: as CoreDNS's NewServer, the last block on the address with a policy wins.
          if (block.proxyProtocol !== undefined) proxyByAddr.set(addr, block.proxyProtocol);
          // As CoreDNS's NewServer: the opcodes any block of the address allows pass its header check.
          if (block.opcodes !== undefined) {
            let ops = opcodesByAddr.get(addr);
            if (ops === undefined) opcodesByAddr.set(addr, ops = new Set());
            for (const op of block.opcodes) ops.add(op);
          }
        }
      }
    }
    this.checkSecure(zonesByAddr);
    let anyDebug = false;
    for (const [addr, blocksOf] of zonesByAddr) {
      const f = flags.get(addr)!;
      anyDebug ||= f.debug;
      const zones = new Map<string, RoutedBlock>();
      for (const [zone, list] of blocksOf) {
        let next: RoutedBlock | undefined;
        for (let i = list.length - 1; i >= 0; i--) {
          const b = list[i]!;
          next = { zone, chain: b.chain, filters: b.filters, view: b.viewName, collect: b.collector, opcodes: b.opcodes, next };
        }
        zones.set(zone, next!);
      }
      const zoneLengths = new Set([...zones.keys()].map((z) => z.length));
      const table: ServeTable = {
        name: addr, zones, zoneLengths, filtered: f.filtered, classChaos: f.chaos, debug: f.debug, stacktrace: f.stacktrace,
        log: this.log, lineage: this.lineage, ednsSupported: this.ednsSupported, ...connByAddr.get(addr),
        udpWriter: udpWriterByAddr.get(addr), proxy: proxyByAddr.get(addr), opcodes: opcodesByAddr.get(addr),
      };
      table.router = subQueryRouter(table);
      this.tables.set(addr, table);
    }
    this.anyDebug = anyDebug;
  }

  /**
   * CoreDNS's sharedTLSConfig (and NewServerHTTPS's limits): the blocks of one `tls://` or `https://` address
   * are served by one TLS listener, so their `tls` settings must agree; the DoH limits come from the blocks'
   * `https` settings (max_streams must agree, max_connections is the first block's).
   */
  private checkSecure(zonesByAddr: Map<string, Map<string, Block[]>>): void {
    for (const [addr, zones] of zonesByAddr) {
      const { transport } = this.hostsOf.get(addr)!;
      if (transport === 'dns') continue;
      // The group in CoreDNS's order: blocks in Corefile order, each with its zones.
      const group: Array<{ zone: string; block: Block }> = [];
      for (const block of this.blocks) {
        for (const za of block.addrs) {
          const list = zones.get(za.zone);
          if (list !== undefined && list.includes(block) && !group.some((g) => g.block === block && g.zone === za.zone)) group.push({ zone: za.zone, block });
        }
      }
      const first = group[0]!;
      for (const g of group.slice(1)) {
        const why = tlsConflict(first.block.tls, g.block.tls);
        if (why !== undefined) {
          throw new StartupError(`conflicting TLS configuration for shared listener ${addr} between zones ${JSON.stringify(first.zone)} and ${JSON.stringify(g.zone)}: ${why}`);
        }
      }
      let streams: number | undefined;
      if (transport === 'https') {
        for (const g of group) {
          const v = g.block.maxHttpsStreams;
          if (v === undefined) continue;
          if (streams !== undefined && streams !== v) {
            throw new StartupError(`conflicting max_streams values for shared HTTPS listener ${addr}: ${streams} and ${v}`);
          }
          streams = v;
        }
      }
      if (transport === 'grpc') {
        // NewServergRPC: both limits are the first block's.
        this.secureOf.set(addr, {
          tls: first.block.tls,
          maxConnections: first.block.maxGrpcConnections ?? DEFAULT_GRPC_MAX_CONNECTIONS,
          maxStreams: first.block.maxGrpcStreams ?? DEFAULT_GRPC_MAX_STREAMS,
        });
        continue;
      }
      this.secureOf.set(addr, {
        tls: first.block.tls,
        maxConnections: first.block.maxHttpsConnections ?? DEFAULT_HTTPS_MAX_CONNECTIONS,
        maxStreams: streams ?? DEFAULT_HTTPS_MAX_STREAMS,
      });
    }
  }

  /** Print [DEBUG] lines while this instance is in force (some block has `debug`). */
  applyDebug(): void { this.log.debugEnabled = this.anyDebug; }

  // ---- InstanceServices ----
  get ednsSupported(): ReadonlySet<number> { return this.lineage.store('edns/supported', () => new Set<number>()); }
  supportEdnsOption(code: number): void { (this.ednsSupported as Set<number>).add(code); }

  shared<T>(key: string, create: () => T): T {
    if (!this.sharedValues.has(key)) this.sharedValues.set(key, create());
    return this.sharedValues.get(key) as T;
  }

  /**
   * Run startup hooks, then open the sockets. Listeners of `previous` on the same
   * address are taken over (their table swapped), so a reload loses nothing.
   */
  async start(previous?: Instance): Promise<void> {
    this.applyDebug();
    for (const fn of this.hooks.startup) await fn();
    const opened: ServerListener[] = [];
    try {
      for (const [addr, table] of this.tables) {
        const secure = this.secureOf.get(addr);
        const inherited = previous?.listenersByAddr.get(addr);
        const count = this.socketsOf.get(addr) ?? 1;
        // A listener is a TLS server or not: one that changes kind is replaced (SO_REUSEPORT lets both bind), and
        // so is a group whose multisocket count changed.
        if (inherited !== undefined && inherited.length === count && (inherited[0]!.tlsConfig === undefined) === (secure?.tls === undefined)) {
          this.listenersByAddr.set(addr, inherited);
          continue;
        }
        const { host, port, transport } = this.hostsOf.get(addr)!;
        const group: ServerListener[] = [];
        let bound = Number(port);
        for (let i = 0; i < count; i++) {
          const l = transport === 'https'
            ? new (await dohModule()).DohListener(host, bound, table, secure!)
            : transport === 'grpc'
              ? new (await grpcModule()).GrpcListener(host, bound, table, secure!)
              : new DnsListener(host, bound, table, transport === 'tls' ? { transport: 'tls', tls: secure?.tls } : {});
          await l.listen();
          opened.push(l);
          group.push(l);
          // Port 0: the other sockets of the group share the port the first one got.
          bound = l.port;
        }
        this.listenersByAddr.set(addr, group);
      }
    } catch (e) {
      for (const l of opened) await l.close(0);
      throw e;
    }
    // Every socket is ready: switch all inherited listeners to the new tables (and certificates) at once.
    for (const [addr, group] of this.listenersByAddr) {
      const table = this.tables.get(addr)!;
      const secure = this.secureOf.get(addr);
      for (const l of group) {
        if (isDohListener(l)) l.reconfigure(table, secure!);
        else if (isGrpcListener(l)) l.reconfigure(table, secure!);
        else if (secure?.tls !== undefined && l instanceof DnsListener) l.reconfigure(table, secure.tls);
        else l.table = table;
      }
    }
  }

  /** Close listeners this instance owns that `next` did not take over (all of them when next is undefined). */
  async closeListeners(next?: Instance): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const [addr, group] of this.listenersByAddr) {
      if (next?.listenersByAddr.get(addr) === group) continue;
      for (const l of group) closing.push(l.close());
    }
    await Promise.all(closing);
  }

  async runHooks(kind: keyof Hooks): Promise<Error[]> {
    const errors: Error[] = [];
    for (const fn of this.hooks[kind]) {
      try { await fn(); } catch (e) { errors.push(e instanceof Error ? e : new Error(String(e))); }
    }
    return errors;
  }

  /** The hooks of one kind registered by the setups, in order (for tests that drive a setup's lifecycle). */
  hookList(kind: keyof Hooks): readonly LifecycleHook[] { return this.hooks[kind]; }

  /** The handler factories block `i` registered, in chain order (for tests that build a chain by hand). */
  factoriesOf(i: number): readonly PluginFactory[] { return this.blocks[i]?.factories ?? []; }

  /** The listeners, with the port each actually bound (useful with port 0). */
  listeners(): ServerListener[] { return [...this.listenersByAddr.values()].flat(); }

  blockConfigs(): BlockConfig[] { return this.blocks; }

  /** CoreDNS's startup banner lines for the zones (not the version lines). */
  bannerLines(): string[] { return this.bannerGroups().flat(); }

  /** The banner lines per server (listen address), as each CoreDNS server prints its own. */
  bannerGroups(): string[][] {
    const groups: string[][] = [];
    for (const [addr, table] of this.tables) {
      const out: string[] = [];
      // multisocket: each of CoreDNS's servers of the address prints its own lines.
      for (let i = 0; i < (this.socketsOf.get(addr) ?? 1); i++) groups.push(out);
      const { host, port, transport } = this.hostsOf.get(addr)!;
      const scheme = transport === 'dns' ? '' : transport + '://';
      for (const zone of [...table.zones.keys()].sort()) {
        if (zone !== '.' && !isReverseZone(zone) && !followsRfc1035(zone)) {
          out.push(`Warning: Domain ${JSON.stringify(zone)} does not follow RFC1035 preferred syntax`);
        }
        out.push(`${scheme}${zone}:${port}${host === '' ? '' : ' on ' + host}`);
      }
    }
    return groups;
  }
}

/** Remember each handler's successor so the chain's plugin names can be listed. */
/**
 * doh.ts (with node:http and node:http2) is loaded when a configuration first has an `https://` server: most
 * configurations have none, and those modules cost a noticeable share of the start.
 */
let loadedDoh: typeof import('./doh.ts') | undefined;
async function dohModule(): Promise<typeof import('./doh.ts')> {
  loadedDoh ??= await import('./doh.ts');
  return loadedDoh;
}
function isDohListener(l: ServerListener): l is DohListener {
  return loadedDoh !== undefined && l instanceof loadedDoh.DohListener;
}

/** grpc.ts (with node:http2) likewise, when a configuration first has a `grpc://` server. */
let loadedGrpc: typeof import('./grpc.ts') | undefined;
async function grpcModule(): Promise<typeof import('./grpc.ts')> {
  loadedGrpc ??= await import('./grpc.ts');
  return loadedGrpc;
}
function isGrpcListener(l: ServerListener): l is GrpcListener {
  return loadedGrpc !== undefined && l instanceof loadedGrpc.GrpcListener;
}

function tracked(f: PluginFactory): PluginFactory {
  return (next) => {
    const h = f(next);
    chainNext.set(h, next);
    return h;
  };
}

const chainNext = new WeakMap<Handler, Handler | undefined>();
function nextOf(h: Handler): Handler | undefined { return chainNext.get(h); }

/** `dns://:53`, `dns://127.0.0.1:53`, `dns://[::1]:53` (Go's TCPAddr.String of host:port). */
export function listenAddress(transport: string, host: string, port: string): string {
  const p = String(Number(port));
  const h = host.includes(':') ? `[${host}]` : host;
  return `${transport}://${h}:${p}`;
}

function isReverseZone(zone: string): boolean {
  return zone.endsWith('.in-addr.arpa.') || zone.endsWith('.ip6.arpa.') || zone === 'in-addr.arpa.' || zone === 'ip6.arpa.';
}

/** RFC 1035 "preferred name syntax": letter first, letters/digits/hyphens, no trailing hyphen. */
function followsRfc1035(zone: string): boolean {
  if (!isDomainName(zone)) return false;
  for (const label of zone.slice(0, -1).split('.')) {
    if (!/^[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?$/.test(label)) return false;
  }
  return true;
}
