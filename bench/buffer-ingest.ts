/**
 * Benchmark (a): buffer ingest, durable.
 *
 * The gateway's SampleBuffer (WAL, synchronous=FULL, group commit every 100 ms, variable dictionary,
 * meta.next_seq kept in the same transaction) against a baseline of raw better-sqlite3 prepared
 * inserts into the same table layout in 1,000-row transactions, same pragmas, same machine, same run.
 * Sources hand the buffer batches of 100 samples (a Modbus cycle, an MQTT metrics message).
 *
 * Target (issue 13, buffer v2): >= 500,000 samples/s and ratio >= 0.5.
 *
 *   npx tsx bench/buffer-ingest.ts
 *   BENCH_SAMPLES=500000 npx tsx bench/buffer-ingest.ts     # quick run
 *   BENCH_SAMPLES=1000000 BENCH_VARIABLES=100000 npx tsx bench/buffer-ingest.ts   # 100,000 variables
 */
import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBufferDatabase } from '../src/store/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';
import { GATEWAY_SCHEMAS, gatewayStore } from '../src/runtime/store-schemas.js';

const N = envNumber('BENCH_SAMPLES', 3_000_000, 20_000);
/** Distinct variables (BENCH_VARIABLES=100000: a whole plant, one sample each per second). */
const VARIABLES = envNumber('BENCH_VARIABLES', 5_000, 1_000);
/** Samples of the warm-up runs, at most the measured ones. */
const WARM_UP = Math.min(100_000, N);
const BATCH = 100;
const T0 = Date.parse('2026-11-22T00:00:00Z');

function samples(from: number, n: number) {
  return Array.from({ length: n }, (_, i) => {
    const k = from + i;
    return { variable: `mvr_bench_${k % VARIABLES}`, ts: T0 + Math.floor(k / VARIABLES) * 1000, value: k * 0.5 };
  });
}

async function gatewayBuffer(dir: string, n: number): Promise<number> {
  const logger = silentLogger();
  const { db } = openBufferDatabase(join(dir, 'gw.db'), { schemas: GATEWAY_SCHEMAS, synchronous: 'full', logger, integrityCheck: false });
  const buffer = new SampleBuffer(gatewayStore(db), { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock: systemClock });
  const batches = Array.from({ length: Math.ceil(n / BATCH) }, (_, b) => samples(b * BATCH, Math.min(BATCH, n - b * BATCH)));
  const t0 = performance.now();
  // Sources append without waiting for each other; a commit covers everything that arrived.
  const inflight: Promise<void>[] = [];
  for (const batch of batches) {
    inflight.push(buffer.append(batch));
    if (inflight.length >= 2_000) {
      await Promise.all(inflight);
      inflight.length = 0;
    }
  }
  await Promise.all(inflight);
  const seconds = (performance.now() - t0) / 1000;
  if (buffer.stats().rows !== n) throw new Error(`expected ${n} rows, found ${buffer.stats().rows}`);
  await buffer.close();
  return n / seconds;
}

function rawInserts(dir: string, n: number): number {
  const db = new BetterSqlite3(join(dir, 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE samples (seq INTEGER PRIMARY KEY, var INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL)');
  const insert = db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
  const tx = db.transaction((rows: Array<{ ts: number; value: number }>, from: number) => {
    for (let i = 0; i < rows.length; i++) insert.run(from + i + 1, (from + i) % VARIABLES, rows[i].ts, rows[i].value);
  });
  const chunks = Array.from({ length: Math.ceil(n / 1_000) }, (_, c) => samples(c * 1_000, Math.min(1_000, n - c * 1_000)));
  const t0 = performance.now();
  chunks.forEach((rows, c) => tx(rows, c * 1_000));
  const seconds = (performance.now() - t0) / 1000;
  db.close();
  return n / seconds;
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-ingest-'));
try {
  smokeBanner(`BENCH_SAMPLES ${N.toLocaleString('en-US')}, BENCH_VARIABLES ${VARIABLES.toLocaleString('en-US')}`);
  // Warm-up: small runs so the JIT and the page cache are in the same state for both.
  await gatewayBuffer(dir, WARM_UP);
  rawInserts(dir, WARM_UP);
  rmSync(join(dir, 'gw.db'), { force: true });
  rmSync(join(dir, 'raw.db'), { force: true });
  for (const f of ['gw.db-wal', 'gw.db-shm', 'raw.db-wal', 'raw.db-shm']) rmSync(join(dir, f), { force: true });

  const baseline = rawInserts(dir, N);
  const gateway = await gatewayBuffer(dir, N);
  const ratio = gateway / baseline;
  process.stdout.write(`\nBuffer ingest, durable (WAL, synchronous=FULL), ${N.toLocaleString('en-US')} samples, ${VARIABLES} variables, batches of ${BATCH}\n\n`);
  process.stdout.write(
    `${table([
      { path: 'baseline: raw prepared inserts, 1,000-row transactions', 'samples/s': Math.round(baseline) },
      { path: 'gateway: SampleBuffer.append, group commit <= 100 ms', 'samples/s': Math.round(gateway) },
    ])}\n\nratio gateway / baseline = ${ratio.toFixed(2)}\n`,
  );
  process.stdout.write(`${verdict(gateway >= 500_000, `>= 500,000 samples/s (${Math.round(gateway).toLocaleString('en-US')})`)}\n${verdict(ratio >= 0.5, `ratio >= 0.5 (${ratio.toFixed(2)})`)}\n${NOISY_MACHINE_NOTE}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
