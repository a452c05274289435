// The interface that holds the cache's listen addresses (kubernetes/dns
// pkg/netif): a `dummy` link named -interfacename with every -localip as a host
// address (/32, /128), created before the server starts, re-checked every sync
// interval, deleted on teardown.
//
// Where the kernel has no dummy driver, an `ifb` link of the same name takes
// its place (the same properties: no ports, no traffic of its own, addresses
// local to the node), and where that fails too, the addresses go on `lo`. The
// choice is logged once.
//
// Through iproute2's `ip` rather than netlink: Node has no AF_NETLINK sockets,
// and a native addon would be the project's only compiled dependency. `ip -j`
// gives JSON, so nothing is parsed from human-readable output.

import { spawnSync } from 'node:child_process';

export type LinkKind = 'dummy' | 'ifb' | 'lo';

export interface IpResult { ok: boolean; stdout: string; stderr: string }

/** Runs `ip` synchronously (teardown runs in exit paths where nothing asynchronous completes). */
export type IpRunner = (args: string[]) => IpResult;

export const runIp: IpRunner = (args) => {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  if (r.error !== undefined) return { ok: false, stdout: '', stderr: r.error.message };
  return { ok: r.status === 0, stdout: r.stdout ?? '', stderr: (r.stderr ?? '').trim() };
};

export interface EnsureResult {
  /** The link (or, on lo, the first address) was there already. */
  existed: boolean;
  /** The failure to create it, or to give it its addresses. */
  error?: string;
}

export class NetifManager {
  readonly name: string;
  /** `addr/32` or `addr/128`. */
  readonly cidrs: string[];
  private readonly ip: IpRunner;
  private readonly info: (msg: string) => void;
  /** Which kind holds the addresses, once one was created or found. */
  kind: LinkKind | undefined;

  constructor(name: string, addrs: string[], ipv6: boolean, info: (msg: string) => void, ip: IpRunner = runIp) {
    this.name = name;
    this.cidrs = addrs.map((a) => `${a}/${ipv6 ? 128 : 32}`);
    this.ip = ip;
    this.info = info;
  }

  private linkExists(): boolean {
    return this.ip(['-j', 'link', 'show', 'dev', this.name]).ok;
  }

  private addAddresses(dev: string, ignoreErrors: boolean): string | undefined {
    for (const c of this.cidrs) {
      const r = this.ip(['addr', 'add', c, 'dev', dev]);
      // Like netlink's AddrAdd during a check: "already assigned" is the normal case.
      if (!r.ok && !ignoreErrors && !/already|exists/i.test(r.stderr)) return `ip addr add ${c} dev ${dev}: ${r.stderr}`;
    }
    return undefined;
  }

  /** EnsureDummyDevice: re-add the addresses when the link exists, create it when not. */
  ensure(): EnsureResult {
    if (this.kind === 'lo') {
      const first = this.cidrs[0]!;
      const existed = this.hasLoAddress(first);
      const error = this.addAddresses('lo', false);
      return error === undefined ? { existed } : { existed, error };
    }
    if (this.linkExists()) {
      this.kind ??= 'dummy';
      this.addAddresses(this.name, true);
      return { existed: true };
    }
    const error = this.create();
    return error === undefined ? { existed: false } : { existed: false, error };
  }

  private hasLoAddress(cidr: string): boolean {
    const r = this.ip(['-j', 'addr', 'show', 'dev', 'lo']);
    if (!r.ok) return false;
    const [addr, len] = cidr.split('/');
    const list = JSON.parse(r.stdout) as Array<{ addr_info?: Array<{ local: string; prefixlen: number }> }>;
    return list.some((l) => (l.addr_info ?? []).some((a) => a.local === addr && String(a.prefixlen) === len));
  }

  /** AddDummyDevice, with the fallbacks. Returns the error when no kind worked. */
  private create(): string | undefined {
    const tried: string[] = [];
    for (const kind of ['dummy', 'ifb'] as const) {
      const r = this.ip(['link', 'add', this.name, 'type', kind]);
      if (!r.ok) { tried.push(`${kind}: ${r.stderr}`); continue; }
      if (this.kind !== kind) {
        this.info(kind === 'dummy'
          ? `Using a dummy interface ${this.name} for the local IPs`
          : `The kernel has no dummy interfaces (${tried.join('; ')}); using an ifb interface ${this.name} for the local IPs instead`);
      }
      this.kind = kind;
      // Left down, as node-cache leaves its dummy: the kernel makes the addresses local all the same.
      return this.addAddresses(this.name, false);
    }
    this.info(`The kernel has neither dummy nor ifb interfaces (${tried.join('; ')}); putting the local IPs on lo instead`);
    this.kind = 'lo';
    return this.addAddresses('lo', false);
  }

  /** RemoveDummyDevice (or, on lo, the addresses this manager put there). */
  remove(): string | undefined {
    if (this.kind === 'lo') {
      let err: string | undefined;
      for (const c of this.cidrs) {
        const r = this.ip(['addr', 'del', c, 'dev', 'lo']);
        if (!r.ok) err = `ip addr del ${c} dev lo: ${r.stderr}`;
      }
      return err;
    }
    if (!this.linkExists()) return `Link not found`;
    const r = this.ip(['link', 'del', 'dev', this.name]);
    return r.ok ? undefined : `ip link del ${this.name}: ${r.stderr}`;
  }
}
