// Values the prometheus plugin can expose for hosts:
//   coredns_hosts_entries{hostsfile}          (gauge) entries of the file plus inline entries
//   coredns_hosts_reload_timestamp_seconds    (gauge) mtime of the last file (re)loaded
// Written on every (re)load of a hosts file.

/** hostsfile path → combined number of entries. */
export const hostsEntries = new Map<string, number>();

export const hostsReload = { timestampSeconds: 0 };
