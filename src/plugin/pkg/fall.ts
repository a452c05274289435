// `fallthrough [ZONES...]` (CoreDNS plugin/pkg/fall).
//
// An empty zone list means "never fall through"; `fallthrough` without
// arguments means "everything" (`.`); zones are normalised like server block
// keys (lower-case, fully qualified, CIDR expanded).

import { normalizeZones } from '../../corefile/address.ts';
import { zonesMatches } from './zones.ts';

export class Fall {
  zones: string[] = [];

  /** Sets the zones from the directive's arguments; none → `.`. */
  setZonesFromArgs(args: readonly string[]): void {
    this.zones = normalizeZones(args.length === 0 ? ['.'] : [...args]);
  }

  /** Should a query for `qname` (lower-cased) go to the next plugin? */
  through(qname: string): boolean {
    const z = this.zones;
    if (z.length === 1 && z[0] === '.') return true;
    return zonesMatches(z, qname) !== '';
  }

  /** True when `fallthrough` was configured at all. */
  get enabled(): boolean {
    return this.zones.length > 0;
  }
}
