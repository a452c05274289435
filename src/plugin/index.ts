// The plugins built into nodens. The registry places each by its CoreDNS
// directive name (plugin.cfg order), so the order of this list does not matter.

import type { PluginDefinition } from './plugin.ts';
import { plugin as acl } from './acl/setup.ts';
import { plugin as anyPlugin } from './any/setup.ts';
import { plugin as auto } from './auto/setup.ts';
import { plugin as autopath } from './autopath/setup.ts';
import { plugin as bind } from './bind/setup.ts';
import { plugin as cache } from './cache/setup.ts';
import { plugin as chaos } from './chaos/setup.ts';
import { plugin as debug } from './debug/setup.ts';
import { plugin as dnstap } from './dnstap/setup.ts';
import { plugin as erratic } from './erratic/setup.ts';
import { plugin as geoip } from './geoip/setup.ts';
import { plugin as dns64 } from './dns64/setup.ts';
import { plugin as dnssec } from './dnssec/setup.ts';
import { plugin as errors } from './errors/setup.ts';
import { plugin as file } from './file/setup.ts';
import { plugin as forward } from './forward/setup.ts';
import { plugin as health } from './health/setup.ts';
import { plugin as hosts } from './hosts/setup.ts';
import { plugin as loadbalance } from './loadbalance/setup.ts';
import { plugin as kubernetes } from './kubernetes/setup.ts';
import { plugin as k8sExternal } from './k8s_external/setup.ts';
import { plugin as log } from './log/setup.ts';
import { plugin as loop } from './loop/setup.ts';
import { plugin as metadata } from './metadata/setup.ts';
import { plugin as minimal } from './minimal/setup.ts';
import { plugin as prometheus } from './prometheus/setup.ts';
import { plugin as ready } from './ready/setup.ts';
import { plugin as reload } from './reload/setup.ts';
import { plugin as root } from './root/setup.ts';
import { plugin as secondary } from './secondary/setup.ts';
import { plugin as rewrite } from './rewrite/setup.ts';
import { plugin as siit } from './siit/setup.ts';
import { plugin as shed } from './shed/setup.ts';
import { plugin as view } from './view/setup.ts';
import { plugin as template } from './template/setup.ts';
import { plugin as whoami } from './whoami/setup.ts';
import { plugin as bufsize } from './bufsize/setup.ts';
import { plugin as cancel } from './cancel/setup.ts';
import { plugin as header } from './header/setup.ts';
import { plugin as local } from './local/setup.ts';
import { plugin as nsid } from './nsid/setup.ts';
import { plugin as timeouts } from './timeouts/setup.ts';
import { plugin as tsig } from './tsig/setup.ts';
import { plugin as https } from './https/setup.ts';
import { plugin as tls } from './tls/setup.ts';
import { plugin as transfer } from './transfer/setup.ts';
import { plugin as trace } from './trace/setup.ts';

export const builtinPlugins: PluginDefinition[] = [
  acl,
  anyPlugin,
  auto,
  autopath,
  bind,
  cache,
  chaos,
  debug,
  dnstap,
  erratic,
  geoip,
  dns64,
  dnssec,
  errors,
  file,
  forward,
  health,
  hosts,
  loadbalance,
  kubernetes,
  k8sExternal,
  log,
  loop,
  metadata,
  minimal,
  prometheus,
  ready,
  reload,
  rewrite,
  root,
  secondary,
  siit,
  shed,
  view,
  template,
  whoami,
  bufsize,
  cancel,
  header,
  local,
  nsid,
  timeouts,
  tsig,
  https,
  tls,
  transfer,
  trace,
];
