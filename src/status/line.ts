import type { GatewayStatus } from './model.js';

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function age(s: number | null): string {
  if (s === null) return '-';
  if (s < 120) return `${s.toFixed(1)}s`;
  if (s < 7_200) return `${(s / 60).toFixed(1)}m`;
  if (s < 172_800) return `${(s / 3_600).toFixed(1)}h`;
  return `${(s / 86_400).toFixed(1)}d`;
}

export function formatDuration(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return 'unknown';
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5_400) return `${Math.round(s / 60)}m`;
  return `${Math.floor(s / 3_600)}h${String(Math.round((s % 3_600) / 60)).padStart(2, '0')}m`;
}

/** One line for the terminal: buffered / delivered / backlog / rate / freshness / link state. */
export function statusLine(s: GatewayStatus): string {
  const connected = s.sources.filter((x) => x.state === 'connected' || x.state === 'degraded').length;
  const parts = [
    `sources ${connected}/${s.sources.length} up`,
    `buffered ${fmt(s.buffer.committed_total)}`,
    `delivered ${fmt(s.uplink.sync.delivered_total + s.backfill.delivered_total)}`,
    `backlog ${fmt(s.buffer.samples)} (oldest ${age(s.buffer.oldest_unsent_age_s)}${s.delivery?.state === 'growing' ? ', growing' : ''})`,
    `rate ${s.uplink.sync.rate_per_s.toFixed(0)}/s`,
    `freshest ${age(s.uplink.freshest_delivered_age_s)}`,
    // The one vocabulary (status/uplink-state.ts); a gateway without it shows its link condition.
    `uplink ${s.uplink.state?.text ?? s.uplink.condition}`,
  ];
  const bf = s.backfill;
  if (bf.jobs_in_flight > 0 || bf.rate_per_s > 0) parts.splice(5, 0, `import ${bf.rate_per_s.toFixed(0)}/s, ${bf.jobs_in_flight} job(s)`);
  if (s.backlog_eta_s !== null && s.buffer.samples > 0) parts.push(`ETA ${formatDuration(s.backlog_eta_s)}`);
  if (s.set_aside.samples > 0) parts.push(`set aside ${fmt(s.set_aside.samples)}`);
  if (s.buffer.dropped_total > 0) parts.push(`DROPPED ${fmt(s.buffer.dropped_total)}`);
  if (!s.buffer.writable) parts.push('BUFFER NOT WRITABLE');
  return parts.join(' | ');
}
