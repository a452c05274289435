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
  /** Reporters by plugin name; several handlers of one plugin (one per block) report as one name. null: said ready. */
  private readonly rs = new Map<string, Readiness[] | null>();

  add(name: string, r: Readiness): void {
    const list = this.rs.get(name);
    if (list === undefined || list === null) this.rs.set(name, [r]);
    else if (!list.includes(r)) list.push(r);
  }

  /** Forget every reporter (a new configuration is collecting its own). */
  clear(): void { this.rs.clear(); }

  check(): ReadyResult {
    if (this.shuttingDown) return { ready: false, notReady: '', shuttingDown: true };
    const not: string[] = [];
    for (const [name, rs] of this.rs) {
      if (rs === null) continue;
      let ok: boolean;
      try {
        ok = rs.every((r) => r.ready());
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
