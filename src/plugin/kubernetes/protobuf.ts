// The API server's protobuf encoding (application/vnd.kubernetes.protobuf), decoded for the few fields the
// controller reads, as CoreDNS's client-go asks for it. Why: a JSON sync of 10k services and 10k EndpointSlices
// is ~30 MB of text that JSON.parse turns whole into objects (managedFields included, ~40% of a service's
// JSON) before toService/toSlice keep a tenth of it; the protobuf stream is a third smaller and a decoder that
// knows the schema jumps over every field it does not need (one varint and a length) and builds only the
// objects that are kept. No library: protobufjs & co. decode a whole message from a .proto schema (all of
// ObjectMeta's managed fields too) and would need the Kubernetes .proto files shipped; the fields read here
// are a few dozen lines.
//
// The decoders build the same shape JSON.parse gives for those fields (RawObject), so toService/toSlice and
// the reflector do not know which encoding came. The one difference to mind: Go's JSON leaves out an
// `omitempty` field that is empty, while gogo-protobuf writes every non-pointer string (empty ones too); such
// fields are set here only when non-empty. Pointer fields (`*string`, `*bool`, `*int32`) are written in both
// encodings only when set, and so they are here, empty or not.
//
// Framing (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): a body or a watch event's object is the magic
// "k8s\0" and a runtime.Unknown {typeMeta=1 {apiVersion=1, kind=2}, raw=2 (the object's message),
// contentEncoding=3, contentType=4}; a watch stream (`;stream=watch`) is frames of a 4-byte big-endian length
// and a metav1.WatchEvent {type=1, object=2 (RawExtension {raw=1})}.

import type { RawObject } from './controller.ts';

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';
/** The Accept header of a request whose resource has a decoder here (client-go's, with CoreDNS's ContentType). */
export const PROTOBUF_ACCEPT = `${PROTOBUF}, */*`;

/** Node's Buffer has had utf8Slice(start, end) (what toString('utf8') calls) since its beginnings; not in @types/node. */
interface Utf8Sliceable extends Buffer { utf8Slice(start: number, end: number): string }

/** A cursor over one message. Methods are small so that V8 inlines them into the decoders. */
export class Reader {
  buf: Buffer;
  pos: number;
  constructor(buf: Buffer, pos = 0) {
    this.buf = buf;
    this.pos = pos;
  }

  /** A varint's low 32 bits as a signed int32 (every int32, bool, enum, tag and length read here fits). */
  varint(): number {
    const b = this.buf;
    let x = b[this.pos++];
    if (x < 0x80) return x;
    let r = x & 0x7f;
    let shift = 7;
    for (;;) {
      if (this.pos >= b.length) throw new Error('protobuf: truncated varint');
      x = b[this.pos++];
      if (shift < 32) r |= (x & 0x7f) << shift;
      if (x < 0x80) return r | 0;
      shift += 7;
      if (shift > 63) throw new Error('protobuf: varint too long');
    }
  }

  /** Reads a length and returns the end of the field it delimits (checked against the buffer). */
  end(): number {
    const len = this.varint();
    const e = this.pos + len;
    if (len < 0 || e > this.buf.length) throw new Error('protobuf: length past the end');
    return e;
  }

  /** A length-delimited UTF-8 string. */
  str(): string {
    const e = this.end();
    // Buffer's own utf8Slice: toString('utf8', start, end) checks and normalises its arguments first, which
    // costs as much again as the copy for the short strings (names, IPs) that are most of a sync.
    const s = (this.buf as Utf8Sliceable).utf8Slice(this.pos, e);
    this.pos = e;
    return s;
  }

  /** Skips a field of the given wire type. */
  skip(wt: number): void {
    switch (wt) {
      case 0: this.varint(); return;
      case 1: this.pos += 8; break;
      case 2: this.pos = this.end(); return;
      case 5: this.pos += 4; break;
      default: throw new Error(`protobuf: unsupported wire type ${wt}`);
    }
    if (this.pos > this.buf.length) throw new Error('protobuf: truncated field');
  }
}

/** Decodes one object message between the reader's position and `end`. */
export type ObjectDecoder = (r: Reader, end: number) => RawObject;

type Meta = RawObject['metadata'];

/** map<string,string> entry {key=1, value=2} into `into`. */
function mapEntry(r: Reader, into: Record<string, string>): void {
  const end = r.end();
  let k = '';
  let v = '';
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) k = r.str();
    else if (tag === 18) v = r.str();
    else r.skip(tag & 7);
  }
  into[k] = v;
}

/** metav1.Time {seconds=1 int64, nanos=2}: RFC 3339 in seconds, as its JSON form. */
function time(r: Reader): string {
  const end = r.end();
  let secs = 0;
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 8) {
      // int64 seconds: a varint beyond 32 bits; read as a number (dates before 2106 fit the low 32 bits unsigned).
      secs = r.varint() >>> 0;
    } else r.skip(tag & 7);
  }
  return new Date(secs * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** ObjectMeta: name=1, namespace=3, resourceVersion=6, deletionTimestamp=9, labels=11, annotations=12. */
function objectMeta(r: Reader): Meta {
  const end = r.end();
  const m: Meta = { name: '' };
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: m.name = r.str(); break;
      case 26: { const s = r.str(); if (s !== '') m.namespace = s; break; }
      case 50: { const s = r.str(); if (s !== '') m.resourceVersion = s; break; }
      case 74: m.deletionTimestamp = time(r); break;
      case 90: mapEntry(r, (m.labels ??= {})); break;
      case 98: mapEntry(r, (m.annotations ??= {})); break;
      default: r.skip(tag & 7); // managedFields, uid, creationTimestamp, ...: jumped over
    }
  }
  return m;
}

/** A string list's next element (repeated string). */
function pushStr(r: Reader, a: string[] | undefined): string[] {
  const s = r.str();
  if (a === undefined) return [s];
  a.push(s);
  return a;
}

// ---------- core/v1 Service ----------

interface RawServicePort { name?: string; protocol?: string; port: number }

/** ServicePort: name=1, protocol=2, port=3. */
function servicePort(r: Reader): RawServicePort {
  const end = r.end();
  const p: RawServicePort = { port: 0 };
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: { const s = r.str(); if (s !== '') p.name = s; break; }
      case 18: { const s = r.str(); if (s !== '') p.protocol = s; break; }
      case 24: p.port = r.varint(); break;
      default: r.skip(tag & 7);
    }
  }
  return p;
}

interface RawServiceSpec { ports?: RawServicePort[]; clusterIP?: string; clusterIPs?: string[]; type?: string; externalIPs?: string[]; externalName?: string }

/** ServiceSpec: ports=1, clusterIP=3, type=4, externalIPs=5, externalName=10, clusterIPs=18. */
function serviceSpec(r: Reader): RawServiceSpec {
  const end = r.end();
  const s: RawServiceSpec = {};
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: (s.ports ??= []).push(servicePort(r)); break;
      case 26: { const v = r.str(); if (v !== '') s.clusterIP = v; break; }
      case 34: { const v = r.str(); if (v !== '') s.type = v; break; }
      case 42: s.externalIPs = pushStr(r, s.externalIPs); break;
      case 82: { const v = r.str(); if (v !== '') s.externalName = v; break; }
      case 146: s.clusterIPs = pushStr(r, s.clusterIPs); break;
      default: r.skip(tag & 7);
    }
  }
  return s;
}

interface RawIngress { ip?: string; hostname?: string }

/** LoadBalancerIngress: ip=1, hostname=2. */
function ingress(r: Reader): RawIngress {
  const end = r.end();
  const i: RawIngress = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) { const v = r.str(); if (v !== '') i.ip = v; } else if (tag === 18) { const v = r.str(); if (v !== '') i.hostname = v; } else r.skip(tag & 7);
  }
  return i;
}

/** ServiceStatus {loadBalancer=1 {ingress=1}}. */
function serviceStatus(r: Reader): { loadBalancer: { ingress?: RawIngress[] } } {
  const end = r.end();
  const lb: { ingress?: RawIngress[] } = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) {
      const lbEnd = r.end();
      while (r.pos < lbEnd) {
        const t2 = r.varint();
        if (t2 === 10) (lb.ingress ??= []).push(ingress(r));
        else r.skip(t2 & 7);
      }
    } else r.skip(tag & 7);
  }
  return { loadBalancer: lb };
}

/** Service: metadata=1, spec=2, status=3. */
export const decodeService: ObjectDecoder = (r, end) => {
  const o: RawObject = { metadata: { name: '' } };
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: o.metadata = objectMeta(r); break;
      case 18: o.spec = serviceSpec(r); break;
      case 26: o.status = serviceStatus(r); break;
      default: r.skip(tag & 7);
    }
  }
  return o;
};

// ---------- discovery/v1 EndpointSlice ----------

interface RawEndpoint { addresses: string[]; conditions: { ready?: boolean }; hostname?: string; targetRef?: { name?: string }; nodeName?: string; zone?: string }

/** EndpointConditions {ready=1 (optional)}. */
function conditions(r: Reader): { ready?: boolean } {
  const end = r.end();
  const c: { ready?: boolean } = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 8) c.ready = r.varint() !== 0;
    else r.skip(tag & 7);
  }
  return c;
}

/** ObjectReference {name=3}. */
function targetRef(r: Reader): { name?: string } {
  const end = r.end();
  const t: { name?: string } = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 26) { const v = r.str(); if (v !== '') t.name = v; } else r.skip(tag & 7);
  }
  return t;
}

/** Endpoint: addresses=1, conditions=2, hostname=3 (optional), targetRef=4, nodeName=6 and zone=7 (optional). */
function endpoint(r: Reader): RawEndpoint {
  const end = r.end();
  const e: RawEndpoint = { addresses: [], conditions: {} };
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: e.addresses.push(r.str()); break;
      case 18: e.conditions = conditions(r); break;
      case 26: e.hostname = r.str(); break;
      case 34: e.targetRef = targetRef(r); break;
      case 50: e.nodeName = r.str(); break;
      case 58: e.zone = r.str(); break;
      default: r.skip(tag & 7);
    }
  }
  return e;
}

/** EndpointPort: name=1, protocol=2, port=3 (all optional). */
function endpointPort(r: Reader): { name?: string; protocol?: string; port?: number } {
  const end = r.end();
  const p: { name?: string; protocol?: string; port?: number } = {};
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: p.name = r.str(); break;
      case 18: p.protocol = r.str(); break;
      case 24: p.port = r.varint(); break;
      default: r.skip(tag & 7);
    }
  }
  return p;
}

/** EndpointSlice: metadata=1, endpoints=2, ports=3, addressType=4. */
export const decodeEndpointSlice: ObjectDecoder = (r, end) => {
  const o: RawObject = { metadata: { name: '' } };
  let endpoints: RawEndpoint[] | undefined;
  let ports: { name?: string; protocol?: string; port?: number }[] | undefined;
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 10: o.metadata = objectMeta(r); break;
      case 18: (endpoints ??= []).push(endpoint(r)); break;
      case 26: (ports ??= []).push(endpointPort(r)); break;
      case 34: o.addressType = r.str(); break;
      default: r.skip(tag & 7);
    }
  }
  if (endpoints !== undefined) o.endpoints = endpoints;
  if (ports !== undefined) o.ports = ports;
  return o;
};

// ---------- core/v1 Namespace ----------

/** Namespace: metadata=1 (spec and status are not read). */
export const decodeNamespace: ObjectDecoder = (r, end) => {
  const o: RawObject = { metadata: { name: '' } };
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) o.metadata = objectMeta(r);
    else r.skip(tag & 7);
  }
  return o;
};

// ---------- core/v1 Pod ----------

/** PodStatus {podIPs=12 {ip=1}} (`ip` has no omitempty: kept even empty, as in JSON). */
function podStatus(r: Reader): { podIPs?: { ip: string }[] } {
  const end = r.end();
  const st: { podIPs?: { ip: string }[] } = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 98) {
      const pEnd = r.end();
      let ip = '';
      while (r.pos < pEnd) {
        const t2 = r.varint();
        if (t2 === 10) ip = r.str();
        else r.skip(t2 & 7);
      }
      (st.podIPs ??= []).push({ ip });
    } else r.skip(tag & 7);
  }
  return st;
}

/** Pod: metadata=1, status=3 (the spec, most of a pod's bytes, is jumped over). */
export const decodePod: ObjectDecoder = (r, end) => {
  const o: RawObject = { metadata: { name: '' } };
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) o.metadata = objectMeta(r);
    else if (tag === 26) o.status = podStatus(r);
    else r.skip(tag & 7);
  }
  return o;
};

// ---------- meta/v1 Status ----------

export interface RawStatus {
  kind?: string; apiVersion?: string; metadata: Record<string, string>; status?: string; message?: string; reason?: string;
  details?: { name?: string; group?: string; kind?: string; causes?: { reason?: string; message?: string; field?: string }[] }; code?: number;
}

function statusCause(r: Reader): { reason?: string; message?: string; field?: string } {
  const end = r.end();
  const c: { reason?: string; message?: string; field?: string } = {};
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) { const v = r.str(); if (v !== '') c.reason = v; } else if (tag === 18) { const v = r.str(); if (v !== '') c.message = v; } else if (tag === 26) { const v = r.str(); if (v !== '') c.field = v; } else r.skip(tag & 7);
  }
  return c;
}

/** Status: metadata=1, status=2, message=3, reason=4, details=5 {name=1, group=2, kind=3, causes=4}, code=6. */
function status(r: Reader, end: number, typeMeta: { apiVersion: string; kind: string }): RawStatus {
  const s: RawStatus = { metadata: {} };
  if (typeMeta.kind !== '') s.kind = typeMeta.kind;
  if (typeMeta.apiVersion !== '') s.apiVersion = typeMeta.apiVersion;
  while (r.pos < end) {
    const tag = r.varint();
    switch (tag) {
      case 18: { const v = r.str(); if (v !== '') s.status = v; break; }
      case 26: { const v = r.str(); if (v !== '') s.message = v; break; }
      case 34: { const v = r.str(); if (v !== '') s.reason = v; break; }
      case 42: {
        const dEnd = r.end();
        const d: NonNullable<RawStatus['details']> = {};
        while (r.pos < dEnd) {
          const t2 = r.varint();
          switch (t2) {
            case 10: { const v = r.str(); if (v !== '') d.name = v; break; }
            case 18: { const v = r.str(); if (v !== '') d.group = v; break; }
            case 26: { const v = r.str(); if (v !== '') d.kind = v; break; }
            case 34: (d.causes ??= []).push(statusCause(r)); break;
            default: r.skip(t2 & 7);
          }
        }
        s.details = d;
        break;
      }
      case 48: { const v = r.varint(); if (v !== 0) s.code = v; break; }
      default: r.skip(tag & 7);
    }
  }
  return s;
}

// ---------- envelopes ----------

const MAGIC = 0x6b387300; // "k8s\0"

interface Envelope { apiVersion: string; kind: string; rawStart: number; rawEnd: number }

/** The "k8s\0" + runtime.Unknown envelope between `start` and `end`: where its raw message lies. */
function envelope(r: Reader, start: number, end: number): Envelope {
  if (end - start < 4 || r.buf.readUInt32BE(start) !== MAGIC) throw new Error('protobuf: object without the k8s magic');
  r.pos = start + 4;
  const env: Envelope = { apiVersion: '', kind: '', rawStart: end, rawEnd: end };
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) {
      const tEnd = r.end();
      while (r.pos < tEnd) {
        const t2 = r.varint();
        if (t2 === 10) env.apiVersion = r.str();
        else if (t2 === 18) env.kind = r.str();
        else r.skip(t2 & 7);
      }
    } else if (tag === 18) {
      env.rawEnd = r.end();
      env.rawStart = r.pos;
      r.pos = env.rawEnd;
    } else if (tag === 26 || tag === 34) {
      // contentEncoding / contentType: the API server leaves both empty (raw is protobuf, not compressed).
      const v = r.str();
      if (v !== '' && tag === 26) throw new Error(`protobuf: unsupported content encoding ${v}`);
    } else r.skip(tag & 7);
  }
  return env;
}

/** A Status body (an error response), as JSON.parse would give it. */
export function decodeStatus(buf: Buffer): RawStatus {
  const r = new Reader(buf);
  const env = envelope(r, 0, buf.length);
  r.pos = env.rawStart;
  return status(r, env.rawEnd, env);
}

export interface DecodedEvent { type: string; object: RawObject }

/** One watch frame's WatchEvent (between `start` and `end`): ERROR events carry a Status, the others an object. */
export function decodeWatchEvent(buf: Buffer, start: number, end: number, decode: ObjectDecoder): DecodedEvent {
  const r = new Reader(buf, start);
  let type = '';
  let objStart = -1;
  let objEnd = -1;
  while (r.pos < end) {
    const tag = r.varint();
    if (tag === 10) type = r.str();
    else if (tag === 18) {
      // RawExtension {raw=1}
      const eEnd = r.end();
      while (r.pos < eEnd) {
        const t2 = r.varint();
        if (t2 === 10) { objEnd = r.end(); objStart = r.pos; r.pos = objEnd; } else r.skip(t2 & 7);
      }
    } else r.skip(tag & 7);
  }
  if (objStart < 0) return { type, object: { metadata: { name: '' } } };
  const env = envelope(r, objStart, objEnd);
  r.pos = env.rawStart;
  if (type === 'ERROR') {
    // Its metadata is the Status's ListMeta ({}), as in JSON; the reflector reads no name from an ERROR event.
    return { type, object: status(r, env.rawEnd, env) as unknown as DecodedEvent['object'] };
  }
  return { type, object: decode(r, env.rawEnd) };
}

/** A LIST body: {metadata=1 ListMeta {resourceVersion=2, continue=3}, items=2}. */
export function decodeList(buf: Buffer, decode: ObjectDecoder): { metadata: { resourceVersion?: string; continue?: string }; items: RawObject[] } {
  const r = new Reader(buf);
  const env = envelope(r, 0, buf.length);
  r.pos = env.rawStart;
  const meta: { resourceVersion?: string; continue?: string } = {};
  const items: RawObject[] = [];
  while (r.pos < env.rawEnd) {
    const tag = r.varint();
    if (tag === 10) {
      const mEnd = r.end();
      while (r.pos < mEnd) {
        const t2 = r.varint();
        if (t2 === 18) { const v = r.str(); if (v !== '') meta.resourceVersion = v; } else if (t2 === 26) { const v = r.str(); if (v !== '') meta.continue = v; } else r.skip(t2 & 7);
      }
    } else if (tag === 18) {
      const iEnd = r.end();
      items.push(decode(r, iEnd));
      r.pos = iEnd;
    } else r.skip(tag & 7);
  }
  return { metadata: meta, items };
}

/**
 * Splits a `;stream=watch` body into frames (4-byte big-endian length, then the message) across chunks. A frame
 * within one chunk is decoded in place; only a frame split between chunks is copied, once its last byte is in.
 */
export class FrameReader {
  /** the start of a frame split between chunks, its parts so far */
  private parts: Buffer[] = [];
  private have = 0;

  /** Feeds a chunk; calls `frame` for every complete frame until it returns true (stop). Returns true if stopped. */
  push(chunk: Buffer, frame: (buf: Buffer, start: number, end: number) => boolean): boolean {
    let pos = 0;
    if (this.have > 0) {
      // Complete the pending frame with the head of this chunk (its length first, if that is split too).
      if (this.have < 4) {
        const take = Math.min(4 - this.have, chunk.length);
        this.parts.push(chunk.subarray(0, take));
        this.have += take;
        pos = take;
        if (this.have < 4) return false;
      }
      const head = this.have === this.parts[0].length ? this.parts[0] : Buffer.concat(this.parts, this.have);
      const need = 4 + head.readUInt32BE(0) - this.have;
      if (chunk.length - pos < need) {
        this.parts.push(pos === 0 ? chunk : chunk.subarray(pos));
        this.have += chunk.length - pos;
        return false;
      }
      this.parts.push(chunk.subarray(pos, pos + need));
      const whole = Buffer.concat(this.parts, this.have + need);
      this.parts = [];
      this.have = 0;
      pos += need;
      if (frame(whole, 4, whole.length)) return true;
    }
    while (chunk.length - pos >= 4) {
      const len = chunk.readUInt32BE(pos);
      if (chunk.length - pos - 4 < len) break;
      if (frame(chunk, pos + 4, pos + 4 + len)) return true;
      pos += 4 + len;
    }
    if (pos < chunk.length) {
      // The rest starts the next frame: kept as a view (node hands each chunk over once; nothing reuses it).
      this.parts.push(chunk.subarray(pos));
      this.have = chunk.length - pos;
    }
    return false;
  }
}
