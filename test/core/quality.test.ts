import { describe, expect, it } from 'vitest';
import { Q_BAD, Q_GOOD, Q_UNCERTAIN, QualityTable, qualityOfStatusCode, staleAfterMs } from '../../src/core/quality.js';
import { createMetrics } from '../../src/core/metrics.js';
import { SourceStats } from '../../src/core/source.js';
import type { Clock } from '../../src/core/clock.js';

/** The per-variable quality table (src/core/quality.ts): what each source writes and every surface reads. */
describe('QualityTable', () => {
  it('a reading sets the quality and since when it changed; a repeat keeps the since', () => {
    const t = new QualityTable();
    const a = t.add('mvr_a');
    expect(t.stored(a)).toEqual({ quality: 'none', since: null });
    t.set(a, Q_GOOD, 1_000);
    t.set(a, Q_GOOD, 2_000);
    expect(t.stored(a)).toEqual({ quality: 'good', since: 1_000 });
    t.set(a, Q_BAD, 3_000);
    expect(t.stored(a)).toEqual({ quality: 'bad', since: 3_000 });
  });

  it('OPC UA StatusCode severity (Part 4 §7.39): 00 good, 01 uncertain, 10/11 bad', () => {
    expect(qualityOfStatusCode(0)).toBe(Q_GOOD);
    expect(qualityOfStatusCode(0x40920000)).toBe(Q_UNCERTAIN); // UncertainSensorNotAccurate
    expect(qualityOfStatusCode(0x80310000)).toBe(Q_BAD); // BadNoCommunication
    expect(qualityOfStatusCode(0xc0000000)).toBe(Q_BAD);
  });

  it('a periodic variable is stale 3 periods (at least 2 s) after its last reading, from then; an on-change one never by age', () => {
    const t = new QualityTable();
    const polled = t.addGroup('Mixer 1', 1_000);
    const p = t.add('mvr_polled', polled);
    const c = t.add('mvr_on_change');
    t.set(p, Q_GOOD, 10_000);
    t.set(c, Q_GOOD, 10_000);
    t.age(12_999);
    expect(t.stored(p).quality).toBe('good');
    t.age(13_000 + 3_600_000);
    expect(t.stored(p)).toEqual({ quality: 'stale', since: 13_000 });
    expect(t.stored(c)).toEqual({ quality: 'good', since: 10_000 });
    expect(staleAfterMs(100)).toBe(2_000);
    expect(staleAfterMs(0)).toBe(Infinity);
  });

  it('while the link is down every variable reads stale from then, and as stored again once it is back', () => {
    const t = new QualityTable();
    const dev = t.addGroup('Mixer 1', 0);
    const a = t.add('mvr_a');
    const b = t.add('mvr_b', dev);
    const never = t.add('mvr_never');
    t.set(a, Q_GOOD, 1);
    t.set(b, Q_UNCERTAIN, 1);
    t.setGroupDown(dev, 500);
    expect(t.reading(a)).toEqual({ quality: 'good', since: 1 });
    expect(t.reading(b)).toEqual({ quality: 'stale', since: 500 });
    t.sourceDownSince = 700;
    expect(t.reading(a)).toEqual({ quality: 'stale', since: 700 });
    expect(t.reading(b)).toEqual({ quality: 'stale', since: 500 });
    expect(t.reading(never)).toEqual({ quality: 'none', since: null });
    expect(t.summary(1_000)).toMatchObject({ total: 3, stale: 2, none: 1, good: 0 });
    t.sourceDownSince = null;
    t.setGroupDown(dev, null);
    expect(t.reading(b)).toEqual({ quality: 'uncertain', since: 1 });
    expect(t.summary(1_000, dev)).toMatchObject({ total: 1, uncertain: 1 });
  });

  it('staleFrom marks what one origin (a Sparkplug edge node or device) delivered, and nothing else', () => {
    const t = new QualityTable();
    const a = t.slotFor('mvr_a');
    const b = t.slotFor('mvr_b');
    const c = t.slotFor('mvr_c');
    t.setFrom(a, Q_GOOD, 1, 10);
    t.setFrom(b, Q_GOOD, 1, 11);
    const v = t.version;
    expect(t.staleFrom(new Set([10]), 50)).toBe(1);
    expect(t.version).toBeGreaterThan(v);
    expect(t.stored(a)).toEqual({ quality: 'stale', since: 50 });
    expect(t.stored(b).quality).toBe('good');
    expect(t.stored(c).quality).toBe('none');
    // A new value makes it good again.
    t.setFrom(a, Q_GOOD, 60, 10);
    expect(t.stored(a)).toEqual({ quality: 'good', since: 60 });
  });

  it('grows past its first allocation and keeps every slot, origins included; ids found again by name', () => {
    const t = new QualityTable(200);
    for (let i = 0; i < 200; i++) t.setFrom(t.slotFor(`mvr_${i}`), Q_GOOD, i, i);
    expect(t.size).toBe(200);
    expect(t.slotFor('mvr_extra')).toBe(-1);
    expect(t.slotOf('mvr_137')).toBe(137);
    expect(t.staleFrom(new Set([0, 199]), 1_000)).toBe(2);
    expect(t.stored(199)).toEqual({ quality: 'stale', since: 1_000 });
    expect(t.stored(198).quality).toBe('good');
  });
});

describe('SourceStats and quality', () => {
  const clock = (): Clock & { t: number } => {
    const c = { t: 1_000, now: () => c.t, monotonic: () => c.t };
    return c;
  };

  it('down since the transport lost the link (connected → connecting), not since a later "disconnected"', () => {
    const c = clock();
    const stats = new SourceStats('press', 'opcua', createMetrics(), c);
    stats.quality.set(stats.quality.add('mvr_a'), Q_GOOD, 900);
    stats.setState('connected');
    c.t = 2_000;
    stats.setState('connecting');
    c.t = 13_000;
    stats.setState('disconnected');
    expect(stats.snapshot().downSince).toBe(2_000);
    expect(stats.snapshot().variables).toMatchObject({ total: 1, stale: 1, good: 0 });
    stats.setState('connected');
    expect(stats.snapshot().downSince).toBeNull();
    expect(stats.snapshot().variables).toMatchObject({ total: 1, good: 1 });
  });

  it('gateway_source_variables counts by quality from the start to the stop of the source', async () => {
    const metrics = createMetrics();
    const stats = new SourceStats('press', 'opcua', metrics, clock());
    stats.quality.set(stats.quality.add('mvr_a'), Q_BAD, 900);
    stats.quality.add('mvr_b');
    const values = async () => (await metrics.registry.getSingleMetric('gateway_source_variables')!.get()).values.map((v) => [v.labels.quality, v.value]);
    expect(await values()).toEqual([]);
    stats.setState('connected');
    expect(Object.fromEntries(await values())).toEqual({ none: 1, good: 0, uncertain: 0, bad: 1, stale: 0 });
    stats.setState('stopped');
    expect(await values()).toEqual([]);
  });
});
