// List-and-watch of one resource, the way client-go's Reflector (v0.37, the one CoreDNS 1.15.0 vendors, with
// its WatchListClient feature on by default) keeps an informer cache in sync:
//
//   sync: the streaming list first — WATCH ?allowWatchBookmarks=true&resourceVersion=<last, '' at first>
//     &resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=..&watch=true: ADDED for every
//     object, then a BOOKMARK annotated k8s.io/initial-events-end replaces the cache, and the same stream goes
//     on as the watch. The API server answers it from its watch cache, not with a quorum read from etcd.
//     A server that refuses it (an error status other than 429 and 410) gets a LIST instead, with client-go's
//     resourceVersion rules: "0" for the first (served from the watch cache, which ignores limit=500), the
//     last synced version afterwards (without limit, so the cache serves that too), "" (a quorum read) only
//     after the version turned out expired or too large; pages after the first carry no resourceVersion.
//   WATCH ?allowWatchBookmarks=true&resourceVersion=<last>&timeoutSeconds=<300..600>&watch=true
//     ADDED/MODIFIED/DELETED → apply; BOOKMARK → remember its resourceVersion;
//     ERROR 410 (Expired/Gone) → back off, sync again; other ERROR → back off, sync again.
//   The server closing the watch normally → re-watch at once from the last version
//   (a watch that ends within 1 s with no event counts as a failure, as in client-go).
//   Connection refused / 429 → back off and retry the same step (re-watch without syncing again).
//   Any other failure → back off (800 ms ×2 up to 30 s, jittered, reset after 2 min without failure) and sync.
//   Every `resyncMs` the cycle is restarted with a fresh sync: objects missing from the snapshot are
//   deleted, so an event lost on the way (a missed watch window) is healed. (client-go's informer resync
//   only replays its own cache; this one re-reads the server.)
//
// Logs as CoreDNS prints client-go's through its klog adapter (klog at verbosity 0): nothing for connection
// refused, 429, 410 or a watch that ends normally (so an API server that is down costs no log line per
// retry); `[ERROR] Failed to watch: ...` for a failed sync or watch request; `[INFO] Warning: watch ended
// with error ...` for a watch that ended with an error event or too early.
//
// Nothing is ever flushed on errors: the last known state keeps serving.
//
// Why not @kubernetes/client-node's Watch/ListWatch: its ListWatch stops for good on any error other than
// 410 (no backoff and retry), ignores BOOKMARK resourceVersions, does no pagination, no streaming list and
// no periodic relist; the reflector below sits on top of the same KubeConfig credentials.

import type { PluginLogger } from '../plugin.ts';
import { HttpStatusError, type ApiClient, type StreamResponse } from './client.ts';
import type { RawObject } from './controller.ts';
import { FrameReader, PROTOBUF, PROTOBUF_ACCEPT, decodeList, decodeWatchEvent, type ObjectDecoder } from './protobuf.ts';

export interface ReflectorOptions {
  client: ApiClient;
  /** collection path, e.g. /api/v1/services */
  path: string;
  /** for tests and state: `services` */
  name: string;
  /** the object type as client-go names it in its log lines: `*v1.Service` */
  type: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** periodic relist interval; 0 disables */
  resyncMs: number;
  log: PluginLogger;
  /** LIST page size (client-go's pager: 500) */
  pageLimit?: number;
  /** try the streaming list before LIST (client-go's WatchListClient; default true) */
  watchList?: boolean;
  /**
   * The resource's protobuf decoder (protobuf.ts): lists and watches then ask for protobuf first, as CoreDNS's
   * client-go does, and take JSON when the server sends that instead (a server or resource without protobuf).
   */
  decoder?: ObjectDecoder;
}

/**
 * What a reflector feeds. `record` makes the copy of an object that a sync keeps until it is complete (the
 * controller's compact record, or the object itself): a sync of 10k services holds records, and each decoded
 * API object becomes garbage at once, young (no copying into the old generation, a lower peak RSS).
 */
export interface ReflectorHandler<R = RawObject> {
  record(o: RawObject): R;
  replace(items: R[]): void;
  upsert(o: RawObject): void;
  remove(o: RawObject): void;
}

interface ListBody { metadata?: { resourceVersion?: string; continue?: string }; items?: RawObject[] }

interface WatchEvent { type: string; object: RawObject & { code?: number; reason?: string; message?: string; details?: { causes?: { reason?: string }[] } } }

/**
 * How a watch ended. `short`: within 1 s without an event; `failed`: an ERROR event other than 410 (its
 * message in `Reflector.watchError`); `unsynced`: a streaming list's version expired before its initial-events-end
 * bookmark (stream again); `nostream`: it ended otherwise before that bookmark (LIST instead).
 */
type WatchEnd = 'closed' | 'short' | 'expired' | 'failed' | 'unsynced' | 'nostream' | 'resync' | 'stopped';

const INITIAL_BACKOFF = 800;
const MAX_BACKOFF = 30_000;
const RESET_AFTER = 120_000;
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';
/**
 * The `reflector` value of client-go's log lines in CoreDNS 1.15.0 (the reference build): client-go names a
 * reflector after the source position that created it, the same for every informer of the plugin.
 */
const REFLECTOR_NAME = 'pkg/mod/k8s.io/client-go@v0.37.1/tools/cache/reflector.go:343';

/** A watch's timeoutSeconds as client-go's typed clients also send it, as the request's `timeout` (a Go duration). */
function watchTimeout(): Record<string, string> {
  const secs = 300 + Math.floor(Math.random() * 300);
  return { timeout: `${Math.floor(secs / 60)}m${secs % 60}s`, timeoutSeconds: String(secs) };
}

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

/** The failures client-go retries quietly with a back-off (isWatchErrorRetriable). */
function isRetriable(e: unknown): boolean {
  return (e as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED' || (e instanceof HttpStatusError && e.status === 429);
}

/** 410 Expired/Gone, or the "too large resource version" timeout: the version to resume from is unusable. */
function isExpired(e: unknown): boolean {
  if (!(e instanceof HttpStatusError)) return false;
  if (e.status === 410) return true;
  return e.status === 504 && e.body.includes('ResourceVersionTooLarge');
}

/** An error as client-go's text would read: the Status message, or Go's url.Error for a failed connection. */
export function goError(e: unknown, url: string): string {
  if (e instanceof HttpStatusError) return e.message;
  const err = e as NodeJS.ErrnoException & { address?: string; port?: number };
  const addr = err?.address !== undefined ? `${err.address.includes(':') ? `[${err.address}]` : err.address}:${err.port ?? ''}` : '';
  const dial: Record<string, string> = {
    ECONNREFUSED: 'connect: connection refused', EHOSTUNREACH: 'connect: no route to host',
    ENETUNREACH: 'connect: network is unreachable', ETIMEDOUT: 'i/o timeout',
  };
  const code = err?.code ?? '';
  if (dial[code] !== undefined) return `Get "${url}": dial tcp ${addr}: ${dial[code]}`;
  if (code === 'ECONNRESET') return `Get "${url}": read: connection reset by peer`;
  return `Get "${url}": ${err?.message ?? String(e)}`;
}

export class Reflector<R = RawObject> {
  readonly opts: ReflectorOptions;
  private readonly h: ReflectorHandler<R>;
  /** the initial list has been delivered */
  synced = false;
  /** a watch is open right now */
  watching = false;
  lastRv = '';
  /** how many syncs (streaming lists or LISTs) completed (for tests and logs) */
  lists = 0;
  /** how many of them were streaming lists */
  streamedLists = 0;
  private stopped = false;
  private current: StreamResponse | undefined;
  private listAbort: { aborted: boolean; onAbort?: () => void } | undefined;
  private endReason: WatchEnd | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private resyncDue = false;
  private readonly backoff = new Backoff();
  /** the last version was refused as expired or too large: sync from the current state ('') */
  private lastRvUnavailable = false;
  /** a LIST at "0" came back in pages: the server has no watch cache, keep paging (client-go's paginatedResult) */
  private paginatedResult = false;
  /** the message of the ERROR event that ended the last watch */
  private watchError = '';

  constructor(opts: ReflectorOptions, h: ReflectorHandler<R>) {
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

  /** Restart the cycle with a fresh sync (periodic resync). */
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
    // An empty value is left out, as client-go leaves out unset options (resourceVersion="" included).
    for (const k of Object.keys(all).sort()) if (all[k] !== '') p.set(k, all[k]);
    return `${this.opts.path}?${p.toString()}`;
  }

  private url(pathAndQuery: string): string {
    return new URL(pathAndQuery, this.opts.client.server).toString();
  }

  /** client-go's `Failed to watch` line (utilruntime.HandleError through CoreDNS's klog adapter). */
  private failedToWatch(err: string): void {
    this.opts.log.error(`Failed to watch: ${err} logger="UnhandledError" reflector="${REFLECTOR_NAME}" type="${this.opts.type}"`);
  }

  private watchEndedWithError(err: string): void {
    this.opts.log.info(`Warning: watch ended with error reflector="${REFLECTOR_NAME}" type="${this.opts.type}" err=${JSON.stringify(err)}`);
  }

  private async run(): Promise<void> {
    let needSync = true;
    while (!this.stopped) {
      let step = 'watch';
      let lastUrl = '';
      try {
        let end: WatchEnd;
        if (needSync || this.resyncDue) {
          this.resyncDue = false;
          step = 'streaming list';
          let streamed: WatchEnd | undefined;
          if (this.opts.watchList !== false) {
            const q = this.streamingQuery();
            lastUrl = this.url(q);
            streamed = await this.streamingList(q);
          }
          if (streamed === undefined) {
            step = 'list';
            await this.list((u) => { lastUrl = u; });
            if (this.stopped) return;
            step = 'watch';
            const q = this.watchQuery();
            lastUrl = this.url(q);
            end = await this.watch(q, false);
          } else {
            end = streamed;
          }
        } else {
          const q = this.watchQuery();
          lastUrl = this.url(q);
          end = await this.watch(q, false);
        }
        if (this.stopped || end === 'stopped') return;
        if (end === 'unsynced') continue; // the stream ended before its bookmark: stream again
        needSync = false;
        if (end === 'closed') continue;
        if (end === 'resync') { needSync = true; continue; }
        if (end === 'short') {
          this.watchEndedWithError(`very short watch: ${this.opts.name}: Unexpected watch close - watch lasted less than a second and no items received`);
        } else if (end === 'failed') {
          this.watchEndedWithError(this.watchError);
        }
        // 'expired' is quiet: a new sync from the last version (the server sends the state at or after it)
        needSync = true;
      } catch (e) {
        if (this.stopped) return;
        this.watching = false;
        if (isExpired(e)) {
          // The version to resume from is gone: sync again at once from the current state.
          this.lastRvUnavailable = true;
          needSync = true;
          continue;
        }
        if (!isRetriable(e)) {
          // client-go ends this list-and-watch round with the error; the next one starts with a sync.
          needSync = true;
          this.failedToWatch(step === 'list' ? `failed to list ${this.opts.type}: ${goError(e, lastUrl)}` : goError(e, lastUrl));
        }
      }
      if (this.stopped) return;
      await this.sleep(this.backoff.next());
    }
  }

  private streamingQuery(): string {
    return this.query({
      allowWatchBookmarks: 'true', resourceVersion: this.lastRvUnavailable ? '' : this.lastRv, resourceVersionMatch: 'NotOlderThan',
      sendInitialEvents: 'true', ...watchTimeout(), watch: 'true',
    });
  }

  private watchQuery(): string {
    return this.query({ allowWatchBookmarks: 'true', resourceVersion: this.lastRv, ...watchTimeout(), watch: 'true' });
  }

  /**
   * The streaming list; resolves when the stream (which became the watch) ends, or with undefined when the
   * server refused it and a LIST must do instead. Connection refused, 429 and 410 reject (retried by run()).
   */
  private async streamingList(q: string): Promise<WatchEnd | undefined> {
    try {
      const end = await this.watch(q, true);
      return end === 'nostream' ? undefined : end;
    } catch (e) {
      if (isRetriable(e) || isExpired(e) || !(e instanceof HttpStatusError)) throw e;
      return undefined;
    }
  }

  private async list(onUrl: (url: string) => void): Promise<void> {
    const items: R[] = [];
    let cont = '';
    const rv = this.lastRvUnavailable ? '' : this.lastRv === '' ? '0' : this.lastRv;
    // client-go's pager rules: pages of 500 unless listing from a given version, which the watch cache
    // serves whole only without a limit; "0" keeps the limit because the cache ignores it there.
    let limit = this.opts.pageLimit ?? 500;
    if (!this.paginatedResult && rv !== '' && rv !== '0') limit = 0;
    let listRv = '';
    let paged = false;
    for (;;) {
      const params: Record<string, string> = {};
      if (limit > 0) params.limit = String(limit);
      if (cont !== '') params.continue = cont;
      // Pages after the first ride on the continue token, which holds the version.
      else if (rv !== '') params.resourceVersion = rv;
      this.listAbort = { aborted: false };
      let body: ListBody;
      const q = this.query(params);
      onUrl(this.url(q));
      try {
        const dec = this.opts.decoder;
        if (dec === undefined) {
          body = await this.opts.client.getJSON<ListBody>(q, this.listAbort, cont !== '');
        } else {
          const r = await this.opts.client.getBody(q, this.listAbort, cont !== '', PROTOBUF_ACCEPT);
          body = r.contentType.startsWith(PROTOBUF) ? decodeList(r.body, dec) : JSON.parse(r.body.toString('utf8')) as ListBody;
        }
      } catch (e) {
        if (e instanceof HttpStatusError && e.status === 410 && cont !== '') {
          // expired continue token: list again without pagination (client-go's pager does the same)
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
      for (const o of body.items ?? []) items.push(this.h.record(o));
      listRv = body.metadata?.resourceVersion ?? '';
      cont = body.metadata?.continue ?? '';
      if (cont === '') break;
      paged = true;
    }
    if (rv === '0' && paged) this.paginatedResult = true;
    this.lastRvUnavailable = false;
    this.h.replace(items);
    this.lastRv = listRv;
    this.lists++;
    this.synced = true;
  }

  private async watch(q: string, streaming: boolean): Promise<WatchEnd> {
    this.endReason = undefined;
    const dec = this.opts.decoder;
    const s = await this.opts.client.open(q, true, false, dec === undefined ? 'application/json' : PROTOBUF_ACCEPT);
    if (this.stopped) { s.abort(); return 'stopped'; }
    if (this.resyncDue && !streaming) { s.abort(); return 'resync'; }
    this.current = s;
    this.watching = true;
    // The objects of a streaming list until its initial-events-end bookmark.
    let initial: Map<string, R> | undefined = streaming ? new Map() : undefined;
    const t0 = Date.now();
    let events = 0;
    let result: WatchEnd | undefined;
    const apply = (ev: WatchEvent): WatchEnd | undefined => {
      if (initial === undefined) return this.apply(ev);
      const o = ev.object;
      const key = `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
      switch (ev.type) {
        case 'ADDED':
        case 'MODIFIED':
          initial.set(key, this.h.record(o));
          return undefined;
        case 'DELETED':
          initial.delete(key);
          return undefined;
        case 'BOOKMARK':
          if (o.metadata?.annotations?.[INITIAL_EVENTS_END] === 'true') {
            this.lastRvUnavailable = false;
            this.h.replace([...initial.values()]);
            this.lastRv = o.metadata.resourceVersion ?? '';
            this.lists++;
            this.streamedLists++;
            this.synced = true;
            initial = undefined;
          }
          return undefined;
        default:
          return this.apply(ev);
      }
    };
    try {
      await new Promise<void>((resolve, reject) => {
        /** One decoded event; true when the watch must end (`result` set). */
        const onEvent = (ev: WatchEvent): boolean => {
          events++;
          const r = apply(ev);
          if (r === undefined) return false;
          result = r;
          s.abort();
          resolve();
          return true;
        };
        const fail = (e: unknown): true => {
          reject(e as Error);
          s.abort();
          return true;
        };
        if (dec !== undefined && (s.res.headers['content-type'] ?? '').startsWith(PROTOBUF)) {
          // Length-prefixed WatchEvent frames (protobuf.ts), decoded from the chunks as they come.
          const frames = new FrameReader();
          const onFrame = (buf: Buffer, start: number, end: number): boolean => {
            let ev: WatchEvent;
            try {
              ev = decodeWatchEvent(buf, start, end, dec) as WatchEvent;
            } catch (e) {
              return fail(e);
            }
            return onEvent(ev);
          };
          s.res.on('data', (chunk: Buffer) => { frames.push(chunk, onFrame); });
        } else {
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
                fail(e);
                return;
              }
              if (onEvent(ev)) return;
            }
          });
        }
        s.res.on('end', () => { resolve(); });
        s.res.on('close', () => { resolve(); });
        // A stream cut by the server going away ends the watch as a normal close does (client-go treats a
        // probable EOF so); whether the next watch can be opened decides what follows.
        s.res.on('error', () => { resolve(); });
      });
    } finally {
      this.current = undefined;
      this.watching = false;
    }
    if (this.endReason !== undefined) return this.endReason;
    if (initial !== undefined) {
      // Ended before the initial-events-end bookmark. An expired version: stream again at once from the
      // current state. Anything else (an error event, a server that ignored sendInitialEvents and closed):
      // a LIST instead, as client-go falls back.
      if (result === 'expired') {
        this.lastRvUnavailable = true;
        return 'unsynced';
      }
      return 'nostream';
    }
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
        if (code === 504 && (o.details?.causes ?? []).some((c) => c.reason === 'ResourceVersionTooLarge')) {
          this.lastRvUnavailable = true;
          return 'expired';
        }
        this.watchError = o.message ?? JSON.stringify(o);
        return 'failed';
      }
      default:
        return undefined;
    }
    const rv = o.metadata?.resourceVersion;
    if (rv !== undefined && rv !== '') this.lastRv = rv;
    return undefined;
  }
}
