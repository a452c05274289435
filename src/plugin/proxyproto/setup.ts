// proxyproto's Corefile syntax (CoreDNS plugin/proxyproto/setup.go): the PROXY protocol policy of the block's
// listeners, handed to the core through BlockConfig.setProxyProtocol.

import { bareSetupError, type PluginDefinition, type SetupContext } from '../plugin.ts';
import { DurationError, parseDuration, toMillis } from '../pkg/duration.ts';
import { parseCidr } from '../../wire/ip.ts';
import { Policy, ProxyProtocolPolicy, type ProxyOptions } from './proxyproto.ts';
import { ProxyProtoMetadata } from './handler.ts';

/** Go's strconv.Atoi: an optional sign and decimal digits; undefined otherwise. */
function atoi(s: string): number | undefined {
  return /^[+-]?[0-9]+$/.test(s) ? Number(s) : undefined;
}

/** Reads every `proxyproto` of the block (options accumulate across them, as CoreDNS's loop does). */
export function parse(c: SetupContext): ProxyOptions {
  const d = c.dispenser;
  const o: ProxyOptions = { allow: [], defaultPolicy: undefined, sessionTtlMs: 0, maxSessions: 0, tlvMetadata: false };
  while (d.next()) {
    if (d.remainingArgs().length !== 0) throw d.argErr();
    while (d.nextBlock()) {
      switch (d.val()) {
        case 'allow':
          for (const v of d.remainingArgs()) {
            const cidr = parseCidr(v);
            if (cidr === undefined) throw new Error(`${v}: invalid CIDR address: ${v}`);
            o.allow.push(cidr);
          }
          break;
        case 'default': {
          const v = d.remainingArgs();
          if (v.length !== 1) throw d.argErr();
          const p = Object.values(Policy).find((x) => x === v[0]!.toLowerCase());
          if (p === undefined) throw d.argErr();
          o.defaultPolicy = p;
          break;
        }
        case 'udp_session_tracking': {
          const v = d.remainingArgs();
          if (v.length < 1 || v.length > 2) throw d.argErr();
          let ns: bigint;
          try {
            ns = parseDuration(v[0]!);
          } catch (e) {
            if (e instanceof DurationError) throw new Error(`udp_session_tracking: invalid duration ${JSON.stringify(v[0])}: ${e.message}`);
            throw e;
          }
          // A zero or negative TTL leaves tracking off, as in CoreDNS.
          o.sessionTtlMs = ns > 0n ? Math.max(1, toMillis(ns)) : 0;
          if (v.length === 2) {
            const n = atoi(v[1]!);
            if (n === undefined || n <= 0) {
              throw new Error(`udp_session_tracking: invalid max sessions ${JSON.stringify(v[1])}: must be a positive integer`);
            }
            o.maxSessions = n;
          }
          break;
        }
        case 'tlv_metadata':
          if (d.remainingArgs().length !== 0) throw d.argErr();
          o.tlvMetadata = true;
          break;
        default:
          throw bareSetupError(d.errf(`unknown option '${d.val()}'`));
      }
    }
  }
  for (const key of c.config.keys) {
    const m = /^([a-z0-9]+):\/\//.exec(key);
    const transport = m === null ? 'dns' : m[1]!;
    // DoT and DoH read the header before the TLS handshake in CoreDNS; nodens implements plain DNS only.
    if (transport !== 'dns') throw d.errf(`PROXY protocol on ${transport}:// listeners is not supported by nodens (${key})`);
  }
  return o;
}

export const plugin: PluginDefinition = {
  name: 'proxyproto',
  setup(c) {
    const o = parse(c);
    c.config.setProxyProtocol(new ProxyProtocolPolicy(o, c.instance.log));
    // tlv_metadata: a pass-through handler that is the metadata provider of `proxyproto/tlv`, as in CoreDNS.
    if (o.tlvMetadata) c.addPlugin((next) => new ProxyProtoMetadata(next));
  },
};
