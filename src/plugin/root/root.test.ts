import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, plugin, type RootOptions } from './setup.ts';
import { captureLog, parseTable, runSetup } from '../pkg/testing.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodens-root-'));
const regular = join(dir, 'regular');
writeFileSync(regular, '');

test('root parse', async () => {
  const missing = join(dir, 'missing');
  const lines = await captureLog(() => parseTable<RootOptions>('root', parse, [
    [`. {\n root ${dir}\n}`, { path: dir }],
    [`. {\n root ${missing}\n}`, { path: missing }],
    [`. {\n root /first\n root ${dir}\n}`, { path: dir }],
    ['. {\n root\n}', "plugin/root: Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'root'"],
    [`. {\n root ${regular}/x\n}`,
      `plugin/root: Corefile:2 - Error during parsing: unable to access root path '${regular}/x': stat ${regular}/x: not a directory`],
  ]));
  assert.deepEqual(lines, [`[WARNING] plugin/root: Root path does not exist: ${missing}`]);
});

test('root setup sets the block root', async () => {
  const r = await runSetup(plugin, `. {\n root ${dir}\n}`);
  assert.equal(r.config.root, dir);
  const none = await runSetup(plugin, '. {\n whoami\n}');
  assert.equal(none.config.root, '');
});
