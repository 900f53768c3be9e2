import { RATE_WINDOW_MS } from './contract.js';

/**
 * Rate limit of §8: at most `limit` requests per client IP in any 60 s, all endpoints together
 * (the token endpoint included; `/_emulator/*` is not counted). The window slides exactly: each IP
 * keeps the times of its last `limit` admitted requests in a ring, so a check is O(1) and a
 * request is admitted iff the oldest of those is at least 60 s old.
 * [A] Refused requests do not take a slot (the service answers them but need not count them).
 */
export class SlidingWindowRateLimiter {
  private readonly windows = new Map<string, { times: Float64Array; head: number; count: number }>();

  /** `limit` 0 (or less, or not finite) disables the limit. */
  constructor(
    readonly limit: number,
    private readonly now: () => number,
    private readonly windowMs = RATE_WINDOW_MS,
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
      w = { times: new Float64Array(this.limit), head: 0, count: 0 };
      this.windows.set(key, w);
    }
    if (w.count < this.limit) {
      w.times[(w.head + w.count) % this.limit] = t;
      w.count++;
      return { ok: true };
    }
    // Ring is full: `head` holds the oldest of the last `limit` admitted requests.
    const oldest = w.times[w.head];
    const freeAt = oldest + this.windowMs;
    if (t < freeAt) return { ok: false, retryAfterMs: freeAt - t };
    w.times[w.head] = t;
    w.head = (w.head + 1) % this.limit;
    return { ok: true };
  }

  reset(): void {
    this.windows.clear();
  }
}
