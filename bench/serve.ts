// Per-query cost of the server's own work, without sockets: serveMessage()
// called in a loop with a sink that drops replies. Run:
//   node bench/serve.ts [seconds] [name filter]
// Scenarios: whoami, hosts answer, cache hit (cache filled from a hosts block behind it), a rewrite rule in
// front of hosts (a query it rewrites, and one it does not match), template answers, a cache hit through the kubeadm
// Corefile's plugins.

import { startServer } from '../src/index.ts';
import { serveMessage } from '../src/core/serve.ts';
import { encodeMessage } from '../src/wire/encode.ts';
import { newQuery } from '../src/wire/message.ts';
import { setLogSink } from '../src/core/log.ts';

setLogSink(() => {});
const seconds = Number(process.argv[2] ?? 2);
const only = process.argv[3];
const KUBEADM = '.:0 {\n errors\n health 127.0.0.1:0\n ready 127.0.0.1:0\n prometheus 127.0.0.1:0\n cache 30\n loop\n reload\n loadbalance\n' +
  ' hosts {\n  192.0.2.1 www.example.org\n }\n}\n';
const REWRITE_HOSTS = ' hosts {\n  192.0.2.1 b.example.org\n  192.0.2.2 www.example.org\n }\n}\n';

const scenarios: Array<{ name: string; corefile: string; qname: string; edns: boolean }> = [
  { name: 'whoami', corefile: '.:0 {\n whoami\n}\n', qname: 'www.example.org.', edns: false },
  { name: 'hosts', corefile: '.:0 {\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n', qname: 'www.example.org.', edns: false },
  { name: 'hosts+EDNS', corefile: '.:0 {\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n', qname: 'www.example.org.', edns: true },
  { name: 'cache hit', corefile: '.:0 {\n cache 3600\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n', qname: 'www.example.org.', edns: false },
  { name: 'cache hit+EDNS', corefile: '.:0 {\n cache 3600\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n', qname: 'www.example.org.', edns: true },
  { name: 'hosts b.example.org', corefile: '.:0 {\n' + REWRITE_HOSTS, qname: 'b.example.org.', edns: false },
  { name: 'rewrite exact+hosts', corefile: '.:0 {\n rewrite name exact a.example.org b.example.org\n' + REWRITE_HOSTS, qname: 'a.example.org.', edns: false },
  { name: 'rewrite no match+hosts', corefile: '.:0 {\n rewrite name exact a.example.org b.example.org\n' + REWRITE_HOSTS, qname: 'www.example.org.', edns: false },
  { name: 'template', corefile: '.:0 {\n template IN A example.org {\n  answer "{{ .Name }} 60 IN A 192.0.2.1"\n }\n}\n', qname: 'www.example.org.', edns: false },
  { name: 'template regex groups', corefile: '.:0 {\n template IN A example.org {\n  match "^(?P<h>[a-z]+)[.]example[.]org[.]$"\n  answer "{{ .Name }} 60 IN A 192.0.2.{{ len .Group.h }}"\n }\n}\n', qname: 'www.example.org.', edns: false },
  { name: 'cache hit+prometheus', corefile: '.:0 {\n prometheus 127.0.0.1:0\n cache 3600\n hosts {\n  192.0.2.1 www.example.org\n }\n}\n', qname: 'www.example.org.', edns: false },
  // The kubeadm Corefile's per-query plugins (errors, prometheus, cache, loop, loadbalance) in front of a hosts block
  // standing in for kubernetes/forward, with a DNS client's EDNS: the cache hit most cluster queries are (one address,
  // as for a ClusterIP service).
  { name: 'cache hit kubeadm-like', corefile: KUBEADM, qname: 'www.example.org.', edns: true },
];

for (const s of scenarios) {
  if (only !== undefined && !s.name.includes(only)) continue;
  const server = await startServer({ corefile: s.corefile });
  const listener = server.runtime.instance.listeners()[0]!;
  const q = newQuery(s.qname, 1);
  if (s.edns) q.edns = { udpSize: 1232, version: 0, do: false, z: 0, options: [] };
  const wire = Buffer.from(encodeMessage(q));
  let replies = 0;
  const sink = { send(_w: Uint8Array) { replies++; } };
  // warm up (and fill the cache). Replies are counted by the sink; a reply that is not synchronous is not waited
  // for (`void`: serveMessage recovers errors itself, its promise does not reject).
  for (let i = 0; i < 20000; i++) void serveMessage(listener.table, wire, 'udp', '127.0.0.1', 40000, '127.0.0.1', 53, sink);
  const t0 = process.hrtime.bigint();
  // CPU time as well as wall time: on a loaded machine the process is descheduled, which wall time counts.
  const cpu0 = process.cpuUsage();
  const end = t0 + BigInt(seconds * 1e9);
  let n = 0;
  while (process.hrtime.bigint() < end) {
    for (let i = 0; i < 1000; i++) void serveMessage(listener.table, wire, 'udp', '127.0.0.1', 40000 + (i & 1023), '127.0.0.1', 53, sink);
    n += 1000;
  }
  const ns = Number(process.hrtime.bigint() - t0) / n;
  const cpu = process.cpuUsage(cpu0);
  const cpuNs = ((cpu.user + cpu.system) * 1000) / n;
  process.stdout.write(`${s.name.padEnd(22)} ${ns.toFixed(0).padStart(6)} ns/query  ${(1e9 / ns / 1000).toFixed(0).padStart(5)}k q/s of server work` +
    `  ${cpuNs.toFixed(0).padStart(6)} CPU ns/query${replies < n ? '  (MISSING REPLIES)' : ''}\n`);
  await server.stop();
}
process.exit(0);
