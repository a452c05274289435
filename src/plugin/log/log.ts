// log: one line per query on stdout, in a configurable format.

import type { BlockConfig, Handler, HandlerResult, ResponseWriter, ServerLogger } from '../plugin.ts';
import { PluginError, isClientErrorRcode } from '../plugin.ts';
import type { Request } from '../../core/request.ts';
import { replyTo } from '../../wire/message.ts';
import { isSubdomain } from '../../wire/name.ts';
import { classToString, rcodeToString, typeToString } from '../../wire/constants.ts';
import { nextOrFailure } from '../pkg/next.ts';
import { Recorder } from '../pkg/recorder.ts';
import { messageLength } from '../../wire/msglen.ts';
import type { CompiledFormat } from '../pkg/replacer.ts';
import { ResponseClass, classify, responseClassToString, responseTypeToString, typify } from '../pkg/response.ts';

export interface Rule {
  /** Name scope as configured (made fully qualified, not lower-cased). */
  readonly nameScope: string;
  readonly format: CompiledFormat;
  /** Classes to log; `all` included means everything. */
  readonly classes: ReadonlySet<number>;
}

/** Per-rule facts precomputed for the per-query path. */
interface CompiledRule {
  readonly scope: string;
  /** The scope is `.` (matches every name). */
  readonly root: boolean;
  readonly format: CompiledFormat;
  readonly all: boolean;
  readonly classes: ReadonlySet<number>;
}

/** The part of the query's state the finishing step needs. */
interface Pending {
  rule: CompiledRule;
  rec: Recorder;
}

export class Logger implements Handler {
  readonly name = 'log';
  readonly next: Handler | undefined;
  private readonly rules: CompiledRule[];
  private readonly config: BlockConfig | undefined;
  private metadataOn: boolean | undefined;
  /** The server's logger: query lines carry `[INFO] ` and no plugin prefix. */
  private readonly out: ServerLogger;

  constructor(next: Handler | undefined, rules: readonly Rule[], out: ServerLogger, config?: BlockConfig) {
    this.next = next;
    this.out = out;
    this.config = config;
    this.rules = rules.map((r) => ({
      scope: r.nameScope,
      root: r.nameScope === '.',
      format: r.format,
      all: r.classes.has(ResponseClass.All),
      classes: r.classes,
    }));
  }

  serveDNS(req: Request, w: ResponseWriter): HandlerResult {
    const rule = this.match(req.name);
    if (rule === undefined) return nextOrFailure(this.name, this.next, req, w);
    const rec = new Recorder(w);
    let r: HandlerResult;
    try {
      r = nextOrFailure(this.name, this.next, req, rec);
    } catch (e) {
      this.failed(req, { rule, rec }, e);
      throw e;
    }
    if (typeof r === 'number') {
      this.finish(req, rule, rec, r);
      return r;
    }
    const p: Pending = { rule, rec };
    return r.then(
      (rc) => {
        req.plugin = this.name;
        this.finish(req, p.rule, p.rec, rc);
        return rc;
      },
      (e: unknown) => {
        req.plugin = this.name;
        this.failed(req, p, e);
        throw e;
      },
    );
  }

  /** First rule whose name scope contains `name`. */
  private match(name: string): CompiledRule | undefined {
    const rules = this.rules;
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i];
      if (r.root || r.scope === name || isSubdomain(name, r.scope)) return r;
    }
    return undefined;
  }

  /** The chain reported an error (CoreDNS: a non-nil err with its rcode): still logged. A panic is not. */
  private failed(req: Request, p: Pending, e: unknown): void {
    if (e instanceof PluginError) this.finish(req, p.rule, p.rec, e.rcode);
  }

  private finish(req: Request, rule: CompiledRule, rec: Recorder, rc: number): void {
    if (rec.msg === undefined && isClientErrorRcode(rc)) {
      // Nothing written yet: the server will answer with rc; log that reply.
      const m = replyTo(req.msg);
      m.rcode = rc;
      rec.msg = m;
      rec.rcode = rc;
      rec.len = messageLength(m);
    }
    let ok = rule.all;
    const useMeta = rule.format.usesMetadata && this.metadataEnabled();
    if (!ok || useMeta) {
      const tpe = typify(rec.msg);
      const cls = classify(tpe);
      if (useMeta) {
        req.setMetadata('log/type', responseTypeToString(tpe));
        req.setMetadata('log/class', responseClassToString(cls));
      }
      if (!ok) ok = rule.classes.has(cls);
    }
    if (!ok) return;
    const line = rule.format.format(req, rec);
    if (this.out.json === true && this.out.infoAttrs !== undefined) this.out.infoAttrs(line, jsonFields(req, rec));
    else this.out.info(line);
  }

  /** `log/type` and `log/class` exist only where the metadata plugin runs, as in CoreDNS. */
  private metadataEnabled(): boolean {
    if (this.metadataOn === undefined) {
      if (this.config === undefined) return true;
      this.metadataOn = this.config.pluginNames.includes('metadata');
    }
    return this.metadataOn;
  }
}

/** The typed fields of CoreDNS's log plugin's JSON record (plugin/log/json.go), in its order. */
function jsonFields(req: Request, rec: Recorder): Record<string, string | number | boolean | null> {
  let rcode: string | null = null;
  if (rec.msg !== undefined) {
    const s = rcodeToString(rec.rcode);
    rcode = s.startsWith('RCODE') ? String(rec.rcode) : s;
  }
  return {
    plugin: 'log',
    client_ip: req.remoteAddress,
    client_port: req.remotePort,
    qname: req.name,
    qtype: typeToString(req.qtype),
    qclass: classToString(req.qclass),
    protocol: req.proto,
    id: req.msg.id,
    opcode: req.msg.opcode,
    request_size: req.length,
    dnssec_ok: req.do,
    bufsize: req.size,
    rcode,
    response_size: rec.len,
    duration_seconds: Number(process.hrtime.bigint() - req.start) / 1e9,
  };
}
