import { describe, expect, it } from 'vitest';
import { backlogEtaSeconds, gatewayStatus, type StatusReadings } from '../../src/status/model.js';

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
  health: { condition: 'ok', reason: '', since: Date.parse('2026-11-22T06:00:00.000Z'), resumeInMs: 0, consecutiveFailures: 0 },
  budget: { perMinute: 1_500, usedLastMinute: 40 },
  sync: { inflightBatches: 1, deliveredTotal: 3_800, setAsideTotal: 3, ratePerSecond: 80, freshestDeliveredTs: Date.parse('2026-11-22T06:09:58.000Z'), oldestFirstBatches: 0 },
  backfill: { rate_per_s: 0 } as StatusReadings['backfill'],
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

  it('has no backlog ETA when nothing is pending or the backlog does not shrink', () => {
    expect(backlogEtaSeconds({ backlog: 0, syncRate: 80, importRate: 0, ingestRate: 0 })).toBeNull();
    expect(backlogEtaSeconds({ backlog: 100, syncRate: 20, importRate: 0, ingestRate: 20 })).toBeNull();
    expect(backlogEtaSeconds({ backlog: 100, syncRate: 10, importRate: 15, ingestRate: 5 })).toBe(5);
  });
});
