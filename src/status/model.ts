import type { GapView } from '../buffer/gaps.js';
import type { BufferStats } from '../buffer/sample-buffer.js';
import { QUALITIES, emptyCounts, type QualitySummary } from '../core/quality.js';
import type { StoreStatus } from '../store/store.js';
import type { SourceStatus } from '../core/source.js';
import type { BackfillStats } from '../uplink/backfill.js';
import type { SharingStatus } from '../uplink/budget-sharing.js';
import type { SyncSender } from '../uplink/sync-sender.js';
import type { UnknownVariablesSnapshot } from '../uplink/unknown-variables.js';
import type { UplinkCondition, UplinkHealth } from '../uplink/uplink-health.js';

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
    condition: UplinkCondition;
    reason: string;
    since: string;
    resume_in_ms: number;
    budget_per_minute: number;
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
  budget: { perMinute: number; usedLastMinute: number };
  sync: ReturnType<SyncSender['stats']>;
  backfill: BackfillStats;
  unknownVariables: UnknownVariablesSnapshot;
  /** Null when the annotations section is absent (or while annotations start). */
  annotations: Record<string, unknown> | null;
  /** Null without fleet.mqtt. */
  fleet: { broker: FleetBrokerStatus; budget_sharing: SharingStatus | null } | null;
  config: ConfigStatus;
}

/** How delivery compares with ingest (issue 24 §1): what the Overview's Backlog card says. */
export interface DeliveryOutlook {
  /**
   * idle: nothing waits. keeping_up: what waits is what the next batches take (less than a batch,
   * or delivery matches ingest). draining: the backlog shrinks (drain_eta_s says when it is gone).
   * growing: less is delivered than arrives. unknown: too early to say (no basis yet).
   */
  state: 'idle' | 'keeping_up' | 'draining' | 'growing' | 'unknown';
  ingest_per_s: number;
  /** Delivered per second recently, sync path and import jobs together. */
  delivered_per_s: number;
  /** What the sync path can carry at the request budget (its share of uplink.requests_per_minute × batch_size). */
  sync_capacity_per_s: number;
  /** Ingest is above what the sync path can carry: only import jobs can keep the backlog down. */
  above_sync_capacity: boolean;
  /**
   * Import jobs, when ingest is above the sync path's capacity: off (uplink.backfill.enabled false),
   * waiting (the backlog is below backfill.threshold_samples, so none runs yet), keeping_up or
   * falling_behind (sync plus import deliveries against ingest); null when not above capacity.
   */
  import_jobs: 'off' | 'waiting' | 'keeping_up' | 'falling_behind' | null;
  /** Seconds until the backlog is delivered, from what was delivered recently; null without a basis. */
  drain_eta_s: number | null;
  /** Why there is no estimate (null when there is one). */
  no_estimate_because: string | null;
}

/** The drain estimate needs this much running time behind its delivery rate (the sync meter's window). */
export const ESTIMATE_MIN_UPTIME_S = 10;
/** ...and this many samples delivered per window: less is noise (14 samples after a restart gave "82 min"). */
export const ESTIMATE_MIN_DELIVERED = 200;
/** Delivery within this fraction of ingest is "keeping up", not a drain or a growth. */
const BALANCE = 0.02;

/**
 * The delivery outlook, pure. The estimate rests on what was actually delivered recently (sync
 * and import rates), never on the budget: without ESTIMATE_MIN_UPTIME_S of running time and
 * ESTIMATE_MIN_DELIVERED samples delivered over the sync meter's 10 s window there is no basis
 * and it is null. A backlog of less than one batch is what the next batch takes, not a drain.
 */
export function deliveryOutlook(r: { backlog: number; ingestRate: number; syncRate: number; importRate: number; syncCapacity: number; batchSize: number; uptimeS: number; backfillEnabled: boolean; thresholdSamples: number }): DeliveryOutlook {
  const delivered = r.syncRate + r.importRate;
  const aboveCapacity = r.ingestRate > r.syncCapacity;
  const basis = r.uptimeS >= ESTIMATE_MIN_UPTIME_S && delivered * 10 >= ESTIMATE_MIN_DELIVERED;
  let importJobs: DeliveryOutlook['import_jobs'] = null;
  if (aboveCapacity) {
    if (!r.backfillEnabled) importJobs = 'off';
    else if (r.importRate === 0 && r.backlog < r.thresholdSamples) importJobs = 'waiting';
    else importJobs = delivered >= r.ingestRate * (1 - BALANCE) ? 'keeping_up' : 'falling_behind';
  }
  const base = { ingest_per_s: r.ingestRate, delivered_per_s: delivered, sync_capacity_per_s: r.syncCapacity, above_sync_capacity: aboveCapacity, import_jobs: importJobs };
  if (r.backlog === 0) return { ...base, state: 'idle', drain_eta_s: null, no_estimate_because: 'nothing waits' };
  // A small plant delivers fewer than ESTIMATE_MIN_DELIVERED in the window yet keeps up: less than
  // a batch waits, no more than 10 s of delivery, and what arrives is delivered. That is no basis for a drain time, but it is a
  // state to show (the demo's 15 samples/s said "too little delivered recently to estimate").
  if (r.backlog <= r.batchSize && r.backlog <= delivered * 10 && delivered >= r.ingestRate * (1 - BALANCE)) return { ...base, state: 'keeping_up', drain_eta_s: null, no_estimate_because: 'keeping up: what waits goes with the next batches' };
  if (!basis) {
    // Above capacity the backlog grows whatever was measured: say so rather than "unknown".
    if (aboveCapacity && importJobs !== 'keeping_up') return { ...base, state: 'growing', drain_eta_s: null, no_estimate_because: 'ingest is above what the sync path can carry' };
    return { ...base, state: 'unknown', drain_eta_s: null, no_estimate_because: r.uptimeS < ESTIMATE_MIN_UPTIME_S ? 'just started: nothing measured yet' : 'too little delivered recently to estimate' };
  }
  const drain = delivered - r.ingestRate;
  if (drain < -BALANCE * r.ingestRate) return { ...base, state: 'growing', drain_eta_s: null, no_estimate_because: 'the backlog grows: less is delivered than arrives' };
  if (r.backlog <= r.batchSize || drain <= BALANCE * Math.max(r.ingestRate, 1)) return { ...base, state: 'keeping_up', drain_eta_s: null, no_estimate_because: 'keeping up: what waits goes with the next batches' };
  return { ...base, state: 'draining', drain_eta_s: r.backlog / drain, no_estimate_because: null };
}

/**
 * The outlook from the readings the status and `gateway_backlog_eta_seconds` share, so the metric
 * and the console say the same (issue 24 §1: the metric kept the old estimate, 82 min for 14
 * samples after a restart).
 */
export function outlookOf(r: { backlog: number; ingestRate: number; sync: { ratePerSecond: number }; backfill: Pick<StatusReadings['backfill'], 'rate_per_s' | 'sync_capacity_per_s' | 'enabled' | 'threshold_samples'>; batchSize: number; uptimeS: number }): DeliveryOutlook {
  return deliveryOutlook({
    backlog: r.backlog,
    ingestRate: r.ingestRate,
    syncRate: r.sync.ratePerSecond,
    importRate: r.backfill.rate_per_s,
    syncCapacity: r.backfill.sync_capacity_per_s,
    batchSize: r.batchSize,
    uptimeS: r.uptimeS,
    backfillEnabled: r.backfill.enabled,
    thresholdSamples: r.backfill.threshold_samples,
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
  const outlook = outlookOf({ backlog: b.rows, ingestRate: r.ingestRate, sync: s, backfill: r.backfill, batchSize: r.batchSize, uptimeS: (now - r.gateway.startedAt) / 1000 });
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
      condition: h.condition,
      reason: h.reason,
      since: new Date(h.since).toISOString(),
      resume_in_ms: h.resumeInMs,
      budget_per_minute: r.budget.perMinute,
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
