/**
 * Benchmark: bytes on disk per sample, buffer v2 (sealed chunks) against the v1 row format and
 * gzip -9 of the same data as CSV, in the same run, on a plant-like corpus (bench/plant-corpus.ts).
 * Also times the in-place conversion of the v1 file (migration + sealing every row).
 *
 * The v2 buffer runs with its defaults (seal_after 2 min, seal_rows 100,000, compaction windows of 2 M samples) on a clock that
 * follows the corpus's plant time, so the live tail (the last 2 minutes) is still rows at the end,
 * as it would be in a gateway. Sizes are file + WAL after a TRUNCATE checkpoint.
 *
 * Target: <= 2.5 bytes per sample overall.
 *
 *   nice -n 5 npx tsx bench/buffer-footprint.ts                    # 20 M samples
 *   BENCH_SAMPLES=2000000 npx tsx bench/buffer-footprint.ts         # quick run
 *   BENCH_VARIABLES=5000 npx tsx bench/buffer-footprint.ts         # 5,000 variables (same class mix)
 */
import BetterSqlite3 from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGzip, type Gzip } from 'node:zlib';
import { chunkSamples, type ChunkRow } from '../src/buffer/chunks/store.js';
import { fromRowValue } from '../src/buffer/row-value.js';
import { openBufferDatabase } from '../src/buffer/file/database.js';
import { SampleBuffer } from '../src/buffer/sample-buffer.js';
import type { Clock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/logger.js';
import { createMetrics } from '../src/core/metrics.js';
import { table, verdict } from './lib.js';
import { PlantCorpus, type SignalClass } from './plant-corpus.js';

const N = Number(process.env.BENCH_SAMPLES ?? 20_000_000);
/** Variables in the corpus, in thousands of the same class mix (BENCH_VARIABLES=5000: the README's plant). */
const VARIABLES = Math.max(1000, Math.round(Number(process.env.BENCH_VARIABLES ?? 1000) / 1000) * 1000);
const T0 = Date.parse('2026-11-01T00:00:00Z');

/** Order-independent checksum of a multiset of samples: count, sum and xor of two 32-bit hashes. */
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

class Counter {
  bytes = 0;
  done: Promise<void>;
  constructor(readonly gz: Gzip) {
    this.done = new Promise((resolve, reject) => {
      gz.on('data', (d: Buffer) => (this.bytes += d.length));
      gz.on('end', resolve);
      gz.on('error', reject);
    });
  }
}

function sizeOf(path: string): number {
  let n = 0;
  for (const f of [path, `${path}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      // no WAL
    }
  }
  return n;
}

function checkpoint(db: BetterSqlite3.Database): void {
  db.pragma('wal_checkpoint(TRUNCATE)');
}

const dir = mkdtempSync(join(tmpdir(), 'gw-bench-footprint-'));
try {
  const corpus = new PlantCorpus(T0, VARIABLES / 1000);
  let plantMs = T0;
  const clock: Clock = { now: () => plantMs, monotonic: () => plantMs - T0 } as Clock;
  const logger = silentLogger();
  const v2Path = join(dir, 'v2.db');
  const { db: v2db } = openBufferDatabase(v2Path, { synchronous: 'full', logger, integrityCheck: false });
  const sealAfterMs = process.env.SEAL_AFTER_MS ? Number(process.env.SEAL_AFTER_MS) : undefined;
  const sealRows = process.env.SEAL_ROWS ? Number(process.env.SEAL_ROWS) : undefined;
  const compactSamples = process.env.COMPACT_SAMPLES ? Number(process.env.COMPACT_SAMPLES) : undefined;
  const v2 = new SampleBuffer(v2db, { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock, ...(sealAfterMs ? { sealAfterMs } : {}), ...(sealRows ? { sealRows } : {}), ...(compactSamples ? { compactSamples } : {}) });

  // v1: the schema as released before chunks (schema 2), one row per sample.
  const v1Path = join(dir, 'v1.db');
  {
    const { db } = openBufferDatabase(v1Path, { synchronous: 'full', logger, integrityCheck: false });
    db.exec('DROP TABLE chunks');
    // Schema 4 (gap ledger, issue 14) came after v1 too.
    for (const t of db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('last_committed', 'gaps', 'gap_ledger')").pluck(true).all() as string[]) db.exec(`DROP TABLE ${t}`);
    db.prepare("DELETE FROM meta WHERE key = 'sealed_upto'").run();
    db.pragma('user_version = 2');
    db.close();
  }
  const v1db = new BetterSqlite3(v1Path);
  v1db.pragma('journal_mode = WAL');
  v1db.pragma('synchronous = FULL');
  const v1Var = new Map<string, number>();
  const v1InsVar = v1db.prepare('INSERT INTO variables (id, name) VALUES (?, ?)');
  const v1Ins = v1db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)');
  let v1Seq = 1;
  const v1Tx = v1db.transaction((rows: Array<{ variable: string; ts: number; value: number }>) => {
    for (const r of rows) {
      let id = v1Var.get(r.variable);
      if (id === undefined) {
        id = v1Var.size + 1;
        v1Var.set(r.variable, id);
        v1InsVar.run(id, r.variable);
      }
      v1Ins.run(v1Seq++, id, r.ts, r.value);
    }
  });

  // gzip -9 CSV, overall and per class.
  const all = new Counter(createGzip({ level: 9 }));
  const perClass = new Map<SignalClass, Counter>();
  const classSamples = new Map<SignalClass, number>();

  const started = performance.now();
  /** Wraps a sealer method to time each call: steps, total and longest milliseconds. */
  const timed = (obj: Record<string, (lo: number, hi: number) => unknown>, method: string) => {
    const t = { ms: 0, steps: 0, worst: 0 };
    const orig = obj[method].bind(obj);
    obj[method] = (lo: number, hi: number) => {
      const start = performance.now();
      const r = orig(lo, hi);
      const ms = performance.now() - start;
      t.ms += ms;
      t.steps += 1;
      t.worst = Math.max(t.worst, ms);
      return r;
    };
    return t;
  };
  const sealerObj = (v2 as unknown as { sealer: Record<string, (lo: number, hi: number) => unknown> }).sealer;
  const sealT = timed(sealerObj, 'seal');
  const compactT = timed(sealerObj, 'compact');
  let total = 0;
  let second = 0;
  let v1Buf: Array<{ variable: string; ts: number; value: number }> = [];
  const pending: Promise<void>[] = [];
  let pendingSamples = 0;
  while (total < N) {
    const batch = corpus.second(second++).slice(0, N - total);
    plantMs = T0 + second * 1000;
    total += batch.length;
    pending.push(v2.append(batch));
    v1Buf.push(...batch);
    if (v1Buf.length >= 10_000) {
      v1Tx(v1Buf);
      v1Buf = [];
    }
    let csv = '';
    const byClass = new Map<SignalClass, string>();
    for (const s of batch) {
      const line = `${s.variable},${s.ts},${s.value}\n`;
      csv += line;
      const cls = corpus.classOf(s.variable);
      byClass.set(cls, (byClass.get(cls) ?? '') + line);
      classSamples.set(cls, (classSamples.get(cls) ?? 0) + 1);
    }
    all.gz.write(csv);
    for (const [cls, text] of byClass) {
      let c = perClass.get(cls);
      if (!c) perClass.set(cls, (c = new Counter(createGzip({ level: 9 }))));
      c.gz.write(text);
    }
    pendingSamples += batch.length;
    // One group commit (and one chance to seal, as after every commit of a gateway) per ~50,000
    // samples: with 5,000 variables, 50 plant seconds in one commit would let sealing fall behind.
    if (pending.length >= 50 || pendingSamples >= 50_000) {
      await Promise.all(pending);
      pending.length = 0;
      pendingSamples = 0;
      // Let the gzip streams drain, so memory stays bounded.
      await new Promise((r) => setImmediate(r));
    }
  }
  await Promise.all(pending);
  if (v1Buf.length > 0) v1Tx(v1Buf);
  v1db.prepare("INSERT INTO meta (key, value) VALUES ('next_seq', ?)").run(String(v1Seq));
  all.gz.end();
  for (const c of perClass.values()) c.gz.end();
  await all.done;
  await Promise.all([...perClass.values()].map((c) => c.done));
  await v2.flush();
  const ingestS = (performance.now() - started) / 1000;

  checkpoint(v2db);
  checkpoint(v1db);
  const v2Stats = v2.stats();
  const v2Bytes = sizeOf(v2Path);
  const v2Used = v2.usedBytes();
  const v1Bytes = sizeOf(v1Path);
  v1db.close();

  // Everything sealed (what a long outage converges to; the live tail is a fixed ~2 minutes).
  const pagesBefore = v2.usedBytes();
  v2.sealNow();
  checkpoint(v2db);
  const allSealedUsed = v2.usedBytes();
  const allSealedStats = v2.stats();
  // Per class: chunk bytes per sealed sample (codec output only).
  const names = new Map<number, string>((v2db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>).map(([id, name]) => [id, name]));
  const chunkBytes = new Map<SignalClass, { bytes: number; n: number; chunks: number }>();
  for (const [v, n, len] of v2db.prepare('SELECT var, n, length(data) FROM chunks').raw(true).iterate() as Iterable<[number, number, number]>) {
    const cls = corpus.classOf(names.get(v)!);
    const e = chunkBytes.get(cls) ?? { bytes: 0, n: 0, chunks: 0 };
    e.bytes += len;
    e.n += n;
    e.chunks += 1;
    chunkBytes.set(cls, e);
  }
  // Lossless: every sample read back from the file (rows and decoded chunks, streamed) against
  // the corpus regenerated, as an order-independent checksum over (variable, ts, value bits).
  await v2.close();
  const seen = new MultisetHash();
  {
    const db = new BetterSqlite3(v2Path, { readonly: true });
    const names = new Map<number, string>((db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>).map(([id, name]) => [id, name]));
    for (const [v, ts, value] of db.prepare('SELECT var, ts, value FROM samples').raw(true).iterate() as Iterable<[number, number, number | Buffer]>) seen.add(names.get(v)!, ts, fromRowValue(value));
    for (const c of db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks').iterate() as Iterable<ChunkRow>) {
      const name = names.get(c.var)!;
      for (const x of chunkSamples(c)) seen.add(name, x.ts, x.value);
    }
    db.close();
  }
  const expected = new MultisetHash();
  {
    const again = new PlantCorpus(T0, VARIABLES / 1000);
    let left = N;
    for (let s = 0; left > 0; s++) for (const x of again.second(s)) if (left-- > 0) expected.add(x.variable, x.ts, x.value);
  }
  const lossless = seen.equals(expected);

  // In-place conversion of the v1 file: migration, then sealing every row in steps.
  const convStarted = performance.now();
  const { db: convDb } = openBufferDatabase(v1Path, { synchronous: 'full', logger, integrityCheck: false });
  const conv = new SampleBuffer(convDb, { commitIntervalMs: 100, maxBytes: 1e12, whenFull: 'drop_oldest', logger, metrics: createMetrics(), clock: { now: () => Date.now(), monotonic: () => performance.now() } as Clock });
  conv.sealNow();
  const convS = (performance.now() - convStarted) / 1000;
  const convStats = conv.stats();
  checkpoint(convDb);
  const convUsed = conv.usedBytes();
  const convFile = sizeOf(v1Path);
  await conv.close();

  const bps = (bytes: number, n: number) => (bytes / n).toFixed(2);
  process.stdout.write(`\nBuffer footprint, ${total.toLocaleString('en-US')} samples of ${corpus.variables.length} variables (${Math.round(corpus.samplesPerSecond)} samples/s of plant time, ${(second / 3600).toFixed(1)} h), ingest + gzip took ${ingestS.toFixed(0)} s\n\n`);
  const rows: Array<Record<string, string | number>> = [];
  for (const [cls] of [...classSamples.entries()].sort()) {
    const c = chunkBytes.get(cls);
    const g = perClass.get(cls)!;
    rows.push({ class: cls, samples: classSamples.get(cls)!, 'v2 chunk B/sample': c ? bps(c.bytes, c.n) : '-', 'samples/chunk': c ? Math.round(c.n / c.chunks) : '-', 'gzip -9 CSV B/sample': bps(g.bytes, classSamples.get(cls)!) });
  }
  process.stdout.write(`${table(rows)}\n\n`);
  const v2Overall = v2Bytes / total;
  process.stdout.write(
    `${table([
      { format: 'v1 rows (file + WAL after checkpoint)', bytes: v1Bytes, 'B/sample': bps(v1Bytes, total) },
      { format: 'gzip -9 of the CSV (variable,ts,value)', bytes: all.bytes, 'B/sample': bps(all.bytes, total) },
      { format: `v2 file + WAL (${v2Stats.liveRows.toLocaleString('en-US')} live rows, ${v2Stats.sealedSamples.toLocaleString('en-US')} sealed)`, bytes: v2Bytes, 'B/sample': bps(v2Bytes, total) },
      { format: 'v2 pages in use (same moment)', bytes: v2Used, 'B/sample': bps(v2Used, total) },
      { format: 'v2 pages in use, everything sealed', bytes: allSealedUsed, 'B/sample': bps(allSealedUsed, total) },
      { format: 'v2 chunk data only (codec output)', bytes: allSealedStats.chunkBytes, 'B/sample': bps(allSealedStats.chunkBytes, total) },
    ])}\n\n`,
  );
  process.stdout.write(`sealing during ingest: ${sealT.steps} steps, ${(sealT.ms / 1000).toFixed(1)} s in all, longest step ${Math.round(sealT.worst)} ms (seal_after ${sealAfterMs ?? 'default'}, seal_rows ${sealRows ?? 'default'})\n`);
  process.stdout.write(`compaction during ingest: ${compactT.steps} steps, ${(compactT.ms / 1000).toFixed(1)} s in all, longest step ${Math.round(compactT.worst)} ms (compact_samples ${compactSamples ?? 'default'})\n`);
  process.stdout.write(`v2 compression ratio (16 B/sample raw over chunk bytes): ${allSealedStats.compressionRatio?.toFixed(1)}; chunks ${allSealedStats.chunks.toLocaleString('en-US')}; pages in use before the final seal ${pagesBefore}\n`);
  process.stdout.write(`lossless: the samples read back from the v2 file (rows and decoded chunks) equal the corpus as a multiset, bit-exact values (order-independent checksum of ${seen.n.toLocaleString('en-US')} samples): ${lossless ? 'yes' : 'NO'}\n`);
  process.stdout.write(`v1 -> v2 in place: ${total.toLocaleString('en-US')} rows converted in ${convS.toFixed(1)} s (${Math.round(total / convS).toLocaleString('en-US')} rows/s); ${convStats.sealedSamples.toLocaleString('en-US')} sealed; pages in use ${(convUsed / total).toFixed(2)} B/sample, file ${(convFile / total).toFixed(2)} B/sample (freed row pages are reused by new samples; VACUUM returns them to the disk)\n\n`);
  process.stdout.write(`${verdict(v2Overall <= 2.5, `<= 2.5 bytes per sample overall, file + WAL (${v2Overall.toFixed(2)})`)}\n`);
  process.stdout.write(`${verdict(lossless, 'lossless round trip')}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
