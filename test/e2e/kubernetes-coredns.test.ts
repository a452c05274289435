// Faithfulness: the reference CoreDNS (scripts/coredns-reference.sh) and nodens,
// both pointed through a kubeconfig at the same test API server, give the same
// answers — for the conformance cases' cluster state, and again after the state
// changes through the watch (which also proves the test API server's list/watch
// and streaming-list handshake are good enough for client-go).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseQueriesFile } from '../conformance/lib/query.ts';
import { compareQueries, runCase, startPair } from '../k8s-api/compare.ts';
import type { ClusterState, KObject } from '../k8s-api/server.ts';

const CASES = fileURLToPath(new URL('../conformance/cases/', import.meta.url));
const FIXTURE = JSON.parse(readFileSync(fileURLToPath(new URL('../k8s-api/fixtures/cluster.json', import.meta.url)), 'utf8')) as ClusterState;

for (const name of ['kubernetes-basic', 'kubernetes-options']) {
  // The first test may build the reference CoreDNS (scripts/coredns-reference.sh) when it is not cached yet.
  test(`CoreDNS and nodens answer alike: ${name}`, { timeout: 900_000 }, async () => {
    const r = await runCase(path.join(CASES, name));
    assert.ok(r.passed > 40);
    assert.deepEqual(r.failed.map((f) => `${f.query}\n${f.diff}`), []);
  });
}

test('CoreDNS and nodens follow the same watch events', { timeout: 120_000 }, async () => {
  const corefile = `cluster.local in-addr.arpa {
    kubernetes {
        kubeconfig {$NODENS_K8S_KUBECONFIG}
        pods verified
    }
}
`;
  const p = await startPair(corefile, structuredClone(FIXTURE), { probe: 'dns-version.cluster.local. TXT' });
  try {
    const queries = parseQueriesFile([
      'web.prod.svc.cluster.local. A', '_http._tcp.web.prod.svc.cluster.local. SRV', 'web-0.web.prod.svc.cluster.local. A',
      'svc1.testns.svc.cluster.local. A', 'svc1.testns.svc.cluster.local. SRV', 'added.testns.svc.cluster.local. A',
      '10-244-0-5.testns.pod.cluster.local. A', '10-244-0-8.testns.pod.cluster.local. A', '3.3.244.10.in-addr.arpa. PTR',
      'api.prod.svc.cluster.local. A', 'svc1.other.svc.cluster.local. A',
    ].join('\n'));
    const before = await compareQueries(p, queries);
    assert.deepEqual(before.failed.map((f) => f.diff), []);
    const api = p.api;
    const web = api.snapshot().endpointslices!.find((s) => s.metadata.name === 'web-7xk2p')!;
    const eps = web.endpoints as { conditions: { ready: boolean } }[];
    eps[0].conditions.ready = false;
    eps[2].conditions.ready = true;
    api.upsert(web);
    api.delete('Service', 'testns', 'svc1');
    api.upsert({ kind: 'Service', metadata: { name: 'added', namespace: 'testns' }, spec: { clusterIP: '10.0.0.88', clusterIPs: ['10.0.0.88'], ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] } });
    api.delete('Pod', 'testns', 'pod1');
    api.upsert({ kind: 'Pod', metadata: { name: 'pod8', namespace: 'testns' }, status: { phase: 'Running', podIP: '10.244.0.8', podIPs: [{ ip: '10.244.0.8' }] } } as KObject);
    api.delete('Namespace', undefined, 'other');
    // Both converge: wait until the reference shows the last change, then compare everything.
    const t0 = Date.now();
    let after = await compareQueries(p, queries);
    while ((after.failed.length > 0 || !(after.reference.get('svc1.other.svc.cluster.local. A') ?? []).join('\n').includes('NXDOMAIN')) && Date.now() - t0 < 10_000) {
      await new Promise((r) => setTimeout(r, 200));
      after = await compareQueries(p, queries);
    }
    assert.deepEqual(after.failed.map((f) => `${f.query}\n${f.diff}`), []);
    assert.match(after.reference.get('added.testns.svc.cluster.local. A')!.join('\n'), /10\.0\.0\.88/);
    assert.match(after.reference.get('svc1.testns.svc.cluster.local. A')!.join('\n'), /NXDOMAIN/);
    assert.match(after.reference.get('10-244-0-8.testns.pod.cluster.local. A')!.join('\n'), /10\.244\.0\.8/);
    // CoreDNS used the streaming list (sendInitialEvents) against the test server.
    assert.ok(api.requests.some((r) => r.url.includes('sendInitialEvents=true')));
  } finally {
    await p.stop();
  }
});
