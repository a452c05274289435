import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTable, runSetup, makeRequest, CaptureWriter, StubHandler, settle } from '../pkg/testing.ts';
import { parse, plugin, type K8sExternalOptions } from './setup.ts';
import { External, addressType, goAddress } from './external.ts';
import { Fall } from '../pkg/fall.ts';
import type { Externaler, ExternalEndpoint, ExternalLookup, ExternalZone } from '../pkg/external.ts';
import type { Request } from '../../core/request.ts';
import type { Handler, ResponseWriter } from '../plugin.ts';
import { PluginError } from '../plugin.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { formatRecord } from '../../wire/text.ts';
import type { Message } from '../../wire/types.ts';
import { replyTo, newQuery } from '../../wire/message.ts';

const E = (line: number) => `plugin/k8s_external: Corefile:${line} - Error during parsing: `;

const view = (o: K8sExternalOptions) => ({ zones: o.zones, apex: o.apex, ttl: o.ttl, headless: o.headless, fall: o.fall.zones });

test('parse: zones, apex, ttl, headless, fallthrough and the errors of setup.go', async () => {
  await parseTable('k8s_external', parse, [
    ['example.org {\n k8s_external\n}', { zones: ['example.org.'], apex: 'dns', ttl: 5, headless: false, fall: [] }],
    ['. {\n k8s_external Example.ORG 10.0.0.0/24\n}', { zones: ['example.org.', '0.0.10.in-addr.arpa.'] }],
    ['a.test b.test {\n k8s_external\n}', { zones: ['a.test.', 'b.test.'] }],
    ['. {\n k8s_external example.org {\n  apex NS-Data\n  ttl 0\n  headless\n  fallthrough\n }\n}',
      { zones: ['example.org.'], apex: 'NS-Data', ttl: 0, headless: true, fall: ['.'] }],
    ['. {\n k8s_external example.org {\n  ttl 3600\n  fallthrough a.test B.test\n }\n}', { ttl: 3600, fall: ['a.test.', 'b.test.'] }],
    ['. {\n k8s_external example.org {\n  ttl +7\n }\n}', { ttl: 7 }],
    // Every line is read: its zones replace the earlier ones, its options add to them.
    ['. {\n k8s_external a.test {\n  ttl 9\n }\n k8s_external b.test {\n  headless\n }\n}', { zones: ['b.test.'], ttl: 9, headless: true }],
    ['. {\n k8s_external {\n  ttl\n }\n}', E(3) + "Wrong argument count or unexpected line ending after 'ttl'"],
    ['. {\n k8s_external {\n  ttl x\n }\n}', 'plugin/k8s_external: strconv.Atoi: parsing "x": invalid syntax'],
    ['. {\n k8s_external {\n  ttl 1.5\n }\n}', 'plugin/k8s_external: strconv.Atoi: parsing "1.5": invalid syntax'],
    ['. {\n k8s_external {\n  ttl 99999999999999999999\n }\n}', 'plugin/k8s_external: strconv.Atoi: parsing "99999999999999999999": value out of range'],
    ['. {\n k8s_external {\n  ttl 3601\n }\n}', E(3) + 'ttl must be in range [0, 3600]: 3601'],
    ['. {\n k8s_external {\n  ttl -1\n }\n}', E(3) + 'ttl must be in range [0, 3600]: -1'],
    ['. {\n k8s_external {\n  ttl 9007199254740993\n }\n}', E(3) + 'ttl must be in range [0, 3600]: 9007199254740993'],
    ['. {\n k8s_external {\n  apex\n }\n}', E(3) + "Wrong argument count or unexpected line ending after 'apex'"],
    ['. {\n k8s_external {\n  foo\n }\n}', E(3) + "unknown property 'foo'"],
    ['. {\n k8s_external {\n  headless extra\n }\n}', E(3) + "unknown property 'extra'"],
  ], { view, partial: true });
});

test('setup: kubernetes must be in the block and be an Externaler', async () => {
  const s = await runSetup(plugin, 'example.org {\n k8s_external\n}');
  await assert.rejects(s.start(), { message: 'plugin/k8s_external: kubernetes plugin not loaded' });
});

function ep(address: string, target: string, port = 80, ttl = 7): ExternalEndpoint {
  return { address, port, ttl, target };
}

/** A fixed Externaler: names → lookups. */
class FakeExternaler implements Externaler {
  readonly name = 'kubernetes';
  data = new Map<string, ExternalLookup>();
  reverse = new Map<string, string[]>();
  addrs: string[] = ['192.0.2.53', '2001:db8::53'];
  headlessAsked: boolean[] = [];
  serveDNS(): number { return Rcode.SERVFAIL; }
  external(name: string, _zone: string, headless: boolean): ExternalLookup {
    this.headlessAsked.push(headless);
    return this.data.get(name) ?? { endpoints: [], rcode: Rcode.NXDOMAIN };
  }
  externalReverse(address: string, zone: string): string[] {
    return (this.reverse.get(address) ?? []).map((n) => `${n}.${zone}`);
  }
  externalAddress(): string[] { return this.addrs; }
  externalServices(): ExternalZone { return { services: [], headless: [] }; }
  externalSerial(): number { return 1499347823; }
}

function handler(o: Partial<ConstructorParameters<typeof External>[0]> = {}, next?: Handler): { e: External; x: FakeExternaler } {
  const x = new FakeExternaler();
  const e = new External({ zones: ['example.org.', '100.51.198.in-addr.arpa.'], apex: 'dns', ttl: 5, headless: false, fall: new Fall(), ...o });
  e.x = x;
  e.next = next;
  return { e, x };
}

async function ask(h: Handler, name: string, type: number, req?: Request): Promise<{ rc: number; m: Message; text: string[] }> {
  const w = new CaptureWriter();
  const rc = await settle(h.serveDNS(req ?? makeRequest(name, { type }), w));
  const m = w.last!;
  const text = [
    `rcode=${m.rcode} aa=${m.aa} tc=${m.tc}`,
    ...m.answer.map((r) => 'AN ' + formatRecord(r)),
    ...m.authority.map((r) => 'NS ' + formatRecord(r)),
    ...m.additional.map((r) => 'AR ' + formatRecord(r)),
  ];
  return { rc, m, text };
}

const SOA = 'NS example.org.\t5\tIN\tSOA\tns1.dns.example.org. hostmaster.dns.example.org. 1499347823 7200 1800 86400 5';

test('handler: the apex answers SOA and NS (with the nameserver glue), NODATA otherwise', async () => {
  const { e } = handler();
  assert.deepEqual((await ask(e, 'example.org.', RRType.SOA)).text, ['rcode=0 aa=true tc=false', SOA.replace('NS ', 'AN ')]);
  assert.deepEqual((await ask(e, 'Example.ORG.', RRType.NS)).text, [
    'rcode=0 aa=true tc=false',
    'AN example.org.\t5\tIN\tNS\tns1.dns.example.org.',
    'AR ns1.dns.Example.ORG.\t5\tIN\tA\t192.0.2.53',
    'AR ns1.dns.Example.ORG.\t5\tIN\tAAAA\t2001:db8::53',
  ]);
  assert.deepEqual((await ask(e, 'example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', SOA]);
});

test('handler: the apex label: NODATA for itself, ns1 answers A/AAAA, NXDOMAIN for other names', async () => {
  const { e } = handler();
  assert.deepEqual((await ask(e, 'dns.example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', SOA]);
  assert.deepEqual((await ask(e, 'NS1.dns.example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', 'AN NS1.dns.example.org.\t5\tIN\tA\t192.0.2.53']);
  assert.deepEqual((await ask(e, 'ns1.dns.example.org.', RRType.AAAA)).text, ['rcode=0 aa=true tc=false', 'AN ns1.dns.example.org.\t5\tIN\tAAAA\t2001:db8::53']);
  assert.deepEqual((await ask(e, 'ns1.dns.example.org.', RRType.MX)).text, ['rcode=0 aa=true tc=false', SOA]);
  assert.deepEqual((await ask(e, 'ns2.dns.example.org.', RRType.A)).text, ['rcode=3 aa=true tc=false', SOA]);
  assert.deepEqual((await ask(e, 'a.ns1.dns.example.org.', RRType.A)).text, ['rcode=3 aa=true tc=false', SOA]);
  // Another apex label, as written in the SOA.
  const { e: e2 } = handler({ apex: 'NS-Data', ttl: 30 });
  assert.deepEqual((await ask(e2, 'ns1.ns-data.example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', 'AN ns1.ns-data.example.org.\t30\tIN\tA\t192.0.2.53']);
  assert.deepEqual((await ask(e2, 'example.org.', RRType.SOA)).text,
    ['rcode=0 aa=true tc=false', 'AN example.org.\t30\tIN\tSOA\tns1.NS-Data.example.org. hostmaster.NS-Data.example.org. 1499347823 7200 1800 86400 30']);
});

test('handler: A, AAAA and SRV from the external addresses; other types NODATA', async () => {
  const { e, x } = handler();
  const t = 'svc1.testns.example.org.';
  x.data.set(t, { endpoints: [ep('1.2.3.4', t), ep('1.2.3.4', t, 443), ep('1:2::5', t), ep('::ffff:5.6.7.8', t, -1)], rcode: Rcode.NOERROR });
  assert.deepEqual((await ask(e, 'Svc1.testns.example.org.', RRType.A)).text,
    ['rcode=0 aa=true tc=false', 'AN Svc1.testns.example.org.\t5\tIN\tA\t1.2.3.4', 'AN Svc1.testns.example.org.\t5\tIN\tA\t5.6.7.8']);
  assert.deepEqual((await ask(e, t, RRType.AAAA)).text, ['rcode=0 aa=true tc=false', `AN ${t}\t5\tIN\tAAAA\t1:2::5`]);
  // SRV: weight 100/4 each; a port of -1 makes no record; the SRV TTL is the provider's.
  assert.deepEqual((await ask(e, t, RRType.SRV)).text, [
    'rcode=0 aa=true tc=false',
    `AN ${t}\t7\tIN\tSRV\t0 25 80 ${t}`,
    `AN ${t}\t7\tIN\tSRV\t0 25 443 ${t}`,
    `AR ${t}\t5\tIN\tA\t1.2.3.4`,
    `AR ${t}\t5\tIN\tAAAA\t1:2::5`,
  ]);
  assert.deepEqual((await ask(e, t, RRType.TXT)).text, ['rcode=0 aa=true tc=false', SOA]);
  // Data, but none of the asked family: NODATA.
  x.data.set('v6.testns.example.org.', { endpoints: [ep('1:2::5', 'v6.testns.example.org.')], rcode: Rcode.NOERROR });
  assert.deepEqual((await ask(e, 'v6.testns.example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', SOA]);
});

test('handler: NXDOMAIN and NODATA with the SOA; fallthrough passes NXDOMAIN names on', async () => {
  const { e, x } = handler();
  x.data.set('testns.example.org.', { endpoints: [], rcode: Rcode.NOERROR });
  assert.deepEqual((await ask(e, 'nope.testns.example.org.', RRType.A)).text, ['rcode=3 aa=true tc=false', SOA]);
  assert.deepEqual((await ask(e, 'testns.example.org.', RRType.A)).text, ['rcode=0 aa=true tc=false', SOA]);
  const next = new StubHandler('whoami', (_r, w) => { w.writeMsg(replyTo(newQuery('x.', 1))); return Rcode.NOERROR; });
  const fall = new Fall();
  fall.setZonesFromArgs(['a.example.org']);
  const { e: f, x: fx } = handler({ fall }, next);
  fx.data.set('testns.example.org.', { endpoints: [], rcode: Rcode.NOERROR });
  await ask(f, 'nope.a.example.org.', RRType.A);
  assert.equal(next.calls, 1);
  assert.deepEqual((await ask(f, 'nope.b.example.org.', RRType.A)).text, ['rcode=3 aa=true tc=false', SOA]);
  await ask(f, 'testns.example.org.', RRType.A); // NODATA never falls through
  assert.equal(next.calls, 1);
  // Outside the zones: the next plugin, or CoreDNS's error without one.
  await ask(f, 'other.test.', RRType.A);
  assert.equal(next.calls, 2);
  const { e: alone } = handler();
  assert.throws(() => alone.serveDNS(makeRequest('other.test.'), new CaptureWriter()),
    (err: unknown) => err instanceof PluginError && err.message === 'plugin/k8s_external: no next plugin found');
});

test('handler: for the root zone the nameserver names are no special names (CoreDNS looks below `dns..`)', async () => {
  const { e, x } = handler({ zones: ['.'] });
  const soa = 'NS .\t5\tIN\tSOA\tns1.dns. hostmaster.dns. 1499347823 7200 1800 86400 5';
  assert.deepEqual((await ask(e, '.', RRType.SOA)).text, ['rcode=0 aa=true tc=false', soa.replace('NS ', 'AN ')]);
  assert.deepEqual((await ask(e, 'ns1.dns.', RRType.A)).text, ['rcode=3 aa=true tc=false', soa]);
  x.data.set('svc.ns.', { endpoints: [ep('1.2.3.4', 'svc.ns.')], rcode: Rcode.NOERROR });
  assert.deepEqual((await ask(e, 'svc.ns.', RRType.A)).text, ['rcode=0 aa=true tc=false', 'AN svc.ns.\t5\tIN\tA\t1.2.3.4']);
});

test('handler: headless is handed to the provider', async () => {
  const { e, x } = handler({ headless: true });
  await ask(e, 'a.b.example.org.', RRType.A);
  assert.deepEqual(x.headlessAsked, [true]);
});

test('handler: PTR in a reverse zone from externalReverse with the first zone; a PTR of another name uses the rcode', async () => {
  const { e, x } = handler();
  x.reverse.set('198.51.100.10', ['ext1.testns', 'ext2.testns', 'ext1.testns']);
  assert.deepEqual((await ask(e, '10.100.51.198.in-addr.arpa.', RRType.PTR)).text, [
    'rcode=0 aa=true tc=false',
    'AN 10.100.51.198.in-addr.arpa.\t5\tIN\tPTR\text1.testns.example.org.',
    'AN 10.100.51.198.in-addr.arpa.\t5\tIN\tPTR\text2.testns.example.org.',
  ]);
  const soaRev = 'NS 100.51.198.in-addr.arpa.\t5\tIN\tSOA\tns1.dns.100.51.198.in-addr.arpa. hostmaster.dns.100.51.198.in-addr.arpa. 1499347823 7200 1800 86400 5';
  assert.deepEqual((await ask(e, '11.100.51.198.in-addr.arpa.', RRType.PTR)).text, ['rcode=3 aa=true tc=false', soaRev]);
  x.data.set('svc1.testns.example.org.', { endpoints: [ep('1.2.3.4', 'svc1.testns.example.org.')], rcode: Rcode.NOERROR });
  assert.deepEqual((await ask(e, 'svc1.testns.example.org.', RRType.PTR)).text, ['rcode=0 aa=true tc=false', SOA]);
  assert.deepEqual((await ask(e, 'nope.testns.example.org.', RRType.PTR)).text, ['rcode=3 aa=true tc=false', SOA]);
});

/** A request whose lookups the test answers. */
function lookupRequest(name: string, type: number, answers: Record<string, Message | undefined>, asked: string[]): Request {
  const req = makeRequest(name, { type });
  (req as unknown as { lookup: (n: string, t: number) => Promise<Message | undefined> }).lookup = (n, t) => {
    asked.push(`${n} ${t}`);
    const key = `${n} ${t}`;
    if (!(key in answers)) return Promise.reject(new Error('no server'));
    return Promise.resolve(answers[key]);
  };
  return req;
}

test('handler: a load-balancer hostname is a CNAME (per endpoint) followed by its looked-up addresses', async () => {
  const { e, x } = handler();
  const t = 'lb.prod.example.org.';
  x.data.set(t, { endpoints: [ep('lb.other.test', t, 443), ep('lb.other.test', t, 80)], rcode: Rcode.NOERROR });
  const up = replyTo(newQuery('lb.other.test.', RRType.A));
  up.answer.push({ name: 'lb.other.test.', type: RRType.A, class: 1, ttl: 60, data: { address: '203.0.113.9' } });
  up.tc = true;
  const upV6 = replyTo(newQuery('lb.other.test.', RRType.AAAA));
  upV6.answer.push({ name: 'lb.other.test.', type: RRType.AAAA, class: 1, ttl: 60, data: { address: '2001:db8::9' } });
  const asked: string[] = [];
  const answers = { 'lb.other.test. 1': up, 'lb.other.test. 28': upV6 };
  assert.deepEqual((await ask(e, t, RRType.A, lookupRequest(t, RRType.A, answers, asked))).text, [
    'rcode=0 aa=true tc=true',
    `AN ${t}\t7\tIN\tCNAME\tlb.other.test.`,
    'AN lb.other.test.\t60\tIN\tA\t203.0.113.9',
    `AN ${t}\t7\tIN\tCNAME\tlb.other.test.`,
    'AN lb.other.test.\t60\tIN\tA\t203.0.113.9',
  ]);
  assert.deepEqual(asked, ['lb.other.test. 1', 'lb.other.test. 1']);
  // SRV: the hostname is the target; its A and AAAA (looked up once) are the additional records.
  asked.length = 0;
  assert.deepEqual((await ask(e, t, RRType.SRV, lookupRequest(t, RRType.SRV, answers, asked))).text, [
    'rcode=0 aa=true tc=false',
    `AN ${t}\t7\tIN\tSRV\t0 50 443 lb.other.test.`,
    `AN ${t}\t7\tIN\tSRV\t0 50 80 lb.other.test.`,
    'AR lb.other.test.\t60\tIN\tA\t203.0.113.9',
    'AR lb.other.test.\t60\tIN\tAAAA\t2001:db8::9',
  ]);
  assert.deepEqual(asked, ['lb.other.test. 1', 'lb.other.test. 28']);
  // A failed lookup adds nothing: the CNAME stays.
  asked.length = 0;
  assert.deepEqual((await ask(e, t, RRType.AAAA, lookupRequest(t, RRType.AAAA, {}, asked))).text, [
    'rcode=0 aa=true tc=false', `AN ${t}\t7\tIN\tCNAME\tlb.other.test.`, `AN ${t}\t7\tIN\tCNAME\tlb.other.test.`,
  ]);
});

test('handler: answers without hostnames are synchronous', () => {
  const { e, x } = handler();
  x.data.set('s.n.example.org.', { endpoints: [ep('1.2.3.4', 's.n.example.org.')], rcode: Rcode.NOERROR });
  const w: ResponseWriter = new CaptureWriter();
  assert.equal(typeof e.serveDNS(makeRequest('s.n.example.org.'), w), 'number');
  assert.equal(typeof e.serveDNS(makeRequest('s.n.example.org.', { type: RRType.SRV }), w), 'number');
});

test('addressType and goAddress read addresses as Go net.ParseIP does', () => {
  assert.equal(addressType('1.2.3.4'), RRType.A);
  assert.equal(addressType('::ffff:1.2.3.4'), RRType.A);
  assert.equal(addressType('2001:DB8:0:0::1'), RRType.AAAA);
  assert.equal(addressType('lb.example.com'), RRType.CNAME);
  assert.equal(addressType('01.2.3.4'), RRType.CNAME);
  assert.equal(addressType('1:2:3'), RRType.CNAME);
  assert.equal(goAddress('1.2.3.4'), '1.2.3.4');
  assert.equal(goAddress('::ffff:1.2.3.4'), '1.2.3.4');
  assert.equal(goAddress('2001:DB8:0:0::1'), '2001:db8::1');
});
