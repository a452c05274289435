import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, plugin, runHook, type OnHook } from './setup.ts';
import { splitCommand } from './shlex.ts';
import { parseTable, runSetup } from '../pkg/testing.ts';
import type { PluginLogger } from '../plugin.ts';

const view = (hooks: OnHook[]): Array<[string, string, string[]]> => hooks.map((h) => [h.event, h.command, h.args]);

test('on parse: caddy onevent cases; errors are bare Controller errors', async () => {
  await parseTable('on', parse, [
    ['. {\n on startup echo hello\n}', [['startup', 'echo', ['hello']]]],
    ['. {\n on SHUTDOWN echo bye &\n on certrenew x\n}', [['shutdown', 'echo', ['bye', '&']], ['certrenew', 'x', []]]],
    // The Corefile's quotes go first; the joined line is split again as a shell would.
    ['. {\n on startup sh -c "echo a b"\n}', [['startup', 'sh', ['-c', 'echo', 'a', 'b']]]],
    ['. {\n on startup sh -c "\'echo a b\'"\n}', [['startup', 'sh', ['-c', 'echo a b']]]],
    ['. {\n on startup\n}', "Corefile:2 - Error during parsing: no command contained in ''"],
    ['. {\n on\n}', "Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'on'"],
    ['. {\n on first echo\n}', "Corefile:2 - Error during parsing: Wrong event name or event not supported: 'first'"],
    ['. {\n on startup "\'unclosed"\n}', 'Corefile:2 - Error during parsing: error parsing command: EOF found when expecting closing quote.'],
  ], { view });
});

test('shlex: quotes, escapes and comments as google/shlex', () => {
  assert.deepEqual(splitCommand('a  b\tc'), ['a', 'b', 'c']);
  assert.deepEqual(splitCommand(`a "b c" 'd e' f\\ g`), ['a', 'b c', 'd e', 'f g']);
  assert.deepEqual(splitCommand('a"b"c'), ['abc']);
  assert.deepEqual(splitCommand('"a\\"b\\x"'), ['a"bx']);
  assert.deepEqual(splitCommand("'a\\b'"), ['a\\b']);
  assert.deepEqual(splitCommand('a #b c'), ['a']);
  assert.deepEqual(splitCommand('a#b'), ['a#b']);
  assert.deepEqual(splitCommand(''), []);
  assert.throws(() => splitCommand('a\\'), /EOF found after escape character/);
  assert.throws(() => splitCommand('"a'), /EOF found when expecting closing quote/);
});

class Log implements PluginLogger {
  readonly lines: string[] = [];
  readonly debugEnabled = false;
  debug(): void { /* not asserted */ }
  info(m: string): void { this.lines.push('[INFO] ' + m); }
  warning(m: string): void { this.lines.push('[WARNING] ' + m); }
  error(m: string): void { this.lines.push('[ERROR] ' + m); }
  fatal(m: string): void { this.lines.push('[FATAL] ' + m); }
  std(line: string): void { this.lines.push(line); }
}

test('a hook runs a real command: blocking waits, & does not (once: caddy drops the & from the hook itself)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-on-unit-'));
  const log = new Log();
  const file = join(dir, 'f');
  const h: OnHook = { id: 'id1', event: 'startup', command: 'sh', args: ['-c', `sleep 0.2; echo $0 >> ${file}`, '&'] };
  assert.equal(await runHook(h, log), undefined);
  assert.equal(existsSync(file), false, 'the & command is still running');
  assert.deepEqual(h.args, ['-c', `sleep 0.2; echo $0 >> ${file}`]);
  // The same hook again (now blocking), told apart by its $0: its own line is there when it returns. (The first
  // one's line comes about when this one's does; on a loaded machine a little later, so it is waited for.)
  assert.equal(await runHook({ ...h, args: [...h.args, 'second'] }, log), undefined);
  assert.match(readFileSync(file, 'utf8'), /^second$/m, 'the second run blocked until the command ended');
  for (let i = 0; i < 100 && !/^sh$/m.test(readFileSync(file, 'utf8')); i++) await new Promise((r) => setTimeout(r, 20));
  assert.match(readFileSync(file, 'utf8'), /^sh$/m, 'the first one ran too, in the background');
  assert.equal(await runHook({ id: 'id2', event: 'startup', command: 'sh', args: ['-c', 'exit 3'] }, log), 'exit status 3');
  assert.equal(await runHook({ id: 'id3', event: 'startup', command: 'no-such-command-x', args: [] }, log), 'exec: "no-such-command-x": executable file not found in $PATH');
  assert.equal(await runHook({ id: 'id4', event: 'startup', command: 'sh', args: ['-c', 'kill -9 $$'] }, log), 'signal: killed');
  assert.deepEqual(log.lines.slice(0, 2), [
    `[INFO] Nonblocking Command "sh -c sleep 0.2; echo $0 >> ${file}" with ID id1`,
    `[INFO] Blocking Command "sh -c sleep 0.2; echo $0 >> ${file} second" with ID id1`,
  ]);
});

test('setup: startup hooks run at instance startup, shutdown hooks only at the final shutdown', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-on-setup-'));
  const r = await runSetup(plugin, `. {\n on startup touch ${dir}/up\n on shutdown touch ${dir}/down\n}`);
  const inst = r.instance;
  await inst.runHooks('instanceStartup');
  assert.equal(existsSync(join(dir, 'up')), true);
  await inst.runHooks('shutdown');
  assert.equal(existsSync(join(dir, 'down')), false, 'a reload shuts the old instance down: no shutdown event');
  await inst.runHooks('finalShutdown');
  assert.equal(existsSync(join(dir, 'down')), true);
});
