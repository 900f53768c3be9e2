import { backoffDelay } from '../core/backoff.js';
import { RATE_LIMIT_BACKOFF } from './retry-policy.js';

/**
 * Finds the request rate the service allows this gateway, from its answers (interface §8: 1,500
 * requests per minute per IP address, all endpoints together; at a plant that address is a NAT
 * shared with other gateways and tools, so this gateway's real share is unknown and changes).
 * The configured budget (and a fleet share) is only a ceiling; the pace is the lower of the
 * ceiling and what was found.
 *
 * - A 429 says the address's sliding minute is full. What the service admitted from this gateway
 *   over the last minute (answers other than 429) is then its share: the found rate becomes that,
 *   less a margin (the service's window holds exactly those, whether it has run a minute or a
 *   second). The 429s of requests granted before that cut are the tail of the same wave: they
 *   lengthen the pause to their Retry-After, and cut nothing.
 * - Every counted 429 pauses every request class: 1 s doubling to 30 s with about ±500 ms of jitter
 *   while 429s follow each other (§8 retry guidance), and never less than the Retry-After header.
 *   After the pause, requests go one at a time at the new pace: no sender's success releases the
 *   others in a burst.
 * - Probing upward: back to just under the rate where the last 429 came within a minute or two,
 *   then slowly across it (so a found limit is hit again only every few minutes: one 429 in about
 *   a hundred requests at 30/min), and faster (doubling steps) once above it without a 429: the
 *   other clients may have gone. It probes only while the budget limits the work (calls wait for
 *   it); back at the ceiling, nothing is found any more.
 */

/** Margin under the share measured at a 429. */
const CUT_MARGIN = 0.97;
/** No probing for this long after a cut: the service's window is a minute. */
export const PROBE_HOLD_MS = 60_000;
/** Time between two probes upward (while the budget is what limits the work). */
export const PROBE_INTERVAL_MS = 30_000;
/** Steps, as fractions of the pace: back towards the last limit, across the plateau just under it, beyond it (doubling). */
const RECOVER_STEP = 0.01;
const PLATEAU = 0.985;
const PLATEAU_STEP = 0.0025;
const BEYOND_STEP = 0.01;
const MAX_PROBE_STEP = 0.25;
/** The slowest pace: one request per minute still probes whether the service has room again. */
export const MIN_RATE_PER_MINUTE = 1;
/** Answers remembered for the admitted-in-the-last-minute count (a budget no service grants has no use for more). */
const MAX_REMEMBERED = 200_000;
const WINDOW_MS = 60_000;

export interface RateFinderSnapshot {
  /** Requests/min found to be the most this gateway may send; null while no limit was met. */
  found_per_minute: number | null;
  /** What the service admitted from this gateway in the minute before the last counted 429. */
  limit_seen_per_minute: number | null;
  /** 429 answers since the start, and the last one's wall-clock time (ms). */
  rate_limited_total: number;
  last_rate_limited_at: number | null;
  /** ms left of the pause after a 429 (every request class waits). */
  paused_ms: number;
}

export class RateFinder {
  private foundRate: number | null = null;
  private limitSeen: number | null = null;
  /** The step beyond the last limit seen; doubles with every probe there. */
  private step = BEYOND_STEP;
  private lastCutAt = -Infinity;
  private lastProbeAt = -Infinity;
  private pausedUntil = 0;
  /** Consecutive counted 429s without a success between: the step of the §8 backoff. */
  private attempt = 0;
  /** Advances at every counted 429; requests carry the epoch they were granted in. */
  private epochValue = 0;
  private total = 0;
  private lastAt: number | null = null;
  /** Monotonic times of answers other than 429 (a ring; oldest at `head`). */
  private admitted: number[] = [];
  private head = 0;

  constructor(
    private readonly o: {
      /** Monotonic ms. */
      monotonic: () => number;
      /** Wall-clock ms (for the status). */
      now: () => number;
      random?: () => number;
    },
  ) {}

  get epoch(): number {
    return this.epochValue;
  }

  /** The found rate (requests/min), or null when none was found (the ceiling applies). */
  get found(): number | null {
    return this.foundRate;
  }

  /** Monotonic ms the pause after a 429 ends (0 or past when none). */
  get pausedUntilMono(): number {
    return this.pausedUntil;
  }

  /** ms until requests may go again after a 429 (0 when not paused). */
  pauseLeft(now = this.o.monotonic()): number {
    return Math.max(0, this.pausedUntil - now);
  }

  /** The service answered something other than 429: it admitted the request. */
  admittedOne(): void {
    const now = this.o.monotonic();
    this.attempt = 0;
    this.trim(now);
    if (this.admitted.length - this.head >= MAX_REMEMBERED) this.head += 1;
    this.admitted.push(now);
  }

  /** Answers other than 429 in the last minute. */
  admittedLastMinute(): number {
    this.trim(this.o.monotonic());
    return this.admitted.length - this.head;
  }

  /**
   * The service answered 429 to a request granted in `ticket` (the epoch then), while the pace was
   * `pace` requests/min. Returns the pause in ms (every class waits).
   */
  rateLimited(ticket: number, pace: number, retryAfterMs?: number): number {
    const now = this.o.monotonic();
    this.total += 1;
    this.lastAt = this.o.now();
    const floor = retryAfterMs ?? 0;
    if (ticket !== this.epochValue) {
      // The tail of a wave already counted: the pause lasts at least what this answer asks.
      this.pausedUntil = Math.max(this.pausedUntil, now + floor);
      return this.pauseLeft(now);
    }
    this.epochValue += 1;
    this.attempt += 1;
    const share = this.admittedLastMinute();
    this.limitSeen = share;
    this.foundRate = Math.max(MIN_RATE_PER_MINUTE, Math.min(pace, share) * CUT_MARGIN);
    this.step = BEYOND_STEP;
    this.lastCutAt = now;
    this.lastProbeAt = now;
    const pause = Math.max(backoffDelay(RATE_LIMIT_BACKOFF, this.attempt, this.o.random), floor);
    this.pausedUntil = Math.max(this.pausedUntil, now + pause);
    return this.pauseLeft(now);
  }

  /**
   * Probes upward when due: called by the budget with whether its calls waited since the last
   * call (the budget, not the work, limits) and its ceiling. Returns true when the rate changed.
   */
  probe(saturated: boolean, ceiling: number): boolean {
    if (this.foundRate === null) return false;
    const now = this.o.monotonic();
    if (now - this.lastCutAt < PROBE_HOLD_MS || now - this.lastProbeAt < PROBE_INTERVAL_MS) return false;
    this.lastProbeAt = now;
    if (this.foundRate >= ceiling) {
      this.foundRate = null;
      return true;
    }
    if (!saturated) return false;
    const next = this.foundRate * (1 + this.stepNow());
    this.foundRate = next >= ceiling ? null : next;
    return true;
  }

  /** The step of the next probe by where the pace stands against the rate of the last 429. */
  private stepNow(): number {
    const seen = this.limitSeen ?? 0;
    const rate = this.foundRate ?? 0;
    if (rate < PLATEAU * seen) return RECOVER_STEP;
    if (rate < seen) return PLATEAU_STEP;
    // Above where the last 429 came and no 429 since: the others may have gone, so faster.
    const step = this.step;
    this.step = Math.min(MAX_PROBE_STEP, step * 2);
    return step;
  }

  /** Forgets what was found (a configuration reload, tests). */
  reset(): void {
    this.foundRate = null;
    this.limitSeen = null;
    this.pausedUntil = 0;
    this.attempt = 0;
  }

  snapshot(): RateFinderSnapshot {
    return {
      found_per_minute: this.foundRate === null ? null : Math.round(this.foundRate * 10) / 10,
      limit_seen_per_minute: this.limitSeen,
      rate_limited_total: this.total,
      last_rate_limited_at: this.lastAt,
      paused_ms: Math.round(this.pauseLeft()),
    };
  }

  private trim(now: number): void {
    const cutoff = now - WINDOW_MS;
    while (this.head < this.admitted.length && this.admitted[this.head] <= cutoff) this.head += 1;
    if (this.head > 4096 && this.head * 2 > this.admitted.length) {
      this.admitted = this.admitted.slice(this.head);
      this.head = 0;
    }
  }
}
