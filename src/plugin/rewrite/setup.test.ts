import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTable, runSetup, setupError } from '../pkg/testing.ts';
import { parse, plugin, type RewriteOptions } from './setup.ts';
import {
  CnameRule, EdnsLocalRule, EdnsNsidRule, EdnsSubnetRule, EdnsVariableRule, NameRule, RcodeRule,
  QuestionFieldRule, TtlRule, type Rule,
} from './rules.ts';

/** A rule in one line: field, mode, match and values, as the table compares them. */
function describe(r: Rule): string {
  if (r instanceof NameRule) {
    const parts = r.parts === undefined ? '' : ` parts=${r.parts.map((p) => p.group >= 0 ? `{${p.group}}` : p.label !== '' ? `{${p.label}}` : p.literal).join('|')}`;
    return `${r.mode} name ${r.match} ${r.from} ${r.to}${r.auto ? ' auto' : ''} responses=${r.responses.length}${parts}`;
  }
  if (r instanceof QuestionFieldRule) return `${r.mode} ${r.field} ${r.from} ${r.to}`;
  if (r instanceof TtlRule) return `${r.mode} ttl ${r.matcher.match} ${r.matcher.value} ${r.min}-${r.max}`;
  if (r instanceof RcodeRule) return `${r.mode} rcode ${r.matcher.match} ${r.matcher.value} ${r.from}->${r.to}`;
  if (r instanceof CnameRule) return `${r.mode} cname ${r.match} ${r.from} ${r.to}`;
  if (r instanceof EdnsLocalRule) return `${r.mode} edns0 local ${r.action} ${r.code} ${Buffer.from(r.data).toString('hex')}${r.revert ? ' revert' : ''}`;
  if (r instanceof EdnsVariableRule) return `${r.mode} edns0 local ${r.action} ${r.code} ${r.variable}${r.revert ? ' revert' : ''}`;
  if (r instanceof EdnsNsidRule) return `${r.mode} edns0 nsid ${r.action}${r.revert ? ' revert' : ''}`;
  if (r instanceof EdnsSubnetRule) return `${r.mode} edns0 subnet ${r.action} ${r.v4} ${r.v6}${r.revert ? ' revert' : ''}`;
  return 'unknown';
}

const view = (o: RewriteOptions): string[] => o.rules.map(describe);

test('rewrite parse: rules', async () => {
  await parseTable<RewriteOptions, string[]>('rewrite', parse, [
    ['. {\n rewrite name a.example.org b.example.org\n}', ['stop name exact a.example.org. b.example.org. auto responses=0']],
    ['. {\n rewrite name exact A.Example.ORG B.example.org.\n}', ['stop name exact a.example.org. b.example.org. auto responses=0']],
    ['. {\n rewrite continue name prefix pre www\n}', ['continue name prefix pre. www. responses=0']],
    ['. {\n rewrite STOP name PREFIX pre www answer auto\n}', ['stop name prefix pre. www. auto responses=0']],
    ['. {\n rewrite name suffix .a.org .b.org\n}', ['stop name suffix .a.org. .b.org. responses=0']],
    ['. {\n rewrite name suffix .a.org .b.org answer auto\n}', ['stop name suffix .a.org. .b.org. responses=2']],
    ['. {\n rewrite name substring demo.cluster.local default.svc.cluster.local\n}', ['stop name substring demo.cluster.local. default.svc.cluster.local. responses=0']],
    ['. {\n rewrite name regex (.*)\\.Example\\.com {1}.Default.svc\n}', ['stop name regex (.*)\\.Example\\.com {1}.default.svc. responses=0']],
    ['. {\n rewrite stop {\n  name regex (.*)\\.example\\.com {1}.default.svc.cluster.local\n  answer name (.*)\\.default\\.svc\\.cluster\\.local {1}.example.com\n }\n}',
      ['stop name regex (.*)\\.example\\.com {1}.default.svc.cluster.local. responses=1']],
    ['. {\n rewrite name regex (.*) {1} answer name (a) {1} value (b) {1} answer value (c) {1}\n}', ['stop name regex (.*) {1}. responses=3']],
    ['. {\n rewrite name regex ^([^.]+)\\.example\\.$ {1}.{kubernetes/client-namespace}.svc.cluster.local. metadata answer auto\n}',
      ['stop name regex ^([^.]+)\\.example\\.$  auto responses=0 parts={1}|.|{kubernetes/client-namespace}|.svc.cluster.local.']],
    ['. {\n rewrite name regex (.*) {1}.X metadata\n}', ['stop name regex (.*)  responses=0 parts={1}|.x.']],
    ['. {\n rewrite class CH IN\n rewrite continue type aaaa a\n}', ['stop class 3 1', 'continue type 28 1']],
    ['. {\n rewrite ttl example.com. 30-300\n rewrite ttl example.com. -30\n rewrite ttl example.com. 30-\n rewrite ttl example.com. 30\n}',
      ['stop ttl exact example.com. 30-300', 'stop ttl exact example.com. 0-30', 'stop ttl exact example.com. 30-2147483647', 'stop ttl exact example.com. 30-30']],
    ['. {\n rewrite continue {\n  ttl regex (.*)\\.coredns\\.rocks 15\n }\n rewrite ttl SUFFIX .Org 1-2\n}', ['continue ttl regex (.*)\\.coredns\\.rocks 15-15', 'stop ttl suffix .org. 1-2']],
    ['. {\n rewrite continue {\n  rcode regex (.*)\\.coredns\\.rocks SERVFAIL NOERROR\n }\n rewrite rcode a.org 2 notimpl\n rewrite rcode prefix x 23 badsig\n}',
      ['continue rcode regex (.*)\\.coredns\\.rocks 2->0', 'stop rcode exact a.org. 2->4', 'stop rcode prefix x. 23->16']],
    ['. {\n rewrite cname A.org B.org\n rewrite cname regex (.*).CDN.example.net. {1}.other.cdn.com.\n rewrite cname prefix a b\n}',
      ['stop cname exact a.org. b.org.', 'stop cname regex (.*).cdn.example.net. {1}.other.cdn.com.', 'stop cname prefix a b']],
    ['. {\n rewrite edns0 local set 0xffee abcd\n rewrite edns0 local set 0xffee 0x61626364 revert\n rewrite edns0 LOCAL APPEND 65518 ab\n rewrite edns0 local unset 0xffee\n}',
      ['stop edns0 local set 65518 61626364', 'stop edns0 local set 65518 61626364 revert', 'stop edns0 local append 65518 6162', 'stop edns0 local unset 65518 ']],
    ['. {\n rewrite edns0 local set 0xffee {client_ip}\n rewrite edns0 local replace 0xffee {some-plugin/some-label} revert\n}',
      ['stop edns0 local set 65518 {client_ip}', 'stop edns0 local replace 65518 {some-plugin/some-label} revert']],
    ['. {\n rewrite edns0 nsid set\n rewrite edns0 nsid append revert\n rewrite edns0 nsid unset\n}', ['stop edns0 nsid set', 'stop edns0 nsid append revert', 'stop edns0 nsid unset']],
    ['. {\n rewrite edns0 subnet set 24 56\n rewrite edns0 subnet replace 0x10 0 revert\n rewrite edns0 subnet unset\n}',
      ['stop edns0 subnet set 24 56', 'stop edns0 subnet replace 16 0 revert', 'stop edns0 subnet unset 0 0']],
  ], { view });
});

test('rewrite parse: the local codes the rules use', async () => {
  await parseTable<RewriteOptions, number[]>('rewrite', parse, [
    ['. {\n rewrite edns0 local set 0xffee abcd\n rewrite edns0 local set 0xffe1 {qname}\n rewrite edns0 local unset 0xffee\n rewrite edns0 nsid set\n}', [0xffee, 0xffe1]],
  ], { view: (o) => o.localCodes });
});

// Every error text below is what CoreDNS 1.15.0 prints for the same line.
test('rewrite parse: errors as CoreDNS reports them', async () => {
  await parseTable('rewrite', parse, [
  [". {\n rewrite\n}", "plugin/rewrite: no rule type specified for rewrite"],
  [". {\n rewrite foo a b\n}", "plugin/rewrite: invalid rule type \"foo\""],
  [". {\n rewrite continue\n}", "plugin/rewrite: continue rule must begin with a rule type"],
  [". {\n rewrite stop\n}", "plugin/rewrite: stop rule must begin with a rule type"],
  [". {\n rewrite answer name a b\n}", "plugin/rewrite: response rewrites must begin with a name rule"],
  [". {\n rewrite name a\n}", "plugin/rewrite: too few arguments for a name rule"],
  [". {\n rewrite name bogus a b\n}", "plugin/rewrite: name rule supports only exact, prefix, suffix, substring, and regex name matching, received: bogus"],
  [". {\n rewrite name regex ( b\n}", "plugin/rewrite: invalid regex matching pattern: ("],
  [". {\n rewrite name regex (a) {1}{2}\n}", "plugin/rewrite: the rewrite regex pattern ({1}{2}) uses more subexpressions than its corresponding matching regex pattern ((a))"],
  [". {\n rewrite name exact a ({1}\n}", "plugin/rewrite: invalid regex matching pattern: ({1}."],
  [". {\n rewrite name exact a b answer\n}", "plugin/rewrite: invalid arguments for exact rule"],
  [". {\n rewrite name regex (.*) {1} answer name\n}", "plugin/rewrite: name answer rule for regex rule: 2 arguments required"],
  [". {\n rewrite name regex (.*) {1} answer name ( x\n}", "plugin/rewrite: name answer rule for regex rule: invalid regex matching pattern: ("],
  [". {\n rewrite name regex (.*) {1} answer value a\n}", "plugin/rewrite: value answer rule for regex rule: 2 arguments required"],
  [". {\n rewrite name regex (.*) {1} foo bar\n}", "plugin/rewrite: exceeded the number of arguments for a non-answer rule argument for regex rule"],
  [". {\n rewrite name regex (.*) {1} answer bar x y\n}", "plugin/rewrite: invalid type \"bar\" for answer rule for regex rule"],
  [". {\n rewrite name regex (.*) {1} answer auto answer name a b\n}", "plugin/rewrite: auto name answer rule cannot be combined with explicit name anwer rules"],
  [". {\n rewrite name exact a b metadata\n}", "plugin/rewrite: metadata is only supported for regex name rules"],
  [". {\n rewrite name regex (.*) {1}.{bad} metadata\n}", "plugin/rewrite: invalid metadata label \"bad\" in name replacement"],
  [". {\n rewrite name regex (.*) {2}.x metadata\n}", "plugin/rewrite: capture group 2 does not exist in name matching pattern"],
  [". {\n rewrite name regex (.*) {1 metadata\n}", "plugin/rewrite: unclosed placeholder in metadata name replacement"],
  [". {\n rewrite name regex (.*) a}b metadata\n}", "plugin/rewrite: unmatched closing brace in metadata name replacement"],
  [". {\n rewrite class IN\n}", "plugin/rewrite: class rules must have exactly two arguments"],
  [". {\n rewrite class XX IN\n}", "plugin/rewrite: invalid class \"XX\""],
  [". {\n rewrite class IN CLASS3\n}", "plugin/rewrite: invalid class \"CLASS3\""],
  [". {\n rewrite type A XX\n}", "plugin/rewrite: invalid type \"XX\""],
  [". {\n rewrite type TYPE65 A\n}", "plugin/rewrite: invalid type \"TYPE65\""],
  [". {\n rewrite type A AAAA x\n}", "plugin/rewrite: type rules must have exactly two arguments"],
  [". {\n rewrite ttl a\n}", "plugin/rewrite: too few (1) arguments for a ttl rule"],
  [". {\n rewrite ttl a b\n}", "plugin/rewrite: invalid TTL 'b' for a ttl rule"],
  [". {\n rewrite ttl a -\n}", "plugin/rewrite: invalid TTL '-' for a ttl rule"],
  [". {\n rewrite ttl a 5-3\n}", "plugin/rewrite: invalid TTL '5-3' for a ttl rule"],
  [". {\n rewrite ttl foo a 3\n}", "plugin/rewrite: ttl rule supports only exact, prefix, suffix, substring, and regex name matching"],
  [". {\n rewrite ttl regex ( 3\n}", "plugin/rewrite: invalid regex pattern in a ttl rule: ("],
  [". {\n rewrite ttl a b c d\n}", "plugin/rewrite: invalid TTL '' for a ttl rule"],
  [". {\n rewrite ttl a 4294967296\n}", "plugin/rewrite: invalid TTL '4294967296' for a ttl rule"],
  [". {\n rewrite rcode a b\n}", "plugin/rewrite: too few (2) arguments for a rcode rule"],
  [". {\n rewrite rcode a NOPE NXDOMAIN\n}", "plugin/rewrite: invalid matching RCODE 'NOPE' for a rcode rule"],
  [". {\n rewrite rcode a NXDOMAIN 24\n}", "plugin/rewrite: invalid replacement RCODE '24' for a rcode rule"],
  [". {\n rewrite rcode a BADVERS 0\n}", "plugin/rewrite: invalid matching RCODE 'BADVERS' for a rcode rule"],
  [". {\n rewrite rcode a RCODE5 0\n}", "plugin/rewrite: invalid matching RCODE 'RCODE5' for a rcode rule"],
  [". {\n rewrite rcode foo a 1 2\n}", "plugin/rewrite: rcode rule supports only exact, prefix, suffix, substring, and regex name matching"],
  [". {\n rewrite rcode regex ( 1 2\n}", "plugin/rewrite: invalid regex pattern in a rcode rule: ("],
  [". {\n rewrite rcode a b c d e\n}", "plugin/rewrite: invalid matching RCODE '' for a rcode rule"],
  [". {\n rewrite cname a\n}", "plugin/rewrite: too few (1) arguments for a cname rule"],
  [". {\n rewrite cname foo a b\n}", "plugin/rewrite: unknown cname rewrite type: foo"],
  [". {\n rewrite cname regex ( b\n}", "plugin/rewrite: invalid cname rewrite regex pattern: error parsing regexp: missing closing ): `(`"],
  [". {\n rewrite edns0 local\n}", "plugin/rewrite: too few arguments for an EDNS0 rule"],
  [". {\n rewrite edns0 local bogus\n}", "plugin/rewrite: invalid action: \"bogus\""],
  [". {\n rewrite edns0 local set 0xffee\n}", "plugin/rewrite: EDNS0 local rules require three or four args"],
  [". {\n rewrite edns0 local set xyz abc\n}", "plugin/rewrite: strconv.ParseUint: parsing \"xyz\": invalid syntax"],
  [". {\n rewrite edns0 local set 0x10000 abc\n}", "plugin/rewrite: strconv.ParseUint: parsing \"0x10000\": value out of range"],
  [". {\n rewrite edns0 local set 0xffee 0xabc\n}", "plugin/rewrite: encoding/hex: odd length hex string"],
  [". {\n rewrite edns0 local set 0xffee 0xzz\n}", "plugin/rewrite: encoding/hex: invalid byte: U+007A 'z'"],
  [". {\n rewrite edns0 local set 0xffee {bogus}\n}", "plugin/rewrite: unsupported variable name \"{bogus}\""],
  [". {\n rewrite edns0 local unset\n}", "plugin/rewrite: local unset action requires exactly two arguments"],
  [". {\n rewrite edns0 nsid set x\n}", "plugin/rewrite: EDNS0 NSID rules can accept no more than one arg"],
  [". {\n rewrite edns0 nsid unset x\n}", "plugin/rewrite: nsid unset action requires exactly one argument"],
  [". {\n rewrite edns0 subnet set 24\n}", "plugin/rewrite: EDNS0 subnet rules require three or four args"],
  [". {\n rewrite edns0 subnet set 33 56\n}", "plugin/rewrite: invalid IPv4 bit mask length 33"],
  [". {\n rewrite edns0 subnet set 24 129\n}", "plugin/rewrite: invalid IPv6 bit mask length 129"],
  [". {\n rewrite edns0 subnet set x 56\n}", "plugin/rewrite: strconv.ParseUint: parsing \"x\": invalid syntax"],
  [". {\n rewrite edns0 subnet unset x\n}", "plugin/rewrite: subnet unset action requires exactly one argument"],
  [". {\n rewrite edns0 cookie set\n}", "plugin/rewrite: invalid rule type \"cookie\""],
  [". {\n rewrite edns0 cookie unset\n}", "plugin/rewrite: invalid rule type \"cookie\""],
  ]);
});

test('rewrite setup: a regexp longer than 10000 characters is refused', async () => {
  const long = 'a'.repeat(10001);
  assert.equal(await setupError(plugin, `. {\n rewrite name regex ${long} x\n}`), 'plugin/rewrite: regex pattern too long: 10001 > 10000');
  assert.equal(await setupError(plugin, `. {\n rewrite ttl regex ${long} 3\n}`), 'plugin/rewrite: regex pattern too long in a ttl rule: 10001 > 10000');
  assert.equal(await setupError(plugin, `. {\n rewrite rcode regex ${long} 1 2\n}`), 'plugin/rewrite: regex pattern too long in a rcode rule: 10001 > 10000');
  assert.equal(await setupError(plugin, `. {\n rewrite cname regex ${long} x\n}`), 'plugin/rewrite: regex pattern too long in a cname rule: 10001 > 10000');
});

test('rewrite setup: adds one handler for all the lines of a block', async () => {
  const r = await runSetup(plugin, '. {\n rewrite name a.org b.org\n rewrite ttl a.org 5\n}');
  const h = r.chain();
  assert.equal(h.name, 'rewrite');
});
