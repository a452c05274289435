import { test } from 'node:test';
import assert from 'node:assert/strict';
import { External } from './external.ts';
import { Fall } from '../pkg/fall.ts';
import { isTransferer, NotAuthoritativeError } from '../pkg/transfer.ts';
import type { Externaler, ExternalEndpoint, ExternalLookup, ExternalZone, ExternalZoneName } from '../pkg/external.ts';
import { Rcode } from '../../wire/constants.ts';
import { formatRecord } from '../../wire/text.ts';
import type { ResourceRecord } from '../../wire/types.ts';

// In the spirit of CoreDNS's plugin/k8s_external/transfer_test.go: the whole zone from a provider's
// ExternalServices list, the IXFR short answer, and the zones the plugin is not authoritative for.

const SERIAL = 1499347823;

function ep(address: string, target: string, port = 80): ExternalEndpoint {
  return { address, port, ttl: 7, target };
}

const svcs = (name: string, port: string, ...eps: ExternalEndpoint[]): ExternalZoneName[] =>
  eps.flatMap((e) => [{ name, srvOnly: false, endpoints: [e] }, { name: `${port}.${name}`, srvOnly: true, endpoints: [e] }]);

/** A provider with a fixed zone. */
class ZoneExternaler implements Externaler {
  readonly name = 'kubernetes';
  addrs: string[] = ['192.0.2.53', '2001:db8::53', 'not-an-ip.example'];
  zone: ExternalZone = { services: [], headless: [] };
  asked: Array<[string, boolean]> = [];
  serveDNS(): number { return Rcode.SERVFAIL; }
  external(): ExternalLookup { return { endpoints: [], rcode: Rcode.NXDOMAIN }; }
  externalReverse(): string[] { return []; }
  externalAddress(): string[] { return this.addrs; }
  externalServices(zone: string, headless: boolean): ExternalZone {
    this.asked.push([zone, headless]);
    return this.zone;
  }
  externalSerial(): number { return SERIAL; }
}

function handler(o: Partial<ConstructorParameters<typeof External>[0]> = {}): { e: External; x: ZoneExternaler } {
  const x = new ZoneExternaler();
  const e = new External({ zones: ['example.com.', '100.51.198.in-addr.arpa.'], apex: 'dns', ttl: 5, headless: true, fall: new Fall(), ...o });
  e.x = x;
  return { e, x };
}

async function collect(it: AsyncIterable<ResourceRecord[]>): Promise<{ batches: number; text: string[] }> {
  let batches = 0;
  const text: string[] = [];
  for await (const b of it) {
    batches++;
    assert.ok(b.length > 0, 'no empty batch');
    for (const r of b) text.push(formatRecord(r).replaceAll('\t', ' '));
  }
  return { batches, text };
}

const SOA = `example.com. 5 IN SOA ns1.dns.example.com. hostmaster.dns.example.com. ${SERIAL} 7200 1800 86400 5`;

test('k8s_external implements Transferer', () => {
  assert.ok(isTransferer(handler().e));
});

test('AXFR: SOA, NS and glue, the services\' records, SOA (transfer_test.go TestTransferAXFR)', async () => {
  const { e, x } = handler();
  x.zone = {
    services: [
      // two addresses × two ports: A/AAAA per entry, one SRV per owner name
      ...svcs('svc1.testns.example.com.', '_http._tcp', ep('1.2.3.4', 'svc1.testns.example.com.'), ep('1:2::5', 'svc1.testns.example.com.')),
      ...svcs('svc1.testns.example.com.', '_._udp', ep('1.2.3.4', 'svc1.testns.example.com.', 5000)),
      // a load-balancer hostname: a CNAME from each pass, SRV targets the hostname (its last labels for the port name)
      ...svcs('svc12.testns.example.com.', '_http._tcp', ep('dummy.hostname.test', 'svc12.testns.example.com.')),
      // a hostname of two labels or fewer is kept whole as the port name's target
      ...svcs('short.testns.example.com.', '_http._tcp', ep('lb.test', 'short.testns.example.com.')),
      // no ports: the address, no SRV
      ...svcs('bare.testns.example.com.', '_._', ep('192.0.2.9', 'bare.testns.example.com.', -1)),
    ],
    headless: [
      { name: 'hdls.testns.example.com.', srvOnly: false, endpoints: [
        ep('10.0.0.1', 'ep-0.hdls.testns.example.com.'), ep('10.0.0.2', 'ep-1.hdls.testns.example.com.'), ep('fd00::3', 'ep-2.hdls.testns.example.com.'),
      ] },
      { name: '_http._tcp.hdls.testns.example.com.', srvOnly: true, endpoints: [
        ep('ep-0.hdls.testns.example.com.', 'ep-0.hdls.testns.example.com.'), ep('ep-1.hdls.testns.example.com.', 'ep-1.hdls.testns.example.com.'),
        ep('ep-2.hdls.testns.example.com.', 'ep-2.hdls.testns.example.com.'),
      ] },
    ],
  };
  const { text } = await collect(e.transfer('example.com.', 0));
  assert.deepEqual(x.asked, [['example.com.', true]]);
  assert.deepEqual(text, [
    SOA,
    'example.com. 5 IN NS ns1.dns.example.com.',
    'ns1.dns.example.com. 5 IN A 192.0.2.53',
    'ns1.dns.example.com. 5 IN AAAA 2001:db8::53',
    'svc1.testns.example.com. 5 IN A 1.2.3.4',
    'svc1.testns.example.com. 7 IN SRV 0 100 80 svc1.testns.example.com.',
    '_http._tcp.svc1.testns.example.com. 7 IN SRV 0 100 80 svc1.testns.example.com.',
    'svc1.testns.example.com. 5 IN AAAA 1:2::5',
    'svc1.testns.example.com. 5 IN A 1.2.3.4',
    '_._udp.svc1.testns.example.com. 7 IN SRV 0 100 5000 svc1.testns.example.com.',
    'svc12.testns.example.com. 7 IN CNAME dummy.hostname.test.',
    'svc12.testns.example.com. 7 IN CNAME dummy.hostname.test.',
    'svc12.testns.example.com. 7 IN SRV 0 100 80 dummy.hostname.test.',
    '_http._tcp.svc12.testns.example.com. 7 IN SRV 0 100 80 test.',
    'short.testns.example.com. 7 IN CNAME lb.test.',
    'short.testns.example.com. 7 IN CNAME lb.test.',
    'short.testns.example.com. 7 IN SRV 0 100 80 lb.test.',
    '_http._tcp.short.testns.example.com. 7 IN SRV 0 100 80 lb.test.',
    'bare.testns.example.com. 5 IN A 192.0.2.9',
    // headless: the service's name (weight shared by the three), SRV records twice
    'hdls.testns.example.com. 5 IN A 10.0.0.1',
    'hdls.testns.example.com. 5 IN A 10.0.0.2',
    'hdls.testns.example.com. 5 IN AAAA fd00::3',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-0.hdls.testns.example.com.',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-1.hdls.testns.example.com.',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-2.hdls.testns.example.com.',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-0.hdls.testns.example.com.',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-1.hdls.testns.example.com.',
    'hdls.testns.example.com. 7 IN SRV 0 33 80 ep-2.hdls.testns.example.com.',
    // then each endpoint's own name
    'ep-0.hdls.testns.example.com. 5 IN A 10.0.0.1',
    'ep-0.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-0.hdls.testns.example.com.',
    'ep-0.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-0.hdls.testns.example.com.',
    'ep-1.hdls.testns.example.com. 5 IN A 10.0.0.2',
    'ep-1.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-1.hdls.testns.example.com.',
    'ep-1.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-1.hdls.testns.example.com.',
    'ep-2.hdls.testns.example.com. 5 IN AAAA fd00::3',
    'ep-2.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-2.hdls.testns.example.com.',
    'ep-2.hdls.testns.example.com. 7 IN SRV 0 100 80 ep-2.hdls.testns.example.com.',
    // the named port: SRV records to the endpoints' names, once
    '_http._tcp.hdls.testns.example.com. 7 IN SRV 0 33 80 ep-0.hdls.testns.example.com.',
    '_http._tcp.hdls.testns.example.com. 7 IN SRV 0 33 80 ep-1.hdls.testns.example.com.',
    '_http._tcp.hdls.testns.example.com. 7 IN SRV 0 33 80 ep-2.hdls.testns.example.com.',
    SOA,
  ]);
});

test('AXFR: the apex label as written and the TTL; an empty zone is SOA, NS, glue, SOA', async () => {
  const { e, x } = handler({ apex: 'NS-Data', ttl: 30, headless: false });
  x.addrs = ['::ffff:192.0.2.1'];
  const { text, batches } = await collect(e.transfer('example.com.', 0));
  assert.deepEqual(x.asked, [['example.com.', false]]);
  assert.deepEqual(text, [
    'example.com. 30 IN SOA ns1.NS-Data.example.com. hostmaster.NS-Data.example.com. 1499347823 7200 1800 86400 30',
    'example.com. 30 IN NS ns1.NS-Data.example.com.',
    'ns1.NS-Data.example.com. 30 IN A 192.0.2.1',
    'example.com. 30 IN SOA ns1.NS-Data.example.com. hostmaster.NS-Data.example.com. 1499347823 7200 1800 86400 30',
  ]);
  assert.equal(batches, 4);
});

test('AXFR of the second zone (a reverse zone is a zone like another)', async () => {
  const { e } = handler();
  const { text } = await collect(e.transfer('100.51.198.in-addr.arpa.', 0));
  assert.equal(text[0], `100.51.198.in-addr.arpa. 5 IN SOA ns1.dns.100.51.198.in-addr.arpa. hostmaster.dns.100.51.198.in-addr.arpa. ${SERIAL} 7200 1800 86400 5`);
  assert.equal(text[1], '100.51.198.in-addr.arpa. 5 IN NS ns1.dns.100.51.198.in-addr.arpa.');
  assert.equal(text.length, 5);
});

test('IXFR: the current serial or a newer one is answered with the SOA alone (TestTransferIXFR); an older one with the zone', async () => {
  const { e } = handler();
  assert.deepEqual((await collect(e.transfer('example.com.', SERIAL))).text, [SOA]);
  assert.deepEqual((await collect(e.transfer('example.com.', SERIAL + 1))).text, [SOA]);
  const older = (await collect(e.transfer('example.com.', SERIAL - 1))).text;
  assert.equal(older.length, 5);
  assert.equal(older.at(-1), SOA);
});

test('not authoritative: a name below a zone, above it, or elsewhere', () => {
  const { e } = handler();
  for (const z of ['testns.example.com.', 'com.', 'example.org.', '.']) {
    assert.throws(() => e.transfer(z, 0), NotAuthoritativeError, z);
  }
});
