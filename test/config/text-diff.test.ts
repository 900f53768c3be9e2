import { describe, expect, it } from 'vitest';
import { lineDiff } from '../../src/config/text-diff.js';

/** The diff the console shows before Apply (issue 21 §3). */
describe('lineDiff', () => {
  const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join('\n');

  it('shows each change with three lines of context and hunk heads', () => {
    const a = lines(20, (i) => `line ${i}`);
    const b = a.replace('line 5', 'line five').replace('line 15\n', 'line 15\nadded\n');
    expect(lineDiff(a, b)).toBe(['@@ -3,7 +3,7 @@', ' line 2', ' line 3', ' line 4', '-line 5', '+line five', ' line 6', ' line 7', ' line 8', '@@ -14,6 +14,7 @@', ' line 13', ' line 14', ' line 15', '+added', ' line 16', ' line 17', ' line 18', ''].join('\n'));
    expect(lineDiff(a, a)).toBe('');
  });

  it('shows a rewrite too large to align as one block, in bounded time', () => {
    const a = lines(2_000, (i) => `a ${i}`);
    const b = lines(2_000, (i) => `b ${i}`);
    const started = performance.now();
    const d = lineDiff(a, b).split('\n');
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(d[0]).toBe('@@ -1,2000 +1,2000 @@');
    expect(d.filter((l) => l.startsWith('-'))).toHaveLength(2_000);
    expect(d.filter((l) => l.startsWith('+'))).toHaveLength(2_000);
  });
});
