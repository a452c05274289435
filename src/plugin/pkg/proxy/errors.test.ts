// Upstream errors worded as CoreDNS (Go's net package) words them; out of file descriptors, the fault
// drill (test/drills/faults.ts, `ulimit -n 64`) saw nodens log `dial udp …: bind EMFILE 0.0.0.0` where
// CoreDNS logs `dial udp …: socket: too many open files`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dialFailure, errnoText } from './errors.ts';

function errno(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

test('out of descriptors, a dial fails at socket(2), worded as Go words it', () => {
  assert.equal(dialFailure(errno('EMFILE', 'bind EMFILE 0.0.0.0')), 'socket: too many open files');
  assert.equal(dialFailure(errno('ENFILE', 'x')), 'socket: too many open files in system');
  assert.equal(dialFailure(errno('ECONNREFUSED', 'x')), 'connect: connection refused');
  assert.equal(errnoText(errno('EMFILE', 'x')), 'too many open files');
});

test('a real EMFILE from a UDP dial under ulimit -n is logged as socket: too many open files', () => {
  // A child process with 40 descriptors opens upstream sockets until it runs out.
  const script = `
    import { UdpConn } from ${JSON.stringify(new URL('./conn.ts', import.meta.url).href)};
    const held = [];
    for (let i = 0; i < 200; i++) {
      try { held.push(UdpConn.open('127.0.0.1', 53, undefined)); } catch (e) { console.log(e.message); process.exit(0); }
    }
    console.log('no error');`;
  const r = spawnSync('prlimit', ['--nofile=40', '--', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'dial udp 127.0.0.1:53: socket: too many open files');
});
