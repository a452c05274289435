// bind: which addresses a server block listens on (a setup-only directive).

import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { formatIPv6Go, parseIP, parseIPv6 } from '../../wire/ip.ts';

export type InterfaceTable = NodeJS.Dict<NetworkInterfaceInfo[]>;

/** Go's net.ParseIP validity (no zone allowed). */
export function isIPLiteral(s: string): boolean {
  return parseIP(s) !== undefined;
}

function isLinkLocalV6(b: Uint8Array): boolean {
  // fe80::/10 unicast, ff02::/16 link-local multicast
  return (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) || (b[0] === 0xff && (b[1] & 0x0f) === 0x02);
}

/** An interface address as CoreDNS lists it: Go's text form, link-local IPv6 with `%iface`. */
function ifaceAddress(iface: string, a: NetworkInterfaceInfo): string {
  if (a.family === 'IPv4') return a.address;
  const b = parseIPv6(a.address.split('%')[0]);
  if (b === undefined) return a.address;
  const text = formatIPv6Go(b, 0);
  return isLinkLocalV6(b) && !text.includes('.') ? text + '%' + iface : text;
}

/**
 * Expands arguments that are interface names into the interface's addresses; keeps IP
 * literals as written. Throws `not a valid IP address or interface name: "X"` otherwise.
 */
export function listIP(args: readonly string[], ifaces: InterfaceTable): string[] {
  const all: string[] = [];
  for (const a of args) {
    const addrs = Object.hasOwn(ifaces, a) ? ifaces[a] : undefined;
    if (addrs !== undefined) {
      for (const info of addrs) all.push(ifaceAddress(a, info));
      continue;
    }
    if (!isIPLiteral(a)) throw new Error(`not a valid IP address or interface name: ${JSON.stringify(a)}`);
    all.push(a);
  }
  return all;
}

export function hostInterfaces(): InterfaceTable {
  return networkInterfaces();
}
