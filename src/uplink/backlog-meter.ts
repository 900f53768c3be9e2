import type { Clock } from '../core/clock.js';

/**
 * What the backlog did, measured once a second: its size and what was delivered (sync and import
 * together). From these two series come the figures the status shows and import jobs start from,
 * with nothing assumed:
 * - the deliverable ingest is what was delivered plus what the backlog grew by: samples set aside
 *   (unknown variables, refusals) leave the backlog undelivered, so they are not counted as ingest
 *   the uplink has to carry;
 * - the backlog grows when it stands more than a batch above its lowest point of the last 30 s and
 *   is not shrinking now: a backlog that climbs again right after an import job took most of it
 *   grows, even though it is smaller than 30 s ago.
 */
export interface BacklogReading {
  /** Monotonic ms. */
  t: number;
  backlog: number;
  deliveredSync: number;
  deliveredImport: number;
}

/** The backlog grows when it grew over this window... */
export const GROWTH_WINDOW_S = 30;
/** ...and did not shrink over this one (a drain that just began is a drain). */
const RECENT_WINDOW_S = 5;
/** Deliverable ingest and sync delivery are measured over this window... */
export const RATE_WINDOW_S = 5;
/** ...and the ingest over this one too: when the source stops, the drain estimate follows within seconds. */
const RECENT_RATE_S = 2;
const KEEP_S = 120;

export interface BacklogTrend {
  /** Change of the backlog over the last GROWTH_WINDOW_S (or what a young meter has; null before RATE_WINDOW_S). */
  change30s: number | null;
  /** How far it stands above its lowest point of the last GROWTH_WINDOW_S (null likewise). */
  rise30s: number | null;
  /** True when the backlog grew over the last 30 s and is not shrinking now. */
  growing: boolean;
  /** Wall-clock ms since when it grows (null when it does not). */
  growingSince: number | null;
  /** Samples per second that arrived and can be delivered (set aside excluded), over RATE_WINDOW_S. */
  deliverableIngestPerS: number;
  /** The same over the last RECENT_RATE_S. */
  deliverableIngestRecentPerS: number;
  /** Samples per second delivered by the sync path and by import jobs, over RATE_WINDOW_S. */
  syncPerS: number;
  importPerS: number;
  /** Seconds the meter has measured (the basis of the rates above). */
  measuredS: number;
}

export class BacklogMeter {
  private readonly readings: BacklogReading[] = [];
  private timer: NodeJS.Timeout | null = null;
  private growingSinceWall: number | null = null;

  constructor(
    private readonly o: {
      clock: Clock;
      /** Unsent samples (queued, in flight, in import jobs). */
      backlog: () => number;
      /** Totals delivered since start. */
      delivered: () => { sync: number; import: number };
      /** A change smaller than this is noise (the batch size: what the next request takes). */
      tolerance: number;
    },
  ) {}

  start(): void {
    if (this.timer) return;
    this.sample();
    this.timer = setInterval(() => this.sample(), 1_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Takes a reading now (the timer does it every second; tests call it). */
  sample(): void {
    let backlog: number;
    let delivered: { sync: number; import: number };
    try {
      backlog = this.o.backlog();
      delivered = this.o.delivered();
    } catch {
      return; // the buffer is closing
    }
    const t = this.o.clock.monotonic();
    this.readings.push({ t, backlog, deliveredSync: delivered.sync, deliveredImport: delivered.import });
    while (this.readings.length > 0 && t - this.readings[0].t > KEEP_S * 1000) this.readings.shift();
    const growing = this.isGrowing();
    if (!growing) this.growingSinceWall = null;
    else if (this.growingSinceWall === null) this.growingSinceWall = this.o.clock.now() - GROWTH_WINDOW_S * 1000;
  }

  trend(): BacklogTrend {
    const last = this.readings[this.readings.length - 1];
    const rateOver = (seconds: number) => {
      const base = this.at(seconds);
      const span = last && base ? (last.t - base.t) / 1000 : 0;
      return (f: (r: BacklogReading) => number) => (span > 0 ? (f(last) - f(base!)) / span : 0);
    };
    const rate = rateOver(RATE_WINDOW_S);
    const recent = rateOver(RECENT_RATE_S);
    const syncPerS = rate((r) => r.deliveredSync);
    const importPerS = rate((r) => r.deliveredImport);
    const ingest = (f: typeof rate) => Math.max(0, f((r) => r.deliveredSync) + f((r) => r.deliveredImport) + f((r) => r.backlog));
    const old = this.growthBase();
    return {
      change30s: last && old ? last.backlog - old.backlog : null,
      rise30s: last && old ? last.backlog - this.lowSince(old.t) : null,
      growing: this.isGrowing(),
      growingSince: this.growingSinceWall,
      deliverableIngestPerS: ingest(rate),
      deliverableIngestRecentPerS: ingest(recent),
      syncPerS,
      importPerS,
      measuredS: last && this.readings.length > 1 ? (last.t - this.readings[0].t) / 1000 : 0,
    };
  }

  private isGrowing(): boolean {
    const last = this.readings[this.readings.length - 1];
    const old = this.growthBase();
    const recent = this.at(RECENT_WINDOW_S);
    if (!last || !old || !recent) return false;
    return last.backlog - this.lowSince(old.t) > this.o.tolerance && last.backlog - recent.backlog >= -this.o.tolerance;
  }

  /** The reading the growth is measured from: 30 s ago; a young meter judges on what it has once that spans RATE_WINDOW_S. */
  private growthBase(): BacklogReading | null {
    const full = this.at(GROWTH_WINDOW_S, true);
    if (full) return full;
    const last = this.readings[this.readings.length - 1];
    return last && last.t - this.readings[0].t >= RATE_WINDOW_S * 1000 ? this.readings[0] : null;
  }

  /** The lowest backlog read since monotonic `t`. */
  private lowSince(t: number): number {
    let low = Infinity;
    for (let i = this.readings.length - 1; i >= 0 && this.readings[i].t >= t; i--) low = Math.min(low, this.readings[i].backlog);
    return low;
  }

  /**
   * The newest reading at least `seconds` old; the oldest one when `full` is false and the history
   * is shorter. With `full`, null until the history covers the window (most of it: readings are
   * taken every second on a busy event loop).
   */
  private at(seconds: number, full = false): BacklogReading | null {
    const last = this.readings[this.readings.length - 1];
    if (!last) return null;
    const cutoff = last.t - seconds * 1000;
    for (let i = this.readings.length - 1; i >= 0; i--) if (this.readings[i].t <= cutoff) return this.readings[i];
    const first = this.readings[0];
    if (full && last.t - first.t < seconds * 900) return null;
    return first === last ? null : first;
  }
}
