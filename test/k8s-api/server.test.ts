// The test API server speaks kube-apiserver's list/watch protocol.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { K8sApiServer, matchesSelector, type ClusterState, type KObject } from './server.ts';
import { parseSelector } from '../../src/plugin/kubernetes/selector.ts';

const FIXTURE = JSON.parse(readFileSync(fileURLToPath(new URL('./fixtures/cluster.json', import.meta.url)), 'utf8')) as ClusterState;

function get(port: number, path: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { body += d; });
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }); });
    }).on('error', reject);
  });
}

test('label selectors filter like kube-apiserver: equality and set based', () => {
  const s = parseSelector('environment in (staging, qa),application=nginx,!legacy');
  assert.equal(matchesSelector(s, { environment: 'qa', application: 'nginx' }), true);
  assert.equal(matchesSelector(s, { environment: 'prod', application: 'nginx' }), false);
  assert.equal(matchesSelector(s, { environment: 'qa', application: 'nginx', legacy: 'x' }), false);
  assert.equal(matchesSelector(parseSelector('a!=b'), {}), true);
});

interface Ev { type: string; object: KObject & { code?: number; reason?: string } }

/** Opens a watch and collects events until `until` says stop (or the stream ends). */
function watch(port: number, path: string, until: (evs: Ev[]) => boolean, ms = 3000): Promise<{ status: number; events: Ev[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const events: Ev[] = [];
    const req = http.get({ host: '127.0.0.1', port, path }, (res) => {
      let buf = '';
      let done = false;
      const finish = (ended: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(t);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, events, ended });
      };
      const t = setTimeout(() => { finish(false); }, ms);
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        buf += d;
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim()) events.push(JSON.parse(line) as Ev);
          if (until(events)) { finish(false); return; }
        }
      });
      res.on('end', () => { finish(true); });
    });
    req.on('error', (e) => { if (!req.destroyed) reject(e); });
  });
}

async function withServer(fn: (s: K8sApiServer) => Promise<void>, opts = {}): Promise<void> {
  const s = new K8sApiServer(FIXTURE, { bookmarkMs: 100, ...opts });
  await s.start(0);
  try {
    await fn(s);
  } finally {
    await s.stop();
  }
}

test('LIST: JSON with content type, list resourceVersion, items without kind, selectors', () => withServer(async (s) => {
  const r = await get(s.port, '/api/v1/services');
  assert.equal(r.status, 200);
  assert.equal(r.type, 'application/json');
  const body = JSON.parse(r.body) as { kind: string; metadata: { resourceVersion: string }; items: KObject[] };
  assert.equal(body.kind, 'ServiceList');
  assert.equal(body.metadata.resourceVersion, String(s.resourceVersion));
  assert.equal(body.items.length, FIXTURE.services!.length);
  assert.equal(body.items[0].kind, undefined);
  const ns = JSON.parse((await get(s.port, '/api/v1/namespaces/testns/services?labelSelector=app%3Dblue')).body) as { items: KObject[] };
  assert.deepEqual(ns.items.map((o) => o.metadata.name), ['svc1']);
  const pods = JSON.parse((await get(s.port, '/api/v1/pods?fieldSelector=status.phase!%3DFailed')).body) as { items: KObject[] };
  assert.ok(!pods.items.some((p) => p.metadata.name === 'podfailed'));
  const nsl = JSON.parse((await get(s.port, '/api/v1/namespaces?labelSelector=env%20in%20(prod,test)')).body) as { items: KObject[] };
  assert.deepEqual(nsl.items.map((o) => o.metadata.name), ['prod', 'testns']);
  assert.equal((await get(s.port, '/api/v1/nothing')).status, 404);
}));

test('LIST: limit/continue pages keep one resourceVersion; a stale continue token is 410', () => withServer(async (s) => {
  const p1 = JSON.parse((await get(s.port, '/api/v1/services?limit=5')).body) as { metadata: { resourceVersion: string; continue?: string }; items: KObject[] };
  assert.equal(p1.items.length, 5);
  assert.ok(p1.metadata.continue);
  const p2 = JSON.parse((await get(s.port, `/api/v1/services?limit=5&continue=${p1.metadata.continue}`)).body) as { metadata: { resourceVersion: string }; items: KObject[] };
  assert.equal(p2.metadata.resourceVersion, p1.metadata.resourceVersion);
  assert.notEqual(p2.items[0].metadata.name, p1.items[0].metadata.name);
  s.upsert({ kind: 'Namespace', metadata: { name: 'bump' } });
  const stale = await get(s.port, `/api/v1/services?limit=5&continue=${p1.metadata.continue}`);
  assert.equal(stale.status, 410);
  assert.equal((JSON.parse(stale.body) as { reason: string }).reason, 'Expired');
}));

test('WATCH without resourceVersion: synthetic ADDED for everything, then live events with kind/apiVersion', () => withServer(async (s) => {
  const n = FIXTURE.namespaces!.length;
  const p = watch(s.port, '/api/v1/namespaces?watch=true', (evs) => evs.length >= n + 2);
  await new Promise((r) => setTimeout(r, 100));
  s.upsert({ kind: 'Namespace', metadata: { name: 'new1' } });
  s.delete('Namespace', undefined, 'new1');
  const r = await p;
  assert.equal(r.status, 200);
  assert.deepEqual(r.events.slice(0, n).map((e) => e.type), Array(n).fill('ADDED'));
  assert.equal(r.events[n].type, 'ADDED');
  assert.equal(r.events[n].object.kind, 'Namespace');
  assert.equal(r.events[n].object.apiVersion, 'v1');
  assert.equal(r.events[n + 1].type, 'DELETED');
}));

test('WATCH from a resourceVersion replays later events; BOOKMARKs arrive when allowed', () => withServer(async (s) => {
  const rv = s.resourceVersion;
  s.upsert({ kind: 'Service', metadata: { name: 'late', namespace: 'testns' }, spec: { clusterIP: '10.0.9.9', ports: [{ port: 1 }] } });
  const r = await watch(s.port, `/api/v1/services?watch=1&resourceVersion=${rv}&allowWatchBookmarks=true`, (evs) => evs.some((e) => e.type === 'BOOKMARK'));
  assert.equal(r.events[0].type, 'ADDED');
  assert.equal(r.events[0].object.metadata.name, 'late');
  const bm = r.events.find((e) => e.type === 'BOOKMARK')!;
  assert.equal(bm.object.kind, 'Service');
  assert.equal(bm.object.metadata.resourceVersion, String(s.resourceVersion));
}));

test('WATCH from a compacted resourceVersion: ERROR event with a 410 Expired Status, stream closed', () => withServer(async (s) => {
  const rv = s.resourceVersion;
  s.upsert({ kind: 'Namespace', metadata: { name: 'x1' } });
  s.compact();
  const r = await watch(s.port, `/api/v1/namespaces?watch=true&resourceVersion=${rv}`, () => false);
  assert.equal(r.ended, true);
  assert.equal(r.events.length, 1);
  assert.equal(r.events[0].type, 'ERROR');
  assert.equal(r.events[0].object.code, 410);
  assert.equal(r.events[0].object.reason, 'Expired');
}));

test('bounded history: old versions expire by themselves', () => withServer(async (s) => {
  const rv = s.resourceVersion;
  for (let i = 0; i < 5; i++) s.upsert({ kind: 'Namespace', metadata: { name: `h${i}` } });
  const r = await watch(s.port, `/api/v1/namespaces?watch=true&resourceVersion=${rv}`, () => false, 1000);
  assert.equal(r.events[0].object.code, 410);
}, { history: 3 }));

test('streaming list: sendInitialEvents gives ADDED then the initial-events-end BOOKMARK; without NotOlderThan it is 422', () => withServer(async (s) => {
  const r = await watch(s.port, '/api/v1/services?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true',
    (evs) => evs.some((e) => e.type === 'BOOKMARK'));
  const bm = r.events.findIndex((e) => e.type === 'BOOKMARK');
  assert.equal(bm, FIXTURE.services!.length);
  assert.deepEqual(r.events[bm].object.metadata.annotations, { 'k8s.io/initial-events-end': 'true' });
  assert.equal(r.events[bm].object.metadata.resourceVersion, String(s.resourceVersion));
  const bad = await get(s.port, '/api/v1/services?watch=true&sendInitialEvents=true');
  assert.equal(bad.status, 422);
}));

test('selector transitions: an object leaving the selector is DELETED, one entering is ADDED', () => withServer(async (s) => {
  const p = watch(s.port, `/api/v1/services?watch=true&resourceVersion=${s.resourceVersion}&labelSelector=app%3Dblue`, (evs) => evs.length >= 2);
  await new Promise((r) => setTimeout(r, 100));
  const svc1 = FIXTURE.services!.find((o) => o.metadata.name === 'svc1' && o.metadata.namespace === 'testns')!;
  s.upsert({ ...svc1, kind: 'Service', metadata: { ...svc1.metadata, labels: { app: 'green' } } });
  s.upsert({ ...svc1, kind: 'Service', metadata: { ...svc1.metadata, labels: { app: 'blue' } } });
  const r = await p;
  assert.deepEqual(r.events.map((e) => e.type), ['DELETED', 'ADDED']);
}));

test('admin: fail injection, drop-events, close-watches, REST writes', () => withServer(async (s) => {
  s.failNext(500, 1, 'services');
  assert.equal((await get(s.port, '/api/v1/services')).status, 500);
  assert.equal((await get(s.port, '/api/v1/services')).status, 200);
  const p = watch(s.port, `/api/v1/namespaces?watch=true&resourceVersion=${s.resourceVersion}`, (evs) => evs.length >= 1, 1500);
  await new Promise((r) => setTimeout(r, 100));
  s.dropNextEvents(1);
  s.upsert({ kind: 'Namespace', metadata: { name: 'dropped' } });
  s.upsert({ kind: 'Namespace', metadata: { name: 'seen' } });
  const r = await p;
  assert.deepEqual(r.events.map((e) => e.object.metadata.name), ['seen']);
  const q = watch(s.port, `/api/v1/namespaces?watch=true&resourceVersion=${s.resourceVersion}`, () => false, 2000);
  await new Promise((r2) => setTimeout(r2, 100));
  assert.equal(s.openWatches, 1);
  s.closeWatches();
  assert.equal((await q).ended, true);
  const created = await new Promise<number>((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: s.port, path: '/api/v1/namespaces', method: 'POST', headers: { 'Content-Type': 'application/json' } }, (res) => { res.resume(); resolve(res.statusCode ?? 0); });
    req.end(JSON.stringify({ metadata: { name: 'posted' } }));
  });
  assert.equal(created, 201);
  assert.equal((await get(s.port, '/api/v1/namespaces/posted')).status, 200);
}));
