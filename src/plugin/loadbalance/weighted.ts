// loadbalance weighted: weight file reading and the weighted choice of the
// first address (CoreDNS plugin/loadbalance/weighted.go).

import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { AData, ResourceRecord } from '../../wire/types.ts';
import type { PluginLogger } from '../plugin.ts';
import { ipEqual, parseIP } from '../../wire/ip.ts';
import { groupByType, recordType } from './shuffle.ts';

interface WeightItem { address: Uint8Array; value: number }

export class OpenError extends Error {}

export function parseWeights(text: string, fileName: string): Map<string, WeightItem[]> {
  const domains = new Map<string, WeightItem[]>();
  let dname = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.length === 0 || line[0] === '#') continue;
    const f = line.split(/\s+/);
    if (f.length === 1) {
      if (parseIP(f[0]!) !== undefined) {
        throw new Error(`wrong domain name:"${f[0]}" in weight file ${fileName}. (Maybe a missing weight value?)`);
      }
      dname = f[0]!;
      if (!dname.endsWith('.')) dname += '.';
      if (!domains.has(dname)) domains.set(dname, []);
    } else if (f.length === 2) {
      const ip = parseIP(f[0]!);
      if (ip === undefined) throw new Error(`wrong IP address:"${f[0]}" in weight file ${fileName}`);
      const w = /^[0-9]+$/.test(f[1]!) ? Number(f[1]) : NaN;
      if (!(w >= 1 && w <= 255)) throw new Error(`wrong weight value:"${f[1]}" in weight file ${fileName}`);
      if (dname === '') throw new Error(`missing domain name in weight file ${fileName}`);
      domains.get(dname)!.push({ address: ip, value: w });
    } else {
      throw new Error(`could not parse weight line:"${line}" in weight file ${fileName}`);
    }
  }
  return domains;
}

export class WeightedRR {
  readonly fileName: string;
  readonly reloadMs: number;
  private md5 = '';
  domains = new Map<string, WeightItem[]>();
  private timer: NodeJS.Timeout | undefined;
  private readonly log: PluginLogger;
  /** Injectable random source: an integer in [0, limit). */
  rand: (limit: number) => number = (limit) => Math.floor(Math.random() * limit);

  constructor(fileName: string, reloadMs: number, log: PluginLogger) {
    this.fileName = fileName;
    this.reloadMs = reloadMs;
    this.log = log;
  }

  /** Re-read the file if its contents changed. Throws OpenError when it cannot be opened. */
  updateWeights(): void {
    let data: Buffer;
    try {
      data = readFileSync(this.fileName);
    } catch {
      throw new OpenError('weight file open error');
    }
    const sum = createHash('md5').update(data).digest('hex');
    if (sum === this.md5) return;
    this.md5 = sum;
    this.domains = parseWeights(data.toString('utf8'), this.fileName);
    this.log.info(`Successfully reloaded weight file ${this.fileName}`);
  }

  start(): void {
    try {
      this.updateWeights();
    } catch (e) {
      if (e instanceof OpenError && this.reloadMs !== 0) {
        this.log.warning(`Failed to open weight file:${e.message}. Will try again in ${formatMs(this.reloadMs)}`);
      } else {
        throw new Error(`plugin/loadbalance: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    if (this.reloadMs === 0 || this.timer !== undefined) return;
    this.timer = setInterval(() => {
      try {
        this.updateWeights();
      } catch (e) {
        this.log.error(e instanceof Error ? e.message : String(e));
      }
    }, this.reloadMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** CoreDNS weightedRoundRobin on one section. */
  order(rrs: ResourceRecord[]): ResourceRecord[] {
    const { cname, address, mx, rest } = groupByType(rrs, recordType);
    if (address.length === 0) return rrs;
    const top = this.topIndex(address);
    if (top > 0) {
      const t = address[0]!;
      address[0] = address[top]!;
      address[top] = t;
    }
    return cname.concat(rest, address, mx);
  }

  private topIndex(address: ResourceRecord[]): number {
    let wsum = 0;
    const wa: { index: number; weight: number }[] = [];
    for (let i = 0; i < address.length; i++) {
      const r = address[i]!;
      let weight = 1;
      const ip = parseIP((r.data as AData).address);
      const ws = this.domains.get(r.name);
      if (ws !== undefined && ip !== undefined) {
        for (const w of ws) if (ipEqual(w.address, ip)) { weight = w.value; break; }
      }
      wa.push({ index: i, weight });
      wsum += weight;
    }
    wa.sort((a, b) => b.weight - a.weight);
    const v = this.rand(wsum);
    let psum = 0;
    for (const x of wa) {
      psum += x.weight;
      if (v < psum) return x.index;
    }
    return -1;
  }
}

/** Go's Duration.String for whole milliseconds. */
export function formatMs(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  let s = ms / 1000;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const sec = `${Number(s.toFixed(3))}s`;
  if (h > 0) return `${h}h${m}m${sec}`;
  if (m > 0) return `${m}m${sec}`;
  return sec;
}
