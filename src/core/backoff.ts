/**
 * Capped exponential backoff with jitter, as a pure function so that callers and tests agree on
 * the numbers. `attempt` counts from 1 (the first retry).
 */
export interface BackoffPolicy {
  /** Delay before the first retry, ms. */
  initialMs: number;
  /** Upper bound of the delay before jitter, ms. */
  maxMs: number;
  /** Growth factor per attempt (2 doubles). */
  factor?: number;
  /** Absolute jitter, ± ms. Applied after the cap; the result is never below 0. */
  jitterMs?: number;
  /** Relative jitter, ± fraction of the delay (0.2 = ±20 %). */
  jitterRatio?: number;
}

export function backoffDelay(policy: BackoffPolicy, attempt: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(attempt));
  const factor = policy.factor ?? 2;
  const base = Math.min(policy.maxMs, policy.initialMs * Math.pow(factor, n - 1));
  let jitter = 0;
  if (policy.jitterMs) jitter += (random() * 2 - 1) * policy.jitterMs;
  if (policy.jitterRatio) jitter += (random() * 2 - 1) * policy.jitterRatio * base;
  return Math.max(0, Math.round(base + jitter));
}

/** Stateful helper for reconnect loops: `next()` gives the next delay, `reset()` after success. */
export class Backoff {
  private attempt = 0;

  constructor(private readonly policy: BackoffPolicy, private readonly random: () => number = Math.random) {}

  next(): number {
    this.attempt += 1;
    return backoffDelay(this.policy, this.attempt, this.random);
  }

  reset(): void {
    this.attempt = 0;
  }

  get attempts(): number {
    return this.attempt;
  }
}

/** Reconnect policy shared by the protocol sources unless they configure their own. */
export const DEFAULT_RECONNECT: BackoffPolicy = { initialMs: 1_000, maxMs: 30_000, factor: 2, jitterRatio: 0.2 };
