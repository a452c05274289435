// Setup of dynupdate (CoreDNS 1.15.0 plugin/dynupdate setup.go): one writable zone per server block, its seed
// file, optional database, `allow` rules and limits. The block admits opcode UPDATE (CoreDNS's
// Config.AllowOpcode); the transfer plugin of the block, if any, gets a NOTIFY after each committed change.

import { isAbsolute, join, normalize, resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import type { PluginDefinition, SetupContext } from '../plugin.ts';
import { normalizeHostExact, normalizeName } from '../../corefile/address.ts';
import { Opcode, stringToType } from '../../wire/constants.ts';
import { isDomainName } from '../../wire/name.ts';
import { isNotifier } from '../pkg/transfer.ts';
import { goOpenError } from '../pkg/zone/errors.ts';
import { workerId } from '../pkg/workers.ts';
import { ALL_NAMES, DynUpdate, type Permission } from './dynupdate.ts';
import { canonicalName, inZone, validPolicyType, withDefaults, type Limits } from './rules.ts';
import {
  InvalidDatabaseError, SharedStore, buildSnapshot, decodeDatabase, encodeDatabase, readSeed, sameFile, statOrUndefined, writeDatabase, type Snapshot,
} from './store.ts';

/** What `dynupdate [ZONE] { ... }` configures. */
export interface DynUpdateOptions {
  /** The zone (canonical FQDN). */
  zone: string;
  /** The seed file, with the block's root prepended when relative. */
  seed: string;
  /** The database's absolute path; '' for memory only. */
  database: string;
  permissions: Permission[];
  /** The limits, defaults filled in. */
  limits: Limits;
}

/** Go's filepath.Join: joined and cleaned ('' parts dropped). */
function goJoin(a: string, b: string): string {
  const j = a === '' ? normalize(b) : normalize(join(a, b));
  return j.length > 1 && j.endsWith('/') ? j.slice(0, -1) : j;
}

function normalizeServerBlockZones(keys: readonly string[]): string[] {
  const seen = new Set<string>();
  for (const key of keys) {
    const hosts = normalizeHostExact(key);
    if (hosts.length !== 1 || hosts[0] === '') throw new Error(`invalid server block zone ${JSON.stringify(key)}`);
    const zone = canonicalName(hosts[0]!);
    if (!isDomainName(zone)) throw new Error(`invalid server block zone ${JSON.stringify(key)}`);
    seen.add(zone);
  }
  return [...seen];
}

function parseOrigin(args: readonly string[], keys: readonly string[]): string {
  let token: string;
  if (args.length === 0) {
    const zones = normalizeServerBlockZones(keys);
    if (zones.length !== 1) throw new Error('zone is required when the server block does not define exactly one zone');
    token = zones[0]!;
  } else if (args.length === 1) {
    token = args[0]!;
  } else {
    throw new Error('exactly one zone is allowed');
  }
  const hosts = normalizeHostExact(token);
  if (hosts.length !== 1 || hosts[0] === '') throw new Error(`invalid zone ${JSON.stringify(token)}`);
  const origin = canonicalName(hosts[0]!);
  if (!isDomainName(origin)) throw new Error(`invalid zone ${JSON.stringify(token)}`);
  return origin;
}

/** An RR type name or TYPEn (not 0, not 65535), as CoreDNS's parseRRType. */
function parseRRType(raw: string): number | undefined {
  const t = stringToType(raw);
  if (t === undefined || t === 0 || t === 65535) return undefined;
  return t;
}

function parsePermission(args: readonly string[], origin: string): Permission {
  if (args.length < 3) throw new Error('allow requires KEY NAME and at least one RR type');
  const rawKey = args[0]!;
  if (rawKey.trim() === '' || rawKey === '*' || rawKey === '@') throw new Error(`invalid TSIG key ${JSON.stringify(rawKey)}`);
  const key = normalizeName(rawKey);
  if (!isDomainName(key)) throw new Error(`invalid TSIG key ${JSON.stringify(rawKey)}`);
  let name = ALL_NAMES;
  if (args[1] !== ALL_NAMES) {
    name = args[1] === '@' ? origin : canonicalName(args[1]!);
    if (!isDomainName(name) || !inZone(origin, name)) {
      throw new Error(`allow name ${JSON.stringify(args[1])} is outside zone ${JSON.stringify(origin)}`);
    }
  }
  const types = new Set<number>();
  let allTypes = false;
  for (const raw of args.slice(2)) {
    if (raw === '*') {
      if (args.length !== 3) throw new Error('wildcard RR type must be the only type in an allow rule');
      allTypes = true;
      continue;
    }
    const t = parseRRType(raw);
    if (t === undefined || !validPolicyType(t)) throw new Error(`invalid RR type ${JSON.stringify(raw)} in allow rule`);
    types.add(t);
  }
  return { key, name, types, allTypes };
}

/** Reads the block's `dynupdate` directive (only one per block). */
export function parse(c: SetupContext): DynUpdateOptions {
  const d = c.dispenser;
  d.next();
  const zone = parseOrigin(d.remainingArgs(), c.config.keys);
  let seed: string | undefined;
  let database = '';
  const permissions: Permission[] = [];
  const limits: Limits = { records: 0, bytes: 0, updateRecords: 0 };
  const seen = new Set<string>();
  while (d.nextBlock()) {
    const property = d.val();
    if (property !== 'allow' && seen.has(property)) throw d.errf(`${property} specified more than once`);
    seen.add(property);
    switch (property) {
      case 'database': {
        const a = d.remainingArgs();
        if (a.length !== 1 || a[0] === '') throw d.argErr();
        database = a[0]!;
        break;
      }
      case 'max_records': case 'max_bytes': case 'max_update_records': {
        const a = d.remainingArgs();
        if (a.length !== 1) throw d.argErr();
        // strconv.Atoi: an optional sign and decimal digits that fit in 64 bits.
        const n = /^[+-]?[0-9]+$/.test(a[0]!) ? Number(a[0]) : NaN;
        if (!Number.isSafeInteger(n) || n <= 0) throw d.errf(`${property} requires a positive integer`);
        if (property === 'max_records') limits.records = n;
        else if (property === 'max_bytes') limits.bytes = n;
        else limits.updateRecords = n;
        break;
      }
      case 'file': {
        const a = d.remainingArgs();
        if (a.length !== 1) throw d.argErr();
        seed = a[0]!;
        break;
      }
      case 'allow':
        permissions.push(parsePermission(d.remainingArgs(), zone));
        break;
      default:
        throw d.errf(`unknown property ${JSON.stringify(property)}`);
    }
  }
  if (d.next()) throw new Error('this plugin can only be used once per Server Block');
  if (seed === undefined) throw d.err('file is required');
  if (permissions.length === 0) throw d.err('at least one allow rule is required');
  const root = c.config.root;
  if (!isAbsolute(seed) && root !== '') seed = goJoin(root, seed);
  if (database !== '') database = resolve(isAbsolute(database) ? database : goJoin(root, database));
  return { zone, seed, database, permissions, limits: withDefaults(limits) };
}

/** The databases open in one server, shared by the instances of a reload (CoreDNS's process-wide stores map). */
type StoreMap = Map<string, SharedStore>;

/**
 * CoreDNS's acquireStore. readOnly (setup): validates without creating or changing anything, and registers
 * nothing. Otherwise: the store already open for this file (same path or same inode), or the database opened,
 * or, when it does not exist, created from the seed.
 */
function acquireStore(o: DynUpdateOptions, stores: StoreMap, readOnly: boolean): SharedStore {
  const path = o.database;
  const info = statOrUndefined(path);
  const seedInfo = statOrUndefined(o.seed);
  if (info !== undefined && seedInfo !== undefined && sameFile(info, seedInfo)) throw new Error('database and seed must be different files');
  for (const [p, s] of stores) {
    let same = p === path;
    if (!same && info !== undefined) {
      const other = statOrUndefined(p);
      same = other !== undefined && sameFile(info, other);
    }
    if (!same) continue;
    if (s.origin !== o.zone) throw new Error(`database already serves zone ${JSON.stringify(s.origin)}`);
    buildSnapshot(s.snapshot.records, o.zone, o.limits); // this instance's limits hold for the shared zone
    s.refs++;
    return s;
  }
  let snap: Snapshot;
  if (info === undefined) {
    snap = buildSnapshot(readSeed(o.seed, o.zone, o.limits), o.zone, o.limits);
    if (readOnly) return new SharedStore(path, o.zone, snap);
    try {
      writeDatabase(path, encodeDatabase(o.zone, snap.records));
    } catch (e) {
      throw new Error(`opening database ${JSON.stringify(path)}: ${goOpenError(path, e)}`);
    }
  } else {
    let data: Buffer;
    try {
      data = readFileSync(path);
    } catch (e) {
      throw new Error(`opening database ${JSON.stringify(path)}: ${goOpenError(path, e)}`);
    }
    try {
      snap = buildSnapshot(decodeDatabase(data, o.zone, o.limits), o.zone, o.limits);
    } catch (e) {
      const what = e instanceof InvalidDatabaseError ? 'opening' : 'loading';
      throw new Error(`${what} database ${JSON.stringify(path)}: ${(e as Error).message}`);
    }
  }
  const s = new SharedStore(path, o.zone, snap);
  if (!readOnly) stores.set(path, s);
  return s;
}

function releaseStore(stores: StoreMap, s: SharedStore): void {
  if (--s.refs !== 0) return;
  for (const [p, x] of stores) {
    if (x === s) {
      stores.delete(p);
      break;
    }
  }
}

export const plugin: PluginDefinition = {
  name: 'dynupdate',
  setup(c) {
    const o = parse(c);
    // Under `nodens -workers N` each worker thread would hold a zone of its own: an update would change the
    // one worker that received it (and, with a database, workers would overwrite each other's commits).
    // An application's own worker threads are not refused (workerId() knows only -workers threads).
    if (workerId() > 0) throw new Error('dynupdate cannot run under -workers: each worker would hold its own copy of the zone');
    let initial: Snapshot;
    let acquire: (() => SharedStore) | undefined;
    const stores = c.instance.lineage.store<StoreMap>('dynupdate/stores', () => new Map());
    if (o.database !== '') {
      // Validation only: a missing database is created on the first query, transfer or update.
      initial = acquireStore(o, stores, true).snapshot;
      acquire = () => acquireStore(o, stores, false);
    } else {
      const records = readSeed(o.seed, o.zone, o.limits);
      try {
        initial = buildSnapshot(records, o.zone, o.limits);
      } catch (e) {
        throw new Error(`building zone ${JSON.stringify(o.zone)}: ${(e as Error).message}`);
      }
    }
    const fileLog = c.instance.log.plugin?.('file') ?? c.log;
    const h = new DynUpdate({
      zone: o.zone, permissions: o.permissions, limits: o.limits, acquire, release: (s) => { releaseStore(stores, s); },
    }, initial, c.log, fileLog);
    c.config.allowOpcode(Opcode.UPDATE);
    c.addPlugin((next) => { h.next = next; return h; });
    c.onStartup(() => {
      const t = c.config.handlers.find((x) => x.name === 'transfer');
      h.notifier = t !== undefined && isNotifier(t) ? t : undefined;
    });
    c.onShutdown(() => { h.close(); });
  },
};
