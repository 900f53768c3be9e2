import { describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../src/core/clock.js';
import { RequestBudget, type Priority } from '../../src/uplink/budget.js';

describe('RequestBudget', () => {
  it('never grants more than the budget in any 60 s window', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    try {
      const clock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };
      const budget = new RequestBudget(120, clock); // 2/s, burst 2
      const grants: number[] = [];
      // 500 callers at once, then 3 simulated minutes.
      for (let i = 0; i < 500; i++) {
        budget.acquire('data').then(
          () => grants.push(performance.now()),
          () => undefined,
        );
      }
      await vi.advanceTimersByTimeAsync(180_000);
      budget.close();
      let maxInWindow = 0;
      for (let i = 0; i < grants.length; i++) {
        let j = i;
        while (j < grants.length && grants[j] < grants[i] + 60_000) j++;
        maxInWindow = Math.max(maxInWindow, j - i);
      }
      expect(maxInWindow).toBeLessThanOrEqual(120);
      // It also uses the budget: about 2 per second for 180 s.
      expect(grants.length).toBeGreaterThanOrEqual(355);
    } finally {
      vi.useRealTimers();
    }
  });

  it('serves waiting calls in priority order: token, annotation, poll, upload, data', async () => {
    const clock = { now: () => Date.now(), monotonic: () => performance.now() };
    const budget = new RequestBudget(600, clock); // 10/s, burst 10
    for (let i = 0; i < 10; i++) await budget.acquire('data'); // drain the burst
    const order: Priority[] = [];
    const all = (['upload', 'poll', 'annotation', 'token'] as Priority[]).map((p) => budget.acquire(p).then(() => order.push(p)));
    await Promise.all(all);
    expect(order).toEqual(['token', 'annotation', 'poll', 'upload']);
    budget.close();
  });

  it('grants background calls (the console catalog) only when no data call waits: never ahead of data', async () => {
    const clock = { now: () => Date.now(), monotonic: () => performance.now() };
    const budget = new RequestBudget(600, clock); // 10/s, burst 10
    for (let i = 0; i < 10; i++) await budget.acquire('data'); // drain the burst
    const order: Priority[] = [];
    const all = (['background', 'data', 'data', 'data', 'upload', 'data'] as Priority[]).map((p) => budget.acquire(p).then(() => order.push(p)));
    await Promise.all(all);
    // The upload may go ahead of one data call (MAX_AHEAD_OF_DATA); the background read goes last.
    expect(order).toEqual(['upload', 'data', 'data', 'data', 'data', 'background']);
    budget.close();
  });

  it('lets at most one call (token calls aside) go ahead of a waiting data call', async () => {
    const clock = { now: () => Date.now(), monotonic: () => performance.now() };
    const budget = new RequestBudget(600, clock); // 10/s, burst 10
    for (let i = 0; i < 10; i++) await budget.acquire('data'); // drain the burst
    const order: Priority[] = [];
    const all = (['data', 'data', 'upload', 'poll', 'poll', 'annotation', 'token'] as Priority[]).map((p) => budget.acquire(p).then(() => order.push(p)));
    await Promise.all(all);
    expect(order).toEqual(['token', 'annotation', 'data', 'poll', 'data', 'poll', 'upload']);
    budget.close();
  });

  it('keeps the sync path at half the slots or more while import-job uploads and polls compete', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    try {
      const clock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };
      const budget = new RequestBudget(120, clock); // 2/s: a small fleet share
      const stop = new AbortController();
      const granted: Record<Priority, number> = { token: 0, annotation: 0, poll: 0, upload: 0, data: 0, background: 0 };
      // Each class keeps callers waiting all the time, as two jobs polled every 100 ms, a queue of
      // uploads and four sync batches do in test/uplink/backfill.test.ts.
      const caller = async (p: Priority) => {
        for (;;) {
          try {
            await budget.acquire(p, stop.signal);
          } catch {
            return;
          }
          granted[p] += 1;
        }
      };
      const callers = [...(['poll', 'poll', 'upload', 'upload'] as Priority[]), ...(['data', 'data', 'data', 'data'] as Priority[])].map(caller);
      await vi.advanceTimersByTimeAsync(60_000);
      stop.abort();
      await Promise.all(callers);
      const total = granted.poll + granted.upload + granted.data;
      expect(total).toBeGreaterThanOrEqual(110);
      // Half of every slot after the first burst (whose two slots went before any data call waited);
      // strict priority gave data none.
      expect(granted.data).toBeGreaterThanOrEqual(Math.floor((total - 2) / 2));
      // The others still get the rest, polls ahead of uploads.
      expect(granted.poll).toBeGreaterThan(0.4 * total);
      budget.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('paces at the configured rate', async () => {
    const clock = { now: () => Date.now(), monotonic: () => performance.now() };
    const budget = new RequestBudget(1_200, clock); // 20/s, burst 20
    const t0 = performance.now();
    for (let i = 0; i < 40; i++) await budget.acquire('data');
    const elapsed = performance.now() - t0;
    // 20 from the burst, then 20 at 20/s: about 1 s.
    expect(elapsed).toBeGreaterThan(800);
    expect(elapsed).toBeLessThan(3_000);
    budget.close();
  });

  it('rejects waiters on close and on abort', async () => {
    const clock = { now: () => Date.now(), monotonic: () => performance.now() };
    const budget = new RequestBudget(60, clock); // 1/s, burst 1
    await budget.acquire('data');
    const ac = new AbortController();
    const aborted = budget.acquire('data', ac.signal);
    ac.abort(new Error('stop'));
    await expect(aborted).rejects.toThrow('stop');
    const closed = budget.acquire('data');
    budget.close(new Error('closing'));
    await expect(closed).rejects.toThrow('closing');
  });

  it('follows a new pacing rate at once (a fleet share), keeping priorities', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    try {
      const clock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };
      const budget = new RequestBudget(600, clock); // ceiling 10/s
      budget.setRate(60); // share: 1/s
      expect(budget.ratePerMinute).toBe(60);
      const grants: number[] = [];
      for (let i = 0; i < 100; i++) budget.acquire('data').then(() => grants.push(performance.now()), () => undefined);
      await vi.advanceTimersByTimeAsync(10_000);
      // About 1/s (plus the one-token burst), not the ceiling's 10/s.
      expect(grants.length).toBeGreaterThanOrEqual(9);
      expect(grants.length).toBeLessThanOrEqual(12);
      // Calls waited the whole time: the budget, not the work, was the limit.
      expect(budget.waitedTotalMs()).toBeGreaterThan(9_000);
      let annotationAt = -1;
      budget.acquire('annotation').then(() => (annotationAt = performance.now()), () => undefined);
      budget.setRate(6_000); // above the ceiling: clamped to 600/min
      expect(budget.ratePerMinute).toBe(600);
      const before = grants.length;
      await vi.advanceTimersByTimeAsync(2_000);
      // The annotation went ahead of the data calls queued before it.
      expect(annotationAt).toBeGreaterThanOrEqual(0);
      expect(annotationAt).toBeLessThanOrEqual(grants[before]);
      // The rest of the queue at about 10/s.
      expect(grants.length - before).toBeGreaterThanOrEqual(15);
      budget.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('after a 429 every class waits out the pause, then goes one at a time at the found pace: no burst', async () => {
    vi.useFakeTimers();
    try {
      const clock = { now: () => Date.now(), monotonic: () => performance.now() };
      const budget = new RequestBudget(600, clock);
      for (let i = 0; i < 60; i++) budget.answered(200, budget.ticket());
      // 60 admitted in the last minute: the pace becomes 58.2/min, every class paused 2 s (Retry-After).
      budget.answered(429, budget.ticket(), 2_000);
      expect(budget.ratePerMinute).toBeCloseTo(58.2, 5);
      const granted: number[] = [];
      const t0 = performance.now();
      const calls = ['token', 'annotation', 'poll', 'data', 'data', 'data'].map((p) => budget.acquire(p as Priority).then(() => granted.push(performance.now() - t0)));
      await vi.advanceTimersByTimeAsync(1_999);
      expect(granted).toEqual([]);
      await vi.advanceTimersByTimeAsync(10_000);
      await Promise.all(calls);
      // The first at the pause's end, then one every ~1.03 s (58.2/min), not all at once.
      expect(granted[0]).toBeGreaterThanOrEqual(2_000);
      for (let i = 1; i < granted.length; i++) expect(granted[i] - granted[i - 1]).toBeGreaterThanOrEqual(1_000);
      budget.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
