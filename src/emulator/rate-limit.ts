import { RATE_WINDOW_MS } from './contract.js';

/**
 * Rate limit of §8: at most `limit` requests per client IP in any 60 s, all endpoints together
 * (the token endpoint included; `/_emulator/*` is not counted). The window slides exactly: each IP
 * keeps the times of its last `limit` admitted requests in a ring, so a check is O(1) and a
 * request is admitted iff the oldest of those is at least 60 s old.
 * [A] Refused requests do not take a slot (the service answers them but need not count them).
 *
 * Another client behind the same address (fault `neighbour_per_minute`) is played here: its
 * requests, paced evenly from an address's first request on, take slots of that address's window
 * as they fall due (each admitted if the window has room at its time), before the real request
 * that is checked. They are applied in time order, so the ring stays ordered.
 */
interface AddressWindow {
  times: Float64Array;
  head: number;
  count: number;
  /** Due time of the neighbour's next request, and the rate it was planned for. */
  neighbourNext: number;
  neighbourRate: number;
}

export class SlidingWindowRateLimiter {
  private readonly windows = new Map<string, AddressWindow>();
  /** The neighbour's requests admitted and refused, all addresses together. */
  neighbourAdmitted = 0;
  neighbourRefused = 0;

  /** `limit` 0 (or less, or not finite) disables the limit. */
  constructor(
    readonly limit: number,
    private readonly now: () => number,
    private readonly windowMs = RATE_WINDOW_MS,
    private readonly neighbourPerMinute: () => number = () => 0,
  ) {}

  get enabled(): boolean {
    return Number.isFinite(this.limit) && this.limit > 0;
  }

  /** Admits (and records) a request, or returns the milliseconds until a slot frees. */
  take(key: string): { ok: true } | { ok: false; retryAfterMs: number } {
    if (!this.enabled) return { ok: true };
    const t = this.now();
    let w = this.windows.get(key);
    if (!w) {
      w = { times: new Float64Array(this.limit), head: 0, count: 0, neighbourNext: t, neighbourRate: 0 };
      this.windows.set(key, w);
    }
    this.playNeighbour(w, t);
    const r = this.admit(w, t);
    return r === true ? { ok: true } : { ok: false, retryAfterMs: r };
  }

  reset(): void {
    this.windows.clear();
    this.neighbourAdmitted = 0;
    this.neighbourRefused = 0;
  }

  /** Records an admission at `t` (not before the newest recorded), or returns ms until a slot frees. */
  private admit(w: AddressWindow, t: number): true | number {
    if (w.count < this.limit) {
      w.times[(w.head + w.count) % this.limit] = t;
      w.count++;
      return true;
    }
    // Ring is full: `head` holds the oldest of the last `limit` admitted requests.
    const freeAt = w.times[w.head] + this.windowMs;
    if (t < freeAt) return freeAt - t;
    w.times[w.head] = t;
    w.head = (w.head + 1) % this.limit;
    return true;
  }

  /** The neighbour's requests due up to `t`, in order (older than a window they no longer matter). */
  private playNeighbour(w: AddressWindow, t: number): void {
    const rate = this.neighbourPerMinute();
    if (!(rate > 0)) {
      w.neighbourRate = 0;
      return;
    }
    const interval = 60_000 / rate;
    if (w.neighbourRate !== rate) {
      w.neighbourRate = rate;
      w.neighbourNext = t;
    }
    if (w.neighbourNext < t - this.windowMs) w.neighbourNext += Math.ceil((t - this.windowMs - w.neighbourNext) / interval) * interval;
    while (w.neighbourNext <= t) {
      if (this.admit(w, w.neighbourNext) === true) this.neighbourAdmitted++;
      else this.neighbourRefused++;
      w.neighbourNext += interval;
    }
  }
}
