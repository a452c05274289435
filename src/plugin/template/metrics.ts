// The template plugin's metrics (CoreDNS plugin/template/metrics.go): names,
// help texts and label order as CoreDNS. Per-query counters: plain-number vectors.

import { CounterVec } from '../pkg/vec.ts';

export const templateMatches = new CounterVec('coredns_template_matches_total',
  'Counter of template regex matches.', ['server', 'zone', 'view', 'class', 'type']);
export const templateFailures = new CounterVec('coredns_template_template_failures_total',
  'Counter of go template failures.', ['server', 'zone', 'view', 'class', 'type', 'section', 'template']);
export const templateRRFailures = new CounterVec('coredns_template_rr_failures_total',
  'Counter of mis-templated RRs.', ['server', 'zone', 'view', 'class', 'type', 'section', 'template']);
