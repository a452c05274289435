import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin } from './setup.ts';
import { hexdump } from './hexdump.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';

test('debug parse', async () => {
  await parseTable('debug', parse, [
    ['. {\n debug\n}', {}],
    ['. {\n debug\n debug\n}', {}],
    ['. {\n debug on\n}', "plugin/debug: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'on'"],
    ['. {\n debug\n debug on\n}', "plugin/debug: Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'on'"],
  ]);
});

test('debug setup turns the block\'s debug mode on, adds no handler', async () => {
  const r = await runSetup(plugin, '. {\n debug\n}');
  assert.equal(r.config.debug, true);
  assert.equal(r.factories.length, 0);
});

test('hexdump layout', () => {
  const b = Uint8Array.from([
    0x00, 0x0a, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x07, 0x65, 0x78, 0x61,
    0x6d, 0x70, 0x6c, 0x65, 0x05, 0x6c, 0x6f, 0x63, 0x61, 0x6c, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00,
    0x00, 0x29, 0x10, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00,
  ]);
  assert.equal(hexdump(b), [
    'debug: 000000 00 0a 01 00 00 01 00 00 00 00 00 01 07 65 78 61',
    'debug: 000010 6d 70 6c 65 05 6c 6f 63 61 6c 00 00 01 00 01 00',
    'debug: 000020 00 29 10 00 00 00 80 00 00 00',
    'debug: 00002a',
  ].join('\n'));
});
