// The geoip plugin's database: an .mmdb file read with mmdb-lib (the reader behind MaxMind's `maxmind`
// package), typed as CoreDNS's geoip2-golang v2 types it: the database type in the file's metadata says
// which lookups it allows (City, ASN), and each record is turned into the plugin's label values once
// (cached per record), so a query costs a tree walk and a few map sets.

import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { Reader, type Response } from 'mmdb-lib';
import { goQuote } from '../../corefile/address.ts';

/** Schemas the plugin reads (CoreDNS's `city` and `asn` bits). */
export const CITY = 1;
export const ASN = 2;

/** City labels, in the order of `cityValues`. */
export const CITY_LABELS = [
  'geoip/city/name', 'geoip/country/name', 'geoip/continent/name', 'geoip/country/code',
  'geoip/subdivisions/code', 'geoip/country/is_in_european_union', 'geoip/continent/code',
  'geoip/latitude', 'geoip/longitude', 'geoip/timezone', 'geoip/postalcode',
] as const;

/** ASN labels, in the order of `asnValues`. */
export const ASN_LABELS = ['geoip/asn/number', 'geoip/asn/org'] as const;

/** geoip2-golang's database types and the lookups each allows (its getDBType). */
const DB_TYPES: ReadonlyMap<string, number> = new Map([
  ['GeoIP-Anonymous-Plus', 0],
  ['GeoIP2-Anonymous-IP', 0],
  ['DBIP-ASN-Lite (compat=GeoLite2-ASN)', ASN],
  ['GeoLite2-ASN', ASN],
  ['DBIP-City-Lite', CITY],
  ['DBIP-Country-Lite', CITY],
  ['DBIP-Country', CITY],
  ['DBIP-Location (compat=City)', CITY],
  ['GeoLite2-City', CITY],
  ['GeoIP-City-Redacted-US', CITY],
  ['GeoIP2-City', CITY],
  ['GeoIP2-City-Africa', CITY],
  ['GeoIP2-City-Asia-Pacific', CITY],
  ['GeoIP2-City-Europe', CITY],
  ['GeoIP2-City-North-America', CITY],
  ['GeoIP2-City-South-America', CITY],
  ['GeoIP2-Precision-City', CITY],
  ['GeoLite2-Country', CITY],
  ['GeoIP2-Country', CITY],
  ['GeoIP2-Connection-Type', 0],
  ['GeoIP2-Domain', 0],
  ['DBIP-ISP (compat=Enterprise)', CITY],
  ['DBIP-Location-ISP (compat=Enterprise)', CITY],
  ['GeoIP-Enterprise-Redacted-US', CITY],
  ['GeoIP2-Enterprise', CITY],
  ['GeoIP2-ISP', ASN],
  ['GeoIP2-Precision-ISP', ASN],
]);

const METADATA_MARKER = Buffer.from('\xab\xcd\xefMaxMind.com', 'latin1');
/** CoreDNS probes each schema with this address when it opens the database. */
const PROBING_IP = '127.0.0.1';
/** Decoded records kept by data offset (mmdb-lib's cache); cleared when full. */
const RECORD_CACHE_MAX = 8192;

type Rec = Record<string, unknown>;

/** A lookup error (geoip2-golang's): the query gets no labels of that schema. */
export class LookupError extends Error {}

/** mmdb-lib's decoded-record cache, bounded. */
class RecordCache {
  private readonly m = new Map<string | number, unknown>();
  get(key: string | number): unknown { return this.m.get(key); }
  set(key: string | number, value: unknown): void {
    if (this.m.size >= RECORD_CACHE_MAX) this.m.clear();
    this.m.set(key, value);
  }
}

/** Go's os error texts for what opening a file can fail with. */
function openErrorText(path: string, e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  switch (code) {
    case 'ENOENT': return `open ${path}: no such file or directory`;
    case 'EACCES': return `open ${path}: permission denied`;
    case 'ENOTDIR': return `open ${path}: not a directory`;
    case 'EISDIR': return `read ${path}: is a directory`;
    case 'ELOOP': return `open ${path}: too many levels of symbolic links`;
    case 'ENAMETOOLONG': return `open ${path}: file name too long`;
    default: return `open ${path}: ${(e as Error).message}`;
  }
}

const EMPTY: Rec = {};
const NOT_FOUND = Object.freeze({}) as Rec;

function map(parent: Rec, key: string, goType: string): Rec {
  const v = parent[key];
  if (v === undefined) return EMPTY;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw unmarshal(v, goType);
  return v as Rec;
}

function str(parent: Rec, key: string): string {
  const v = parent[key];
  if (v === undefined) return '';
  if (typeof v !== 'string') throw unmarshal(v, 'string');
  return v;
}

function typeName(v: unknown): string {
  if (typeof v === 'string') return 'utf8_string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) ? 'uint32' : 'float64';
  if (typeof v === 'bigint') return 'uint64';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Uint8Array) return 'bytes';
  return 'map';
}

/** geoip2-golang's decoding error for a value of the wrong type (reported at debug level). */
function unmarshal(v: unknown, goType: string): LookupError {
  return new LookupError(`maxminddb: cannot unmarshal ${typeName(v)} into type ${goType}`);
}

/** Go's strconv.FormatFloat(f, 'f', -1, 64): the shortest round-trip digits, never an exponent. */
export function formatFloat(f: number): string {
  if (Number.isNaN(f)) return 'NaN';
  if (f === Infinity) return '+Inf';
  if (f === -Infinity) return '-Inf';
  const neg = f < 0 || Object.is(f, -0);
  const s = String(Math.abs(f));
  const e = s.indexOf('e');
  if (e < 0) return neg ? '-' + s : s;
  const mant = s.slice(0, e);
  const exp = Number(s.slice(e + 1));
  const dot = mant.indexOf('.');
  const digits = dot < 0 ? mant : mant.slice(0, dot) + mant.slice(dot + 1);
  const intLen = (dot < 0 ? mant.length : dot) + exp;
  let out: string;
  if (intLen <= 0) out = '0.' + '0'.repeat(-intLen) + digits;
  else if (intLen >= digits.length) out = digits + '0'.repeat(intLen - digits.length);
  else out = digits.slice(0, intLen) + '.' + digits.slice(intLen);
  return neg ? '-' + out : out;
}

function float(parent: Rec, key: string): string {
  const v = parent[key];
  if (v === undefined) return '';
  if (typeof v !== 'number') throw unmarshal(v, 'float64');
  return formatFloat(v);
}

/** The City record's label values, in CITY_LABELS order (geoip2-golang's zero values for what is missing). */
function cityValues(r: Rec): string[] {
  const city = map(r, 'city', 'geoip2.CityRecord');
  const country = map(r, 'country', 'geoip2.CountryRecord');
  const continent = map(r, 'continent', 'geoip2.Continent');
  const location = map(r, 'location', 'geoip2.Location');
  const postal = map(r, 'postal', 'geoip2.Postal');
  const subs = r.subdivisions;
  let subdivisions = '';
  if (subs !== undefined) {
    if (!Array.isArray(subs)) throw unmarshal(subs, '[]geoip2.Subdivision');
    const codes: string[] = [];
    for (const s of subs as unknown[]) {
      if (typeof s !== 'object' || s === null || Array.isArray(s)) throw unmarshal(s, 'geoip2.Subdivision');
      codes.push(str(s as Rec, 'iso_code'));
    }
    subdivisions = codes.join(',');
  }
  const eu = country.is_in_european_union;
  if (eu !== undefined && typeof eu !== 'boolean') throw unmarshal(eu, 'bool');
  return [
    str(map(city, 'names', 'geoip2.Names'), 'en'),
    str(map(country, 'names', 'geoip2.Names'), 'en'),
    str(map(continent, 'names', 'geoip2.Names'), 'en'),
    str(country, 'iso_code'),
    subdivisions,
    eu === true ? 'true' : 'false',
    str(continent, 'code'),
    float(location, 'latitude'),
    float(location, 'longitude'),
    str(location, 'time_zone'),
    str(postal, 'code'),
  ];
}

/** The ASN record's label values, in ASN_LABELS order. */
function asnValues(r: Rec): string[] {
  const n = r.autonomous_system_number;
  let number = '0';
  if (n !== undefined) {
    if (typeof n === 'bigint' && n >= 0n) number = n.toString();
    else if (typeof n === 'number' && Number.isInteger(n) && n >= 0) number = String(n);
    else throw unmarshal(n, 'uint');
  }
  return [number, str(r, 'autonomous_system_organization')];
}

/** An opened .mmdb database, as geoip2-golang's Reader with CoreDNS's `provides` bits. */
export class GeoipDatabase {
  readonly path: string;
  readonly databaseType: string;
  /** CITY | ASN: the schemas the database answers. */
  readonly provides: number;
  private readonly reader: Reader<Response>;
  private readonly ipv4Only: boolean;
  private readonly cityCache = new WeakMap<object, string[]>();
  private readonly asnCache = new WeakMap<object, string[]>();
  private readonly emptyCity: string[];
  private readonly emptyAsn: string[];

  /** Opens and checks the database; throws an Error with CoreDNS's text (newGeoIP). */
  constructor(path: string) {
    this.path = path;
    let buf: Buffer;
    try {
      buf = readFileSync(path);
    } catch (e) {
      throw new Error(`failed to open database file: ${openErrorText(path, e)}`);
    }
    if (buf.length === 0) throw new Error('failed to open database file: file is empty');
    if (buf.lastIndexOf(METADATA_MARKER) < 0) {
      throw new Error('failed to open database file: error opening database: invalid MaxMind DB file');
    }
    try {
      this.reader = new Reader<Response>(buf, { cache: new RecordCache() });
    } catch (e) {
      throw new Error(`failed to open database file: ${(e as Error).message}`);
    }
    const type = this.reader.metadata.databaseType;
    this.databaseType = type;
    const allowed = DB_TYPES.get(type);
    if (allowed === undefined) {
      throw new Error(`failed to open database file: geoip2: reader does not support the ${goQuote(type)} database type`);
    }
    this.ipv4Only = this.reader.metadata.ipVersion === 4;
    this.emptyCity = cityValues(EMPTY);
    this.emptyAsn = asnValues(EMPTY);
    let provides = 0;
    for (const [bit, name] of [[CITY, 'city'], [ASN, 'asn']] as const) {
      if ((allowed & bit) === 0) continue; // geoip2.InvalidMethodError: the schema is not provided
      try {
        if (bit === CITY) this.city(PROBING_IP); else this.asn(PROBING_IP);
      } catch (e) {
        throw new Error(`unexpected failure looking up database ${goQuote(basename(path))} schema ${goQuote(name)}: ${(e as Error).message}`);
      }
      provides |= bit;
    }
    if (provides === 0) throw new Error('database does not provide any supported schema (city, asn)');
    this.provides = provides;
  }

  private record(ip: string): Rec {
    if (this.ipv4Only && ip.includes(':')) {
      throw new LookupError(`error looking up '${ip}': you attempted to look up an IPv6 address in an IPv4-only database`);
    }
    let r: unknown;
    try {
      r = this.reader.get(ip);
    } catch (e) {
      throw new LookupError((e as Error).message);
    }
    if (r === null || r === undefined) return NOT_FOUND;
    if (typeof r !== 'object' || Array.isArray(r)) throw unmarshal(r, 'geoip2.City');
    return r as Rec;
  }

  /** The city label values for `ip` (CITY_LABELS order); throws LookupError. */
  city(ip: string): string[] {
    const r = this.record(ip);
    if (r === NOT_FOUND) return this.emptyCity;
    let v = this.cityCache.get(r);
    if (v === undefined) {
      v = cityValues(r);
      this.cityCache.set(r, v);
    }
    return v;
  }

  /** The ASN label values for `ip` (ASN_LABELS order); throws LookupError. */
  asn(ip: string): string[] {
    const r = this.record(ip);
    if (r === NOT_FOUND) return this.emptyAsn;
    let v = this.asnCache.get(r);
    if (v === undefined) {
      v = asnValues(r);
      this.asnCache.set(r, v);
    }
    return v;
  }
}
