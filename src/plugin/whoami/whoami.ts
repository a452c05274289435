// whoami: answers every query with the client's address, port and transport.

import type { Handler, HandlerResult, ResponseWriter } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import type { ResourceRecord } from '../../wire/types.ts';
import { replyTo } from '../../wire/message.ts';
import { plainAddress } from '../../wire/ip.ts';
import { RRType } from '../../wire/constants.ts';

export class Whoami implements Handler {
  readonly name = 'whoami';

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const reply = replyTo(req.msg);
    reply.aa = true;
    const qname = req.qname;
    const qclass = req.qclass;
    // An IPv4 client as seen through a dual-stack socket (`::ffff:a.b.c.d`) counts as IPv4, as in Go.
    const ip = plainAddress(req.remoteAddress);
    const v4 = !ip.includes(':');
    const addr: ResourceRecord = v4
      ? { name: qname, type: RRType.A, class: qclass, ttl: 0, data: { address: ip } }
      : { name: qname, type: RRType.AAAA, class: qclass, ttl: 0, data: { address: ip } };
    const srvName = qname === '.' ? '_' + req.proto + '.' : '_' + req.proto + '.' + qname;
    const srv: ResourceRecord = {
      name: srvName, type: RRType.SRV, class: qclass, ttl: 0,
      data: { priority: 0, weight: 0, port: req.remotePort, target: '.' },
    };
    reply.additional = [addr, srv];
    w.writeMsg(reply);
    return 0;
  }
}
