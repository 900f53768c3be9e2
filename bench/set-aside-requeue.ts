/**
 * Benchmark: requeueing set-aside samples into a running buffer (issue 21 §1).
 *
 * Gateway: `SetAsideStore.requeue` (steps of REQUEUE_STEP_ROWS: read, commit through the buffer,
 * yield, delete the step's rows, yield) into a real SampleBuffer (WAL, synchronous=FULL).
 * Baseline, same run, same rows: the former route's single shot (read every row, one append, one
 * delete of every id), with the buffer's in-memory limit raised so that it commits at all: beyond
 * 2 M samples the former code refused the append, said nothing and deleted the rows anyway.
 *
 * What matters is the longest time the event loop is held (monitorEventLoopDelay): the gateway's
 * sources, acknowledgements and HTTP answers wait that long.
 *
 *   npx tsx bench/set-aside-requeue.ts
 *   BENCH_SAMPLES=500000 npx tsx bench/set-aside-requeue.ts     # quick run
 */
import type { Database } from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { openBufferDatabase } from '../src/store/file/database.js';
import { fromRowValue } from '../src/buffer/row-value.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { REQUEUE_STEP_ROWS, SetAsideStore } from '../src/buffer/set-aside.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

// Smoke: three requeue steps, so that the stepping shows.
const N = envNumber('BENCH_SAMPLES', 2_100_000, 3 * REQUEUE_STEP_ROWS);
const T0 = Date.parse('2026-11-22T00:00:00Z');

function open(path: string, maxPendingSamples?: number): { db: Database; buffer: SampleBuffer } {
  const logger = silentLogger();
  const { db } = openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger, integrityCheck: false });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock: systemClock, ...(maxPendingSamples ? { maxPendingSamples } : {}) });
  db.prepare(
    `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
     INSERT INTO set_aside (variable, ts, value, path, reason, created_at) SELECT 'mvr_late_' || (i % 50), ? + i, i * 0.5, 'sync', 'machine variable does not exist', ? FROM c`,
  ).run(N - 1, T0, T0);
  return { db, buffer };
}

/** Runs `fn` and returns its duration and the longest event-loop stall meanwhile. */
async function measure(fn: () => Promise<unknown>): Promise<{ seconds: number; stallMs: number; p99Ms: number }> {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const t = performance.now();
  await fn();
  const seconds = (performance.now() - t) / 1000;
  // A stall is recorded when the monitor's timer runs late: give it its turn before reading.
  await new Promise((r) => setTimeout(r, 50));
  loop.disable();
  return { seconds, stallMs: loop.max / 1e6, p99Ms: loop.percentile(99) / 1e6 };
}

async function stepped(dir: string) {
  const { db, buffer } = open(join(dir, 'stepped.db'));
  const store = new SetAsideStore(gatewayStore(db));
  const m = await measure(() => store.requeue(buffer, { all: true }));
  const rows = buffer.stats().rows;
  await buffer.close();
  return { ...m, rows };
}

/** The former route, made to commit: every row read, one append, every id deleted in one transaction. */
async function singleShot(dir: string) {
  const { db, buffer } = open(join(dir, 'single.db'), N + 1);
  const m = await measure(async () => {
    const rows = (db.prepare('SELECT id, variable, ts, value FROM set_aside WHERE variable IS NOT NULL ORDER BY id').all() as Array<{ id: number; variable: string; ts: number; value: number | Buffer }>).map((r) => ({ ...r, value: fromRowValue(r.value) }));
    await buffer.append(rows.map((r) => ({ variable: r.variable, ts: r.ts, value: r.value })));
    const del = db.prepare('DELETE FROM set_aside WHERE id = ?');
    db.transaction(() => {
      for (const r of rows) del.run(r.id);
    })();
  });
  const rows = buffer.stats().rows;
  await buffer.close();
  return { ...m, rows };
}

smokeBanner(`BENCH_SAMPLES ${N.toLocaleString('en-US')}`);
const dir = mkdtempSync(join(tmpdir(), 'gw-bench-requeue-'));
try {
  const base = await singleShot(dir);
  const ours = await stepped(dir);
  if (base.rows !== N || ours.rows !== N) throw new Error(`expected ${N} rows each, found ${base.rows} (baseline) and ${ours.rows} (stepped)`);
  const ratio = base.stallMs / ours.stallMs;
  process.stdout.write(`\nSet-aside requeue into a running buffer, ${N.toLocaleString('en-US')} samples (WAL, synchronous=FULL)\n\n`);
  process.stdout.write(
    `${table([
      { path: 'baseline: one read, one append, one delete (former route, in-memory limit raised)', seconds: Number(base.seconds.toFixed(2)), 'longest stall ms': Math.round(base.stallMs), 'p99 stall ms': Math.round(base.p99Ms) },
      { path: `gateway: steps of ${REQUEUE_STEP_ROWS.toLocaleString('en-US')} rows, yielding between read+commit and delete`, seconds: Number(ours.seconds.toFixed(2)), 'longest stall ms': Math.round(ours.stallMs), 'p99 stall ms': Math.round(ours.p99Ms) },
    ])}\n\nratio longest stall baseline / gateway = ${ratio.toFixed(1)}; ratio duration gateway / baseline = ${(ours.seconds / base.seconds).toFixed(2)}\n`,
  );
  process.stdout.write(`${verdict(ours.stallMs < 250, `longest event-loop stall < 250 ms (${Math.round(ours.stallMs)} ms)`)}\n${NOISY_MACHINE_NOTE}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
