/**
 * Benchmark: the console trend kept in the buffer (src/buffer/trend.ts, issue 24 §4). Per number
 * of variables, the plant corpus (bench/plant-corpus.ts: analog, float32, temperatures, counters,
 * states on change, ADC counts, 10-100 Hz signals) runs for BENCH_SECONDS of plant time through
 * the console's ring, the buffer taking its closed buckets on the maintenance schedule as in the
 * gateway (a wall clock moved by the benchmark, one take per 10 s bucket). It prints:
 *
 *   take          one bucket closing: collecting the ring's closed buckets, encoding, deflating
 *                 and writing the row with the prunes (the maintenance slices of task "trend",
 *                 gateway_buffer_maintenance_seconds), median and max over the takes (a take is
 *                 several slices at many variables; the share of slices within 50 ms is printed)
 *   commit        baseline, same run: one group commit of as many samples as there are variables
 *                 (one sample each; what a 1 Hz plant commits every second), median of three
 *   ratio         take / commit
 *   kept          rows and the pages of table `trend` (dbstat: what it adds to the bytes in use),
 *                 steady state once the run is longer than the 11 minutes kept
 *   seed          a fresh ring read back from the buffer at the end (a restart's cost)
 *
 * The gateway's ring tracks at most 50,000 variables (src/console/value-ring.ts); the 100,000 run
 * uses a ring that tracks them all, the room's worst case.
 *
 *   npx tsx bench/trend-flush.ts                                  # 5,000 and 100,000, 11 min each
 *   BENCH_VARIABLES=5000 BENCH_SECONDS=120 npx tsx bench/trend-flush.ts
 *   BENCH_DEBUG=1 ...                                              # also each take over 300 ms
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBufferDatabase } from '../src/store/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { TREND_GRACE_MS } from '../src/buffer/trend.js';
import { TrendKeeper } from '../src/console/trend-keeper.js';
import { BUCKET_MS, ValueRing } from '../src/console/value-ring.js';
import type { Clock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { envList, envNumber, mb, median, NOISY_MACHINE_NOTE, smokeBanner, table } from './lib.js';
import { PlantCorpus } from './plant-corpus.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const VARIABLES = envList('BENCH_VARIABLES', '5000,100000', '200').map(Number);
// Smoke: three 10 s buckets taken.
const SECONDS = envNumber('BENCH_SECONDS', 660, 30);
smokeBanner(`BENCH_VARIABLES ${VARIABLES.join(',')}, BENCH_SECONDS ${SECONDS}`);
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);


/** The trend task's maintenance slices so far: their total time, how many, how many took up to 50 ms. */
async function trendSeconds(metrics: ReturnType<typeof createMetrics>): Promise<{ sum: number; count: number; upTo50ms: number }> {
  const m = await metrics.registry.getSingleMetric('gateway_buffer_maintenance_seconds')!.get();
  const of = (name: string, le?: number) => m.values.find((v) => v.labels.task === 'trend' && v.metricName === name && (le === undefined || v.labels.le === le))?.value ?? 0;
  return { sum: of('gateway_buffer_maintenance_seconds_sum'), count: of('gateway_buffer_maintenance_seconds_count'), upTo50ms: of('gateway_buffer_maintenance_seconds_bucket', 0.05) };
}

async function run(n: number): Promise<Record<string, string | number>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-trend-'));
  let now = T0;
  const clock: Clock = { now: () => now, monotonic: () => performance.now() };
  const metrics = createMetrics();
  const { db } = openBufferDatabase(join(dir, 'buffer.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger: silentLogger() });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 2_000_000_000, whenFull: 'drop_oldest', logger: silentLogger(), metrics, clock });
  try {
    const corpus = new PlantCorpus(T0, n / 1_000);
    const names = corpus.variables.map((v) => v.name);
    // Baseline: the group commit of one sample per variable (the first one also creates the ids).
    const commits: number[] = [];
    for (let i = 0; i < 4; i++) {
      const batch = names.map((variable) => ({ variable, ts: T0 - 60_000 + i, value: i }));
      const started = performance.now();
      const done = buffer.append(batch);
      await buffer.flush();
      await done;
      if (i > 0) commits.push(performance.now() - started);
    }
    const ring = new ValueRing(Math.max(50_000, n));
    const stop = buffer.keepTrend(new TrendKeeper(ring));
    const takes: number[] = [];
    const sizes: number[] = [];
    let samples = 0;
    for (let s = 0; s < SECONDS; s++) {
      const second = corpus.second(s);
      samples += second.length;
      ring.onSamples(second);
      now = T0 + (s + 1) * 1_000;
      if ((s + 1) % (BUCKET_MS / 1_000) === 0) {
        // The bucket just ended is taken once the grace is over, on the schedule.
        now += TREND_GRACE_MS;
        const before = await trendSeconds(metrics);
        const bytesBefore = buffer.trendSize().bytes;
        await buffer.maintenanceIdle();
        const after = await trendSeconds(metrics);
        if (after.count > before.count) takes.push((after.sum - before.sum) * 1000);
        if (process.env.BENCH_DEBUG && (takes.at(-1) ?? 0) > 300) console.error(`take at plant second ${s + 1}: ${takes.at(-1)?.toFixed(0)} ms in ${after.count - before.count} slices, heap ${mb(process.memoryUsage().heapUsed)} MB, rows ${buffer.trendSize().rows}`);
        sizes.push(buffer.trendSize().bytes - bytesBefore);
        now -= TREND_GRACE_MS;
      }
    }
    now += TREND_GRACE_MS;
    await buffer.maintenanceIdle();
    const pages = (db.prepare("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = 'trend'").pluck().get() as number) ?? 0;
    const kept = buffer.trendSize();
    const seedStarted = performance.now();
    const fresh = new ValueRing(Math.max(50_000, n));
    const buckets = await new TrendKeeper(fresh).seed(buffer, now);
    const seedMs = performance.now() - seedStarted;
    stop();
    const slices = await trendSeconds(metrics);
    const take = median(takes);
    const commit = median(commits);
    // Steady takes only (the first may hold more than one bucket).
    const perTake = median(sizes.filter((x) => x > 0));
    return {
      variables: n,
      'plant s': SECONDS,
      'samples/s': Math.round(samples / SECONDS),
      'take ms p50': Number(take.toFixed(1)),
      'take ms max': Number(Math.max(...takes).toFixed(1)),
      'commit ms': Number(commit.toFixed(1)),
      'ratio take / commit': Number((take / commit).toFixed(2)),
      'slices / take': Number((slices.count / Math.max(1, takes.length)).toFixed(1)),
      'slices ≤ 50 ms': `${Math.round((100 * slices.upTo50ms) / Math.max(1, slices.count))} %`,
      'take kB': Math.round(perTake / 1024),
      'B / variable·bucket': Number((perTake / n).toFixed(1)),
      rows: kept.rows,
      'blobs MB': mb(kept.bytes),
      'table MB (pages)': mb(pages),
      'cap MB': mb(kept.capBytes),
      'seed ms': Math.round(seedMs),
      'seeded buckets': buckets,
    };
  } finally {
    await buffer.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// The buffer's maintenance timers do not keep a process alive (maintenance.ts); this does, meanwhile.
const alive = setInterval(() => {}, 1_000);
const rows: Array<Record<string, string | number>> = [];
for (const n of VARIABLES) {
  rows.push(await run(n));
  console.error(`done: ${n} variables`);
}
clearInterval(alive);
console.log(table(rows));
console.log(`\nKept: ${SECONDS >= 660 ? 'steady state (the run is longer than the 11 minutes kept)' : `${SECONDS} s of plant time; the 11-minute steady state holds ~66 rows of the row size above`}.`);
console.log(NOISY_MACHINE_NOTE);
