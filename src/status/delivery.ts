import type { BackfillStats } from '../uplink/backfill.js';
import type { BacklogTrend } from '../uplink/backlog-meter.js';

/** How delivery compares with ingest: what the Overview's Backlog card says, from measured figures only. */
export interface DeliveryOutlook {
  /**
   * idle: nothing waits. growing: the backlog grew over the last 30 s and is not shrinking now.
   * draining: it shrinks (drain_eta_s says when it is gone). keeping_up: it neither grows nor
   * shrinks, or what waits goes with the next batches. unknown: too early to say.
   */
  state: 'idle' | 'keeping_up' | 'draining' | 'growing' | 'unknown';
  /** Samples per second that arrive and can be delivered (set-aside and unknown variables' samples excluded). */
  ingest_per_s: number;
  /** Delivered per second recently, sync path and import jobs together, and each. */
  delivered_per_s: number;
  sync_per_s: number;
  import_per_s: number;
  /** What the sync path can carry at the pace in force (the rate found from 429s, a fleet share, the configured ceiling). */
  sync_capacity_per_s: number;
  /** Ingest is above what the sync path can carry: only import jobs can keep the backlog down. */
  above_sync_capacity: boolean;
  /**
   * Import jobs: off (uplink.backfill.enabled false), running (some in flight), waiting (they will
   * start by the rule of uplink.backfill.threshold); null when none is needed.
   */
  import_jobs: 'off' | 'running' | 'waiting' | null;
  /** Change of the backlog over the last 30 s, and how far it rose from its low point in them (null before 30 s were measured); since when it grows (ISO). */
  backlog_change_30s: number | null;
  backlog_rise_30s: number | null;
  growing_since: string | null;
  /** Seconds until the backlog is delivered, from measured delivery and the import-job rule; null without a basis. */
  drain_eta_s: number | null;
  /** Why there is no estimate (null when there is one). */
  no_estimate_because: string | null;
}

/** The drain estimate needs this much measured time behind its rates. */
export const ESTIMATE_MIN_MEASURED_S = 10;
/** A sync net drain within this fraction of ingest is no drain. */
const BALANCE = 0.02;

export interface OutlookReadings {
  /** Unsent samples, and those of them in import jobs. */
  backlog: number;
  inJobs: number;
  /** Age of the oldest unsent sample (s), null when nothing waits. */
  oldestAgeS: number | null;
  batchSize: number;
  trend: BacklogTrend;
  backfill: Pick<BackfillStats, 'enabled' | 'jobs_in_flight' | 'wants_jobs' | 'keep_samples' | 'job_turnaround_s' | 'oldest_job_age_s' | 'sync_capacity_per_s' | 'threshold_s'>;
}

/**
 * The delivery outlook, pure. "growing" comes first and whenever the backlog grew for 30 s (never
 * "keeping up" or a drain time then). The drain time models what will happen from what was
 * measured: import jobs in flight finish after the turnaround measured on the last ones; a backlog
 * the sync path cannot drain within uplink.backfill.threshold goes into a job once its oldest
 * sample passes the threshold (import-trigger.ts); the rest drains at the measured sync rate less
 * the deliverable ingest.
 */
export function deliveryOutlook(r: OutlookReadings): DeliveryOutlook {
  const t = r.trend;
  const bf = r.backfill;
  const aboveCapacity = t.deliverableIngestPerS > bf.sync_capacity_per_s;
  const importJobs: DeliveryOutlook['import_jobs'] = bf.jobs_in_flight > 0 ? 'running' : !bf.enabled ? (aboveCapacity ? 'off' : null) : bf.wants_jobs || aboveCapacity ? 'waiting' : null;
  const base = {
    ingest_per_s: t.deliverableIngestPerS,
    delivered_per_s: t.syncPerS + t.importPerS,
    sync_per_s: t.syncPerS,
    import_per_s: t.importPerS,
    sync_capacity_per_s: bf.sync_capacity_per_s,
    above_sync_capacity: aboveCapacity,
    import_jobs: importJobs,
    backlog_change_30s: t.change30s,
    backlog_rise_30s: t.rise30s,
    growing_since: t.growingSince === null ? null : new Date(t.growingSince).toISOString(),
  };
  const none = (state: DeliveryOutlook['state'], because: string): DeliveryOutlook => ({ ...base, state, drain_eta_s: null, no_estimate_because: because });
  if (r.backlog === 0) return none('idle', 'nothing waits');
  if (t.growing) return none('growing', `the backlog rose by ${Math.round(t.rise30s ?? 0)} samples in 30 s: less is delivered than arrives`);
  if (t.measuredS < ESTIMATE_MIN_MEASURED_S) return none('unknown', 'just started: nothing measured yet');
  const eta = drainEstimate(r);
  if (typeof eta === 'string') return none('unknown', eta);
  if (eta === -1) return none('unknown', 'more arrives than the sync path delivers, yet the backlog does not grow: the rates are changing');
  if (eta === null) return none('keeping_up', 'delivery matches arrivals: the backlog neither grows nor shrinks');
  if (eta === 0) return none('keeping_up', 'keeping up: what waits goes with the next batches');
  return { ...base, state: 'draining', drain_eta_s: eta, no_estimate_because: null };
}

/**
 * Seconds to drain; 0 when what waits goes with the next batches; null when nothing drains it; -1
 * when the rates disagree with the trend; a string: no basis. The ingest is the lower of the last
 * 5 s and the last 2 s: when a source stops, what it sent no longer counts seconds later.
 */
function drainEstimate(r: OutlookReadings): number | null | string {
  const { trend: t, backfill: bf } = r;
  const ingest = Math.min(t.deliverableIngestPerS, t.deliverableIngestRecentPerS);
  const net = t.syncPerS - ingest;
  const draining = net > BALANCE * Math.max(ingest, 1);
  const syncRows = Math.max(0, r.backlog - r.inJobs);
  const syncEta = (rows: number) => (rows <= r.batchSize ? 0 : draining ? rows / net : Infinity);
  const turnaround = bf.job_turnaround_s;
  let eta: number;
  if (bf.jobs_in_flight > 0) {
    if (turnaround === null) return 'no import job has finished yet to time one';
    const jobLeft = Math.max(1, turnaround - (bf.oldest_job_age_s ?? 0));
    eta = Math.max(jobLeft, syncEta(Math.min(syncRows, bf.wants_jobs ? bf.keep_samples : syncRows)));
  } else if (bf.enabled && syncEta(syncRows) > bf.threshold_s) {
    // The import-job rule takes the backlog once its oldest sample passes the threshold.
    if (turnaround === null) return 'an import job will take the backlog, and none has finished yet to time one';
    const wait = Math.max(0, bf.threshold_s - (r.oldestAgeS ?? 0));
    const left = Math.max(0, syncRows - Math.max(0, net) * wait);
    eta = wait + Math.max(turnaround, syncEta(Math.min(left, bf.keep_samples)));
  } else eta = syncEta(syncRows);
  if (Number.isFinite(eta)) return eta;
  return net < -BALANCE * Math.max(ingest, 1) && bf.jobs_in_flight === 0 ? -1 : null;
}
