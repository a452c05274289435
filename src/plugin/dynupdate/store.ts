// dynupdate's data: the seed read from its master file (CoreDNS's readZoneLimited), the snapshot served to
// queries and transfers (a pkg/zone Zone, rebuilt whole after each change, as CoreDNS rebuilds its file.Zone),
// and the optional database that makes accepted updates durable.
//
// CoreDNS keeps its database in bbolt; nodens keeps it in a file of its own format (a Go database file cannot be
// shared between the two anyway): a magic line, the zone's origin, then each record as a one-record DNS message
// with a 32-bit length before it. A commit writes the whole zone to `PATH.tmp`, fsyncs it, renames it over PATH and
// fsyncs the directory, so after a crash PATH holds either the previous or the new generation, never a mix.

import { closeSync, fsyncSync, openSync, readFileSync, renameSync, statSync, writeSync, type Stats } from 'node:fs';
import { dirname } from 'node:path';
import type { ResourceRecord } from '../../wire/types.ts';
import { RRType } from '../../wire/constants.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newMessage } from '../../wire/message.ts';
import { Zone } from '../pkg/zone/zone.ts';
import { ZoneParseError, parseZone } from '../pkg/zone/zonefile.ts';
import { goOpenError } from '../pkg/zone/errors.ts';
import { checkLimits, copyRecord, recordLength, validateRecords, type Limits } from './rules.ts';

/** A zone generation: its records (in CoreDNS's order: apex, then names in canonical order) and its lookup view. */
export interface Snapshot {
  readonly records: ResourceRecord[];
  readonly zone: Zone;
}

/** CoreDNS's build: limits and invariants checked, then a fresh Zone from copies of the records. */
export function buildSnapshot(records: ResourceRecord[], origin: string, limits: Limits): Snapshot {
  checkLimits(records, limits);
  validateRecords(records, origin);
  const z = new Zone(origin);
  for (const rr of records) z.insert(copyRecord(rr));
  return { records, zone: z };
}

/**
 * CoreDNS's readZoneLimited: the seed file parsed ($INCLUDE allowed), bounded by the zone limits while it is read,
 * with exactly one SOA; the records in the order of CoreDNS's file.Zone (apex first), validated.
 */
export function readSeed(path: string, origin: string, limits: Limits): ResourceRecord[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`opening zone file ${JSON.stringify(path)}: ${goOpenError(path, e)}`);
  }
  const z = new Zone(origin);
  let soaCount = 0, count = 0, remaining = limits.bytes;
  try {
    parseZone(text, origin, path, (rr) => {
      count++;
      const size = recordLength(rr);
      if (count > limits.records || size > remaining) throw new LimitError(`zone file ${JSON.stringify(path)} exceeds configured limits`);
      remaining -= size;
      if (rr.type === RRType.SOA) soaCount++;
      z.insert(rr);
    });
  } catch (e) {
    if (e instanceof LimitError) throw e;
    if (e instanceof ZoneParseError || e instanceof Error) throw new Error(`parsing zone file ${JSON.stringify(path)}: ${e.message}`);
    throw e;
  }
  if (soaCount === 0) throw new Error(`zone ${JSON.stringify(origin)} has no SOA`);
  if (soaCount !== 1) throw new Error(`zone ${JSON.stringify(origin)} contains more than one SOA`);
  const records: ResourceRecord[] = [];
  for (const rr of z.apexRecords() ?? []) records.push(copyRecord(rr));
  for (const e of z.elems()) for (const rr of e.all()) records.push(copyRecord(rr));
  try {
    validateRecords(records, origin);
  } catch (e) {
    throw new Error(`invalid zone ${JSON.stringify(origin)}: ${(e as Error).message}`);
  }
  return records;
}

class LimitError extends Error {}

const MAGIC = 'nodens-dynupdate 1\n';

/** The database's bytes for `records` of zone `origin`. */
export function encodeDatabase(origin: string, records: readonly ResourceRecord[]): Buffer {
  const parts: Buffer[] = [Buffer.from(MAGIC, 'latin1')];
  const o = Buffer.from(origin, 'latin1');
  const ol = Buffer.alloc(2);
  ol.writeUInt16BE(o.length, 0);
  parts.push(ol, o);
  for (const rr of records) {
    const m = newMessage();
    m.answer.push(rr);
    const wire = encodeMessage(m, { compress: false });
    const len = Buffer.alloc(4);
    len.writeUInt32BE(wire.length, 0);
    parts.push(len, wire);
  }
  return Buffer.concat(parts);
}

/** A file that is not a database at all (bbolt's "invalid database", which CoreDNS reports while opening it). */
export class InvalidDatabaseError extends Error {
  constructor() {
    super('invalid database');
    this.name = 'InvalidDatabaseError';
  }
}

/** A database's records; throws the errors CoreDNS's load gives (wrong zone, unknown format, over the limits). */
export function decodeDatabase(data: Buffer, origin: string, limits: Limits): ResourceRecord[] {
  if (data.length < MAGIC.length || data.toString('latin1', 0, MAGIC.length) !== MAGIC) throw new InvalidDatabaseError();
  if (data.length < MAGIC.length + 2) throw new Error('unrecognized database format');
  let p = MAGIC.length;
  const ol = data.readUInt16BE(p);
  p += 2;
  if (p + ol > data.length) throw new Error('unrecognized database format');
  if (data.toString('latin1', p, p + ol) !== origin) throw new Error('database belongs to a different zone');
  p += ol;
  const records: ResourceRecord[] = [];
  let bytes = 0;
  while (p < data.length) {
    if (records.length === limits.records) throw new Error(`stored zone exceeds max_records (${limits.records})`);
    if (p + 4 > data.length) throw new Error('invalid stored record length');
    const len = data.readUInt32BE(p);
    p += 4;
    if (len < 12 || p + len > data.length) throw new Error('invalid stored record length');
    const m = decodeMessage(data.subarray(p, p + len));
    if (m.answer.length !== 1) throw new Error('invalid stored record length');
    const rr = m.answer[0]!;
    bytes += recordLength(rr);
    if (bytes > limits.bytes) throw new Error(`invalid stored zone size (max_bytes ${limits.bytes})`);
    records.push(rr);
    p += len;
  }
  if (records.length === 0) throw new Error(`invalid stored zone size (max_bytes ${limits.bytes})`);
  checkLimits(records, limits);
  return records;
}

/** Writes the database atomically and durably (temporary file, fsync, rename, directory fsync), mode 0600. */
export function writeDatabase(path: string, data: Buffer): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    let off = 0;
    while (off < data.length) off += writeSync(fd, data, off, data.length - off);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dfd = openSync(dirname(path), 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}

/** stat, undefined when the file does not exist; other errors thrown. */
export function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** The same file (os.SameFile): device and inode. */
export function sameFile(a: Stats, b: Stats): boolean {
  return a.dev === b.dev && a.ino === b.ino;
}

/**
 * One database open in this server (CoreDNS's zoneStore): shared by the instances of a reload that name it,
 * so an old instance and a new one serialize their updates on the same generation. Lives in the server's
 * lineage store, keyed by absolute path.
 */
export class SharedStore {
  readonly path: string;
  readonly origin: string;
  snapshot: Snapshot;
  refs = 1;

  constructor(path: string, origin: string, snapshot: Snapshot) {
    this.path = path;
    this.origin = origin;
    this.snapshot = snapshot;
  }

  /** Durably writes `next` before it becomes the served generation (a failed write publishes nothing). */
  commit(next: Snapshot): void {
    writeDatabase(this.path, encodeDatabase(this.origin, next.records));
    this.snapshot = next;
  }
}
