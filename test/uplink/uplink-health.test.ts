import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { UplinkHealth } from '../../src/uplink/uplink-health.js';
import type { Decision } from '../../src/uplink/retry-policy.js';

/**
 * One outage wave is one backoff step, and while the service is unreachable one request probes
 * (issue 12 §7). Real timers with short pauses; the end-to-end bound is in outage-recovery.test.ts.
 */
const retry = (delayMs: number): Decision => ({ action: 'retry', delayMs, reason: 'network' });
const health = () => new UplinkHealth(systemClock, silentLogger(), createMetrics());

/** Resolves to true when `p` settles within `ms`. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

describe('uplink health: waves and probes', () => {
  it('counts the failures of requests that were in flight together as one step', async () => {
    const h = health();
    // Four batches and an upload pass ready() while ok, then all fail.
    const tickets = await Promise.all([0, 1, 2, 3, 4].map(() => h.ready()));
    const first = h.failure(retry(50), 'no response', tickets[0]);
    expect(first).toBe(50);
    for (const t of tickets.slice(1)) expect(h.failure(retry(5_000), 'no response', t)).toBe(0);
    expect(h.snapshot().consecutiveFailures).toBe(1);
    expect(h.attempt).toBe(2);
    // The pause is the first failure's, not moved by the tail of the wave.
    expect(h.snapshot().resumeInMs).toBeLessThanOrEqual(50);
  });

  it('lets one request probe after a pause; the others wait until it reports', async () => {
    const h = health();
    h.failure(retry(30), 'no response', await h.ready());
    const probe = await h.ready(); // after the 30 ms pause: the probe
    const others = [h.ready(), h.ready(), h.settled()];
    expect(await settlesWithin(Promise.race(others), 100)).toBe(false);
    // The probe fails: a new step, a new pause; still nobody else goes.
    expect(h.failure(retry(40), 'no response', probe)).toBe(40);
    expect(h.snapshot().consecutiveFailures).toBe(2);
    // One of the waiters becomes the next probe after that pause; the rest keep waiting.
    const next = await Promise.race(others.slice(0, 2));
    expect(typeof next).toBe('number');
    // Its success resumes everyone at once.
    h.success();
    expect(await settlesWithin(Promise.all(others), 50)).toBe(true);
    expect(h.condition).toBe('ok');
    expect(h.snapshot().consecutiveFailures).toBe(0);
    // While ok, every request goes at once.
    expect(await settlesWithin(Promise.all([h.ready(), h.ready(), h.ready()]), 20)).toBe(true);
  });

  it('a failure of a request started before the last success is stale; the next request notices a new outage', async () => {
    const h = health();
    const slow = await h.ready(); // an upload, say, still in flight through the whole episode
    h.failure(retry(10), 'no response', await h.ready());
    h.success();
    expect(h.failure(retry(20), 'no response', slow)).toBe(0);
    expect(h.condition).toBe('ok');
    const fresh = await h.ready();
    expect(h.failure(retry(20), 'no response', fresh)).toBe(20);
    expect(h.condition).toBe('retrying');
  });

  it('ready() and settled() give up on abort', async () => {
    const h = health();
    h.failure(retry(10_000), 'no response');
    const ac = new AbortController();
    const waiting = h.ready(ac.signal);
    ac.abort(new Error('stopping'));
    await expect(waiting).rejects.toThrow('stopping');
  });
});
