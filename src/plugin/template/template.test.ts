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
  })),
});

const base = { regex: ['.*'], answer: [], additional: [], authority: [], rcode: 0, ederror: undefined, fall: [] };
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
        authority: ['{{.Zone}} 60 IN NS ns.'], rcode: 3, ederror: { code: 21, reason: 'why not' }, fall: ['c.example.'],
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
    ['. {\n template IN A {\n var x 1\n}\n}', `${E}3 - Error during parsing: var: expr-lang expressions are not supported by nodens`],
    ['. {\n template IN A {\n expr "true"\n}\n}', `${E}3 - Error during parsing: expr: expr-lang expressions are not supported by nodens`],
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
