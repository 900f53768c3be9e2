/**
 * When import jobs start (interface §4.7, §8: a file of up to 128 MB costs one request plus its
 * polls, where the sync path carries 200 samples a request), from what is measured, not from the
 * configured budget: the rate the service was found to allow (the budget's pace, rate-finder.ts),
 * the deliverable ingest and whether the backlog grows (backlog-meter.ts). The rule:
 *
 *   the oldest unsent sample is older than uplink.backfill.threshold, and the backlog cannot drain
 *   through the sync path within that time: it grows, or it would take longer at the sync path's
 *   capacity less what keeps arriving.
 *
 * Once a backfill has started it goes on while more than CONTINUE_ABOVE_KEEP times what the sync
 * path keeps is left, so the last part does not wait minutes behind the sync path's pace.
 */
export interface TriggerReadings {
  /** Age of the oldest sample no sender holds, ms; null when nothing waits. */
  oldestAgeMs: number | null;
  /** Samples no sender holds. */
  available: number;
  growing: boolean;
  deliverableIngestPerS: number;
  /** Samples per second the sync path carries at the pace in force. */
  syncCapacityPerS: number;
  thresholdMs: number;
  /** A backfill is under way. */
  backfilling: boolean;
  /** The newest samples the sync path keeps for itself. */
  keepSamples: number;
}

/** A backfill under way goes on while more than this many times what the sync path keeps is left. */
export const CONTINUE_ABOVE_KEEP = 2;

export function importJobsWanted(r: TriggerReadings): { want: boolean; why: string } {
  if (r.backfilling && r.available > CONTINUE_ABOVE_KEEP * r.keepSamples) return { want: true, why: 'backfill under way' };
  const threshold = `uplink.backfill.threshold (${Math.round(r.thresholdMs / 1000)} s)`;
  if (r.oldestAgeMs === null || r.available === 0) return { want: false, why: 'nothing waits' };
  const age = Math.round(r.oldestAgeMs / 1000);
  if (r.oldestAgeMs <= r.thresholdMs) return { want: false, why: `the oldest unsent sample is ${age} s old, within ${threshold}` };
  if (r.growing) return { want: true, why: `the oldest unsent sample is ${age} s old and the backlog grows` };
  const net = r.syncCapacityPerS - r.deliverableIngestPerS;
  const drainS = net > 0 ? r.available / net : Infinity;
  if (drainS * 1000 > r.thresholdMs) {
    return { want: true, why: `the oldest unsent sample is ${age} s old and the sync path would take ${Number.isFinite(drainS) ? `${Math.round(drainS)} s` : 'for ever'} to drain ${r.available} samples` };
  }
  return { want: false, why: `the sync path drains the backlog within ${threshold}` };
}
