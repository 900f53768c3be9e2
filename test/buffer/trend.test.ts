import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openBufferDatabase } from '../../src/store/file/database.js';
import { SCHEMA_VERSION } from '../../src/runtime/store-schemas.js';
import { SampleBuffer } from '../../src/buffer/sample-buffer.js';
import { TREND_GRACE_MS, TREND_KEEP_MS, TrendStore } from '../../src/buffer/trend.js';
import { VariableDictionary } from '../../src/buffer/variables.js';
import { BUCKET_MS, BUCKETS, ValueRing } from '../../src/console/value-ring.js';
import { TrendKeeper } from '../../src/console/trend-keeper.js';
import type { Clock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import type { Sample } from '../../src/core/sample.js';
import { openTestBuffer, type TestBuffer } from '../helpers/buffer.js';
import { captureLines } from '../helpers/log.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../../src/runtime/store-schemas.js';

/**
 * The trend room (src/buffer/trend.ts, issue 24 §4) with the console's ring as its source
 * (src/console/trend-keeper.ts): closed buckets written on the maintenance schedule, read back
 * into a fresh ring after a restart, pruned, bounded, and a file of schema 5 migrated.
 */
const open: TestBuffer[] = [];
afterEach(async () => {
  for (const b of open.splice(0)) await b.destroy();
});

/** A wall clock the test moves, at a bucket boundary to start with; monotonic time is real. */
function wallClock(start = Date.UTC(2026, 10, 30, 12, 0, 0)) {
  let now = start;
  const clock: Clock = { now: () => now, monotonic: () => performance.now() };
  return { clock, set: (t: number) => (now = t), get: () => now };
}

/** The gateway's path for samples: committed to the buffer, then shown to the ring (the tap). */
async function feed(b: TestBuffer, ring: ValueRing, samples: Sample[]): Promise<void> {
  await b.buffer.append(samples);
  ring.onSamples(samples);
}

/** One sample a second for `seconds` from `t0` of each variable, value = f(variable index, second). */
function series(t0: number, seconds: number, vars: string[], f: (v: number, s: number) => number): Sample[] {
  const out: Sample[] = [];
  for (let s = 0; s < seconds; s++) vars.forEach((variable, v) => out.push({ variable, ts: t0 + s * 1000, value: f(v, s) }));
  return out;
}

/** The trend a fresh ring shows for `id` after seeding from `buffer` at `now`. */
async function seededTrend(buffer: SampleBuffer, now: number, id: string) {
  const ring = new ValueRing();
  await new TrendKeeper(ring).seed(buffer, now);
  const e = ring.get(id);
  return { ring, e, trend: e ? ring.trend(e) : [] };
}

/** What a process killed now would find in the file: read through a second connection, no stop. */
function keptOnDisk(path: string, now: number, id: string) {
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    const file = gatewayStore(db);
    const store = new TrendStore(file.owner('trend'), { clock: { now: () => now, monotonic: () => 0 }, logger: silentLogger(), dict: new VariableDictionary(file.owner('samples')), wrote: () => {} });
    const out: Array<[number, number, number, number]> = [];
    store.read(BUCKET_MS, now - BUCKETS * BUCKET_MS, (v, start, min, max, count) => {
      if (v === id) out.push([start, min, max, count]);
    });
    return out.sort((a, b) => a[0] - b[0]);
  } finally {
    db.close();
  }
}

describe('the trend room', () => {
  it('keeps closed buckets on the maintenance schedule; a fresh ring after a clean stop shows them, values and last value included', async () => {
    const w = wallClock();
    const t0 = w.get();
    const b = openTestBuffer({ clock: w.clock });
    open.push(b);
    const ring = new ValueRing();
    const keeper = new TrendKeeper(ring);
    expect(await keeper.seed(b.buffer, w.get())).toBe(0);
    const stop = b.buffer.keepTrend(keeper);
    // 45 s of two variables at 1 Hz: buckets 0..3 full, bucket 4 half.
    const samples = series(t0, 45, ['mvr_a', 'mvr_b'], (v, s) => (v === 0 ? s : 100 - s));
    await feed(b, ring, samples);
    w.set(t0 + 45_000);
    await b.buffer.maintenanceIdle();
    // Buckets closed by the clock (40 s − grace): 0..3, one row.
    expect(b.buffer.trendSize().rows).toBe(1);
    expect(keptOnDisk(b.path, w.get(), 'mvr_a')).toEqual([0, 1, 2, 3].map((k) => [t0 + k * 10_000, k * 10, k * 10 + 9, 10]));
    stop();
    // The clean stop wrote the open bucket too.
    expect(b.buffer.trendSize().rows).toBe(2);
    await b.close();

    const { db } = openBufferDatabase(b.path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    const again = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 20, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: b.metrics, clock: w.clock });
    try {
      w.set(t0 + 60_000);
      const a = await seededTrend(again, w.get(), 'mvr_a');
      expect(a.trend).toEqual([0, 1, 2, 3, 4].map((k) => [t0 + k * 10_000, k * 10, k * 10 + (k === 4 ? 4 : 9), k === 4 ? 5 : 10]));
      expect((await seededTrend(again, w.get(), 'mvr_b')).trend[0]).toEqual([t0, 91, 100, 10]);
      // The last value and its time are those before the stop; seeded buckets are no samples seen.
      expect(a.e).toMatchObject({ last: 44, lastTs: t0 + 44_000, total: 0, pending: 0, dirty: false });
      expect(a.ring.takeDirty()).toEqual([]);
    } finally {
      await again.close();
    }
  });

  it('takes buckets outside commits, after the acknowledgement of the commit that woke the schedule (B7)', async () => {
    const w = wallClock();
    const t0 = w.get();
    // No idle timer: only a commit wakes the schedule.
    const b = openTestBuffer({ clock: w.clock, maintenanceIdleMs: 3_600_000 });
    open.push(b);
    const ring = new ValueRing();
    const keeper = new TrendKeeper(ring);
    let resolved = false;
    const takes: Array<{ resolved: boolean; inTransaction: boolean; put: number }> = [];
    b.buffer.keepTrend({
      bucketMs: keeper.bucketMs,
      take: (closedBefore, from, limit, put) => {
        const seen = { resolved, inTransaction: b.db.inTransaction, put: 0 };
        takes.push(seen);
        return keeper.take(closedBefore, from, limit, (...args) => {
          seen.put++;
          put(...args);
        });
      },
    });
    await feed(b, ring, series(t0, 10, ['mvr_a', 'mvr_b'], (v, s) => v + s));
    await b.buffer.maintenanceIdle();
    takes.length = 0;
    // The bucket is over; the next commit wakes the schedule, whose take runs after it resolved.
    w.set(t0 + 10_000 + TREND_GRACE_MS);
    await b.buffer.append([{ variable: 'mvr_a', ts: t0 + 11_000, value: 7 }]).then(() => {
      resolved = true;
      expect(takes).toEqual([]);
    });
    await b.buffer.maintenanceIdle();
    expect(takes).toEqual([{ resolved: true, inTransaction: false, put: 2 }]);
    expect(b.buffer.trendSize().rows).toBe(1);
  });

  it('after a kill (no stop), the file holds every bucket but the open one and the one closing', async () => {
    const w = wallClock();
    const t0 = w.get();
    const b = openTestBuffer({ clock: w.clock });
    open.push(b);
    const ring = new ValueRing();
    const keeper = new TrendKeeper(ring);
    await keeper.seed(b.buffer, t0);
    b.buffer.keepTrend(keeper);
    // The gateway runs for 2 minutes with the schedule taking buckets as they close.
    for (let s = 0; s < 120; s += 5) {
      await feed(b, ring, series(t0 + s * 1000, 5, ['mvr_a'], (_v, x) => s + x));
      w.set(t0 + (s + 5) * 1000);
      await b.buffer.maintenanceIdle();
    }
    // Killed now (t0 + 120 s, 0 s into bucket 12): bucket 11 ended less than the grace ago.
    expect(TREND_GRACE_MS).toBeGreaterThan(0);
    const kept = keptOnDisk(b.path, w.get(), 'mvr_a');
    expect(kept).toEqual(Array.from({ length: 11 }, (_, k) => [t0 + k * 10_000, k * 10, k * 10 + 9, 10]));
    // One row per take, each with the buckets closed since the one before.
    expect(b.buffer.trendSize().rows).toBe(11);
  });

  it('a bucket written open at a stop and completed after the restart is read from the newest copy', async () => {
    const w = wallClock();
    const t0 = w.get();
    const first = openTestBuffer({ clock: w.clock });
    open.push(first);
    let ring = new ValueRing();
    let keeper = new TrendKeeper(ring);
    let stop = first.buffer.keepTrend(keeper);
    await feed(first, ring, series(t0, 25, ['mvr_a'], (_v, s) => s));
    w.set(t0 + 25_000);
    await first.buffer.maintenanceIdle();
    stop();
    await first.close();

    // Restarted 2 s later, inside the same bucket: the rest of bucket 2 comes after the restart.
    const { db } = openBufferDatabase(first.path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    const second = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 20, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: first.metrics, clock: w.clock });
    try {
      w.set(t0 + 27_000);
      ring = new ValueRing();
      keeper = new TrendKeeper(ring);
      await keeper.seed(second, w.get());
      stop = second.keepTrend(keeper);
      expect(ring.trend(ring.get('mvr_a')!).at(-1)).toEqual([t0 + 20_000, 20, 24, 5]);
      const rest = series(t0 + 27_000, 3, ['mvr_a'], (_v, s) => 50 + s);
      await second.append(rest);
      ring.onSamples(rest);
      w.set(t0 + 30_000 + TREND_GRACE_MS);
      await second.maintenanceIdle();
      // The completed bucket: the 5 samples before the stop and the 3 after it.
      expect(ring.trend(ring.get('mvr_a')!).at(-1)).toEqual([t0 + 20_000, 20, 52, 8]);
      expect((await seededTrend(second, w.get(), 'mvr_a')).trend).toEqual([
        [t0, 0, 9, 10],
        [t0 + 10_000, 10, 19, 10],
        [t0 + 20_000, 20, 52, 8],
      ]);
      stop();
    } finally {
      await second.close();
    }
  });

  it('reads back a row per event-loop turn, and a take while reading hands nothing', async () => {
    const w = wallClock();
    const t0 = w.get();
    const b = openTestBuffer({ clock: w.clock });
    open.push(b);
    const ring = new ValueRing();
    const stop = b.buffer.keepTrend(new TrendKeeper(ring));
    for (let s = 0; s < 30; s += 10) {
      await feed(b, ring, series(t0 + s * 1000, 10, ['mvr_a'], (_v, x) => s + x));
      w.set(t0 + (s + 10) * 1000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
    }
    stop();
    expect(b.buffer.trendSize().rows).toBe(3);
    const fresh = new ValueRing();
    const keeper = new TrendKeeper(fresh);
    const seeding = keeper.seed(b.buffer, w.get());
    // Other work runs between the rows (here after one or two of the three, newest first).
    await new Promise<void>((resolve) => setImmediate(resolve));
    const partly = fresh.trend(fresh.get('mvr_a')!);
    expect(partly.length).toBeLessThan(3);
    expect(partly.at(-1)).toEqual([t0 + 20_000, 20, 29, 10]);
    expect(keeper.take(Infinity, 0, 1_000, () => expect.unreachable('a take while seeding'))).toBe(0);
    expect(await seeding).toBe(3);
    expect(fresh.trend(fresh.get('mvr_a')!).map((x) => x[0])).toEqual([t0, t0 + 10_000, t0 + 20_000]);
  });

  it('prunes rows older than the ring window in maintenance, also with no source', async () => {
    const w = wallClock();
    const t0 = w.get();
    const b = openTestBuffer({ clock: w.clock });
    open.push(b);
    const ring = new ValueRing();
    const stop = b.buffer.keepTrend(new TrendKeeper(ring));
    for (let s = 0; s < 60; s += 10) {
      await feed(b, ring, series(t0 + s * 1000, 10, ['mvr_a', 'mvr_b'], (v, x) => v + x));
      w.set(t0 + (s + 10) * 1000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
    }
    expect(b.buffer.trendSize().rows).toBe(6);
    stop();
    const rows = b.buffer.trendSize().rows;
    // 11 minutes after the newest bucket started, nothing is left, without any new take.
    w.set(t0 + 50_000 + TREND_KEEP_MS + 1);
    await b.buffer.maintenanceIdle();
    expect(rows).toBeGreaterThan(0);
    expect(b.buffer.trendSize().rows).toBe(0);
    expect(b.db.prepare('SELECT count(*) FROM trend').pluck().get()).toBe(0);
  });

  it('stays under its own space (store.trend_max_bytes), oldest rows first; samples at their bound neither stop it nor count it', async () => {
    const w = wallClock();
    const t0 = w.get();
    // The trend may use 200 kB. 2,000 variables of noise make ~30 kB per take.
    const b = openTestBuffer({ clock: w.clock, maxBytes: 4_000_000, limits: { trend: 200_000 } });
    open.push(b);
    const ring = new ValueRing();
    b.buffer.keepTrend(new TrendKeeper(ring));
    const vars = Array.from({ length: 2_000 }, (_, i) => `mvr_v${i}`);
    let seed = 1;
    const noise = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 1000;
    const sizes: number[] = [];
    for (let s = 0; s < 200; s += 10) {
      await feed(b, ring, series(t0 + s * 1000, 10, vars, () => noise()));
      w.set(t0 + (s + 10) * 1000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
      sizes.push(b.buffer.trendSize().bytes);
    }
    const { bytes, capBytes, rows } = b.buffer.trendSize();
    expect(capBytes).toBe(200_000);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(capBytes);
    expect(rows).toBeLessThan(20);
    expect(bytes).toBeGreaterThan(capBytes / 2);
    // The newest bucket is always there: the oldest rows went.
    expect(keptOnDisk(b.path, w.get(), 'mvr_v7').at(-1)?.[0]).toBe(t0 + 190_000);

    // Samples over their bound (a backlog filled it): the trend is an owner of its own, so it goes
    // on keeping its buckets, and its pages are not the samples' (side tables are counted apart).
    const full = openTestBuffer({ clock: w.clock, maxBytes: 1_000_000, whenFull: 'refuse_new' });
    open.push(full);
    const ring2 = new ValueRing();
    full.buffer.keepTrend(new TrendKeeper(ring2));
    await full.buffer.append(series(t0, 200, vars.slice(0, 500), () => noise()));
    expect(full.buffer.usedBytes()).toBeGreaterThan(1_000_000);
    ring2.onSamples(series(t0, 20, ['mvr_v1'], (_v, s) => s));
    w.set(t0 + 30_000);
    await full.buffer.maintenanceIdle();
    expect(full.buffer.trendSize().rows).toBeGreaterThan(0);
    const owners = Object.fromEntries(full.store.status().owners.map((o) => [o.owner, o.bytes]));
    expect(owners.trend).toBeGreaterThan(0);
    expect(full.buffer.usedBytes()).toBe(owners.samples);
    expect(Object.values(owners).reduce((a, n) => a + n, 0)).toBe(full.store.usage.usedBytes());
  });

  it('in a small space, keeps what fits: small parts, the newest buckets, under the cap', async () => {
    const w = wallClock();
    const t0 = w.get();
    const cap = captureLines();
    // 50 kB for the trend, less than one take of 5,000 noisy variables.
    const b = openTestBuffer({ clock: w.clock, maxBytes: 1_000_000, limits: { trend: 50_000 }, logger: cap.logger, sliceMs: 10_000 });
    open.push(b);
    const ring = new ValueRing();
    b.buffer.keepTrend(new TrendKeeper(ring));
    const vars = Array.from({ length: 5_000 }, (_, i) => `mvr_v${i}`);
    for (let i = 0; i < 2; i++) {
      const samples = series(t0 + i * 10_000, 1, vars, (v) => Math.sin(v) * 1e3 + i);
      await b.buffer.append(samples);
      ring.onSamples(samples);
      w.set(t0 + (i + 1) * 10_000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
    }
    expect(b.buffer.usedBytes()).toBeLessThan(1_000_000);
    const { rows, bytes, capBytes } = b.buffer.trendSize();
    expect(capBytes).toBe(50_000);
    expect(bytes).toBeLessThanOrEqual(capBytes);
    expect(rows).toBeGreaterThan(1);
    // The newest rows stayed: the last variables of the second take.
    expect(keptOnDisk(b.path, w.get(), 'mvr_v4999')).toEqual([[t0 + 10_000, Math.fround(Math.sin(4_999) * 1e3 + 1), Math.fround(Math.sin(4_999) * 1e3 + 1), 1]]);
    // The first take's rows went to make room (two takes are more than the cap).
    expect(keptOnDisk(b.path, w.get(), 'mvr_v0').map((k) => k[0])).not.toContain(t0);
    expect(cap.lines.filter((l) => String(l.msg).includes('not kept across restarts'))).toEqual([]);
  });

  it('a part larger than the cap alone is not written, said once in the log', async () => {
    const w = wallClock();
    const t0 = w.get();
    const cap = captureLines();
    // 1,000 bytes for the trend (below what the configuration allows), less than a part of the
    // least 100 variables.
    const b = openTestBuffer({ clock: w.clock, limits: { trend: 1_000 }, logger: cap.logger });
    open.push(b);
    const ring = new ValueRing();
    b.buffer.keepTrend(new TrendKeeper(ring));
    const vars = Array.from({ length: 500 }, (_, i) => `mvr_v${i}`);
    for (let i = 0; i < 2; i++) {
      const samples = series(t0 + i * 10_000, 1, vars, (v) => Math.sin(v) * 1e3 + i);
      await b.buffer.append(samples);
      ring.onSamples(samples);
      w.set(t0 + (i + 1) * 10_000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
    }
    expect(b.buffer.trendSize().rows).toBe(0);
    const warned = cap.lines.filter((l) => String(l.msg).includes('not kept across restarts'));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ cap_bytes: 1_000 });
    expect(String(warned[0].msg)).toMatch(/store\.trend_max_bytes: 1000 bytes/);
  });

  it('skips a damaged row with a warning and reads the others', async () => {
    const w = wallClock();
    const t0 = w.get();
    const cap = captureLines();
    const b = openTestBuffer({ clock: w.clock, logger: cap.logger });
    open.push(b);
    const ring = new ValueRing();
    b.buffer.keepTrend(new TrendKeeper(ring));
    for (let s = 0; s < 30; s += 10) {
      await feed(b, ring, series(t0 + s * 1000, 10, ['mvr_a'], (_v, x) => s + x));
      w.set(t0 + (s + 10) * 1000 + TREND_GRACE_MS);
      await b.buffer.maintenanceIdle();
    }
    b.db.prepare('UPDATE trend SET data = ? WHERE id = (SELECT min(id) FROM trend)').run(Buffer.from([1, 2, 3, 4]));
    expect((await seededTrend(b.buffer, w.get(), 'mvr_a')).trend.map((x) => x[0])).toEqual([t0 + 10_000, t0 + 20_000]);
    expect(cap.lines.some((l) => String(l.msg).includes('kept trend row cannot be read'))).toBe(true);
  });

  it('migrates a schema-5 file (no trend table) without touching its samples', async () => {
    const b = openTestBuffer();
    const path = b.path;
    open.push(b);
    await b.buffer.append([{ variable: 'mvr_a', ts: 1_000, value: 1.5 }]);
    await b.close();
    const raw = new BetterSqlite3(path);
    raw.exec('DROP TABLE trend');
    raw.pragma('user_version = 5');
    raw.close();
    const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
    try {
      expect(SCHEMA_VERSION).toBeGreaterThanOrEqual(6);
      expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
      expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'trend'").pluck().get()).toBe(1);
      expect(db.prepare('SELECT count(*) FROM samples').pluck().get()).toBe(1);
      const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 20, maxBytes: 1e9, whenFull: 'drop_oldest', logger: silentLogger(), metrics: b.metrics, clock: { now: () => Date.now(), monotonic: () => performance.now() } });
      expect((await seededTrend(buffer, Date.now(), 'mvr_a')).e).toBeUndefined();
      await buffer.close();
    } finally {
      if (db.open) db.close();
    }
  });
});
