// Upstream selection policies (CoreDNS plugin/forward/policy.go).

export interface Policy {
  readonly name: string;
  list<T>(p: readonly T[]): T[];
}

export class RandomPolicy implements Policy {
  readonly name = 'random';
  list<T>(p: readonly T[]): T[] {
    switch (p.length) {
      case 1:
        return [p[0]!];
      case 2:
        return Math.random() < 0.5 ? [p[1]!, p[0]!] : [p[0]!, p[1]!];
      default: {
        const out = p.slice();
        for (let i = out.length - 1; i > 0; i--) {
          const j = Math.floor(Math.random() * (i + 1));
          const t = out[i]!;
          out[i] = out[j]!;
          out[j] = t;
        }
        return out;
      }
    }
  }
}

export class RoundRobinPolicy implements Policy {
  readonly name = 'round_robin';
  private robin = 0;
  list<T>(p: readonly T[]): T[] {
    this.robin = (this.robin + 1) >>> 0;
    const i = this.robin % p.length;
    const out = [p[i]!];
    for (let k = 0; k < i; k++) out.push(p[k]!);
    for (let k = i + 1; k < p.length; k++) out.push(p[k]!);
    return out;
  }
}

export class SequentialPolicy implements Policy {
  readonly name = 'sequential';
  list<T>(p: readonly T[]): T[] {
    return p.slice();
  }
}
