// The template plugin's metrics (CoreDNS plugin/template/metrics.go): names,
// help texts and label order as CoreDNS, in the server's registry. Per-query counters: plain-number vectors.

import { metricSet } from '../pkg/metrics.ts';
import { counterVec } from '../pkg/vec.ts';

export const templateMetrics = metricSet((r) => ({
  templateMatches: counterVec(r, 'coredns_template_matches_total',
    'Counter of template regex matches.', ['server', 'zone', 'view', 'class', 'type']),
  templateFailures: counterVec(r, 'coredns_template_template_failures_total',
    'Counter of go template failures.', ['server', 'zone', 'view', 'class', 'type', 'section', 'template']),
  templateRRFailures: counterVec(r, 'coredns_template_rr_failures_total',
    'Counter of mis-templated RRs.', ['server', 'zone', 'view', 'class', 'type', 'section', 'template']),
}));
export type TemplateMetrics = ReturnType<typeof templateMetrics>;
