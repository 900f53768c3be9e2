import { describe, expect, it } from 'vitest';
import { fmtSpan } from '../../src/web/format.js';

describe('fmtSpan (a range annotation\'s duration on the console, issue 24 §4)', () => {
  it('writes a span under a second in ms, longer ones as durations, and – for no value', () => {
    expect(fmtSpan(0)).toBe('0 ms');
    expect(fmtSpan(452.4)).toBe('452 ms');
    expect(fmtSpan(999)).toBe('999 ms');
    expect(fmtSpan(1_000)).toBe('1 s');
    expect(fmtSpan(11_400)).toBe('11 s');
    expect(fmtSpan(7 * 60_000)).toBe('7 min');
    expect(fmtSpan(2 * 3_600_000 + 5 * 60_000)).toBe('2 h 05 min');
    expect(fmtSpan(null)).toBe('–');
    expect(fmtSpan(Number.NaN)).toBe('–');
  });
});
