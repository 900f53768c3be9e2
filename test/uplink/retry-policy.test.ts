import { describe, expect, it } from 'vitest';
import { decide, parseRetryAfter, type Decision, type Outcome } from '../../src/uplink/retry-policy.js';

const mid = () => 0.5; // jitter term (2r-1) = 0
const low = () => 0; // jitter at its most negative
const high = () => 0.999999; // jitter at its most positive

// One row per line of CONTRACT.md's "Limits and error handling" table, plus the edges.
const TABLE: Array<{ name: string; outcome: Outcome; attempt: number; random?: () => number; expect: Decision | ((d: Decision) => void) }> = [
  { name: '200 done', outcome: { kind: 'response', status: 200 }, attempt: 1, expect: { action: 'done' } },
  { name: '201 done', outcome: { kind: 'response', status: 201 }, attempt: 1, expect: { action: 'done' } },
  { name: '202 done', outcome: { kind: 'response', status: 202 }, attempt: 1, expect: { action: 'done' } },
  { name: '429 first: 1 s', outcome: { kind: 'response', status: 429 }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 1_000, reason: 'rate_limited' } },
  { name: '429 second: 2 s', outcome: { kind: 'response', status: 429 }, attempt: 2, random: mid, expect: { action: 'retry', delayMs: 2_000, reason: 'rate_limited' } },
  { name: '429 fifth: 16 s', outcome: { kind: 'response', status: 429 }, attempt: 5, random: mid, expect: { action: 'retry', delayMs: 16_000, reason: 'rate_limited' } },
  { name: '429 capped at 30 s', outcome: { kind: 'response', status: 429 }, attempt: 12, random: mid, expect: { action: 'retry', delayMs: 30_000, reason: 'rate_limited' } },
  { name: '429 jitter -500 ms', outcome: { kind: 'response', status: 429 }, attempt: 1, random: low, expect: { action: 'retry', delayMs: 500, reason: 'rate_limited' } },
  { name: '429 jitter +500 ms', outcome: { kind: 'response', status: 429 }, attempt: 3, random: high, expect: { action: 'retry', delayMs: 4_500, reason: 'rate_limited' } },
  { name: '429 Retry-After is a lower bound', outcome: { kind: 'response', status: 429, retryAfterMs: 7_000 }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 7_000, reason: 'rate_limited' } },
  { name: '429 backoff above Retry-After wins', outcome: { kind: 'response', status: 429, retryAfterMs: 1_000 }, attempt: 4, random: mid, expect: { action: 'retry', delayMs: 8_000, reason: 'rate_limited' } },
  { name: '413 split', outcome: { kind: 'response', status: 413 }, attempt: 1, expect: { action: 'split' } },
  { name: '400 isolate, never retried whole', outcome: { kind: 'response', status: 400 }, attempt: 1, expect: { action: 'isolate' } },
  { name: '401 renew once', outcome: { kind: 'response', status: 401 }, attempt: 1, expect: { action: 'renew_token' } },
  { name: '401 after renewal: credentials', outcome: { kind: 'response', status: 401, afterTokenRenewal: true }, attempt: 1, random: mid, expect: { action: 'credentials_failed', delayMs: 30_000 } },
  { name: '401 after renewal backs off further', outcome: { kind: 'response', status: 401, afterTokenRenewal: true }, attempt: 3, random: mid, expect: { action: 'credentials_failed', delayMs: 120_000 } },
  { name: '403 halt', outcome: { kind: 'response', status: 403 }, attempt: 1, expect: { action: 'halt', reason: 'forbidden' } },
  { name: '404 halt (wrong base_url)', outcome: { kind: 'response', status: 404 }, attempt: 1, expect: { action: 'halt', reason: 'not_found' } },
  { name: '409 conflict = delivered', outcome: { kind: 'response', status: 409 }, attempt: 1, expect: { action: 'conflict' } },
  { name: '500 retry 1 s', outcome: { kind: 'response', status: 500 }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 1_000, reason: 'server_error' } },
  { name: '503 retry 2 s', outcome: { kind: 'response', status: 503 }, attempt: 2, random: mid, expect: { action: 'retry', delayMs: 2_000, reason: 'server_error' } },
  { name: '503 capped at 3 s (the probe pace)', outcome: { kind: 'response', status: 503 }, attempt: 3, random: mid, expect: { action: 'retry', delayMs: 3_000, reason: 'server_error' } },
  { name: '502 capped at 3 s', outcome: { kind: 'response', status: 502 }, attempt: 20, random: mid, expect: { action: 'retry', delayMs: 3_000, reason: 'server_error' } },
  { name: '500 jitter is ±20 %', outcome: { kind: 'response', status: 500 }, attempt: 2, random: low, expect: { action: 'retry', delayMs: 1_600, reason: 'server_error' } },
  { name: '408 timeout retried', outcome: { kind: 'response', status: 408 }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 1_000, reason: 'server_error' } },
  { name: 'reset retried', outcome: { kind: 'network', code: 'ECONNRESET' }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 1_000, reason: 'network' } },
  { name: 'refused retried', outcome: { kind: 'network', code: 'ECONNREFUSED' }, attempt: 2, random: mid, expect: { action: 'retry', delayMs: 2_000, reason: 'network' } },
  { name: 'timeout retried', outcome: { kind: 'network', code: 'UND_ERR_HEADERS_TIMEOUT' }, attempt: 1, random: mid, expect: { action: 'retry', delayMs: 1_000, reason: 'network' } },
  { name: 'other 4xx isolate', outcome: { kind: 'response', status: 422 }, attempt: 1, expect: { action: 'isolate' } },
];

describe('retry policy (pure function of outcome and attempt)', () => {
  for (const row of TABLE) {
    it(row.name, () => {
      const d = decide(row.outcome, row.attempt, row.random ?? mid);
      if (typeof row.expect === 'function') row.expect(d);
      else expect(d).toEqual(row.expect);
    });
  }

  it('never retries a 429 immediately, whatever the jitter', () => {
    for (let attempt = 1; attempt < 20; attempt++) {
      for (const r of [low, mid, high]) {
        const d = decide({ kind: 'response', status: 429 }, attempt, r);
        expect(d.action).toBe('retry');
        if (d.action === 'retry') expect(d.delayMs).toBeGreaterThanOrEqual(500);
      }
    }
  });

  it('parses Retry-After in seconds and as an HTTP date', () => {
    expect(parseRetryAfter('3')).toBe(3_000);
    expect(parseRetryAfter('0.5')).toBe(500);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const now = Date.parse('2026-11-22T10:00:00Z');
    expect(parseRetryAfter('Sun, 22 Nov 2026 10:00:05 GMT', now)).toBe(5_000);
  });
});
