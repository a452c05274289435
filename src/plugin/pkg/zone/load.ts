// Reading a zone from its master file as CoreDNS's file.Parse does: the SOA's owner must be the origin,
// a reload that finds the serial unchanged reads no further, and a file without SOA is refused.

import type { ResourceRecord, SOAData } from '../../../wire/types.ts';
import { RRType } from '../../../wire/constants.ts';
import { asciiLower, fqdn } from '../../../wire/name.ts';
import { Zone, canonicalEscape } from './zone.ts';
import { ZoneParseError, parseZone } from './zonefile.ts';

/** A reload found the zone's serial unchanged (not logged, as in CoreDNS). */
export class SerialUnchangedError extends Error {
  constructor(file: string, origin: string, serial: number) {
    super(`no change in SOA serial for origin ${origin} in file ${file}, with ${serial} SOA serial`);
    this.name = 'SerialUnchangedError';
  }
}

/** Stops the parse once the serial is known to be unchanged. */
class Unchanged extends Error {}

/**
 * The zone `origin` read from `text` (the contents of `file`). With `serial` >= 0, a SOA carrying that
 * serial stops the read with SerialUnchangedError.
 */
export function zoneFromText(text: string, origin: string, file: string, serial = -1): Zone {
  const z = new Zone(origin);
  let seenSoa = false;
  const onRecord = (rr: ResourceRecord): void => {
    if (rr.type === RRType.SOA) {
      if (asciiLower(canonicalEscape(rr.name)) !== z.origin) {
        throw new Error(`file ${JSON.stringify(file)} has SOA owner ${rr.name} that does not match origin ${z.origin}`);
      }
      if (!seenSoa) {
        seenSoa = true;
        if (serial >= 0 && (rr.data as SOAData).serial === serial) throw new Unchanged();
      }
    }
    z.insert(rr);
  };
  try {
    parseZone(text, fqdn(origin), file, onRecord);
  } catch (e) {
    if (e instanceof Unchanged) throw new SerialUnchangedError(file, origin, serial);
    if (e instanceof ZoneParseError) throw new Error(`failed to parse file ${JSON.stringify(file)} for origin ${origin} with error ${e.message}`);
    throw e;
  }
  if (!seenSoa) throw new Error(`file ${JSON.stringify(file)} has no SOA record for origin ${origin}`);
  return z;
}
