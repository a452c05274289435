import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CaptureWriter, StubHandler, makeRequest, metricValue, parseTable, runSetup, settle } from '../pkg/testing.ts';
import { PluginError } from '../plugin.ts';
import { formatRecord } from '../../wire/text.ts';
import { Rcode, RRClass, RRType } from '../../wire/constants.ts';
import { parse, plugin, type TemplateOptions } from './setup.ts';
import { parseUint } from './template.ts';

const view = (o: TemplateOptions) => ({
  zones: o.zones,
  templates: o.templates.map((t) => ({
    qclass: t.qclass, qtype: t.qtype, zones: t.zones, regex: t.regex.map((r) => r.source),
    answer: t.answer.map(String), additional: t.additional.map(String), authority: t.authority.map(String),
    rcode: t.rcode, ederror: t.ederror, fall: t.fall.zones,
    vars: t.vars.map((v) => ({ name: v.name, type: v.type, source: v.expr.source })), exprs: t.exprs.map((e) => e.source),
  })),
});

const base = { regex: ['.*'], answer: [], additional: [], authority: [], rcode: 0, ederror: undefined, fall: [], vars: [], exprs: [] };
const E = 'plugin/template: Corefile:';

test('template parse', async () => {
  await parseTable('template', parse, [
    ['example.org {\n template IN A\n}', { zones: ['example.org.'], templates: [{ ...base, qclass: 1, qtype: 1, zones: ['example.org.'] }] }],
    ['. {\n template ANY ANY a.example B.example {\n  match ^x ^y\n  answer "{{ .Name }} 60 IN A 1.2.3.4" "{{.Name}} A 1.2.3.5"\n'
      + '  additional "ns. A 1.1.1.1"\n  authority "{{ .Zone }} 60 IN NS ns."\n  rcode NXDOMAIN\n  ederror 21 "why not"\n  fallthrough c.example\n  upstream 1.2.3.4\n }\n'
      + ' template CH TXT\n}', {
      zones: ['a.example.', 'b.example.', '.'],
      templates: [{
        qclass: 255, qtype: 255, zones: ['a.example.', 'b.example.'], regex: ['^x', '^y'],
        answer: ['{{.Name}} 60 IN A 1.2.3.4', '{{.Name}} A 1.2.3.5'], additional: ['ns. A 1.1.1.1'],
        authority: ['{{.Zone}} 60 IN NS ns.'], rcode: 3, ederror: { code: 21, reason: 'why not' }, fall: ['c.example.'], vars: [], exprs: [],
      }, { ...base, qclass: 3, qtype: 16, zones: ['.'] }],
    }],
    ['. {\n template IN A {\n  rcode NOTIMPL\n  ederror 3\n  fallthrough\n }\n}', {
      zones: ['.'], templates: [{ ...base, qclass: 1, qtype: 1, zones: ['.'], rcode: 4, ederror: { code: 3, reason: '' }, fall: ['.'] }],
    }],
    ['. {\n template\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'template'`],
    ['. {\n template IN\n}', `${E}2 - Error during parsing: Wrong argument count or unexpected line ending after 'IN'`],
    ['. {\n template FOO A\n}', `${E}2 - Error during parsing: invalid query class FOO`],
    ['. {\n template in A\n}', `${E}2 - Error during parsing: invalid query class in`],
    ['. {\n template IN FOO\n}', `${E}2 - Error during parsing: invalid RR class FOO`],
    ['. {\n template IN A {\n match "(a"\n}\n}', `${E}3 - Error during parsing: could not parse regex: (a, error parsing regexp: missing closing ): \`(a\``],
    ['. {\n template IN A {\n match\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'match'`],
    ['. {\n template IN A {\n match ' + 'a'.repeat(10001) + '\n}\n}', `${E}3 - Error during parsing: regex pattern too long: 10001 > 10000`],
    ['. {\n template IN A {\n answer "{{ .Name"\n}\n}', `${E}3 - Error during parsing: could not compile template: {{ .Name, template: answer:1: unclosed action`],
    ['. {\n template IN A {\n additional "{{ foo }}"\n}\n}', `${E}3 - Error during parsing: could not compile template: {{ foo }}, template: additional:1: function "foo" not defined\n`],
    ['. {\n template IN A {\n authority "{{ end }}"\n}\n}', `${E}3 - Error during parsing: could not compile template: {{ end }}, template: authority:1: unexpected {{end}}\n`],
    ['. {\n template IN A {\n answer\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'answer'`],
    ['. {\n template IN A {\n rcode BOGUS\n}\n}', `${E}3 - Error during parsing: unknown rcode BOGUS`],
    ['. {\n template IN A {\n rcode notimpl\n}\n}', `${E}3 - Error during parsing: unknown rcode notimpl`],
    ['. {\n template IN A {\n rcode\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'rcode'`],
    ['. {\n template IN A {\n ederror abc "why"\n}\n}', `${E}3 - Error during parsing: error parsing extended DNS error code why, strconv.ParseUint: parsing "abc": invalid syntax\n`],
    ['. {\n template IN A {\n ederror 70000\n}\n}', `${E}3 - Error during parsing: error parsing extended DNS error code 70000, strconv.ParseUint: parsing "70000": value out of range\n`],
    ['. {\n template IN A {\n ederror\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'ederror'`],
    ['. {\n template IN A {\n ederror 1 a b\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'b'`],
    ['. {\n template IN A {\n bogus\n}\n}', `${E}3 - Error during parsing: Wrong argument count or unexpected line ending after 'bogus'`],
    ['. {\n template IN A {\n match ^(?P<n>[0-9]+)\n var num int(group(\'n\'))\n var x "num * 2" + 1\n var any_ true ? 1 : \'a\'\n'
      + '  var parts split(name(), \'.\')\n  expr num > 1\n  expr "any([\'10.0.0.0/8\'], incidr(client_ip(), #))"\n }\n}', {
      zones: ['.'], templates: [{
        ...base, qclass: 1, qtype: 1, zones: ['.'], regex: ['^(?P<n>[0-9]+)'],
        vars: [{ name: 'num', type: 'int', source: "int(group('n'))" }, { name: 'x', type: 'int', source: 'num * 2 + 1' },
          { name: 'any_', type: '*interface {}', source: "true ? 1 : 'a'" }, { name: 'parts', type: '[]string', source: "split(name(), '.')" }],
        exprs: ['num > 1', "any(['10.0.0.0/8'], incidr(client_ip(), #))"],
      }],
    }],
  ], { view });
});

// Each text was printed by CoreDNS 1.15.0 for the same `template IN A example { ... }` block (line 3 on).
const VAR_ERRORS: [string, string][] = [
  ['var x', "Wrong argument count or unexpected line ending after 'x'"],
  ['var', "Wrong argument count or unexpected line ending after 'var'"],
  ['expr', "Wrong argument count or unexpected line ending after 'expr'"],
  ['var 1x 1', 'invalid variable name "1x"'],
  ['var x-y 1', 'invalid variable name "x-y"'],
  ['var len 1', 'variable name "len" is reserved'],
  ['var group 1', 'variable name "group" is reserved'],
  ['var name 1', 'variable name "name" is reserved'],
  ['var type 1', 'variable name "type" is reserved'],
  ['var true 1', 'variable name "true" is reserved'],
  ['var else 1', 'variable name "else" is reserved'],
  ['var x foo()', 'could not compile expression: x, unknown name foo (1:1)\n | foo()\n | ^'],
  ['expr foo(', 'could not compile expression: unexpected token EOF (1:4)\n | foo(\n | ...^'],
  ['var x len(1)', 'could not compile expression: x, invalid argument for len (type int) (1:1)\n | len(1)\n | ^'],
  ['var x int(true)', 'could not compile expression: x, invalid argument for int (type bool) (1:1)\n | int(true)\n | ^'],
  ['var y int(nil)', 'could not compile expression: y, invalid argument for int (type %!s(<nil>)) (1:1)\n | int(nil)\n | ^'],
  ["var x replace('a', 'b')", "could not compile expression: x, not enough arguments to call replace (1:1)\n | replace('a', 'b')\n | ^"],
  ["var x replace(1, 'b', 'c')", "could not compile expression: x, cannot use int as argument (type string) to call replace  (1:9)\n | replace(1, 'b', 'c')\n | ........^"],
  ['var x group()', 'could not compile expression: x, not enough arguments to call group (1:1)\n | group()\n | ^'],
  ['var x group(1, 2)', 'could not compile expression: x, too many arguments to call group (1:1)\n | group(1, 2)\n | ^'],
  ['expr "any(1, # > 0)"', 'could not compile expression: builtin any takes only array (got int) (1:5)\n | any(1, # > 0)\n | ....^'],
  ['expr "any([1], #)"', 'could not compile expression: predicate should return boolean (got int) (1:10)\n | any([1], #)\n | .........^'],
  ['expr any([1])', 'could not compile expression: expected at least 2 arguments (1:8)\n | any([1])\n | .......^'],
  ['expr "any([1], #a > 1)"', 'could not compile expression: unknown pointer #a (1:10)\n | any([1], #a > 1)\n | .........^'],
  ['expr "# > 1"', 'could not compile expression: unexpected token Operator("#") (1:1)\n | # > 1\n | ^'],
  ["expr \"any(['a'], # > 1)\"", "could not compile expression: invalid operation: > (mismatched types string and int) (1:14)\n | any(['a'], # > 1)\n | .............^"],
  ["var y 'a' in [1]", "could not compile expression: y, cannot use string as type int in array (1:5)\n | 'a' in [1]\n | ....^"],
  ["var y join(['a'], 1)", "could not compile expression: y, too many arguments to call join (1:1)\n | join(['a'], 1)\n | ^"],
  ['expr y > 1', 'could not compile expression: unknown name y (1:1)\n | y > 1\n | ^'],
  ['var x upper(1)', 'could not compile expression: x, cannot use int as argument (type string) to call upper  (1:7)\n | upper(1)\n | ......^'],
  ["var x 1 + 'a'", "could not compile expression: x, invalid operation: + (mismatched types int and string) (1:3)\n | 1 + 'a'\n | ..^"],
  ["var x split('a', '.', 1.5)", "could not compile expression: x, cannot use float64 as argument (type int) to call split  (1:17)\n | split('a', '.', 1.5)\n | ................^"],
];

// Two lines: the error is at the second.
const VAR_ERRORS_2: [string, string, string][] = [
  ['var x 1', 'var x 2', 'variable name "x" is reserved'],
  ["var x true ? 1 : 'a'", 'var y upper(x)', 'could not compile expression: y, cannot use *interface {} as argument (type string) to call upper  (1:7)\n | upper(x)\n | ......^'],
  ['var x nil', "var y incidr(x, 'a')", "could not compile expression: y, cannot use *interface {} as argument (type string) to call incidr  (1:8)\n | incidr(x, 'a')\n | .......^"],
  ["var x split('a', '.')", 'var y upper(x)', 'could not compile expression: y, cannot use []string as argument (type string) to call upper  (1:7)\n | upper(x)\n | ......^'],
  ['var x [1]', 'var y upper(x)', 'could not compile expression: y, cannot use []interface {} as argument (type string) to call upper  (1:7)\n | upper(x)\n | ......^'],
];

test('template parse: var and expr errors read as CoreDNS prints them', async () => {
  await parseTable('template', parse, [
    ...VAR_ERRORS.map(([line, msg]): [string, string] => [`. {\n template IN A example {\n ${line}\n }\n}`, `${E}3 - Error during parsing: ${msg}`]),
    ...VAR_ERRORS_2.map(([a, b, msg]): [string, string] => [`. {\n template IN A example {\n ${a}\n ${b}\n }\n}`, `${E}4 - Error during parsing: ${msg}`]),
    // Outside the subset: a setup error at the line, never a query-time failure.
    ['. {\n template IN A example {\n var x abs(1)\n }\n}', /^plugin\/template: Corefile:3 - Error during parsing: could not compile expression: x, the builtin abs\(\) is expr-lang syntax nodens does not implement/],
    [". {\n template IN A example {\n expr split(name(), '.')[0:1] == ['a']\n }\n}", /^plugin\/template: Corefile:3 - Error during parsing: could not compile expression: slices is expr-lang syntax nodens does not implement/],
  ], { view });
});

test('parseUint is strconv.ParseUint', () => {
  assert.equal(parseUint('7b', 16, 8), 123n);
  assert.equal(parseUint('0x1_0', 0, 64), 16n);
  assert.equal(parseUint('010', 0, 64), 8n);
  assert.equal(parseUint('256', 10, 8), 'strconv.ParseUint: parsing "256": value out of range');
  assert.equal(parseUint('', 10, 8), 'strconv.ParseUint: parsing "": invalid syntax');
  assert.equal(parseUint('1_0', 10, 8), 'strconv.ParseUint: parsing "1_0": invalid syntax');
  assert.equal(parseUint('1', 1, 8), 'strconv.ParseUint: parsing "1": invalid base 1');
  assert.equal(parseUint('1', 10, 65), 'strconv.ParseUint: parsing "1": invalid bit size 65');
  assert.equal(parseUint('18446744073709551615', 10, 0), 18446744073709551615n);
});

async function handler(corefile: string) {
  const r = await runSetup(plugin, corefile);
  const next = new StubHandler('next', () => Rcode.REFUSED);
  return { h: r.chain(next), next };
}

test('answers from templates: sections, groups, rcode, aa', async () => {
  const { h } = await handler('. {\n template IN A example {\n  match "^ip-(?P<a>[0-9]+)-(?P<b>[0-9]+)[.]example[.]$"\n'
    + '  answer "{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ index .Match 2 }}"\n  additional "ns.example. A 192.0.2.1"\n'
    + '  authority "example. 30 NS ns"\n }\n}');
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(makeRequest('IP-1-2.example.'), w)), Rcode.NOERROR);
  const m = w.last!;
  assert.equal(m.aa, true);
  assert.deepEqual(m.answer.map(formatRecord), ['ip-1-2.example.\t60\tIN\tA\t10.0.1.2']);
  assert.deepEqual(m.additional.map(formatRecord), ['ns.example.\t3600\tIN\tA\t192.0.2.1']);
  assert.deepEqual(m.authority.map(formatRecord), ['example.\t30\tIN\tNS\tns.']);
});

test('no match: SERVFAIL without fallthrough, next plugin with it; outside the zones: next', async () => {
  const strict = await handler('. {\n template IN A example {\n  match ^a\n }\n}');
  assert.equal(await settle(strict.h.serveDNS(makeRequest('b.example.'), new CaptureWriter())), Rcode.SERVFAIL);
  assert.equal(await settle(strict.h.serveDNS(makeRequest('b.other.'), new CaptureWriter())), Rcode.REFUSED);
  assert.equal(strict.next.calls, 1);
  // Another type in the zone: not this template's, so on to the next plugin.
  assert.equal(await settle(strict.h.serveDNS(makeRequest('a.example.', { type: RRType.MX }), new CaptureWriter())), Rcode.REFUSED);
  const fall = await handler('. {\n template IN A example {\n  match ^a\n  fallthrough\n }\n template IN A example {\n  answer "{{ .Name }} A 1.1.1.1"\n }\n}');
  const w = new CaptureWriter();
  assert.equal(await settle(fall.h.serveDNS(makeRequest('b.example.'), w)), Rcode.NOERROR);
  assert.equal(w.last!.answer.length, 1);
});

test('rcode SERVFAIL is left to the server; ederror adds an OPT with the EDE', async () => {
  const { h } = await handler('. {\n template ANY ANY sf.example {\n  rcode SERVFAIL\n }\n template ANY ANY invalid {\n  rcode NXDOMAIN\n  ederror 21 "RFC2606"\n }\n}');
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(makeRequest('x.sf.example.'), w)), Rcode.SERVFAIL);
  assert.equal(w.msgs.length, 0);
  assert.equal(await settle(h.serveDNS(makeRequest('x.invalid.', { class: RRClass.CH, type: RRType.TXT }), w)), Rcode.NXDOMAIN);
  const e = w.last!.edns!;
  assert.equal(e.udpSize, 4096);
  assert.equal(e.do, true);
  assert.deepEqual([...e.options[0]!.data], [0, 21, ...Buffer.from('RFC2606')]);
});

test('template and record failures: counted, SERVFAIL with the error', async () => {
  const { h } = await handler('. {\n template IN A example {\n  answer "{{ .Nope }}"\n }\n template IN AAAA example {\n  answer "{{ .Name }} AAAA nonsense"\n }\n}');
  const labels = { zone: 'example.', class: 'IN', type: 'A', section: 'answer', template: '{{.Nope}}' };
  const before = await metricValue('coredns_template_template_failures_total', labels);
  await assert.rejects(async () => settle(h.serveDNS(makeRequest('a.example.'), new CaptureWriter())), (e: unknown) => {
    assert.ok(e instanceof PluginError);
    assert.equal(e.rcode, Rcode.SERVFAIL);
    assert.equal(e.message, 'template: answer:1:3: executing "answer" at <.Nope>: can\'t evaluate field Nope in type *template.templateData');
    return true;
  });
  assert.equal(await metricValue('coredns_template_template_failures_total', labels), before + 1);
  const rrLabels = { zone: 'example.', class: 'IN', type: 'AAAA', section: 'answer', template: '{{.Name}} AAAA nonsense' };
  const rrBefore = await metricValue('coredns_template_rr_failures_total', rrLabels);
  await assert.rejects(async () => settle(h.serveDNS(makeRequest('a.example.', { type: RRType.AAAA }), new CaptureWriter())), PluginError);
  assert.equal(await metricValue('coredns_template_rr_failures_total', rrLabels), rrBefore + 1);
});

test('matches are counted with the zone, class and type labels', async () => {
  const { h } = await handler('. {\n template ANY ANY m.example {\n  rcode NXDOMAIN\n }\n}');
  const labels = { server: 'dns://:53', zone: 'm.example.', view: '', class: 'ANY', type: 'ANY' };
  const before = await metricValue('coredns_template_matches_total', labels);
  await settle(h.serveDNS(makeRequest('x.m.example.', { type: RRType.ANY, class: RRClass.ANY }), new CaptureWriter()));
  assert.equal(await metricValue('coredns_template_matches_total', labels), before + 1);
  const txt = { ...labels, class: 'IN', type: 'TXT' };
  const b2 = await metricValue('coredns_template_matches_total', txt);
  await settle(h.serveDNS(makeRequest('x.m.example.', { type: RRType.TXT }), new CaptureWriter()));
  assert.equal(await metricValue('coredns_template_matches_total', txt), b2 + 1);
});

test('template data: Meta, Remote, Message, Question', async () => {
  const { h } = await handler('. {\n template IN TXT example {\n  answer "{{ .Name }} TXT \\"{{ .Meta \\"x/y\\" }}\\" \\"{{ .Remote }}\\" \\"{{ .Message.Id }}\\" \\"{{ .Question.Qtype }}\\" \\"{{ (index .Message.Question 0).Name }}\\""\n }\n}');
  const req = makeRequest('A.example.', { type: RRType.TXT, remote: '192.0.2.9', id: 77 });
  req.beginMetadata();
  req.setMetadata('x/y', 'meta');
  const w = new CaptureWriter();
  await settle(h.serveDNS(req, w));
  assert.equal(formatRecord(w.last!.answer[0]!), 'a.example.\t3600\tIN\tTXT\t"meta" "192.0.2.9" "77" "16" "A.example."');
});

test('a CNAME answer to an A query is followed (no server: the lookup fails and the CNAME stays alone)', async () => {
  const { h } = await handler('. {\n template IN A foogle.com {\n  answer "foogle.com 60 IN CNAME google.com"\n }\n}');
  const w = new CaptureWriter();
  assert.equal(await settle(h.serveDNS(makeRequest('foogle.com.'), w)), Rcode.NOERROR);
  assert.deepEqual(w.last!.answer.map(formatRecord), ['foogle.com.\t60\tIN\tCNAME\tgoogle.com.']);
});

test('a template that renders no record is a panic, as in CoreDNS', async () => {
  const { h } = await handler('. {\n template IN A example {\n  answer "{{ if false }}x{{ end }}"\n }\n}');
  await assert.rejects(async () => settle(h.serveDNS(makeRequest('a.example.'), new CaptureWriter())),
    /invalid memory address or nil pointer dereference/);
});
