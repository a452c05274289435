import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Logger, goJSONString, rfc3339Nano } from './log.ts';

test('JSON strings are escaped as Go\'s slog escapes them', () => {
  // Values from Go 1.26: slog.New(slog.NewJSONHandler(...)).Info(s).
  assert.equal(goJSONString('a"b\\c\nd\re\tf'), '"a\\"b\\\\c\\nd\\re\\tf"');
  assert.equal(goJSONString('\b\f\u0001\u001f'), '"\\u0008\\u000c\\u0001\\u001f"');
  assert.equal(goJSONString('<a&b>\u007f'), '"<a&b>\u007f"');
  assert.equal(goJSONString('x\u2028y\u2029'), '"x\\u2028y\\u2029"');
  assert.equal(goJSONString('\ud800z😀'), '"\\ufffdz😀"');
});

test('RFC3339Nano drops trailing zeros of the fraction', () => {
  process.env.TZ = 'UTC';
  assert.equal(rfc3339Nano(Date.UTC(2026, 0, 2, 3, 4, 5, 120) + 0.5), '2026-01-02T03:04:05.1205Z');
  assert.equal(rfc3339Nano(Date.UTC(2026, 0, 2, 3, 4, 5)), '2026-01-02T03:04:05Z');
});

test('a JSON logger: level names, the plugin field, typed fields; the fatal handler gets the record', () => {
  const lines: string[] = [];
  let fatal = '';
  const l = new Logger({ format: 'json', sink: (s) => { lines.push(s); }, onFatal: (s) => { fatal = s; } });
  l.warning('w');
  l.plugin('loop').fatal('f');
  l.plugin('log').infoAttrs!('q', { n: 1, b: false, r: null });
  l.std('[INFO] SIGTERM: x');
  const recs = lines.map((s) => JSON.parse(s) as Record<string, unknown>);
  assert.deepEqual(recs.map(({ time: _t, ...r }) => r), [
    { level: 'WARN', msg: 'w' },
    { level: 'FATAL', msg: 'f', plugin: 'loop' },
    { level: 'INFO', msg: 'q', plugin: 'log', n: 1, b: false, r: null },
    { level: 'INFO', msg: '[INFO] SIGTERM: x' },
  ]);
  assert.equal(fatal, lines[1]);
});

test('a [FATAL] line is written even when no fatal handler is set', () => {
  const lines: string[] = [];
  const l = new Logger({ sink: (s) => { lines.push(s); } });
  l.fatal('top');
  l.plugin('loop').fatal('from a plugin');
  assert.deepEqual(lines, ['[FATAL] top', '[FATAL] plugin/loop: from a plugin']);
});
