/**
 * Benchmark: bytes per sample of the buffer, in use (pages less free pages: what buffer.max_bytes
 * limits) and on disk (file + WAL), the current buffer against the buffer before issue 22 measured
 * in the same run (bench/baseline-buffer.ts), in three scenarios:
 *
 *   burst + idle     a small corpus (400k samples of sensor recordings: BENCH_CSV=path, else the
 *                    generator of bench/sensor-corpus.ts and its realistic variant, both) appended
 *                    within seconds, as after an outage, then 5 minutes without a sample
 *   burst + trickle  the same, then 5 minutes of one sample a second
 *   plant            the plant-like corpus (bench/plant-corpus.ts, 1,000 variables) at plant pace,
 *                    20 M samples (3.2 h): the long run of buffer v2, live tail of seal_after as rows
 *
 * Both buffers run with their defaults. The small scenarios run on a clock 10 times faster than
 * real time (5 minutes take 30 s); only the buffer's ages and timers follow it, so its maintenance
 * gets a tenth of the real time it would have: conservative for the current buffer, whose sealing
 * and giving disk back run on that schedule (the baseline seals only after commits). Every
 * scenario checks that the samples read back from the file equal what was appended (multiset,
 * values bit-exact). The longest event-loop stall (5 ms timer) during the 5 minutes after the
 * burst, and during the whole plant run, is what a commit due at that moment would have waited.
 *
 * Target (issue 22 §3): <= 2.5 bytes per sample in use on the small corpus too, not only on 20 M.
 *
 *   nice -n 5 npx tsx bench/buffer-footprint.ts                      # all, 20 M plant samples
 *   BENCH_SAMPLES=0 npx tsx bench/buffer-footprint.ts                # the small scenarios only
 *   BENCH_SAMPLES=2000000 BENCH_SMALL=400000 npx tsx bench/buffer-footprint.ts
 *   BENCH_CSV=recording.csv npx tsx bench/buffer-footprint.ts        # a real recording (variable,timestamp,value)
 *   BENCH_CORPUS=realistic npx tsx bench/buffer-footprint.ts         # only the realistic variant (or sensor; default both)
 *   BASELINE_REF=<commit> npx tsx bench/buffer-footprint.ts          # another baseline (bench/baseline-buffer.ts)
 *   BENCH_VARIABLES=5000 npx tsx bench/buffer-footprint.ts           # 5,000 plant variables (same class mix)
 */
import BetterSqlite3 from 'better-sqlite3';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGzip } from 'node:zlib';
import { chunkSamples, type ChunkRow } from '../src/buffer/chunks/store.js';
import { encodeChunk } from '../src/buffer/chunks/codec.js';
import { fromRowValue } from '../src/buffer/row-value.js';
import type { Clock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { loadBaseline, loadCurrent, stallMeter, type BenchBuffer, type BufferModule } from './baseline-buffer.js';
import { envList, envNumber, NOISY_MACHINE_NOTE, SMOKE, smokeBanner, table, verdict } from './lib.js';
import { PlantCorpus, type CorpusSample } from './plant-corpus.js';
import { smallCorpus } from './sensor-corpus.js';

const SMALL = envNumber('BENCH_SMALL', 400_000, 20_000);
const BIG = envNumber('BENCH_SAMPLES', 20_000_000, 20_000);
/** Variables of the plant corpus, in thousands of the same class mix (BENCH_VARIABLES=5000: the README's plant). */
const VARIABLES = Math.max(1000, Math.round(envNumber('BENCH_VARIABLES', 1000) / 1000) * 1000);
/** Generated small corpora to run (BENCH_CORPUS=sensor or realistic: one of them; default both). */
const CORPORA = envList('BENCH_CORPUS', 'sensor,realistic', 'sensor').filter((c) => c === 'sensor' || c === 'realistic');
const SPEED = 10;
/** Plant seconds after the burst (smoke: 30, three real seconds). */
const IDLE_S = SMOKE ? 30 : 300;
/**
 * buffer.seal_after: the default (2 min), or in a smoke run 10 plant seconds, so that its small
 * corpora are sealed and compacted within its short idle time, as the full ones are within 5 min.
 */
const SEAL_AFTER = SMOKE ? { sealAfterMs: 10_000 } : {};
/** Real time the plant run waits at its end for the free pages to be given back (smoke: 1 s). */
const GIVE_BACK_WAIT_MS = SMOKE ? 1_000 : 65_000;
const IDLE_LABEL = IDLE_S >= 60 ? `${IDLE_S / 60} min` : `${IDLE_S} s`;
smokeBanner(`BENCH_SMALL ${SMALL.toLocaleString('en-US')}, BENCH_SAMPLES ${BIG.toLocaleString('en-US')}, BENCH_CORPUS ${CORPORA.join(',')}, ${IDLE_S} plant seconds after the burst, seal_after 10 s`);
const T0 = Date.parse('2026-11-01T00:00:00Z');

/** Order-independent checksum of a multiset of samples: count, sums and xor of two 32-bit hashes. */
class MultisetHash {
  n = 0;
  sumA = 0;
  sumB = 0;
  xorA = 0;
  private readonly f = new Float64Array(1);
  private readonly u = new Uint32Array(this.f.buffer);
  add(variable: string, ts: number, value: number): void {
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
    this.n++;
    this.sumA = (this.sumA + (a >>> 0)) % 4294967296;
    this.sumB = (this.sumB + (b >>> 0)) % 4294967296;
    this.xorA = (this.xorA ^ a) >>> 0;
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
    return { pageSize, otherPages: inUse - trees.reduce((n, t) => n + t.pages, 0), trees };
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
  inUse: number;
  onDisk: number;
  chunkBytes: number;
  liveRows: number;
  chunks: number;
  maxStallMs: number;
  stallsOver100: number;
  lossless: boolean;
  seconds: number;
}

/** A clock SPEED times faster than real time, from now on. */
function fastClock(): Clock {
  const start = performance.now();
  return { now: () => T0 + (performance.now() - start) * SPEED, monotonic: () => (performance.now() - start) * SPEED };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The small corpus within seconds, then 5 minutes (at SPEED) idle or with one sample a second. */
async function burst(mod: BufferModule, corpus: CorpusSample[], trickle: boolean, dir: string, tag = ''): Promise<Outcome> {
  // A file of its own per corpus too (a second corpus must not open the first one's file).
  const path = join(dir, `${mod.label.replace(/\W+/g, '-')}-${trickle ? 'trickle' : 'idle'}${tag.replace(/\W+/g, '-')}.db`);
  const clock = fastClock();
  const logger = silentLogger();
  const db = mod.openDatabase(path, logger);
  // Durations the buffer measures in real time are scaled with the clock (the baseline ignores them).
  const b = new mod.SampleBuffer(db, { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: mod.createMetrics(), clock, maintenanceIdleMs: 1_000 / SPEED, returnFreeAfterMs: 60_000 / SPEED, ...SEAL_AFTER });
  const expected = new MultisetHash();
  const started = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < corpus.length; i += 5_000) {
    const part = corpus.slice(i, i + 5_000);
    for (const s of part) expected.add(s.variable, s.ts, s.value);
    pending.push(b.append(part));
    if (pending.length >= 10) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
  const lastTs = corpus.reduce((m, s) => Math.max(m, s.ts), 0);
  // Stalls while the buffer is left to itself (idle or a trickle): its maintenance, not the burst's commits.
  const stalls = stallMeter();
  for (let t = 0; t < IDLE_S; t++) {
    await sleep(1_000 / SPEED);
    if (trickle) {
      const s = { variable: 'mvr_trickle', ts: lastTs + (t + 1) * 1000, value: t % 50 };
      expected.add(s.variable, s.ts, s.value);
      await b.append([s]);
    }
  }
  const stall = stalls.stop();
  const s = b.stats();
  const out = { samples: expected.n, breakdown: breakdown(path), inUse: b.usedBytes(), onDisk: onDisk(path), chunkBytes: s.chunkBytes, liveRows: s.liveRows, chunks: s.chunks, maxStallMs: stall.maxMs, stallsOver100: stall.over100, seconds: (performance.now() - started) / 1000 };
  await b.close();
  return { ...out, lossless: fileHash(path).equals(expected) };
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
  const out = { samples: total, breakdown: breakdown(path), inUse: b.usedBytes(), onDisk: onDisk(path), chunkBytes: s.chunkBytes, liveRows: s.liveRows, chunks: s.chunks, maxStallMs: stall.maxMs, stallsOver100: stall.over100, seconds: (performance.now() - started) / 1000 };
  await b.close();
  return { ...out, lossless: fileHash(path).equals(expected) };
}

/** Codec output per signal class of the small corpus (its share of samples, bytes per sample). */
function perClass(corpus: CorpusSample[]): Array<Record<string, string | number>> {
  const byVar = new Map<string, { ts: number[]; v: number[] }>();
  for (const d of corpus) {
    let e = byVar.get(d.variable);
    if (!e) byVar.set(d.variable, (e = { ts: [], v: [] }));
    e.ts.push(d.ts);
    e.v.push(d.value);
  }
  const cls = new Map<string, { n: number; bytes: number }>();
  for (const [name, e] of byVar) {
    const c = name.split('_')[1] ?? 'other';
    const x = cls.get(c) ?? { n: 0, bytes: 0 };
    for (let i = 0; i < e.ts.length; i += 4096) x.bytes += encodeChunk(e.ts.slice(i, i + 4096), e.v.slice(i, i + 4096)).length;
    x.n += e.ts.length;
    cls.set(c, x);
  }
  return [...cls.entries()].map(([c, x]) => ({ class: c, samples: x.n, share: `${((100 * x.n) / corpus.length).toFixed(0)} %`, 'codec B/sample': (x.bytes / x.n).toFixed(2) }));
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-footprint-'));
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
  const bps = (bytes: number, n: number) => (bytes / n).toFixed(2);
  const row = (scenario: string, mod: BufferModule, o: Outcome) => ({
    scenario,
    buffer: mod.label,
    samples: o.samples,
    'in use B/sample': bps(o.inUse, o.samples),
    'on disk B/sample': bps(o.onDisk, o.samples),
    'chunk data B/sample': bps(o.chunkBytes, o.samples),
    'live rows': o.liveRows,
    chunks: o.chunks,
    'longest stall ms': Math.round(o.maxStallMs),
    lossless: o.lossless ? 'yes' : 'NO',
  });
  const rows: Array<Record<string, string | number>> = [];
  const results: Array<{ scenario: string; mod: BufferModule; o: Outcome }> = [];
  if (SMALL > 0) {
    // BENCH_CSV: that recording; else the generated corpus and its realistic variant (bench/sensor-corpus.ts), side by side.
    const corpora = process.env.BENCH_CSV ? [{ tag: '', ...smallCorpus(T0, SMALL) }] : CORPORA.map((c) => ({ tag: c === 'realistic' ? ' (realistic)' : '', ...smallCorpus(T0, SMALL, c === 'realistic') }));
    for (const { tag, samples, source } of corpora) {
      const vars = new Set(samples.map((s) => s.variable)).size;
      process.stdout.write(`small corpus${tag}: ${samples.length.toLocaleString('en-US')} samples of ${vars} variables, ${source}\n${table(perClass(samples))}\n\n`);
      for (const trickle of [false, true]) {
        for (const mod of [baseline, current]) {
          const o = await burst(mod, samples, trickle, dir, tag);
          results.push({ scenario: `${trickle ? 'burst + trickle' : 'burst + idle'}${tag}`, mod, o });
          rows.push(row(`${trickle ? 'burst + trickle' : 'burst + idle'} ${IDLE_LABEL}${tag}`, mod, o));
          process.stdout.write(`  ${rows.at(-1)!.scenario}, ${mod.label}: ${rows.at(-1)!['in use B/sample']} B/sample in use, ${rows.at(-1)!['on disk B/sample']} on disk (${o.seconds.toFixed(0)} s)\n`);
        }
      }
    }
  }
  let gzip = 0;
  if (BIG > 0) {
    for (const mod of [baseline, current]) {
      const gz = mod === baseline ? { value: 0 } : null;
      const o = await plant(mod, BIG, dir, gz);
      if (gz) gzip = gz.value;
      results.push({ scenario: 'plant', mod, o });
      rows.push(row(`plant ${BIG >= 1e6 ? `${(BIG / 1e6).toFixed(0)} M` : BIG.toLocaleString('en-US')}, ${VARIABLES} variables`, mod, o));
      process.stdout.write(`  plant, ${mod.label}: ${rows.at(-1)!['in use B/sample']} B/sample in use, ${rows.at(-1)!['on disk B/sample']} on disk (${o.seconds.toFixed(0)} s)\n`);
    }
  }
  process.stdout.write(`\nBuffer footprint (${NOISY_MACHINE_NOTE})\n\n${table(rows)}\n`);
  for (const r of results.filter((x) => x.mod === current)) {
    process.stdout.write(`\nwhere the bytes in use go, ${r.scenario} (${r.o.breakdown.pageSize}-byte pages; SQLite dbstat):\n${table(breakdownRows(r.o.breakdown, r.o.samples))}\n`);
  }
  if (gzip > 0) process.stdout.write(`\nreference: gzip -9 of the plant corpus as CSV (variable,ts,value): ${bps(gzip, BIG)} B/sample\n`);
  process.stdout.write('\n');
  for (const r of results.filter((x) => x.mod === current)) {
    const base = results.find((x) => x.mod === baseline && x.scenario === r.scenario)!;
    process.stdout.write(`${r.scenario}: in use ${(base.o.inUse / r.o.inUse).toFixed(1)}x smaller than the baseline, on disk ${(base.o.onDisk / r.o.onDisk).toFixed(1)}x smaller\n`);
  }
  for (const r of results.filter((x) => x.mod === current && x.scenario !== 'plant')) {
    process.stdout.write(`${verdict(r.o.inUse / r.o.samples <= 2.5, `${r.scenario}: <= 2.5 bytes per sample in use (${bps(r.o.inUse, r.o.samples)}; chunk data alone ${bps(r.o.chunkBytes, r.o.samples)}, so the buffer's own overhead is ${bps(r.o.inUse - r.o.chunkBytes, r.o.samples)})`)}\n`);
  }
  for (const r of results.filter((x) => x.mod === current && x.scenario === 'plant')) process.stdout.write(`${verdict(r.o.onDisk / r.o.samples <= 2.5, `plant: <= 2.5 bytes per sample on disk (${bps(r.o.onDisk, r.o.samples)})`)}\n`);
  process.stdout.write(`${verdict(results.every((r) => r.o.lossless), 'lossless in every scenario')}\n`);
} finally {
  baseline.dispose();
  current.dispose();
  rmSync(dir, { recursive: true, force: true });
}
