import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { mkdtempSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { parse, plugin, type GeoipOptions } from './setup.ts';
import { GeoIP, subnetAddress } from './geoip.ts';
import { ASN, ASN_LABELS, CITY, CITY_LABELS, GeoipDatabase, formatFloat } from './db.ts';
import { CaptureWriter, StubHandler, captureLog, makeRequest, parseTable, runSetup, settle } from '../pkg/testing.ts';
import type { PluginLogger, Request } from '../plugin.ts';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { newQuery } from '../../wire/message.ts';
import { EdnsOption, RRType } from '../../wire/constants.ts';
import type { TXTData } from '../../wire/types.ts';

const TESTDATA = join(import.meta.dirname, 'testdata');
const CITY_DB = join(TESTDATA, 'city.mmdb');
const ASN_DB = join(TESTDATA, 'asn.mmdb');

test('geoip fixtures exist (regenerate with scripts/geoip-fixtures.sh)', () => {
  for (const f of ['city.mmdb', 'city-ipv4.mmdb', 'enterprise.mmdb', 'asn.mmdb', 'isp.mmdb', 'unknown-type.mmdb', 'domain.mmdb']) {
    assert.ok(existsSync(join(TESTDATA, f)), f);
  }
});

test('geoip parse', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'geoip-'));
  const empty = join(dir, 'empty.mmdb');
  writeFileSync(empty, '');
  const junk = join(dir, 'junk.mmdb');
  writeFileSync(junk, 'not a database\n');
  const pre = 'plugin/geoip: Corefile:';
  await parseTable<GeoipOptions, { dbPath: string; ednsSubnet: boolean; provides: number }>('geoip', parse, [
    [`. {\n geoip ${CITY_DB}\n}`, { dbPath: CITY_DB, ednsSubnet: false, provides: CITY }],
    [`. {\n geoip ${CITY_DB} {\n  edns-subnet\n }\n}`, { dbPath: CITY_DB, ednsSubnet: true, provides: CITY }],
    [`. {\n geoip ${CITY_DB} { edns-subnet }\n}`, { dbPath: CITY_DB, ednsSubnet: true, provides: CITY }],
    [`. {\n geoip ${ASN_DB}\n}`, { dbPath: ASN_DB, ednsSubnet: false, provides: ASN }],
    [`. {\n geoip ${join(TESTDATA, 'isp.mmdb')}\n}`, { provides: ASN }],
    [`. {\n geoip ${join(TESTDATA, 'enterprise.mmdb')}\n}`, { provides: CITY }],
    [`. {\n geoip ${join(TESTDATA, 'city-ipv4.mmdb')}\n}`, { provides: CITY }],
    ['. {\n geoip\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after 'geoip'`],
    ['. {\n geoip 1 2 3\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after '3'`],
    ['. {\n geoip { }\n}', `${pre}2 - Error during parsing: Wrong argument count or unexpected line ending after '}'`],
    [`. {\n geoip ${CITY_DB} {\n  languages en fr es zh-CN\n }\n}`, `${pre}3 - Error during parsing: unknown property "languages"`],
    ['. {\n geoip /dbpath { city }\n}', `${pre}2 - Error during parsing: unknown property "city"`],
    [`. {\n geoip ${CITY_DB}\n geoip ${CITY_DB}\n}`, `${pre}3 - Error during parsing: configuring multiple databases is not supported`],
    ['. {\n geoip /invalidPath\n}', `${pre}2 - Error during parsing: failed to open database file: open /invalidPath: no such file or directory`],
    ['. {\n geoip /invalidPath {\n  edns-subnet\n }\n}', `${pre}4 - Error during parsing: failed to open database file: open /invalidPath: no such file or directory`],
    [`. {\n geoip ${dir}\n}`, `${pre}2 - Error during parsing: failed to open database file: read ${dir}: is a directory`],
    [`. {\n geoip ${empty}\n}`, `${pre}2 - Error during parsing: failed to open database file: file is empty`],
    [`. {\n geoip ${junk}\n}`, `${pre}2 - Error during parsing: failed to open database file: error opening database: invalid MaxMind DB file`],
    [`. {\n geoip ${join(TESTDATA, 'unknown-type.mmdb')}\n}`, `${pre}2 - Error during parsing: failed to open database file: geoip2: reader does not support the "UnknownDbType" database type`],
    [`. {\n geoip ${join(TESTDATA, 'domain.mmdb')}\n}`, `${pre}2 - Error during parsing: database does not provide any supported schema (city, asn)`],
  ], { view: (o) => ({ dbPath: o.dbPath, ednsSubnet: o.ednsSubnet, provides: o.db.provides }), partial: true });
});

test('geoip: formatFloat prints as Go strconv.FormatFloat(f, \'f\', -1, 64)', () => {
  const rows: [number, string][] = [
    [52.2242, '52.2242'], [0.1315, '0.1315'], [-33.5, '-33.5'], [151, '151'], [0, '0'], [-0, '-0'],
    [1e-7, '0.0000001'], [-0.0000025, '-0.0000025'], [1.5e-10, '0.00000000015'], [1e21, '1000000000000000000000'],
    [1.25e22, '12500000000000000000000'], [NaN, 'NaN'], [Infinity, '+Inf'], [-Infinity, '-Inf'],
  ];
  for (const [f, s] of rows) assert.equal(formatFloat(f), s, String(f));
});

test('geoip: subnetAddress reads the client-subnet option as miekg does', () => {
  const opt = (...b: number[]): Uint8Array => Uint8Array.from(b);
  assert.equal(subnetAddress(opt(0, 1, 24, 0, 81, 2, 69)), '::ffff:81.2.69.0');
  assert.equal(subnetAddress(opt(0, 1, 32, 0, 81, 2, 69, 142)), '::ffff:81.2.69.142');
  assert.equal(subnetAddress(opt(0, 1, 32, 0, 81, 2, 69, 142, 9, 9)), '::ffff:81.2.69.142', 'extra bytes ignored');
  assert.equal(subnetAddress(opt(0, 0, 0, 0)), '::ffff:0.0.0.0');
  assert.equal(subnetAddress(opt(0, 2, 48, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1)), '2001:db8:1::');
  assert.equal(subnetAddress(opt(0, 0, 8, 0)), undefined, 'family 0 with a netmask');
  assert.equal(subnetAddress(opt(0, 1, 33, 0)), undefined);
  assert.equal(subnetAddress(opt(0, 2, 129, 0)), undefined);
  assert.equal(subnetAddress(opt(0, 3, 0, 0)), undefined);
  assert.equal(subnetAddress(opt(0, 1, 0)), undefined);
});

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = true;
  debug(m: string): void { this.lines.push('[DEBUG] ' + m); }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
}

function labelsOf(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of req.metadataLabels()) out[l] = req.metadata(l)!;
  return out;
}

/** A request from `remote`, its metadata begun (as the metadata plugin's collector does), optionally with an ECS option. */
function request(remote: string, subnet?: Uint8Array): Request {
  const req = makeRequest('a.example.', { remote, edns: subnet === undefined ? undefined : {} });
  if (subnet !== undefined) req.msg.edns!.options.push({ code: EdnsOption.CLIENT_SUBNET, data: subnet });
  req.beginMetadata();
  return req;
}

const CAMBRIDGE = {
  'geoip/city/name': 'Cambridge', 'geoip/country/code': 'GB', 'geoip/country/name': 'United Kingdom',
  'geoip/country/is_in_european_union': 'true', 'geoip/continent/code': 'EU', 'geoip/continent/name': 'Europe',
  'geoip/latitude': '52.2242', 'geoip/longitude': '0.1315', 'geoip/timezone': 'Europe/London',
  'geoip/postalcode': 'CB4', 'geoip/subdivisions/code': 'ENG,CAM',
};
const NO_CITY = Object.fromEntries(CITY_LABELS.map((l) => [l, l === 'geoip/country/is_in_european_union' ? 'false' : '']));

test('geoip: city labels from the client address or the EDNS0 subnet', () => {
  const log = new Log();
  const db = new GeoipDatabase(CITY_DB);
  const direct = new GeoIP(db, false, log, undefined);
  const subnet = new GeoIP(db, true, log, undefined);
  const rows: [GeoIP, Request, Record<string, string>][] = [
    [direct, request('127.0.0.1'), CAMBRIDGE],
    [direct, request('::1'), { ...CAMBRIDGE, 'geoip/city/name': 'Paris', 'geoip/country/code': 'FR', 'geoip/country/name': 'France',
      'geoip/latitude': '48.8566', 'geoip/longitude': '2.3522', 'geoip/timezone': 'Europe/Paris', 'geoip/postalcode': '75001',
      'geoip/subdivisions/code': 'IDF' }],
    // without edns-subnet the option is not read
    [direct, request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 81, 2, 69)), CAMBRIDGE],
    [subnet, request('127.0.0.1'), CAMBRIDGE],
    [subnet, request('::1', Uint8Array.of(0, 1, 8, 0, 127)), CAMBRIDGE],
    [subnet, request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 81, 2, 69)), {
      ...NO_CITY, 'geoip/city/name': 'Exampleshire', 'geoip/country/code': 'US', 'geoip/country/name': 'United States',
      'geoip/continent/code': 'NA', 'geoip/continent/name': 'North America', 'geoip/latitude': '-33.5', 'geoip/longitude': '151',
      'geoip/timezone': 'America/Chicago', 'geoip/postalcode': '60601', 'geoip/subdivisions/code': 'IL' }],
    [subnet, request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 198, 51, 100)), {
      ...NO_CITY, 'geoip/country/code': 'JP', 'geoip/country/name': 'Japan', 'geoip/continent/code': 'AS', 'geoip/continent/name': 'Asia' }],
    [subnet, request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 203, 0, 113)), {
      ...NO_CITY, 'geoip/city/name': 'Null Island', 'geoip/latitude': '0.0000001', 'geoip/longitude': '-0.0000025' }],
    // not in the database: every label, zero values
    [subnet, request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 192, 0, 2)), NO_CITY],
    [direct, request('192.0.2.1'), NO_CITY],
    // an option miekg rejects is not used
    [subnet, request('127.0.0.1', Uint8Array.of(0, 1, 40, 0, 81, 2, 69)), CAMBRIDGE],
  ];
  for (const [i, [h, req, want]] of rows.entries()) {
    h.metadata(req);
    assert.deepEqual(labelsOf(req), want, `row ${i}`);
  }
  assert.deepEqual(log.lines, []);
});

test('geoip: ASN labels; an unknown address is ASN 0 with an empty organisation', () => {
  const h = new GeoIP(new GeoipDatabase(ASN_DB), true, new Log(), undefined);
  const rows: [Request, string, string][] = [
    [request('127.0.0.1'), '64512', 'Loopback Networks'],
    [request('::1'), '64513', 'IPv6 Loopback Org'],
    [request('::1', Uint8Array.of(0, 1, 24, 0, 81, 2, 69)), '12345', 'Test ASN Organization'],
    [request('::1', Uint8Array.of(0, 2, 48, 0, 0x20, 0x01, 0x0d, 0xb8, 0, 1)), '4200000000', 'Documentation Six'],
    [request('::1', Uint8Array.of(0, 1, 8, 0, 10)), '0', 'Not routed'],
    [request('203.0.113.1'), '0', ''],
  ];
  for (const [i, [req, number, org]] of rows.entries()) {
    h.metadata(req);
    assert.deepEqual(labelsOf(req), { [ASN_LABELS[0]]: number, [ASN_LABELS[1]]: org }, `row ${i}`);
  }
});

test('geoip: an IPv6 address in an IPv4-only database sets no labels and logs at debug level', () => {
  const log = new Log();
  const h = new GeoIP(new GeoipDatabase(join(TESTDATA, 'city-ipv4.mmdb')), true, log, undefined);
  const v4 = request('127.0.0.1');
  h.metadata(v4);
  assert.equal(v4.metadata('geoip/city/name'), 'Cambridge');
  const v6 = request('::1');
  h.metadata(v6);
  assert.deepEqual(labelsOf(v6), {});
  const mapped = request('127.0.0.1', Uint8Array.of(0, 1, 24, 0, 81, 2, 69));
  h.metadata(mapped);
  assert.deepEqual(labelsOf(mapped), {});
  assert.deepEqual(log.lines, [
    "[DEBUG] Setting up city metadata failed due to database lookup error: error looking up '::1': you attempted to look up an IPv6 address in an IPv4-only database",
    "[DEBUG] Setting up city metadata failed due to database lookup error: error looking up '::ffff:81.2.69.0': you attempted to look up an IPv6 address in an IPv4-only database",
  ]);
});

test('geoip: without the metadata collection no label exists; the query is passed on', async () => {
  const h = new GeoIP(new GeoipDatabase(CITY_DB), false, new Log(), undefined);
  const req = makeRequest('a.example.');
  h.metadata(req);
  assert.deepEqual(req.metadataLabels(), []);
  const next = new StubHandler('next', () => 0);
  const chained = new GeoIP(new GeoipDatabase(CITY_DB), false, new Log(), next);
  assert.equal(await settle(chained.serveDNS(makeRequest('a.example.'), new CaptureWriter())), 0);
  assert.equal(next.calls, 1);
  await assert.rejects(async () => settle(h.serveDNS(makeRequest('a.'), new CaptureWriter())), /plugin\/geoip: no next plugin found/);
});

test('geoip: setup adds a metadata provider handler', async () => {
  const r = await runSetup(plugin, `. {\n geoip ${CITY_DB} {\n  edns-subnet\n }\n}`);
  const h = r.chain(new StubHandler('next', () => 0)) as GeoIP;
  assert.equal(h.name, 'geoip');
  assert.equal(h.ednsSubnet, true);
  assert.equal(typeof h.metadata, 'function');
});

function txt(d: unknown): string {
  return (d as TXTData).strings.map((c) => Buffer.from(c).toString('latin1')).join('');
}

test('geoip: a server answers with the labels through metadata, log and template', async () => {
  const corefile = `example.org:0 {
  geoip ${CITY_DB} {
    edns-subnet
  }
  metadata
  log . "{name} city={/geoip/city/name} eu={/geoip/country/is_in_european_union}"
  template IN TXT {
    answer "{{ .Name }} 60 IN TXT \\"{{ .Meta \`geoip/country/code\` }}\\""
  }
}
`;
  const lines = await captureLog(async () => {
    const server = await startServer({ dnsPort: 0, corefile });
    try {
      const plain = decodeMessage(await exchange(server.port, encodeMessage(newQuery('a.example.org.', RRType.TXT, 1))));
      assert.deepEqual(plain.answer.map((rr) => txt(rr.data)), ['GB']);
      const q = newQuery('b.example.org.', RRType.TXT, 1);
      q.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [{ code: EdnsOption.CLIENT_SUBNET, data: Uint8Array.of(0, 1, 24, 0, 81, 2, 69) }] };
      const sub = decodeMessage(await exchange(server.port, encodeMessage(q)));
      assert.deepEqual(sub.answer.map((rr) => txt(rr.data)), ['US']);
    } finally {
      await server.stop();
    }
  });
  const logged = lines.filter((l) => l.includes(' city=')).map((l) => l.replace(/^.*\] /, ''));
  assert.deepEqual(logged, ['a.example.org. city=Cambridge eu=true', 'b.example.org. city=Exampleshire eu=false']);
});
