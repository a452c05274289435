// The hosts plugin's metrics (CoreDNS plugin/hosts/metrics.go), registered with
// the shared registry the prometheus plugin serves:
//   coredns_hosts_entries{hostsfile}          (gauge) entries of the file plus inline entries
//   coredns_hosts_reload_timestamp_seconds    (gauge) mtime of the last file (re)loaded
// Written on every (re)load of a hosts file.

import { gauge } from '../pkg/metrics.ts';

export const hostsEntries = gauge('coredns_hosts_entries', 'The combined number of entries in hosts and Corefile.', ['hostsfile']);
export const hostsReloadTimestamp = gauge('coredns_hosts_reload_timestamp_seconds', 'The timestamp of the last reload of hosts file.');
