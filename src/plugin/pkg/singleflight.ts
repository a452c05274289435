// Coalescing of identical in-flight work (Go's golang.org/x/sync/singleflight):
// the first caller for a key runs the function, every caller that arrives while
// it runs gets the same promise. Nothing is remembered once it settles.

export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();

  /** Calls `fn` unless a call for `key` is already running; `shared` tells whether the caller joined one. */
  do(key: string, fn: () => Promise<T>): { promise: Promise<T>; shared: boolean } {
    const running = this.inflight.get(key);
    if (running !== undefined) return { promise: running, shared: true };
    const p = fn();
    this.inflight.set(key, p);
    const clear = (): void => {
      if (this.inflight.get(key) === p) this.inflight.delete(key);
    };
    p.then(clear, clear);
    return { promise: p, shared: false };
  }

  /** Number of keys with a call in flight. */
  get size(): number {
    return this.inflight.size;
  }

  /** Stop sharing the running call for `key`: later callers start a new one. */
  forget(key: string): void {
    this.inflight.delete(key);
  }
}
