// The fuzz targets: the codec, the Corefile parser, and every built-in plugin's
// setup (its `parse`), run through the server core without sockets.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeMessage, decodeQuestionFast, encodeMessage, WireError } from '../../src/wire/index.ts';
import { parseCorefile } from '../../src/corefile/parser.ts';
import { CorefileError } from '../../src/corefile/errors.ts';
import { COREDNS_DIRECTIVES } from '../../src/core/directives.ts';
import { builtinPlugins } from '../../src/plugin/index.ts';
import { runSetup } from '../../src/plugin/pkg/testing.ts';
import { setLogSink } from '../../src/core/log.ts';
import type { PluginDefinition } from '../../src/plugin/plugin.ts';
import { HpackBlock, HpackDecoder, HpackError } from '../../src/core/hpack.ts';
import type { Target } from './engine.ts';

/**
 * Whether `e` is a programming error rather than a refusal of bad input: a
 * ReferenceError, a TypeError from touching undefined/null or calling a
 * non-function, a runaway recursion or allocation, or a throw of a non-Error.
 * Plugins may pass on a TypeError or SyntaxError of a library parser (an invalid
 * URL, a bad regular expression) as the reason a Corefile is refused.
 */
export function isBug(e: unknown): boolean {
  if (!(e instanceof Error)) return true;
  if (e instanceof ReferenceError) return true;
  if (e instanceof TypeError) return /Cannot (read|set|destructure|convert)|is not a function|is not iterable|is not a constructor|of undefined|of null/.test(e.message);
  if (e instanceof RangeError) return /Maximum call stack|Invalid array length|Invalid string length|Array buffer allocation/.test(e.message);
  return false;
}

class InvariantError extends Error {}

function sameBytes(a: Uint8Array, b: Uint8Array, what: string): void {
  if (Buffer.compare(a, b) !== 0) throw new InvariantError(`${what}: ${Buffer.from(a).toString('hex')} != ${Buffer.from(b).toString('hex')}`);
}

const codec: Target = {
  name: 'codec',
  maxLen: 4096,
  dictionary: [[0xc0, 0x0c], [0xc0, 0x00], [0xc0, 0xff], [0x00, 0x29], [0x00, 0x29, 0x10, 0x00], [0x00, 0x00, 0x29], [0x00, 0xfa], [0x00, 0xff], [0x3f], [0x40], [0x80], [0x00, 0x01, 0x00, 0x01], [0xff, 0xff]].map((b) => Buffer.from(b)),
  run(buf: Buffer): void {
    try { decodeQuestionFast(buf); } catch (e) { if (!(e instanceof WireError)) throw e; }
    let m;
    try { m = decodeMessage(buf); } catch (e) {
      if (e instanceof WireError) return;
      throw e;
    }
    // Round trip: what decodes re-encodes, and the encoding is a fixed point
    // (plain and compressed decode back to the same message).
    let plain: Buffer;
    try { plain = encodeMessage(m); } catch (e) {
      // A message whose names decompress past 64 KiB cannot be re-encoded; that is a refusal, not a bug.
      if (e instanceof WireError || (e instanceof RangeError && !isBug(e))) return;
      throw e;
    }
    const again = decodeMessage(plain);
    sameBytes(encodeMessage(again), plain, 'decode(encode(m)) re-encodes differently');
    const compressed = encodeMessage(m, { compress: true });
    if (compressed.length > plain.length) throw new InvariantError(`compression grew the message: ${compressed.length} > ${plain.length}`);
    sameBytes(encodeMessage(decodeMessage(compressed)), plain, 'compressed encoding decodes to another message');
  },
};

const directives = new Set(COREDNS_DIRECTIVES);
const NO_ENV = {};
// Imports resolve against an empty directory: a fuzzed glob must not read the repository or /proc.
const EMPTY = mkdtempSync(join(tmpdir(), 'nodens-fuzz-'));

const CORE_TOKENS = ['{', '}', '\n', ' ', '"', '`', '\\', '#', '(s)', 'import s', 'import *', '{$HOME}', '{%X%}', '{$}', '.:53', 'dns://', 'tls://', 'https://', 'grpc://', '.', ':', '[::1]', '10.0.0.0/8', 'example.org', '0', '-1', '65536', '1s', '99999999999999999999', '*', 'in-addr.arpa', 'fallthrough', 'except'];

const corefile: Target = {
  name: 'corefile',
  maxLen: 4096,
  dictionary: [...CORE_TOKENS, ...COREDNS_DIRECTIVES].map((s) => Buffer.from(s)),
  run(buf: Buffer): void {
    try {
      parseCorefile(buf.toString('utf8'), join(EMPTY, 'Corefile'), { isDirective: (n) => directives.has(n), env: NO_ENV, warn() { /* warnings are fine */ } });
    } catch (e) {
      if (e instanceof CorefileError || !isBug(e)) return;
      throw e;
    }
  },
};

/** The error the plugin's own setup threw (before the core rewrites it into a StartupError). */
let setupThrew: unknown;
const wrapped = new Map<string, PluginDefinition>(builtinPlugins.map((d) => [d.name, {
  name: d.name,
  async setup(c): Promise<void> {
    try { await d.setup(c); } catch (e) { setupThrew = e; throw e; }
  },
}]));

const PLUGIN_TOKENS = ['fallthrough', 'except', 'policy', 'random', 'round_robin', 'sequential', 'max_fails', 'expire', 'health_check', 'tls', 'tls_servername', 'force_tcp', 'prefer_udp', 'success', 'denial', 'prefetch', 'serve_stale', 'keepttl', 'disable', 'stop', 'continue', 'name', 'regex', 'exact', 'suffix', 'prefix', 'answer', 'auto', 'pods', 'insecure', 'verified', 'endpoint', 'namespaces', 'labels', 'ttl', 'noendpoints', 'transfer', 'to', 'from', 'allow', 'block', 'filter', 'net', 'type', 'A', 'AAAA', 'ANY', 'CNAME', 'response', 'edns0', 'local', 'set', 'unset', 'append', 'replace', '10.0.0.1', '::1', '127.0.0.1:53', '/etc/hosts', '{', '}', '\n', '"', '0', '-1', '1s', '1h', '99999999999999999999'];

const setup: Target = {
  name: 'setup',
  maxLen: 4096,
  dictionary: [...PLUGIN_TOKENS, ...COREDNS_DIRECTIVES].map((s) => Buffer.from(s)),
  async warm(): Promise<void> {
    // Plugin modules load on first use (some, like kubernetes's client, take seconds); load them all first.
    for (const d of builtinPlugins) await import(`../../src/plugin/${d.name}/setup.ts`);
    await import('@kubernetes/client-node'); // the kubernetes setup's own lazy import
  },
  async run(buf: Buffer): Promise<void> {
    const text = buf.toString('utf8');
    // Every plugin named at the start of a line runs its setup on the whole input.
    const named = new Set<string>();
    for (const line of text.split('\n')) {
      const first = line.trim().split(/\s+/)[0] ?? '';
      if (wrapped.has(first)) named.add(first);
    }
    for (const name of named) {
      setupThrew = undefined;
      try {
        // Setup only: no hook runs (nothing listens or connects), so there is nothing to stop.
        await runSetup(wrapped.get(name)!, text);
      } catch (e) {
        const cause = setupThrew ?? e;
        if (isBug(cause)) throw cause;
      }
    }
  },
};

/**
 * The DoH listener's HPACK decoder (src/core/hpack.ts) on arbitrary header blocks, two at a time on one decoder
 * (the dynamic table carries over): anything but an HpackError is a finding.
 */
const hpack: Target = {
  name: 'hpack',
  maxLen: 1024,
  dictionary: [[0x82], [0x84], [0x86], [0x87], [0xbe], [0x40], [0x20], [0x3f, 0xe1, 0x1f], [0x7f, 0xff, 0xff, 0xff, 0x0f], [0x8c], [0xff, 0xff, 0xff, 0xfc]]
    .map((b) => Buffer.from(b)),
  run(buf: Buffer): void {
    const d = new HpackDecoder();
    const half = buf.length >> 1;
    for (const part of [buf.subarray(0, half), buf.subarray(half)]) {
      try {
        d.decode(part, (name, value) => { if (typeof name !== 'string' || typeof value !== 'string') throw new InvariantError('not a string'); });
      } catch (e) {
        if (e instanceof HpackError) return;
        throw e;
      }
    }
  },
};

/** The hpack target's seeds (written by seed.ts): RFC 7541 C.3 and C.4, and DoH GET and POST requests. */
export const HPACK_SEEDS: readonly Buffer[] = [
  '828684410f7777772e6578616d706c652e636f6d', '828684be58086e6f2d6361636865',
  '828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565', '828684418cf1e3c2e5f23a6ba0ab90f4ff',
  '828684be5886a8eb10649cbf', '828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf',
].map((h): Buffer => Buffer.from(h, 'hex')).concat([
  new HpackBlock().indexed(2).indexed(7).withName(4, '/dns-query?dns=AAABAAABAAAAAAAAA3d3dwdleGFtcGxlA29yZwAAAQAB')
    .withName(1, 'localhost').withName(19, 'application/dns-message').bytes(),
  new HpackBlock().indexed(3).indexed(7).withName(4, '/dns-query').withName(1, 'localhost')
    .withName(31, 'application/dns-message').withName(28, '33').literal('expect', '100-continue').bytes(),
]);

export const TARGETS: readonly Target[] = [codec, corefile, setup, hpack];

/** Plugin setups log (deprecation warnings and the like); a fuzz run keeps them quiet. */
export function quiet(): void { setLogSink(() => { /* dropped */ }); }
