// The protobuf decoders against messages encoded here field by field as the API server's gogo-protobuf code
// writes them (non-pointer strings always, empty ones too; pointer fields only when set). The decoded objects
// must be what JSON.parse gives for the same object's JSON, as far as toService/toSlice read them; the
// end-to-end side (a real kube-apiserver answering in protobuf) is test/e2e/kubernetes-real-apiserver.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toPod, toService, toSlice, type RawObject } from './controller.ts';
import { FrameReader, Reader, decodeEndpointSlice, decodeList, decodeNamespace, decodePod, decodeService, decodeStatus, decodeWatchEvent } from './protobuf.ts';

// ---- a minimal encoder ----
type Field = Buffer;
function varint(n: number): Buffer {
  const out: number[] = [];
  // int32 negatives are written as 64-bit two's complement (10 bytes), as Go does.
  let v = n < 0 ? BigInt.asUintN(64, BigInt(n)) : BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) b |= 0x80;
    out.push(b);
  } while (v !== 0n);
  return Buffer.from(out);
}
const key = (f: number, wt: number) => varint((f << 3) | wt);
const int = (f: number, n: number): Field => Buffer.concat([key(f, 0), varint(n)]);
const bytes = (f: number, b: Buffer): Field => Buffer.concat([key(f, 2), varint(b.length), b]);
const str = (f: number, s: string): Field => bytes(f, Buffer.from(s));
const msg = (f: number, ...fields: Field[]): Field => bytes(f, Buffer.concat(fields));
const map = (f: number, m: Record<string, string>): Field[] => Object.entries(m).map(([k, v]) => msg(f, str(1, k), str(2, v)));
const fixed64 = (f: number): Field => Buffer.concat([key(f, 1), Buffer.alloc(8, 0xff)]);
const fixed32 = (f: number): Field => Buffer.concat([key(f, 5), Buffer.alloc(4, 0xff)]);
const MAGIC = Buffer.from('k8s\0', 'latin1');
function envelope(apiVersion: string, kind: string, raw: Buffer): Buffer {
  return Buffer.concat([MAGIC, msg(1, str(1, apiVersion), str(2, kind)), bytes(2, raw), str(3, ''), str(4, '')]);
}
function frame(type: string, obj: Buffer): Buffer {
  const ev = Buffer.concat([str(1, type), msg(2, bytes(1, obj))]);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(ev.length);
  return Buffer.concat([len, ev]);
}
function meta(name: string, ns: string, rv: string, extra: Field[] = []): Field {
  // uid, creationTimestamp and managedFields as a real object has them (skipped by the decoder)
  return msg(1, str(1, name), str(2, ''), str(3, ns), str(4, ''), str(5, 'uid-1'), str(6, rv), int(7, 0),
    msg(8, int(1, 1_700_000_000), int(2, 0)), ...extra,
    msg(17, str(1, 'kubectl'), str(2, 'Update'), str(3, 'v1'), msg(4, int(1, 1)), str(6, 'FieldsV1'), msg(7, bytes(1, Buffer.from('{"f:spec":{}}')))));
}
const decodeOne = (dec: typeof decodeService, b: Buffer): RawObject => dec(new Reader(b), b.length);

// ---- services ----
const serviceMsg = Buffer.concat([
  meta('api', 'prod', '42', map(11, { app: 'api' })),
  msg(2,
    msg(1, str(1, 'http'), str(2, 'TCP'), int(3, 80), msg(4, int(1, 0), int(2, 8080), str(3, '')), int(5, 0), str(6, '')),
    msg(1, str(1, ''), str(2, 'UDP'), int(3, 53)),
    ...map(2, { app: 'api' }), str(3, '10.96.5.5'), str(4, 'LoadBalancer'), str(5, '192.0.2.1'),
    str(7, 'None'), str(10, ''), str(18, '10.96.5.5'), str(18, 'fd00::5'), str(19, 'IPv4'), str(22, 'Cluster'),
    fixed64(30), fixed32(31)),
  msg(3, msg(1, msg(1, str(1, '203.0.113.9'), str(2, '')), msg(1, str(1, ''), str(2, 'lb.example.')))),
]);
const serviceJSON: RawObject = {
  metadata: { name: 'api', namespace: 'prod', uid: 'uid-1', resourceVersion: '42', creationTimestamp: '2023-11-14T22:13:20Z', labels: { app: 'api' } } as RawObject['metadata'],
  spec: {
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }, { protocol: 'UDP', port: 53 }],
    selector: { app: 'api' }, clusterIP: '10.96.5.5', clusterIPs: ['10.96.5.5', 'fd00::5'], type: 'LoadBalancer', externalIPs: ['192.0.2.1'],
    sessionAffinity: 'None', ipFamilies: ['IPv4'], internalTrafficPolicy: 'Cluster',
  },
  status: { loadBalancer: { ingress: [{ ip: '203.0.113.9' }, { hostname: 'lb.example.' }] } },
};

test('a Service decodes to what its JSON gives toService', () => {
  const o = decodeOne(decodeService, serviceMsg);
  assert.deepEqual(toService(o), toService(serviceJSON));
  assert.deepEqual(o.metadata, { name: 'api', namespace: 'prod', resourceVersion: '42', labels: { app: 'api' } });
  // Empty non-pointer strings stay out, as Go's JSON omits them: the defaults of toService apply.
  const bare = Buffer.concat([meta('x', 'ns', '1'), msg(2, msg(1, str(1, ''), str(2, ''), int(3, 0)), str(3, ''), str(4, ''), str(10, ''))]);
  const b = decodeOne(decodeService, bare);
  assert.deepEqual(b.spec, { ports: [{ port: 0 }] });
  assert.deepEqual(toService(b), toService({ metadata: { name: 'x', namespace: 'ns', resourceVersion: '1' }, spec: { ports: [{ port: 0 }] } }));
  assert.equal(toService(b).type, 'ClusterIP');
  assert.equal(toService(b).ports[0].protocol, 'TCP');
});

// ---- endpoint slices ----
const sliceMsg = Buffer.concat([
  meta('api-abcde', 'prod', '43', [
    ...map(11, { 'kubernetes.io/service-name': 'api', 'endpointslice.kubernetes.io/managed-by': 'x' }),
    ...map(12, { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z' }),
  ]),
  str(4, 'IPv4'),
  // ready, with hostname, nodeName, zone, targetRef
  msg(2, str(1, '10.1.0.1'), str(1, '10.1.0.2'), msg(2, int(1, 1), int(2, 1), int(3, 0)), str(3, 'web-0'),
    msg(4, str(1, 'Pod'), str(2, 'prod'), str(3, 'web-0'), str(4, 'uid')), ...map(5, { zone: 'a' }), str(6, 'node1'), str(7, 'zone-a'),
    msg(8, msg(1, str(1, 'zone-a')))),
  // not ready: left out
  msg(2, str(1, '10.1.0.3'), msg(2, int(1, 0))),
  // ready unknown (no conditions.ready): kept; a pointer string set to "" stays ""
  msg(2, str(1, '10.1.0.4'), msg(2), str(3, '')),
  msg(3, str(1, 'http'), str(2, 'TCP'), int(3, 8080), str(4, 'http')),
  msg(3),
]);
const sliceJSON: RawObject = {
  metadata: {
    name: 'api-abcde', namespace: 'prod', resourceVersion: '43',
    labels: { 'kubernetes.io/service-name': 'api', 'endpointslice.kubernetes.io/managed-by': 'x' },
    annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:00Z' },
  },
  addressType: 'IPv4',
  endpoints: [
    { addresses: ['10.1.0.1', '10.1.0.2'], conditions: { ready: true, serving: true, terminating: false }, hostname: 'web-0', targetRef: { kind: 'Pod', namespace: 'prod', name: 'web-0', uid: 'uid' }, deprecatedTopology: { zone: 'a' }, nodeName: 'node1', zone: 'zone-a' },
    { addresses: ['10.1.0.3'], conditions: { ready: false } },
    { addresses: ['10.1.0.4'], conditions: {}, hostname: '' },
  ],
  ports: [{ name: 'http', protocol: 'TCP', port: 8080, appProtocol: 'http' }, {}],
};

test('an EndpointSlice decodes to what its JSON gives toSlice (plain and multicluster)', () => {
  const o = decodeOne(decodeEndpointSlice, sliceMsg);
  assert.deepEqual(toSlice(o, false), toSlice(sliceJSON, false));
  assert.deepEqual(toSlice(o, true), toSlice(sliceJSON, true));
  assert.deepEqual(toSlice(o, false).addresses.map((a) => a.ip), ['10.1.0.1', '10.1.0.2', '10.1.0.4']);
  assert.deepEqual(toSlice(o, false).ports, [{ name: 'http', protocol: 'TCP', port: 8080 }, { name: '', protocol: '', port: -1 }]);
});

test('a Namespace decodes its metadata; a deletionTimestamp reads as its RFC 3339 text', () => {
  const ns = Buffer.concat([meta('prod', '', '7', [msg(9, int(1, 1_767_225_600))]), msg(2, str(1, 'kubernetes')), msg(3, str(1, 'Active'))]);
  assert.deepEqual(decodeOne(decodeNamespace, ns), { metadata: { name: 'prod', resourceVersion: '7', deletionTimestamp: '2026-01-01T00:00:00Z' } });
});

test('a Pod decodes its metadata and status.podIPs (the spec jumped over) to what its JSON gives toPod', () => {
  const spec = msg(2, msg(2, str(1, 'app'), str(2, 'registry.example/app:1'), msg(8, str(1, 'http'), int(3, 8080))), str(10, 'node1'));
  const running = Buffer.concat([meta('web-0', 'prod', '9', map(11, { app: 'web' })), spec,
    msg(3, str(1, 'Running'), str(5, '192.0.2.10'), str(6, '10.244.0.5'), msg(12, str(1, '10.244.0.5')), msg(12, str(1, 'fd00::5')), msg(7, int(1, 1)))]);
  const o = decodeOne(decodePod, running);
  const json: RawObject = { metadata: { name: 'web-0', namespace: 'prod', resourceVersion: '9', labels: { app: 'web' } }, spec: { nodeName: 'node1' }, status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }, { ip: 'fd00::5' }] } };
  assert.deepEqual(toPod(o), toPod(json));
  assert.deepEqual(toPod(o).podIPs, ['10.244.0.5', 'fd00::5']);
  // Pending (no IPs yet) and terminating (deletionTimestamp set).
  const pending = decodeOne(decodePod, Buffer.concat([meta('p', 'prod', '10', [msg(9, int(1, 1_767_225_600))]), spec, msg(3, str(1, 'Pending'))]));
  assert.deepEqual(toPod(pending), toPod({ metadata: { name: 'p', namespace: 'prod', resourceVersion: '10', deletionTimestamp: '2026-01-01T00:00:00Z' }, status: { phase: 'Pending' } }));
  assert.equal(toPod(pending).deleting, true);
});

// ---- envelopes, lists, watch frames, Status ----
const statusMsg = Buffer.concat([msg(1, str(2, '')), str(2, 'Failure'), str(3, 'too large resource version: 99, current: 42'), str(4, 'Timeout'),
  msg(5, str(1, ''), str(2, ''), str(3, ''), msg(4, str(1, 'ResourceVersionTooLarge'), str(2, 'Too large resource version'), str(3, '')), int(5, 1)), int(6, 504)]);

test('a Status (error body or ERROR event) reads as its JSON', () => {
  const st = decodeStatus(envelope('v1', 'Status', statusMsg));
  assert.deepEqual(st, {
    kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too large resource version: 99, current: 42', reason: 'Timeout',
    details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }] }, code: 504,
  });
  assert.throws(() => decodeStatus(Buffer.from('{"kind":"Status"}')), /magic/);
});

test('a LIST body: items and the list metadata', () => {
  const list = Buffer.concat([msg(1, str(1, ''), str(2, '100'), str(3, 'token'), int(4, 3)), bytes(2, serviceMsg), bytes(2, serviceMsg)]);
  const l = decodeList(envelope('v1', 'ServiceList', list), decodeService);
  assert.deepEqual(l.metadata, { resourceVersion: '100', continue: 'token' });
  assert.equal(l.items.length, 2);
  assert.deepEqual(toService(l.items[1]), toService(serviceJSON));
  const empty = decodeList(envelope('v1', 'ServiceList', msg(1, str(2, '5'), str(3, ''))), decodeService);
  assert.deepEqual(empty, { metadata: { resourceVersion: '5' }, items: [] });
});

/** A watch stream: events for a service, a slice's bookmark, an ERROR. */
function stream(): Buffer {
  const bookmark = Buffer.concat([msg(1, str(6, '77'), ...map(12, { 'k8s.io/initial-events-end': 'true' }))]);
  return Buffer.concat([
    frame('ADDED', envelope('v1', 'Service', serviceMsg)),
    frame('MODIFIED', envelope('v1', 'Service', serviceMsg)),
    frame('BOOKMARK', envelope('v1', 'Service', bookmark)),
    frame('ERROR', envelope('v1', 'Status', statusMsg)),
  ]);
}

function decodeAll(chunks: Buffer[], stopAt = Infinity): { type: string; object: RawObject }[] {
  const fr = new FrameReader();
  const out: { type: string; object: RawObject }[] = [];
  for (const c of chunks) {
    const stopped = fr.push(c, (b, s, e) => {
      out.push(decodeWatchEvent(b, s, e, decodeService));
      return out.length >= stopAt;
    });
    if (stopped) break;
  }
  return out;
}

test('watch frames decode alike however the stream is cut into chunks', () => {
  const whole = stream();
  const expected = decodeAll([whole]);
  assert.deepEqual(expected.map((e) => e.type), ['ADDED', 'MODIFIED', 'BOOKMARK', 'ERROR']);
  assert.deepEqual(toService(expected[0].object), toService(serviceJSON));
  assert.deepEqual(expected[2].object.metadata, { name: '', resourceVersion: '77', annotations: { 'k8s.io/initial-events-end': 'true' } });
  const err = expected[3].object as RawObject & { code?: number; message?: string };
  assert.equal(err.code, 504);
  assert.match(err.message ?? '', /too large/);
  // Every cut of the stream into sizes 1..13 bytes (lengths split across chunks, frames across many chunks).
  for (let size = 1; size <= 13; size++) {
    const chunks: Buffer[] = [];
    for (let i = 0; i < whole.length; i += size) chunks.push(whole.subarray(i, i + size));
    assert.deepEqual(decodeAll(chunks), expected, `chunks of ${size}`);
  }
  // Cut at every position into two chunks.
  for (let cut = 0; cut <= whole.length; cut += 7) assert.deepEqual(decodeAll([whole.subarray(0, cut), whole.subarray(cut)]), expected, `cut at ${cut}`);
  // A stop request ends the decoding there.
  assert.equal(decodeAll([whole], 2).length, 2);
});

test('malformed input throws instead of reading past the end', () => {
  const cut = serviceMsg.subarray(0, serviceMsg.length - 3);
  assert.throws(() => decodeOne(decodeService, cut), /past the end|truncated/);
  assert.throws(() => decodeOne(decodeService, Buffer.from([0x0b])), /wire type/); // group start: not used by Kubernetes
  assert.throws(() => decodeWatchEvent(frame('ADDED', Buffer.from('nope')), 4, frame('ADDED', Buffer.from('nope')).length, decodeService), /magic/);
});

test('varints: int32 negatives (10 bytes) and multi-byte lengths', () => {
  for (const n of [0, 1, 127, 128, 300, 65535, 2 ** 31 - 1, -1, -80]) {
    const r = new Reader(varint(n));
    assert.equal(r.varint(), n);
    assert.equal(r.pos, varint(n).length);
  }
  const long = 'x'.repeat(70_000);
  const r = new Reader(str(1, long));
  assert.equal(r.varint(), 10);
  assert.equal(r.str(), long);
});
