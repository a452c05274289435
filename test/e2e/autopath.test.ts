// autopath with a real stub resolver: dnspython (Debian's python3-dnspython) configured as a pod's
// resolv.conf is (search testns.svc.cluster.local svc.cluster.local cluster.local, ndots:5) resolves
// `example.com` against nodens with and without `autopath @kubernetes`, and the server counts the
// queries it receives: four without autopath (three NXDOMAIN search tries, then the name), one with.
// The pod is testns/client with podIP 127.0.0.1 in the test API server (test/k8s-api).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEBIAN_PYTHON } from '../helpers/dig.ts';
import { startInProcess } from '../helpers/server.ts';
import { K8sApiServer, kubeconfigFor, type ClusterState } from '../k8s-api/server.ts';
import type { PluginDefinition } from '../../src/plugin/plugin.ts';

const FIXTURE = JSON.parse(readFileSync(fileURLToPath(new URL('../k8s-api/fixtures/cluster.json', import.meta.url)), 'utf8')) as ClusterState;

const RESOLVER = `
import sys
import dns.name, dns.resolver
r = dns.resolver.Resolver(configure=False)
r.nameservers = ['127.0.0.1']
r.port = int(sys.argv[1])
r.search = [dns.name.from_text(s) for s in ('testns.svc.cluster.local', 'svc.cluster.local', 'cluster.local')]
r.ndots = 5
r.use_search_by_default = True
r.lifetime = 5
a = r.resolve(sys.argv[2], 'A')
print(a.qname, a.canonical_name, ' '.join(sorted(x.address for x in a)))
`;

function resolve(port: number, name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(DEBIAN_PYTHON, ['-c', RESOLVER, String(port), name], { timeout: 15000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${DEBIAN_PYTHON} with dnspython failed (is python3-dnspython installed?): ${stderr || err.message}`));
      else resolve(stdout.trim());
    });
  });
}

let dir: string;
let api: K8sApiServer;
let kc: string;
before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'nodens-autopath-e2e-'));
  const state = structuredClone(FIXTURE);
  state.pods = [...(state.pods ?? []), {
    metadata: { name: 'client', namespace: 'testns' },
    status: { phase: 'Running', podIP: '127.0.0.1', podIPs: [{ ip: '127.0.0.1' }] },
  }];
  api = new K8sApiServer(state);
  await api.start(0);
  kc = path.join(dir, 'kubeconfig');
  writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${api.port}`));
  writeFileSync(path.join(dir, 'hosts'), '192.0.2.80 example.com\n');
});
after(async () => {
  await api.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Serve with or without autopath; `seen` gets the name of every query the server receives. */
async function serve(autopath: boolean, seen: string[]) {
  const counter: PluginDefinition = {
    name: 'count',
    setup(c) {
      c.dispenser.next();
      c.addPlugin((next) => ({
        name: 'count',
        serveDNS(req, w) {
          seen.push(req.qname);
          return next!.serveDNS(req, w);
        },
      }));
    },
  };
  return startInProcess(`
.:0 {
    count
    ${autopath ? 'autopath @kubernetes' : ''}
    kubernetes cluster.local {
        kubeconfig ${kc}
        pods verified
    }
    hosts ${path.join(dir, 'hosts')} com
}`, { plugins: [{ plugin: counter, before: 'autopath' }] });
}

test('a pod resolving example.com with ndots:5: four queries without autopath', async () => {
  const seen: string[] = [];
  const s = await serve(false, seen);
  try {
    assert.equal(await resolve(s.port, 'example.com'), 'example.com. example.com. 192.0.2.80');
    assert.deepEqual(seen, ['example.com.testns.svc.cluster.local.', 'example.com.svc.cluster.local.', 'example.com.cluster.local.', 'example.com.']);
  } finally {
    await s.stop();
  }
});

test('a pod resolving example.com with ndots:5: one query with autopath, answered through a CNAME', async () => {
  const seen: string[] = [];
  const s = await serve(true, seen);
  try {
    // dnspython follows the CNAME: the answer is for the first search try, its canonical name example.com.
    assert.equal(await resolve(s.port, 'example.com'), 'example.com.testns.svc.cluster.local. example.com. 192.0.2.80');
    assert.deepEqual(seen, ['example.com.testns.svc.cluster.local.']);
    // A service of another namespace: found at the second search element, in one query too.
    seen.length = 0;
    assert.equal(await resolve(s.port, 'api.prod'), 'api.prod.testns.svc.cluster.local. api.prod.svc.cluster.local. 10.96.5.5');
    assert.deepEqual(seen, ['api.prod.testns.svc.cluster.local.']);
  } finally {
    await s.stop();
  }
});
