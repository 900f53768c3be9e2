import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { readAllSamples } from '../../src/buffer/chunks/store.js';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { SampleBuffer } from '../../src/buffer/sample-buffer.js';
import { systemClock, type Clock } from '../../src/core/clock.js';
import { createLogger, silentLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { holdsFor, waitFor } from '../helpers/wait.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../src/runtime/store-schemas.js';

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
    const b = track(openTestBuffer({ clock, sealAfterMs: 60_000, sealRows: 10_000, maintenanceIdleMs: 20 }));
    const data = plant(30_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    expect(b.buffer.stats().liveRows).toBe(30_000);
    // Nothing arrives any more: only the schedule's own timer can seal. Twice seal_after later the
    // whole tail is overdue, a partial range included.
    advance(121_000);
    await waitFor(() => b.buffer.stats().liveRows === 0, { timeoutMs: 30_000, what: 'the idle tail sealed' });
    expect(b.buffer.stats().sealedSamples).toBe(30_000);
    // With nothing left to seal the newest window no longer grows: it is merged too, down to one
    // chunk per variable (20 variables of 1,500 samples).
    await b.buffer.maintenanceIdle();
    expect(b.buffer.stats().chunks).toBe(20);
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

  it('rows waiting for a full range do not keep the schedule busy: it rests, and says it is idle', async () => {
    const { clock, advance } = manualClock();
    const metrics = createMetrics();
    const b = track(openTestBuffer({ clock, metrics, sealAfterMs: 60_000, sealRows: 10_000, maintenanceIdleMs: 20 }));
    await b.buffer.append(plant(5_000));
    advance(30_000);
    await b.buffer.append(plant(1, 5_000));
    advance(31_000); // the 5,000 are eligible, but less than a range, not overdue, and a sample came 31 s ago
    await b.buffer.maintenanceIdle();
    const slices = async () => (await metrics.bufferMaintenanceSeconds.get()).values.find((v) => v.metricName === 'gateway_buffer_maintenance_seconds_count' && v.labels.task === 'chunks')?.value ?? 0;
    const before = await slices();
    await holdsFor(async () => (await slices()) - before <= 2, { forMs: 500, what: 'at most two maintenance slices while idle' });
    expect(b.buffer.stats().sealedSamples).toBe(0);
  });

  it('a seal larger than a slice runs in several slices with commits in between', async () => {
    const { clock, advance } = manualClock();
    const metrics = createMetrics();
    const b = track(openTestBuffer({ clock, metrics, sealAfterMs: 60_000, sealRows: 50_000, sliceMs: 5, maintenanceIdleMs: 20 }));
    // 50,000 rows: many 5 ms slices of range coding (chunk format 3), a minute and more beside a full test run at 100,000.
    const data = plant(50_000);
    for (let i = 0; i < data.length; i += 10_000) await b.buffer.append(data.slice(i, i + 10_000));
    advance(121_000);
    // Appends while the backlog is being sealed: commits go between the slices.
    let midSeal = 0;
    for (let i = 0; b.buffer.stats().sealedSamples < 50_000 && i < 5_000; i++) {
      await b.buffer.append(plant(10, 200_000 + i * 10));
      const sealed = b.buffer.stats().sealedSamples;
      if (sealed > 0 && sealed < 50_000) midSeal++;
    }
    await b.buffer.maintenanceIdle();
    const slices = (await metrics.bufferMaintenanceSeconds.get()).values.find((v) => v.metricName === 'gateway_buffer_maintenance_seconds_count' && v.labels.task === 'chunks')?.value ?? 0;
    expect(slices).toBeGreaterThan(5);
    expect(midSeal).toBeGreaterThan(0);
    expect(b.buffer.stats().sealedSamples).toBeGreaterThanOrEqual(50_000);
  });

  it('a staged seal whose range a sender claimed in between is discarded: the claimed rows keep their seqs, nothing is lost', async () => {
    const { clock, advance } = manualClock();
    const log = capture();
    const b = track(openTestBuffer({ clock, logger: log.logger, sealAfterMs: 60_000, sealRows: 25_000, sliceMs: 1, maintenanceIdleMs: 20 }));
    // 25,000 rows: a job of many 1 ms slices still (range coding made 50,000 take about a minute beside other test runs).
    const data = plant(25_000);
    for (let i = 0; i < data.length; i += 12_500) await b.buffer.append(data.slice(i, i + 12_500));
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
    expect(b.buffer.stats().rows).toBe(25_000);
  });
});

describe('giving disk back (B9)', () => {
  const onDisk = (path: string) => [path, `${path}-wal`].reduce((n, p) => n + (existsSync(p) ? statSync(p).size : 0), 0);

  it('free pages that stayed unused go back to the file system in steps, and an idle WAL is truncated', async () => {
    // return_free_after shortened to half a second of real time (it is a minute by default).
    const b = track(openTestBuffer({ keepFreeBytes: 64 * 1024, returnFreeAfterMs: 500, maintenanceIdleMs: 10, sealAfterMs: 3_600_000 }));
    expect(b.db.pragma('auto_vacuum', { simple: true })).toBe(2); // a new file: incremental
    const data = plant(150_000);
    for (let i = 0; i < data.length; i += 25_000) await b.buffer.append(data.slice(i, i + 25_000));
    // The backlog drains: the sync path sends and acknowledges all but the newest 1,000.
    for (;;) {
      const rows = b.buffer.claimOldest(10_000);
      if (rows.length === 0) break;
      b.buffer.ack(rows.length > 1_000 ? rows : []);
      if (rows.length <= 1_000) b.buffer.release(rows);
      await b.buffer.flush();
      if (b.buffer.stats().rows <= 1_000) break;
    }
    const peak = onDisk(b.path);
    const s0 = b.buffer.stats();
    expect(s0.freeBytes).toBeGreaterThan(2_000_000);
    await waitFor(() => b.buffer.stats().freeBytes <= 64 * 1024 + 4 * 4096, { timeoutMs: 30_000, what: 'free pages returned' });
    await waitFor(() => b.buffer.stats().walBytes === 0, { timeoutMs: 30_000, what: 'the idle WAL truncated' });
    const s1 = b.buffer.stats();
    expect(onDisk(b.path)).toBe(s1.fileBytes);
    // The whole file's bytes in use (every owner's; the samples' alone are s1.usedBytes).
    expect(s1.fileBytes).toBeLessThanOrEqual(b.store.usage.usedBytes() + 64 * 1024 + 4 * 4096);
    expect(s1.fileBytes).toBeLessThan(peak / 4);
    expect(b.db.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(s1.rows).toBe(readAllSamples(b.db).length);
  });

  it('a file of an earlier version (auto_vacuum off) is converted once at open when small, losing nothing; a big one is left as it is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-convert-'));
    const path = join(dir, 'buffer.db');
    try {
      // An earlier version's file: no auto_vacuum, then the buffer's schema and samples.
      const raw = new BetterSqlite3(path);
      raw.pragma('auto_vacuum = NONE');
      raw.exec('CREATE TABLE earlier (x)');
      raw.close();
      const log = capture();
      const first = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: log.logger, convertMaxBytes: 0 });
      expect(first.db.pragma('auto_vacuum', { simple: true })).toBe(0);
      expect(log.lines.some((l) => /converted once/.test(String(l.msg)) || /at a start when it holds at most 0 bytes/.test(String(l.msg)))).toBe(true);
      const b = track({ ...openTestBufferOn(first.db, path, dir) });
      const data = plant(20_000);
      await b.buffer.append(data);
      b.buffer.sealNow();
      await b.close();
      // A conversion cut short by a power cut left its copy: the next open removes it.
      writeFileSync(`${path}.convert`, 'half a copy');
      const second = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: log.logger });
      expect(second.db.pragma('auto_vacuum', { simple: true })).toBe(2);
      // The conversion copies the file with its own page size (4 KB, SQLite's default then).
      expect(second.db.pragma('page_size', { simple: true })).toBe(4096);
      expect(second.db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(existsSync(`${path}.convert`)).toBe(false);
      expect(readAllSamples(second.db).map(key).sort()).toEqual(data.map(key).sort());
      expect(log.lines.some((l) => /converted once/.test(String(l.msg)))).toBe(true);
      second.db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A TestBuffer over a connection the test opened itself. */
function openTestBufferOn(db: BetterSqlite3.Database, path: string, dir: string): TestBuffer {
  const store = gatewayStore(db);
  const buffer = new SampleBuffer(store, { commitIntervalMs: 20, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: createMetrics(), clock: systemClock });
  let closed = false;
  return {
    buffer,
    store,
    db,
    metrics: createMetrics(),
    path,
    dir,
    rows: () => [],
    close: async () => {
      if (!closed) await buffer.close();
      closed = true;
    },
    destroy: async () => {
      if (!closed) await buffer.close();
      closed = true;
    },
  };
}
