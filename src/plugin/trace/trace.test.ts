import test from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { captureLog, CaptureWriter, makeRequest, parseTable, runSetup, setupError, settle, StubHandler } from '../pkg/testing.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { PluginError, type Handler } from '../plugin.ts';
import { pluginLogger } from '../../core/log.ts';
import { replyTo } from '../../wire/message.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { parse, plugin, localEndpoint, type TraceOptions } from './setup.ts';
import { Trace, TraceState } from './trace.ts';
import { HttpReporter, goHttpError } from './reporter.ts';
import { ZipkinTracer, endpointJson, type SpanSink } from './span.ts';

const E2 = 'plugin/trace: Corefile:2 - Error during parsing: ';
const E3 = 'plugin/trace: Corefile:3 - Error during parsing: ';

const DEFAULTS: TraceOptions = {
  endpointType: 'zipkin', endpoint: 'http://localhost:9411/api/v2/spans', every: 1n, serviceName: 'coredns',
  clientServer: false, datadogAnalyticsRate: 0, zipkinMaxBacklogSize: 0, zipkinMaxBatchSize: 0,
  zipkinMaxBatchInterval: 0n, serviceEndpoint: '',
};
const opts = (o: Partial<TraceOptions>): TraceOptions => ({ ...DEFAULTS, ...o });

test('trace parse: endpoints, options and CoreDNS errors', async () => {
  await parseTable('trace', parse, [
    ['. {\n trace\n}', DEFAULTS],
    ['. {\n trace tracinghost:9253\n}', opts({ endpoint: 'http://tracinghost:9253/api/v2/spans' })],
    ['. {\n trace zipkin tracinghost:9253\n}', opts({ endpoint: 'http://tracinghost:9253/api/v2/spans' })],
    ['. {\n trace ZIPKIN h:1\n}', opts({ endpoint: 'http://h:1/api/v2/spans' })],
    ['. {\n trace http://tracinghost:9411/zipkin/api/v2/spans\n}', opts({ endpoint: 'http://tracinghost:9411/zipkin/api/v2/spans' })],
    ['. {\n trace HTTPS://h/x\n}', opts({ endpoint: 'HTTPS://h/x' })],
    // One argument is the endpoint of the default type.
    ['. {\n trace datadog\n}', opts({ endpoint: 'http://datadog/api/v2/spans' })],
    ['. {\n trace datadog localhost:8126\n}', E2 + "tracing endpoint type 'datadog' is not supported by nodens (no Datadog tracer); use zipkin"],
    ['. {\n trace DataDog localhost:8126 {\n  datadog_analytics_rate 0.5\n }\n}', E2 + "tracing endpoint type 'datadog' is not supported by nodens (no Datadog tracer); use zipkin"],
    ['. {\n trace jaeger h:1\n}', "plugin/trace: tracing endpoint type 'jaeger' is not supported"],
    ['. {\n trace zipkin a b\n}', E2 + "Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n trace tracinghost:9411 {\n  every 10000\n  service dnsproxy\n  client_server\n }\n}',
      opts({ endpoint: 'http://tracinghost:9411/api/v2/spans', every: 10000n, serviceName: 'dnsproxy', clientServer: true })],
    ['. {\n trace {\n  every 0\n }\n}', opts({ every: 0n })],
    ['. {\n trace {\n  every 18446744073709551615\n }\n}', opts({ every: 18446744073709551615n })],
    ['. {\n trace {\n  every 18446744073709551616\n }\n}', 'plugin/trace: strconv.ParseUint: parsing "18446744073709551616": value out of range'],
    ['. {\n trace {\n  every -1\n }\n}', 'plugin/trace: strconv.ParseUint: parsing "-1": invalid syntax'],
    ['. {\n trace {\n  every\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'every'"],
    ['. {\n trace {\n  service a b\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n trace {\n  client_server false\n }\n}', opts({ clientServer: false })],
    ['. {\n trace {\n  client_server T\n }\n}', opts({ clientServer: true })],
    ['. {\n trace {\n  client_server yes\n }\n}', 'plugin/trace: strconv.ParseBool: parsing "yes": invalid syntax'],
    ['. {\n trace {\n  client_server true false\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'false'"],
    ['. {\n trace {\n  datadog_analytics_rate 0.5\n }\n}', opts({ datadogAnalyticsRate: 0.5 })],
    ['. {\n trace {\n  datadog_analytics_rate\n }\n}', opts({ datadogAnalyticsRate: 0 })],
    ['. {\n trace {\n  datadog_analytics_rate 2\n }\n}', "plugin/trace: datadog analytics rate must be between 0 and 1, '2.000000' is not supported"],
    ['. {\n trace {\n  datadog_analytics_rate -0.25\n }\n}', "plugin/trace: datadog analytics rate must be between 0 and 1, '-0.250000' is not supported"],
    ['. {\n trace {\n  datadog_analytics_rate x\n }\n}', 'plugin/trace: strconv.ParseFloat: parsing "x": invalid syntax'],
    ['. {\n trace {\n  zipkin_max_backlog_size 50\n  zipkin_max_batch_size 10\n  zipkin_max_batch_interval 250ms\n }\n}',
      opts({ zipkinMaxBacklogSize: 50, zipkinMaxBatchSize: 10, zipkinMaxBatchInterval: 250000000n })],
    ['. {\n trace {\n  zipkin_max_batch_size +7\n }\n}', opts({ zipkinMaxBatchSize: 7 })],
    ['. {\n trace {\n  zipkin_max_batch_size ten\n }\n}', 'plugin/trace: strconv.Atoi: parsing "ten": invalid syntax'],
    ['. {\n trace {\n  zipkin_max_backlog_size\n }\n}', E3 + "Wrong argument count or unexpected line ending after 'zipkin_max_backlog_size'"],
    ['. {\n trace {\n  zipkin_max_batch_interval soon\n }\n}', 'plugin/trace: time: invalid duration "soon"'],
    ['. {\n trace {\n  sample 5\n }\n}', E3 + "unknown property 'sample'"],
    // Every line is read: the last endpoint wins, block options add up.
    ['. {\n trace a:1 {\n  every 3\n }\n trace b:2\n}', opts({ endpoint: 'http://b:2/api/v2/spans', every: 3n })],
  ]);
});

test('trace setup: a backlog below zero and an interval too short to tick are setup errors', async () => {
  assert.equal(await setupError(plugin, '. {\n trace {\n  zipkin_max_backlog_size -1\n }\n}'),
    'plugin/trace: zipkin_max_backlog_size must not be negative, got -1');
  assert.equal(await setupError(plugin, '. {\n trace {\n  zipkin_max_batch_interval 9ns\n }\n}'),
    'plugin/trace: zipkin_max_batch_interval 9ns is too short: a tenth of it must be at least 1ns');
  assert.equal(await setupError(plugin, '. {\n trace {\n  zipkin_max_batch_interval -1s\n }\n}'),
    'plugin/trace: zipkin_max_batch_interval -1000000000ns is too short: a tenth of it must be at least 1ns');
  assert.equal(await setupError(plugin, '. {\n trace {\n  zipkin_max_batch_interval 10ns\n }\n}'), '');
});

test('trace local endpoint: service name, and with bind the address and port', () => {
  assert.deepEqual(localEndpoint('coredns', ''), { serviceName: 'coredns' });
  assert.equal(localEndpoint('', ''), undefined);
  assert.deepEqual(localEndpoint('DNS', '127.0.0.1:1053'), { serviceName: 'DNS', ipv4: '127.0.0.1', port: 1053 });
  assert.deepEqual(localEndpoint('d', '[::1]:53'), { serviceName: 'd', ipv6: '::1', port: 53 });
  assert.deepEqual(localEndpoint('d', '[::ffff:10.0.0.1]:53'), { serviceName: 'd', ipv4: '10.0.0.1', port: 53 });
  assert.equal(endpointJson(localEndpoint('DNS', '127.0.0.1:1053')), '{"serviceName":"dns","ipv4":"127.0.0.1","port":1053}');
  assert.equal(endpointJson({ serviceName: '' }), undefined);
});

/** A sink that keeps the spans' JSON, parsed. */
class Spans implements SpanSink {
  readonly all: Record<string, unknown>[] = [];
  send(spanJson: string): void { this.all.push(JSON.parse(spanJson) as Record<string, unknown>); }
  named(name: string): Record<string, unknown>[] { return this.all.filter((s) => s['name'] === name); }
}

/** trace → a → b → answer, each through nextOrFailure as CoreDNS plugins call NextOrFailure. */
function chain(sink: Spans, every: number, last: Handler): { trace: Trace; state: TraceState } {
  const b = new StubHandler('b', (req, w) => nextOrFailure('b', last, req, w));
  const a = new StubHandler('a', (req, w) => nextOrFailure('a', b, req, w));
  const state = new TraceState(every);
  state.tracer = new ZipkinTracer(sink, { serviceName: 'CoreDNS' });
  return { trace: new Trace(state, a), state };
}

const answer = new StubHandler('answer', (req, w) => {
  const m = replyTo(req.msg);
  m.rcode = Rcode.NXDOMAIN;
  w.writeMsg(m);
  return Rcode.NXDOMAIN;
});

test('trace handler: a servedns SERVER span with CoreDNS tags, a child span per plugin called through nextOrFailure', async () => {
  const sink = new Spans();
  const { trace } = chain(sink, 1, answer);
  const req = makeRequest('WWW.Example.ORG.', { type: RRType.AAAA, proto: 'tcp', remote: '192.0.2.7' });
  const w = new CaptureWriter();
  assert.equal(await settle(trace.serveDNS(req, w)), Rcode.NXDOMAIN);
  assert.equal(w.last?.rcode, Rcode.NXDOMAIN);
  assert.equal(req.span, undefined, 'the span is gone once the query is done');
  assert.deepEqual(sink.all.map((s) => s['name']), ['answer', 'b', 'a', 'servedns'], 'children finish first');
  const root = sink.named('servedns')[0]!;
  assert.equal(root['kind'], 'SERVER');
  assert.equal(root['id'], root['traceId'], "zipkin-go's 64-bit ids: the root span's id is the trace id");
  assert.match(String(root['traceId']), /^[0-7][0-9a-f]{15}$/);
  assert.equal(root['parentId'], undefined);
  assert.deepEqual(root['localEndpoint'], { serviceName: 'coredns' });
  assert.deepEqual(root['tags'], {
    'coredns.io/name': 'www.example.org.', 'coredns.io/proto': 'tcp', 'coredns.io/rcode': 'NXDOMAIN',
    'coredns.io/remote': '192.0.2.7', 'coredns.io/type': 'AAAA',
  });
  assert.equal(root['annotations'], undefined);
  const [a, b, last] = [sink.named('a')[0]!, sink.named('b')[0]!, sink.named('answer')[0]!];
  assert.equal(a['parentId'], root['id']);
  assert.equal(b['parentId'], a['id']);
  assert.equal(last['parentId'], b['id']);
  for (const s of [a, b, last]) {
    assert.equal(s['traceId'], root['traceId']);
    assert.equal(s['kind'], undefined);
    assert.equal(s['tags'], undefined);
    assert.equal(typeof s['timestamp'], 'number');
  }
  const keys = Object.keys(JSON.parse(JSON.stringify(root)) as object);
  assert.deepEqual(keys, ['timestamp', 'duration', 'traceId', 'id', 'name', 'kind', 'localEndpoint', 'tags'], "zipkin-go's field order");
});

test('trace handler: every AMOUNT traces one query in AMOUNT; every 0 none; untraced queries open no span', async () => {
  const sink = new Spans();
  const { trace } = chain(sink, 3, answer);
  for (let i = 0; i < 7; i++) await settle(trace.serveDNS(makeRequest('x.'), new CaptureWriter()));
  assert.equal(sink.named('servedns').length, 2, 'queries 3 and 6');
  assert.equal(sink.all.length, 8);
  const none = new Spans();
  const zero = chain(none, 0, answer);
  for (let i = 0; i < 3; i++) await settle(zero.trace.serveDNS(makeRequest('x.'), new CaptureWriter()));
  assert.equal(none.all.length, 0);
  assert.equal(zero.state.count, 0, 'every 0 does not even count (CoreDNS)');
});

test('trace handler: a returned error tags the span with error and annotates it; the server-written rcode is the rcode', async () => {
  const sink = new Spans();
  const { trace } = chain(sink, 1, new StubHandler('fail', () => { throw new PluginError(Rcode.SERVFAIL, 'plugin/fail: broke'); }));
  assert.throws(() => trace.serveDNS(makeRequest('x.example.'), new CaptureWriter()), /broke/);
  const root = sink.named('servedns')[0]!;
  assert.equal((root['tags'] as Record<string, string>)['coredns.io/rcode'], 'SERVFAIL');
  assert.equal((root['tags'] as Record<string, string>)['error'], 'true');
  const an = root['annotations'] as { timestamp: number; value: string }[];
  assert.deepEqual(an.map((x) => x.value), ['event:error', 'error.object:plugin/fail: broke']);
  assert.equal(an[0]!.timestamp, an[1]!.timestamp);
  assert.equal(sink.named('fail').length, 1, 'the failing plugin span ends too');

  // REFUSED returned for the server to write: the rcode tag says REFUSED, no error.
  const s2 = new Spans();
  const refused = chain(s2, 1, new StubHandler('no', () => Rcode.REFUSED));
  assert.equal(await settle(refused.trace.serveDNS(makeRequest('x.'), new CaptureWriter())), Rcode.REFUSED);
  assert.equal((s2.named('servedns')[0]!['tags'] as Record<string, string>)['coredns.io/rcode'], 'REFUSED');
  // A panic (any other exception) ends the span untagged.
  const s3 = new Spans();
  const panics = chain(s3, 1, new StubHandler('boom', () => { throw new TypeError('boom'); }));
  assert.throws(() => panics.trace.serveDNS(makeRequest('x.'), new CaptureWriter()), /boom/);
  assert.equal(s3.named('servedns')[0]!['tags'], undefined);
});

test('trace handler: asynchronous plugins keep their span until they settle; the next plugin is their child', async () => {
  const sink = new Spans();
  const slow = new StubHandler('slow', async (req, w) => {
    await new Promise((r) => setTimeout(r, 20));
    return nextOrFailure('slow', answer, req, w);
  });
  const { trace } = chain(sink, 1, slow);
  const req = makeRequest('x.');
  assert.equal(await settle(trace.serveDNS(req, new CaptureWriter())), Rcode.NXDOMAIN);
  assert.equal(req.span, undefined);
  const s = sink.named('slow')[0]!;
  assert.equal(sink.named('answer')[0]!['parentId'], s['id']);
  assert.ok((s['duration'] as number) >= 15000, `slow span lasted ${String(s['duration'])}µs`);
  assert.deepEqual(sink.all.map((x) => x['name']), ['answer', 'slow', 'b', 'a', 'servedns']);
});

test('trace handler: the trace id is the trace/traceid metadata; a query that has a span is not traced again', async () => {
  const sink = new Spans();
  let seen: string | undefined;
  const { trace } = chain(sink, 1, new StubHandler('md', (req) => { seen = req.metadata('trace/traceid'); return Rcode.REFUSED; }));
  const req = makeRequest('x.');
  req.beginMetadata();
  await settle(trace.serveDNS(req, new CaptureWriter()));
  assert.equal(seen, sink.named('servedns')[0]!['traceId']);

  const outer = new ZipkinTracer(sink, undefined).startRoot('outer', 'SERVER');
  const req2 = makeRequest('x.');
  req2.span = outer;
  sink.all.length = 0;
  await settle(trace.serveDNS(req2, new CaptureWriter()));
  assert.equal(sink.named('servedns').length, 0);
  assert.equal(sink.named('a')[0]!['parentId'], outer.id, 'the chain is traced under the existing span');
  assert.equal(req2.span, outer);
});

/** An in-process Zipkin-like collector: keeps each POST (path, headers, body). */
async function collector(status = 202): Promise<{ url: string; posts: { path: string; headers: http.IncomingHttpHeaders; spans: Record<string, unknown>[] }[]; close(): Promise<void> }> {
  const posts: { path: string; headers: http.IncomingHttpHeaders; spans: Record<string, unknown>[] }[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      posts.push({ path: req.url ?? '', headers: req.headers, spans: JSON.parse(body) as Record<string, unknown>[] });
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((r) => { srv.listen(0, '127.0.0.1', r); });
  const port = (srv.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/api/v2/spans`,
    posts,
    close: () => new Promise<void>((r) => { srv.closeAllConnections(); srv.close(() => { r(); }); }),
  };
}

const until = async (cond: () => boolean, ms = 3000): Promise<void> => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
};

test('reporter: a full batch is posted at once as a JSON array with b3: 0; the interval sends the rest', async () => {
  const c = await collector();
  const r = new HttpReporter(c.url, { batchSize: 3, maxBacklog: 1000, batchIntervalMs: 200 }, pluginLogger('trace'));
  r.start();
  try {
    const t0 = Date.now();
    for (let i = 0; i < 3; i++) r.send(`{"name":"s${i}"}`);
    await until(() => c.posts.length === 1);
    assert.ok(Date.now() - t0 < 150, 'sent on the batch size, not the interval');
    assert.equal(c.posts[0]!.path, '/api/v2/spans');
    assert.equal(c.posts[0]!.headers['b3'], '0');
    assert.equal(c.posts[0]!.headers['content-type'], 'application/json');
    assert.deepEqual(c.posts[0]!.spans.map((s) => s['name']), ['s0', 's1', 's2']);
    r.send('{"name":"late"}');
    await until(() => c.posts.length === 2);
    assert.deepEqual(c.posts[1]!.spans.map((s) => s['name']), ['late']);
    await until(() => r.pending === 0);
  } finally {
    await r.close();
    await c.close();
  }
});

test('reporter: a backlog drops its oldest spans with a warning; a refused collector keeps the spans and warns', async () => {
  const c = await collector();
  const port = Number(new URL(c.url).port);
  await c.close();
  const url = `http://127.0.0.1:${port}/api/v2/spans`;
  const r = new HttpReporter(url, { batchSize: 100, maxBacklog: 2, batchIntervalMs: 50 }, pluginLogger('trace'));
  const lines = await captureLog(async () => {
    r.start();
    r.send('{"n":1}');
    r.send('{"n":2}');
    r.send('{"n":3}');
    await new Promise((res) => setTimeout(res, 200));
    await r.close();
  });
  assert.ok(lines.includes('[WARNING] plugin/trace: backlog too long, disposing 1 spans'), lines.join('\n'));
  assert.ok(lines.includes(`[WARNING] plugin/trace: failed to send the request: Post "${url}": dial tcp 127.0.0.1:${port}: connect: connection refused`), lines.join('\n'));
  assert.equal(r.pending, 2, 'kept for the next try, within the backlog');
});

test('reporter: a collector answering an error status is warned about and the batch is done', async () => {
  const c = await collector(404);
  const r = new HttpReporter(c.url, { batchSize: 1, maxBacklog: 10, batchIntervalMs: 1000 }, pluginLogger('trace'));
  try {
    const lines = await captureLog(async () => {
      r.send('{"n":1}');
      await until(() => c.posts.length === 1);
      await new Promise((res) => setTimeout(res, 20));
    });
    assert.ok(lines.includes('[WARNING] plugin/trace: failed the request with status code 404'), lines.join('\n'));
    assert.equal(r.pending, 0);
  } finally {
    await r.close();
    await c.close();
  }
});

test('reporter: Go http error texts', () => {
  assert.equal(goHttpError('http://h:1/x', { code: 'ECONNREFUSED', address: '::1', port: 1 }), 'Post "http://h:1/x": dial tcp [::1]:1: connect: connection refused');
  assert.equal(goHttpError('http://nohost/x', { code: 'ENOTFOUND', hostname: 'nohost' }), 'Post "http://nohost/x": dial tcp: lookup nohost: no such host');
});

test('trace setup: start-up builds the tracer, queries are reported to the collector, shutdown sends what is left', async () => {
  const c = await collector();
  const s = await runSetup(plugin, `. {\n trace zipkin ${c.url} {\n  service MyDNS\n  zipkin_max_batch_interval 1h\n }\n}`);
  const h = s.chain(answer);
  try {
    await settle(h.serveDNS(makeRequest('q.example.'), new CaptureWriter()));
    await s.start();
    await settle(h.serveDNS(makeRequest('q.example.'), new CaptureWriter()));
    assert.equal(c.posts.length, 0, 'batched for an hour');
    assert.deepEqual(await s.stop(), []);
    await until(() => c.posts.length === 1);
    const names = c.posts[0]!.spans.map((x) => x['name']);
    assert.deepEqual(names, ['answer', 'servedns'], 'only the query after start-up was traced');
    assert.deepEqual(c.posts[0]!.spans[1]!['localEndpoint'], { serviceName: 'mydns' });
  } finally {
    await c.close();
  }
});

test('nextOrFailure: without a span it opens none; with one, a child per call, and the span is restored after', () => {
  const sink = new Spans();
  const req = makeRequest('x.');
  assert.equal(nextOrFailure('t', answer, req, new CaptureWriter()), Rcode.NXDOMAIN);
  assert.equal(sink.all.length, 0);
  const root = new ZipkinTracer(sink, undefined).startRoot('r', 'SERVER');
  req.span = root;
  assert.equal(nextOrFailure('t', answer, req, new CaptureWriter()), Rcode.NXDOMAIN);
  assert.equal(req.span, root);
  assert.equal(sink.all.length, 1);
  assert.equal(sink.all[0]!['parentId'], root.id);
  assert.equal(req.derive({ name: 'y.' }).span, root, 'derived requests share the span');
  assert.throws(() => nextOrFailure('t', undefined, req, new CaptureWriter()), /plugin\/t: no next plugin found/);
  assert.equal(sink.all.length, 1, 'no span without a next plugin');
});
