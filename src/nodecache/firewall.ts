// node-cache's firewall rules (kubernetes/dns cmd/node-cache/app/cache_app.go
// initIptables): for every local IP, 12 rules that keep DNS to and from the
// cache out of connection tracking (raw NOTRACK) and let the untracked packets
// through (filter ACCEPT), each inserted at the top of its chain, checked every
// sync interval, deleted (repeatedly, until gone) on teardown.
//
// Backends. node-cache runs the `iptables` binary of its image, whose wrapper
// picks iptables-legacy or iptables-nft by looking at which one holds the
// host's rules. nodens does the same when both variants are installed
// ("the host uses nftables" = kubelet's KUBE-IPTABLES-HINT chain, or more
// rules, are in the nft variant), uses plain `iptables` when only that exists
// (whichever variant it is: `iptables -V` says), and falls back to native
// nftables (`nft`, a table of its own) on hosts without any iptables binary.

import { spawnSync } from 'node:child_process';
import type { FirewallChoice } from './params.ts';

export const COMMENT_SKIP_CONNTRACK = 'NodeLocal DNS Cache: skip conntrack';
export const COMMENT_ALLOW_TRAFFIC = 'NodeLocal DNS Cache: allow DNS traffic';

export interface Rule {
  table: 'raw' | 'filter';
  chain: 'PREROUTING' | 'INPUT' | 'OUTPUT';
  /** iptables arguments after the chain, in node-cache's order. */
  args: string[];
}

/** The 12 rules per local IP, in node-cache's order. */
export function nodeCacheRules(localIPStr: string, port: string, healthPort: string): Rule[] {
  const rules: Rule[] = [];
  const r = (table: Rule['table'], chain: Rule['chain'], proto: string, dir: 'd' | 's', ip: string, p: string, target: string, comment: string): void => {
    rules.push({ table, chain, args: ['-p', proto, `-${dir}`, ip, dir === 'd' ? '--dport' : '--sport', p, '-j', target, '-m', 'comment', '--comment', comment] });
  };
  // node-cache uses the flag's text split at commas here, not the parsed addresses.
  for (const ip of localIPStr.split(',')) {
    r('raw', 'PREROUTING', 'tcp', 'd', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('raw', 'PREROUTING', 'udp', 'd', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('filter', 'INPUT', 'tcp', 'd', ip, port, 'ACCEPT', COMMENT_ALLOW_TRAFFIC);
    r('filter', 'INPUT', 'udp', 'd', ip, port, 'ACCEPT', COMMENT_ALLOW_TRAFFIC);
    r('raw', 'OUTPUT', 'tcp', 's', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('raw', 'OUTPUT', 'udp', 's', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('filter', 'OUTPUT', 'tcp', 's', ip, port, 'ACCEPT', COMMENT_ALLOW_TRAFFIC);
    r('filter', 'OUTPUT', 'udp', 's', ip, port, 'ACCEPT', COMMENT_ALLOW_TRAFFIC);
    r('raw', 'OUTPUT', 'tcp', 'd', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('raw', 'OUTPUT', 'udp', 'd', ip, port, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('raw', 'OUTPUT', 'tcp', 'd', ip, healthPort, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
    r('raw', 'OUTPUT', 'tcp', 's', ip, healthPort, 'NOTRACK', COMMENT_SKIP_CONNTRACK);
  }
  return rules;
}

/** The rule as node-cache logs it (Go's %v of the struct). */
export function ruleText(r: Rule): string {
  return `{${r.table} ${r.chain} [${r.args.join(' ')}]}`;
}

export interface EnsureOutcome { rule: Rule; existed: boolean; error?: string }

export interface Firewall {
  /** What holds the rules, for the log: `iptables v1.8.9 (nf_tables)`, `nft`. */
  readonly description: string;
  ensureAll(rules: Rule[]): EnsureOutcome[];
  /** Deletes every rule, each as often as it is present. Returns the errors. */
  removeAll(rules: Rule[]): string[];
}

interface Run { status: number | null; stdout: string; stderr: string }

function run(cmd: string, args: string[], input?: string): Run {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 30_000, input });
  if (r.error !== undefined) return { status: null, stdout: '', stderr: r.error.message };
  return { status: r.status, stdout: r.stdout ?? '', stderr: (r.stderr ?? '').trim() };
}

function hasCommand(cmd: string): boolean {
  return run('sh', ['-c', `command -v ${cmd}`]).status === 0;
}

/** The iptables binary, as k8s.io/kubernetes/pkg/util/iptables runs it (wait for the xtables lock). */
export class IptablesFirewall implements Firewall {
  readonly bin: string;
  readonly description: string;

  constructor(bin: string) {
    this.bin = bin;
    const v = run(bin, ['-V']);
    this.description = v.status === 0 ? `${bin}: ${v.stdout.trim()}` : bin;
  }

  private op(op: string, r: Rule): Run {
    return run(this.bin, ['-w', '5', '-W', '100000', op, r.chain, '-t', r.table, ...r.args]);
  }

  private exists(r: Rule): { exists: boolean; error?: string } {
    const c = this.op('-C', r);
    if (c.status === 0) return { exists: true };
    // Status 1: no such rule. Anything else is a failure (lock, missing table or module).
    if (c.status === 1 && !/xtables lock/.test(c.stderr)) return { exists: false };
    return { exists: false, error: `error checking rule: ${c.stderr || `exit status ${c.status}`}` };
  }

  ensureAll(rules: Rule[]): EnsureOutcome[] {
    return rules.map((rule) => {
      const e = this.exists(rule);
      if (e.error !== undefined) return { rule, existed: false, error: e.error };
      if (e.exists) return { rule, existed: true };
      const ins = this.op('-I', rule);
      if (ins.status !== 0) return { rule, existed: false, error: `error appending rule: ${ins.stderr || `exit status ${ins.status}`}` };
      return { rule, existed: false };
    });
  }

  removeAll(rules: Rule[]): string[] {
    const errors: string[] = [];
    for (const rule of rules) {
      // Bounded: a rule added more times than this is not ours to chase.
      for (let i = 0; i < 100; i++) {
        const e = this.exists(rule);
        if (e.error !== undefined) { errors.push(`Failed checking iptables rule after deletion, rule - ${ruleText(rule)}, error - ${e.error}`); break; }
        if (!e.exists) break;
        const d = this.op('-D', rule);
        if (d.status !== 0) { errors.push(`Failed deleting iptables rule ${ruleText(rule)}, error - ${d.stderr}`); break; }
      }
    }
    return errors;
  }
}

/** nftables without any iptables binary: a table of our own (`ip nodelocaldns` / `ip6 nodelocaldns`). */
export class NftFirewall implements Firewall {
  readonly description = 'nft (table nodelocaldns)';
  readonly family: 'ip' | 'ip6';
  static readonly TABLE = 'nodelocaldns';

  constructor(ipv6: boolean) { this.family = ipv6 ? 'ip6' : 'ip'; }

  /** The chain of our table that stands for iptables' table/chain, at the same hook and priority. */
  static chainOf(r: Rule): string {
    return `${r.chain.toLowerCase()}_${r.table}`;
  }

  /** The rule in nft syntax, as `nft list` prints it back. */
  ruleExpr(r: Rule): string {
    const a = r.args;
    const proto = a[1]!;
    const addrDir = a[2] === '-d' ? 'daddr' : 'saddr';
    const portDir = a[4] === '--dport' ? 'dport' : 'sport';
    const verdict = a[7] === 'NOTRACK' ? 'notrack' : 'accept';
    return `${this.family} ${addrDir} ${a[3]} ${proto} ${portDir} ${a[5]} ${verdict} comment "${a[11]}"`;
  }

  private tableDefinition(): string {
    const t = NftFirewall.TABLE;
    return [
      `add table ${this.family} ${t}`,
      `add chain ${this.family} ${t} prerouting_raw { type filter hook prerouting priority raw; policy accept; }`,
      `add chain ${this.family} ${t} output_raw { type filter hook output priority raw; policy accept; }`,
      `add chain ${this.family} ${t} input_filter { type filter hook input priority filter; policy accept; }`,
      `add chain ${this.family} ${t} output_filter { type filter hook output priority filter; policy accept; }`,
    ].join('\n') + '\n';
  }

  /** chain → rule lines (with `# handle N`). */
  private listing(): Map<string, string[]> | string {
    const r = run('nft', ['-a', 'list', 'table', this.family, NftFirewall.TABLE]);
    if (r.status !== 0) return r.stderr;
    const chains = new Map<string, string[]>();
    let current: string[] | undefined;
    for (const line of r.stdout.split('\n')) {
      const m = /^\s*chain (\S+) \{/.exec(line);
      if (m !== null) { current = []; chains.set(m[1]!, current); continue; }
      if (current !== undefined && /# handle \d+$/.test(line) && !/^\s*type /.test(line)) current.push(line.trim());
    }
    return chains;
  }

  ensureAll(rules: Rule[]): EnsureOutcome[] {
    let listing = this.listing();
    if (typeof listing === 'string') {
      const mk = run('nft', ['-f', '-'], this.tableDefinition());
      if (mk.status !== 0) return rules.map((rule) => ({ rule, existed: false, error: `nft: ${mk.stderr}` }));
      listing = this.listing();
      if (typeof listing === 'string') return rules.map((rule) => ({ rule, existed: false, error: `nft: ${listing as string}` }));
    }
    const have = listing;
    return rules.map((rule) => {
      const chain = NftFirewall.chainOf(rule);
      const expr = this.ruleExpr(rule);
      if ((have.get(chain) ?? []).some((l) => l.startsWith(expr + ' # handle'))) return { rule, existed: true };
      const ins = run('nft', ['insert', 'rule', this.family, NftFirewall.TABLE, chain, ...splitNft(expr)]);
      if (ins.status !== 0) return { rule, existed: false, error: `nft insert rule: ${ins.stderr}` };
      return { rule, existed: false };
    });
  }

  removeAll(_rules: Rule[]): string[] {
    const r = run('nft', ['delete', 'table', this.family, NftFirewall.TABLE]);
    if (r.status === 0 || /No such file or directory/.test(r.stderr)) return [];
    return [`nft delete table ${this.family} ${NftFirewall.TABLE}: ${r.stderr}`];
  }
}

/** The rule expression as argv for `nft insert rule` (the comment stays one argument with its quotes). */
function splitNft(expr: string): string[] {
  const i = expr.indexOf(' comment ');
  return [...expr.slice(0, i).split(' '), 'comment', expr.slice(i + ' comment '.length)];
}

/** Lines of `<variant>-save` output that are rules, and whether kubelet's hint chain is there. */
function variantState(save: string): { rules: number; hint: boolean } {
  const r = run(save, []);
  const out = r.status === 0 ? r.stdout : '';
  return { rules: out.split('\n').filter((l) => l.startsWith('-')).length, hint: /KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY/.test(out) };
}

/** Picks the backend for -firewall (see the file comment); the reason goes to the log. */
export function chooseFirewall(choice: FirewallChoice, ipv6: boolean): { firewall?: Firewall; reason: string } {
  const base = ipv6 ? 'ip6tables' : 'iptables';
  const pick = (bin: string, reason: string): { firewall?: Firewall; reason: string } => {
    if (!hasCommand(bin)) return { reason: `${bin} is not installed` };
    return { firewall: new IptablesFirewall(bin), reason };
  };
  switch (choice) {
    case 'iptables': return pick(base, '-firewall iptables');
    case 'iptables-legacy': return pick(`${base}-legacy`, '-firewall iptables-legacy');
    case 'iptables-nft': return pick(`${base}-nft`, '-firewall iptables-nft');
    case 'nft': return hasCommand('nft') ? { firewall: new NftFirewall(ipv6), reason: '-firewall nft' } : { reason: 'nft is not installed' };
    case 'auto': break;
  }
  if (hasCommand(`${base}-legacy`) && hasCommand(`${base}-nft`)) {
    const legacy = variantState(`${base}-legacy-save`);
    const nft = variantState(`${base}-nft-save`);
    if (nft.hint) return pick(`${base}-nft`, 'the host\'s kubelet rules are in nftables (KUBE-IPTABLES-HINT)');
    if (legacy.hint) return pick(`${base}-legacy`, 'the host\'s kubelet rules are in iptables-legacy (KUBE-IPTABLES-HINT)');
    if (legacy.rules > nft.rules) return pick(`${base}-legacy`, `the host has more iptables-legacy rules (${legacy.rules}) than nftables ones (${nft.rules})`);
    return pick(`${base}-nft`, `the host has no more iptables-legacy rules (${legacy.rules}) than nftables ones (${nft.rules})`);
  }
  if (hasCommand(base)) return pick(base, `${base} is the only variant installed`);
  if (hasCommand('nft')) return { firewall: new NftFirewall(ipv6), reason: `no ${base} binary, nft is installed` };
  return { reason: `neither ${base} nor nft is installed` };
}
