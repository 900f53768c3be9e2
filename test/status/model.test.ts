import { describe, expect, it } from 'vitest';
import { deliveryOutlook, gatewayStatus, type StatusReadings } from '../../src/status/model.js';
import { uplinkSummary, type UplinkStateReadings } from '../../src/status/uplink-state.js';
import type { BacklogTrend } from '../../src/uplink/backlog-meter.js';

const T0 = Date.parse('2026-11-22T06:00:00.000Z');

const trend = (o: Partial<BacklogTrend> = {}): BacklogTrend => ({
  change30s: 0,
  rise30s: 0,
  growing: false,
  growingSince: null,
  deliverableIngestPerS: 20,
  deliverableIngestRecentPerS: 20,
  syncPerS: 80,
  importPerS: 0,
  measuredS: 120,
  ...o,
});

const backfill = (o: Partial<StatusReadings['backfill']> = {}): StatusReadings['backfill'] =>
  ({
    enabled: true, jobs_in_flight: 0, jobs: [], rate_per_s: 0, delivered_last_minute: 0, delivered_total: 0, set_aside_total: 0, failed_total: 0, sync_only_ranges: 0,
    backlog_at_start: 0, threshold_s: 120, wants_jobs: false, start_rule: 'nothing waits', keep_samples: 18_000, job_turnaround_s: null, oldest_job_age_s: null, sync_capacity_per_s: 300,
    ...o,
  }) as StatusReadings['backfill'];

const readings = (): StatusReadings => ({
  now: Date.parse('2026-11-22T06:10:00.000Z'),
  gateway: { name: 'gw', version: '0.1.0', startedAt: T0, pid: 42, memory: { rss_bytes: 1, heap_used_bytes: 2, external_bytes: 3 } },
  sources: [{ name: 'gen', kind: 'generator', state: 'connected', since: 0, samplesRead: 10, samplesRefused: {}, lastSampleAt: null, lastError: null }] as StatusReadings['sources'],
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
  unknownVariables: { count: 0, suspects: 0, quarantined: 0, examples: [], by_source: {}, catalog_read_at: null, catalog_error: null, catalog_reading: false },
  health: { condition: 'ok', reason: '', refused: null, since: T0, resumeInMs: 0, consecutiveFailures: 0 },
  budget: { perMinute: 1_400, usedLastMinute: 40, sharePerMinute: 1_400, pacePerMinute: 1_400, rate: { found_per_minute: null, limit_seen_per_minute: null, rate_limited_total: 0, last_rate_limited_at: null, paused_ms: 0 } },
  trend: trend(),
  outage: null,
  mappedVariables: 20,
  sync: { inflightBatches: 1, deliveredTotal: 3_800, setAsideTotal: 3, ratePerSecond: 80, freshestDeliveredTs: Date.parse('2026-11-22T06:09:58.000Z'), oldestFirstBatches: 0 },
  backfill: backfill(),
  annotations: null,
  fleet: null,
  config: { path: null, loaded_at: '2026-11-22T06:00:00.000Z', reloads_applied: 0, reloads_refused: 0, last_reload: null },
});

const outlook = (o: { backlog?: number; inJobs?: number; oldestAgeS?: number | null; trend?: Partial<BacklogTrend>; backfill?: Partial<StatusReadings['backfill']> } = {}) =>
  deliveryOutlook({ backlog: o.backlog ?? 0, inJobs: o.inJobs ?? 0, oldestAgeS: o.oldestAgeS ?? 30, batchSize: 200, trend: trend(o.trend), backfill: backfill(o.backfill) });

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
    // 1,200 samples drain at 80/s delivered less 20/s arriving.
    expect(a.backlog_eta_s).toBe(20);
    expect(a.uplink.state).toMatchObject({ state: 'delivering', text: 'delivering everything', ok: true });
    expect('annotations' in a || 'fleet' in a).toBe(false);
  });

  it('says "growing" whenever the backlog grew for 30 s: never a drain time or "keeping up" then', () => {
    // The rates alone would say "draining" (80/s out, 20/s in): the measured backlog says otherwise.
    const o = outlook({ backlog: 50_000, trend: { growing: true, rise30s: 9_000, change30s: 9_000, growingSince: T0 } });
    expect(o).toMatchObject({ state: 'growing', drain_eta_s: null, backlog_rise_30s: 9_000, growing_since: '2026-11-22T06:00:00.000Z' });
    expect(o.no_estimate_because).toMatch(/rose by 9000 samples in 30 s/);
    // Right after an import job took most of it, the backlog is smaller than 30 s ago yet climbs again.
    expect(outlook({ backlog: 30_000, trend: { growing: true, change30s: -20_000, rise30s: 6_000 } }).state).toBe('growing');
  });

  it('has nothing to say about a drain without measurements, and nothing waits is idle', () => {
    expect(outlook({ backlog: 0 })).toMatchObject({ state: 'idle', drain_eta_s: null });
    expect(outlook({ backlog: 14, trend: { measuredS: 3 } })).toMatchObject({ state: 'unknown', drain_eta_s: null });
    expect(outlook({ backlog: 150 })).toMatchObject({ state: 'keeping_up', drain_eta_s: null });
    // Flat: delivery matches arrivals at a backlog of 5,000 (import jobs off: else one will take it).
    expect(outlook({ backlog: 5_000, trend: { syncPerS: 20, deliverableIngestPerS: 20, deliverableIngestRecentPerS: 20 }, backfill: { enabled: false } })).toMatchObject({ state: 'keeping_up', drain_eta_s: null });
    expect(outlook({ backlog: 5_000, trend: { syncPerS: 20, deliverableIngestPerS: 20, deliverableIngestRecentPerS: 20 } })).toMatchObject({ state: 'unknown', drain_eta_s: null, no_estimate_because: 'an import job will take the backlog, and none has finished yet to time one' });
  });

  it('drains at the measured sync rate less the deliverable ingest, the lower of its two windows', () => {
    // 200 s through the sync path, within a threshold of 10 min.
    expect(outlook({ backlog: 12_000, backfill: { threshold_s: 600 } })).toMatchObject({ state: 'draining', drain_eta_s: 200, no_estimate_because: null });
    // The source just stopped: the last 2 s saw nothing arrive, the last 5 s still some.
    expect(outlook({ backlog: 12_000, trend: { syncPerS: 300, deliverableIngestPerS: 600, deliverableIngestRecentPerS: 0 } }).drain_eta_s).toBe(40);
  });

  it('counts import jobs by what they will do: in flight by their measured turnaround; to come by the threshold rule', () => {
    // A job in flight for 20 s of a measured 30 s turnaround holds 80,000; the sync path keeps 5,000 at a net 250/s.
    const inFlight = outlook({ backlog: 85_000, inJobs: 80_000, trend: { syncPerS: 300, deliverableIngestPerS: 50, deliverableIngestRecentPerS: 50 }, backfill: { jobs_in_flight: 1, job_turnaround_s: 30, oldest_job_age_s: 20 } });
    expect(inFlight).toMatchObject({ state: 'draining', import_jobs: 'running', drain_eta_s: 20 });
    // None finished yet: no basis (and no "keeps up").
    expect(outlook({ backlog: 85_000, inJobs: 80_000, backfill: { jobs_in_flight: 1 } })).toMatchObject({ state: 'unknown', drain_eta_s: null });
    // 60,000 at a net 300/s is 200 s through the sync path, more than the 120 s threshold: the oldest
    // is 90 s old, so a job starts in 30 s and takes all but the 18,000 kept (60 s at 300/s).
    const toCome = outlook({ backlog: 60_000, oldestAgeS: 90, trend: { syncPerS: 300, deliverableIngestPerS: 0, deliverableIngestRecentPerS: 0 }, backfill: { job_turnaround_s: 10 } });
    expect(toCome).toMatchObject({ state: 'draining', drain_eta_s: 30 + 60 });
    expect(outlook({ backlog: 60_000, oldestAgeS: 90, trend: { syncPerS: 300, deliverableIngestPerS: 0, deliverableIngestRecentPerS: 0 }, backfill: { enabled: false } }).drain_eta_s).toBe(200);
  });

  it('names what import jobs do, never "keep up"', () => {
    const above = { trend: { deliverableIngestPerS: 1_000, deliverableIngestRecentPerS: 1_000, syncPerS: 300, growing: true, rise30s: 20_000 } };
    expect(outlook({ backlog: 60_000, ...above })).toMatchObject({ state: 'growing', above_sync_capacity: true, import_jobs: 'waiting' });
    expect(outlook({ backlog: 60_000, inJobs: 40_000, ...above, backfill: { jobs_in_flight: 1 } })).toMatchObject({ state: 'growing', import_jobs: 'running' });
    expect(outlook({ backlog: 60_000, ...above, backfill: { enabled: false } })).toMatchObject({ import_jobs: 'off' });
    expect(outlook({ backlog: 500 }).import_jobs).toBeNull();
  });

  it('carries the outlook, the state and the unknown variables into the status', () => {
    const r = readings();
    r.mappedVariables = 5_000;
    r.unknownVariables = { ...r.unknownVariables, count: 4_980, examples: [{ variable: 'mvr_x', source: 'gen', message: 'The request payload is invalid.', since: '2026-11-22T06:05:00.000Z', via: 'catalog' }], by_source: { gen: 4_980 } };
    const st = gatewayStatus(r);
    expect(st.delivery).toMatchObject({ state: 'draining', above_sync_capacity: false, import_jobs: null });
    expect(st.backlog_eta_s).toBe(st.delivery.drain_eta_s);
    expect(st.uplink.state).toMatchObject({ state: 'partial', ok: false, text: 'delivering 20 of 5,000 variables (4,980 unknown to the service)' });
  });
});

describe('the uplink state, one vocabulary', () => {
  const base: UplinkStateReadings = { condition: 'ok', refused: null, since: T0, mappedVariables: 5_000, unknownVariables: 0, suspectVariables: 0, refusedVariables: 0, foundPerMinute: null, rateLimits: false, backlogGrows: false, budgetPerMinute: 1_400, budgetSaturated: false };
  const cases: Array<[Partial<UplinkStateReadings>, string, string]> = [
    [{}, 'delivering', 'delivering everything'],
    [{ unknownVariables: 4_980 }, 'partial', 'delivering 20 of 5,000 variables (4,980 unknown to the service)'],
    [{ unknownVariables: 3, refusedVariables: 1, suspectVariables: 2 }, 'partial', 'delivering 4,994 of 5,000 variables (3 unknown to the service, 1 refused by the service, 2 being checked against its catalog)'],
    [{ refusedVariables: 1 }, 'partial', 'delivering 4,999 of 5,000 variables (1 refused by the service)'],
    [{ unknownVariables: 3, mappedVariables: null }, 'partial', 'delivering all but 3 variables (3 unknown to the service)'],
    [{ foundPerMinute: 87.6, rateLimits: true }, 'rate_limited', 'rate limited (limit found: 88/min)'],
    [{ foundPerMinute: 87.6, rateLimits: false }, 'delivering', 'delivering everything'],
    [{ backlogGrows: true }, 'rate_limited', 'rate limited (the budget: 1,400/min)'],
    // Samples held while the catalog judges suspects grow the backlog: the budget is not the limit then.
    [{ backlogGrows: true, unknownVariables: 4_980 }, 'partial', 'delivering 20 of 5,000 variables (4,980 unknown to the service)'],
    [{ backlogGrows: true, budgetSaturated: true, unknownVariables: 4_980 }, 'partial', 'delivering 20 of 5,000 variables (4,980 unknown to the service); rate limited (the budget: 1,400/min)'],
    [{ unknownVariables: 10, foundPerMinute: 90, rateLimits: true }, 'partial', 'delivering 4,990 of 5,000 variables (10 unknown to the service); rate limited (limit found: 90/min)'],
    [{ condition: 'retrying', unknownVariables: 10 }, 'unreachable', 'unreachable since 2026-11-22T06:00:00.000Z'],
    [{ condition: 'auth_failed', refused: 'authentication' }, 'refused', 'refused (authentication)'],
    [{ condition: 'halted', refused: 'organisation' }, 'refused', 'refused (organisation not authorised)'],
    [{ condition: 'halted', refused: 'items' }, 'refused', 'refused (every item of whole batches)'],
  ];
  it.each(cases)('%o → %s: %s', (over, state, text) => {
    const s = uplinkSummary({ ...base, ...over });
    expect(s.state).toBe(state);
    expect(s.text).toBe(text);
    // "ok" only when everything mapped is delivered.
    expect(s.ok).toBe(state === 'delivering');
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
