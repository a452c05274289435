import { aclMetrics } from './metrics.ts';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goQuote, originsFromArgsOrServerBlock } from '../../corefile/address.ts';
import { parseCidr } from '../../wire/ip.ts';
import type { Cidr } from '../../wire/ip.ts';
import { RRType, stringToType, typeToString } from '../../wire/constants.ts';
import { Acl } from './acl.ts';

/** What a policy does with the queries it matches. */
export type AclAction = 'allow' | 'block' | 'filter' | 'drop';

/** One `ACTION [type QTYPE...] [net SOURCE...]` line. */
export interface AclPolicy {
  action: AclAction;
  /**
   * The query types matched. `0` (what `*`, an omitted `type` section and CoreDNS's `None`
   * stand for) matches every type.
   */
  types: number[];
  /**
   * The source networks matched (a plain address is a /32 or /128). `*` and an omitted `net`
   * section give `0.0.0.0/0` and `::/0`.
   */
  nets: Cidr[];
}

/** One `acl [ZONES...] { ... }` directive: its zones and its policies, in order. */
export interface AclRule {
  /** The zones the rule applies to (the block's zones when none are given). */
  zones: string[];
  policies: AclPolicy[];
}

/** What the `acl` directives of a block configure: their rules, in Corefile order. */
export interface AclOptions {
  rules: AclRule[];
}

function allNets(): Cidr[] {
  return [parseCidr('0.0.0.0/0')!, parseCidr('::/0')!];
}

function isSection(token: string): boolean {
  const t = token.toLowerCase();
  return t === 'type' || t === 'net';
}

/** A single address gets /32 (IPv4) or /128 (anything with a colon), as CoreDNS's normalize. */
function normalizeNet(token: string): string {
  if (token.includes('/')) return token;
  return token.includes(':') ? token + '/128' : token + '/32';
}

/** miekg/dns's StringToType: the exact mnemonic (case-sensitive), no `TYPEn` form. */
function qtypeOf(token: string): number | undefined {
  const t = stringToType(token);
  if (t === undefined || typeToString(t) !== token || token.startsWith('TYPE')) return undefined;
  return t;
}

/** Reads every `acl` directive of the block (the plugin may be used several times). */
export function parse(c: SetupContext): AclOptions {
  const d = c.dispenser;
  const rules: AclRule[] = [];
  while (d.next()) {
    const rule: AclRule = { zones: originsFromArgsOrServerBlock(d.remainingArgs(), c.config.keys), policies: [] };
    while (d.nextBlock()) {
      const word = d.val().toLowerCase();
      if (word !== 'allow' && word !== 'block' && word !== 'filter' && word !== 'drop') {
        throw d.errf(`unexpected token ${goQuote(d.val())}; expect 'allow', 'block', 'filter' or 'drop'`);
      }
      const types = new Set<number>();
      let nets: Cidr[] = [];
      let hasType = false;
      let hasNet = false;
      let rest = d.remainingArgs();
      while (rest.length > 0) {
        if (!isSection(rest[0])) throw d.errf(`unexpected token ${goQuote(rest[0])}; expect 'type | net'`);
        const section = rest[0].toLowerCase();
        let i = 1;
        while (i < rest.length && !isSection(rest[i])) i++;
        const tokens = rest.slice(1, i);
        rest = rest.slice(i);
        if (tokens.length === 0) throw d.errf(`no token specified in ${goQuote(section)} section`);
        if (section === 'type') {
          hasType = true;
          for (const token of tokens) {
            // `*` ends the list: what follows it is not looked at.
            if (token === '*') {
              types.add(RRType.None);
              break;
            }
            const t = qtypeOf(token);
            if (t === undefined) throw d.errf(`unexpected token ${goQuote(token)}; expect legal QTYPE`);
            types.add(t);
          }
        } else {
          hasNet = true;
          for (const token of tokens) {
            if (token === '*') {
              nets = allNets();
              break;
            }
            const n = normalizeNet(token);
            const cidr = parseCidr(n);
            if (cidr === undefined) throw d.errf(`illegal CIDR notation ${goQuote(n)}`);
            nets.push(cidr);
          }
        }
      }
      if (!hasType) types.add(RRType.None);
      if (!hasNet) nets = allNets();
      rule.policies.push({ action: word, types: [...types], nets });
    }
    rules.push(rule);
  }
  return { rules };
}

export const plugin: PluginDefinition = {
  name: 'acl',
  setup(c) {
    const o = parse(c);
    const metrics = aclMetrics(c.instance.metrics);
    c.addPlugin((next) => new Acl(next, o.rules, c.log, metrics));
  },
};
