/**
 * Benchmark: bytes per sample of the buffer in use (the file's pages less free pages, every owner's
 * tables; the WAL and -shm beside it; also the samples' tables alone, what buffer.max_bytes
 * limits) and on disk, in every arrival pattern, on every corpus,
 * the buffer before this change (BASELINE_REF, default the last commit before chunk format 3)
 * against this checkout in the same run, with `xz -9e` and `zstd -19` of each corpus's most
 * compact text form beside them (bench/corpora.ts; a tool that is not installed is said so).
 *
 * Corpora (bench/corpora.ts): the generated sensor corpus and its realistic variant, the plant
 * corpus, and a public real recording (bench/real-recording.ts: 8 variables of a wireless sensor
 * network, 37,828 samples, played REPLAY times over, each pass after the last, so that the file's
 * fixed pages weigh as on the issue's 374k recording; BENCH_CSV=path adds your own).
 *
 * Arrival patterns, each on a clock that follows the corpus's own time (the buffer's ages and
 * schedules see plant time; maintenanceIdle() only waits until the buffer's own schedules have
 * nothing left to do, it forces nothing):
 *   burst + idle      the corpus within seconds, as after an outage, then 5 minutes without a sample
 *   burst + trickle   the same, then 5 minutes of one message a second: one sample of each of 8
 *                     variables (a device's channels), continuing their series
 *   live + delivery   the whole corpus at its own pace (1 Hz per variable and whatever its classes
 *                     are) while the sync path delivers half of it, newest first (claims 200, acks
 *                     them), then the uplink goes away and 5 minutes pass
 *   backlog + holes   the corpus as a burst, sealed and merged; then part of it delivered: import
 *                     jobs over the oldest ranges, every other one finished (its range deleted)
 *                     and the others released, and the sync path claiming the newest 200 three
 *                     times (two acknowledged, the last released: a call that failed); then 5
 *                     minutes without a sample
 * Every run checks that what the file holds equals what was appended less what was delivered
 * (multiset, values bit-exact).
 *
 * Target (issue: buffer v4): <= 2.0 bytes per sample in use in every pattern, on every corpus,
 * below xz -9e and zstd -19 of the text.
 *
 *   nice -n 5 npx tsx bench/buffer-footprint.ts                   # every corpus and pattern
 *   BENCH_CORPORA=sensor,suthaharan BENCH_PATTERNS=trickle,holes npx tsx bench/buffer-footprint.ts
 *   BENCH_SMALL=400000        samples of each generated corpus (default 400,000)
 *   BENCH_REPLAY=10           passes of the real recording
 *   BENCH_SMOKE=1             smoke sizes: 6,000 sensor samples, trickle and holes, 30 plant seconds,
 *                             seal_after 10 s, a 20,000-sample plant run (figures mean nothing)
 *   BASELINE_REF=<commit>     the buffer before (default 970ab29); BASELINE_REF=none: this checkout only
 *   BENCH_SAMPLES=20000000    also the long plant run of buffer v2 (live tail of seal_after as rows)
 *   BENCH_VARIABLES=5000      its variables (same class mix)
 */
import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGzip } from 'node:zlib';
import { chunkSamples, type ChunkRow } from '../src/buffer/chunks/store.js';
import { fromRowValue } from '../src/buffer/row-value.js';
import type { Clock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { loadBaseline, loadCurrent, stallMeter, type BenchBuffer, type BufferModule } from './baseline-buffer.js';
import { loadCorpora, textReference, type Corpus } from './corpora.js';
import { envList, envNumber, NOISY_MACHINE_NOTE, ratioText, SMOKE, smokeBanner, table, verdict } from './lib.js';
import { PlantCorpus, type CorpusSample } from './plant-corpus.js';

const SMALL = envNumber('BENCH_SMALL', 400_000, 6_000);
const BIG = envNumber('BENCH_SAMPLES', 0, 20_000);
/** Variables of the plant corpus, in thousands of the same class mix (BENCH_VARIABLES=5000: the README's plant). */
const VARIABLES = Math.max(1000, Math.round(envNumber('BENCH_VARIABLES', 1000) / 1000) * 1000);
const CORPORA = envList('BENCH_CORPORA', 'sensor,realistic,plant,suthaharan', 'sensor');
const PATTERNS = envList('BENCH_PATTERNS', 'idle,trickle,live,holes', 'trickle,holes') as Pattern[];
/**
 * The buffer before this change: main when chunk format 3 began (BASELINE_REF=none: this checkout
 * only). Later main commits moved the file's ownership to src/store, not the codec or the schedule;
 * baseline-buffer.ts loads buffers from before that move.
 */
const BASELINE = process.env.BASELINE_REF ?? '970ab29';
/** Passes of the real recording (37,828 samples each). */
const REPLAY = envNumber('BENCH_REPLAY', 10, 1);
/** Plant seconds each pattern leaves the buffer alone (smoke: 30). */
const IDLE_S = SMOKE ? 30 : 300;
/**
 * buffer.seal_after: the default (2 min), or in a smoke run 10 plant seconds, so that its small
 * corpus is sealed and compacted within its short idle time, as the full ones are within 5 min.
 */
const SEAL_AFTER = SMOKE ? { sealAfterMs: 10_000 } : {};
/** Real time the plant run waits at its end for the free pages to be given back (smoke: 1 s). */
const GIVE_BACK_WAIT_MS = SMOKE ? 1_000 : 65_000;
type Pattern = 'idle' | 'trickle' | 'live' | 'holes';
const PATTERN_NAMES: Record<Pattern, string> = { idle: 'burst + idle', trickle: 'burst + trickle', live: 'live + delivery', holes: 'backlog + holes' };
smokeBanner(`BENCH_SMALL ${SMALL.toLocaleString('en-US')}, BENCH_SAMPLES ${BIG.toLocaleString('en-US')}, BENCH_CORPORA ${CORPORA.join(',')}, BENCH_PATTERNS ${PATTERNS.join(',')}, ${IDLE_S} plant seconds per pattern, seal_after 10 s`);
const T0 = Date.parse('2026-11-01T00:00:00Z');

/** Order-independent checksum of a multiset of samples: count, sums and xor of two 32-bit hashes. */
class MultisetHash {
  n = 0;
  sumA = 0;
  sumB = 0;
  xorA = 0;
  private readonly f = new Float64Array(1);
  private readonly u = new Uint32Array(this.f.buffer);
  add(variable: string, ts: number, value: number, sign = 1): void {
    this.f[0] = value;
    let a = 0x811c9dc5;
    let b = 0x01000193 ^ (ts >>> 0);
    for (let i = 0; i < variable.length; i++) {
      a = Math.imul(a ^ variable.charCodeAt(i), 0x01000193);
      b = Math.imul(b ^ variable.charCodeAt(i), 0x5bd1e995);
    }
    for (const w of [ts >>> 0, Math.floor(ts / 4294967296) >>> 0, this.u[0], this.u[1]]) {
      a = Math.imul(a ^ w, 0x01000193);
      b = Math.imul(b ^ (w >>> 7) ^ (w << 11), 0x5bd1e995);
      a ^= a >>> 15;
      b ^= b >>> 13;
    }
    this.n += sign;
    this.sumA = (this.sumA + sign * (a >>> 0) + 4294967296) % 4294967296;
    this.sumB = (this.sumB + sign * (b >>> 0) + 4294967296) % 4294967296;
    this.xorA = (this.xorA ^ a) >>> 0;
  }
  /** Takes a sample out (delivered). */
  remove(variable: string, ts: number, value: number): void {
    this.add(variable, ts, value, -1);
  }
  equals(o: MultisetHash): boolean {
    return this.n === o.n && this.sumA === o.sumA && this.sumB === o.sumB && this.xorA === o.xorA;
  }
}

function onDisk(path: string): number {
  let n = 0;
  for (const f of [path, `${path}-wal`]) if (existsSync(f)) n += statSync(f).size;
  return n;
}

/** Every sample in the file (rows and decoded chunks), as a checksum. */
function fileHash(path: string): MultisetHash {
  const h = new MultisetHash();
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    const names = new Map<number, string>((db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>).map(([id, name]) => [id, name]));
    for (const [v, ts, value] of db.prepare('SELECT var, ts, value FROM samples').raw(true).iterate() as Iterable<[number, number, number | Buffer]>) h.add(names.get(v)!, ts, fromRowValue(value));
    for (const c of db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks').iterate() as Iterable<ChunkRow>) {
      const name = names.get(c.var)!;
      for (const x of chunkSamples(c)) h.add(name, x.ts, x.value);
    }
  } finally {
    db.close();
  }
  return h;
}

/** Where the bytes in use go, per b-tree (SQLite's dbstat): pages, cell payload, empty bytes in them. */
interface Breakdown {
  pageSize: number;
  /** Bytes of the pages in use: page_count less freelist_count (every owner of the file: samples and side tables). */
  inUseBytes: number;
  /** Pages in use that no b-tree owns: pointer-map pages of auto_vacuum (and the lock-byte page). */
  otherPages: number;
  trees: Array<{ name: string; pages: number; payload: number; unused: number }>;
}

function breakdown(path: string): Breakdown {
  const db = new BetterSqlite3(path, { readonly: true });
  try {
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const inUse = (db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number);
    const trees = db.prepare('SELECT name, count(*) AS pages, sum(payload) AS payload, sum(unused) AS unused FROM dbstat GROUP BY name ORDER BY pages DESC').all() as Breakdown['trees'];
    return { pageSize, inUseBytes: inUse * pageSize, otherPages: inUse - trees.reduce((n, t) => n + t.pages, 0), trees };
  } finally {
    db.close();
  }
}

/** The breakdown as table rows, bytes per sample: whole pages, of which payload and empty space. */
function breakdownRows(b: Breakdown, samples: number): Array<Record<string, string | number>> {
  const bps = (bytes: number) => (bytes / samples).toFixed(3);
  const rows: Array<Record<string, string | number>> = b.trees.map((t) => ({ 'b-tree': t.name, pages: t.pages, 'B/sample': bps(t.pages * b.pageSize), 'payload B/sample': bps(t.payload), 'empty B/sample': bps(t.unused) }));
  if (b.otherPages > 0) rows.push({ 'b-tree': '(pointer map)', pages: b.otherPages, 'B/sample': bps(b.otherPages * b.pageSize), 'payload B/sample': '', 'empty B/sample': '' });
  return rows;
}

interface Outcome {
  samples: number;
  breakdown: Breakdown;
  /** Pages in use of the whole file (plus the WAL and -shm in the patterns). */
  inUse: number;
  /** What the buffer counts against buffer.max_bytes (this checkout: the samples' tables only). */
  samplesInUse: number;
  onDisk: number;
  chunkBytes: number;
  liveRows: number;
  chunks: number;
  maxStallMs: number;
  stallsOver100: number;
  lossless: boolean;
  seconds: number;
}

/** The plant corpus at plant pace (the clock follows plant time); the live tail of seal_after stays rows. */
async function plant(mod: BufferModule, n: number, dir: string, gzipBytes: { value: number } | null): Promise<Outcome> {
  const path = join(dir, `${mod.label.replace(/\W+/g, '-')}-plant.db`);
  const corpus = new PlantCorpus(T0, VARIABLES / 1000);
  let plantMs = 0;
  const clock: Clock = { now: () => T0 + plantMs, monotonic: () => plantMs };
  const logger = silentLogger();
  const db = mod.openDatabase(path, logger);
  const b = new mod.SampleBuffer(db, { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: mod.createMetrics(), clock, ...SEAL_AFTER });
  const expected = new MultisetHash();
  const idle = (b as unknown as { maintenanceIdle?: () => Promise<void> }).maintenanceIdle;
  const gz = gzipBytes ? createGzip({ level: 9 }) : null;
  const gzDone = gz ? new Promise<void>((resolve, reject) => gz.on('data', (d: Buffer) => (gzipBytes!.value += d.length)).on('end', resolve).on('error', reject)) : null;
  const started = performance.now();
  const stalls = stallMeter();
  const pending: Promise<void>[] = [];
  let pendingSamples = 0;
  let total = 0;
  for (let second = 0; total < n; second++) {
    const batch = corpus.second(second).slice(0, n - total);
    plantMs = (second + 1) * 1000;
    total += batch.length;
    for (const s of batch) expected.add(s.variable, s.ts, s.value);
    if (gz) gz.write(batch.map((s) => `${s.variable},${s.ts},${s.value}\n`).join(''));
    pending.push(b.append(batch));
    pendingSamples += batch.length;
    // One group commit per ~50,000 samples (50 plant seconds), as a gateway at this rate would;
    // at plant pace (1,700 samples/s) there is plenty of time between them, so the current buffer's
    // schedule catches up before the next (the baseline sealed inside the commit anyway).
    if (pending.length >= 50 || pendingSamples >= 50_000) {
      await Promise.all(pending.splice(0));
      pendingSamples = 0;
      await new Promise((r) => setImmediate(r));
      if (idle) await idle.call(b);
    }
  }
  await Promise.all(pending);
  await b.flush();
  if (gz) {
    gz.end();
    await gzDone;
  }
  // The clock stays at the end of the corpus: the last seal_after of plant time stays rows, as in
  // a gateway. A minute later (real time) the current buffer has given its free pages back.
  if (idle) {
    await idle.call(b);
    await sleep(GIVE_BACK_WAIT_MS);
    await idle.call(b);
  }
  const stall = stalls.stop();
  const s = b.stats();
  const pages = breakdown(path);
  const out = { samples: total, breakdown: pages, inUse: pages.inUseBytes, samplesInUse: b.usedBytes(), onDisk: onDisk(path), chunkBytes: s.chunkBytes, liveRows: s.liveRows, chunks: s.chunks, maxStallMs: stall.maxMs, stallsOver100: stall.over100, seconds: (performance.now() - started) / 1000 };
  await b.close();
  return { ...out, lossless: fileHash(path).equals(expected) };
}


const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What a pattern needs of the buffer beyond BenchBuffer: the sync path and import ranges (both versions have them). */
interface Delivering extends BenchBuffer {
  claimNewest(limit: number): Array<{ seq: number; variable: string; ts: number; value: number }>;
  ack(rows: readonly { seq: number }[]): void;
  release(rows: readonly { seq: number }[]): void;
  planJobRange(maxItems: number, keepNewest: number): { from: number; to: number } | null;
  reserveRange(range: { from: number; to: number }): void;
  releaseRange(range: { from: number; to: number }): void;
  readRange(range: { from: number; to: number }, chunk?: number): Generator<Array<{ variable: string; ts: number; value: number }>>;
  deleteRange(range: { from: number; to: number }): number;
  maintenanceIdle(): Promise<void>;
}

/** A run of one pattern: the buffer on a clock that follows the corpus's time. */
class Run {
  plantMs = 0;
  readonly expected = new MultisetHash();
  readonly b: Delivering;
  readonly path: string;
  constructor(mod: BufferModule, corpus: Corpus, pattern: Pattern, dir: string) {
    this.path = join(dir, `${mod.label.replace(/\W+/g, '-')}-${corpus.name}-${pattern}.db`);
    const clock: Clock = { now: () => T0 + this.plantMs, monotonic: () => this.plantMs };
    const logger = silentLogger();
    const db = mod.openDatabase(this.path, logger);
    this.b = new mod.SampleBuffer(db, { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: mod.createMetrics(), clock, ...SEAL_AFTER }) as Delivering;
  }

  /** Appends in parts of 5,000 with up to 10 commits in flight, as a burst arrives. */
  async burst(samples: readonly CorpusSample[]): Promise<void> {
    const pending: Promise<void>[] = [];
    for (let i = 0; i < samples.length; i += 5_000) {
      const part = samples.slice(i, i + 5_000);
      for (const s of part) this.expected.add(s.variable, s.ts, s.value);
      pending.push(this.b.append(part));
      if (pending.length >= 10) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
  }

  /**
   * Lets `seconds` of plant time pass in steps of 1 s, the buffer's schedules running in each 10 s
   * step, and given real time to finish every minute (settleFully).
   */
  async pass(seconds: number, each?: (second: number) => Promise<void>): Promise<void> {
    for (let t = 1; t <= seconds; t++) {
      this.plantMs += 1_000;
      if (each) await each(t);
      if (t % 60 === 0) await this.settleFully();
      else if (t % 10 === 0) await this.settle();
    }
  }

  async settle(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    await this.b.maintenanceIdle();
  }

  /**
   * Until the buffer's own schedules have nothing left to do: maintenanceIdle() returns while a
   * job rests for a second of real time (a look that found nothing waits that long), so this waits
   * in real time too until rows, chunks and their bytes stayed the same over two looks.
   */
  async settleFully(): Promise<void> {
    // The seal schedule's own word (both versions have it: MaintenanceTask.describe): a job in
    // progress (a large window merges over many slices) is waited for.
    const seal = (this.b as unknown as { seal?: { describe?(): string } }).seal;
    let last = '';
    for (let same = 0, i = 0; same < 2 && i < 150; i++) {
      await this.settle();
      await sleep(1_100);
      const s = this.b.stats();
      const now = `${s.rows}/${s.chunks}/${s.chunkBytes}/${seal?.describe?.() ?? ''}`;
      same = now === last && !/^(seal|compact) /.test(seal?.describe?.() ?? '') ? same + 1 : 0;
      last = now;
    }
  }

  deliver(rows: ReadonlyArray<{ variable: string; ts: number; value: number }>): void {
    for (const r of rows) this.expected.remove(r.variable, r.ts, r.value);
  }

  async finish(stall: { maxMs: number; over100: number }): Promise<Outcome> {
    await this.b.flush();
    await this.settleFully();
    // The WAL is truncated on real time, once no sample came for 2 s (B9): wait for it, as the
    // gateway would be left alone.
    for (let i = 0; i < 8 && sideFiles(this.path) > 64 * 1024; i++) {
      await sleep(2_500);
      await this.settle();
    }
    const s = this.b.stats();
    // The issue's measure: the file's pages in use (every owner's: since src/store, usedBytes() counts the samples' tables only), the WAL and -shm.
    const pages = breakdown(this.path);
    const out = { samples: this.expected.n, breakdown: pages, inUse: pages.inUseBytes + sideFiles(this.path), samplesInUse: this.b.usedBytes(), onDisk: onDisk(this.path), chunkBytes: s.chunkBytes, liveRows: s.liveRows, chunks: s.chunks, maxStallMs: stall.maxMs, stallsOver100: stall.over100, seconds: 0 };
    await this.b.close();
    return { ...out, lossless: fileHash(this.path).equals(this.expected) };
  }
}

/** Bytes of the WAL and the shared-memory index beside the file (the issue's "bytes in use" counts them). */
function sideFiles(path: string): number {
  let n = 0;
  for (const f of [`${path}-wal`, `${path}-shm`]) if (existsSync(f)) n += statSync(f).size;
  return n;
}

/** The corpus's samples of variable `name`, for a trickle that continues its series. */
function seriesOf(samples: readonly CorpusSample[], names: readonly string[]): Map<string, number[]> {
  const m = new Map<string, number[]>(names.map((n) => [n, []]));
  for (const s of samples) m.get(s.variable)?.push(s.value);
  return m;
}

async function runPattern(mod: BufferModule, corpus: Corpus, pattern: Pattern, dir: string): Promise<Outcome> {
  const started = performance.now();
  const run = new Run(mod, corpus, pattern, dir);
  const samples = corpus.samples;
  const firstTs = samples.reduce((m, s) => Math.min(m, s.ts), Infinity);
  const lastTs = samples.reduce((m, s) => Math.max(m, s.ts), -Infinity);
  const stalls = stallMeter();
  if (pattern === 'live') await live(run, samples, firstTs);
  else {
    run.plantMs = lastTs - T0 + 1_000;
    await run.burst(samples);
    if (pattern === 'trickle') {
      const names = [...new Set(samples.slice(0, 5_000).map((s) => s.variable))].slice(0, 8);
      const series = seriesOf(samples, names);
      await run.pass(IDLE_S, async (t) => {
        const msg = names.map((variable) => {
          const v = series.get(variable)!;
          // Its last IDLE_S values again (a series shorter than that, as in a smoke run, wraps round).
          return { variable, ts: lastTs + t * 1_000, value: v[(((v.length - IDLE_S + t) % v.length) + v.length) % v.length] };
        });
        for (const s of msg) run.expected.add(s.variable, s.ts, s.value);
        await run.b.append(msg);
      });
    } else if (pattern === 'holes') {
      await run.pass(IDLE_S);
      await deliverPart(run);
      await run.pass(IDLE_S);
    } else await run.pass(IDLE_S);
  }
  const out = await run.finish(stalls.stop());
  return { ...out, seconds: (performance.now() - started) / 1000 };
}

/**
 * The whole corpus at its own pace, half of it delivered newest first as it comes; then the uplink
 * goes away for 5 minutes. Plant time moves in steps of a second, or of span / 3,600 for a slow
 * recording (a 60-hour one moves a minute at a time: its seals are small, as a gateway's would be).
 */
async function live(run: Run, samples: readonly CorpusSample[], firstTs: number): Promise<void> {
  const span = samples[samples.length - 1].ts - firstTs + 1;
  const stepMs = Math.max(1_000, Math.ceil(span / 3_600 / 1_000) * 1_000);
  let i = 0;
  let owed = 0;
  for (let step = 1; i < samples.length; step++) {
    const until = firstTs + step * stepMs;
    run.plantMs = until - T0;
    const batch: CorpusSample[] = [];
    while (i < samples.length && samples[i].ts < until) batch.push(samples[i++]);
    for (const s of batch) run.expected.add(s.variable, s.ts, s.value);
    const committed = run.b.append(batch);
    owed += batch.length / 2;
    if (step % 5 === 0) {
      await committed;
      // The sync path: batches of 200, newest first (its batch endpoint), each acknowledged.
      while (owed >= 200) {
        const rows = run.b.claimNewest(200);
        if (rows.length === 0) break;
        run.deliver(rows);
        run.b.ack(rows);
        owed -= rows.length;
      }
    }
    if (step % 60 === 0) await run.settleFully();
    else if (step % 10 === 0) await run.settle();
  }
  await run.b.flush();
  await run.pass(IDLE_S);
}

/** Part of a sealed backlog delivered: every other import range finished, the rest released; three sync calls, the last one failed. */
async function deliverPart(run: Run): Promise<void> {
  const total = run.expected.n;
  const jobs: Array<{ from: number; to: number }> = [];
  for (let k = 0; k < 6; k++) {
    const range = run.b.planJobRange(Math.max(1_000, Math.floor(total / 12)), 2_000);
    if (!range) break;
    run.b.reserveRange(range);
    jobs.push(range);
  }
  jobs.forEach((range, k) => {
    if (k % 2 === 1) return run.b.releaseRange(range);
    for (const part of run.b.readRange(range)) run.deliver(part);
    run.b.deleteRange(range);
  });
  for (let call = 0; call < 3; call++) {
    const rows = run.b.claimNewest(200);
    if (call < 2) {
      run.deliver(rows);
      run.b.ack(rows);
    } else run.b.release(rows);
  }
  await run.b.flush();
}

// ---------------------------------------------------------------- main

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-footprint-'));
const baseline = BASELINE === 'none' ? null : await loadBaseline(BASELINE);
const current = await loadCurrent();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    baseline?.dispose();
    rmSync(dir, { recursive: true, force: true });
    process.exit(130);
  });
}
const load = () => loadavg().map((x) => x.toFixed(1)).join(' ');
// The buffer's schedule never keeps a process alive (its timers are unref'd): while a run waits on
// maintenanceIdle() with nothing else pending (xz done, no commit due), this does.
const keepAlive = setInterval(() => undefined, 60_000);
try {
  const bps = (bytes: number, n: number) => (bytes / n).toFixed(2);
  const corpora = loadCorpora(process.env.BENCH_CSV ? [...CORPORA, 'csv'] : CORPORA, T0, SMALL, (l) => process.stdout.write(`${l}\n`)).map((c) => (c.name === 'suthaharan' ? replay(c, REPLAY) : c));
  const summary: Array<Record<string, string | number>> = [];
  const results: Array<{ corpus: string; pattern: string; o: Outcome }> = [];
  const verdicts: string[] = [];
  process.stdout.write(`load average at start: ${load()} (2 cores)\n`);
  for (const corpus of corpora) {
    // xz -9e and zstd -19 run in child processes while the patterns run (minutes on a busy machine).
    const refDone = textReference(corpus.samples);
    const n = corpus.samples.length;
    process.stdout.write(`\n${corpus.name}: ${n.toLocaleString('en-US')} samples of ${new Set(corpus.samples.map((s) => s.variable)).size} variables, ${corpus.source}\n`);
    const rowsBefore = summary.length;
    const pending: Array<{ o: Outcome; pattern: Pattern }> = [];
    for (const pattern of PATTERNS) {
      const row: Record<string, string | number> = { corpus: corpus.name, pattern: PATTERN_NAMES[pattern] };
      let before: Outcome | null = null;
      for (const mod of baseline ? [baseline, current] : [current]) {
        const o = await runPattern(mod, corpus, pattern, dir);
        const key = mod === current ? 'after' : 'before';
        row[`${key} B/sample`] = bps(o.inUse, o.samples);
        if (mod !== current) before = o;
        else {
          if (before) row['ratio before/after'] = `${ratioText(before.inUse / before.samples, o.inUse / o.samples, 1)}x`;
          row.samples = o.samples;
          row['samples tables'] = bps(o.samplesInUse, o.samples);
          row['chunk data'] = bps(o.chunkBytes, o.samples);
          row['live rows'] = o.liveRows;
          row.chunks = o.chunks;
          row['on disk'] = bps(o.onDisk, o.samples);
          row['stall ms'] = Math.round(o.maxStallMs);
          results.push({ corpus: corpus.name, pattern: PATTERN_NAMES[pattern], o });
          verdicts.push(verdict(o.inUse / o.samples <= 2.0, `${corpus.name}, ${PATTERN_NAMES[pattern]}: <= 2.0 B/sample in use (${bps(o.inUse, o.samples)})`));
          pending.push({ o, pattern });
        }
        row[`${key} lossless`] = o.lossless ? 'yes' : 'NO';
        verdicts.push(verdict(o.lossless, `${corpus.name}, ${PATTERN_NAMES[pattern]}, ${mod.label}: lossless`));
        process.stdout.write(`  ${PATTERN_NAMES[pattern]}, ${mod.label}: ${bps(o.inUse, o.samples)} B/sample in use, ${bps(o.onDisk, o.samples)} on disk, ${o.chunks} chunks, ${o.liveRows} rows (${o.seconds.toFixed(0)} s, load ${load()})\n`);
      }
      summary.push(row);
    }
    const ref = await refDone;
    process.stdout.write(`  xz -9e ${ref.xz ? `${bps(ref.xz.bytes, n)} B/sample (${ref.xz.form})` : 'not installed'}, zstd -19 ${ref.zstd ? `${bps(ref.zstd.bytes, n)} B/sample (${ref.zstd.form})` : 'not installed'}\n`);
    for (const row of summary.slice(rowsBefore)) {
      row['xz -9e'] = ref.xz ? bps(ref.xz.bytes, n) : 'absent';
      row['zstd -19'] = ref.zstd ? bps(ref.zstd.bytes, n) : 'absent';
    }
    for (const { o, pattern } of pending) {
      if (ref.xz && ref.zstd) verdicts.push(verdict(o.inUse < (ref.xz.bytes * o.samples) / n && o.inUse < (ref.zstd.bytes * o.samples) / n, `${corpus.name}, ${PATTERN_NAMES[pattern]}: below xz -9e (${bps(ref.xz.bytes, n)}) and zstd -19 (${bps(ref.zstd.bytes, n)})`));
    }
  }
  const plantRows: Array<Record<string, string | number>> = [];
  if (BIG > 0) {
    for (const mod of baseline ? [baseline, current] : [current]) {
      const gz = { value: 0 };
      const o = await plant(mod, BIG, dir, gz);
      plantRows.push({ corpus: `plant ${BIG >= 1e6 ? `${(BIG / 1e6).toFixed(0)} M` : BIG.toLocaleString('en-US')}, ${VARIABLES} variables`, buffer: mod.label, 'in use B/sample': bps(o.inUse, o.samples), 'on disk B/sample': bps(o.onDisk, o.samples), 'gzip -9 CSV B/sample': bps(gz.value, BIG), lossless: o.lossless ? 'yes' : 'NO' });
      verdicts.push(verdict(o.lossless, `plant, ${mod.label}: lossless`));
    }
  }
  process.stdout.write(`\nBuffer footprint, B/sample in use (${NOISY_MACHINE_NOTE}; load average at the end ${load()})\n\n${table(summary)}\n`);
  if (plantRows.length > 0) {
    const [before, after] = plantRows.length === 2 ? plantRows : [null, plantRows[0]];
    const ratio = before ? `; ratio before/after in use ${ratioText(Number(before['in use B/sample']), Number(after['in use B/sample']), 1)}x` : '';
    process.stdout.write(`\nplant pace, the live tail of seal_after as rows${ratio}\n\n${table(plantRows)}\n`);
  }
  for (const r of results) process.stdout.write(`\nwhere the bytes in use go, ${r.corpus}, ${r.pattern} (${r.o.breakdown.pageSize}-byte pages; SQLite dbstat):\n${table(breakdownRows(r.o.breakdown, r.o.samples))}\n`);
  process.stdout.write(`\n${verdicts.join('\n')}\n`);
} finally {
  clearInterval(keepAlive);
  baseline?.dispose();
  current.dispose();
  rmSync(dir, { recursive: true, force: true });
}

/** The recording played `times` over, each pass after the last (names and values as recorded). */
function replay(c: Corpus, times: number): Corpus {
  if (times <= 1) return c;
  const first = c.samples[0].ts;
  const span = c.samples[c.samples.length - 1].ts - first + 5_000;
  const samples: CorpusSample[] = [];
  for (let k = 0; k < times; k++) for (const s of c.samples) samples.push({ variable: s.variable, ts: s.ts + k * span, value: s.value });
  return { ...c, samples, source: `${c.source}, played ${times} times over` };
}
