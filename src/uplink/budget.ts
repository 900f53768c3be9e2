import type { Clock } from '../core/clock.js';
import type { Metrics } from '../core/metrics.js';
import { RateFinder, type RateFinderSnapshot } from './rate-finder.js';

/**
 * Priority of a call in the shared request budget. A lower rank goes first when several calls
 * wait (DESIGN.md: "annotations ahead of polls ahead of bulk data"); token calls come first of all
 * because every other call needs one. `background` is for reads no delivery depends on (the
 * console's catalog, issue 21 §4): they go only when no other call waits, never ahead of data.
 */
export type Priority = 'token' | 'annotation' | 'poll' | 'upload' | 'data' | 'background';
const RANK: Record<Priority, number> = { token: 0, annotation: 1, poll: 2, upload: 3, data: 4, background: 5 };
const PRIORITIES = Object.keys(RANK) as Priority[];

/**
 * Calls of higher rank (token calls excepted) that may go in a row ahead of a waiting `data` call.
 * Strict priority let import-job uploads and polls take every slot of a small budget (a fleet share
 * of 1,500/min split across gateways, §8) while the sync path waited: live values went 7–11 s stale
 * during a backfill. With 1, the sync path gets at least every other slot while it waits, and the
 * rest stays in the order above; when it does not wait, the others get every slot.
 */
const MAX_AHEAD_OF_DATA = 1;

interface Waiter {
  resolve: () => void;
  reject: (err: unknown) => void;
  enqueuedAt: number;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/**
 * One request budget for every call to the tracking service (interface §8: 1,500 requests per
 * minute per IP across all endpoints, token calls included).
 *
 * The pace is the lowest of three: `perMinute` (uplink.requests_per_minute, a ceiling), a fleet
 * share (setRate, budget-sharing.ts) and the rate found from the service's 429s (rate-finder.ts).
 * After a 429 every class waits out the pause, then requests go one at a time at the new pace.
 *
 * Two rules together:
 * - a token bucket paces requests at `perMinute / 60` per second with a burst of one second's
 *   worth, so load is smooth rather than a burst at the top of each minute;
 * - a sliding window guarantees that no 60 s window ever holds more than `perMinute` requests,
 *   whatever the bucket allowed, because the service counts per sliding minute.
 * Time comes from the monotonic clock.
 */
export class RequestBudget {
  private ratePerMs: number;
  private capacity: number;
  /** Pacing rate in force (requests/min): the lowest of `perMinute`, the fleet share and the found rate. */
  private pacePerMinute: number;
  /** The fleet share (setRate); `perMinute` without budget sharing. */
  private share: number;
  /** The rate the service allows, found from its 429s. */
  readonly finder: RateFinder;
  /** waitedTotalMs() when the finder last looked: calls that waited since say the budget limits the work. */
  private waitedAtProbe = 0;
  /** Total ms during which at least one call waited (a sign that the budget, not the work, limits). */
  private waitedMs = 0;
  private waitingSince: number | null = null;
  private tokens: number;
  private lastRefill: number;
  /** Monotonic times of recent grants, as a ring of `perMinute` entries (the sliding window). */
  private readonly window: Float64Array | null;
  private windowHead = 0;
  private windowCount = 0;
  private readonly queues = new Map<Priority, Waiter[]>(PRIORITIES.map((p) => [p, []]));
  private timer: NodeJS.Timeout | null = null;
  private granted = 0;
  /** Non-token calls granted in a row while a `data` call waited (MAX_AHEAD_OF_DATA). */
  private aheadOfData = 0;

  constructor(
    readonly perMinute: number,
    private readonly clock: Clock,
    private readonly metrics?: Metrics,
  ) {
    if (!(perMinute > 0)) throw new RangeError(`requests per minute must be positive, got ${perMinute}`);
    this.ratePerMs = perMinute / 60_000;
    this.capacity = Math.max(1, Math.floor(perMinute / 60));
    this.pacePerMinute = perMinute;
    this.share = perMinute;
    this.tokens = this.capacity;
    this.lastRefill = clock.monotonic();
    this.finder = new RateFinder({ monotonic: () => clock.monotonic(), now: () => clock.now() });
    // A window of more than 200k entries would cost memory for budgets no real service grants.
    this.window = perMinute <= 200_000 ? new Float64Array(perMinute) : null;
    metrics?.uplinkBudgetPerMinute.set(perMinute);
    metrics?.uplinkPacePerMinute.set(perMinute);
    metrics?.uplinkRateFound.set(-1);
  }

  /** The pacing rate in force, requests per minute (≤ `perMinute`). */
  get ratePerMinute(): number {
    return this.pacePerMinute;
  }

  /**
   * Sets the fleet share (src/uplink/budget-sharing.ts), a ceiling under `perMinute`. The sliding
   * window keeps `perMinute` as the hard ceiling; only the token bucket follows the pace, so a share
   * that shrinks slows this gateway at once without stalling it until its past minute ages out (the
   * service's window frees slots at the old aggregate rate, so the fleet as a whole stays within it).
   */
  setRate(perMinute: number): void {
    this.share = Math.min(this.perMinute, Math.max(1, perMinute));
    this.applyPace();
  }

  /** The fleet share in force (`perMinute` without budget sharing). */
  get sharePerMinute(): number {
    return this.share;
  }

  /** The epoch a request granted now belongs to; give it back with `answered()`. */
  ticket(): number {
    return this.finder.epoch;
  }

  /**
   * The service answered a request granted in `ticket` (every answer, the token endpoint's too):
   * a 429 lowers the pace and pauses every class (rate-finder.ts), anything else counts as admitted.
   */
  answered(status: number, ticket: number, retryAfterMs?: number): void {
    if (status !== 429) {
      this.finder.admittedOne();
      return;
    }
    const now = this.clock.monotonic();
    this.refill(now);
    this.finder.rateLimited(ticket, this.pacePerMinute, retryAfterMs);
    // No burst after the pause: requests go one at a time at the new pace.
    this.tokens = Math.min(this.tokens, 0);
    this.applyPace();
  }

  /** What the rate finder knows, for the status. */
  rateSnapshot(): RateFinderSnapshot {
    return this.finder.snapshot();
  }

  /** Pace = min(ceiling, share, found); the bucket follows and a waiting call is re-planned. */
  private applyPace(): void {
    const found = this.finder.found;
    const next = Math.max(1, Math.min(this.share, found ?? Infinity));
    this.metrics?.uplinkRateFound.set(found === null ? -1 : found);
    if (next !== this.pacePerMinute) {
      const now = this.clock.monotonic();
      this.refill(now);
      this.pacePerMinute = next;
      this.ratePerMs = next / 60_000;
      this.capacity = Math.max(1, Math.floor(next / 60));
      this.tokens = Math.min(this.tokens, this.capacity);
      this.metrics?.uplinkPacePerMinute.set(next);
    }
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.pump();
    }
  }

  /** Lets the finder probe upward when due: only while calls waited for the budget since it last looked. */
  private probe(): void {
    if (this.finder.found === null) return;
    const waited = this.waitedTotalMs();
    const saturated = waited > this.waitedAtProbe || !this.noneWaiting();
    if (this.finder.probe(saturated, this.share)) {
      this.waitedAtProbe = waited;
      this.applyPace();
    } else if (!saturated) this.waitedAtProbe = waited;
  }

  /** Ms during which calls waited for the budget, in total (its growth rate tells saturation). */
  waitedTotalMs(): number {
    return this.waitedMs + (this.waitingSince === null ? 0 : this.clock.monotonic() - this.waitingSince);
  }

  /** Resolves when this call may go. Rejects if `signal` aborts first. */
  acquire(priority: Priority, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
    this.probe();
    if (this.noneWaiting() && this.tryTake()) {
      if (priority === 'data') this.aheadOfData = 0;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, enqueuedAt: this.clock.monotonic(), signal };
      if (signal) {
        waiter.onAbort = () => {
          const q = this.queues.get(priority)!;
          const i = q.indexOf(waiter);
          if (i >= 0) q.splice(i, 1);
          if (this.noneWaiting() && this.waitingSince !== null) {
            this.waitedMs += this.clock.monotonic() - this.waitingSince;
            this.waitingSince = null;
          }
          reject(signal.reason ?? new Error('aborted'));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.queues.get(priority)!.push(waiter);
      if (this.waitingSince === null) this.waitingSince = this.clock.monotonic();
      this.pump();
    });
  }

  /** Requests granted in the last 60 s (for status and the benchmark). */
  usedLastMinute(): number {
    if (!this.window) return 0;
    const cutoff = this.clock.monotonic() - 60_000;
    let n = 0;
    for (let i = 0; i < this.windowCount; i++) {
      const idx = (this.windowHead - 1 - i + this.window.length) % this.window.length;
      if (this.window[idx] > cutoff) n++;
      else break;
    }
    return n;
  }

  /** Calls waiting, by priority. */
  waiting(): Record<Priority, number> {
    const out = {} as Record<Priority, number>;
    for (const p of PRIORITIES) out[p] = this.queues.get(p)!.length;
    return out;
  }

  get totalGranted(): number {
    return this.granted;
  }

  /** Rejects every waiter (shutdown). */
  close(reason: Error = new Error('request budget closed')): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const q of this.queues.values()) {
      for (const w of q.splice(0)) {
        if (w.onAbort) w.signal?.removeEventListener('abort', w.onAbort);
        w.reject(reason);
      }
    }
  }

  private noneWaiting(): boolean {
    for (const q of this.queues.values()) if (q.length > 0) return false;
    return true;
  }

  /** Tokens accrue at the pace, but not during a pause after a 429 (no burst when it ends). */
  private refill(now: number): void {
    const from = Math.max(this.lastRefill, this.finder.pausedUntilMono);
    if (now > from) this.tokens = Math.min(this.capacity, this.tokens + (now - from) * this.ratePerMs);
    if (now > this.lastRefill) this.lastRefill = now;
  }

  /** Milliseconds until a grant is possible (0 = now). */
  private delayUntilGrant(now: number): number {
    this.refill(now);
    let delay = Math.max(this.finder.pauseLeft(now), this.tokens >= 1 ? 0 : (1 - this.tokens) / this.ratePerMs);
    if (this.window && this.windowCount === this.window.length) {
      // The window is full: the oldest grant must leave it first.
      const oldest = this.window[this.windowHead % this.window.length];
      delay = Math.max(delay, oldest + 60_000 - now);
    }
    return Math.max(0, delay);
  }

  private tryTake(): boolean {
    const now = this.clock.monotonic();
    if (this.delayUntilGrant(now) > 0) return false;
    this.tokens -= 1;
    if (this.window) {
      this.window[this.windowHead] = now;
      this.windowHead = (this.windowHead + 1) % this.window.length;
      this.windowCount = Math.min(this.window.length, this.windowCount + 1);
    }
    this.granted += 1;
    return true;
  }

  private nextWaiter(): { waiter: Waiter; queue: Waiter[]; priority: Priority } | null {
    const data = this.queues.get('data')!;
    const dataTurn = data.length > 0 && this.aheadOfData >= MAX_AHEAD_OF_DATA && this.queues.get('token')!.length === 0;
    if (dataTurn) return { waiter: data[0], queue: data, priority: 'data' };
    for (const p of PRIORITIES) {
      const q = this.queues.get(p)!;
      if (q.length > 0) return { waiter: q[0], queue: q, priority: p };
    }
    return null;
  }

  private pump(): void {
    if (this.timer) return;
    this.probe();
    for (;;) {
      const next = this.nextWaiter();
      if (!next) {
        if (this.waitingSince !== null) {
          this.waitedMs += this.clock.monotonic() - this.waitingSince;
          this.waitingSince = null;
        }
        return;
      }
      const now = this.clock.monotonic();
      const delay = this.delayUntilGrant(now);
      if (delay > 0) {
        this.timer = setTimeout(() => {
          this.timer = null;
          this.pump();
        }, Math.ceil(delay));
        return;
      }
      this.tryTake();
      next.queue.shift();
      if (next.priority === 'data') this.aheadOfData = 0;
      else if (next.priority !== 'token' && this.queues.get('data')!.length > 0) this.aheadOfData += 1;
      if (next.waiter.onAbort) next.waiter.signal?.removeEventListener('abort', next.waiter.onAbort);
      this.metrics?.uplinkBudgetWaitSeconds.inc((now - next.waiter.enqueuedAt) / 1000);
      next.waiter.resolve();
    }
  }
}
