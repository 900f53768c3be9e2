import { describe, expect, it } from 'vitest';
import { BacklogMeter } from '../../src/uplink/backlog-meter.js';
import { importJobsWanted } from '../../src/uplink/import-trigger.js';

/** A meter read once a "second" on a clock the test moves. */
function meter() {
  let t = 5_000_000;
  const state = { backlog: 0, sync: 0, imported: 0 };
  const m = new BacklogMeter({ clock: { now: () => t, monotonic: () => t }, backlog: () => state.backlog, delivered: () => ({ sync: state.sync, import: state.imported }), tolerance: 200 });
  const second = (f: () => void) => {
    t += 1_000;
    f();
    m.sample();
  };
  return { m, state, second };
}

describe('the backlog meter: what the backlog did, measured', () => {
  it('deliverable ingest is what was delivered plus what the backlog grew: set-aside samples leave it undelivered and do not count', () => {
    const { m, state, second } = meter();
    m.sample();
    // 500 samples/s committed, of which 480/s are set aside (unknown variables) and 20/s delivered.
    for (let i = 0; i < 10; i++) second(() => (state.sync += 20));
    expect(m.trend().deliverableIngestPerS).toBeCloseTo(20, 5);
    expect(m.trend().growing).toBe(false);
  });

  it('grows when the backlog climbs for 30 s, also right after an import job took most of it; not while it drains', () => {
    const { m, state, second } = meter();
    m.sample();
    for (let i = 0; i < 40; i++) second(() => (state.backlog += 600));
    expect(m.trend()).toMatchObject({ growing: true, rise30s: 18_000 });
    // A job takes 20,000 at once; the backlog is smaller than 30 s ago, and climbs again.
    second(() => {
      state.backlog -= 20_000;
      state.imported += 20_000;
    });
    expect(m.trend().growing).toBe(false);
    for (let i = 0; i < 5; i++) second(() => (state.backlog += 600));
    expect(m.trend().change30s).toBeLessThan(0);
    expect(m.trend().growing).toBe(true);
    // The source stops: the sync path drains 300/s; within 5 s it is no longer growing.
    for (let i = 0; i < 5; i++) second(() => ((state.backlog -= 300), (state.sync += 300)));
    expect(m.trend().growing).toBe(false);
    expect(m.trend().deliverableIngestRecentPerS).toBe(0);
    expect(m.trend().syncPerS).toBe(300);
  });
});

describe('import jobs start from what is measured', () => {
  const base = { oldestAgeMs: 150_000, available: 60_000, growing: false, deliverableIngestPerS: 0, syncCapacityPerS: 300, thresholdMs: 120_000, backfilling: false, keepSamples: 18_000 };
  it.each([
    [{}, true, /sync path would take 200 s to drain 60000 samples/],
    [{ available: 30_000 }, false, /drains the backlog within/],
    [{ available: 30_000, growing: true }, true, /backlog grows/],
    [{ oldestAgeMs: 100_000, growing: true }, false, /100 s old, within uplink\.backfill\.threshold \(120 s\)/],
    [{ deliverableIngestPerS: 400, available: 5_000 }, true, /for ever/],
    [{ backfilling: true, available: 40_000, oldestAgeMs: 10_000 }, true, /backfill under way/],
    [{ backfilling: true, available: 30_000, oldestAgeMs: 10_000 }, false, /within/],
    [{ available: 0, oldestAgeMs: null }, false, /nothing waits/],
  ])('%o → %s', (over, want, why) => {
    const r = importJobsWanted({ ...base, ...over });
    expect(r.want).toBe(want);
    expect(r.why).toMatch(why);
  });
});
