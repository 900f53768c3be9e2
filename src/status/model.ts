import type { GapView } from '../buffer/gaps.js';
import type { BufferStats } from '../buffer/sample-buffer.js';
import { QUALITIES, emptyCounts, type QualitySummary } from '../core/quality.js';
import type { StoreStatus } from '../store/store.js';
import type { SourceStatus } from '../core/source.js';
import type { BackfillStats } from '../uplink/backfill.js';
import type { BacklogTrend } from '../uplink/backlog-meter.js';
import type { SharingStatus } from '../uplink/budget-sharing.js';
import type { OutageView } from '../uplink/outage-tracker.js';
import type { RateFinderSnapshot } from '../uplink/rate-finder.js';
import type { SyncSender } from '../uplink/sync-sender.js';
import type { UnknownVariablesSnapshot } from '../uplink/unknown-variables.js';
import type { UplinkCondition, UplinkHealth } from '../uplink/uplink-health.js';
import { deliveryOutlook, type DeliveryOutlook } from './delivery.js';
import { uplinkSummary, type UplinkSummary } from './uplink-state.js';

export type { DeliveryOutlook } from './delivery.js';
export { ESTIMATE_MIN_MEASURED_S, deliveryOutlook } from './delivery.js';
export type { UplinkSummary, UplinkState } from './uplink-state.js';

/**
 * The status model (issue 23): what `/status`, `edge-gateway status`, the console and the fleet
 * status documents show, as a pure function of read-only readings. It reads nothing itself and
 * writes nothing (no gauges, no clocks): the runtime gathers the readings (runtime/status-board.ts)
 * and Prometheus reads its own figures through collect hooks (core/metrics.ts). Every room that
 * shows the status imports it from here, below them all.
 */

/** Everything `/status`, `edge-gateway status` and the status line show. Secrets never appear here. */
export interface GatewayStatus {
  gateway: { name: string; version: string; started_at: string; uptime_s: number; pid: number; memory: { rss_bytes: number; heap_used_bytes: number; external_bytes: number } };
  sources: SourceStatus[];
  /** Every source's variables by quality together (core/quality.ts; each source's own are in `sources[].variables`). */
  variables: QualitySummary;
  buffer: {
    samples: number;
    available: number;
    inflight: number;
    in_import_jobs: number;
    pending_commit: number;
    /** Bytes the samples use: their pages in use in the file, side tables apart (what buffer.max_bytes limits; `store` has every owner's). */
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
    /** Why new samples are refused now (refuse_new at max_bytes, or a full disk), or null. */
    refusing: string | null;
    full_episode: BufferStats['fullEpisode'];
    recovered_from: string | null;
  };
  uplink: {
    /** What limits delivery, in the one vocabulary every surface shows (uplink-state.ts). */
    state: UplinkSummary;
    /** The health of the link underneath: ok, retrying (unreachable), auth_failed, halted. */
    condition: UplinkCondition;
    reason: string;
    since: string;
    resume_in_ms: number;
    /** uplink.requests_per_minute: a ceiling. */
    budget_per_minute: number;
    /** The fleet share (budget_per_minute without budget sharing) and the pace in force (the lowest of ceiling, share and found rate). */
    share_per_minute: number;
    pace_per_minute: number;
    /** The rate found from the service's 429s (rate-finder.ts). */
    rate: { found_per_minute: number | null; limit_seen_per_minute: number | null; rate_limited_total: number; last_rate_limited_at: string | null; paused_ms: number };
    /** The outage of the service in progress, or the last one, with its catch-up. */
    outage: OutageView | null;
    requests_last_minute: number;
    freshest_delivered_age_s: number | null;
    sync: { rate_per_s: number; delivered_total: number; inflight_batches: number; set_aside_total: number; oldest_first_batches: number };
    /**
     * Machine variables the service refuses as unknown (issue 24 §1): their samples are set aside,
     * the rest is delivered. Not an outage: the condition stays `ok`.
     */
    unknown_variables: UnknownVariablesSnapshot;
  };
  /** Import-job backfill. */
  backfill: BackfillStats;
  set_aside: { samples: number };
  /** The gateway's file: bytes, bound and full policy per owner (samples and each side table), the disk-full state (src/store/README.md). */
  store?: StoreStatus;
  /** The gap ledger (issue 14): open gaps and the newest ones, in the /api/gaps shape. */
  gaps?: { open: number; recent: GapView[]; annotate: boolean };
  /** Backlog ETA in seconds at current rates (null when nothing is pending or the rate is 0). */
  backlog_eta_s: number | null;
  /** Whether delivery keeps up with ingest, the sync path's capacity, import jobs, the drain estimate (issue 24 §1). */
  delivery: DeliveryOutlook;
  annotations?: Record<string, unknown>;
  /** The plant broker link and the shared request budget (fleet.mqtt, uplink.budget_sharing). */
  fleet?: { broker: FleetBrokerStatus; budget_sharing: SharingStatus | null };
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

/** The plant-broker link in the gateway's status (fleet/index.ts reports it). */
export interface FleetBrokerStatus {
  url: string;
  connected: boolean;
  client_id: string;
  prefix: string;
  /** MQTT 5, or MQTT 3.1.1 when the broker refused 5. */
  protocol: string;
  /** This process's instance id in its status documents. */
  instance: string;
  /** What shows that another gateway publishes under this gateway's name, while suspected (duplicate-name.ts); else null. */
  duplicate_name: string | null;
}

/** Everything the status is made from, each read once by whoever owns it. */
export interface StatusReadings {
  /** Wall-clock ms of the reading. */
  now: number;
  gateway: { name: string; version: string; startedAt: number; pid: number; memory: GatewayStatus['gateway']['memory'] };
  sources: readonly SourceStatus[];
  /** Samples per second each source read over the last 30 s, by name. */
  sourceRates: Record<string, number>;
  buffer: BufferStats;
  /** Samples per second the buffer takes in now. */
  ingestRate: number;
  /** Where a damaged buffer file was moved at start, or null. */
  recoveredFrom: string | null;
  setAside: number;
  gaps: { open: number; recent: GapView[]; annotate: boolean };
  /** The gateway's file per owner (src/store). */
  store: StoreStatus;
  /** uplink.max_unsent_age in ms. */
  maxUnsentAgeMs: number;
  /** uplink.batch_size. */
  batchSize: number;
  health: ReturnType<UplinkHealth['snapshot']>;
  budget: { perMinute: number; usedLastMinute: number; sharePerMinute: number; pacePerMinute: number; rate: RateFinderSnapshot };
  /** What the backlog did, measured (backlog-meter.ts). */
  trend: BacklogTrend;
  outage: OutageView | null;
  /** Distinct machine variables the configuration's sources map; null when not known. */
  mappedVariables: number | null;
  sync: ReturnType<SyncSender['stats']>;
  backfill: BackfillStats;
  unknownVariables: UnknownVariablesSnapshot;
  /** Null when the annotations section is absent (or while annotations start). */
  annotations: Record<string, unknown> | null;
  /** Null without fleet.mqtt. */
  fleet: { broker: FleetBrokerStatus; budget_sharing: SharingStatus | null } | null;
  config: ConfigStatus;
}

/** Share of the pace used over the last minute from which requests are taken to wait for the budget. */
const BUDGET_SATURATED = 0.9;

/**
 * The outlook from the readings the status and `gateway_backlog_eta_seconds` share, so the metric
 * and the console say the same.
 */
export function outlookOf(r: Pick<StatusReadings, 'trend' | 'backfill' | 'batchSize' | 'now'> & { buffer: Pick<BufferStats, 'rows' | 'reserved' | 'oldestTs'> }): DeliveryOutlook {
  return deliveryOutlook({
    backlog: r.buffer.rows,
    inJobs: r.buffer.reserved,
    oldestAgeS: r.buffer.oldestTs === null ? null : Math.max(0, (r.now - r.buffer.oldestTs) / 1000),
    batchSize: r.batchSize,
    trend: r.trend,
    backfill: r.backfill,
  });
}

/** The uplink's state in the one vocabulary, from the readings the status and `gateway_uplink_status` share. */
export function uplinkStateOf(r: Pick<StatusReadings, 'health' | 'unknownVariables' | 'mappedVariables' | 'budget' | 'batchSize' | 'trend'> & { buffer: Pick<BufferStats, 'rows'> }): UplinkSummary {
  const found = r.budget.rate.found_per_minute;
  return uplinkSummary({
    condition: r.health.condition,
    refused: r.health.refused,
    since: r.health.since,
    mappedVariables: r.mappedVariables,
    unknownVariables: r.unknownVariables.count,
    suspectVariables: r.unknownVariables.suspects ?? 0,
    refusedVariables: r.unknownVariables.quarantined ?? 0,
    foundPerMinute: found,
    // The found rate limits delivery while work waits for it, or while a 429's pause lasts.
    rateLimits: found !== null && (r.budget.rate.paused_ms > 0 || r.buffer.rows > r.batchSize),
    backlogGrows: r.trend.growing,
    budgetPerMinute: r.budget.sharePerMinute,
    budgetSaturated: r.budget.usedLastMinute >= BUDGET_SATURATED * r.budget.pacePerMinute,
  });
}

/** The sources' variable counts added up. */
export function variableTotals(sources: readonly Pick<SourceStatus, 'variables'>[]): QualitySummary {
  const out: QualitySummary = { ...emptyCounts(), total: 0 };
  for (const s of sources) {
    if (!s.variables) continue;
    out.total += s.variables.total;
    for (const q of QUALITIES) out[q] += s.variables[q];
  }
  return out;
}

/** The gateway's status from its readings. Pure: same readings, same status. */
export function gatewayStatus(r: StatusReadings): GatewayStatus {
  const { buffer: b, sync: s, health: h, now } = r;
  const rate = s.ratePerSecond;
  const outlook = outlookOf(r);
  const rf = r.budget.rate;
  return {
    gateway: {
      name: r.gateway.name,
      version: r.gateway.version,
      started_at: new Date(r.gateway.startedAt).toISOString(),
      uptime_s: Math.round((now - r.gateway.startedAt) / 1000),
      pid: r.gateway.pid,
      memory: r.gateway.memory,
    },
    sources: [...r.sources],
    variables: variableTotals(r.sources),
    source_rates: r.sourceRates,
    buffer: {
      samples: b.rows,
      available: b.available,
      inflight: b.inflight,
      in_import_jobs: b.reserved,
      pending_commit: b.pendingSamples,
      used_bytes: b.usedBytes,
      disk_bytes: b.fileBytes,
      free_bytes: b.freeBytes,
      max_bytes: b.maxBytes,
      oldest_unsent_age_s: b.oldestTs === null ? null : Math.max(0, (now - b.oldestTs) / 1000),
      max_unsent_age_s: r.maxUnsentAgeMs / 1000,
      live_rows: b.liveRows,
      sealed_samples: b.sealedSamples,
      chunks: b.chunks,
      chunks_sealed_total: b.chunksSealedTotal,
      bytes_per_sample: b.bytesPerSample,
      compression_ratio: b.compressionRatio,
      capacity_s: b.capacitySeconds,
      committed_total: b.committedTotal,
      dropped_total: b.droppedTotal,
      writable: b.writable,
      last_write_error: b.lastWriteError,
      refusing: b.refusing,
      full_episode: b.fullEpisode,
      recovered_from: r.recoveredFrom,
    },
    uplink: {
      state: uplinkStateOf(r),
      condition: h.condition,
      reason: h.reason,
      since: new Date(h.since).toISOString(),
      resume_in_ms: h.resumeInMs,
      budget_per_minute: r.budget.perMinute,
      share_per_minute: r.budget.sharePerMinute,
      pace_per_minute: r.budget.pacePerMinute,
      rate: { found_per_minute: rf.found_per_minute, limit_seen_per_minute: rf.limit_seen_per_minute, rate_limited_total: rf.rate_limited_total, last_rate_limited_at: rf.last_rate_limited_at === null ? null : new Date(rf.last_rate_limited_at).toISOString(), paused_ms: rf.paused_ms },
      outage: r.outage,
      requests_last_minute: r.budget.usedLastMinute,
      freshest_delivered_age_s: s.freshestDeliveredTs === null ? null : Math.max(0, (now - s.freshestDeliveredTs) / 1000),
      sync: { rate_per_s: rate, delivered_total: s.deliveredTotal, inflight_batches: s.inflightBatches, set_aside_total: s.setAsideTotal, oldest_first_batches: s.oldestFirstBatches },
      unknown_variables: r.unknownVariables,
    },
    backfill: r.backfill,
    gaps: r.gaps,
    set_aside: { samples: r.setAside },
    store: r.store,
    backlog_eta_s: outlook.drain_eta_s,
    delivery: outlook,
    ...(r.annotations ? { annotations: r.annotations } : {}),
    ...(r.fleet ? { fleet: r.fleet } : {}),
    config: r.config,
  };
}
