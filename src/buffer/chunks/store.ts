import type { Statement } from 'better-sqlite3';
import { decodeChunk, decodeChunkInto, encodeChunk, type Compressor, type DecodedChunk } from './codec.js';
import { fromRowValue, toRowValue } from '../row-value.js';
import type { StatementSource } from '../../store/store.js';

/**
 * Sealed samples: per-variable compressed chunks in the `chunks` table, beside the `samples` rows.
 *
 * Keeps B3 (src/buffer/README.md) for chunks: a chunk holds the samples with seqs
 * `seq_from .. seq_from + n − 1`, in that order, so every sealed sample keeps a seq of its own and
 * a seq range means the same samples whether they are rows or sealed; no seq is both a row and in
 * a chunk, and no two chunks overlap. `unseal` keeps the seqs; removing part of a chunk (a partial
 * import range, set-aside items) re-encodes the rest over its remaining seqs in the caller's
 * transaction (B2). Its own rule:
 *
 *  K1  `n ≤ MAX_CHUNK_SAMPLES`, so the chunks that may overlap a seq range are found by a primary
 *      key range scan starting MAX_CHUNK_SAMPLES below it.
 */

export const MAX_CHUNK_SAMPLES = 4_096;

/**
 * Chunks looked at for "the oldest sample": compaction orders a window's chunks to pack pages
 * (chunks/sealer.ts), so the lowest seq is not always the earliest sample; most variables have one chunk
 * per window starting near its beginning, so a few dozen chunks find it to within seconds.
 */
const OLDEST_LOOKAHEAD = 64;

export interface ChunkRow {
  seq_from: number;
  var: number;
  n: number;
  ts_min: number;
  ts_max: number;
  data: Buffer;
}

/** A chunk row without its key: encoded, not yet stored (or read to be stored again). */
export type EncodedChunk = Omit<ChunkRow, 'seq_from'>;

export interface ChunkTotals {
  chunks: number;
  samples: number;
  bytes: number;
}

export class ChunkStore {
  private readonly st: {
    insert: Statement;
    remove: Statement;
    overlapping: Statement;
    firstEndingAfter: Statement;
    lastStartingBefore: Statement;
    totals: Statement;
    insertRow: Statement;
    oldest: Statement;
    earliestFrom: Statement;
    samplesIn: Statement;
  };
  /**
   * Bumped whenever chunks change below the newest (removed in part or whole by a finished import
   * range or set-aside, turned back into rows for a claim): the compaction schedule looks at the
   * windows it passed again (seal-schedule.ts). A hint, not a count (B8 concerns counts): a
   * rolled-back change costs one needless look.
   */
  changes = 0;
  /** unseal and removeRange decode into this and are done with it before they return (decodeChunkInto). */
  private readonly decoded: DecodedChunk = { ts: new Float64Array(MAX_CHUNK_SAMPLES), values: new Float64Array(MAX_CHUNK_SAMPLES) };

  constructor(
    private readonly db: StatementSource,
    /** null: chunk format 3 (codec-v3.ts); a compressor: format 2 with it (comparisons, tests). */
    private readonly compressor: Compressor | null = null,
  ) {
    this.st = {
      insert: db.prepare('INSERT INTO chunks (seq_from, var, n, ts_min, ts_max, data) VALUES (?, ?, ?, ?, ?, ?)'),
      remove: db.prepare('DELETE FROM chunks WHERE seq_from = ?'),
      overlapping: db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks WHERE seq_from >= ? AND seq_from <= ? AND seq_from + n - 1 >= ? ORDER BY seq_from'),
      firstEndingAfter: db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks WHERE seq_from >= ? AND seq_from < ? AND seq_from + n - 1 > ? ORDER BY seq_from LIMIT 1'),
      lastStartingBefore: db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks WHERE seq_from > ? AND seq_from < ? ORDER BY seq_from DESC LIMIT 1'),
      totals: db.prepare('SELECT count(*) AS chunks, coalesce(sum(n), 0) AS samples, coalesce(sum(length(data)), 0) AS bytes FROM chunks'),
      insertRow: db.prepare('INSERT INTO samples (seq, var, ts, value) VALUES (?, ?, ?, ?)'),
      oldest: db.prepare(`SELECT min(ts_min) FROM (SELECT ts_min FROM chunks ORDER BY seq_from LIMIT ${OLDEST_LOOKAHEAD})`).pluck(true),
      // Samples with seqs in [?1, ?2], summed by SQLite (no chunk data read into JS): a job's range
      // can hold 100,000 small chunks (issue 25).
      samplesIn: db.prepare(`SELECT coalesce(sum(min(@to, seq_from + n - 1) - max(@from, seq_from) + 1), 0) FROM chunks WHERE seq_from >= @from - ${MAX_CHUNK_SAMPLES - 1} AND seq_from <= @to AND seq_from + n - 1 >= @from`).pluck(true),
      earliestFrom: db.prepare(`SELECT min(ts_min) FROM (SELECT ts_min FROM chunks WHERE seq_from >= ? AND seq_from < ? ORDER BY seq_from LIMIT ${OLDEST_LOOKAHEAD})`).pluck(true),
    };
  }

  totals(): ChunkTotals {
    return this.st.totals.get() as ChunkTotals;
  }

  /** Encodes and stores one chunk; the caller guarantees B3 (its seqs free, inside a transaction). */
  write(seqFrom: number, varId: number, ts: ArrayLike<number>, values: ArrayLike<number>): Buffer {
    const c = this.encode(varId, ts, values);
    this.insert(seqFrom, c);
    return c.data;
  }

  /** Encodes one variable's samples as a chunk row without storing it (compaction orders them first). */
  encode(varId: number, ts: ArrayLike<number>, values: ArrayLike<number>): EncodedChunk {
    const data = encodeChunk(ts, values, this.compressor === null ? {} : { compressor: this.compressor });
    let min = Infinity;
    let max = -Infinity;
    for (let i = 0; i < ts.length; i++) {
      if (ts[i] < min) min = ts[i];
      if (ts[i] > max) max = ts[i];
    }
    return { var: varId, n: ts.length, ts_min: min, ts_max: max, data };
  }

  /** Stores an encoded chunk at `seqFrom` (B3: the caller guarantees its seqs are free). */
  insert(seqFrom: number, c: EncodedChunk): void {
    this.st.insert.run(seqFrom, c.var, c.n, c.ts_min, c.ts_max, c.data);
  }

  /** Chunks holding any seq in [from, to], in seq order (K1). */
  overlapping(from: number, to: number): ChunkRow[] {
    return this.st.overlapping.all(from - MAX_CHUNK_SAMPLES + 1, to, from) as ChunkRow[];
  }

  /** The first chunk with a sample seq in (lo, hi). */
  firstAfter(lo: number, hi: number): ChunkRow | undefined {
    return this.st.firstEndingAfter.get(lo - MAX_CHUNK_SAMPLES + 1, hi, lo) as ChunkRow | undefined;
  }

  /** The chunk with the highest seq_from in (lo, hi). */
  lastBefore(lo: number, hi: number): ChunkRow | undefined {
    return this.st.lastStartingBefore.get(lo, hi) as ChunkRow | undefined;
  }

  /** Earliest sample timestamp among the chunks with the lowest seqs (see OLDEST_LOOKAHEAD), or null. */
  oldestTs(): number | null {
    return (this.st.oldest.get() as number | null) ?? null;
  }

  /** The same from `from` on, below `to`: the oldest sample where a sender would start. */
  earliestTsFrom(from: number, to: number): number | null {
    return (this.st.earliestFrom.get(from, to) as number | null) ?? null;
  }

  /** Number of sealed samples with seqs in [from, to]. */
  countIn(from: number, to: number): number {
    return this.st.samplesIn.get({ from, to }) as number;
  }

  /**
   * Removes the sealed samples with seqs in [from, to] (B2); returns them (seq order) so the
   * caller can count and report exactly what left.
   */
  removeRange(from: number, to: number): { removed: number; tsMin: number; tsMax: number } {
    this.changes++;
    let removed = 0;
    let tsMin = Infinity;
    let tsMax = -Infinity;
    for (const c of this.overlapping(from, to)) {
      const end = c.seq_from + c.n - 1;
      if (c.seq_from >= from && end <= to) {
        this.st.remove.run(c.seq_from);
        removed += c.n;
        tsMin = Math.min(tsMin, c.ts_min);
        tsMax = Math.max(tsMax, c.ts_max);
        continue;
      }
      const d = decodeChunkInto(c.data, this.decoded);
      this.st.remove.run(c.seq_from);
      const cutFrom = Math.max(from, c.seq_from) - c.seq_from;
      const cutTo = Math.min(to, end) - c.seq_from;
      for (let i = cutFrom; i <= cutTo; i++) {
        tsMin = Math.min(tsMin, d.ts[i]);
        tsMax = Math.max(tsMax, d.ts[i]);
      }
      removed += cutTo - cutFrom + 1;
      if (cutFrom > 0) this.write(c.seq_from, c.var, d.ts.subarray(0, cutFrom), d.values.subarray(0, cutFrom));
      if (cutTo < c.n - 1) this.write(c.seq_from + cutTo + 1, c.var, d.ts.subarray(cutTo + 1), d.values.subarray(cutTo + 1));
    }
    return { removed, tsMin, tsMax };
  }

  /** Turns a chunk back into rows with the same seqs (B3); returns the number of rows. */
  unseal(c: ChunkRow): number {
    this.changes++;
    const d = decodeChunkInto(c.data, this.decoded);
    this.st.remove.run(c.seq_from);
    for (let i = 0; i < c.n; i++) this.st.insertRow.run(c.seq_from + i, c.var, d.ts[i], toRowValue(d.values[i]));
    return c.n;
  }

  /** Removes single seqs (set-aside items held in chunks); returns how many were found. */
  removeSeqs(seqs: readonly number[]): number {
    let removed = 0;
    for (const seq of [...seqs].sort((a, b) => a - b)) removed += this.removeRange(seq, seq).removed;
    return removed;
  }
}

/** Every sealed sample of a chunk row with its seq, decoded. */
export function* chunkSamples(c: ChunkRow, from = -Infinity, to = Infinity): Generator<{ seq: number; ts: number; value: number }> {
  const d = decodeChunk(c.data);
  for (let i = 0; i < c.n; i++) {
    const seq = c.seq_from + i;
    if (seq < from || seq > to) continue;
    yield { seq, ts: d.ts[i], value: d.values[i] };
  }
}

/** Unsent samples in a buffer file, rows and sealed (files before buffer v2 have no chunks table). For tools that read the file directly. */
export function countUnsent(db: StatementSource): number {
  let n = db.prepare('SELECT count(*) FROM samples').pluck(true).get() as number;
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks'").get() !== undefined) n += db.prepare('SELECT coalesce(sum(n), 0) FROM chunks').pluck(true).get() as number;
  return n;
}

/**
 * Every unsent sample in a buffer file, rows and sealed, with variable names, in seq order. For
 * tools that read the file directly (the crash harness, tests).
 */
export function readAllSamples(db: StatementSource): Array<{ seq: number; variable: string; ts: number; value: number }> {
  const names = new Map<number, string>((db.prepare('SELECT id, name FROM variables').raw(true).all() as Array<[number, string]>).map(([id, name]) => [id, name]));
  const out: Array<{ seq: number; variable: string; ts: number; value: number }> = [];
  for (const [seq, v, ts, value] of db.prepare('SELECT seq, var, ts, value FROM samples ORDER BY seq').raw(true).iterate() as Iterable<[number, number, number, number | Buffer]>) {
    out.push({ seq, variable: names.get(v) ?? `#${v}`, ts, value: fromRowValue(value) });
  }
  const hasChunks = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks'").get() !== undefined;
  if (hasChunks) {
    for (const c of db.prepare('SELECT seq_from, var, n, ts_min, ts_max, data FROM chunks ORDER BY seq_from').all() as ChunkRow[]) {
      for (const x of chunkSamples(c)) out.push({ seq: x.seq, variable: names.get(c.var) ?? `#${c.var}`, ts: x.ts, value: x.value });
    }
    out.sort((a, b) => a.seq - b.seq);
  }
  return out;
}
