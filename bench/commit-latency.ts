/**
 * Benchmark: commit latency while the buffer seals and compacts a backlog, the current buffer
 * against the buffer before issue 22 (bench/baseline-buffer.ts) in the same run.
 *
 * A backlog of BENCH_BACKLOG rows (plant-like corpus, written once with plain SQL as a v1-style
 * backlog, then copied for each buffer) is opened; both versions treat rows already in the file as
 * old enough to seal, so sealing and compaction run from the first second. Meanwhile a live source
 * appends 100 samples every 50 ms (2,000 samples/s, as an MQTT source with QoS 1 would: each
 * append is a batch of PUBACKs waiting for its commit). Two figures per append:
 *
 *   commit latency  from the moment its group commit was due (commit_interval 100 ms after the
 *                   first append of the group) to its resolution: what the commit itself took and
 *                   whatever held the event loop when it was due (a sealing step inside the
 *                   previous commit, a maintenance slice)
 *   ack latency     append() to its resolution: the above plus the group-commit wait by design
 *
 * Target (issue 22 §2): commit latency p99 < 100 ms while sealing a 20 M backlog.
 *
 *   nice -n 5 npx tsx bench/commit-latency.ts                         # 20 M backlog, 60 s each
 *   BENCH_BACKLOG=2000000 BENCH_SECONDS=30 npx tsx bench/commit-latency.ts
 *   BENCH_PAGE_SIZE=4096 npx tsx bench/commit-latency.ts          # a backlog file with 4 KB pages (created before 2 KB pages)
 */
import BetterSqlite3 from 'better-sqlite3';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openBufferDatabase } from '../src/store/file/database.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { loadBaseline, loadCurrent, stallMeter, type BufferModule } from './baseline-buffer.js';
import { envNumber, NOISY_MACHINE_NOTE, smokeBanner, table, verdict } from './lib.js';
import { PlantCorpus } from './plant-corpus.js';
import { GATEWAY_SCHEMAS } from '../src/runtime/store-schemas.js';

const BACKLOG = envNumber('BENCH_BACKLOG', 20_000_000, 50_000);
const SECONDS = envNumber('BENCH_SECONDS', 60, 3);
smokeBanner(`BENCH_BACKLOG ${BACKLOG.toLocaleString('en-US')}, BENCH_SECONDS ${SECONDS}`);
/** Page size of the backlog file: a new file's (2 KB) unless set (4096: a file of an earlier version). */
const PAGE_SIZE = process.env.BENCH_PAGE_SIZE ? Number(process.env.BENCH_PAGE_SIZE) : undefined;
const T0 = Date.parse('2026-11-01T00:00:00Z');

/** A file holding `n` unsealed rows of the plant corpus, written with plain SQL. */
function backlogFile(path: string, n: number): void {
  openBufferDatabase(path, { schemas: GATEWAY_SCHEMAS, synchronous: 'normal', logger: silentLogger(), integrityCheck: false, pageSize: PAGE_SIZE }).db.close();
  const db = new BetterSqlite3(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const corpus = new PlantCorpus(T0);
  const ids = new Map<string, number>();
  const insVar = db.prepare('INSERT INTO variables (id, name) VALUES (?, ?)');
  const ins = db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
  let seq = 1;
  const write = db.transaction((rows: ReturnType<PlantCorpus['second']>) => {
    for (const r of rows) {
      let id = ids.get(r.variable);
      if (id === undefined) insVar.run((id = ids.size + 1), r.variable), ids.set(r.variable, id);
      ins.run(seq++, id, r.ts, r.value);
    }
  });
  let rows: ReturnType<PlantCorpus['second']> = [];
  for (let s = 0; seq + rows.length <= n; s++) {
    rows.push(...corpus.second(s).slice(0, n - (seq - 1) - rows.length));
    if (rows.length >= 100_000) {
      write(rows);
      rows = [];
    }
  }
  write(rows);
  db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(String(seq));
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

/**
 * The baseline (before issue 22) knows the buffer schema up to 4 and refuses a newer file
 * (BUFFER_SCHEMA_NEWER). Migration 5 only records the chunk formats in `meta` (chunks of format 2
 * need a reader that knows them; migration 7 the same for format 3), migration 6 adds the console's trend table (no samples); the
 * backlog holds rows, no chunk and no trend, so its copy for the baseline is stamped back to
 * schema 4, which is what an earlier version wrote.
 */
function stampForBaseline(path: string): void {
  const db = new BetterSqlite3(path);
  try {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version < 5 || version > 7 || (db.prepare('SELECT count(*) FROM chunks').pluck().get() as number) !== 0) return;
    db.prepare("DELETE FROM meta WHERE key = 'chunk_formats'").run();
    db.exec('DROP TABLE IF EXISTS trend');
    db.pragma('user_version = 4');
  } finally {
    db.close();
  }
}

interface Result {
  appends: number;
  commit: { p50: number; p99: number; max: number };
  ack: { p50: number; p99: number; max: number };
  over100: number;
  sealed: number;
  chunks: number;
  stallMs: number;
}

function quantiles(xs: number[]): { p50: number; p99: number; max: number } {
  const s = [...xs].sort((a, b) => a - b);
  const q = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))];
  return { p50: q(0.5), p99: q(0.99), max: s[s.length - 1] };
}

async function run(mod: BufferModule, path: string): Promise<Result> {
  const logger = silentLogger();
  const db = mod.openDatabase(path, logger);
  const interval = 100;
  const b = new mod.SampleBuffer(db, { commitIntervalMs: interval, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: mod.createMetrics(), clock: systemClock });
  const commit: number[] = [];
  const ack: number[] = [];
  const stalls = stallMeter();
  const started = performance.now();
  let k = 0;
  // The first append after a commit starts the group-commit timer: its group is due then.
  let groupDue: number | null = null;
  const inflight = new Set<Promise<void>>();
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (performance.now() - started >= SECONDS * 1000) {
        clearInterval(timer);
        resolve();
        return;
      }
      const batch = Array.from({ length: 100 }, (_, i) => ({ variable: `mvr_live_${i % 50}`, ts: Date.now(), value: k * 100 + i }));
      k++;
      const at = performance.now();
      if (groupDue === null) groupDue = at + interval;
      const due = groupDue;
      const p = b.append(batch).then(() => {
        const now = performance.now();
        ack.push(now - at);
        commit.push(Math.max(0, now - due));
        groupDue = null;
        inflight.delete(p);
      });
      inflight.add(p);
    }, 50);
  });
  await Promise.all(inflight);
  const stall = stalls.stop();
  const s = b.stats();
  await b.close();
  return { appends: ack.length, commit: quantiles(commit), ack: quantiles(ack), over100: commit.filter((l) => l > 100).length, sealed: s.sealedSamples, chunks: s.chunks, stallMs: stall.maxMs };
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-latency-'));
const baseline = await loadBaseline();
const current = await loadCurrent();
// Interrupted (Ctrl-C, a timeout): the temporary files go too.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    baseline.dispose();
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  });
}
try {
  const master = join(dir, 'backlog.db');
  const t = performance.now();
  backlogFile(master, BACKLOG);
  const probe = new BetterSqlite3(master, { readonly: true });
  const pageSize = probe.pragma('page_size', { simple: true }) as number;
  probe.close();
  process.stdout.write(`backlog of ${BACKLOG.toLocaleString('en-US')} rows (${pageSize}-byte pages) written in ${((performance.now() - t) / 1000).toFixed(0)} s\n`);
  const rows: Array<Record<string, string | number>> = [];
  const results = new Map<BufferModule, Result>();
  for (const mod of [baseline, current]) {
    const path = join(dir, `${mod === baseline ? 'baseline' : 'current'}.db`);
    copyFileSync(master, path);
    if (mod === baseline) stampForBaseline(path);
    const r = await run(mod, path);
    results.set(mod, r);
    rows.push({
      buffer: mod.label,
      appends: r.appends,
      'commit p50 ms': r.commit.p50.toFixed(1),
      'commit p99 ms': r.commit.p99.toFixed(1),
      'commit max ms': r.commit.max.toFixed(0),
      'commits > 100 ms': r.over100,
      'ack p50 / p99 ms': `${r.ack.p50.toFixed(0)} / ${r.ack.p99.toFixed(0)}`,
      'longest stall ms': Math.round(r.stallMs),
      [`sealed in ${SECONDS} s`]: r.sealed,
      chunks: r.chunks,
    });
    rmSync(path, { force: true });
    rmSync(`${path}-wal`, { force: true });
    rmSync(`${path}-shm`, { force: true });
  }
  const b = results.get(baseline)!;
  const c = results.get(current)!;
  process.stdout.write(`\nCommit latency (from when the group commit was due to its resolution; commit_interval 100 ms, 2,000 samples/s live) while a ${BACKLOG >= 1e6 ? `${(BACKLOG / 1e6).toFixed(0)} M` : BACKLOG.toLocaleString('en-US')} backlog is sealed and compacted, ${SECONDS} s each (${NOISY_MACHINE_NOTE})\n\n${table(rows)}\n\n`);
  process.stdout.write(`commit latency p99: ${(b.commit.p99 / c.commit.p99).toFixed(1)}x lower than the baseline; max: ${(b.commit.max / c.commit.max).toFixed(1)}x lower\n`);
  process.stdout.write(`${verdict(c.commit.p99 < 100, `commit latency p99 < 100 ms while sealing (${c.commit.p99.toFixed(1)} ms)`)}\n`);
} finally {
  baseline.dispose();
  current.dispose();
  rmSync(dir, { recursive: true, force: true });
}
