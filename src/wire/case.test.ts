import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { decodeMessage, encodeMessage, newQuery, parseRecord } from './index.ts';
import { questionEnd } from './scan.ts';
import { questionIdentical, randomizeQuestionCase, restoreQuestionCase } from './case.ts';

test('randomizeQuestionCase: one random bit per letter, nothing else touched', () => {
  const q = encodeMessage(newQuery('Www-1.Example.org.', 1));
  const qEnd = questionEnd(q);
  const seen = new Set<string>();
  for (let i = 0; i < 400; i++) {
    const out = Buffer.from(q);
    const r = randomBytes(32);
    assert.equal(randomizeQuestionCase(out, qEnd, r), 13, 'www, example, org');
    const name = decodeMessage(out).question[0]!.name;
    assert.equal(name.toLowerCase(), 'www-1.example.org.');
    // the bits are used in order: letter k takes bit k of the random bytes
    let k = 0;
    for (const c of name) {
      if (!/[a-z]/i.test(c)) continue;
      assert.equal(c === c.toLowerCase(), ((r[k >> 3]! >> (k & 7)) & 1) === 1, `letter ${k}`);
      k++;
    }
    assert.deepEqual(out.subarray(qEnd - 4), q.subarray(qEnd - 4), 'type and class');
    assert.deepEqual(out.subarray(0, 12), q.subarray(0, 12), 'header');
    seen.add(name);
  }
  // 2^13 spellings: 400 draws repeat about 10
  assert.ok(seen.size >= 370, `distinct spellings: ${seen.size}`);
  const at = Buffer.concat([Buffer.alloc(5), randomBytes(32)]);
  const out = Buffer.from(q);
  assert.equal(randomizeQuestionCase(out, qEnd, at, 5), 13, 'bits taken from an offset');
});

test('randomizeQuestionCase changes nothing when it cannot add a bit', () => {
  const digits = encodeMessage(newQuery('1.2.3.4.', 1));
  assert.equal(randomizeQuestionCase(Buffer.from(digits), questionEnd(digits), randomBytes(32)), 0);
  const root = encodeMessage(newQuery('.', 2));
  assert.equal(randomizeQuestionCase(Buffer.from(root), questionEnd(root), randomBytes(32)), 0);
  // a question name that ends in a pointer (legal, odd): left alone
  const q = encodeMessage(newQuery('ab.', 1));
  const ptr = Buffer.concat([q.subarray(0, 12), Buffer.from([1, 0x61, 0xc0, 12]), Buffer.from([0, 1, 0, 1])]);
  const copy = Buffer.from(ptr);
  assert.equal(randomizeQuestionCase(copy, ptr.length, randomBytes(32)), 0);
  assert.deepEqual(copy, ptr);
  // too few random bits for the letters: left alone
  const long = encodeMessage(newQuery('abcdefghij.', 1));
  const copyLong = Buffer.from(long);
  assert.equal(randomizeQuestionCase(copyLong, questionEnd(long), randomBytes(1)), 0);
  assert.deepEqual(copyLong, long);
});

test('questionIdentical compares case; restoreQuestionCase gives back the client\'s spelling where the name was copied', () => {
  const client = encodeMessage(newQuery('WwW.Example.ORG.', 1));
  const qEnd = questionEnd(client);
  const sent = Buffer.from(client);
  // a spelling that differs from the client's in every letter
  for (let i = 12; i < qEnd - 4; i++) if (/[a-z]/i.test(String.fromCharCode(sent[i]!))) sent[i] = sent[i]! ^ 0x20;
  const sentName = decodeMessage(sent).question[0]!.name;
  assert.equal(sentName, 'wWw.eXAMPLE.org.');
  for (const compress of [true, false]) {
    const m = decodeMessage(sent);
    m.qr = true;
    m.answer.push(
      parseRecord(`${sentName} 300 IN CNAME other.example.org.`), // compressed: a pointer to the question
      parseRecord('other.example.org. 60 IN A 192.0.2.1'),
      parseRecord('WWW.EXAMPLE.ORG. 60 IN A 192.0.2.2'), // the upstream's own spelling: kept
    );
    m.additional.push(parseRecord(`${sentName} 60 IN TXT "x"`));
    const reply = encodeMessage(m, { compress });
    assert.ok(questionIdentical(sent, qEnd, reply));
    assert.equal(questionIdentical(client, qEnd, reply), false, 'another case is not identical');
    restoreQuestionCase(reply, qEnd, sent, client);
    const r = decodeMessage(reply);
    assert.equal(r.question[0]!.name, 'WwW.Example.ORG.', `question (compress ${compress})`);
    assert.equal(r.answer[0]!.name, 'WwW.Example.ORG.', `copied owner (compress ${compress})`);
    assert.equal(r.answer[1]!.name.toLowerCase(), 'other.example.org.');
    assert.equal(r.answer[2]!.name, 'WWW.EXAMPLE.ORG.', 'another spelling stays');
    assert.equal(r.additional[0]!.name, 'WwW.Example.ORG.', 'additional section too');
  }
});

test('restoreQuestionCase never throws and never grows a reply, whatever the bytes (10,000 mutants)', () => {
  const client = encodeMessage(newQuery('a.bc.example.', 1));
  const qEnd = questionEnd(client);
  const sent = Buffer.from(client);
  assert.ok(randomizeQuestionCase(sent, qEnd, randomBytes(32)) > 0);
  const m = decodeMessage(sent);
  m.qr = true;
  m.answer.push(parseRecord(`${m.question[0]!.name} 60 IN A 192.0.2.1`), parseRecord(`x.${m.question[0]!.name} 60 IN CNAME ${m.question[0]!.name}`));
  const base = encodeMessage(m, { compress: true });
  for (let i = 0; i < 10_000; i++) {
    const b = Buffer.from(base.subarray(0, qEnd + Math.floor(Math.random() * (base.length - qEnd + 1))));
    for (let k = 0; k < 3; k++) b[qEnd + Math.floor(Math.random() * Math.max(1, b.length - qEnd))] = Math.floor(Math.random() * 256);
    const len = b.length;
    restoreQuestionCase(b, qEnd, sent, client);
    assert.equal(b.length, len);
    assert.deepEqual(b.subarray(12, qEnd), client.subarray(12, qEnd));
  }
});
