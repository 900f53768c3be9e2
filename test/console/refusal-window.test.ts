import { describe, expect, it } from 'vitest';
import type { RefusalRecord } from '../../src/console/api/live.js';
import { refusalProblems, REFUSALS_WINDOW_MS } from '../../src/console/web/refusals.js';

/** The Overview's "values refused" problem says over what window it counts and when the latest was. */
const NOW = Date.parse('2026-11-28T10:00:00Z');
const at = (msAgo: number, reason = 'out_of_range'): RefusalRecord => ({ at: NOW - msAgo, source: 'mixer1', variable: 'mvr_mixer1_level', reason, detail: null });

describe('values refused, over a stated window', () => {
  it('counts the refusals of the last 10 minutes by reason, naming the window and the latest', () => {
    const problems = refusalProblems([at(5_000), at(65_000), at(REFUSALS_WINDOW_MS + 1_000), at(30_000, 'bad_quality')], NOW);
    expect(problems.map((p) => p.text)).toEqual([
      'Values refused in the last 10 min: out of range, 2 (the latest 5 s ago, at 2026-11-28 09:59:55Z).',
      'Values refused in the last 10 min: bad quality, 1 (the latest 30 s ago, at 2026-11-28 09:59:30Z).',
    ]);
  });

  it('says nothing of refusals older than the window, and "at least" when every refusal kept falls in it', () => {
    expect(refusalProblems([at(REFUSALS_WINDOW_MS + 1)], NOW)).toEqual([]);
    const full = Array.from({ length: 200 }, (_, i) => at(i * 100));
    expect(refusalProblems(full, NOW)[0].text).toBe('Values refused in the last 10 min: out of range, at least 200 (the latest just now, at 2026-11-28 10:00:00Z).');
  });
});
