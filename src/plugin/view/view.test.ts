import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { View, viewFilter } from './view.ts';
import { Expression } from '../pkg/expression.ts';
import { CaptureWriter, StubHandler, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { startServer } from '../../index.ts';
import { exchange } from '../../../test/helpers/client.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { newQuery } from '../../wire/message.ts';
import { RRType } from '../../wire/constants.ts';

const view = (o: { name: string; exprs: Expression[] }) => ({ name: o.name, exprs: o.exprs.map((e) => e.source) });

test('view parse', async () => {
  await parseTable('view', parse, [
    ['. {\n view a\n}', { name: 'a', exprs: [] }],
    ['. {\n view a {\n }\n}', { name: 'a', exprs: [] }],
    [". {\n view internal {\n  expr incidr(client_ip(), '127.0.0.0/24')\n }\n}", { name: 'internal', exprs: ["incidr(client_ip(), '127.0.0.0/24')"] }],
    // Arguments are joined by one space; several expr lines all apply.
    [". {\n view x {\n  expr type()   in   ['A',   'AAAA']\n  expr name() == 'a.'\n }\n}", { name: 'x', exprs: ["type() in ['A', 'AAAA']", "name() == 'a.'"] }],
    // The Corefile's quotes are the Corefile's: the expression gets what is inside.
    ['. {\n view x {\n  expr "type() == \'A\'"\n }\n}', { name: 'x', exprs: ["type() == 'A'"] }],
    ['. {\n view\n}', "plugin/view: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'view'"],
    ['. {\n view a b\n}', "plugin/view: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'b'"],
    ['. {\n view a {\n  foo\n }\n}', "plugin/view: Corefile:3 - Error during parsing: unknown property 'foo'"],
    ['. {\n view a\n view b\n}', 'plugin/view: this plugin can only be used once per Server Block'],
    ['. {\n view a {\n  expr\n }\n}', 'plugin/view: unexpected token EOF'],
    ['. {\n view a {\n  expr foo()\n }\n}', 'plugin/view: unknown name foo (1:1)\n | foo()\n | ^'],
    [". {\n view a {\n  expr name() matches '('\n }\n}", "plugin/view: error parsing regexp: missing closing ): `(` (1:8)\n | name() matches '('\n | .......^"],
    ['. {\n view a {\n  expr abs(size()) > 3\n }\n}', /^plugin\/view: Corefile:3 - Error during parsing: the builtin abs\(\) is expr-lang syntax nodens does not implement/],
  ], { view });
});

test('view: the block gets the filter and the view name; the handler passes queries on', async () => {
  const r = await runSetup(plugin, ". {\n view v1 {\n  expr type() == 'A'\n }\n}");
  assert.equal(r.config.viewName, 'v1');
  const next = new StubHandler('next', () => 0);
  const h = r.chain(next);
  assert.equal(h.name, 'view');
  assert.equal(await settle(h.serveDNS(makeRequest('a.example.'), new CaptureWriter())), 0);
  assert.equal(next.calls, 1);
  await assert.rejects(async () => settle(r.chain().serveDNS(makeRequest('a.'), new CaptureWriter())), /plugin\/view: no next plugin found/);
});

test('view: Filter is true only when every expression is boolean true', () => {
  const a = makeRequest('a.example.', { type: RRType.A });
  const mx = makeRequest('a.example.', { type: RRType.MX });
  assert.equal(viewFilter([])(a), true);
  const one = viewFilter([Expression.compile("type() == 'A'")]);
  assert.equal(one(a), true);
  assert.equal(one(mx), false);
  const two = viewFilter([Expression.compile("type() == 'A'"), Expression.compile("name() endsWith 'example.'")]);
  assert.equal(two(a), true);
  assert.equal(viewFilter([Expression.compile("type() == 'A'"), Expression.compile('name()')])(a), false);
  assert.equal(viewFilter([Expression.compile("incidr('x', '10.0.0.0/8')")])(a), false);
});

test('view: metadata view/name, only where metadata began', () => {
  const v = new View('v9', [], undefined);
  const req = makeRequest('a.');
  v.metadata(req);
  assert.equal(req.metadata('view/name'), undefined);
  req.beginMetadata();
  v.metadata(req);
  assert.equal(req.metadata('view/name'), 'v9');
});

async function ask(port: number, name: string, type: number = RRType.A, tcp = false) {
  const q = newQuery(name, type, 1);
  return decodeMessage(await exchange(port, encodeMessage(q), { tcp }));
}

test('view: blocks of one zone and port, the first whose filter passes serves (a running server)', async () => {
  const server = await startServer({
    dnsPort: 0,
    corefile: `.:0 {
  view internal {
    expr incidr(client_ip(), '127.0.0.0/24') && type() == 'A'
  }
  hosts {
    10.0.0.1 test.example
  }
}
.:0 {
  view tcp {
    expr proto() == 'tcp'
  }
  hosts {
    10.0.0.2 test.example
  }
}
.:0 {
  hosts {
    10.0.0.3 test.example
  }
}
`,
  });
  try {
    const port = server.port;
    assert.equal(server.addresses().length, 1);
    assert.deepEqual((await ask(port, 'test.example.')).answer.map((r) => (r.data as { address: string }).address), ['10.0.0.1']);
    assert.deepEqual((await ask(port, 'test.example.', RRType.AAAA, true)).answer, []);
    assert.equal((await ask(port, 'other.example.', RRType.AAAA, true)).rcode, 2, 'tcp block, unknown name: no next plugin');
    assert.equal((await ask(port, 'other.example.', RRType.AAAA)).rcode, 2);
    assert.equal((await ask(port, 'test.example.', RRType.AAAA)).rcode, 0, 'the last block');
  } finally {
    await server.stop();
  }
});

test('view: same zone and port twice without a view is still an error; with one it is not', async () => {
  const start = async (corefile: string) => {
    const s = await startServer({ dnsPort: 0, corefile });
    await s.stop();
  };
  await assert.rejects(start('.:0 {\n whoami\n}\n.:0 {\n whoami\n}\n'), { message: 'cannot serve dns://.:0 - it is already defined' });
  await start('.:0 {\n view a\n whoami\n}\n.:0 {\n whoami\n}\n');
  await start('.:0 {\n whoami\n}\n.:0 {\n view a\n whoami\n}\n');
  await start('.:0 {\n view a\n whoami\n}\n.:0 {\n view a\n whoami\n}\n');
  await assert.rejects(start('.:0 {\n view a\n whoami\n}\n.:0 {\n whoami\n}\n.:0 {\n whoami\n}\n'), { message: 'cannot serve dns://.:0 - it is already defined' });
  // A view does not lift the bind overlap rule.
  await assert.rejects(start('.:0 {\n bind 127.0.0.1\n whoami\n}\n.:0 {\n view a\n whoami\n}\n'),
    { message: 'cannot serve dns://.:0 - zone overlap listener capacity with dns://.:0 on 127.0.0.1' });
});

test('view: the view label of the metrics; views survive a reload', async () => {
  const corefile = (name: string) => `.:0 {
  prometheus 127.0.0.1:0
  view ${name} {
    expr proto() == 'tcp'
  }
  cache 30
  whoami
}
.:0 {
  prometheus 127.0.0.1:0
  hosts {
    192.0.2.1 www.example
  }
}
`;
  const server = await startServer({ dnsPort: 0, corefile: corefile('tcponly') });
  try {
    const port = server.port;
    const before = await metricValue('coredns_dns_requests_total', { view: 'tcponly' }, server.metrics);
    const hits = await metricValue('coredns_cache_requests_total', { view: 'tcponly' }, server.metrics);
    assert.equal((await ask(port, 'www.example.', RRType.A, true)).additional.length, 2, 'whoami over TCP');
    assert.equal((await ask(port, 'www.example.', RRType.A)).answer.length, 1, 'hosts over UDP');
    assert.equal(await metricValue('coredns_dns_requests_total', { view: 'tcponly' }, server.metrics) - before, 1);
    assert.equal(await metricValue('coredns_cache_requests_total', { view: 'tcponly' }, server.metrics) - hits, 1);
    assert.equal(await metricValue('coredns_plugin_enabled', { view: 'tcponly', name: 'whoami' }, server.metrics), 1);
    assert.equal(await server.reload(corefile('renamed')), undefined);
    const renamed = await metricValue('coredns_dns_requests_total', { view: 'renamed' }, server.metrics);
    assert.equal((await ask(port, 'www.example.', RRType.A, true)).additional.length, 2);
    assert.equal(await metricValue('coredns_dns_requests_total', { view: 'renamed' }, server.metrics) - renamed, 1);
  } finally {
    await server.stop();
  }
});
