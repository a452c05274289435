// Hex dumps of DNS messages for [DEBUG] logging, in the text2pcap-friendly layout
// CoreDNS uses (6 hex digit offset, 16 bytes a line, the total length last, every
// line prefixed `debug: `).

const PREFIX = 'debug: ';

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

/** The dump of `data` (no trailing newline). */
export function hexdump(data: Uint8Array): string {
  let out = '';
  for (let i = 0; i < data.length; i++) {
    if (i % 16 === 0) out += (i === 0 ? '' : '\n') + PREFIX + hex(i, 6);
    out += ' ' + hex(data[i], 2);
  }
  return out + '\n' + PREFIX + hex(data.length, 6);
}
