import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goClean } from './gopath.ts';

// Each pair is what Go 1.26's filepath.Clean returns on Linux for the input.
const CASES: Array<[string, string]> = [
  // Already clean.
  ['abc', 'abc'], ['abc/def', 'abc/def'], ['a/b/c', 'a/b/c'], ['.', '.'], ['..', '..'], ['../../abc', '../../abc'],
  ['/abc', '/abc'], ['/', '/'],
  // Empty is the current directory.
  ['', '.'],
  // A trailing slash goes, except for the root.
  ['abc/', 'abc'], ['/abc/', '/abc'], ['nope/', 'nope'], ['./', '.'],
  // Runs of slashes become one.
  ['a//b', 'a/b'], ['/a//b//', '/a/b'], ['abc//def//ghi', 'abc/def/ghi'], ['//abc', '/abc'], ['//', '/'], ['///', '/'],
  // `.` elements go.
  ['abc/./def', 'abc/def'], ['/./abc/def', '/abc/def'], ['abc/.', 'abc'], ['./abc', 'abc'], ['./nope', 'nope'], ['./.', '.'],
  // `..` removes the element before it.
  ['abc/def/ghi/../jkl', 'abc/def/jkl'], ['abc/def/../ghi/../jkl', 'abc/jkl'], ['abc/def/..', 'abc'], ['abc/def/../..', '.'],
  ['abc/def/../../..', '..'], ['abc/def/../../../ghi/jkl/../../../mno', '../../mno'], ['abc/../../x', '../x'], ['./../x', '../x'],
  ['..//..', '../..'], ['x/./..', '.'], ['/tmp//ct/sub/../nope', '/tmp/ct/nope'],
  // At the root, `..` stays the root.
  ['/abc/def/../..', '/'], ['/abc/def/../../..', '/'], ['/../abc', '/abc'], ['/..', '/'],
  // Everything together.
  ['abc/./../def', 'def'], ['abc//./../def', 'def'], ['abc/../../././../def', '../../def'],
  // Only `.` and `..` themselves are special, not names that start with dots.
  ['.../x', '.../x'], ['..a/b', '..a/b'], ['a/..b', 'a/..b'], ['a/...', 'a/...'],
];

test('goClean is Go\'s filepath.Clean', () => {
  for (const [input, want] of CASES) assert.equal(goClean(input), want, JSON.stringify(input));
});

test('goClean of a clean path is the path; cleaning twice changes nothing', () => {
  for (const [, want] of CASES) {
    assert.equal(goClean(want), want, JSON.stringify(want));
  }
});
