import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { readAllSamples } from '../../src/buffer/chunks/store.js';
import type { Clock } from '../../src/core/clock.js';
import { createLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The maintenance schedule (src/buffer/maintenance.ts, README.md B7): sealing runs on its own
 * clock, off the acknowledgement path, in slices, and a staged job whose range changed is
 * discarded without writing.
 */
const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});
function track(b: TestBuffer): TestBuffer {
  open.push(b);
  return b;
}

const T0 = Date.UTC(2026, 10, 1);
const plant = (n: number, from = 0, vars = 20) =>
  Array.from({ length: n }, (_, i) => ({ variable: `mvr_${(from + i) % vars}`, ts: T0 + Math.floor((from + i) / vars) * 1000, value: Math.round(Math.sin((from + i) / 30) * 1e4) / 100 }));
const key = (s: { variable: string; ts: number; value: number }) => `${s.variable}|${s.ts}|${s.value}`;

/** A clock whose monotonic time the test moves (seal_after is measured on it); wall time is real. */
function manualClock() {
  let mono = 1_000_000;
  const clock: Clock = { now: () => Date.now(), monotonic: () => mono };
  return { clock, advance: (ms: number) => (mono += ms) };
}

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const listeners: Array<(l: Record<string, unknown>) => void> = [];
  const stream = new Writable({
    write(chunk, _e, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) {
        const entry = JSON.parse(l) as Record<string, unknown>;
        lines.push(entry);
        for (const f of listeners) f(entry);
      }
      cb();
    },
  });
  return { logger: createLogger({ level: 'debug', format: 'json', destination: stream }), lines, on: (f: (l: Record<string, unknown>) => void) => listeners.push(f) };
}

describe('maintenance on its own schedule (B7)', () => {
  it('an idle buffer seals its aged rows without any new commit', async () => {
    const { clock, advance } = manualClock();
    const b = track(openTestBuffer({ clock, sealAfterMs: 60_000, maintenanceIdleMs: 20 }));
    const data = plant(30_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    expect(b.buffer.stats().liveRows).toBe(30_000);
    // Nothing arrives any more: only the schedule's own timer can seal. Twice seal_after later the
    // whole tail is overdue, a partial range included.
    advance(121_000);
    await waitFor(() => b.buffer.stats().liveRows === 0, { timeoutMs: 30_000, what: 'the idle tail sealed' });
    expect(b.buffer.stats().sealedSamples).toBe(30_000);
    expect(readAllSamples(b.db).map(key).sort()).toEqual(data.map(key).sort());
  });

  it('an append resolves before any sealing its commit made due: the acknowledgement never waits for a seal', async () => {
    const { clock, advance } = manualClock();
    // No idle timer in this test: only a commit wakes the schedule.
    const b = track(openTestBuffer({ clock, sealAfterMs: 60_000, maintenanceIdleMs: 3_600_000 }));
    const data = plant(20_000);
    await b.buffer.append(data);
    advance(121_000); // the rows are overdue now
    let atResolve: { sealed: number; live: number } | null = null;
    await b.buffer.append(plant(10, 20_000)).then(() => {
      const s = b.buffer.stats();
      atResolve = { sealed: s.sealedSamples, live: s.liveRows };
    });
    // The commit resolved its append first; the seal it made due runs in later turns.
    expect(atResolve).toEqual({ sealed: 0, live: 20_010 });
    await b.buffer.maintenanceIdle();
    expect(b.buffer.stats().sealedSamples).toBe(20_000);
    expect(b.buffer.stats().liveRows).toBe(10);
  });

  it('a seal larger than a slice runs in several slices with commits in between', async () => {
    const { clock, advance } = manualClock();
    const metrics = createMetrics();
    const b = track(openTestBuffer({ clock, metrics, sealAfterMs: 60_000, sealRows: 100_000, sliceMs: 5, maintenanceIdleMs: 20 }));
    const data = plant(100_000);
    for (let i = 0; i < data.length; i += 20_000) await b.buffer.append(data.slice(i, i + 20_000));
    advance(121_000);
    // Appends while the backlog is being sealed: commits go between the slices.
    let midSeal = 0;
    for (let i = 0; b.buffer.stats().sealedSamples < 100_000 && i < 5_000; i++) {
      await b.buffer.append(plant(10, 200_000 + i * 10));
      const sealed = b.buffer.stats().sealedSamples;
      if (sealed > 0 && sealed < 100_000) midSeal++;
    }
    await b.buffer.maintenanceIdle();
    const slices = (await metrics.bufferMaintenanceSeconds.get()).values.find((v) => v.metricName === 'gateway_buffer_maintenance_seconds_count' && v.labels.task === 'chunks')?.value ?? 0;
    expect(slices).toBeGreaterThan(5);
    expect(midSeal).toBeGreaterThan(0);
    expect(b.buffer.stats().sealedSamples).toBeGreaterThanOrEqual(100_000);
  });

  it('a staged seal whose range a sender claimed in between is discarded: the claimed rows keep their seqs, nothing is lost', async () => {
    const { clock, advance } = manualClock();
    const log = capture();
    const b = track(openTestBuffer({ clock, logger: log.logger, sealAfterMs: 60_000, sealRows: 50_000, sliceMs: 1, maintenanceIdleMs: 20 }));
    const data = plant(50_000);
    for (let i = 0; i < data.length; i += 25_000) await b.buffer.append(data.slice(i, i + 25_000));
    const rowsBefore = b.rows();
    let started = false;
    log.on((l) => {
      if (l.event === 'buffer_seal_started') started = true;
    });
    advance(121_000);
    await waitFor(() => started, { timeoutMs: 20_000, intervalMs: 0, what: 'a seal job started' });
    // The job is staging (it takes many 1 ms slices); the sync path claims the oldest rows now.
    const claimed = b.buffer.claimOldest(100);
    expect(claimed).toHaveLength(100);
    await waitFor(() => log.lines.some((l) => l.event === 'buffer_seal_discarded'), { timeoutMs: 20_000, what: 'the staged seal discarded' });
    const bySeq = new Map(b.rows().map((r) => [r.seq, r]));
    for (const c of claimed) expect(bySeq.get(c.seq)).toEqual(rowsBefore.find((r) => r.seq === c.seq));
    b.buffer.release(claimed);
    await b.buffer.maintenanceIdle();
    expect(readAllSamples(b.db).map(key).sort()).toEqual(data.map(key).sort());
    expect(b.buffer.stats().rows).toBe(50_000);
  });
});
