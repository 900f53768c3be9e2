import type { Database, Statement } from 'better-sqlite3';
import { decodeChunkInto, type DecodedChunk } from './codec.js';
import { MAX_CHUNK_SAMPLES, type ChunkStore, type EncodedChunk } from './store.js';
import { chunkRecordBytes, leafCapacity, leafCellBytes, packingOrder } from './page-packing.js';
import { fromRowValue } from '../row-value.js';

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
 *      that nothing holds (L2) is rewritten in one transaction into the seqs lo, lo+1, …; the
 *      sample count is checked before commit. Each new chunk holds one variable's samples in their
 *      order; the chunks themselves are placed in the order that fills SQLite's leaf pages
 *      (page-packing.ts), so inside a window one variable's chunks need not follow each other or
 *      their time order (nothing reads meaning into the order of unheld seqs: I3 is about held
 *      ones). A sealing step cuts one chunk per variable, so with many variables its chunks are
 *      small (tens to hundreds of samples) and cost more bytes per sample; compaction makes them up
 *      to MAX_CHUNK_SAMPLES long without holding a large step's rows in memory.
 */

export interface SealResult {
  samples: number;
  chunks: number;
  bytes: number;
}

export interface CompactResult {
  samples: number;
  chunksBefore: number;
  chunksAfter: number;
  bytesBefore: number;
  bytesAfter: number;
  /** The last seq the window's samples use now (≤ hi: gaps left by deletions close up). */
  newHi: number;
}

/** Rows of a sealing step: variable index, timestamp, value, and the row order grouped by variable; one chunk's samples. */
interface SealScratch {
  var: Int32Array;
  ts: Float64Array;
  values: Float64Array;
  order: Int32Array;
  chunkTs: Float64Array;
  chunkValues: Float64Array;
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
    bytesIn: Statement;
    chunkRow: Statement;
    deleteWindow: Statement;
    rowsIn: Statement;
  };

  private readonly pageSize: number;
  /** A sealing step's rows (see seal): grown to the largest step, then reused. */
  private sealScratch: SealScratch = {
    var: new Int32Array(0),
    ts: new Float64Array(0),
    values: new Float64Array(0),
    order: new Int32Array(0),
    chunkTs: new Float64Array(MAX_CHUNK_SAMPLES),
    chunkValues: new Float64Array(MAX_CHUNK_SAMPLES),
  };
  /**
   * Compaction decodes chunk after chunk into these (decodeChunkInto) and is done with each before
   * the next: fresh arrays per chunk are ArrayBuffers only a scavenge frees, and their high-water
   * mark stays in the malloc heap (bench/memory.ts online peak: 150.6–163.1 MB before, 135.5–142.1 after).
   */
  private readonly compactDecoded: DecodedChunk = { ts: new Float64Array(MAX_CHUNK_SAMPLES), values: new Float64Array(MAX_CHUNK_SAMPLES) };

  constructor(
    private readonly db: Database,
    private readonly store: ChunkStore,
  ) {
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
    this.st = {
      rows: db.prepare('SELECT var, ts, value FROM samples WHERE seq >= ? AND seq <= ? ORDER BY seq').raw(true),
      deleteRange: db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?'),
      setUpto: db.prepare("INSERT INTO meta (key, value) VALUES ('sealed_upto', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getUpto: db.prepare("SELECT value FROM meta WHERE key = 'sealed_upto'").pluck(true),
      chunkMeta: db.prepare('SELECT seq_from, var, n FROM chunks WHERE seq_from >= ? AND seq_from <= ? ORDER BY seq_from'),
      chunkData: db.prepare('SELECT data FROM chunks WHERE seq_from = ?').pluck(true),
      bytesIn: db.prepare('SELECT coalesce(sum(length(data)), 0) FROM chunks WHERE seq_from >= ? AND seq_from <= ?').pluck(true),
      chunkRow: db.prepare('SELECT var, n, ts_min, ts_max, data FROM chunks WHERE seq_from = ?'),
      deleteWindow: db.prepare('DELETE FROM chunks WHERE seq_from >= ? AND seq_from <= ?'),
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

  /**
   * Seals every row with a seq in [lo, hi] (L1, L2: the caller checked that nothing holds them).
   *
   * Memory: the step's rows are read into typed arrays kept for the next step (20 bytes a row, plus
   * 4 for the order by variable), not into per-variable JS arrays. Those lived through the whole
   * step, so the young generation's scavenges promoted them (and every copy made while they grew)
   * into the old generation: ~5 MB of garbage per 100,000 rows, which V8 let pile up to several
   * times the live heap before a full GC (bench/memory.ts: tens of MB of RSS).
   */
  seal(lo: number, hi: number): SealResult {
    return this.db.transaction((): SealResult => {
      const s = this.scratch(hi - lo + 1);
      // Dense indexes of the variables, in the order of their first row (the order chunks get seqs in).
      const index = new Map<number, number>();
      const varIds: number[] = [];
      const counts: number[] = [];
      let samples = 0;
      for (const [v, t, value] of this.st.rows.iterate(lo, hi) as Iterable<[number, number, number | Buffer]>) {
        let k = index.get(v);
        if (k === undefined) {
          index.set(v, (k = varIds.length));
          varIds.push(v);
          counts.push(0);
        }
        counts[k]++;
        s.var[samples] = k;
        s.ts[samples] = t;
        s.values[samples] = fromRowValue(value);
        samples++;
      }
      // Rows grouped by variable, each variable's in seq order (a stable counting sort).
      const next = new Array<number>(varIds.length);
      for (let k = 0, at = 0; k < varIds.length; k++) {
        next[k] = at;
        at += counts[k];
      }
      for (let i = 0; i < samples; i++) s.order[next[s.var[i]]++] = i;
      let seq = lo;
      let chunks = 0;
      let bytes = 0;
      let from = 0;
      for (let k = 0; k < varIds.length; k++) {
        const n = counts[k];
        for (let i = 0; i < n; i += MAX_CHUNK_SAMPLES) {
          const m = Math.min(n - i, MAX_CHUNK_SAMPLES);
          for (let j = 0; j < m; j++) {
            const r = s.order[from + i + j];
            s.chunkTs[j] = s.ts[r];
            s.chunkValues[j] = s.values[r];
          }
          bytes += this.store.write(seq, varIds[k], s.chunkTs.subarray(0, m), s.chunkValues.subarray(0, m)).length;
          seq += m;
          chunks++;
        }
        from += n;
      }
      // Every row deleted was encoded above (a typed array drops writes past its end silently).
      const deleted = this.st.deleteRange.run(lo, hi).changes;
      if (deleted !== samples) throw new Error(`sealing ${lo}..${hi} encoded ${samples} rows but would delete ${deleted}`);
      this.st.setUpto.run(String(hi));
      return { samples, chunks, bytes };
    }).immediate();
  }

  /** The sealing scratch, grown to hold `rows` rows (a step has at most its seq count of rows). */
  private scratch(rows: number): SealScratch {
    if (this.sealScratch.ts.length < rows) {
      this.sealScratch = {
        ...this.sealScratch,
        var: new Int32Array(rows),
        ts: new Float64Array(rows),
        values: new Float64Array(rows),
        order: new Int32Array(rows),
      };
    }
    return this.sealScratch;
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
   * caller checked that nothing holds the window), in one transaction. The new chunks are built in
   * memory (the window's encoded bytes: a few MB for DEFAULT_COMPACT_SAMPLES, plus one variable's
   * decoded samples), the old ones deleted, and the new ones written into the freed pages in the
   * order that packs leaf pages full (page-packing.ts): seqs lo, lo+1, … follow that order, so
   * chunks of all variables interleave inside the window (L5).
   * A chunk at least half full is carried over as it is (no decoding) when nothing of its variable
   * is pending, so compacted windows cost little to pass through again.
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
      const out: EncodedChunk[] = [];
      // Sealing and compaction never overlap (each is one synchronous transaction): share its arrays.
      const accTs = this.sealScratch.chunkTs;
      const accV = this.sealScratch.chunkValues;
      for (const [varId, list] of byVar) {
        // Equal cuts: k chunks of ~left/k samples rather than full ones and a short remainder, so
        // a variable's chunks are alike in size and keep packing well in the order of their samples.
        let left = 0;
        for (let k = 1; k < list.length; k += 2) left += list[k];
        let acc = 0;
        let target = 0;
        const emit = (): void => {
          out.push(this.store.encode(varId, accTs.subarray(0, acc), accV.subarray(0, acc)));
          left -= acc;
          acc = 0;
        };
        for (let k = 0; k < list.length; k += 2) {
          const seqFrom = list[k];
          const n = list[k + 1];
          if (acc === 0 && n >= MAX_CHUNK_SAMPLES / 2) {
            out.push(this.st.chunkRow.get(seqFrom) as EncodedChunk);
            left -= n;
            continue;
          }
          const d = decodeChunkInto(this.st.chunkData.get(seqFrom) as Buffer, this.compactDecoded);
          if (d.ts.length !== n) throw new Error(`chunk ${seqFrom} decodes to ${d.ts.length} samples, not ${n}`);
          let i = 0;
          while (i < n) {
            if (acc === 0) target = Math.ceil(left / Math.ceil(left / MAX_CHUNK_SAMPLES));
            const take = Math.min(n - i, target - acc);
            accTs.set(d.ts.subarray(i, i + take), acc);
            accV.set(d.values.subarray(i, i + take), acc);
            acc += take;
            i += take;
            if (acc === target) emit();
          }
        }
        if (acc > 0) emit();
      }
      let written = 0;
      for (const c of out) written += c.n;
      if (written !== samples) throw new Error(`compaction of ${lo}..${hi} built ${written} samples, read ${samples}`);
      this.st.deleteWindow.run(lo, hi);
      const sizes = out.map((c, i) => leafCellBytes(chunkRecordBytes({ ...c, dataBytes: c.data.length }), lo + i, this.pageSize));
      let seq = lo;
      let bytesAfter = 0;
      for (const i of packingOrder(sizes, leafCapacity(this.pageSize))) {
        this.store.insert(seq, out[i]);
        seq += out[i].n;
        bytesAfter += out[i].data.length;
      }
      return { samples, chunksBefore, chunksAfter: out.length, bytesBefore, bytesAfter, newHi: seq - 1 };
    }).immediate();
  }
}
