// The hosts plugin's metrics (CoreDNS plugin/hosts/metrics.go), in the server's registry
// the prometheus plugin serves:
//   coredns_hosts_entries{hostsfile}          (gauge) entries of the file plus inline entries
//   coredns_hosts_reload_timestamp_seconds    (gauge) mtime of the last file (re)loaded
// Written on every (re)load of a hosts file.

import { gauge, metricSet } from '../pkg/metrics.ts';

export const hostsMetrics = metricSet((r) => ({
  hostsEntries: gauge(r, 'coredns_hosts_entries', 'The combined number of entries in hosts and Corefile.', ['hostsfile']),
  hostsReloadTimestamp: gauge(r, 'coredns_hosts_reload_timestamp_seconds', 'The timestamp of the last reload of hosts file.'),
}));
export type HostsMetrics = ReturnType<typeof hostsMetrics>;
