// The stack the hostile drill and the soak run nodens in, all on loopback: a
// local unbound as the upstream (it answers every name under miss.test from a
// local zone, so each new name is a real forwarded miss), the in-repo test API
// server (test/k8s-api, fixtures/cluster.json) for the kubernetes plugin, and
// nodens with cache, hosts, kubernetes and forward (log off).

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, ROOT } from '../helpers/server.ts';
import { K8sApiServer, kubeconfigFor, readState } from '../k8s-api/server.ts';
import { startServer, type Running } from './servers.ts';
import { unboundConf } from '../../bench/unbound.ts';

export const K8S_STATE = join(ROOT, 'test', 'k8s-api', 'fixtures', 'cluster.json');

/** service.namespace.svc.cluster.local for every service of the fixture. */
export function k8sNames(): string[] {
  const st = JSON.parse(readFileSync(K8S_STATE, 'utf8')) as { services?: Array<{ metadata: { name: string; namespace: string } }> };
  return (st.services ?? []).map((x) => `${x.metadata.name}.${x.metadata.namespace}.svc.cluster.local`);
}

export const HOSTS_N = 100;

export interface Stack { port: number; upstreamPort: number; nodens: Running; unboundPid: number | undefined; stop(): Promise<void> }

export async function startUnbound(dir: string, port: number): Promise<ChildProcess> {
  writeFileSync(join(dir, 'unbound.conf'), unboundConf(dir, port,
    // A 4 MiB receive buffer, as nodens's listener asks for (UDP_RECV_BUFFER): with the kernel's default
    // (208 KiB) the soak's misses were lost at unbound's socket while the machine's other work stalled it.
    '    local-zone: "miss.test." redirect\n    local-data: "miss.test. 60 IN A 192.0.2.9"\n    so-rcvbuf: 4m'));
  const p = spawn('unbound', ['-d', '-c', join(dir, 'unbound.conf')], { stdio: ['ignore', 'ignore', 'inherit'] });
  await new Promise((r) => setTimeout(r, 500));
  if (p.exitCode !== null) throw new Error(`unbound exited (${p.exitCode})`);
  return p;
}

export async function startStack(name = 'nodens', bin = 'nodens', opts: { kubernetes?: boolean } = {}): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'nodens-stack-'));
  const upstreamPort = await freePort();
  const unbound = await startUnbound(dir, upstreamPort);
  const withK8s = opts.kubernetes ?? true;
  let api: K8sApiServer | undefined;
  let kc = '';
  if (withK8s) {
    api = new K8sApiServer(readState(K8S_STATE));
    await api.start(0);
    kc = join(dir, 'kubeconfig');
    writeFileSync(kc, kubeconfigFor(`http://127.0.0.1:${api.port}`));
  }
  const port = await freePort();
  const hosts = Array.from({ length: HOSTS_N }, (_, i) => `10.1.${i >> 8}.${i & 255} h${i}.hosts.test`).join('\n');
  const k8s = withK8s ? `    kubernetes cluster.local {\n        kubeconfig ${kc}\n        fallthrough\n    }\n` : '';
  const corefile = `.:${port} {\n    bind 127.0.0.1\n    cache 30\n    hosts hosts.txt {\n        fallthrough\n    }\n${k8s}    forward . 127.0.0.1:${upstreamPort}\n}\n`;
  let nodens: Running;
  try {
    nodens = await startServer(name, bin, corefile, { 'hosts.txt': `${hosts}\n` });
  } catch (e) {
    unbound.kill(); await api?.stop();
    throw e;
  }
  return {
    port, upstreamPort, nodens, unboundPid: unbound.pid,
    async stop() { await nodens.stop(); unbound.kill(); await api?.stop(); },
  };
}
