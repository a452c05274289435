// Zipkin spans as CoreDNS 1.15.0 makes them: zipkin-go's tracer behind the opentracing wrapper
// (zipkin-go-opentracing), 64-bit ids (zipkin-go's default generator: a root span's id is its trace id),
// and the JSON v2 form zipkin-go's reporter posts (model.SpanModel.MarshalJSON).
//
// A span is turned into its JSON text once, when it finishes, and handed to the sink (the HTTP reporter):
// nothing is kept of it afterwards.

import { randomFillSync } from 'node:crypto';
import type { QuerySpan } from '../../core/request.ts';

/** Where finished spans go: one JSON v2 span object per call. */
export interface SpanSink {
  send(spanJson: string): void;
}

/** zipkin-go's model.Endpoint: what the spans say about this server. */
export interface ZipkinEndpoint {
  /** Lower-cased in the JSON, as zipkin-go writes it. */
  serviceName: string;
  /** IPv4 address text (Go's net.IP String). */
  ipv4?: string;
  /** IPv6 address text (Go's net.IP String). */
  ipv6?: string;
  /** 0: not written. */
  port?: number;
}

/** Zipkin's span kinds (zipkin-go model.Kind); '' is undetermined and not written. */
export type SpanKind = '' | 'CLIENT' | 'SERVER' | 'PRODUCER' | 'CONSUMER';

const idBytes = new Uint8Array(8);

/** A 63-bit random id as 16 hex digits (zipkin-go draws ids with math/rand's Int63). */
function newId(): string {
  randomFillSync(idBytes);
  idBytes[0]! &= 0x7f;
  let s = '';
  for (let i = 0; i < 8; i++) s += (idBytes[i]! < 16 ? '0' : '') + idBytes[i]!.toString(16);
  return s;
}

/** Microseconds since the epoch, now (zipkin-go rounds its timestamps to the microsecond). */
function nowMicros(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** JSON of an endpoint in zipkin-go's field order, undefined when it is empty (zipkin-go leaves it out). */
export function endpointJson(e: ZipkinEndpoint | undefined): string | undefined {
  if (e === undefined) return undefined;
  const parts: string[] = [];
  if (e.serviceName !== '') parts.push('"serviceName":' + JSON.stringify(e.serviceName.toLowerCase()));
  if (e.ipv4 !== undefined) parts.push('"ipv4":' + JSON.stringify(e.ipv4));
  if (e.ipv6 !== undefined) parts.push('"ipv6":' + JSON.stringify(e.ipv6));
  if (e.port !== undefined && e.port !== 0) parts.push('"port":' + String(e.port));
  return parts.length === 0 ? undefined : '{' + parts.join(',') + '}';
}

/** zipkin-go's Tracer with the local endpoint CoreDNS gives it. */
export class ZipkinTracer {
  readonly sink: SpanSink;
  /** The local endpoint's JSON, computed once (undefined: none). */
  readonly localEndpoint: string | undefined;
  constructor(sink: SpanSink, localEndpoint: ZipkinEndpoint | undefined) {
    this.sink = sink;
    this.localEndpoint = endpointJson(localEndpoint);
  }

  /**
   * A span of a new trace (opentracing's StartSpan without a parent): the trace id is new and, as zipkin-go's
   * 64-bit generator does, the span's id is the trace id.
   */
  startRoot(name: string, kind: SpanKind): ZipkinSpan {
    const traceId = newId();
    return new ZipkinSpan(this, name, kind, traceId, traceId, undefined);
  }
}

/** One span (zipkin-go's spanImpl with its SpanModel), reported when it finishes. */
export class ZipkinSpan implements QuerySpan {
  readonly tracer: ZipkinTracer;
  readonly name: string;
  readonly kind: SpanKind;
  readonly traceId: string;
  readonly id: string;
  readonly parentId: string | undefined;
  /** Start, microseconds since the epoch. */
  readonly timestamp: number;
  private readonly startMs: number;
  private tags: Map<string, string> | undefined;
  private annotations: { timestamp: number; value: string }[] | undefined;
  private finished = false;

  constructor(tracer: ZipkinTracer, name: string, kind: SpanKind, traceId: string, id: string, parentId: string | undefined) {
    this.tracer = tracer;
    this.name = name;
    this.kind = kind;
    this.traceId = traceId;
    this.id = id;
    this.parentId = parentId;
    this.startMs = performance.now();
    this.timestamp = Math.round((performance.timeOrigin + this.startMs) * 1000);
  }

  /** opentracing's StartSpan(name, ChildOf(this)): same trace, a new id, this span as the parent. */
  startChild(name: string): ZipkinSpan {
    return new ZipkinSpan(this.tracer, name, '', this.traceId, newId(), this.id);
  }

  /** zipkin-go's Tag: a later value replaces an earlier one, except for `error`, whose first value stays. */
  tag(key: string, value: string): void {
    const t = this.tags ??= new Map();
    if (key === 'error' && t.has(key)) return;
    t.set(key, value);
  }

  /** zipkin-go's Annotate for each value, all timestamped now (opentracing's LogFields does one call). */
  annotate(...values: string[]): void {
    const t = nowMicros();
    const an = this.annotations ??= [];
    for (const value of values) an.push({ timestamp: t, value });
  }

  /** Ends the span and hands its JSON to the sink; later calls do nothing (zipkin-go reports a span once). */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.tracer.sink.send(this.toJson((performance.now() - this.startMs) * 1000));
  }

  /**
   * The span as zipkin-go's SpanModel.MarshalJSON writes it: timestamp and duration (µs; a duration under a
   * microsecond counts as one, none is left out), ids, name lower-cased, kind, local endpoint,
   * annotations, tags sorted by key.
   */
  toJson(durationMicros: number): string {
    let d = Math.round(durationMicros);
    if (d === 0 && durationMicros > 0) d = 1;
    let s = '{"timestamp":' + String(this.timestamp);
    if (d > 0) s += ',"duration":' + String(d);
    s += ',"traceId":"' + this.traceId + '","id":"' + this.id + '"';
    if (this.parentId !== undefined) s += ',"parentId":"' + this.parentId + '"';
    if (this.name !== '') s += ',"name":' + JSON.stringify(this.name.toLowerCase());
    if (this.kind !== '') s += ',"kind":"' + this.kind + '"';
    const le = this.tracer.localEndpoint;
    if (le !== undefined) s += ',"localEndpoint":' + le;
    const an = this.annotations;
    if (an !== undefined && an.length > 0) {
      s += ',"annotations":[';
      for (let i = 0; i < an.length; i++) {
        s += (i > 0 ? ',' : '') + '{"timestamp":' + String(an[i]!.timestamp) + ',"value":' + JSON.stringify(an[i]!.value) + '}';
      }
      s += ']';
    }
    const tags = this.tags;
    if (tags !== undefined && tags.size > 0) {
      const keys = [...tags.keys()].sort(byteOrder);
      s += ',"tags":{';
      for (let i = 0; i < keys.length; i++) {
        s += (i > 0 ? ',' : '') + JSON.stringify(keys[i]) + ':' + JSON.stringify(tags.get(keys[i]!));
      }
      s += '}';
    }
    return s + '}';
  }
}

/** Go's json sorts map keys by their bytes. */
function byteOrder(a: string, b: string): number {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return Buffer.compare(x, y);
}
