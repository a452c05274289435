// The data a template sees (CoreDNS's templateData) as Go values for the
// text/template engine of pkg/gotemplate.ts: `.Zone`, `.Name`, `.Regex`,
// `.Match`, `.Group`, `.Class`, `.Type`, `.Message`, `.Question`, `.Remote`,
// `.Var` and the `.Meta` method, with the Go type names text/template prints
// in its errors.

import type { Request } from '../../core/request.ts';
import type { Edns, Message, Question, ResourceRecord } from '../../wire/types.ts';
import { formatMessage, formatOpt, formatQuestion, formatRecord } from '../../wire/text.ts';
import { GoMap, GoNum, GoSlice, GoStruct, NO_FIELD, UNEXPORTED, type GoFunc } from '../pkg/gotemplate.ts';

const EMPTY_VAR = new GoMap('map[string]interface {}', undefined, null);

/** A Go struct that shows one value of ours (a question, a record, the message). */
abstract class View<T> extends GoStruct {
  readonly v: T;
  constructor(v: T) {
    super();
    this.v = v;
  }
}

/** A dns.Question (`*dns.Question` when `ptr`): printed with miekg's String() through a pointer. */
class QuestionValue extends View<Question> {
  readonly goType: string;
  constructor(q: Question, ptr: boolean) {
    super(q);
    this.goType = ptr ? '*dns.Question' : 'dns.Question';
  }

  field(name: string): unknown {
    switch (name) {
      case 'Name': return this.v.name;
      case 'Qtype': return new GoNum('uint16', this.v.type);
      case 'Qclass': return new GoNum('uint16', this.v.class);
    }
    return NO_FIELD;
  }

  override goString(): string | undefined {
    return this.goType.startsWith('*') ? formatQuestion(this.v) : undefined;
  }

  override addrString(): string { return formatQuestion(this.v); }

  override fieldValues(): unknown[] { return [this.v.name, this.v.type, this.v.class]; }
  override fieldNames(): readonly string[] { return ['Name', 'Qtype', 'Qclass']; }
}

class HeaderValue extends View<ResourceRecord> {
  readonly goType = 'dns.RR_Header';

  field(name: string): unknown {
    switch (name) {
      case 'Name': return this.v.name;
      case 'Rrtype': return new GoNum('uint16', this.v.type);
      case 'Class': return new GoNum('uint16', this.v.class);
      case 'Ttl': return new GoNum('uint32', this.v.ttl);
    }
    return NO_FIELD;
  }

  override fieldValues(): unknown[] { return [this.v.name, this.v.type, this.v.class, this.v.ttl, 0]; }
  override fieldNames(): readonly string[] { return ['Name', 'Rrtype', 'Class', 'Ttl', 'Rdlength']; }
}

/** A record of the message (a dns.RR): its header and miekg's String(). */
class RRValue extends View<ResourceRecord> {
  readonly goType = 'dns.RR';

  field(name: string): unknown { return name === 'Hdr' ? new HeaderValue(this.v) : NO_FIELD; }
  override goString(): string { return formatRecord(this.v); }
}

/** The query's OPT record, which miekg keeps in the additional section (Extra). */
class OptValue extends View<Edns> {
  readonly goType = 'dns.RR';

  field(name: string): unknown {
    if (name !== 'Hdr') return NO_FIELD;
    const e = this.v;
    const ttl = ((e.version & 0xff) << 16) | (e.do ? 0x8000 : 0) | (e.z & 0x7fff);
    return new HeaderValue({ name: e.name ?? '.', type: 41, class: e.udpSize, ttl, data: { raw: new Uint8Array(0) } });
  }

  override goString(): string { return formatOpt(this.v); }
}

function rrSlice(rrs: readonly ResourceRecord[], edns?: Edns): GoSlice {
  const items: GoStruct[] = rrs.map((r) => new RRValue(r));
  if (edns !== undefined) items.push(new OptValue(edns));
  return new GoSlice('[]dns.RR', items);
}

/** The incoming message (`*dns.Msg`), its header fields promoted as in miekg's struct. */
class MessageValue extends View<Message> {
  readonly goType = '*dns.Msg';

  field(name: string): unknown {
    const m = this.v;
    switch (name) {
      case 'Id': return new GoNum('uint16', m.id);
      case 'Response': return m.qr;
      case 'Opcode': return m.opcode;
      case 'Authoritative': return m.aa;
      case 'Truncated': return m.tc;
      case 'RecursionDesired': return m.rd;
      case 'RecursionAvailable': return m.ra;
      case 'Zero': return m.z;
      case 'AuthenticatedData': return m.ad;
      case 'CheckingDisabled': return m.cd;
      case 'Rcode': return m.rcode;
      case 'Compress': return false;
      case 'Question': return new GoSlice('[]dns.Question', m.question.map((q) => new QuestionValue(q, false)));
      case 'Answer': return rrSlice(m.answer);
      case 'Ns': return rrSlice(m.authority);
      case 'Extra': return rrSlice(m.additional, m.edns);
    }
    return NO_FIELD;
  }

  override goString(): string { return formatMessage(this.v); }
}

/** What `.Match`/`.Group` and the question give a template for one query. */
export class TemplateData extends GoStruct {
  readonly goType = '*template.templateData';
  readonly req: Request;
  readonly zone: string;
  readonly regex: string;
  readonly match: GoSlice;
  readonly group: GoMap;
  readonly cls: string;
  readonly type: string;
  /** `.Var`: the `var` values, a nil map when the template has no `var` or `expr`. */
  readonly vars: GoMap;
  private meta: GoFunc | undefined;

  constructor(req: Request, zone: string, regex: string, match: GoSlice, group: GoMap, cls: string, type: string, vars: GoMap = EMPTY_VAR) {
    super();
    this.req = req;
    this.zone = zone;
    this.regex = regex;
    this.match = match;
    this.group = group;
    this.cls = cls;
    this.type = type;
    this.vars = vars;
  }

  field(name: string): unknown {
    switch (name) {
      case 'Zone': return this.zone;
      case 'Name': return this.req.name;
      case 'Regex': return this.regex;
      case 'Match': return this.match;
      case 'Group': return this.group;
      case 'Class': return this.cls;
      case 'Type': return this.type;
      case 'Message': return new MessageValue(this.req.msg);
      case 'Question': return new QuestionValue(this.req.msg.question[0]!, true);
      case 'Remote': return this.req.remoteAddress;
      case 'Var': return this.vars;
      case 'md': return UNEXPORTED;
    }
    return NO_FIELD;
  }

  override method(name: string): GoFunc | undefined {
    if (name !== 'Meta') return undefined;
    const req = this.req;
    return this.meta ??= { params: ['string'], fn: (label: unknown) => req.metadata(label as string) ?? '' };
  }

  override fieldNames(): readonly string[] {
    return ['Zone', 'Name', 'Regex', 'Match', 'Group', 'Class', 'Type', 'Message', 'Question', 'Remote', 'Var'];
  }

  override fieldValues(): unknown[] {
    return [this.zone, this.req.name, this.regex, this.match, this.group, this.cls, this.type,
      new MessageValue(this.req.msg), new QuestionValue(this.req.msg.question[0]!, true), this.req.remoteAddress, this.vars];
  }
}
