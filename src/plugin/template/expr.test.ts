// template's `var` and `expr` at query time: the cases of CoreDNS 1.15.0's expr_test.go and var_test.go.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CaptureWriter, StubHandler, makeRequest, parseOptions, runSetup, settle } from '../pkg/testing.ts';
import { formatRecord } from '../../wire/text.ts';
import { Rcode, RRType } from '../../wire/constants.ts';
import { parse, plugin, type TemplateOptions } from './setup.ts';

/** What the next plugin returns: a template that falls through reaches it. */
const FALLTHROUGH = Rcode.REFUSED;

interface Case {
  name: string;
  config: string;
  qname: string;
  qtype?: number;
  md?: Record<string, string>;
  code?: number;
  answer?: string[];
  extra?: string[];
  ns?: string[];
}

const CASES: Case[] = [
  // expr_test.go
  { name: 'True', config: "expr name() == 'a.example.'\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"", qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'FalseServfail', config: "expr name() == 'b.example.'\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"", qname: 'a.example.', code: Rcode.SERVFAIL },
  { name: 'FalseFallthrough', config: "expr name() == 'b.example.'\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"\n fallthrough", qname: 'a.example.', code: FALLTHROUGH },
  { name: 'FalseFallthroughZoneMismatch', config: "expr name() == 'b.example.'\n fallthrough other.example.", qname: 'a.example.', code: Rcode.SERVFAIL },
  { name: 'AllTrue', config: "expr name() == 'a.example.'\n expr type() == 'A'\n expr incidr(client_ip(), '10.0.0.0/8')\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"", qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'LastFalse', config: "expr name() == 'a.example.'\n expr type() == 'A'\n expr incidr(client_ip(), '192.0.2.0/24')\n fallthrough", qname: 'a.example.', code: FALLTHROUGH },
  { name: 'UsesVars', config: "match ^(?P<n>[0-9]+)[.]example[.]$\n var num int(group('n'))\n expr num > 1\n answer \"{{ .Name }} 60 IN A 10.0.0.{{ .Var.num }}\"\n fallthrough", qname: '2.example.', answer: ['2.example.\t60\tIN\tA\t10.0.0.2'] },
  { name: 'UsesVarsFalse', config: "match ^(?P<n>[0-9]+)[.]example[.]$\n var num int(group('n'))\n expr num > 1\n fallthrough", qname: '1.example.', code: FALLTHROUGH },
  { name: 'UsesGroup', config: "match ^(?P<n>[0-9]+)[.]example[.]$\n expr group('n') == '2' && group(0) == '2.example.'\n answer \"{{ .Name }} 60 IN A 10.0.0.{{ .Group.n }}\"", qname: '2.example.', answer: ['2.example.\t60\tIN\tA\t10.0.0.2'] },
  { name: 'Metadata', config: "expr metadata('test/region') == 'eu'\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"\n fallthrough", qname: 'a.example.', md: { 'test/region': 'eu' }, answer: ['a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'MetadataMismatch', config: "expr metadata('test/region') == 'eu'\n fallthrough", qname: 'a.example.', md: { 'test/region': 'us' }, code: FALLTHROUGH },
  { name: 'NonBool', config: 'expr 1\n fallthrough', qname: 'a.example.', code: FALLTHROUGH },
  { name: 'RuntimeError', config: "expr incidr('notanip', '10.0.0.0/8')\n fallthrough", qname: 'a.example.', code: Rcode.SERVFAIL },
  { name: 'NoMatchNoEvaluation', config: "match ^a[.]example[.]$\n expr incidr('notanip', '10.0.0.0/8')\n fallthrough", qname: 'b.example.', code: FALLTHROUGH },
  // var_test.go
  { name: 'Constant', config: 'var ttl 60\n answer "{{ .Name }} {{ .Var.ttl }} IN A 10.0.0.1"', qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'Chained', config: 'var a 1\n var b a + 1\n var c b * 10\n answer "{{ .Name }} 60 IN A 10.{{ .Var.a }}.{{ .Var.b }}.{{ .Var.c }}"', qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.1.2.20'] },
  { name: 'GroupByNameAndIndex', config: "match ^(?P<a>[0-9]+)-(?P<b>[0-9]+)[.]example[.]$\n var a group('a')\n var b group(2)\n var whole group(0)\n answer \"{{ .Var.whole }} 60 IN A 10.0.{{ .Var.a }}.{{ .Var.b }}\"", qname: '12-34.example.', answer: ['12-34.example.\t60\tIN\tA\t10.0.12.34'] },
  { name: 'GroupMissing', config: "match ^(?P<a>[a-z]+)[.]example[.]$\n var missing group('nosuchgroup') + group(9)\n answer \"{{ .Name }} 60 IN TXT \\\"empty={{ eq .Var.missing \\\"\\\" }}\\\"\"", qname: 'a.example.', qtype: RRType.TXT, answer: ['a.example.\t60\tIN\tTXT\t"empty=true"'] },
  { name: 'QueryFunctions', config: 'var n name()\n var t type()\n var ip client_ip()\n answer "{{ .Var.n }} 60 IN A {{ .Var.ip }}"\n additional "{{ .Var.n }} 60 IN TXT \\"{{ .Var.t }}\\""', qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.240.0.1'], extra: ['a.example.\t60\tIN\tTXT\t"A"'] },
  { name: 'VarMetadata', config: "var region metadata('test/region')\n answer \"{{ .Var.region }}.{{ .Name }} 60 IN A 10.0.0.1\"", qname: 'a.example.', md: { 'test/region': 'eu' }, answer: ['eu.a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'BoolInTemplateCondition', config: "var local incidr(client_ip(), '10.0.0.0/8')\n answer \"{{ .Name }} 60 IN A {{ if .Var.local }}10.0.0.1{{ else }}192.0.2.1{{ end }}\"", qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.0.0.1'] },
  { name: 'UsedInAllSections', config: "var target 'ns0.example.'\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"\n additional \"{{ .Var.target }} 60 IN A 10.0.0.2\"\n authority \"example. 60 IN NS {{ .Var.target }}\"", qname: 'a.example.', answer: ['a.example.\t60\tIN\tA\t10.0.0.1'], extra: ['ns0.example.\t60\tIN\tA\t10.0.0.2'], ns: ['example.\t60\tIN\tNS\tns0.example.'] },
  { name: 'NoVars', config: 'answer "{{ .Name }} 60 IN TXT \\"{{ len .Var }}\\""', qname: 'a.example.', qtype: RRType.TXT, answer: ['a.example.\t60\tIN\tTXT\t"0"'] },
  { name: 'VarRuntimeError', config: "var bad incidr('notanip', '10.0.0.0/8')\n answer \"{{ .Name }} 60 IN A 10.0.0.1\"", qname: 'a.example.', code: Rcode.SERVFAIL },
  { name: 'VarRuntimeErrorWithFallthrough', config: "var bad incidr('notanip', '10.0.0.0/8')\n fallthrough", qname: 'a.example.', code: Rcode.SERVFAIL },
  { name: 'VarNoMatchNoEvaluation', config: "match ^a[.]example[.]$\n var bad incidr('notanip', '10.0.0.0/8')\n fallthrough", qname: 'b.example.', code: FALLTHROUGH },
  // The README's device example, and the builtins of the subset.
  { name: 'ReadmeDevice', config: "match ^(?P<ip>[0-9]{1,3}(-[0-9]{1,3}){3})[.]example[.]$\n var ip replace(group('ip'), '-', '.')\n expr \"any(['10.0.0.0/8', '192.168.0.0/16'], incidr(ip, #))\"\n answer \"{{ .Name }} 60 IN A {{ .Var.ip }}\"\n fallthrough", qname: '192-168-1-2.example.', answer: ['192-168-1-2.example.\t60\tIN\tA\t192.168.1.2'] },
  { name: 'ReadmeDevicePublic', config: "match ^(?P<ip>[0-9]{1,3}(-[0-9]{1,3}){3})[.]example[.]$\n var ip replace(group('ip'), '-', '.')\n expr \"any(['10.0.0.0/8', '192.168.0.0/16'], incidr(ip, #))\"\n fallthrough", qname: '8-8-8-8.example.', code: FALLTHROUGH },
  { name: 'Builtins', config: "var a upper(trimSuffix(name(), '.')) + lower('X') + trim('  y ') + string(len(split(name(), '.')))\n var b join(split(name(), '.'), '_') + string(indexOf(name(), 'e')) + string(hasPrefix(name(), 'a'))\n var c float('1.5') / 2\n var d \"count(split(name(), '.'), # != '') + int(3.9)\"\n answer \"{{ .Name }} 60 IN TXT \\\"{{ .Var.a }}\\\" \\\"{{ .Var.b }}\\\" \\\"{{ .Var.c }}\\\" \\\"{{ .Var.d }}\\\" \\\"{{ printf \\\"%T %T\\\" .Var.c .Var.d }}\\\"\"", qname: 'a.example.', qtype: RRType.TXT, answer: ['a.example.\t60\tIN\tTXT\t"A.EXAMPLExy3" "a_example_2true" "0.75" "5" "float64 int"'] },
];

for (const c of CASES) {
  test(`template var/expr: ${c.name}`, async () => {
    const r = await runSetup(plugin, `. {\n template IN ${c.qtype === RRType.TXT ? 'TXT' : 'A'} example. {\n ${c.config}\n }\n}`);
    const h = r.chain(new StubHandler('next', () => FALLTHROUGH));
    const req = makeRequest(c.qname, { type: c.qtype ?? RRType.A, remote: '10.240.0.1' });
    if (c.md !== undefined) {
      req.beginMetadata();
      for (const [k, v] of Object.entries(c.md)) req.setMetadata(k, v);
    }
    const w = new CaptureWriter();
    const code = await settle(h.serveDNS(req, w));
    assert.equal(code, c.code ?? Rcode.NOERROR);
    if ((c.code ?? Rcode.NOERROR) !== Rcode.NOERROR) return;
    const m = w.last!;
    assert.deepEqual(m.answer.map(formatRecord), c.answer ?? []);
    assert.deepEqual(m.additional.map(formatRecord), c.extra ?? []);
    assert.deepEqual(m.authority.map(formatRecord), c.ns ?? []);
  });
}

test('template var/expr: a later template does not see an earlier one\'s variables', async () => {
  const r = await runSetup(plugin, ". {\n template IN TXT example. {\n match ^a[.]\n var v '1'\n answer \"{{ .Name }} 60 IN TXT \\\"{{ .Var.v }}\\\"\"\n fallthrough\n }\n"
    + ' template IN TXT example. {\n  answer "{{ .Name }} 60 IN TXT \\"{{ len .Var }}\\""\n }\n}');
  const h = r.chain(new StubHandler('next', () => FALLTHROUGH));
  const w = new CaptureWriter();
  await settle(h.serveDNS(makeRequest('a.example.', { type: RRType.TXT }), w));
  await settle(h.serveDNS(makeRequest('b.example.', { type: RRType.TXT }), w));
  assert.deepEqual(w.msgs.map((m) => formatRecord(m.answer[0]!)), ['a.example.\t60\tIN\tTXT\t"1"', 'b.example.\t60\tIN\tTXT\t"0"']);
});

test('template var/expr: variables get the static type CoreDNS declares them with', async () => {
  const o: TemplateOptions = await parseOptions('template', parse, ". {\n template IN A {\n var a 1\n var b 1 / 2\n var c 'x'\n var d true\n var e [1]\n var f split('a', '.')\n var g nil\n var h true ? 1 : 'a'\n var i h\n }\n}");
  assert.deepEqual(o.templates[0]!.vars.map((v) => [v.name, v.type]), [
    ['a', 'int'], ['b', 'float64'], ['c', 'string'], ['d', 'bool'], ['e', '[]interface {}'], ['f', '[]string'],
    ['g', '*interface {}'], ['h', '*interface {}'], ['i', '*interface {}'],
  ]);
});
