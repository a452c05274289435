// List-and-watch of one resource, the way client-go's Reflector keeps an
// informer cache in sync:
//
//   LIST (paged, limit=500, consistent read) → replace the cache with the snapshot
//   WATCH ?allowWatchBookmarks=true&resourceVersion=<last>&timeoutSeconds=<300..600>&watch=true
//     ADDED/MODIFIED/DELETED → apply; BOOKMARK → remember its resourceVersion;
//     ERROR 410 (Expired/Gone) → back off, relist; other ERROR → back off, relist.
//   The server closing the watch normally → re-watch at once from the last version
//   (a watch that ends within 1 s with no event counts as a failure, as in client-go).
//   Connection refused / 429 while opening the watch → back off, re-watch without relisting.
//   Any other failure → back off (800 ms ×2 up to 30 s, jittered, reset after 2 min
//   without failure) and relist.
//   Every `resyncMs` the cycle is restarted with a fresh LIST: objects missing from
//   the snapshot are deleted, so an event lost on the way (a missed watch window)
//   is healed. (client-go's informer resync only replays its own cache; this one
//   re-reads the server.)
//
// Nothing is ever flushed on errors: the last known state keeps serving.
//
// Why not @kubernetes/client-node's Watch/ListWatch: its ListWatch stops for good
// on any error other than 410 (no backoff and retry), ignores BOOKMARK
// resourceVersions, does no pagination and has no periodic relist; the
// reflector below is ~200 lines on top of the same KubeConfig credentials.

import type { PluginLogger } from '../plugin.ts';
import { HttpStatusError, type ApiClient, type StreamResponse } from './client.ts';
import type { RawObject } from './controller.ts';

export interface ReflectorOptions {
  client: ApiClient;
  /** collection path, e.g. /api/v1/services */
  path: string;
  /** for logs: `services` */
  name: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** periodic relist interval; 0 disables */
  resyncMs: number;
  log: PluginLogger;
  /** LIST page size (client-go's pager: 500) */
  pageLimit?: number;
}

export interface ReflectorHandler {
  replace(items: RawObject[]): void;
  upsert(o: RawObject): void;
  remove(o: RawObject): void;
}

interface ListBody { metadata?: { resourceVersion?: string; continue?: string }; items?: RawObject[] }

interface WatchEvent { type: string; object: RawObject & { code?: number; reason?: string; message?: string } }

type WatchEnd = 'closed' | 'short' | 'expired' | 'error' | 'resync' | 'stopped';

const INITIAL_BACKOFF = 800;
const MAX_BACKOFF = 30_000;
const RESET_AFTER = 120_000;

class Backoff {
  private cur = 0;
  private lastFailure = 0;
  next(): number {
    const now = Date.now();
    if (this.cur === 0 || now - this.lastFailure > RESET_AFTER) this.cur = INITIAL_BACKOFF;
    else this.cur = Math.min(this.cur * 2, MAX_BACKOFF);
    this.lastFailure = now;
    return this.cur + Math.random() * this.cur; // jitter factor 1.0
  }
}

function isConnRefused(e: unknown): boolean {
  return (e as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED';
}

function describe(e: unknown): string {
  if (e instanceof HttpStatusError) return e.message;
  const err = e as NodeJS.ErrnoException;
  return err?.message ?? String(e);
}

export class Reflector {
  readonly opts: ReflectorOptions;
  private readonly h: ReflectorHandler;
  /** the initial list has been delivered */
  synced = false;
  /** a watch is open right now */
  watching = false;
  lastRv = '';
  /** how many LISTs completed (for tests and logs) */
  lists = 0;
  private stopped = false;
  private current: StreamResponse | undefined;
  private listAbort: { aborted: boolean; onAbort?: () => void } | undefined;
  private endReason: WatchEnd | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private resyncDue = false;
  private readonly backoff = new Backoff();

  constructor(opts: ReflectorOptions, h: ReflectorHandler) {
    this.opts = opts;
    this.h = h;
  }

  start(): void {
    this.stopped = false;
    if (this.opts.resyncMs > 0) {
      this.resyncTimer = setInterval(() => { this.requestResync(); }, this.opts.resyncMs);
      this.resyncTimer.unref();
    }
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.abortWatch('stopped');
    if (this.listAbort) { this.listAbort.aborted = true; this.listAbort.onAbort?.(); }
    if (this.sleepTimer) clearTimeout(this.sleepTimer);
    this.wake?.();
  }

  /** Restart the cycle with a fresh LIST (periodic resync). */
  requestResync(): void {
    this.resyncDue = true;
    this.abortWatch('resync');
  }

  private abortWatch(reason: WatchEnd): void {
    if (this.current !== undefined) {
      this.endReason = reason;
      this.current.abort();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
    });
  }

  private query(extra: Record<string, string>): string {
    const p = new URLSearchParams();
    const all: Record<string, string> = { ...extra };
    if (this.opts.labelSelector) all.labelSelector = this.opts.labelSelector;
    if (this.opts.fieldSelector) all.fieldSelector = this.opts.fieldSelector;
    for (const k of Object.keys(all).sort()) p.set(k, all[k]);
    return `${this.opts.path}?${p.toString()}`;
  }

  private async run(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      try {
        if (needList || this.resyncDue) {
          this.resyncDue = false;
          await this.list();
          needList = false;
        }
        const end = await this.watch();
        if (this.stopped || end === 'stopped') return;
        if (end === 'closed') continue;
        if (end === 'resync') { needList = true; continue; }
        if (end === 'expired') this.opts.log.info(`${this.opts.name}: watch expired (410), relisting`);
        else if (end === 'short') this.opts.log.warning(`${this.opts.name}: very short watch, relisting`);
        needList = true;
      } catch (e) {
        if (this.stopped) return;
        this.watching = false;
        const rewatchOnly = !needList && (isConnRefused(e) || (e instanceof HttpStatusError && e.status === 429));
        if (!rewatchOnly) needList = true;
        const what = needList ? 'Failed to list' : 'Failed to watch';
        this.opts.log.warning(`${what} ${this.opts.name}: ${describe(e)}`);
      }
      if (this.stopped) return;
      await this.sleep(this.backoff.next());
    }
  }

  private async list(): Promise<void> {
    const items: RawObject[] = [];
    let cont = '';
    let rv = '';
    let limit = this.opts.pageLimit ?? 500;
    for (;;) {
      const params: Record<string, string> = {};
      if (limit > 0) params.limit = String(limit);
      if (cont !== '') params.continue = cont;
      this.listAbort = { aborted: false };
      let body: ListBody;
      try {
        body = await this.opts.client.getJSON<ListBody>(this.query(params), this.listAbort, cont !== '');
      } catch (e) {
        if (e instanceof HttpStatusError && e.status === 410 && cont !== '') {
          // expired continue token: list again without pagination
          items.length = 0;
          cont = '';
          limit = 0;
          continue;
        }
        throw e;
      } finally {
        this.listAbort = undefined;
      }
      if (this.stopped) return;
      for (const o of body.items ?? []) items.push(o);
      rv = body.metadata?.resourceVersion ?? '';
      cont = body.metadata?.continue ?? '';
      if (cont === '') break;
    }
    this.h.replace(items);
    this.lastRv = rv;
    this.lists++;
    this.synced = true;
  }

  private async watch(): Promise<WatchEnd> {
    const timeoutSeconds = 300 + Math.floor(Math.random() * 300);
    const q = this.query({ allowWatchBookmarks: 'true', resourceVersion: this.lastRv, timeoutSeconds: String(timeoutSeconds), watch: 'true' });
    this.endReason = undefined;
    const s = await this.opts.client.open(q, true);
    if (this.stopped) { s.abort(); return 'stopped'; }
    if (this.resyncDue) { s.abort(); return 'resync'; }
    this.current = s;
    this.watching = true;
    const t0 = Date.now();
    let events = 0;
    let result: WatchEnd | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        let buf = '';
        s.res.setEncoding('utf8');
        s.res.on('data', (chunk: string) => {
          buf += chunk;
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line === '') continue;
            let ev: WatchEvent;
            try {
              ev = JSON.parse(line) as WatchEvent;
            } catch (e) {
              reject(e as Error);
              s.abort();
              return;
            }
            events++;
            const r = this.apply(ev);
            if (r !== undefined) {
              result = r;
              s.abort();
              resolve();
              return;
            }
          }
        });
        s.res.on('end', () => { resolve(); });
        s.res.on('close', () => { resolve(); });
        s.res.on('error', (e) => {
          if (this.endReason !== undefined) resolve();
          else reject(e);
        });
      });
    } finally {
      this.current = undefined;
      this.watching = false;
    }
    if (this.endReason !== undefined) return this.endReason;
    if (result !== undefined) return result;
    if (events === 0 && Date.now() - t0 < 1000) return 'short';
    return 'closed';
  }

  /** Applies one event; returns how the watch must end, or undefined to go on. */
  private apply(ev: WatchEvent): WatchEnd | undefined {
    const o = ev.object;
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED':
        this.h.upsert(o);
        break;
      case 'DELETED':
        this.h.remove(o);
        break;
      case 'BOOKMARK':
        break;
      case 'ERROR': {
        const code = o.code ?? 0;
        if (code === 410) return 'expired';
        this.opts.log.warning(`${this.opts.name}: watch error: ${o.message ?? JSON.stringify(o)}`);
        return 'error';
      }
      default:
        return undefined;
    }
    const rv = o.metadata?.resourceVersion;
    if (rv !== undefined && rv !== '') this.lastRv = rv;
    return undefined;
  }
}
