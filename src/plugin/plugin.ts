// The contract between the server core and plugins. The core imports only this
// file (and the registry), never an individual plugin.
//
// CoreDNS's rcode contract, kept exactly:
//   a handler that answers writes the reply and returns a "written" rcode
//   (NOERROR, NXDOMAIN, ...); a handler that wants the server to answer with an
//   error returns SERVFAIL, REFUSED, FORMERR or NOTIMP *without* writing, and the
//   server writes that reply. Errors travel as a PluginError (CoreDNS's `err`):
//   thrown, never sent to the client, logged only by the errors plugin.

import type { Registry } from 'prom-client';
// prom-client's registry module alone, not its index (src/types/prom-client-lib.d.ts says why).
import RegistryClass from 'prom-client/lib/registry.js';
import type { Message } from '../wire/types.ts';
import { Rcode } from '../wire/constants.ts';
import type { Dispenser } from '../corefile/dispenser.ts';
import type { ServerBlock } from '../corefile/parser.ts';
import type { Request } from '../core/request.ts';

export type { Request };

/** What serveDNS returns: an rcode, synchronously when it can (no promise on the fast path). */
export type HandlerResult = number | Promise<number>;

export interface ResponseWriter {
  /** Send a reply. Called at most once per query by a well-behaved plugin. */
  writeMsg(reply: Message): void;
  /**
   * Send a reply that is already a complete DNS message in wire form (e.g. a
   * cache hit whose ID and TTLs were patched in place). Writers that need the
   * structure decode it; the final writer sends it as is when it fits.
   */
  writeWire(reply: Uint8Array): void;
}

export interface Handler {
  /** The directive name: used for the `plugin` metrics label and log prefixes. */
  readonly name: string;
  serveDNS(req: Request, w: ResponseWriter): HandlerResult;
}

/** Builds a handler around the rest of the chain (the next handler, or undefined at the end). */
export type PluginFactory = (next: Handler | undefined) => Handler;

/** An error a plugin reports with its rcode (CoreDNS: `return rcode, err`). */
export class PluginError extends Error {
  readonly rcode: number;
  constructor(rcode: number, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PluginError';
    this.rcode = rcode;
  }
}

/** The four rcodes that mean "nothing written yet, server please reply". */
export function isClientErrorRcode(rcode: number): boolean {
  return rcode === Rcode.SERVFAIL || rcode === Rcode.REFUSED || rcode === Rcode.FORMERR || rcode === Rcode.NOTIMP;
}

/** Lifecycle callbacks a setup may register, named as in CoreDNS/caddy. */
export type LifecycleHook = () => void | Promise<void>;

/**
 * Optional capability of a handler: it can tell the ready plugin whether it is
 * ready. The ready plugin asks the handlers of its own block (CoreDNS), and
 * those of every other block whose `readinessScope` is `server`.
 */
export interface Readiness {
  ready(): boolean;
  /** `server`: this handler's readiness counts for /ready of every block (the loop guard). Default `block`. */
  readonly readinessScope?: 'block' | 'server';
}

/** True when `h` implements Readiness. */
export function isReadiness(h: unknown): h is Readiness {
  return typeof (h as Partial<Readiness> | undefined)?.ready === 'function';
}

/** The settings of one server block that setup functions may read or change. */
export interface BlockConfig {
  /** Normalised zones of the block's keys (lower-case, FQDN, CIDR keys expanded), in key order. */
  readonly zones: string[];
  /** The keys as canonical `TRANSPORT://ZONE:PORT` strings, in order. */
  readonly keys: string[];
  /** The block's port (of its first key). */
  readonly port: string;
  /** The transport of the first key: 'dns', 'tls', ... */
  readonly transport: string;
  /** Listen hosts; [''] (wildcard) unless `bind` changed it. */
  listenHosts: string[];
  /** Set by `debug`: no panic recovery on this block's listeners, [DEBUG] logging on. */
  debug: boolean;
  /** Set by `errors { stacktrace }`. */
  stacktrace: boolean;
  /** Set by `root`: the directory relative file paths (file, auto) are resolved against; '' by default. */
  root: string;
  /** Set by `timeouts { read }`: time for a connection's first query (ms); unset: the server's default (3 s). */
  readTimeoutMs?: number;
  /** Set by `timeouts { write }`: time for a reply to leave (ms); unset: the server's default (5 s). */
  writeTimeoutMs?: number;
  /** Set by `timeouts { idle }`: time between queries of a connection (ms); unset: the server's default (10 s). */
  idleTimeoutMs?: number;
  /** Set by `timeouts { maxtcpqueries }`: queries per TCP connection before it is closed; -1 or unset: unlimited. */
  maxTcpQueries?: number;
  /** Set by `tls`: the certificate and client-authentication policy of the block's `tls://` and `https://` listeners. */
  tls?: ServerTlsConfig;
  /** Set by `https { max_connections }`: concurrent connections of the block's DoH listener (0: unlimited). */
  maxHttpsConnections?: number;
  /** Set by `https { max_streams }`: concurrent HTTP/2 streams per DoH connection (0: the HTTP/2 default). */
  maxHttpsStreams?: number;
  /** Set by `grpc_server { max_connections }`: concurrent connections of the gRPC listener (0: unlimited). */
  maxGrpcConnections?: number;
  /** Set by `grpc_server { max_streams }`: concurrent streams per gRPC connection (0: unlimited). */
  maxGrpcStreams?: number;
  /** Names of the plugins of this block in chain order (filled after setup). */
  readonly pluginNames: string[];
  /** The block's handlers in chain order (filled after setup; read them in startup hooks). */
  readonly handlers: Handler[];
  /** The file the block came from, for diagnostics. */
  readonly file: string;
  /** The line of the block's first key. */
  readonly line: number;
  /** The name of the block's view (CoreDNS's Config.ViewName), '' without one; set through `addFilter`. */
  readonly viewName: string;
  /**
   * Make the block a view (CoreDNS's dnsserver.Viewer): of the blocks sharing a zone and port, a query goes to
   * the first, in Corefile order, whose filters all pass. Blocks with filters may share zone and port with
   * others. Throws `multiple views defined in server block` when the block already has another view name.
   */
  addFilter(viewName: string, filter: RouteFilter): void;
  /**
   * Register the block's metadata collector (CoreDNS's MetadataCollector; the first registered wins): the
   * server calls it at routing time, before the block's filters and chain, for every query it considers
   * for this block. It starts the request's metadata (`req.beginMetadata()`) and asks the providers.
   */
  setMetadataCollector(collect: MetadataCollector): void;
  /**
   * Install a write discipline on the UDP sockets this block listens on (CoreDNS's Config.UDPDecorateWriterFunc,
   * what the *shed* plugin does; of the blocks sharing a listen address, the last that sets one wins). Each UDP
   * socket calls `factory` once per configuration, on its first datagram, and from then on hands every reply of
   * that socket to the writer it returned instead of sending it itself. Without one, replies go straight to the socket.
   */
  setUdpWriter(factory: UdpWriterFactory): void;
  /**
   * PROXY protocol on this block's plain-DNS listeners (CoreDNS's Config.ProxyProtoConnPolicy, what *proxyproto*
   * sets): of the blocks sharing a listen address, the last that sets one wins. Without one, nothing is parsed.
   */
  setProxyProtocol(p: ProxyProtocol): void;
  /** Set by *multisocket*: how many SO_REUSEPORT sockets each of the block's listen addresses opens (unset: 1). */
  numSockets?: number;
  /**
   * Let requests with `opcode` (beyond QUERY and NOTIFY) reach this block's chain (CoreDNS's Config.AllowOpcode,
   * what *dynupdate* does for UPDATE). A listen address with such a block accepts the opcode in its header check
   * (one question required, any section counts); a block of that address that did not allow it answers NOTIMP.
   */
  allowOpcode(opcode: number): void;
}

/** A client as the PROXY protocol header names it (in: the socket's peer; out: the client the server sees). */
export interface ProxiedPeer {
  address: string;
  port: number;
  /** The transport the request reports (`udp` for a datagram header over TCP, as CoreDNS's Request.Proto says). */
  proto: 'udp' | 'tcp';
  /**
   * The header's TLV vector in hex when the policy captures it (proxyproto's `tlv_metadata`), else undefined: the
   * server hands it to the request as its `proxyproto/tlv` value (`Request.value`).
   */
  tlv: string | undefined;
}

/**
 * PROXY protocol (v1, v2) on a listen address (set through `BlockConfig.setProxyProtocol`). The listeners call it
 * only where it is set, so an address without it pays nothing.
 */
export interface ProxyProtocol {
  /**
   * One UDP datagram from `peer`: -1 drops it (logged by the implementation), else the offset of the DNS message in
   * `wire` (after a header); `peer` then names the client the request sees.
   */
  datagram(wire: Buffer, peer: ProxiedPeer): number;
  /**
   * The first bytes of a TCP connection from `peer` (all received so far): -2 when more are needed to decide, -1 when
   * the connection must close, else the length of the header to strip (0: none); `peer` then names the client.
   */
  stream(head: Buffer, peer: ProxiedPeer): number;
}

/** The part of a UDP socket a write discipline sends through (node:dgram's `Socket.send`). */
export interface UdpSocket {
  send(msg: Uint8Array, port: number, address: string, callback?: (error: Error | null, bytes: number) => void): void;
}

/** What a UDP listener hands its replies to when a write discipline is installed. */
export interface UdpWriter {
  /** Send (or queue, or drop) one reply to `address`:`port`; never throws. */
  send(msg: Uint8Array, port: number, address: string): void;
  /** Replies accepted and not yet handed to the socket (a closing listener waits for them, within its grace). */
  pending(): number;
}

/**
 * Makes the writer of one UDP socket: `server` is the listen address's server name (`dns://:53`),
 * `localAddress`/`localPort` the socket's (what `Request.localAddress`/`localPort` say for its queries).
 */
export type UdpWriterFactory = (socket: UdpSocket, server: string, localAddress: string, localPort: number) => UdpWriter;

/** Go's tls.ClientAuthType, by the `tls { client_auth }` names. */
export type ClientAuth = 'nocert' | 'request' | 'require' | 'verify_if_given' | 'require_and_verify';

/** A server certificate and what the server asks of clients (CoreDNS's Config.TLSConfig); TLS 1.2 at least. */
export interface ServerTlsConfig {
  /** PEM certificate chain. */
  readonly cert: Buffer;
  /** PEM private key. */
  readonly key: Buffer;
  /** PEM CAs that verify client certificates; undefined: the default roots. */
  readonly ca: Buffer | undefined;
  readonly clientAuth: ClientAuth;
  /** `keylog FILE`: receives each TLS secret line (NSS key log format). */
  readonly keyLog: ((line: Buffer) => void) | undefined;
}

/** A routing filter of a view: true when the block may serve the request. */
export type RouteFilter = (req: Request) => boolean;

/** What the metadata plugin gives the server to run before a block's filters and chain. */
export type MetadataCollector = (req: Request) => void;

/** Log lines as CoreDNS prints them: `[LEVEL] message`, to the server's log sink. */
export interface ServerLogger {
  /** Printed only while some block of the server has `debug`. */
  debug(msg: string): void;
  info(msg: string): void;
  warning(msg: string): void;
  error(msg: string): void;
  /**
   * Logs `[FATAL] msg`, then the server's fatal handler runs: the CLI exits with
   * status 1 as CoreDNS does; an embedding application decides (by default the
   * server stops and the host process goes on). Code after a fatal() must not
   * assume the process is gone: return.
   */
  fatal(msg: string): void;
  /**
   * An [INFO] line; with -log-format json a record that also carries these typed
   * fields (CoreDNS's log plugin). Field values: strings, numbers, booleans, null.
   */
  infoAttrs?(msg: string, attrs: Record<string, string | number | boolean | null>): void;
  /** A line as Go's standard logger prints it (caddy's own lines: no level added); JSON records with -log-format json. */
  std?(line: string): void;
  /** True while [DEBUG] lines are printed. */
  readonly debugEnabled: boolean;
  /** True with -log-format json (or an embedder's `log.format: 'json'`). */
  readonly json?: boolean;
  /** The server's logger for lines of plugin `name` (`plugin/<name>: `, or a `plugin` field in JSON). */
  plugin?(name: string): ServerLogger;
}

/** A ServerLogger whose lines carry the `plugin/<name>: ` prefix. */
export type PluginLogger = ServerLogger;

/**
 * Diagnostics channels (node:diagnostics_channel) on which the server core
 * publishes what happens outside any plugin; publishing costs nothing without
 * subscribers. Messages carry the server's identity (`lineage`, stable across
 * reloads) so a subscriber can keep to its own server when several run in one process.
 */
export const ServeChannels = {
  /** A reply the server wrote before or instead of any plugin (CoreDNS's zone label `dropped`): DroppedEvent. */
  dropped: 'nodens:serve:dropped',
  /** An exception recovered from a plugin chain ("Recovered from panic"): PanicEvent. */
  panic: 'nodens:serve:panic',
  /** A DNS-over-HTTPS reply and its HTTP status (CoreDNS's coredns_dns_https_responses_total): HttpsResponseEvent. */
  https: 'nodens:serve:https',
} as const;

export interface HttpsResponseEvent {
  readonly lineage: Lineage;
  /** The listen address, e.g. `https://:443`. */
  readonly server: string;
  readonly status: number;
}

export interface DroppedEvent {
  readonly lineage: Lineage;
  readonly req: Request;
  readonly rcode: number;
  readonly replySize: number;
}

export interface PanicEvent {
  readonly lineage: Lineage;
  /** The listener, e.g. `dns://:53`. */
  readonly server: string;
  readonly error: unknown;
}

/**
 * One running server across its reloads (a Runtime): what must outlive a
 * reload lives in its store, keyed by a name the plugin owns (`<plugin>/...`).
 */
export interface Lineage {
  store<T>(key: string, create: () => T): T;
}

/** How the reload plugin re-reads the Corefile and swaps configurations. */
export interface ReloadControl {
  /** Read the Corefile again through the loader used at start (-conf, ./Corefile or the default). */
  readCorefile(): { contents: string; file: string };
  /** Replace the running configuration; resolves to the error when the old one had to stay. */
  reload(contents: string, file: string): Promise<Error | undefined>;
}

/** Services shared by all blocks of one running configuration (one "instance"). */
/** A Prometheus registry (prom-client's): each server counts in its own. */
export type MetricsRegistry = Registry;

/**
 * The process's registry: the nodens command's server (which -workers sums across processes), and
 * code that runs outside any server. An embedded server gets a registry of its own.
 */
export const processMetricsRegistry: MetricsRegistry = new RegistryClass();

export interface InstanceServices {
  /** A value shared between setups of the same instance (gone with the next reload), created on first use. */
  shared<T>(key: string, create: () => T): T;
  /** The server this instance belongs to; its store outlives reloads. */
  readonly lineage: Lineage;
  /** The Corefile's path as given (for messages), e.g. `Corefile`. */
  readonly corefilePath: string;
  /** The parsed server blocks (imports expanded, env substituted): what the reload hash covers. */
  readonly serverBlocks: readonly ServerBlock[];
  /** Every block of this instance, in Corefile order. */
  blockConfigs(): BlockConfig[];
  /** Present when the configuration can be reloaded (always, for the CLI). */
  readonly reloadControl: ReloadControl | undefined;
  /** The server's logger without a plugin prefix (the log plugin's lines, CoreDNS's unprefixed messages). */
  readonly log: ServerLogger;
  /** The server's metrics registry (the same across reloads): plugins define their metrics in it. */
  readonly metrics: MetricsRegistry;
  /**
   * Declare that a plugin handles EDNS0 option `code` (CoreDNS's edns.SetSupportedOption; rewrite's
   * `edns0 local` does): the server then copies it from a query into a reply that has no OPT of its own.
   * For the life of the server (reloads keep it), as CoreDNS keeps it for the life of its process.
   */
  supportEdnsOption(code: number): void;
  /** The EDNS0 option codes declared so far with supportEdnsOption (live). */
  readonly ednsSupported: ReadonlySet<number>;
  /** The environment `{$VAR}` placeholders were read from (for a plugin that parses Corefiles itself). */
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** What a plugin's setup receives, once per server block in which the directive appears. */
export interface SetupContext {
  /** Tokens of every occurrence of this directive in the block, in order. */
  readonly dispenser: Dispenser;
  readonly config: BlockConfig;
  readonly instance: InstanceServices;
  readonly log: PluginLogger;
  /** Add a handler to this block's chain (at this directive's position). */
  addPlugin(factory: PluginFactory): void;
  /** Runs before the DNS sockets open (CoreDNS OnStartup). */
  onStartup(fn: LifecycleHook): void;
  /** Runs on reload and on shutdown of this instance (CoreDNS OnShutdown). */
  onShutdown(fn: LifecycleHook): void;
  /** Runs only when the process is exiting (CoreDNS OnFinalShutdown). */
  onFinalShutdown(fn: LifecycleHook): void;
  /** Runs on the old instance when a reload starts (CoreDNS OnRestart). */
  onRestart(fn: LifecycleHook): void;
  /** Runs on the old instance when a reload failed (CoreDNS OnRestartFailed). */
  onRestartFailed(fn: LifecycleHook): void;
  /** Runs once the instance serves: after the first start, and after each successful reload. */
  onInstanceStartup(fn: LifecycleHook): void;
}

/**
 * A plugin: its directive name and its setup. Every built-in setup has one
 * shape, as in CoreDNS: `parse(c)` reads the directive's tokens into options
 * (throwing `d.err(...)` with file:line), then setup adds the handler and
 * registers its lifecycle hooks.
 */
export interface PluginDefinition {
  /** The directive name as written in the Corefile. */
  readonly name: string;
  /** Parse the directive's tokens and register handlers/hooks. Throw to abort startup. */
  setup(c: SetupContext): void | Promise<void>;
}

const BARE = Symbol('nodens.bareSetupError');

/**
 * Marks an error a setup throws as one CoreDNS's setup returns without `plugin.Error` (a caddy Controller's Errf or
 * ArgErr as it is, e.g. proxyproto's unknown option, or any error of the caddy-level `on` plugin): the server
 * prints it without the `plugin/<name>: ` prefix.
 */
export function bareSetupError<E extends Error>(e: E): E {
  (e as unknown as Record<symbol, boolean>)[BARE] = true;
  return e;
}

/** True for an error marked by bareSetupError. */
export function isBareSetupError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as Record<symbol, unknown>)[BARE] === true;
}
