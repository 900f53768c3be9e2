import type { BufferStats } from '../buffer/sample-buffer.js';
import type { SourceStatus } from '../core/source.js';
import type { UplinkCondition } from '../uplink/uplink-health.js';
import type { BackfillStats } from '../uplink/backfill.js';
import type { SharingStatus } from '../uplink/budget-sharing.js';

/** Everything `/status`, `edge-gateway status` and the status line show. Secrets never appear here. */
export interface GatewayStatus {
  gateway: { name: string; version: string; started_at: string; uptime_s: number; pid: number; memory: { rss_bytes: number; heap_used_bytes: number; external_bytes: number } };
  sources: SourceStatus[];
  buffer: {
    samples: number;
    available: number;
    inflight: number;
    in_import_jobs: number;
    pending_commit: number;
    /** Bytes in use: the database's pages less its free pages (what buffer.max_bytes limits). */
    used_bytes: number;
    /** Bytes the buffer file and its WAL take on disk (B9: at most used + buffer.keep_free + the WAL, a minute after use shrank). */
    disk_bytes: number;
    /** Free pages inside the file: reused by the next writes, or returned to the file system. */
    free_bytes: number;
    max_bytes: number;
    oldest_unsent_age_s: number | null;
    /** uplink.max_unsent_age: beyond it the sync path alternates oldest-first batches (issue 12 §5). */
    max_unsent_age_s: number;
    /** Buffer v2: unsent samples still rows (the live tail) and sealed in compressed chunks. */
    live_rows: number;
    sealed_samples: number;
    chunks: number;
    chunks_sealed_total: number;
    bytes_per_sample: number | null;
    compression_ratio: number | null;
    /** Seconds until buffer.max_bytes at the current ingest rate; null while nothing is ingested. */
    capacity_s: number | null;
    committed_total: number;
    dropped_total: number;
    writable: boolean;
    last_write_error: BufferStats['lastWriteError'];
    full_episode: BufferStats['fullEpisode'];
    recovered_from: string | null;
  };
  uplink: {
    condition: UplinkCondition;
    reason: string;
    since: string;
    resume_in_ms: number;
    budget_per_minute: number;
    requests_last_minute: number;
    freshest_delivered_age_s: number | null;
    sync: { rate_per_s: number; delivered_total: number; inflight_batches: number; set_aside_total: number; oldest_first_batches: number };
  };
  /** Import-job backfill. */
  backfill: BackfillStats;
  set_aside: { samples: number };
  /** The gap ledger (issue 14): open gaps and the newest ones, in the /api/gaps shape. */
  gaps?: { open: number; recent: import('../buffer/gaps.js').GapView[]; annotate: boolean };
  /** Backlog ETA in seconds at current rates (null when nothing is pending or the rate is 0). */
  backlog_eta_s: number | null;
  annotations?: Record<string, unknown>;
  /** The plant broker link and the shared request budget (fleet.mqtt, uplink.budget_sharing). */
  fleet?: { broker: { url: string; connected: boolean; client_id: string; prefix: string }; budget_sharing: SharingStatus | null };
  /** The configuration file and its hot reloads (SIGHUP or a change of the file). */
  config: ConfigStatus;
  /**
   * Samples per second each source read over the last 30 s, by source name. Optional: a gateway
   * that does not measure them leaves it out, and `edge-gateway status` measures from two readings.
   */
  source_rates?: Record<string, number>;
}

export interface ConfigStatus {
  path: string | null;
  loaded_at: string;
  reloads_applied: number;
  reloads_refused: number;
  last_reload: { at: string; outcome: 'applied' | 'unchanged' | 'refused'; changed: string[]; restart_required: string[]; problems?: string[] } | null;
}

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
    `backlog ${fmt(s.buffer.samples)} (oldest ${age(s.buffer.oldest_unsent_age_s)})`,
    `rate ${s.uplink.sync.rate_per_s.toFixed(0)}/s`,
    `freshest ${age(s.uplink.freshest_delivered_age_s)}`,
    `uplink ${s.uplink.condition}`,
  ];
  const bf = s.backfill;
  if (bf.jobs_in_flight > 0 || bf.rate_per_s > 0) parts.splice(5, 0, `import ${bf.rate_per_s.toFixed(0)}/s, ${bf.jobs_in_flight} job(s)`);
  if (s.backlog_eta_s !== null && s.buffer.samples > 0) parts.push(`ETA ${formatDuration(s.backlog_eta_s)}`);
  if (s.set_aside.samples > 0) parts.push(`set aside ${fmt(s.set_aside.samples)}`);
  if (s.buffer.dropped_total > 0) parts.push(`DROPPED ${fmt(s.buffer.dropped_total)}`);
  if (!s.buffer.writable) parts.push('BUFFER NOT WRITABLE');
  return parts.join(' | ');
}
