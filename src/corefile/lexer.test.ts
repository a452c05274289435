import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lex } from './lexer.ts';

const texts = (s: string) => lex(s, 'Corefile').map((t) => t.text);
const lines = (s: string) => lex(s, 'Corefile').map((t) => [t.text, t.line]);

test('tokens are separated by any whitespace; \\r is ignored', () => {
  assert.deepEqual(texts('a b\tc\r\nd\u00a0e\u2003f\u0085g'), ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  assert.deepEqual(texts('a\rb'), ['ab']);
  assert.deepEqual(lines('a\n\nb\r\nc'), [['a', 1], ['b', 3], ['c', 4]]);
});

test('every token carries the file name', () => {
  assert.deepEqual(lex('x y', 'F'), [
    { text: 'x', file: 'F', line: 1 },
    { text: 'y', file: 'F', line: 1 },
  ]);
});

test('braces are not special: only stand-alone braces are brace tokens', () => {
  assert.deepEqual(texts('example.org{\nforward . 1.1.1.1{ }'), ['example.org{', 'forward', '.', '1.1.1.1{', '}']);
  assert.deepEqual(texts('{a}'), ['{a}']);
});

test('# starts a comment, even mid-word, to end of line', () => {
  assert.deepEqual(texts('foo#bar baz\nqux # c {\n#x\ny'), ['foo', 'qux', 'y']);
  assert.deepEqual(lines('a # x\nb'), [['a', 1], ['b', 2]]);
});

test('quoted tokens', () => {
  assert.deepEqual(texts('"a b" "#x" "{" ""'), ['a b', '#x', '{', '']);
  assert.deepEqual(texts('"a\\"b"'), ['a"b']);
  assert.deepEqual(texts('"a\\b" "c\\\\d"'), ['a\\b', 'c\\\\d']);
  // a quote in the middle of a word is literal
  assert.deepEqual(texts('a"b c"'), ['a"b', 'c"']);
  // closing quote ends the token even without following space
  assert.deepEqual(texts('"a"b'), ['a', 'b']);
  // \r inside quotes is kept
  assert.deepEqual(texts('"a\r\nb"'), ['a\r\nb']);
});

test('quoted tokens may span lines; the line is where the token started', () => {
  assert.deepEqual(lines('x "a\nb\nc" y\nz'), [['x', 1], ['a\nb\nc', 1], ['y', 3], ['z', 4]]);
});

test('unterminated quote runs to end of input', () => {
  assert.deepEqual(texts('a "b c\nd'), ['a', 'b c\nd']);
  assert.deepEqual(texts('a "'), ['a']);
});

test('a leading byte order mark is dropped', () => {
  assert.deepEqual(texts('\ufeffa b'), ['a', 'b']);
  assert.deepEqual(texts('a \ufeffb'), ['a', '\ufeffb']);
});

test('empty and comment-only input yield no tokens', () => {
  assert.deepEqual(texts(''), []);
  assert.deepEqual(texts('  \n# hi\n\t# there'), []);
});

test('non-BMP characters are kept', () => {
  assert.deepEqual(texts('a😀b c'), ['a😀b', 'c']);
});
