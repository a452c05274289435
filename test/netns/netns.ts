// Network namespaces for loop scenarios that need their own addresses or port 53:
// created per test (name prefix `nodens-t-`), loopback up, optional extra
// addresses on lo, an optional veth pair to a second namespace; deleted after.
// Needs root and iproute2; `available()` says whether the tests can run.

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.ts';

let counter = 0;

function ip(...args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
}

/** Whether namespaces can be made here (root, iproute2, netns support). */
export function available(): boolean {
  if (process.getuid?.() !== 0) return false;
  const name = `nodens-t-probe-${process.pid}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (r.status !== 0) return false;
  spawnSync('ip', ['netns', 'del', name]);
  return true;
}

export interface Proc {
  proc: ChildProcess;
  out: string[];
  exited: Promise<number | null>;
  waitFor(re: RegExp, ms?: number): Promise<string>;
  stop(): Promise<number | null>;
}

export class Netns {
  readonly name: string;
  readonly dir: string;
  private readonly procs: Proc[] = [];
  private readonly peers: string[] = [];

  constructor(label: string) {
    this.name = `nodens-t-${label}-${process.pid}-${++counter}`;
    ip('netns', 'add', this.name);
    ip('-n', this.name, 'link', 'set', 'lo', 'up');
    this.dir = mkdtempSync(join(tmpdir(), 'nodens-netns-'));
  }

  /** Put `cidr` (e.g. 169.254.25.10/32) on the namespace's lo. */
  addLoopbackAddress(cidr: string): void {
    ip('-n', this.name, 'addr', 'add', cidr, 'dev', 'lo');
  }

  /** A veth pair to a new peer namespace: this side gets `mine`, the peer `theirs` (CIDRs). Returns the peer. */
  veth(mine: string, theirs: string): Netns {
    const peer = new Netns('peer');
    const a = `vn${counter}a`, b = `vn${counter}b`;
    ip('link', 'add', a, 'netns', this.name, 'type', 'veth', 'peer', 'name', b, 'netns', peer.name);
    ip('-n', this.name, 'addr', 'add', mine, 'dev', a);
    ip('-n', peer.name, 'addr', 'add', theirs, 'dev', b);
    ip('-n', this.name, 'link', 'set', a, 'up');
    ip('-n', peer.name, 'link', 'set', b, 'up');
    this.peers.push(peer.name);
    return peer;
  }

  /** A route in this namespace: `cidr` via the gateway `via` (an address of a veth peer). */
  route(cidr: string, via: string): void {
    ip('-n', this.name, 'route', 'add', cidr, 'via', via);
  }

  file(name: string, text: string): string {
    const p = join(this.dir, name);
    writeFileSync(p, text);
    return p;
  }

  /**
   * The namespace's own /etc/resolv.conf: `ip netns exec` bind-mounts /etc/netns/NAME/resolv.conf over
   * /etc/resolv.conf for every command it runs, so a Corefile's `forward . /etc/resolv.conf` stays as written.
   */
  resolvConf(text: string): void {
    const dir = `/etc/netns/${this.name}`;
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/resolv.conf`, text);
  }

  /** Run a command inside the namespace, collecting stdout and stderr lines. */
  run(cmd: string, args: string[]): Proc {
    const proc = spawn('ip', ['netns', 'exec', this.name, cmd, ...args], { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: string[] = [];
    const waiters: Array<() => void> = [];
    const feed = (): ((c: Buffer) => void) => {
      let partial = '';
      return (c) => {
        const lines = (partial + c.toString()).split('\n');
        partial = lines.pop()!;
        out.push(...lines);
        for (const w of waiters.splice(0)) w();
      };
    };
    proc.stdout!.on('data', feed());
    proc.stderr!.on('data', feed());
    const exited = new Promise<number | null>((r) => { proc.on('exit', (code) => { for (const w of waiters.splice(0)) w(); r(code); }); });
    const p: Proc = {
      proc, out, exited,
      async waitFor(re, ms = 15000) {
        const deadline = Date.now() + ms;
        for (;;) {
          const hit = out.find((l) => re.test(l));
          if (hit !== undefined) return hit;
          if (proc.exitCode !== null || Date.now() > deadline) {
            throw new Error(`did not see ${re} (exit ${proc.exitCode}):\n${out.join('\n')}`);
          }
          await new Promise<void>((r) => { waiters.push(r); setTimeout(r, 50); });
        }
      },
      async stop() {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
        // 10 s of grace: node-cache's teardown runs iptables once per rule, seconds on a loaded machine.
        const t = setTimeout(() => { proc.kill('SIGKILL'); }, 10_000);
        const c = await exited;
        clearTimeout(t);
        return c;
      },
    };
    this.procs.push(p);
    return p;
  }

  /** nodens with the Corefile text written to `<dir>/<name>`. */
  nodens(corefile: string, name = 'Corefile', args: string[] = []): Proc {
    const file = this.file(name, corefile);
    return this.run(BIN, ['-conf', file, ...args]);
  }

  /** A one-shot command inside the namespace (dig, kdig …), bounded. */
  exec(cmd: string, args: string[], timeoutMs = 10000): { status: number | null; stdout: string } {
    const r = spawnSync('ip', ['netns', 'exec', this.name, cmd, ...args], { encoding: 'utf8', timeout: timeoutMs });
    return { status: r.status, stdout: (r.stdout ?? '') + (r.stderr ?? '') };
  }

  async close(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop()));
    for (const p of this.peers) spawnSync('ip', ['netns', 'del', p]);
    spawnSync('ip', ['netns', 'del', this.name]);
    rmSync(`/etc/netns/${this.name}`, { recursive: true, force: true });
  }
}

/** dig inside a namespace: status word, EDE line, and the whole output. */
export function digIn(ns: Netns, server: string, name: string, type = 'A', extra: string[] = []): { status: string; ede: string; out: string } {
  const r = ns.exec('dig', ['+tries=1', '+time=3', `@${server}`, name, type, ...extra]);
  const status = /status: (\w+)/.exec(r.stdout)?.[1] ?? 'TIMEOUT';
  const ede = /; EDE: (.*)/.exec(r.stdout)?.[1] ?? '';
  return { status, ede, out: r.stdout };
}
