// pkg/gotemplate.ts against Go's text/template: testdata/gotemplate-go.json
// holds, for each template, what Go 1.26's text/template produced (parse
// error, execution error, output, Tree.Root.String()) with the data below;
// testdata/gotemplate-gen.go regenerates it (go run gotemplate-gen.go).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GoCallError, GoMap, GoNum, GoSlice, GoStruct, GoTemplate, GoTemplateError, NO_FIELD, goSprintf, type GoFunc } from './gotemplate.ts';

/** gotemplate-gen.go's data, field for field. */
export class Data extends GoStruct {
  readonly goType = '*main.data';
  field(name: string): unknown {
    switch (name) {
      case 'Name': return 'a.example.';
      case 'Match': return new GoSlice('[]string', ['a.example.', 'a', 'b', 'c']);
      case 'Group': return new GoMap('map[string]string', new Map([['a', '1'], ['0', 'a.example.']]), '');
      case 'N': return 5;
      case 'Q': return new GoNum('uint16', 28);
      case 'T': return new GoNum('uint32', 3600);
      case 'Var': return new GoMap('map[string]interface {}', new Map<string, unknown>([
        ['i', 3], ['f', new GoNum('float64', 2.5)], ['g', new GoNum('float64', 2)], ['s', 'x'], ['b', true],
        ['l', new GoSlice('[]string', ['a', 'b'])], ['a', new GoSlice('[]interface {}', [1, 'x'])], ['n', null],
      ]), null);
      case 'Nil': return new GoMap('map[string]string', undefined, '');
    }
    return NO_FIELD;
  }

  override method(name: string): GoFunc | undefined {
    return name === 'Meta' ? { params: ['string'], fn: (s: unknown) => `m-${s as string}` } : undefined;
  }

  override fieldNames(): readonly string[] { return ['Name', 'Match', 'Group', 'N', 'Q', 'T', 'Var', 'Nil']; }

  override fieldValues(): unknown[] { return this.fieldNames().map((f) => this.field(f)); }
}

const MAX = 0xffffffffffffffffn;
const funcs = new Map<string, GoFunc>([['parseInt', {
  params: ['string', 'int', 'int'],
  fn: (s: unknown, base: unknown, bits: unknown): bigint => {
    const str = s as string;
    const b = base as number;
    const lim = (1n << BigInt(bits as number)) - 1n;
    let v = 0n;
    for (const ch of str.toLowerCase()) {
      const dgt = parseInt(ch, 36);
      if (Number.isNaN(dgt) || dgt >= b) throw new GoCallError(`strconv.ParseUint: parsing ${JSON.stringify(str)}: invalid syntax`);
      v = v * BigInt(b) + BigInt(dgt);
    }
    if (str === '') throw new GoCallError(`strconv.ParseUint: parsing "": invalid syntax`);
    if (v > lim || v > MAX) throw new GoCallError(`strconv.ParseUint: parsing ${JSON.stringify(str)}: value out of range`);
    return v;
  },
}]]);

interface Row { t: string; perr?: string; eerr?: string; out?: string; tree?: string }
const rows = JSON.parse(readFileSync(new URL('./testdata/gotemplate-go.json', import.meta.url), 'utf8')) as Row[];

/** What Go accepts and this engine refuses on purpose (a setup error): complex numbers. */
const REFUSED = new Set(['{{ 3i }}']);

for (const r of rows) {
  if (REFUSED.has(r.t)) {
    test(`refused on purpose: ${r.t}`, () => {
      assert.throws(() => GoTemplate.parse('answer', r.t, funcs), GoTemplateError);
    });
    continue;
  }
  test(`as Go: ${r.t}`, () => {
    let t: GoTemplate;
    try {
      t = GoTemplate.parse('answer', r.t, funcs);
    } catch (e) {
      assert.ok(e instanceof GoTemplateError, String(e));
      assert.equal(e.message, r.perr);
      return;
    }
    assert.equal(r.perr, undefined, 'Go failed to parse it');
    assert.equal(t.toString(), r.tree);
    let out: string;
    try {
      out = t.execute(new Data());
    } catch (e) {
      assert.equal((e as Error).message, r.eerr);
      return;
    }
    assert.equal(r.eerr, undefined, 'Go failed to execute it');
    assert.equal(out, r.out);
  });
}

/** One row's result as the oracle records it. */
function run(t: string): Row {
  const r: Row = { t };
  let tm: GoTemplate;
  try {
    tm = GoTemplate.parse('answer', t, funcs);
  } catch (e) {
    r.perr = (e as Error).message;
    return r;
  }
  r.tree = tm.toString();
  try {
    r.out = tm.execute(new Data());
  } catch (e) {
    r.eerr = (e as Error).message;
  }
  return r;
}

test('1500 random templates (gotemplate-random-go.json, made by gotemplate-gen.go -random 1500) as Go', () => {
  const random = JSON.parse(readFileSync(new URL('./testdata/gotemplate-random-go.json', import.meta.url), 'utf8')) as Row[];
  assert.equal(random.length, 1500);
  const diffs: string[] = [];
  for (const want of random) {
    const got = run(want.t);
    if (JSON.stringify(got) !== JSON.stringify({ t: want.t, perr: want.perr, tree: want.tree, out: want.out, eerr: want.eerr }, (_k, v: unknown) => v)) {
      const g = { ...got };
      const w = { ...want };
      if (JSON.stringify(Object.entries(g).sort()) !== JSON.stringify(Object.entries(w).sort())) {
        diffs.push(`${JSON.stringify(want.t)}\n  go:     ${JSON.stringify(w)}\n  nodens: ${JSON.stringify(g)}`);
      }
    }
  }
  assert.equal(diffs.length, 0, `${diffs.length} differ:\n${diffs.slice(0, 25).join('\n')}`);
});

test('a recursion deeper than the JavaScript stack fails with Go\'s depth error', () => {
  const t = GoTemplate.parse('answer', '{{ define "x" }}{{ template "x" }}{{ end }}{{ template "x" }}');
  assert.throws(() => t.execute(new Data()), {
    message: 'template: answer:1:28: executing "x" at <{{template "x"}}>: exceeded maximum template depth (100000)',
  });
});

test('a bounded recursion runs as deep as templates need', () => {
  // 500 levels: one character per call, counted down with slice.
  const t = GoTemplate.parse('answer', '{{ define "x" }}{{ if . }}.{{ template "x" (slice . 1) }}{{ end }}{{ end }}{{ template "x" .Name }}');
  const long = GoTemplate.parse('answer', `{{ template "y" "${'a'.repeat(500)}" }}{{ define "y" }}{{ if . }}.{{ template "y" (slice . 1) }}{{ end }}{{ end }}`);
  assert.equal(t.execute(new Data()), '..........');
  assert.equal(long.execute(new Data()), '.'.repeat(500));
});

test('printf verbs', () => {
  assert.equal(goSprintf('%v|%s|%d|%q|%x|%X|%o|%b|%c|%t|%%|%-3s|%+d', [1, 'a', -3, 'q"', 'hi', 255, 8, 5, 65, true, 'x', 4]),
    '1|a|-3|"q\\""|6869|FF|10|101|A|true|%|x  |+4');
  assert.equal(goSprintf('%d %s', ['x']), '%!d(string=x) %!s(MISSING)');
  assert.equal(goSprintf('a', [1]), 'a%!(EXTRA int=1)');
});

test('a template of any size parses without deep recursion', () => {
  const t = GoTemplate.parse('answer', '{{ .Name }}-'.repeat(50000));
  assert.equal(t.execute(new Data()).length, 'a.example.-'.length * 50000);
});

test('the plain-field fast path and the executor agree', () => {
  for (const s of ['{{ .Name }} 60 IN A 1.2.3.4', 'x{{.Name}}y{{ .Name }}z', '{{ .N }}', '{{ .Match }}', '{{ .Nope }}']) {
    const t = GoTemplate.parse('answer', s);
    const slow = GoTemplate.parse('answer', `{{- "" -}}${s}`);
    let a: string, b: string;
    try { a = t.execute(new Data()); } catch (e) { a = (e as Error).message.replace(/:\d+:\d+:/, ''); }
    try { b = slow.execute(new Data()); } catch (e) { b = (e as Error).message.replace(/:\d+:\d+:/, ''); }
    assert.equal(a, b, s);
  }
});
