import { hostname } from 'node:os';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import type { Dispenser } from '../../corefile/dispenser.ts';
import { compileFormat } from '../pkg/replacer.ts';
import { DEFAULT_TAP_VERSION } from '../pkg/dnstap.ts';
import { Dnstap } from './dnstap.ts';
import { DnstapListener } from './listener.ts';
import { DnstapOutput, QUEUE_SIZE, WRITE_BUFFER_SIZE, type OutputProto } from './io.ts';

/** CoreDNS's upper bounds for the two multiples. */
export const MAX_WRITE_BUFFER = 1024;
export const MAX_QUEUE = 4096;

/** One `dnstap [listen] SOCKET [full] [WRITEBUFFER] [QUEUE] { ... }` line. */
export interface DnstapTap {
  /** `listen`: the receivers connect to the server (else the server connects to the receiver). */
  listen: boolean;
  /** `unix` (a path, `unix://` or none), `tcp` (`tcp://`) or `tls` (`tls://`). */
  proto: OutputProto;
  /** The socket path, or `host:port` as Go's url.Parse gives it for tcp and tls. */
  endpoint: string;
  /** `full`: the wire messages are included. */
  full: boolean;
  /** TCP write buffer multiple, MiB (1..1024, default 1). */
  writeBuffer: number;
  /** Queue multiple, × 10000 messages (1..4096, default 1). */
  queue: number;
  /** `identity` (default: the host name). */
  identity: string;
  /** `version` (default: `CoreDNS-<release>`). */
  version: string;
  /** `extra` format with log placeholders and `{/metadata}`; '' when unset. */
  extra: string;
  /** `skipverify`: TLS certificates are not verified (listen: client certificates are optional). */
  skipVerify: boolean;
  /** listen: `tls CERT KEY [CA]` ('' when unset). */
  certFile: string;
  keyFile: string;
  caFile: string;
}

/** Every `dnstap` line of the block, in order: each is one tap. */
export interface DnstapOptions {
  taps: DnstapTap[];
}

/** Go's strconv.Atoi: the value, or its error text. */
function atoi(s: string): number | string {
  if (!/^[+-]?[0-9]+$/.test(s)) return `strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`;
  const n = Number(s);
  if (!Number.isSafeInteger(n) || n > 9223372036854775807 || n < -9223372036854775808) {
    return `strconv.Atoi: parsing ${JSON.stringify(s)}: value out of range`;
  }
  return n;
}

/** Characters Go's url.Parse refuses in a host (shouldEscape in encodeHost mode, ASCII only). */
function badHostChar(ch: number): boolean {
  if ((ch >= 0x30 && ch <= 0x39) || (ch >= 0x41 && ch <= 0x5a) || (ch >= 0x61 && ch <= 0x7a)) return false;
  if (ch >= 0x80) return false;
  return !'-_.~!$&\'()*+,;=:[]<>"%'.includes(String.fromCharCode(ch));
}

/** Go's `url.Parse(s).Host` for `scheme://authority[/path...]`; undefined where url.Parse fails. */
export function urlHost(s: string): string | undefined {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return undefined;
  }
  let rest = s.slice(s.indexOf('://') + 3);
  const hash = rest.indexOf('#');
  if (hash >= 0) rest = rest.slice(0, hash);
  const q = rest.indexOf('?');
  if (q >= 0) rest = rest.slice(0, q);
  const slash = rest.indexOf('/');
  let auth = slash >= 0 ? rest.slice(0, slash) : rest;
  const at = auth.lastIndexOf('@');
  if (at >= 0) auth = auth.slice(at + 1);
  // Percent escapes must be complete.
  for (let i = 0; i < auth.length; i++) {
    if (auth[i] === '%' && !/^[0-9a-fA-F]{2}$/.test(auth.slice(i + 1, i + 3))) return undefined;
  }
  let port: string;
  if (auth.startsWith('[')) {
    const end = auth.indexOf(']');
    if (end < 0) return undefined;
    port = auth.slice(end + 1);
    if (port !== '' && !port.startsWith(':')) return undefined;
  } else {
    const i = auth.lastIndexOf(':');
    port = i >= 0 ? auth.slice(i) : '';
  }
  if (port !== '' && !/^:[0-9]*$/.test(port)) return undefined;
  for (let i = 0; i < auth.length; i++) if (badHostChar(auth.charCodeAt(i))) return undefined;
  return decodeURIComponentSafe(auth);
}

function decodeURIComponentSafe(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

function parseTap(d: Dispenser, host: string): DnstapTap {
  let args = d.remainingArgs();
  if (args.length === 0) throw d.argErr();
  const listen = args[0] === 'listen';
  if (listen) {
    if (args.length < 2) throw d.errf('dnstap listen requires an endpoint argument');
    args = args.slice(1);
  }
  const endpoint = args[0]!;
  const t: DnstapTap = {
    listen, proto: 'unix', endpoint: '', full: false, writeBuffer: 1, queue: 1,
    identity: host, version: DEFAULT_TAP_VERSION, extra: '', skipVerify: false, certFile: '', keyFile: '', caFile: '',
  };
  if (args.length >= 3) {
    const v = atoi(args[2]!);
    if (typeof v === 'string') throw d.errf(`dnstap: invalid MultipleTcpWriteBuf ${JSON.stringify(args[2])}: ${v}`);
    if (v < 1 || v > MAX_WRITE_BUFFER) throw d.errf(`dnstap: MultipleTcpWriteBuf must be between 1 and ${MAX_WRITE_BUFFER} (MiB units): ${v}`);
    t.writeBuffer = v;
  }
  if (args.length >= 4) {
    const v = atoi(args[3]!);
    if (typeof v === 'string') throw d.errf(`dnstap: invalid MultipleQueue ${JSON.stringify(args[3])}: ${v}`);
    if (v < 1 || v > MAX_QUEUE) throw d.errf(`dnstap: MultipleQueue must be between 1 and ${MAX_QUEUE} (x10k messages): ${v}`);
    t.queue = v;
  }
  if (endpoint.startsWith('tls://') || endpoint.startsWith('tcp://')) {
    const h = urlHost(endpoint);
    if (h === undefined) throw d.argErr();
    t.proto = endpoint.startsWith('tls://') ? 'tls' : 'tcp';
    t.endpoint = h;
  } else {
    t.endpoint = endpoint.startsWith('unix://') ? endpoint.slice(7) : endpoint;
  }
  t.full = args.length >= 2 && args[1] === 'full';
  while (d.nextBlock()) {
    const v = d.val();
    switch (v) {
      case 'skipverify':
        t.skipVerify = true;
        break;
      case 'tls': {
        if (!listen) throw d.errf('tls directive only valid for listeners');
        const a = d.remainingArgs();
        if (a.length < 2) throw d.errf('tls requires cert and key file paths');
        t.certFile = a[0]!;
        t.keyFile = a[1]!;
        if (a.length >= 3) t.caFile = a[2]!;
        break;
      }
      case 'identity':
        if (!d.nextArg()) throw d.argErr();
        t.identity = d.val();
        break;
      case 'version':
        if (!d.nextArg()) throw d.argErr();
        t.version = d.val();
        break;
      case 'extra':
        if (!d.nextArg()) throw d.argErr();
        t.extra = d.val();
        break;
      default:
        throw d.errf(`unknown property '${v}'`);
    }
  }
  return t;
}

/** Reads every `dnstap` line of the block (several are allowed: each is a tap of its own). */
export function parse(c: SetupContext): DnstapOptions {
  const d = c.dispenser;
  const host = hostname();
  const taps: DnstapTap[] = [];
  while (d.next()) taps.push(parseTap(d, host));
  return { taps };
}

export const plugin: PluginDefinition = {
  name: 'dnstap',
  setup(c) {
    const { taps } = parse(c);
    const handlers: Dnstap[] = [];
    for (const t of taps) {
      const out = t.listen
        ? new DnstapListener({
          proto: t.proto, endpoint: t.endpoint, certFile: t.certFile, keyFile: t.keyFile, caFile: t.caFile, skipVerify: t.skipVerify,
        }, c.log)
        : new DnstapOutput({
          proto: t.proto, endpoint: t.endpoint, queueSize: t.queue * QUEUE_SIZE,
          writeBuffer: t.writeBuffer * WRITE_BUFFER_SIZE, skipVerify: t.skipVerify,
        }, c.log);
      handlers.push(new Dnstap(out, t.full, t.identity, t.version, t.extra === '' ? undefined : compileFormat(t.extra)));
      c.onStartup(() => out.start());
      // As CoreDNS: closed when a reload starts (the new configuration may listen on the same socket);
      // nodens also starts it again when that reload fails, and closes it on any shutdown.
      c.onRestart(() => out.close());
      c.onRestartFailed(() => out.start());
      c.onShutdown(() => out.close());
      c.onFinalShutdown(() => out.close());
    }
    for (let i = 0; i < handlers.length; i++) {
      const h = handlers[i]!;
      if (i === handlers.length - 1) {
        c.addPlugin((next) => { h.next = next; return h; });
      } else {
        const nh = handlers[i + 1]!;
        c.addPlugin(() => { h.next = nh; return h; });
      }
    }
  },
};
