// geoip's Corefile syntax (CoreDNS plugin/geoip/setup.go). As in CoreDNS the database is opened while
// parsing: a missing, unreadable or unsupported file is a parse error at the directive's line.

import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { goQuote } from '../../corefile/address.ts';
import { GeoipDatabase } from './db.ts';
import { GeoIP } from './geoip.ts';

/** What `geoip DBFILE [{ edns-subnet }]` configures. */
export interface GeoipOptions {
  /** DBFILE as written (relative paths resolve against the working directory, as in CoreDNS). */
  dbPath: string;
  /** `edns-subnet`: look up the query's EDNS0 client-subnet address (if any) instead of the client's. */
  ednsSubnet: boolean;
  /** The opened database. */
  db: GeoipDatabase;
}

/** Reads the block's `geoip` line and opens its database; errors carry the Corefile's file:line. */
export function parse(c: SetupContext): GeoipOptions {
  const d = c.dispenser;
  let dbPath = '';
  let ednsSubnet = false;
  while (d.next()) {
    if (!d.nextArg()) throw d.argErr();
    if (dbPath !== '') throw d.errf('configuring multiple databases is not supported');
    dbPath = d.val();
    if (d.remainingArgs().length !== 0) throw d.argErr();
    while (d.nextBlock()) {
      if (d.val() !== 'edns-subnet') throw d.errf(`unknown property ${goQuote(d.val())}`);
      ednsSubnet = true;
    }
  }
  let db: GeoipDatabase;
  try {
    db = new GeoipDatabase(dbPath);
  } catch (e) {
    throw d.err((e as Error).message);
  }
  return { dbPath, ednsSubnet, db };
}

export const plugin: PluginDefinition = {
  name: 'geoip',
  setup(c) {
    const o = parse(c);
    c.addPlugin((next) => new GeoIP(o.db, o.ednsSubnet, c.log, next));
  },
};
