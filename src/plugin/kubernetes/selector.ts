// Kubernetes label selectors (k8s.io/apimachinery labels.Parse): equality-based
// (`a=b`, `a==b`, `a!=b`) and set-based (`a in (x,y)`, `a notin (x)`, `a`, `!a`)
// requirements joined by commas. Used to validate `labels`/`namespace_labels`
// (the selector string itself is sent to the API server as `labelSelector`);
// the test API server (test/k8s-api) parses it with this too and filters.

export type Operator = 'in' | 'notin' | 'exists' | '!' | '=' | '==' | '!=';

export interface Requirement {
  key: string;
  op: Operator;
  values: string[];
}

export class SelectorError extends Error {}

const KEY_RE = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE_RE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function validKey(k: string): void {
  if (!KEY_RE.test(k)) throw new SelectorError(`invalid label key "${k}"`);
}

function validValue(v: string): void {
  if (v.length > 63 || !VALUE_RE.test(v)) throw new SelectorError(`invalid label value: "${v}"`);
}

/** Tokenises and parses a selector string; throws SelectorError on bad syntax. */
export function parseSelector(s: string): Requirement[] {
  const toks: string[] = [];
  const re = /\s*(==|!=|=|!|\(|\)|,|[^\s=!(),]+)/y;
  let pos = 0;
  const text = s.trim();
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (m === null) {
      if (/^\s*$/.test(text.slice(pos))) break;
      throw new SelectorError(`unable to parse requirement: at position ${pos}`);
    }
    toks.push(m[1]);
    pos = re.lastIndex;
  }
  const out: Requirement[] = [];
  let i = 0;
  const peek = () => toks[i];
  while (i < toks.length) {
    let op: Operator | undefined;
    let key: string;
    if (peek() === '!') {
      i++;
      key = toks[i++] ?? '';
      validKey(key);
      out.push({ key, op: '!', values: [] });
    } else {
      key = toks[i++];
      validKey(key);
      const t = peek();
      if (t === undefined || t === ',') {
        out.push({ key, op: 'exists', values: [] });
      } else if (t === '=' || t === '==' || t === '!=') {
        op = t;
        i++;
        let v = peek();
        if (v === undefined || v === ',') v = '';
        else i++;
        validValue(v);
        out.push({ key, op, values: [v] });
      } else if (t === 'in' || t === 'notin') {
        op = t;
        i++;
        if (toks[i++] !== '(') throw new SelectorError(`found '${toks[i - 1] ?? ''}', expected: '('`);
        const values: string[] = [];
        for (;;) {
          const v = toks[i++];
          if (v === undefined) throw new SelectorError(`found '', expected: ')'`);
          if (v === ')') break;
          if (v === ',') continue;
          validValue(v);
          values.push(v);
        }
        if (values.length === 0 && op === 'in') throw new SelectorError('for \'in\', \'notin\' operators, values set can\'t be empty');
        out.push({ key, op, values });
      } else {
        throw new SelectorError(`found '${t}', expected: in, notin, =, ==, !=, gt, lt`);
      }
    }
    if (i < toks.length) {
      if (toks[i] !== ',') throw new SelectorError(`found '${toks[i]}', expected: ',' or 'end of string'`);
      i++;
    }
  }
  return out;
}
