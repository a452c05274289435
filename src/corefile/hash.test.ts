import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseCorefile } from './parser.ts';
import { goJsonString, serverBlocksJson, serverBlocksSha512 } from './hash.ts';

const all = { isDirective: () => true };

// Hashes below were logged by CoreDNS itself ("plugin/reload: Running configuration SHA512 = ...").

test('Kubernetes default Corefile hash matches the one CoreDNS logs', () => {
  // The Kubernetes default Corefile, as kubeadm installs it.
  const k8s = fs.readFileSync(new URL('../../examples/Corefile.kubernetes', import.meta.url), 'utf8');
  assert.equal(
    serverBlocksSha512(parseCorefile(k8s, '/etc/coredns/Corefile', all)),
    '591cf328cccc12bc490481273e738df59329c62c0b729d94e8b61db9961c2fa5f046dd37f1cf888b953814040d180f52594972691cd6ff41be96639138a43908',
  );
});

test('hash with snippets, env, quotes, HTML characters, several blocks (CoreDNS 1.14.7)', () => {
  const text =
    '(snip) {\n    log . "{remote} {name} <&>"\n    errors\n}\nexample.org:15353 Example.NET,\n  dns://10.0.0.0/17 {\n    import snip\n    chaos "CoreDNS-x" "a\nb\\"c\\d" {$AUTHOR}x {%AUTHOR%} foo#bar\n    reload\n    cache 30 {\n        success 100\n    }\n}\nb.example:15355 {\n  whoami\n  reload 10s\n  log\n  log\n}\n';
  const blocks = parseCorefile(text, 'h2.conf', { ...all, env: { AUTHOR: 'me' } });
  assert.equal(
    serverBlocksSha512(blocks),
    '5ffb16de7f1939020c06dc200c1372159a008e3663635f02d96e8e746bb6769da0e1e807aa1ee6037cafd793a076589a52ad2a75ec5ae0f2ea29f8e5af33eb9d',
  );
});

test('hash with BOM, CRLF and tabs (CoreDNS 1.14.7)', () => {
  const text = '\ufeff.:15353 {\r\n\twhoami\r\n\treload\r\n}\r\n';
  assert.equal(
    serverBlocksSha512(parseCorefile(text, 'Corefile', all)),
    '17d7412caf78854042658ce0bbc4c6611b81f3129ac05f66c1886a519b8d9cf79064e2be8aed858ed38e43b18b81988860ce618d462d56b50aafe25121391867',
  );
});

test('hash with Unicode spaces, quotes glued to words, escapes, multi-line token (CoreDNS 1.14.7)', () => {
  const text =
    '"" .:15353\u00a0{\n chaos a\u2003b c\u0085d "x"y "p\\\\q" "r\\"s" a"b"c "t\\u"\n reload\n log "multi\nline" {\n  class all\n }\n}\n';
  assert.equal(
    serverBlocksSha512(parseCorefile(text, 'lx.conf', all)),
    '350cd56a0420feae62ccb46fc8ac7bc018e429b2396ef87e9fd37eaee3982628218ca8797ba0ac753790f5161d700e6c49afce9902de746ee606be029a1dd837',
  );
});

test('JSON shape: sorted directives, raw keys, main-file tokens with File ""', () => {
  const blocks = parseCorefile('b.example a.example {\n whoami\n errors x\n}', 'Corefile', all);
  assert.equal(
    serverBlocksJson(blocks),
    '[{"Keys":["b.example","a.example"],"Tokens":{"errors":[{"File":"","Line":3,"Text":"errors"},{"File":"","Line":3,"Text":"x"}],"whoami":[{"File":"","Line":2,"Text":"whoami"}]}}]',
  );
  assert.equal(serverBlocksJson([]), 'null');
  assert.equal(
    serverBlocksSha512([]),
    '04f8ff2682604862e405bf88de102ed7710ac45c1205957625e4ee3e5f5a2241e453614acc451345b91bafc88f38804019c7492444595674e94e8cf4be53817f',
  );
});

test('imported tokens carry their absolute file name in the JSON', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'nodens-hash-'));
  fs.writeFileSync(path.join(dir, 'x.conf'), 'whoami\n');
  const main = path.join(dir, 'Corefile');
  const blocks = parseCorefile('. {\n import x.conf\n}', main, all);
  assert.equal(
    serverBlocksJson(blocks),
    `[{"Keys":["."],"Tokens":{"whoami":[{"File":${JSON.stringify(path.join(dir, 'x.conf'))},"Line":1,"Text":"whoami"}]}}]`,
  );
});

test('Go JSON string escaping', () => {
  assert.equal(goJsonString('a"b\\c<>&\n\r\t\b\f\u0001\u007f\u2028\u2029é😀'), '"a\\"b\\\\c\\u003c\\u003e\\u0026\\n\\r\\t\\b\\f\\u0001\u007f\\u2028\\u2029é😀"');
  assert.equal(goJsonString('\ud800'), '"\\ufffd"');
});
