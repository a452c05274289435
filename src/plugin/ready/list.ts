// The plugins /ready asks (CoreDNS plugin/ready/list.go): name → reporter. In
// `until-ready` mode a plugin that once said ready is not asked again.

import type { Readiness } from '../plugin.ts';

export interface ReadyResult {
  ready: boolean;
  /** Comma-separated, sorted names of the plugins not ready ('' when ready). */
  notReady: string;
  shuttingDown: boolean;
}

export class ReadyList {
  /** `monitor continuously`: ask every plugin on every request. */
  keepReadiness = false;
  shuttingDown = false;
  private readonly rs = new Map<string, Readiness | null>();

  add(name: string, r: Readiness): void {
    this.rs.set(name, r);
  }

  check(): ReadyResult {
    if (this.shuttingDown) return { ready: false, notReady: '', shuttingDown: true };
    const not: string[] = [];
    for (const [name, r] of this.rs) {
      if (r === null) continue;
      let ok: boolean;
      try {
        ok = r.ready();
      } catch {
        ok = false;
      }
      if (ok) {
        if (!this.keepReadiness) this.rs.set(name, null);
        continue;
      }
      not.push(name);
    }
    if (not.length === 0) return { ready: true, notReady: '', shuttingDown: false };
    not.sort();
    return { ready: false, notReady: not.join(','), shuttingDown: false };
  }
}
