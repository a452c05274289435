// Coalescing of identical in-flight work (Go's golang.org/x/sync/singleflight):
// the first caller for a key runs the function, every caller that arrives while
// it runs gets the same promise. Nothing is remembered once it settles.

/** One call in flight: its promise, and how many callers joined it (final once it settled). */
export interface Flight<T> {
  readonly promise: Promise<T>;
  joined: number;
}

export class SingleFlight<T> {
  private readonly inflight = new Map<string, Flight<T>>();

  /**
   * Calls `fn` unless a call for `key` is already running, and returns that call's flight. The caller joined a
   * running call when `flight.joined` is not 0 right after this returns (it counts the callers that joined); the
   * caller that ran `fn` can read it again once the promise settled: still 0 means the result is its alone.
   * (No result object per call: this runs for every forwarded miss.)
   */
  do(key: string, fn: () => Promise<T>): Flight<T> {
    const running = this.inflight.get(key);
    if (running !== undefined) {
      running.joined++;
      return running;
    }
    const p = fn();
    const flight: Flight<T> = { promise: p, joined: 0 };
    this.inflight.set(key, flight);
    const clear = (): void => {
      if (this.inflight.get(key) === flight) this.inflight.delete(key);
    };
    p.then(clear, clear);
    return flight;
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
