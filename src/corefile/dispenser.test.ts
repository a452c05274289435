import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Dispenser } from './dispenser.ts';
import { lex } from './lexer.ts';
import { CorefileError } from './errors.ts';

const disp = (s: string, file = 'Corefile') => new Dispenser(lex(s, file), file);

test('next / val / line / file', () => {
  const d = disp('a b\nc');
  assert.equal(d.val(), '');
  assert.equal(d.line(), 0);
  assert.equal(d.file(), 'Corefile');
  assert.ok(d.next());
  assert.equal(d.val(), 'a');
  assert.equal(d.line(), 1);
  assert.deepEqual(d.token(), { text: 'a', file: 'Corefile', line: 1 });
  assert.ok(d.next());
  assert.ok(d.next());
  assert.equal(d.val(), 'c');
  assert.equal(d.line(), 2);
  assert.equal(d.next(), false);
  assert.equal(d.val(), 'c'); // stays on the last token
});

test('nextArg stays on the line; nextLine only moves to another line', () => {
  const d = disp('dir a b\nnext x');
  assert.ok(d.next());
  assert.ok(d.nextArg());
  assert.equal(d.val(), 'a');
  assert.equal(d.nextLine(), false);
  assert.ok(d.nextArg());
  assert.equal(d.val(), 'b');
  assert.equal(d.nextArg(), false);
  assert.equal(d.val(), 'b');
  assert.ok(d.nextLine());
  assert.equal(d.val(), 'next');
});

test('nextArg/nextLine load the first token when nothing is loaded', () => {
  const d1 = disp('a\nb');
  assert.ok(d1.nextArg());
  assert.equal(d1.val(), 'a');
  const d2 = disp('a\nb');
  assert.ok(d2.nextLine());
  assert.equal(d2.val(), 'a');
});

test('arguments after a multi-line quoted token count its newlines', () => {
  const d = disp('dir "x\ny" z\nw');
  d.next();
  assert.deepEqual(d.remainingArgs(), ['x\ny', 'z']);
  assert.ok(d.next());
  assert.equal(d.val(), 'w');
});

test('tokens from another file are never on the same line', () => {
  const toks = [
    { text: 'dir', file: 'A', line: 1 },
    { text: 'x', file: 'B', line: 1 },
  ];
  const d = new Dispenser(toks);
  d.next();
  assert.equal(d.nextArg(), false);
  assert.ok(d.nextLine());
});

test('remainingArgs stops before { without consuming it', () => {
  const d = disp('forward . 1.1.1.1 {\n  max_fails 3\n}');
  d.next();
  assert.deepEqual(d.remainingArgs(), ['.', '1.1.1.1']);
  assert.equal(d.val(), '1.1.1.1');
  assert.ok(d.nextBlock());
  assert.equal(d.val(), 'max_fails');
  assert.deepEqual(d.remainingArgs(), ['3']);
  assert.equal(d.nextBlock(), false);
  assert.equal(d.val(), '}');
  assert.equal(d.nesting(), 0);
});

test('the CoreDNS setup idiom over repeated stanzas', () => {
  const d = disp(
    'kubernetes cluster.local in-addr.arpa {\n pods insecure\n fallthrough in-addr.arpa\n ttl 30\n}\nkubernetes other {\n}\nkubernetes third',
  );
  const seen: unknown[] = [];
  while (d.next()) {
    const args = d.remainingArgs();
    const sub: string[][] = [];
    while (d.nextBlock()) {
      const name = d.val();
      sub.push([name, ...d.remainingArgs()]);
    }
    seen.push([args, sub]);
  }
  assert.deepEqual(seen, [
    [
      ['cluster.local', 'in-addr.arpa'],
      [
        ['pods', 'insecure'],
        ['fallthrough', 'in-addr.arpa'],
        ['ttl', '30'],
      ],
    ],
    [['other'], []],
    [['third'], []],
  ]);
});

test('nextBlock: no block, block on the next line is not a block, empty block', () => {
  const d = disp('cache 30\nx');
  d.next();
  d.remainingArgs();
  assert.equal(d.nextBlock(), false);
  assert.equal(d.val(), '30');
  const e = disp('health {\n}');
  e.next();
  assert.equal(e.nextBlock(), false);
  assert.equal(e.val(), '}');
  assert.equal(e.nesting(), 0);
});

test('nextBlock returns inner braces token by token, like caddy', () => {
  const d = disp('log {\n class denial\n x {\n  y\n }\n z\n}\nafter');
  d.next();
  const vals: string[] = [];
  while (d.nextBlock()) vals.push(d.val());
  assert.deepEqual(vals, ['class', 'denial', 'x', '{', 'y']);
  // caddy's NextBlock ends at the first `}` it meets while nesting is 1
  assert.equal(d.val(), '}');
  assert.equal(d.line(), 5);
});

test('nextBlock does not count inner braces (caddy: nested blocks unsupported)', () => {
  const d = disp('outer {\n inner {\n  a 1\n }\n b\n}');
  d.next();
  const got: string[] = [];
  while (d.nextBlock()) {
    if (d.val() === 'inner') {
      assert.equal(d.nesting(), 1);
      while (d.nextBlock()) got.push('in:' + d.val());
    } else got.push(d.val());
  }
  // the inner `{` is an ordinary token and its `}` closes the (only) level
  assert.deepEqual(got, ['in:{', 'in:a', 'in:1']);
  assert.equal(d.nesting(), 0);
  assert.equal(d.line(), 4);
});

test('args(n)', () => {
  const d = disp('dir a b\nc');
  d.next();
  assert.deepEqual(d.args(3), { values: ['a', 'b'], ok: false });
  const e = disp('dir a b');
  e.next();
  assert.deepEqual(e.args(2), { values: ['a', 'b'], ok: true });
});

test('error messages', () => {
  const d = disp('\nforward\n{');
  d.next();
  const a = d.argErr();
  assert.ok(a instanceof CorefileError);
  assert.equal(a.message, "Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'forward'");
  d.next();
  assert.equal(d.argErr().message, "Corefile:3 - Error during parsing: Unexpected token '{', expecting argument");
  assert.equal(d.syntaxErr('}').message, "Corefile:3 - Syntax error: Unexpected token '{', expecting '}'");
  assert.equal(d.eofErr().message, 'Corefile:3 - Error during parsing: Unexpected EOF');
  assert.equal(d.err('boom').message, 'Corefile:3 - Error during parsing: boom');
  assert.equal(d.errf(`x ${1}`).message, 'Corefile:3 - Error during parsing: x 1');
  const empty = new Dispenser([], 'Corefile');
  assert.equal(empty.argErr().message, "Corefile:0 - Error during parsing: Wrong argument count or unexpected line ending after ''");
});

test('errors name the file of the current token (imports)', () => {
  const d = new Dispenser([{ text: 'x', file: '/abs/inc.conf', line: 7 }], 'Corefile');
  assert.equal(d.err('m').message, 'Corefile:0 - Error during parsing: m');
  d.next();
  assert.equal(d.err('m').message, '/abs/inc.conf:7 - Error during parsing: m');
});

test('reset rewinds', () => {
  const d = disp('a b');
  d.next();
  d.next();
  d.reset();
  assert.equal(d.val(), '');
  assert.ok(d.next());
  assert.equal(d.val(), 'a');
});
