// CoreDNS's plugin/pkg/upstream for the kubernetes plugin: an ExternalName
// target outside the plugin's zones is resolved by sending a fresh query
// through the server itself (zone routing → that block's whole chain), and the
// reply is captured instead of written to the client.

import type { BlockConfig, InstanceServices, ResponseWriter } from '../plugin.ts';
import { Request } from '../../core/request.ts';
import type { Message } from '../../wire/types.ts';
import { newQuery } from '../../wire/message.ts';
import { decodeMessage } from '../../wire/decode.ts';
import { encodeMessage } from '../../wire/encode.ts';
import { asciiLower } from '../../wire/name.ts';
import { Rcode } from '../../wire/constants.ts';
import { zonesMatches } from '../pkg/zones.ts';

class Capture implements ResponseWriter {
  msg: Message | undefined;
  writeMsg(reply: Message): void { this.msg ??= reply; }
  writeWire(reply: Uint8Array): void { this.msg ??= decodeMessage(reply); }
}

/** Returns the lookup function bound to the instance and the block's port. */
export function upstreamLookup(instance: InstanceServices, own: BlockConfig) {
  return async (req: Request, name: string, qtype: number): Promise<Message | undefined> => {
    const lower = asciiLower(name);
    let best: BlockConfig | undefined;
    let bestZone = '';
    for (const b of instance.blockConfigs()) {
      if (b.port !== own.port || b.transport !== own.transport || b.handlers.length === 0) continue;
      const z = zonesMatches(b.zones, lower);
      if (z !== '' && (best === undefined || z.length > bestZone.length)) {
        best = b;
        bestZone = z;
      }
    }
    const q = newQuery(name, qtype);
    // No block for the name: the server itself answers REFUSED (an empty answer section).
    if (best === undefined) return { ...q, qr: true, rcode: Rcode.REFUSED };
    const wire = encodeMessage(q);
    const r2 = new Request(q, wire, req.proto, req.remoteAddress, req.remotePort, req.localAddress, req.localPort, req.server, process.hrtime.bigint());
    r2.zone = bestZone;
    const w = new Capture();
    const rc = await best.handlers[0].serveDNS(r2, w);
    // An error rcode returned unwritten becomes the server's own empty reply.
    return w.msg ?? { ...q, qr: true, rcode: typeof rc === 'number' ? rc : Rcode.SERVFAIL };
  };
}
