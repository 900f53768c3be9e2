import { backoffDelay } from '../core/backoff.js';

/**
 * What to do after a call to the tracking service, as a pure function of the outcome and the
 * attempt number (DESIGN.md habit 4, after Vector's HTTP retry logic). Every row of CONTRACT.md's
 * "Limits and error handling" table maps to one branch here; test/uplink/retry-policy.test.ts is
 * the table test.
 */
export type Outcome =
  | { kind: 'response'; status: number; retryAfterMs?: number; afterTokenRenewal?: boolean }
  | { kind: 'network'; code: string };

export type Decision =
  /** 2xx: the service has it. */
  | { action: 'done' }
  /** Try the same request again after `delayMs`. */
  | { action: 'retry'; delayMs: number; reason: 'rate_limited' | 'server_error' | 'network' }
  /** 413: the body was too large; split the batch and send the halves. */
  | { action: 'split' }
  /** 400: the payload was refused; isolate the offending items (bisect), never resend as a whole. */
  | { action: 'isolate' }
  /** 401 on a cached token: get a new token once and retry. */
  | { action: 'renew_token' }
  /** 401 again after a fresh token: the credentials are wrong. Back off, alert, keep buffering. */
  | { action: 'credentials_failed'; delayMs: number }
  /** 403: the organisation is not authorised. Stop sending, alert, keep buffering (config error). */
  | { action: 'halt'; reason: 'forbidden' | 'not_found' | 'rejected' }
  /** 409: for an annotation with our external_id, it is already there: delivered. */
  | { action: 'conflict' };

/** §7/§8: on 429 wait 1 s, double each time up to 30 s, with about ±500 ms of jitter. */
export const RATE_LIMIT_BACKOFF = { initialMs: 1_000, maxMs: 30_000, factor: 2, jitterMs: 500 } as const;
/**
 * 5xx, timeouts, resets: capped exponential backoff with jitter (±20 %). The cap is short because
 * after the first failed wave only ONE request (the probe, uplink-health.ts) retries at this pace:
 * it bounds how long the gateway takes to notice the service is back (≤ 3.6 s), not the load on
 * the service (one request every 3 s). It used to be 60 s, when every sender retried at it.
 */
export const SERVER_ERROR_BACKOFF = { initialMs: 1_000, maxMs: 3_000, factor: 2, jitterRatio: 0.2 } as const;
/** Wrong credentials are not fixed by hammering the token endpoint: 30 s doubling to 10 min. */
export const CREDENTIALS_BACKOFF = { initialMs: 30_000, maxMs: 600_000, factor: 2, jitterRatio: 0.1 } as const;

export function decide(outcome: Outcome, attempt: number, random: () => number = Math.random): Decision {
  if (outcome.kind === 'network') {
    return { action: 'retry', delayMs: backoffDelay(SERVER_ERROR_BACKOFF, attempt, random), reason: 'network' };
  }
  const { status } = outcome;
  if (status >= 200 && status < 300) return { action: 'done' };
  switch (status) {
    case 429: {
      const backoff = backoffDelay(RATE_LIMIT_BACKOFF, attempt, random);
      // Retry-After, when sent, is a lower bound (CONTRACT.md error table).
      return { action: 'retry', delayMs: Math.max(backoff, outcome.retryAfterMs ?? 0), reason: 'rate_limited' };
    }
    case 413:
      return { action: 'split' };
    case 400:
    case 422:
      return { action: 'isolate' };
    case 401:
      return outcome.afterTokenRenewal
        ? { action: 'credentials_failed', delayMs: backoffDelay(CREDENTIALS_BACKOFF, attempt, random) }
        : { action: 'renew_token' };
    case 403:
      return { action: 'halt', reason: 'forbidden' };
    case 404:
    case 405:
      return { action: 'halt', reason: 'not_found' };
    case 409:
      return { action: 'conflict' };
    case 408:
      return { action: 'retry', delayMs: backoffDelay(SERVER_ERROR_BACKOFF, attempt, random), reason: 'server_error' };
    default:
      if (status >= 500) return { action: 'retry', delayMs: backoffDelay(SERVER_ERROR_BACKOFF, attempt, random), reason: 'server_error' };
      // Any other 4xx is a refusal of this payload.
      return { action: 'isolate' };
  }
}

/** Parses a Retry-After header (seconds or an HTTP date) into ms; undefined when absent or bad. */
export function parseRetryAfter(value: string | string[] | undefined, nowMs: number = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Math.round(Number(v) * 1000);
  const date = Date.parse(v);
  return Number.isFinite(date) ? Math.max(0, date - nowMs) : undefined;
}
