import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse, plugin, type KubernetesSetupOptions } from './setup.ts';
import { Fall } from '../pkg/fall.ts';
import { captureLog, parseTable, runSetup } from '../pkg/testing.ts';

const fall = (...zones: string[]): Fall => {
  const f = new Fall();
  f.setZonesFromArgs(zones);
  return f;
};

/** Every default, as `cluster.local { kubernetes }` gives them. */
const DEF: KubernetesSetupOptions = {
  zones: ['cluster.local.'], conn: {}, ttl: 5, podMode: 'disabled', endpointNameMode: false, namespaces: [],
  labelSelector: '', namespaceLabelSelector: '', fall: new Fall(), endpoints: true, ignoreEmptyService: false,
  multiclusterZones: [], zonal: false, startupTimeoutMs: 5000, qps: 0, burst: 0, maxInflight: 0,
};

const k8s = (lines: string): string => `cluster.local {\n kubernetes {\n${lines.split('\n').map((l) => `  ${l}\n`).join('')} }\n}`;
const P = 'plugin/kubernetes: ';
const E3 = 'plugin/kubernetes: Corefile:3 - Error during parsing: ';
const E4 = 'plugin/kubernetes: Corefile:4 - Error during parsing: ';
const argErr = (after: string): string => E3 + `Wrong argument count or unexpected line ending after '${after}'`;

test('kubernetes parse', async () => {
  await parseTable('kubernetes', parse, [
    ['cluster.local {\n kubernetes\n}', DEF],
    ['cluster.local 10.0.0.0/24 {\n kubernetes\n}', { ...DEF, zones: ['cluster.local.', '0.0.10.in-addr.arpa.'] }],
    ['. {\n kubernetes Cluster.Local in-addr.arpa\n}', { ...DEF, zones: ['cluster.local.', 'in-addr.arpa.'] }],
    [k8s('endpoint_pod_names\npods verified\nttl 0\nnoendpoints\nignore empty_service'),
      { ...DEF, endpointNameMode: true, podMode: 'verified', ttl: 0, endpoints: false, ignoreEmptyService: true }],
    [k8s('pods insecure\nttl 3600'), { ...DEF, podMode: 'insecure', ttl: 3600 }],
    [k8s('ignore'), DEF],
    [k8s('namespaces a b\nnamespaces b c'), { ...DEF, namespaces: ['a', 'b', 'c'] }],
    [k8s('endpoint https://10.0.0.1:6443\ntls cert.pem key.pem ca.pem'),
      { ...DEF, conn: { endpoint: 'https://10.0.0.1:6443', tls: { cert: 'cert.pem', key: 'key.pem', ca: 'ca.pem' } } }],
    [k8s('kubeconfig /k.yaml'), { ...DEF, conn: { kubeconfig: { path: '/k.yaml', context: undefined } } }],
    [k8s('kubeconfig /k.yaml ctx'), { ...DEF, conn: { kubeconfig: { path: '/k.yaml', context: 'ctx' } } }],
    [k8s('labels app=a, tier in (x,y)'), { ...DEF, labelSelector: 'app=a, tier in (x,y)' }],
    [k8s('namespace_labels team=dns'), { ...DEF, namespaceLabelSelector: 'team=dns' }],
    [k8s('fallthrough'), { ...DEF, fall: fall() }],
    [k8s('fallthrough in-addr.arpa Example.org'), { ...DEF, fall: fall('in-addr.arpa', 'Example.org') }],
    ['cluster.local clusterset.local {\n kubernetes {\n  multicluster clusterset.local\n }\n}',
      { ...DEF, zones: ['cluster.local.', 'clusterset.local.'], multiclusterZones: ['clusterset.local.'] }],
    [k8s('zonal\nstartup_timeout 30s'), { ...DEF, zonal: true, startupTimeoutMs: 30000 }],
    [k8s('apiserver_qps 2.5\napiserver_burst 20\napiserver_max_inflight 4'), { ...DEF, qps: 2.5, burst: 20, maxInflight: 4 }],

    ['cluster.local {\n kubernetes\n kubernetes\n}', P + 'this plugin can only be used once per Server Block'],
    [k8s('endpoint_pod_names x'), argErr('x')],
    [k8s('pods'), argErr('pods')],
    [k8s('pods all'), P + 'wrong value for pods: all,  must be one of: disabled, verified, insecure'],
    [k8s('namespaces'), argErr('namespaces')],
    [k8s('namespaces a\nnamespace_labels team=dns'), E4 + 'namespaces and namespace_labels cannot both be set'],
    [k8s('endpoint'), argErr('endpoint')],
    [k8s('tls a b'), argErr('b')],
    [k8s('labels'), argErr('labels')],
    [k8s('labels a=b=c'), P + `unable to parse label selector value: 'a=b=c': couldn't parse the selector string "a=b=c": found '=', expected: ',' or 'end of string'`],
    [k8s('namespace_labels a in (x'), P + `unable to parse namespace_label selector value: 'a in (x': couldn't parse the selector string "a in (x": found '', expected: ')'`],
    [k8s('ttl'), argErr('ttl')],
    [k8s('ttl x'), P + 'strconv.Atoi: parsing "x": invalid syntax'],
    [k8s('ttl 3601'), E3 + 'ttl must be in range [0, 3600]: 3601'],
    [k8s('ttl -1'), E3 + 'ttl must be in range [0, 3600]: -1'],
    [k8s('noendpoints x'), argErr('x')],
    [k8s('ignore everything'), P + "unable to parse ignore value: 'everything'"],
    [k8s('kubeconfig'), argErr('kubeconfig')],
    [k8s('kubeconfig a b c'), argErr('c')],
    [k8s('multicluster other.local'), E3 + 'is not authoritative for the multicluster zone other.local. (authoritative zones: [cluster.local.])'],
    [k8s('zonal x'), argErr('x')],
    [k8s('noendpoints\nzonal'), E4 + 'zonal requires the endpoint cache; remove noendpoints'],
    [k8s('startup_timeout'), argErr('startup_timeout')],
    [k8s('startup_timeout soon'), P + 'failed to parse startup_timeout: soon, time: invalid duration "soon"'],
    [k8s('apiserver_qps'), argErr('apiserver_qps')],
    [k8s('apiserver_qps fast'), E3 + 'invalid apiserver_qps "fast": strconv.ParseFloat: parsing "fast": invalid syntax'],
    [k8s('apiserver_qps -1'), E3 + 'apiserver_qps must be >= 0'],
    [k8s('apiserver_burst 1.5'), E3 + 'invalid apiserver_burst "1.5": strconv.Atoi: parsing "1.5": invalid syntax'],
    [k8s('apiserver_max_inflight -1'), E3 + 'apiserver_max_inflight must be >= 0'],
    [k8s('resyncperiod 30s'), E3 + "unknown property 'resyncperiod'"],
  ]);
});

test('kubernetes parse warns about several endpoints and uses the first', async () => {
  const lines = await captureLog(() => parseTable('kubernetes', parse, [
    [k8s('endpoint http://a:8080 http://b:8080'), { ...DEF, conn: { endpoint: 'http://a:8080' } }],
  ]));
  assert.deepEqual(lines, ["[WARNING] plugin/kubernetes: Multiple endpoints have been deprecated, only the first specified endpoint 'http://a:8080' is used"]);
});

test('kubernetes start-up waits for the API up to startup_timeout, then starts unsynced; shutdown stops the controller', async () => {
  // Nothing listens on port 1: the API never syncs.
  const r = await runSetup(plugin, 'cluster.local {\n kubernetes {\n  endpoint http://127.0.0.1:1\n  startup_timeout 300ms\n }\n}');
  assert.equal(r.factories.length, 1);
  const t0 = Date.now();
  const lines = await captureLog(() => r.start());
  assert.ok(Date.now() - t0 >= 300);
  assert.equal(lines.at(-1), '[WARNING] plugin/kubernetes: starting server with unsynced Kubernetes API');
  assert.deepEqual(await captureLog(async () => { assert.deepEqual(await r.stop(), []); }), []);
});
