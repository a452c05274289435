// The two ends of a stream connection as requests report them: read once per connection (the getters of a TLS
// socket, and of an HTTP/2 session's socket proxy, do work on every read), in plain form (no IPv4-mapped prefix).

import type net from 'node:net';
import { plainAddress } from '../wire/ip.ts';

export interface Endpoints {
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
}

/** For a request whose connection is already gone. */
export const NO_ENDPOINTS: Endpoints = { remoteAddress: '', remotePort: 0, localAddress: '', localPort: 0 };

export function socketEndpoints(sock: net.Socket): Endpoints {
  return {
    remoteAddress: plainAddress(sock.remoteAddress ?? ''), remotePort: sock.remotePort ?? 0,
    localAddress: plainAddress(sock.localAddress ?? ''), localPort: sock.localPort ?? 0,
  };
}
