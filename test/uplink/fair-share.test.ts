import { describe, expect, it } from 'vitest';
import { fairShares } from '../../src/uplink/fair-share.js';

describe('fairShares (max-min division of one address budget)', () => {
  it.each([
    { what: 'all busy: equal parts', budget: 1_400, demands: { a: 1_400, b: 1_400, c: 1_400, d: 1_400 }, want: { a: 350, b: 350, c: 350, d: 350 } },
    { what: 'one idle: the others split what it leaves', budget: 1_400, demands: { a: 1_400, b: 1_400, c: 1_400, idle: 20 }, want: { a: 460, b: 460, c: 460, idle: 20 } },
    { what: 'middle demand capped at its need', budget: 1_200, demands: { a: 1_200, b: 200, c: 1_200 }, want: { a: 500, b: 200, c: 500 } },
    { what: 'everyone satisfied: the rest is spread evenly', budget: 1_000, demands: { a: 100, b: 300 }, want: { a: 400, b: 600 } },
    { what: 'alone: the whole budget', budget: 1_400, demands: { a: 1_400 }, want: { a: 1_400 } },
  ])('$what', ({ budget, demands, want }) => {
    const shares = fairShares(budget, Object.entries(demands).map(([name, demand]) => ({ name, demand })));
    for (const [name, share] of Object.entries(want)) expect(shares.get(name)).toBeCloseTo(share, 6);
    const sum = [...shares.values()].reduce((a, b) => a + b, 0);
    expect(sum).toBeLessThanOrEqual(budget + 1e-6);
  });

  it('gives every member the same answer whatever order it sees the table in', () => {
    const table = [
      { name: 'gw3', demand: 90 },
      { name: 'gw1', demand: 1_400 },
      { name: 'gw2', demand: 400 },
      { name: 'gw4', demand: 1_400 },
    ];
    const a = fairShares(1_400, table);
    const b = fairShares(1_400, [...table].reverse());
    expect([...a.entries()].sort()).toEqual([...b.entries()].sort());
  });
});
