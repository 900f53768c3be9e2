import { describe, expect, it } from 'vitest';
import { PROBE_HOLD_MS, PROBE_INTERVAL_MS, RateFinder } from '../../src/uplink/rate-finder.js';

function finder() {
  let t = 1_000_000;
  const f = new RateFinder({ monotonic: () => t, now: () => t, random: () => 0.5 });
  return { f, advance: (ms: number) => (t += ms) };
}

describe('the rate finder', () => {
  it('a 429 sets the rate to what the service admitted in the last minute, less 3 %; the rest of the wave cuts nothing', () => {
    const { f, advance } = finder();
    // 90 requests admitted over the last 30 s, at a pace of 1,400/min.
    for (let i = 0; i < 90; i++) {
      f.admittedOne();
      advance(333);
    }
    const ticket = f.epoch;
    const pause = f.rateLimited(ticket, 1_400, 2_000);
    expect(f.found).toBeCloseTo(87.3, 5);
    // §8: at least 1 s (±500 ms), at least Retry-After.
    expect(pause).toBe(2_000);
    // Requests granted before the cut come back 429 too: the same wave.
    f.rateLimited(ticket, 87.3, 5_000);
    expect(f.found).toBeCloseTo(87.3, 5);
    expect(f.pauseLeft()).toBe(5_000);
    expect(f.snapshot()).toMatchObject({ rate_limited_total: 2, limit_seen_per_minute: 90 });
  });

  it('429s one after the other double the pause up to 30 s; an admitted answer starts it again at 1 s', () => {
    const { f, advance } = finder();
    const pauses: number[] = [];
    for (let i = 0; i < 7; i++) {
      pauses.push(f.rateLimited(f.epoch, 60));
      advance(f.pauseLeft());
    }
    expect(pauses).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    f.admittedOne();
    expect(f.rateLimited(f.epoch, 60)).toBe(1_000);
  });

  it('probes back under the last limit within minutes, crosses it slowly, beyond it faster; only while the budget limits; at the ceiling nothing is found', () => {
    const { f, advance } = finder();
    for (let i = 0; i < 100; i++) f.admittedOne();
    f.rateLimited(f.epoch, 1_400);
    expect(f.found).toBeCloseTo(97, 5);
    // Held for a minute after the cut.
    advance(PROBE_HOLD_MS - 1);
    expect(f.probe(true, 1_400)).toBe(false);
    advance(1);
    const rates: number[] = [];
    for (let i = 0; i < 12; i++) {
      f.probe(true, 1_400);
      rates.push(Math.round(f.found! * 100) / 100);
      advance(PROBE_INTERVAL_MS);
    }
    // 1 % steps to 98.5 (the plateau), 0.25 % steps across it, then 1, 2, 4, 8 % beyond 100.
    expect(rates.slice(0, 2)).toEqual([97.97, 98.95]);
    expect(rates[2] / rates[1]).toBeCloseTo(1.0025, 4);
    const beyond = rates.findIndex((r) => r > 100);
    expect(beyond).toBeGreaterThan(2);
    expect(rates[beyond + 2] / rates[beyond + 1]).toBeCloseTo(1.02, 3);
    // Not while the budget is not what limits the work.
    const before = f.found;
    advance(PROBE_INTERVAL_MS);
    expect(f.probe(false, 1_400)).toBe(false);
    expect(f.found).toBe(before);
    // At the ceiling the limit is gone.
    advance(PROBE_INTERVAL_MS);
    f.probe(true, 100);
    expect(f.found).toBeNull();
  });
});
