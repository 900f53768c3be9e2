import type { Database, Statement } from 'better-sqlite3';
import { decodeChunk } from './chunk-codec.js';
import { MAX_CHUNK_SAMPLES, type ChunkStore } from './chunk-store.js';
import { fromRowValue } from './row-value.js';

/**
 * The sealer: turns the oldest rows into per-variable chunks, a seq range at a time.
 *
 * INVARIANTS:
 *
 *  L1  One transaction: the chunks are written, the rows they replace are deleted and
 *      `meta.sealed_upto` advances together, or nothing happens (a power cut leaves either all
 *      rows or all chunks, never both, never neither).
 *  L2  The caller passes a range [lo, hi] that nothing holds: no sync claim (acked-but-undeleted
 *      rows count as claimed), no import-job range (the durable ledger, not only the in-memory
 *      reservations), no sync-only range. Inside it the samples are renumbered per variable into
 *      the seqs lo, lo+1, … (chunk-store S2), which keeps I3: the range's seqs are used only by the
 *      same samples, and nothing outside it changes.
 *  L3  Rows below `sealed_upto` are never sealed again (a chunk turned back into rows for the
 *      sync path stays rows), so sealing and unsealing cannot chase each other.
 *  L4  Each chunk is checked to decode bit-exact before it is stored (chunk-codec C3).
 *  L5  Compaction (merging a variable's small chunks from several sealing steps) is the same
 *      transformation applied to chunks: a window [lo, hi] that holds only chunks (no rows) and
 *      that nothing holds (L2) is rewritten in one transaction, per variable in the order of its
 *      samples, into the seqs lo, lo+1, …; the sample count is checked before commit. A sealing
 *      step cuts one chunk per variable, so with many variables its chunks are small (tens to
 *      hundreds of samples) and cost more bytes per sample; compaction makes them up to
 *      MAX_CHUNK_SAMPLES long without holding a large step's rows in memory.
 */

export interface SealResult {
  samples: number;
  chunks: number;
  bytes: number;
}

/** Compaction stages new chunks at seq − 2^53 (negative, exact in a double and in SQLite's 64-bit integers). */
const STAGE_OFFSET = 2 ** 53;

export interface CompactResult {
  samples: number;
  chunksBefore: number;
  chunksAfter: number;
  bytesBefore: number;
  bytesAfter: number;
  /** The last seq the window's samples use now (≤ hi: gaps left by deletions close up). */
  newHi: number;
}

/** Metadata of a chunk, without its data. */
export interface ChunkMeta {
  seq_from: number;
  var: number;
  n: number;
}

export class Sealer {
  private readonly st: {
    rows: Statement;
    deleteRange: Statement;
    setUpto: Statement;
    getUpto: Statement;
    chunkMeta: Statement;
    chunkData: Statement;
    chunkBytes: Statement;
    bytesIn: Statement;
    copyChunk: Statement;
    deleteWindow: Statement;
    unstage: Statement;
    rowsIn: Statement;
  };

  constructor(
    private readonly db: Database,
    private readonly store: ChunkStore,
  ) {
    this.st = {
      rows: db.prepare('SELECT var, ts, value FROM samples WHERE seq >= ? AND seq <= ? ORDER BY seq').raw(true),
      deleteRange: db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?'),
      setUpto: db.prepare("INSERT INTO meta (key, value) VALUES ('sealed_upto', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getUpto: db.prepare("SELECT value FROM meta WHERE key = 'sealed_upto'").pluck(true),
      chunkMeta: db.prepare('SELECT seq_from, var, n FROM chunks WHERE seq_from >= ? AND seq_from <= ? ORDER BY seq_from'),
      chunkData: db.prepare('SELECT data FROM chunks WHERE seq_from = ?').pluck(true),
      chunkBytes: db.prepare('SELECT length(data) FROM chunks WHERE seq_from = ?').pluck(true),
      bytesIn: db.prepare('SELECT coalesce(sum(length(data)), 0) FROM chunks WHERE seq_from >= ? AND seq_from <= ?').pluck(true),
      copyChunk: db.prepare('INSERT INTO chunks (seq_from, var, n, ts_min, ts_max, data) SELECT ?, var, n, ts_min, ts_max, data FROM chunks WHERE seq_from = ?'),
      deleteWindow: db.prepare('DELETE FROM chunks WHERE seq_from >= ? AND seq_from <= ?'),
      unstage: db.prepare(`UPDATE chunks SET seq_from = seq_from + ${STAGE_OFFSET} WHERE seq_from < 0`),
      rowsIn: db.prepare('SELECT count(*) FROM samples WHERE seq >= ? AND seq <= ?').pluck(true),
    };
  }

  /** Highest seq below which rows are never sealed (L3). */
  sealedUpto(): number {
    return Number((this.st.getUpto.get() as string | undefined) ?? 0);
  }

  /** Moves `sealed_upto` past rows that are held and will stay rows (L3); no rows change. */
  skipTo(seq: number): void {
    if (seq > this.sealedUpto()) this.st.setUpto.run(String(seq));
  }

  /** Seals every row with a seq in [lo, hi] (L1, L2: the caller checked that nothing holds them). */
  seal(lo: number, hi: number): SealResult {
    return this.db.transaction((): SealResult => {
      const byVar = new Map<number, { ts: number[]; values: number[] }>();
      let samples = 0;
      for (const [v, ts, value] of this.st.rows.iterate(lo, hi) as Iterable<[number, number, number | Buffer]>) {
        let g = byVar.get(v);
        if (!g) byVar.set(v, (g = { ts: [], values: [] }));
        g.ts.push(ts);
        g.values.push(fromRowValue(value));
        samples++;
      }
      let seq = lo;
      let chunks = 0;
      let bytes = 0;
      for (const [varId, g] of byVar) {
        for (let i = 0; i < g.ts.length; i += MAX_CHUNK_SAMPLES) {
          const end = Math.min(g.ts.length, i + MAX_CHUNK_SAMPLES);
          const whole = i === 0 && end === g.ts.length; // the usual case: no copy
          bytes += this.store.write(seq, varId, whole ? g.ts : g.ts.slice(i, end), whole ? g.values : g.values.slice(i, end)).length;
          seq += end - i;
          chunks++;
        }
      }
      this.st.deleteRange.run(lo, hi);
      this.st.setUpto.run(String(hi));
      return { samples, chunks, bytes };
    }).immediate();
  }

  /** Chunk metadata (no data) with seq_from in [from, to], in seq order: for choosing a compaction window. */
  chunkMeta(from: number, to: number): ChunkMeta[] {
    return this.st.chunkMeta.all(from, to) as ChunkMeta[];
  }

  /** The same, streamed: a caller that stops early reads no further (a backlog can hold millions of chunks). */
  iterateChunkMeta(from: number, to: number): IterableIterator<ChunkMeta> {
    return this.st.chunkMeta.iterate(from, to) as IterableIterator<ChunkMeta>;
  }

  /**
   * Rewrites the chunks of [lo, hi] into per-variable chunks of up to MAX_CHUNK_SAMPLES (L5; the
   * caller checked that nothing holds the window). The new chunks are staged at seq − 2^53
   * (seqs are ≥ 1, so those are free, and they keep ascending order: the move into place then
   * appends pages in order instead of splitting them half full), then the old ones are deleted
   * and the new ones moved into place, all in this transaction: memory is the window's chunk list plus one variable's decoded
   * samples, whatever the window's size. A chunk at least half full is copied as it is when
   * nothing of its variable is pending, so compacted windows cost little to pass through again.
   */
  compact(lo: number, hi: number): CompactResult {
    return this.db.transaction((): CompactResult => {
      if ((this.st.rowsIn.get(lo, hi) as number) > 0) throw new Error(`compaction window ${lo}..${hi} holds rows`);
      const byVar = new Map<number, number[]>();
      let samples = 0;
      let chunksBefore = 0;
      for (const m of this.chunkMeta(lo, hi)) {
        if (m.seq_from + m.n - 1 > hi) throw new Error(`chunk ${m.seq_from} reaches past the compaction window ${lo}..${hi}`);
        let list = byVar.get(m.var);
        if (!list) byVar.set(m.var, (list = []));
        list.push(m.seq_from, m.n);
        samples += m.n;
        chunksBefore++;
      }
      const bytesBefore = this.st.bytesIn.get(lo, hi) as number;
      let seq = lo;
      let chunksAfter = 0;
      let bytesAfter = 0;
      const accTs = new Float64Array(MAX_CHUNK_SAMPLES);
      const accV = new Float64Array(MAX_CHUNK_SAMPLES);
      for (const [varId, list] of byVar) {
        let acc = 0;
        const emit = (): void => {
          bytesAfter += this.store.write(seq - STAGE_OFFSET, varId, accTs.subarray(0, acc), accV.subarray(0, acc)).length;
          seq += acc;
          chunksAfter++;
          acc = 0;
        };
        for (let k = 0; k < list.length; k += 2) {
          const seqFrom = list[k];
          const n = list[k + 1];
          if (acc === 0 && n >= MAX_CHUNK_SAMPLES / 2) {
            bytesAfter += this.st.copyChunk.run(seq - STAGE_OFFSET, seqFrom).changes === 1 ? (this.st.chunkBytes.get(seqFrom) as number) : 0;
            seq += n;
            chunksAfter++;
            continue;
          }
          const d = decodeChunk(this.st.chunkData.get(seqFrom) as Buffer);
          if (d.ts.length !== n) throw new Error(`chunk ${seqFrom} decodes to ${d.ts.length} samples, not ${n}`);
          let i = 0;
          while (i < n) {
            const take = Math.min(n - i, MAX_CHUNK_SAMPLES - acc);
            accTs.set(d.ts.subarray(i, i + take), acc);
            accV.set(d.values.subarray(i, i + take), acc);
            acc += take;
            i += take;
            if (acc === MAX_CHUNK_SAMPLES) emit();
          }
        }
        if (acc > 0) emit();
      }
      if (seq - lo !== samples) throw new Error(`compaction of ${lo}..${hi} wrote ${seq - lo} samples, read ${samples}`);
      this.st.deleteWindow.run(lo, hi);
      const moved = this.st.unstage.run().changes;
      if (moved !== chunksAfter) throw new Error(`compaction of ${lo}..${hi} staged ${chunksAfter} chunks, moved ${moved}`);
      return { samples, chunksBefore, chunksAfter, bytesBefore, bytesAfter, newHi: seq - 1 };
    }).immediate();
  }
}
