import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Expression, ExpressionError, UnsupportedExpression } from './expression.ts';
import { makeRequest } from './testing.ts';

// Each error text was printed by CoreDNS 1.15.0 (`plugin/view: ` + this) for the same expression.
const COMPILE_ERRORS: [string, string][] = [
  ['foo()', 'unknown name foo (1:1)\n | foo()\n | ^'],
  ['type() == A', 'unknown name A (1:11)\n | type() == A\n | ..........^'],
  ["type( == 'A'", 'unexpected token Operator("==") (1:7)\n | type( == \'A\'\n | ......^'],
  ['type() == 1', 'invalid operation: == (mismatched types string and int) (1:8)\n | type() == 1\n | .......^'],
  ["name() matches '('", "error parsing regexp: missing closing ): `(` (1:8)\n | name() matches '('\n | .......^"],
  ['type() ~ 2', "unrecognized character: U+007E '~' (1:8)\n | type() ~ 2\n | .......^"],
  ['1 +', 'unexpected token EOF (1:3)\n | 1 +\n | ..^'],
  ["type() == 'A' &&", "unexpected token EOF (1:16)\n | type() == 'A' &&\n | ...............^"],
  ['[1,2', 'unexpected token EOF (1:4)\n | [1,2\n | ...^'],
  ['', 'unexpected token EOF'],
  ['incidr(client_ip())', 'not enough arguments to call incidr (1:1)\n | incidr(client_ip())\n | ^'],
  ["incidr('a','b','c')", "too many arguments to call incidr (1:1)\n | incidr('a','b','c')\n | ^"],
  ["incidr(1, 'x')", "cannot use int as argument (type string) to call incidr  (1:8)\n | incidr(1, 'x')\n | .......^"],
  ['metadata(1)', 'cannot use int as argument (type string) to call metadata  (1:10)\n | metadata(1)\n | .........^'],
  ['metadata()', 'not enough arguments to call metadata (1:1)\n | metadata()\n | ^'],
  ['type() < 1', 'invalid operation: < (mismatched types string and int) (1:8)\n | type() < 1\n | .......^'],
  ['type() and true', 'invalid operation: and (mismatched types string and bool) (1:8)\n | type() and true\n | .......^'],
  ['!type()', 'invalid operation: ! (mismatched type string) (1:1)\n | !type()\n | ^'],
  ["type() in 'abc'", "invalid operation: in (mismatched types string and string) (1:8)\n | type() in 'abc'\n | .......^"],
  ['type() contains 1', 'invalid operation: contains (mismatched types string and int) (1:8)\n | type() contains 1\n | .......^'],
  ['type() + 1', 'invalid operation: + (mismatched types string and int) (1:8)\n | type() + 1\n | .......^'],
  ["metadata(nil) == ''", "cannot use nil as argument (type string) to call metadata (1:10)\n | metadata(nil) == ''\n | .........^"],
  ['(1 == 1', 'unexpected token EOF (1:7)\n | (1 == 1\n | ......^'],
  ["do() == 'x'", 'invalid operation: == (mismatched types bool and string) (1:6)\n | do() == \'x\'\n | .....^'],
  ["-'a' == 'b'", "invalid operation: - (mismatched type string) (1:1)\n | -'a' == 'b'\n | ^"],
  ['name() ? 1 : 2', 'non-bool expression (type string) used as condition (1:1)\n | name() ? 1 : 2\n | ^'],
  ["1 < 'a' < 3", "invalid operation: < (mismatched types int and string) (1:3)\n | 1 < 'a' < 3\n | ..^"],
];

test('expression: compile errors read as expr-lang prints them', () => {
  for (const [src, msg] of COMPILE_ERRORS) {
    assert.throws(() => Expression.compile(src), (e: unknown) => {
      assert.ok(e instanceof ExpressionError, src);
      assert.equal(e.message, msg, src);
      return true;
    });
  }
});

test('expression: expr-lang syntax outside the subset is refused as such', () => {
  for (const src of ["type == 'A'", '1 .. 2', 'abs(size()) > 3', 'filter([1], # > 0) == [1]', "split(name(), '.')[0:1] == ['a']", "name().foo", "[1][:1] == [1]", 'do() ?: true', "nil ?? 'a'", "let x = 1; x"]) {
    assert.throws(() => Expression.compile(src), UnsupportedExpression, src);
  }
});

test('expression: valid expressions compile (CoreDNS accepts each)', () => {
  for (const src of ["type() not in ['A']", "name() not matches 'a'", "name() not contains 'a'", "1 in [1,'a']", 'size() + 1 > 2',
    "'a' == nil", 'nil == nil', '-size() < 0', "'ab\\\\'", "name() matches type()", '`raw\\n` == "raw\\\\n"', '0x10 == 16', '1.5e1 == 15',
    '1 < size() < 100000', "type() == 'A' ? true : false", "true ? 1 : 'a'", '[1,] == [1]', "incidr(client_ip(), '10.0.0.0/8',)", '1 / 0 > 1', '1 == nil']) {
    assert.ok(Expression.compile(src) instanceof Expression, src);
  }
});

const q = makeRequest('Abc.X.Example.', { type: 28, remote: '10.1.2.3', port: 40000, proto: 'tcp', id: 77, edns: { do: true, udpSize: 1232 } });

const VALUES: [string, unknown][] = [
  ['type()', 'AAAA'],
  ['name()', 'abc.x.example.'],
  ['class()', 'IN'],
  ['proto()', 'tcp'],
  ['size()', q.length],
  ['client_ip()', '10.1.2.3'],
  ['port()', '40000'],
  ['id()', 77],
  ['opcode()', 0],
  ['do()', true],
  ['bufsize()', 65535],
  ['server_ip()', '127.0.0.1'],
  ['server_port()', '53'],
  ["metadata('x/y')", ''],
  ["incidr(client_ip(), '10.0.0.0/8')", true],
  ["incidr(client_ip(), '192.168.0.0/16')", false],
  ["incidr('::1', '::/0')", true],
  ["incidr('10.1.2.3', '::/0')", false],
  ["type() in ['A', 'AAAA']", true],
  ["type() not in ['A', 'AAAA']", false],
  ["name() matches '^abc\\\\..*\\\\.example\\\\.$'", true],
  ["name() matches 'ABC'", false],
  ["name() not matches 'ABC'", true],
  ["name() startsWith 'abc' && name() endsWith 'example.' and name() contains '.x.'", true],
  ["not (type() == 'A') || false", true],
  ["!do()", false],
  ['1 + 2 * 3', 7],
  ['(1 + 2) * 3', 9],
  ['7 / 2', 3.5],
  ['7 % 4', 3],
  ['-size() < 0', true],
  ["'a' + 'b'", 'ab'],
  ["'a' < 'b' && 2 >= 2 && 1 <= 1.5 && 3 > 2.5 && 1 != 2", true],
  ['1 == 1.0', true],
  ["'a' == nil", false],
  ['[1, 2] == [1, 2]', true],
  ["type() == 'A' or (proto() == 'tcp' and do())", true],
  ['1 < size() < 100000', true],
  ['1 < size() <= 2', false],
  ["type() == 'AAAA' ? 'six' : 'four'", 'six'],
  ['false ? 1 : do() ? 2 : 3', 2],
  ["split(name(), '.')[0]", 'abc'],
  ["split(name(), '.')[-2]", 'example'],
  ['[[1, 2], [3]][1][0] * 2', 6],
  ["len(split(name(), '.')) + len('é')", 5],
  ["upper(replace(name(), '.', '-', 1))", 'ABC-X.EXAMPLE.'],
  ["any(['AAAA', 'A'], # == type()) && all([1, 2], # > 0) && none([1], # > 1) && one([1, 2], # > 1)", true],
  ["count(split(name(), '.'), # != '')", 3],
  ["trim('..a..', '.') + trimSuffix('ab', 'b') + trimPrefix(' c') + string(1.5) + string(int('7') + int(2.9))", 'aac1.59'],
  ["join(['a', 'b'], '-') + string(indexOf('héllo', 'l')) + string(hasSuffix('ab', 'b'))", 'a-b3true'],
];

test('expression: values of the DefaultEnv functions and operators', () => {
  for (const [src, want] of VALUES) assert.deepEqual(Expression.compile(src).run(q), want, src);
});

test('expression: test() is true only for boolean true; run-time errors are false', () => {
  assert.equal(Expression.compile("type() == 'AAAA'").test(q), true);
  assert.equal(Expression.compile('name()').test(q), false);
  assert.equal(Expression.compile("incidr('not-an-ip', '10.0.0.0/8')").test(q), false);
  assert.equal(Expression.compile("incidr(client_ip(), 'bad')").test(q), false);
  assert.equal(Expression.compile("name() matches type() + '('").test(q), false);
  assert.equal(Expression.compile('1 % (size() - size()) == 0').test(q), false);
  assert.throws(() => Expression.compile("incidr('x', '10.0.0.0/8')").run(q), /first argument is not an IP address/);
});

test('expression: run-time errors of builtins and indexing', () => {
  for (const src of ["int('x') > 0", "split(name(), '.')[9] == ''", "float('x') > 0"]) {
    assert.throws(() => Expression.compile(src).run(q), Error, src);
  }
});

test('expression: a scope adds variables and group()', () => {
  const scope = { vars: [{ name: 'n', type: 'int' as const }, { name: 's', type: '*interface {}' as const }], group: true };
  const e = Expression.compile("n * 2 + len(group('a') + group(0) + group(5))", scope);
  assert.equal(e.type, 'int');
  const env = { vars: [3, 'x'], group: (k: string): string => (k === 'a' ? 'AA' : k === '0' ? 'whole' : '') };
  assert.equal(e.run(q, env), 13);
  assert.throws(() => Expression.compile('group(1)'), ExpressionError);
  assert.throws(() => Expression.compile('upper(s)', scope), /cannot use \*interface \{\} as argument \(type string\) to call upper/);
});

test('expression: metadata() reads the request\'s labels once collection began', () => {
  const r = makeRequest('a.example.');
  const e = Expression.compile("metadata('view/name') == 'v'");
  assert.equal(e.test(r), false);
  r.beginMetadata();
  r.setMetadata('view/name', () => 'v');
  assert.equal(e.test(r), true);
});

test('expression: lexer errors at expr\'s positions', () => {
  const cases: [string, string][] = [
    ["'abc", "literal not terminated (1:5)\n | 'abc\n | ....^"],
    ['1e == 1', 'invalid float literal: strconv.ParseFloat: parsing "1e": invalid syntax (1:4)\n | 1e == 1\n | ...^'],
    ['99999999999999999999 > 1', 'invalid integer literal: strconv.ParseInt: parsing "99999999999999999999": value out of range (1:22)\n | 99999999999999999999 > 1\n | .....................^'],
    ['not type() == \'A\'', "invalid operation: not (mismatched type string) (1:1)\n | not type() == 'A'\n | ^"],
    ['1 2', 'unexpected token Number("2") (1:3)\n | 1 2\n | ..^'],
  ];
  for (const [src, msg] of cases) assert.throws(() => Expression.compile(src), { message: msg }, src);
});
