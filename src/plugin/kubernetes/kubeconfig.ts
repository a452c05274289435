// A kubeconfig without @kubernetes/client-node's index: importing that module costs ~1 s of CPU and ~75 MB of
// RSS (its generated API client, thousands of model classes, stays resident), while the plugin uses only the
// kubeconfig loading and the credentials applied to each request. This class is client-node's KubeConfig for
// that part, built from client-node's own small modules (config_types.js parses and validates the clusters,
// users and contexts; file_auth.js is the token-file provider of the in-cluster configuration), so a loaded
// config and the TLS options and headers of a request are the same as with client-node's KubeConfig.
//
// The authenticators that need the rest of client-node (exec plugins, the azure, gcp and oidc auth providers)
// are not here: needsFullClient() says when the current user has one, and client.ts then loads client-node's
// KubeConfig instead.

import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import path from 'node:path';
import type https from 'node:https';
import yaml from 'js-yaml';
import { newClusters, newContexts, newUsers, type Cluster, type Context, type User } from '@kubernetes/client-node/dist/config_types.js';
import { FileAuth } from '@kubernetes/client-node/dist/file_auth.js';

const SA_ROOT = '/var/run/secrets/kubernetes.io/serviceaccount';

/** What the plugin uses of a KubeConfig (client-node's class and LiteKubeConfig both have it). */
export interface KubeAuth {
  getCurrentCluster(): Cluster | null;
  getCurrentUser(): User | null;
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** client-node's findObject: the named entry's inner object, named. */
function findObject<T extends { name: string }>(list: T[], name: string, key: string): T | null {
  for (const obj of list) {
    if (obj.name === name) {
      const inner = (obj as unknown as Record<string, unknown>)[key] as (T & { name: string }) | undefined;
      if (inner) {
        inner.name = name;
        return inner;
      }
      return obj;
    }
  }
  return null;
}

function fileOrData(file: string | undefined, data: string | undefined): Buffer | null {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, 'base64');
  return null;
}

function absolute(root: string, file: string): string {
  return !root || path.isAbsolute(file) ? file : path.join(root, file);
}

export class LiteKubeConfig implements KubeAuth {
  clusters: Cluster[] = [];
  users: User[] = [];
  contexts: Context[] = [];
  currentContext = '';
  private readonly fileAuth = new FileAuth();

  loadFromFile(file: string): void {
    const root = path.dirname(file);
    const obj = yaml.load(readFileSync(file).toString('utf-8')) as Record<string, unknown>;
    this.clusters = newClusters(obj.clusters);
    this.contexts = newContexts(obj.contexts);
    this.users = newUsers(obj.users);
    this.currentContext = obj['current-context'] as string;
    for (const c of this.clusters) if (c.caFile) (c as { caFile: string }).caFile = absolute(root, c.caFile);
    for (const u of this.users) {
      if (u.certFile) (u as { certFile: string }).certFile = absolute(root, u.certFile);
      if (u.keyFile) (u as { keyFile: string }).keyFile = absolute(root, u.keyFile);
    }
  }

  loadFromOptions(o: { clusters: Cluster[]; users: User[]; contexts: Context[]; currentContext: string }): void {
    this.clusters = o.clusters;
    this.users = o.users;
    this.contexts = o.contexts;
    this.currentContext = o.currentContext;
  }

  /** client-node's loadFromCluster: the service account's token file and CA. */
  loadFromCluster(): void {
    const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
    const port = process.env.KUBERNETES_SERVICE_PORT ?? '';
    const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
    const serverHost = host && isIPv6(host) ? `[${host}]` : host;
    this.clusters = [{ name: 'inCluster', caFile: `${SA_ROOT}/ca.crt`, server: `${scheme}://${serverHost}:${port}`, skipTLSVerify: false }];
    this.users = [{ name: 'inClusterUser', authProvider: { name: 'tokenFile', config: { tokenFile: `${SA_ROOT}/token` } } }];
    this.contexts = [{ cluster: 'inCluster', name: 'inClusterContext', user: 'inClusterUser' }];
    this.currentContext = 'inClusterContext';
  }

  setCurrentContext(name: string): void {
    this.currentContext = name;
  }

  getContextObject(name: string): Context | null {
    return findObject(this.contexts, name, 'context');
  }

  getCurrentCluster(): Cluster | null {
    const ctx = this.getContextObject(this.currentContext);
    return ctx === null ? null : findObject(this.clusters, ctx.cluster, 'cluster');
  }

  getCurrentUser(): User | null {
    const ctx = this.getContextObject(this.currentContext);
    return ctx === null ? null : findObject(this.users, ctx.user, 'user');
  }

  /**
   * The current user authenticates with something only client-node's full KubeConfig has, or the cluster is
   * reached through a proxy (client-node's proxy agents).
   */
  needsFullClient(): boolean {
    if (this.getCurrentCluster()?.proxyUrl) return true;
    const u = this.getCurrentUser() as (User & { exec?: unknown; authProvider?: { name?: string; config?: { exec?: unknown } } }) | null;
    if (u === null) return false;
    if (u.exec) return true;
    const ap = u.authProvider;
    if (!ap) return false;
    return ap.name === 'azure' || ap.name === 'gcp' || ap.name === 'exec' || ap.name === 'oidc' || !!ap.config?.exec;
  }

  /** client-node's applyToHTTPSOptions for the users this class takes. */
  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser();
    if (user === null) return;
    if (cluster !== null && cluster.skipTLSVerify) opts.rejectUnauthorized = false;
    if (cluster !== null && cluster.tlsServerName) opts.servername = cluster.tlsServerName;
    const ca = cluster !== null ? fileOrData(cluster.caFile, cluster.caData) : null;
    if (ca) opts.ca = ca;
    const cert = fileOrData(user.certFile, user.certData);
    if (cert) opts.cert = cert;
    const key = fileOrData(user.keyFile, user.keyData);
    if (key) opts.key = key;
    opts.headers ??= {};
    const headers = opts.headers as Record<string, string>;
    if (user.impersonateUser != null) headers['Impersonate-User'] = user.impersonateUser;
    if (this.fileAuth.isAuthProvider(user)) await this.fileAuth.applyAuthentication(user, opts);
    if (user.token) headers.Authorization = `Bearer ${user.token}`;
    if (user.username) opts.auth = `${user.username}:${user.password}`;
  }
}
