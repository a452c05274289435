import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseCorefile, replaceEnvVars } from './parser.ts';
import type { ParseOptions, ServerBlock } from './parser.ts';
import { CorefileError } from './errors.ts';

// CoreDNS v1.14.7 plugin.cfg directives
const DIRECTIVES = new Set(
  'root metadata geoip cancel proxyproto quic grpc_server https https3 timeouts multisocket reload nsid bufsize bind debug trace ready health pprof shed prometheus errors log dnstap local dns64 any chaos loadbalance tsig rewrite autopath acl cache header dnssec tls minimal template transfer hosts route53 azure clouddns k8s_external kubernetes file auto secondary etcd loop forward grpc erratic whoami on sign view nomad'.split(
    ' ',
  ),
);

function opts(extra: Partial<ParseOptions> = {}): ParseOptions {
  return { isDirective: (d) => DIRECTIVES.has(d), env: {}, ...extra };
}

function parse(input: string, extra: Partial<ParseOptions> = {}, file = 'Corefile'): ServerBlock[] {
  return parseCorefile(input, file, opts(extra));
}

/** Blocks as plain data: keys and directive → token texts. */
function simple(blocks: ServerBlock[]): { keys: string[]; tokens: Record<string, string[]> }[] {
  return blocks.map((b) => ({
    keys: b.keys.map((k) => k.text),
    tokens: Object.fromEntries([...b.tokens].map(([k, v]) => [k, v.map((t) => t.text)])),
  }));
}

function parseErr(input: string, extra: Partial<ParseOptions> = {}, file = 'Corefile'): string {
  try {
    parse(input, extra, file);
  } catch (e) {
    assert.ok(e instanceof CorefileError, String(e));
    return e.message;
  }
  assert.fail('expected a CorefileError');
}

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'nodens-corefile-'));
}

// ---------------------------------------------------------------------------
// Real-world Corefiles

const K8S = fs.readFileSync(new URL('../../examples/Corefile.kubernetes', import.meta.url), 'utf8');

test('the Kubernetes default Corefile', () => {
  const blocks = parse(K8S);
  assert.equal(blocks.length, 1);
  const b = blocks[0];
  assert.deepEqual(b.keys, [{ text: '.:53', file: 'Corefile', line: 1 }]);
  assert.deepEqual(
    [...b.tokens.keys()],
    ['errors', 'health', 'ready', 'kubernetes', 'prometheus', 'forward', 'cache', 'loop', 'reload', 'loadbalance'],
  );
  assert.deepEqual(simple(blocks)[0].tokens, {
    errors: ['errors'],
    health: ['health', '{', 'lameduck', '5s', '}'],
    ready: ['ready'],
    kubernetes: [
      'kubernetes', 'cluster.local', 'in-addr.arpa', 'ip6.arpa', '{',
      'pods', 'insecure',
      'fallthrough', 'in-addr.arpa', 'ip6.arpa',
      'ttl', '30',
      '}',
    ],
    prometheus: ['prometheus', ':9153'],
    forward: ['forward', '.', '/etc/resolv.conf', '{', 'max_concurrent', '1000', '}'],
    cache: ['cache', '30'],
    loop: ['loop'],
    reload: ['reload'],
    loadbalance: ['loadbalance'],
  });
  assert.deepEqual(
    b.tokens.get('kubernetes')!.map((t) => t.line),
    [7, 7, 7, 7, 7, 8, 8, 9, 9, 9, 10, 10, 11],
  );
  assert.deepEqual(b.tokens.get('loadbalance'), [{ text: 'loadbalance', file: 'Corefile', line: 19 }]);
});

test('seed: Kubernetes ConfigMap Corefile with an end-of-line comment (indented as in YAML)', () => {
  const text = `    .:53 {
        errors
        health {
           lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        prometheus :9153
        forward . /etc/resolv.conf
        cache 30
        loop   #将loop插件直接删除，避免内部循环
        reload
        loadbalance
    }
`;
  const s = simple(parse(text))[0];
  assert.deepEqual(s.keys, ['.:53']);
  assert.deepEqual(s.tokens.loop, ['loop']);
  assert.deepEqual(s.tokens.forward, ['forward', '.', '/etc/resolv.conf']);
  assert.deepEqual(s.tokens.reload, ['reload']);
  assert.equal(Object.keys(s.tokens).length, 10);
});

test('seed: loop example forwarding to itself', () => {
  assert.deepEqual(simple(parse('. {\nloop\nforward . 127.0.0.1\n}\n')), [
    { keys: ['.'], tokens: { loop: ['loop'], forward: ['forward', '.', '127.0.0.1'] } },
  ]);
  assert.deepEqual(simple(parse('```txt\n. {\n    loop\n    forward . 127.0.0.1\n}\n'.slice(7))), [
    { keys: ['.'], tokens: { loop: ['loop'], forward: ['forward', '.', '127.0.0.1'] } },
  ]);
});

test('seed: kubernetes with fallthrough, unindented', () => {
  const blocks = parse('.:53 {\nkubernetes cluster.local in-addr.arpa ip6.arpa {\nfallthrough in-addr.arpa ip6.arpa\n}\n}\n');
  assert.deepEqual(simple(blocks), [
    {
      keys: ['.:53'],
      tokens: {
        kubernetes: ['kubernetes', 'cluster.local', 'in-addr.arpa', 'ip6.arpa', '{', 'fallthrough', 'in-addr.arpa', 'ip6.arpa', '}'],
      },
    },
  ]);
});

test('seed: a one-line block `.:53 { prometheus :9153 }` is an error in CoreDNS', () => {
  assert.equal(
    parseErr('.:53 { prometheus :9153 }'),
    "Corefile:1 - Error during parsing: Unexpected '}' because no matching opening brace",
  );
});

const NODE_CACHE = `cluster.local:53 {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . 10.96.141.7 {
        force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
}
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . 10.96.141.7 {
        force_tcp
    }
    prometheus :9253
}
ip6.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . 10.96.141.7 {
        force_tcp
    }
    prometheus :9253
}
.:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . /etc/resolv.conf
    prometheus :9253
}
`;

test('the node-local-dns Corefile', () => {
  const s = simple(parse(NODE_CACHE));
  assert.deepEqual(
    s.map((b) => b.keys),
    [['cluster.local:53'], ['in-addr.arpa:53'], ['ip6.arpa:53'], ['.:53']],
  );
  assert.deepEqual(s[0].tokens, {
    errors: ['errors'],
    cache: ['cache', '{', 'success', '9984', '30', 'denial', '9984', '5', '}'],
    reload: ['reload'],
    loop: ['loop'],
    bind: ['bind', '169.254.20.10', '10.96.0.10'],
    forward: ['forward', '.', '10.96.141.7', '{', 'force_tcp', '}'],
    prometheus: ['prometheus', ':9253'],
    health: ['health', '169.254.20.10:8080'],
  });
  const rev = {
    errors: ['errors'],
    cache: ['cache', '30'],
    reload: ['reload'],
    loop: ['loop'],
    bind: ['bind', '169.254.20.10', '10.96.0.10'],
    forward: ['forward', '.', '10.96.141.7', '{', 'force_tcp', '}'],
    prometheus: ['prometheus', ':9253'],
  };
  assert.deepEqual(s[1].tokens, rev);
  assert.deepEqual(s[2].tokens, rev);
  assert.deepEqual(s[3].tokens, { ...rev, forward: ['forward', '.', '/etc/resolv.conf'] });
  const b3 = parse(NODE_CACHE)[3];
  assert.deepEqual(b3.keys[0], { text: '.:53', file: 'Corefile', line: 38 });
  assert.equal(b3.tokens.get('forward')![0].line, 44);
});

// ---------------------------------------------------------------------------
// Keys

test('empty and comment-only input yield zero blocks', () => {
  assert.deepEqual(parse(''), []);
  assert.deepEqual(parse('# nothing\n   \n# here\n'), []);
  assert.deepEqual(parse('(snip) {\n whoami\n}\n'), []);
});

test('several keys on one line', () => {
  assert.deepEqual(simple(parse('example.org example.net:1053 {\n whoami\n}')), [
    { keys: ['example.org', 'example.net:1053'], tokens: { whoami: ['whoami'] } },
  ]);
});

test('keys continue over lines after a trailing comma', () => {
  const b = parse('a.example,\n  b.example, c.example,\n d.example {\n whoami\n}')[0];
  assert.deepEqual(
    b.keys.map((k) => [k.text, k.line]),
    [['a.example', 1], ['b.example', 2], ['c.example', 2], ['d.example', 3]],
  );
});

test('a comma before { is an error', () => {
  assert.equal(
    parseErr('a.example,\n{\n whoami\n}'),
    "Corefile:2 - Error during parsing: Expected another address but had '{' - check for extra comma",
  );
  assert.equal(parseErr('a.example, {\n}'), "Corefile:1 - Error during parsing: Expected another address but had '{' - check for extra comma");
  assert.equal(parseErr('a.example,'), 'Corefile:1 - Error during parsing: Unexpected EOF');
});

test('the opening brace may be on the line after the keys', () => {
  assert.deepEqual(simple(parse('a.example\n{\n whoami\n}\nb.example {\n log\n}')), [
    { keys: ['a.example'], tokens: { whoami: ['whoami'] } },
    { keys: ['b.example'], tokens: { log: ['log'] } },
  ]);
});

test('a directive may follow the opening brace on the same line', () => {
  assert.deepEqual(simple(parse('. { whoami\n}')), [{ keys: ['.'], tokens: { whoami: ['whoami'] } }]);
});

test('braceless single block', () => {
  assert.deepEqual(simple(parse('example.org\nwhoami\nlog\n')), [
    { keys: ['example.org'], tokens: { whoami: ['whoami'], log: ['log'] } },
  ]);
});

test('keys only', () => {
  assert.deepEqual(simple(parse('example.org')), [{ keys: ['example.org'], tokens: {} }]);
  assert.deepEqual(simple(parse('a.example {\n whoami\n}\nb.example\n')), [
    { keys: ['a.example'], tokens: { whoami: ['whoami'] } },
    { keys: ['b.example'], tokens: {} },
  ]);
});

test('braces glued to words are not braces', () => {
  // `example.org{` is a key; the following lines are a braceless block up to the `}`
  assert.deepEqual(simple(parse('example.org{\n whoami\n}\n')), [{ keys: ['example.org{'], tokens: { whoami: ['whoami'] } }]);
  assert.equal(
    parseErr('. {\n forward . 1.1.1.1{\n  max_fails 3\n }\n}'),
    "Corefile:3 - Error during parsing: Unknown directive 'max_fails'",
  );
});

test('empty keys are skipped and a block without keys is dropped', () => {
  assert.deepEqual(simple(parse('"" a.example {$NOPE} {\n whoami\n}')), [{ keys: ['a.example'], tokens: { whoami: ['whoami'] } }]);
  assert.deepEqual(parse('"" {$NOPE} {\n whoami\n}'), []);
  assert.deepEqual(parse('{\n whoami\n}'), []);
});

test('an extra closing brace ends a block and starts a new one', () => {
  assert.deepEqual(simple(parse('example.org {\n whoami\n}\n}\n')), [
    { keys: ['example.org'], tokens: { whoami: ['whoami'] } },
    { keys: ['}'], tokens: {} },
  ]);
});

// ---------------------------------------------------------------------------
// Directives

test('unknown directive', () => {
  assert.equal(parseErr('. {\n  foo bar\n}'), "Corefile:2 - Error during parsing: Unknown directive 'foo'");
  assert.equal(parseErr('. {\n whoami\n  {$D}\n}', { env: { D: 'nope' } }), "Corefile:3 - Error during parsing: Unknown directive 'nope'");
});

test('missing closing brace of the server block', () => {
  assert.equal(parseErr('. {\n  whoami\n'), "Corefile:2 - Syntax error: Unexpected token 'whoami', expecting '}'");
  assert.equal(parseErr('. {\n  log . x\n'), "Corefile:2 - Syntax error: Unexpected token 'x', expecting '}'");
});

test('a directive block closed at the very end satisfies the server block check (as in caddy)', () => {
  assert.deepEqual(simple(parse('. {\n whoami {\n}\n')), [{ keys: ['.'], tokens: { whoami: ['whoami', '{', '}'] } }]);
});

test('stray closing brace on a directive line', () => {
  assert.equal(parseErr('. {\n  whoami }\n}'), "Corefile:2 - Error during parsing: Unexpected '}' because no matching opening brace");
});

test('unexpected EOF inside a directive block', () => {
  assert.equal(parseErr('. {\n  forward . 1.1.1.1 {\n'), 'Corefile:2 - Error during parsing: Unexpected EOF');
  assert.equal(parseErr('. {\n log {\n  class { denial\n}\n'), 'Corefile:4 - Error during parsing: Unexpected EOF');
});

test('nested blocks of any depth are collected', () => {
  const s = simple(parse('. {\n view {\n  a {\n   b { c }\n  }\n }\n whoami\n}'))[0];
  assert.deepEqual(s.tokens.view, ['view', '{', 'a', '{', 'b', '{', 'c', '}', '}', '}']);
  assert.deepEqual(s.tokens.whoami, ['whoami']);
});

test('repeated directives are concatenated in order', () => {
  const b = parse('. {\n log a\n whoami\n log b {\n  class all\n }\n}')[0];
  assert.deepEqual([...b.tokens.keys()], ['log', 'whoami']);
  assert.deepEqual(
    b.tokens.get('log')!.map((t) => [t.text, t.line]),
    [['log', 2], ['a', 2], ['log', 4], ['b', 4], ['{', 4], ['class', 5], ['all', 5], ['}', 6]],
  );
});

test('quoted arguments spanning lines stay with their directive', () => {
  const b = parse('. {\n chaos "a\nb" c\n whoami\n}')[0];
  assert.deepEqual(b.tokens.get('chaos')!.map((t) => [t.text, t.line]), [['chaos', 2], ['a\nb', 2], ['c', 3]]);
  assert.deepEqual(b.tokens.get('whoami')!.map((t) => t.line), [4]);
});

test('# mid-word and comments inside blocks', () => {
  const s = simple(parse('. { # c\n forward . 1.1.1.1#853 2.2.2.2\n cache 30#x\n}'))[0];
  assert.deepEqual(s.tokens, { forward: ['forward', '.', '1.1.1.1'], cache: ['cache', '30'] });
});

test('isDirective receives the substituted name; the token keeps the original text', () => {
  const b = parse('. {\n {$D} x\n}', { env: { D: 'whoami' } })[0];
  assert.deepEqual(b.tokens.get('whoami'), [
    { text: '{$D}', file: 'Corefile', line: 2 },
    { text: 'x', file: 'Corefile', line: 2 },
  ]);
});

// ---------------------------------------------------------------------------
// Environment substitution

test('replaceEnvVars', () => {
  const env = { A: 'aa', B: 'b b', E: '', R: '{$A}' };
  assert.equal(replaceEnvVars('{$A}', env), 'aa');
  assert.equal(replaceEnvVars('{%A%}', env), 'aa');
  assert.equal(replaceEnvVars('x{$A}:{%A%}-{$A}', env), 'xaa:aa-aa');
  assert.equal(replaceEnvVars('{$NOPE}', env), '');
  assert.equal(replaceEnvVars('{$}', env), '{$}');
  assert.equal(replaceEnvVars('{%%}', env), '{%%}');
  assert.equal(replaceEnvVars('{$A', env), '{$A');
  assert.equal(replaceEnvVars('{$B}', env), 'b b');
  // values are rescanned from the start (as caddy does)
  assert.equal(replaceEnvVars('{$R}', env), 'aa');
  // the template plugin clash
  assert.equal(replaceEnvVars('{{$var}}', env), '{}');
  assert.equal(replaceEnvVars('{{ $var }}', env), '{{ $var }}');
  // an empty reference stops the scan, even if later references exist
  assert.equal(replaceEnvVars('{$}{$A}', env), '{$}{$A}');
  assert.equal(replaceEnvVars('{$X}', { X: '{$X}' }), '{$X}'); // no endless loop
});

test('env in keys, args, nested blocks; values never split tokens', () => {
  const env = { ZONE: 'example.org', PORT: '1053', UP: '1.1.1.1 2.2.2.2', Q: '"#{}' };
  const s = simple(parse('{$ZONE}:{%PORT%} {\n forward . {$UP} {\n  except {$Q}\n }\n}', { env }))[0];
  assert.deepEqual(s.keys, ['example.org:1053']);
  assert.deepEqual(s.tokens.forward, ['forward', '.', '1.1.1.1 2.2.2.2', '{', 'except', '"#{}', '}']);
});

test('env defaults to process.env', () => {
  process.env.NODENS_COREFILE_TEST = 'from-process';
  try {
    const b = parseCorefile('{$NODENS_COREFILE_TEST} {\n}', 'Corefile', { isDirective: () => true });
    assert.equal(b[0].keys[0].text, 'from-process');
  } finally {
    delete process.env.NODENS_COREFILE_TEST;
  }
});

// ---------------------------------------------------------------------------
// Snippets

test('snippet imported inside a block keeps its own line numbers', () => {
  const b = parse('(common) {\n  errors\n  log\n}\n\nexample.org {\n  import common\n  whoami\n}\n');
  assert.equal(b.length, 1);
  assert.deepEqual(simple(b)[0].tokens, { errors: ['errors'], log: ['log'], whoami: ['whoami'] });
  assert.equal(b[0].tokens.get('errors')![0].line, 2);
  assert.equal(b[0].tokens.get('whoami')![0].line, 8);
});

test('snippet with nested braces and several uses', () => {
  const src = '(fw) {\n forward . 1.1.1.1 {\n  max_fails 2\n }\n}\na.example {\n import fw\n}\nb.example {\n import fw\n cache\n}';
  const s = simple(parse(src));
  const fw = ['forward', '.', '1.1.1.1', '{', 'max_fails', '2', '}'];
  assert.deepEqual(s, [
    { keys: ['a.example'], tokens: { forward: fw } },
    { keys: ['b.example'], tokens: { forward: fw, cache: ['cache'] } },
  ]);
});

test('snippet imported at top level provides whole server blocks', () => {
  const s = simple(parse('(blocks) {\n a.example {\n  whoami\n }\n}\nimport blocks\nb.example {\n log\n}'));
  assert.deepEqual(s, [
    { keys: ['a.example'], tokens: { whoami: ['whoami'] } },
    { keys: ['b.example'], tokens: { log: ['log'] } },
  ]);
});

test('snippet used inside a directive block', () => {
  const s = simple(parse('(opts) {\n max_fails 2\n}\n. {\n forward . 1.1.1.1 {\n  import opts\n }\n}'))[0];
  assert.deepEqual(s.tokens.forward, ['forward', '.', '1.1.1.1', '{', 'max_fails', '2', '}']);
});

test('env substitution inside snippets applies at each use and does not alter the snippet', () => {
  const s = simple(parse('(s) {\n log {$X}\n}\na {\n import s\n}\nb {\n import s\n}', { env: { X: 'v' } }));
  assert.deepEqual(s[0].tokens.log, ['log', 'v']);
  assert.deepEqual(s[1].tokens.log, ['log', 'v']);
});

test('snippets may import other snippets; empty snippets are fine', () => {
  const s = simple(parse('(a) {\n whoami\n}\n(b) {\n import a\n log\n}\n(e) {\n}\n. {\n import b\n import e\n}'));
  assert.deepEqual(s, [{ keys: ['.'], tokens: { whoami: ['whoami'], log: ['log'] } }]);
});

test('a snippet used before its definition is looked up as a file', () => {
  const dir = tmpdir();
  const f = path.join(dir, 'Corefile');
  assert.equal(
    parseErr('. {\n import later\n}\n(later) {\n whoami\n}\n', {}, f),
    `${f}:2 - Error during parsing: File to import not found: later`,
  );
});

test('snippet must have braces', () => {
  assert.equal(parseErr('(s)\nwhoami\n'), "Corefile:2 - Syntax error: Unexpected token 'whoami', expecting '{'");
  assert.equal(parseErr('(s) {\n whoami\n'), "Corefile:2 - Syntax error: Unexpected token 'whoami', expecting '}'");
});

test('a lone snippet key at end of input is an ordinary key', () => {
  assert.deepEqual(simple(parse('(foo)\n')), [{ keys: ['(foo)'], tokens: {} }]);
});

test('snippet redeclaration', () => {
  assert.equal(
    parseErr('(s) {\n whoami\n}\n(s) {\n log\n}\n'),
    'Corefile:4 - Error during parsing: redeclaration of previously declared snippet s',
  );
});

test('a snippet importing itself is rejected immediately', () => {
  assert.equal(parseErr('(s) {\n import s\n}\n'), 'Corefile:3 - Error during parsing: maximum snippet import depth (10000) exceeded');
  assert.equal(
    parseErr('(s) {\n log\n import {$N}\n}\n', { env: { N: 's' } }),
    'Corefile:4 - Error during parsing: maximum snippet import depth (10000) exceeded',
  );
  // not at a line start: no error at definition time
  assert.deepEqual(parse('(s) {\n log import s\n}\n'), []);
});

test('at most 10000 snippet expansions per parse', () => {
  let src = '(s) {\n whoami\n}\n(t) {\n';
  for (let i = 0; i < 100; i++) src += ' import s\n';
  src += '}\n. {\n';
  for (let i = 0; i < 101; i++) src += ' import t\n';
  src += '}\n';
  assert.equal(parseErr(src), 'Corefile:5 - Error during parsing: maximum snippet import depth (10000) exceeded');
  // 99 uses of t = 9900 + 99 expansions: fine
  const ok = src.replace(/( import t\n){101}/, ' import t\n'.repeat(99));
  assert.equal(parse(ok)[0].tokens.get('whoami')!.length, 9900);
});

// ---------------------------------------------------------------------------
// import of files and globs

test('import of a file inside a block: tokens keep their file (absolute) and lines', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'extra.conf'), '# extra\nlog\nerrors {\n  consolidate 5m ".* timeout$"\n}\n');
  const main = path.join(dir, 'Corefile');
  const b = parse('. {\n  whoami\n  import extra.conf\n  cache\n}\n', {}, main)[0];
  const extra = path.join(dir, 'extra.conf');
  assert.deepEqual(b.tokens.get('log'), [{ text: 'log', file: extra, line: 2 }]);
  assert.deepEqual(
    b.tokens.get('errors')!.map((t) => [t.text, t.file, t.line]),
    [['errors', extra, 3], ['{', extra, 3], ['consolidate', extra, 4], ['5m', extra, 4], ['.* timeout$', extra, 4], ['}', extra, 5]],
  );
  assert.deepEqual(b.tokens.get('cache'), [{ text: 'cache', file: main, line: 4 }]);
  assert.deepEqual([...b.tokens.keys()], ['whoami', 'log', 'errors', 'cache']);
});

test('errors inside an imported file name that file', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'bad.conf'), 'whoami\n\nnope\n');
  assert.equal(
    parseErr('. {\n import bad.conf\n}', {}, path.join(dir, 'Corefile')),
    `${path.join(dir, 'bad.conf')}:3 - Error during parsing: Unknown directive 'nope'`,
  );
});

test('relative imports resolve against the importing file, not the cwd', () => {
  const dir = tmpdir();
  fs.mkdirSync(path.join(dir, 'sub', 'deeper'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'sub', 'a.conf'), 'import deeper/b.conf\n');
  fs.writeFileSync(path.join(dir, 'sub', 'deeper', 'b.conf'), 'whoami\n');
  const b = parse('. {\n import sub/a.conf\n}', {}, path.join(dir, 'Corefile'))[0];
  assert.deepEqual(b.tokens.get('whoami'), [{ text: 'whoami', file: path.join(dir, 'sub', 'deeper', 'b.conf'), line: 1 }]);
});

test('a relative main file name resolves imports against the cwd', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'x.conf'), 'whoami\n');
  const rel = path.relative(process.cwd(), path.join(dir, 'Corefile'));
  const b = parse('. {\n import x.conf\n}', {}, rel)[0];
  assert.equal(b.tokens.get('whoami')![0].file, path.join(dir, 'x.conf'));
});

test('top-level import of server blocks, and absolute import paths', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'zones.conf'), 'a.example {\n whoami\n}\nb.example {\n log\n}\n');
  const s = parseCorefile(`import ${path.join(dir, 'zones.conf')}\nc.example {\n errors\n}\n`, 'Corefile', opts());
  assert.deepEqual(simple(s).map((b) => b.keys[0]), ['a.example', 'b.example', 'c.example']);
  assert.equal(s[1].keys[0].file, path.join(dir, 'zones.conf'));
  assert.equal(s[1].keys[0].line, 4);
});

test('glob import: sorted matches, one wildcard', () => {
  const dir = tmpdir();
  fs.mkdirSync(path.join(dir, 'conf.d'));
  fs.writeFileSync(path.join(dir, 'conf.d', 'b.conf'), 'b.example {\n whoami\n}\n');
  fs.writeFileSync(path.join(dir, 'conf.d', 'a.conf'), 'a.example {\n whoami\n}\n');
  fs.writeFileSync(path.join(dir, 'conf.d', 'c.txt'), 'c.example {\n whoami\n}\n');
  const s = parse('import conf.d/*.conf\n', {}, path.join(dir, 'Corefile'));
  assert.deepEqual(s.map((b) => b.keys[0].text), ['a.example', 'b.example']);
  const q = parse('import conf.d/?.conf\n', {}, path.join(dir, 'Corefile'));
  assert.equal(q.length, 2);
  // the wildcard may be in a directory component
  const d = parse('import con*/a.conf\n', {}, path.join(dir, 'Corefile'));
  assert.deepEqual(d.map((b) => b.keys[0].text), ['a.example']);
});

test('glob with no matches only warns', () => {
  const dir = tmpdir();
  const warnings: string[] = [];
  const s = parse('. {\n import none/*.conf\n whoami\n}', { warn: (m) => warnings.push(m) }, path.join(dir, 'Corefile'));
  assert.deepEqual(warnings, ['No files matching import glob pattern: none/*.conf']);
  assert.deepEqual(simple(s), [{ keys: ['.'], tokens: { whoami: ['whoami'] } }]);
  // an empty import at top level leaves nothing
  assert.deepEqual(parse('import none*\n', {}, path.join(dir, 'Corefile')), []);
});

test('more than one wildcard or a character class is refused', () => {
  const dir = tmpdir();
  const f = path.join(dir, 'Corefile');
  assert.equal(
    parseErr('. {\n import a*b*.conf\n}', {}, f),
    `${f}:2 - Error during parsing: Glob pattern may only contain one wildcard (*), but has others: ${path.join(dir, 'a*b*.conf')}`,
  );
  assert.equal(
    parseErr('. {\n import a?b?\n}', {}, f),
    `${f}:2 - Error during parsing: Glob pattern may only contain one wildcard (*), but has others: ${path.join(dir, 'a?b?')}`,
  );
  assert.equal(
    parseErr('. {\n import [ab].conf\n}', {}, f),
    `${f}:2 - Error during parsing: Glob pattern may only contain one wildcard (*), but has others: ${path.join(dir, '[ab].conf')}`,
  );
  assert.equal(parseErr('. {\n import [a\n}', {}, f), `${f}:2 - Error during parsing: Failed to use import pattern [a: syntax error in pattern`);
});

test('import errors', () => {
  const dir = tmpdir();
  const f = path.join(dir, 'Corefile');
  fs.mkdirSync(path.join(dir, 'adir'));
  assert.equal(parseErr('. {\n import nope.conf\n}', {}, f), `${f}:2 - Error during parsing: File to import not found: nope.conf`);
  assert.equal(parseErr('. {\n import adir\n}', {}, f), `${f}:2 - Error during parsing: Could not import ${path.join(dir, 'adir')}: is a directory`);
  assert.equal(parseErr('. {\n import adir/\n}', {}, f), `${f}:2 - Error during parsing: Could not import ${path.join(dir, 'adir')}: is a directory`);
  assert.equal(parseErr('. {\n import\n}', {}, f), `${f}:2 - Error during parsing: Wrong argument count or unexpected line ending after 'import'`);
  assert.equal(parseErr('import'), "Corefile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'import'");
  assert.equal(parseErr('. {\n import a b\n}', {}, f), `${f}:2 - Error during parsing: Import takes only one argument (glob pattern or file)`);
  assert.equal(parseErr('. {\n import {$NOPE}\n}', {}, f), `${f}:2 - Error during parsing: Import requires a non-empty filepath`);
  assert.equal(parseErr('. {\n import ""\n}', {}, f), `${f}:2 - Error during parsing: Import requires a non-empty filepath`);
  fs.symlinkSync(path.join(dir, 'missing'), path.join(dir, 'dangling'));
  const dangling = path.join(dir, 'dangling');
  assert.equal(
    parseErr('. {\n import dangling\n}', {}, f),
    `${f}:2 - Error during parsing: Could not import ${dangling}: open ${dangling}: no such file or directory`,
  );
});

test('import pattern from the environment', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'x.conf'), 'whoami\n');
  const b = parse('. {\n import {$F}\n}', { env: { F: 'x.conf' } }, path.join(dir, 'Corefile'))[0];
  assert.deepEqual([...b.tokens.keys()], ['whoami']);
});

test('import inside a directive block, at a line start only', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'opts.conf'), 'max_fails 2\nexpire 10s\n');
  const f = path.join(dir, 'Corefile');
  const b = parse('. {\n forward . 1.1.1.1 {\n  import opts.conf\n }\n}', {}, f)[0];
  assert.deepEqual(b.tokens.get('forward')!.map((t) => t.text), ['forward', '.', '1.1.1.1', '{', 'max_fails', '2', 'expire', '10s', '}']);
  // not at a line start it is an ordinary argument
  const c = parse('. {\n forward . 1.1.1.1 {\n  except import opts.conf\n }\n}', {}, f)[0];
  assert.deepEqual(c.tokens.get('forward')!.map((t) => t.text), ['forward', '.', '1.1.1.1', '{', 'except', 'import', 'opts.conf', '}']);
});

test('a file importing itself stops at the file import limit', () => {
  const dir = tmpdir();
  fs.writeFileSync(path.join(dir, 'self.conf'), 'import self.conf\n');
  assert.equal(
    parseErr('. {\n whoami\n import self.conf\n}', {}, path.join(dir, 'Corefile')),
    `${path.join(dir, 'self.conf')}:1 - Error during parsing: maximum file import depth (10000) exceeded`,
  );
});

test('blocks record the main file name', () => {
  assert.equal(parse('. {\n}', {}, 'my/Corefile')[0].file, 'my/Corefile');
});
