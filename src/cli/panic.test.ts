import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goPanicText } from './panic.ts';

test('an error: `panic: ` and its message, a blank line, the goroutine header', () => {
  const e = new Error('boom');
  e.stack = 'Error: boom';
  assert.equal(goPanicText(e), 'panic: boom\n\ngoroutine 1 [running]:\n');
});

test('every newline of the value is followed by a tab, as Go\'s printindented does', () => {
  const e = new Error('first\nsecond\nthird');
  e.stack = '';
  assert.equal(goPanicText(e), 'panic: first\n\tsecond\n\tthird\n\ngoroutine 1 [running]:\n');
  assert.equal(goPanicText('a\nb'), 'panic: a\n\tb\n\ngoroutine 1 [running]:\n');
});

test('values that are not errors are printed as strings', () => {
  assert.equal(goPanicText('boom'), 'panic: boom\n\ngoroutine 1 [running]:\n');
  assert.equal(goPanicText(42), 'panic: 42\n\ngoroutine 1 [running]:\n');
});

test('the stack in Go\'s frame layout: name(...), then a tab and file:line', () => {
  const e = new TypeError('x');
  e.stack = [
    'TypeError: x',
    '  with a second line of message',
    '    at Whoami.serveDNS (file:///srv/nodens/src/plugin/whoami/whoami.ts:30:11)',
    '    at file:///srv/nodens/src/core/serve.ts:180:20',
    '    at async Promise.all (index 0)',
    '    at Array.map (<anonymous>)',
    '    at new Foo (file:///srv/nodens/a%20b.ts:6:65)',
    '    at process.processTicksAndRejections (node:internal/process/task_queues:104:5)',
  ].join('\n');
  assert.equal(goPanicText(e), [
    'panic: x',
    '',
    'goroutine 1 [running]:',
    'Whoami.serveDNS(...)',
    '\t/srv/nodens/src/plugin/whoami/whoami.ts:30',
    '<anonymous>(...)',
    '\t/srv/nodens/src/core/serve.ts:180',
    'Promise.all(...)',
    '\tindex 0',
    'Array.map(...)',
    '\t<anonymous>',
    'new Foo(...)',
    '\t/srv/nodens/a b.ts:6',
    'process.processTicksAndRejections(...)',
    '\tnode:internal/process/task_queues:104',
    '',
  ].join('\n'));
});
