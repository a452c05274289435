// tsig's Corefile syntax (CoreDNS plugin/tsig/setup.go). CoreDNS turns every parse error of this
// plugin into an argument error at the token where parsing stopped: `Wrong argument count or
// unexpected line ending after 'TOKEN'`, whatever went wrong (an unknown type, a missing file, a
// redefined key...). parse throws exactly that.

import { readFileSync } from 'node:fs';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { normalizeName, originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { stringToOpcode, stringToType, typeToString, opcodeToString } from '../../wire/constants.ts';
import { tsigKey, type TsigKey } from '../pkg/tsig.ts';
import { Tsig } from './tsig.ts';

/** What `tsig [ZONE...] { secret NAME KEY; secrets FILE; require [QTYPE...]; require_opcode [OPCODE...] }` configures. */
export interface TsigOptions {
  /** The zones whose queries the plugin checks (the block's zones by default). */
  zones: string[];
  /** Key name (lower-cased FQDN) to base64 secret, from `secret` and `secrets`, in definition order. */
  secrets: Map<string, string>;
  /** `require QTYPE...`: unsigned queries of these types are refused. */
  types: Set<number>;
  /** `require all`. */
  allTypes: boolean;
  /** `require_opcode OPCODE...`: unsigned queries with these opcodes are refused. */
  opcodes: Set<number>;
  /** `require_opcode all`. */
  allOpcodes: boolean;
}

/** Go's dns.StringToType: the upper-case mnemonics only (no TYPEnnn). */
function goStringToType(s: string): number | undefined {
  const t = stringToType(s);
  return t !== undefined && typeToString(t) === s && !/^TYPE[0-9]/.test(s) ? t : undefined;
}

/** Go's dns.StringToOpcode: QUERY, IQUERY, STATUS, NOTIFY, UPDATE, exactly. */
function goStringToOpcode(s: string): number | undefined {
  const o = stringToOpcode(s);
  return o !== undefined && opcodeToString(o) === s && !s.startsWith('OPCODE') ? o : undefined;
}

/**
 * A BIND `named.conf` key file as CoreDNS reads it (line by line): `key "NAME" {`, then `secret "..." ;`
 * and `algorithm ...;` lines (the algorithm is ignored), then `};`. Throws on anything else.
 */
export function parseKeyFile(text: string): Map<string, string> {
  const secrets = new Map<string, string>();
  const lines = text.split('\n');
  let i = 0;
  const fields = (l: string): string[] => l.replace(/\r$/, '').split(/\s+/).filter((f) => f !== '');
  while (i < lines.length) {
    const f = fields(lines[i++]!);
    if (f.length === 0) continue;
    if (f[0] !== 'key') throw new Error(`unexpected token ${JSON.stringify(f[0])}`);
    if (f.length < 2) throw new Error('expected key name');
    let key = f[1]!.replace(/^["{]+|["{]+$/g, '');
    if (key === '') throw new Error('expected key name');
    key = normalizeName(key);
    if (secrets.has(key)) throw new Error(`key ${JSON.stringify(key)} redefined`);
    while (i < lines.length) {
      const g = fields(lines[i++]!);
      if (g.length === 0) continue;
      if (g[0] === 'algorithm') continue;
      if (g[0] === 'secret') {
        if (g.length < 2) throw new Error('expected secret key');
        const secret = g[1]!.replace(/^[";]+|[";]+$/g, '');
        if (secret === '') throw new Error('expected secret key');
        secrets.set(key, secret);
        continue;
      }
      if (g[0] === '}' || g[0] === '};') break;
      throw new Error(`unexpected token ${JSON.stringify(g[0])}`);
    }
    if (!secrets.has(key)) throw new Error(`expected secret for key ${JSON.stringify(key)}`);
  }
  return secrets;
}

/** Reads the block's one `tsig` directive. Every error is CoreDNS's argument error at the current token. */
export function parse(c: SetupContext): TsigOptions {
  const d = c.dispenser;
  const o: TsigOptions = { zones: [], secrets: new Map(), types: new Set(), allTypes: false, opcodes: new Set(), allOpcodes: false };
  for (let i = 0; d.next(); i++) {
    if (i > 0) throw d.argErr(); // plugin.ErrOnce, reported as an argument error
    o.zones = originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys);
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'secret': {
          const args = d.remainingArgs();
          if (args.length !== 2) throw d.argErr();
          const k = normalizeName(args[0]!);
          if (o.secrets.has(k)) throw d.argErr();
          o.secrets.set(k, args[1]!);
          break;
        }
        case 'secrets': {
          const args = d.remainingArgs();
          if (args.length !== 1) throw d.argErr();
          let file: Map<string, string>;
          try {
            file = parseKeyFile(readFileSync(args[0]!, 'utf8'));
          } catch {
            throw d.argErr();
          }
          for (const [k, s] of file) {
            if (o.secrets.has(k)) throw d.argErr();
            o.secrets.set(k, s);
          }
          break;
        }
        case 'require': {
          o.types = new Set();
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          if (args[0] === 'all') { o.allTypes = true; break; }
          if (args[0] === 'none') break;
          for (const s of args) {
            const t = goStringToType(s);
            if (t === undefined) throw d.argErr();
            o.types.add(t);
          }
          break;
        }
        case 'require_opcode': {
          o.opcodes = new Set();
          const args = d.remainingArgs();
          if (args.length === 0) throw d.argErr();
          if (args[0] === 'all') { o.allOpcodes = true; break; }
          if (args[0] === 'none') break;
          for (const s of args) {
            const op = goStringToOpcode(s);
            if (op === undefined) throw d.argErr();
            o.opcodes.add(op);
          }
          break;
        }
        default:
          throw d.argErr();
      }
    }
  }
  return o;
}

/**
 * The keys of every tsig block sharing a listen address (CoreDNS merges them into the server's
 * TsigSecret, later blocks overriding): one live map per address, filled as blocks are set up.
 */
function serverKeys(c: SetupContext): Map<string, TsigKey>[] {
  const byAddress = c.instance.shared('tsig/keys', () => new Map<string, Map<string, TsigKey>>());
  const out: Map<string, TsigKey>[] = [];
  for (const host of c.config.listenHosts) {
    const addr = `${c.config.transport}://${host}:${c.config.port}`;
    let m = byAddress.get(addr);
    if (m === undefined) byAddress.set(addr, m = new Map());
    out.push(m);
  }
  return out;
}

export const plugin: PluginDefinition = {
  name: 'tsig',
  setup(c) {
    const o = parse(c);
    const maps = serverKeys(c);
    for (const m of maps) for (const [k, s] of o.secrets) m.set(k, tsigKey(s));
    let keys: ReadonlyMap<string, TsigKey> = maps[0] ?? new Map();
    if (maps.length > 1) {
      // A block bound to several addresses: the union of their servers' keys, once all blocks are set up.
      const union = new Map<string, TsigKey>();
      keys = union;
      c.onStartup(() => { for (const m of maps) for (const [k, v] of m) union.set(k, v); });
    }
    const t = new Tsig(o, keys, c.instance.log, c.instance.ednsSupported);
    c.addPlugin((next) => { t.next = next; return t; });
  },
};
