import type { GapView } from '../buffer/gaps.js';
import type { BufferStats } from '../buffer/sample-buffer.js';
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
    /**
     * Machine variables the service refuses as unknown (issue 24 §1): their samples are set aside,
     * the rest is delivered. Not an outage: the condition stays `ok`.
     */
    unknown_variables: UnknownVariablesSnapshot;
  };
  /** Import-job backfill. */
  backfill: BackfillStats;
  set_aside: { samples: number };
  /** The gap ledger (issue 14): open gaps and the newest ones, in the /api/gaps shape. */
  gaps?: { open: number; recent: GapView[]; annotate: boolean };
  /** Backlog ETA in seconds at current rates (null when nothing is pending or the rate is 0). */
  backlog_eta_s: number | null;
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
  /** uplink.max_unsent_age in ms. */
  maxUnsentAgeMs: number;
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

/**
 * Seconds until the backlog is delivered at the current rates, or null when nothing is pending or
 * it does not shrink. The backlog shrinks at what is delivered (sync and import jobs) minus what
 * keeps arriving. Also what `gateway_backlog_eta_seconds` reports (-1 for null).
 */
export function backlogEtaSeconds(r: { backlog: number; syncRate: number; importRate: number; ingestRate: number }): number | null {
  const drain = r.syncRate + r.importRate - r.ingestRate;
  return r.backlog > 0 && drain > 0 ? r.backlog / drain : null;
}

/** The gateway's status from its readings. Pure: same readings, same status. */
export function gatewayStatus(r: StatusReadings): GatewayStatus {
  const { buffer: b, sync: s, health: h, now } = r;
  const rate = s.ratePerSecond;
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
    backlog_eta_s: backlogEtaSeconds({ backlog: b.rows, syncRate: rate, importRate: r.backfill.rate_per_s, ingestRate: r.ingestRate }),
    ...(r.annotations ? { annotations: r.annotations } : {}),
    ...(r.fleet ? { fleet: r.fleet } : {}),
    config: r.config,
  };
}
