// Query name grammar of CoreDNS's kubernetes plugin (parse.go), read right to left:
//   _port._protocol.service.namespace.pod|svc.zone
//   endpoint.service.namespace.pod|svc.zone
//   service.namespace.pod|svc.zone
//   endpoint.cluster.service.namespace.svc.zone      (multicluster zones)
//   topozone._zone.service.namespace.svc.zone        (zonal)

export interface RecordRequest {
  port: string;
  protocol: string;
  endpoint: string;
  cluster: string;
  /** topology zone of a zonal name */
  zone: string;
  /** `pin` or `prefer` for zonal names */
  zoneMode: string;
  service: string;
  namespace: string;
  /** 'svc', 'pod' or '' (apex-like names) */
  podOrSvc: string;
}

/** Thrown (as a value) for names the grammar rejects: CoreDNS's errInvalidRequest. */
export const INVALID = 1;

function strip(s: string): string {
  return s.charCodeAt(0) === 95 ? s.slice(1) : s;
}

/**
 * Parses `name` (lower-cased, fully qualified, inside `zone`) into a request;
 * returns INVALID for a name error.
 */
export function parseRequest(name: string, zone: string, multicluster: boolean, zonal: boolean): RecordRequest | typeof INVALID {
  const r: RecordRequest = { port: '', protocol: '', endpoint: '', cluster: '', zone: '', zoneMode: '', service: '', namespace: '', podOrSvc: '' };
  // TrimZone: the labels before the zone, without the joining dot.
  let base = name.length > zone.length ? name.slice(0, name.length - zone.length - 1) : '';
  if (zone === '.') base = name === '.' ? '' : name.slice(0, -1);
  if (base === '' || base === 'svc' || base === 'pod') return r;
  const segs = base.split('.');
  let last = segs.length - 1;
  r.podOrSvc = segs[last];
  if (r.podOrSvc !== 'pod' && r.podOrSvc !== 'svc') return INVALID;
  last--;
  if (last < 0) return r;
  r.namespace = segs[last];
  last--;
  if (last < 0) return r;
  r.service = segs[last];
  last--;
  if (last < 0) return r;
  if (last === 0) {
    r.endpoint = segs[0];
  } else if (last === 1) {
    if (zonal && !multicluster && segs[1] === '_zone' && r.podOrSvc === 'svc') {
      r.zone = segs[0];
      r.zoneMode = 'pin';
    } else if (!multicluster || segs[1].charCodeAt(0) === 95 || segs[0].charCodeAt(0) === 95) {
      r.protocol = strip(segs[1]);
      r.port = strip(segs[0]);
    } else {
      r.cluster = segs[1];
      r.endpoint = segs[0];
    }
  } else if (zonal && !multicluster && r.podOrSvc === 'svc' && segs[last] === '_zone' && (segs[last - 1] === 'pin' || segs[last - 1] === 'prefer')) {
    // <topology zone, possibly dotted>.pin|prefer._zone.<service>...
    r.zoneMode = segs[last - 1];
    r.zone = segs.slice(0, last - 1).join('.');
    if (r.zone === '') return INVALID;
  } else {
    return INVALID;
  }
  return r;
}
