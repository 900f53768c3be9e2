import { describe, expect, it } from 'vitest';
import { deliveryOutlook, outlookOf, gatewayStatus, type StatusReadings } from '../../src/status/model.js';

const readings = (): StatusReadings => ({
  now: Date.parse('2026-11-22T06:10:00.000Z'),
  gateway: { name: 'gw', version: '0.1.0', startedAt: Date.parse('2026-11-22T06:00:00.000Z'), pid: 42, memory: { rss_bytes: 1, heap_used_bytes: 2, external_bytes: 3 } },
  sources: [{ name: 'gen', kind: 'generator', state: 'connected', since: 0, samplesRead: 10, samplesRefused: {}, lastSampleAt: null, lastError: null }],
  sourceRates: { gen: 20 },
  buffer: {
    rows: 1_200, available: 1_000, inflight: 200, reserved: 0, pendingSamples: 0, usedBytes: 4_096, maxBytes: 1_000_000,
    oldestTs: Date.parse('2026-11-22T06:09:00.000Z'), liveRows: 1_200, sealedSamples: 0, chunks: 0, chunksSealedTotal: 0,
    bytesPerSample: null, compressionRatio: null, capacitySeconds: null, committedTotal: 5_000, droppedTotal: 0,
    writable: true, lastWriteError: null, fullEpisode: null,
  } as StatusReadings['buffer'],
  ingestRate: 20,
  recoveredFrom: null,
  setAside: 3,
  gaps: { open: 0, recent: [], annotate: false },
  maxUnsentAgeMs: 600_000,
  batchSize: 200,
  unknownVariables: { count: 0, examples: [], by_source: {}, catalog_read_at: null, catalog_error: null },
  health: { condition: 'ok', reason: '', since: Date.parse('2026-11-22T06:00:00.000Z'), resumeInMs: 0, consecutiveFailures: 0 },
  budget: { perMinute: 1_500, usedLastMinute: 40 },
  sync: { inflightBatches: 1, deliveredTotal: 3_800, setAsideTotal: 3, ratePerSecond: 80, freshestDeliveredTs: Date.parse('2026-11-22T06:09:58.000Z'), oldestFirstBatches: 0 },
  backfill: { rate_per_s: 0, enabled: true, threshold_samples: 405_000, sync_capacity_per_s: 4_200 } as StatusReadings['backfill'],
  annotations: null,
  fleet: null,
  config: { path: null, loaded_at: '2026-11-22T06:00:00.000Z', reloads_applied: 0, reloads_refused: 0, last_reload: null },
});

describe('status model', () => {
  it('is a function of its readings: the same readings give the same status, and they are left as they were', () => {
    const r = readings();
    const before = structuredClone(r);
    const a = gatewayStatus(r);
    expect(gatewayStatus(r)).toEqual(a);
    expect(r).toEqual(before);
    expect(a.gateway.uptime_s).toBe(600);
    expect(a.buffer.oldest_unsent_age_s).toBe(60);
    expect(a.uplink.freshest_delivered_age_s).toBe(2);
    expect(a.set_aside.samples).toBe(3);
    // 1,200 samples drain at 80/s delivered minus 20/s arriving.
    expect(a.backlog_eta_s).toBe(20);
    expect('annotations' in a || 'fleet' in a).toBe(false);
  });

  it('has no backlog ETA when nothing is pending, the backlog does not shrink, or there is no basis yet', () => {
    const of = (o: { backlog: number; sync: number; imports: number; ingest: number; uptimeS?: number }) =>
      outlookOf({ backlog: o.backlog, ingestRate: o.ingest, sync: { ratePerSecond: o.sync }, backfill: { rate_per_s: o.imports, sync_capacity_per_s: 4_200, enabled: true, threshold_samples: 405_000 }, batchSize: 200, uptimeS: o.uptimeS ?? 600 }).drain_eta_s;
    expect(of({ backlog: 0, sync: 80, imports: 0, ingest: 0 })).toBeNull();
    expect(of({ backlog: 10_000, sync: 200, imports: 0, ingest: 200 })).toBeNull();
    expect(of({ backlog: 10_000, sync: 100, imports: 150, ingest: 50 })).toBe(50);
    // Just restarted: 14 samples wait and nothing was measured (the old estimate said 82 min).
    expect(of({ backlog: 14, sync: 0.003, imports: 0, ingest: 0, uptimeS: 3 })).toBeNull();
  });

  // Issue 24 §1: "nothing to drain" while the backlog climbed, and "82 min" for 14 samples after a restart.
  const outlook = (o: Partial<Parameters<typeof deliveryOutlook>[0]>) =>
    deliveryOutlook({ backlog: 0, ingestRate: 0, syncRate: 0, importRate: 0, syncCapacity: 4_200, batchSize: 200, uptimeS: 600, backfillEnabled: true, thresholdSamples: 405_000, ...o });

  it('says when ingest is above the sync path\'s capacity, and whether import jobs keep up', () => {
    // 5,000 variables at 1 Hz against 1,400 requests/min × 200 (× 0.9): 4,200/s.
    const below = outlook({ backlog: 60_000, ingestRate: 5_000, syncRate: 4_150 });
    expect(below).toMatchObject({ state: 'growing', above_sync_capacity: true, import_jobs: 'waiting', drain_eta_s: null });
    expect(below.no_estimate_because).toMatch(/grows/);
    expect(outlook({ backlog: 600_000, ingestRate: 5_000, syncRate: 4_150, importRate: 3_000 })).toMatchObject({ state: 'draining', import_jobs: 'keeping_up' });
    expect(outlook({ backlog: 600_000, ingestRate: 5_000, syncRate: 4_150, importRate: 200 })).toMatchObject({ state: 'growing', import_jobs: 'falling_behind' });
    expect(outlook({ backlog: 60_000, ingestRate: 5_000, syncRate: 4_150, backfillEnabled: false })).toMatchObject({ state: 'growing', import_jobs: 'off' });
    // Right after a start above capacity: no measurement yet, but growing all the same.
    expect(outlook({ backlog: 3_000, ingestRate: 5_000, syncRate: 0, uptimeS: 3 })).toMatchObject({ state: 'growing', above_sync_capacity: true, drain_eta_s: null });
    expect(outlook({ backlog: 500, ingestRate: 20, syncRate: 20 }).above_sync_capacity).toBe(false);
    expect(outlook({ backlog: 500, ingestRate: 20, syncRate: 20 }).import_jobs).toBeNull();
  });

  it('estimates the drain only from what was delivered recently; no basis gives null, not "82 min"', () => {
    // 14 samples after a restart: nothing measured yet.
    expect(outlook({ backlog: 14, ingestRate: 20, syncRate: 0.003, uptimeS: 4 })).toMatchObject({ state: 'unknown', drain_eta_s: null });
    // Running a while but next to nothing delivered: still no basis.
    expect(outlook({ backlog: 14, ingestRate: 0.1, syncRate: 0.103 })).toMatchObject({ state: 'unknown', drain_eta_s: null });
    // Caught up: what waits is the next batch, at delivery ≈ ingest; not a drain of 82 minutes.
    const caughtUp = outlook({ backlog: 14, ingestRate: 20, syncRate: 20.003 });
    expect(caughtUp).toMatchObject({ state: 'keeping_up', drain_eta_s: null });
    expect(outlook({ backlog: 5_000, ingestRate: 20, syncRate: 20.1 })).toMatchObject({ state: 'keeping_up', drain_eta_s: null });
    // A real drain: 12,000 waiting, 80/s delivered, 20/s arriving: 200 s.
    expect(outlook({ backlog: 12_000, ingestRate: 20, syncRate: 80 })).toMatchObject({ state: 'draining', drain_eta_s: 200, no_estimate_because: null });
    expect(outlook({ backlog: 0, ingestRate: 20, syncRate: 20 })).toMatchObject({ state: 'idle', drain_eta_s: null });
    // A small plant (the demo: 15 samples/s, fewer than the estimate's 200 in 10 s) that keeps up
    // says so, rather than "too little delivered recently to estimate".
    expect(outlook({ backlog: 14, ingestRate: 15, syncRate: 15 })).toMatchObject({ state: 'keeping_up', drain_eta_s: null });
    expect(outlook({ backlog: 14, ingestRate: 15, syncRate: 15, uptimeS: 4 })).toMatchObject({ state: 'keeping_up' });
  });

  it('carries the outlook and the unknown variables into the status', () => {
    const r = readings();
    r.unknownVariables = { count: 2, examples: [{ variable: 'mvr_x', source: 'gen', message: 'unknown machine variable "mvr_x"', since: '2026-11-22T06:05:00.000Z', via: 'refusal' }], by_source: { gen: 2 }, catalog_read_at: null, catalog_error: null };
    const st = gatewayStatus(r);
    expect(st.delivery).toMatchObject({ state: 'draining', above_sync_capacity: false, import_jobs: null });
    expect(st.backlog_eta_s).toBe(st.delivery.drain_eta_s);
    expect(st.uplink.unknown_variables.count).toBe(2);
  });

  it('adds up the sources\' variables by quality; a source without variables counts for nothing', () => {
    const r = readings();
    r.sources = [
      { ...r.sources[0], name: 'press', variables: { total: 3, good: 1, uncertain: 0, bad: 1, stale: 1, none: 0 } },
      { ...r.sources[0], name: 'broker' },
      { ...r.sources[0], name: 'line', variables: { total: 2, good: 0, uncertain: 1, bad: 0, stale: 0, none: 1 } },
    ];
    expect(gatewayStatus(r).variables).toEqual({ total: 5, good: 1, uncertain: 1, bad: 1, stale: 1, none: 1 });
  });
});
