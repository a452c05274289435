// An external nodens plugin written in TypeScript: `hello [TEXT]` answers TXT
// queries with TEXT (default "hello") and passes everything else on.
//
//   . {
//       hello "hi there"
//       whoami
//   }

import type { PluginDefinition, Handler, Request, ResponseWriter, SetupContext } from '../../src/index.ts';
import { PluginError } from '../../src/index.ts';
import { wire } from '../../src/index.ts';

class Hello implements Handler {
  readonly name = 'hello';
  private readonly text: Uint8Array;
  private readonly next: Handler | undefined;

  constructor(text: string, next: Handler | undefined) {
    this.text = new TextEncoder().encode(text);
    this.next = next;
  }

  serveDNS(req: Request, w: ResponseWriter): number | Promise<number> {
    if (req.qtype !== wire.RRType.TXT) {
      if (this.next === undefined) throw new PluginError(wire.Rcode.SERVFAIL, 'plugin/hello: no next plugin found');
      return this.next.serveDNS(req, w);
    }
    const reply = wire.replyTo(req.msg);
    reply.aa = true;
    reply.answer.push({ name: req.qname, type: wire.RRType.TXT, class: wire.RRClass.IN, ttl: 0, data: { strings: [this.text] } });
    w.writeMsg(reply);
    return wire.Rcode.NOERROR;
  }
}

/** What `hello [TEXT]` configures. */
export interface HelloOptions {
  /** The text of the TXT answer (default "hello"). */
  text: string;
}

/** Reads every `hello` line of the block (the last TEXT wins); registers nothing. */
export function parse(c: SetupContext): HelloOptions {
  const d = c.dispenser;
  let text = 'hello';
  while (d.next()) {
    const args = d.remainingArgs();
    if (args.length > 1) throw d.argErr();
    if (args.length === 1) text = args[0]!;
  }
  return { text };
}

export const hello: PluginDefinition = {
  name: 'hello',
  setup(c) {
    const { text } = parse(c);
    c.addPlugin((next) => new Hello(text, next));
  },
};
