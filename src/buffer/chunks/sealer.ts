import type { Statement } from 'better-sqlite3';
import type { Holds } from '../holds.js';
import { fromRowValue } from '../row-value.js';
import { decodeChunkInto, type DecodedChunk } from './codec.js';
import { chunkRecordBytes, leafCapacity, leafCellBytes, packingOrder } from './page-packing.js';
import { MAX_CHUNK_SAMPLES, type ChunkStore, type EncodedChunk } from './store.js';
import type { StoreOwner } from '../../store/store.js';

/**
 * The sealer: turns the oldest rows into per-variable chunks (a seal job), and merges a variable's
 * small chunks (a compaction job), a seq range at a time, in slices.
 *
 * Keeps (src/buffer/README.md):
 *  B2  A job's only write is one transaction: the new chunks are written and what they replace
 *      (rows, or the window's old chunks) is deleted together, with the sample count checked
 *      before the commit, so a power cut leaves either all of the old form or all of the new.
 *  B3  A job renumbers only a range that nothing holds, and only into the same range: the samples
 *      of [lo, hi] get the seqs lo, lo+1, … grouped per variable, the chunks in the order that
 *      fills SQLite's leaf pages (page-packing.ts). Nothing reads meaning into the order of unheld
 *      seqs (B3 is about held ones), so inside a range one variable's chunks need not follow each
 *      other; each chunk keeps its variable's samples in their order.
 *  B7  A job reads and encodes in slices that end by a deadline (the schedule's), holding its
 *      work in memory between them, and commits in one more slice. Between slices anything may
 *      happen to the range, so the commit first re-checks, in the same synchronous turn: nothing
 *      holds the range (Holds.anyWithin, the ledger included), and the range still holds what the
 *      job read (a seal: the same number of rows, which can only have left; a compaction: the same
 *      chunks by count, seq sum, sample sum and byte sum, and no row). Otherwise the job is
 *      discarded, having written nothing.
 *
 * Its own rules:
 *  J1  Rows below `meta.sealed_upto` (a chunk turned back into rows for the sync path, held rows
 *      skipped) are sealed again only by a reseal job, which the schedule starts once no claim
 *      unsealed anything for seal_after (seal-schedule.ts), so sealing and unsealing cannot chase
 *      each other. A reseal range holds rows only (no chunk inside it), so its new chunks take seqs
 *      of that range alone; it never moves `sealed_upto` back.
 *  J2  Each chunk decodes bit-exact before it is stored (chunks/codec.ts C3).
 */

/** What a job changed, for the counts (Tally) and the logs. */
export interface JobResult {
  /** Samples of the range (rows sealed, or chunk samples rewritten). */
  samples: number;
  /** Rows it replaced by chunks (a seal job). */
  rows: number;
  chunksBefore: number;
  chunksAfter: number;
  bytesBefore: number;
  bytesAfter: number;
  /** The last seq the range's samples use now (≤ hi: gaps left by deletions close up in a compaction). */
  newHi: number;
}

export type StepOutcome = 'more' | 'done' | 'discarded';

/** A seal or compaction job: `step` works until `deadline` (performance.now() ms) and says how it stands. */
export interface ChunkJob {
  readonly kind: 'seal' | 'compact';
  readonly lo: number;
  readonly hi: number;
  /** Set once the job is done. */
  readonly result: JobResult | null;
  /** Why it was discarded, once it was. */
  readonly discardedBecause: string | null;
  /**
   * One slice. `canCommit(estimateMs)` says whether the commit may start now: the schedule lets a
   * commit that would overrun the slice wait for the start of the next one.
   */
  step(deadline: number, canCommit: (workBytes: number) => boolean): StepOutcome;
  /** Work of its commit in bytes written (for the schedule's cost model). */
  readonly commitWork: number;
  /** A compaction window that cannot grow any more (its size, a hold or a row bounds it). */
  readonly full: boolean;
  /** Where it stands (logs). */
  readonly stage: string;
}

/** Called around a job's commit transaction: the kill-point log before it, the cost model after. */
export interface CommitHooks {
  before(job: ChunkJob): void;
  after(job: ChunkJob, ms: number): void;
}

/** Metadata of a chunk, without its data. */
export interface ChunkMeta {
  seq_from: number;
  var: number;
  n: number;
  bytes: number;
}

/** Rows read per statement step of a seal job (the deadline is checked between them). */
const READ_ROWS = 2_048;
/** Approximate bytes a row takes in its b-tree page (26 on average: bench/buffer-footprint.ts). */
export const ROW_BYTES = 26;

export class Sealer {
  readonly st: {
    rowsPage: Statement;
    rowsIn: Statement;
    deleteRows: Statement;
    setUpto: Statement;
    getUpto: Statement;
    chunkMeta: Statement;
    chunkData: Statement;
    chunkRow: Statement;
    deleteWindow: Statement;
    fingerprint: Statement;
  };

  readonly pageSize: number;
  /** Decode arrays of compaction: one chunk at a time (decodeChunkInto), so no fresh arrays per chunk (bench/memory.ts). */
  readonly decoded: DecodedChunk = { ts: new Float64Array(MAX_CHUNK_SAMPLES), values: new Float64Array(MAX_CHUNK_SAMPLES) };
  /** One chunk's samples being built (seal and compaction). */
  readonly chunkTs = new Float64Array(MAX_CHUNK_SAMPLES);
  readonly chunkValues = new Float64Array(MAX_CHUNK_SAMPLES);
  hooks: CommitHooks = { before: () => undefined, after: () => undefined };
  /** A seal job's rows: grown to the largest range, then reused (20 bytes a row plus 4 for the order). */
  private rowScratch = { var: new Int32Array(0), ts: new Float64Array(0), values: new Float64Array(0), order: new Int32Array(0) };

  constructor(
    readonly db: StoreOwner,
    readonly store: ChunkStore,
    readonly holds: Holds,
  ) {
    this.pageSize = db.pragma('page_size', { simple: true }) as number;
    this.st = {
      rowsPage: db.prepare('SELECT seq, var, ts, value FROM samples WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?').raw(true),
      rowsIn: db.prepare('SELECT count(*) FROM samples WHERE seq >= ? AND seq <= ?').pluck(true),
      deleteRows: db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?'),
      setUpto: db.prepare("INSERT INTO meta (key, value) VALUES ('sealed_upto', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"),
      getUpto: db.prepare("SELECT value FROM meta WHERE key = 'sealed_upto'").pluck(true),
      chunkMeta: db.prepare('SELECT seq_from, var, n, length(data) AS bytes FROM chunks WHERE seq_from >= ? AND seq_from <= ? ORDER BY seq_from'),
      chunkData: db.prepare('SELECT data FROM chunks WHERE seq_from = ?').pluck(true),
      chunkRow: db.prepare('SELECT var, n, ts_min, ts_max, data FROM chunks WHERE seq_from = ?'),
      deleteWindow: db.prepare('DELETE FROM chunks WHERE seq_from >= ? AND seq_from <= ?'),
      fingerprint: db.prepare('SELECT count(*) AS chunks, coalesce(sum(seq_from), 0) AS seqs, coalesce(sum(n), 0) AS samples, coalesce(sum(length(data)), 0) AS bytes FROM chunks WHERE seq_from >= ? AND seq_from <= ?'),
    };
  }

  /** Highest seq below which rows are sealed only by a reseal job (J1). */
  sealedUpto(): number {
    return Number((this.st.getUpto.get() as string | undefined) ?? 0);
  }

  /** Moves `sealed_upto` past rows that are held and will stay rows (J1); no rows change. */
  skipTo(seq: number): void {
    if (seq > this.sealedUpto()) this.db.write('moving sealed_upto past held rows', () => this.st.setUpto.run(String(seq)));
  }

  /** Chunk metadata (no data) with seq_from in [from, to], streamed in seq order (a backlog can hold millions). */
  iterateChunkMeta(from: number, to: number): IterableIterator<ChunkMeta> {
    return this.st.chunkMeta.iterate(from, to) as IterableIterator<ChunkMeta>;
  }

  /** A job sealing every row with a seq in [lo, hi] (the caller chose a range nothing holds). */
  sealJob(lo: number, hi: number): ChunkJob {
    return new SealJob(this, lo, hi);
  }

  /** A job merging the chunks `chunks` of the window [lo, hi] (whole chunks, no rows, nothing held). */
  compactJob(lo: number, hi: number, chunks: readonly ChunkMeta[], full: boolean): ChunkJob {
    return new CompactJob(this, lo, hi, chunks, full);
  }

  /** Runs `write` as the job's commit transaction, between the hooks. */
  commitTransaction<T>(job: ChunkJob, write: () => T): T {
    this.hooks.before(job);
    const started = performance.now();
    const r = this.db.write(`${job.kind} commit`, write);
    this.hooks.after(job, performance.now() - started);
    return r;
  }

  /** The seal job's row arrays, grown to hold `rows` rows. */
  rows(rows: number): { var: Int32Array; ts: Float64Array; values: Float64Array; order: Int32Array } {
    if (this.rowScratch.ts.length < rows) this.rowScratch = { var: new Int32Array(rows), ts: new Float64Array(rows), values: new Float64Array(rows), order: new Int32Array(rows) };
    return this.rowScratch;
  }

  /**
   * Writes `chunks` at lo, lo+1, … in the order that packs SQLite's leaf pages (page-packing.ts);
   * inside the caller's transaction. Returns the bytes written and the last seq used.
   */
  writePacked(lo: number, chunks: readonly EncodedChunk[]): { bytes: number; newHi: number } {
    // A cell's size depends on its key's varint, and the key (seq) of each chunk depends on the
    // order chosen here: size them all with the range's last seq, the longest varint (a byte or two
    // more than some cells take). Sized with their index in the range instead, the cells that were
    // packed to fill a page exactly spilled into the next, and the next-fit order lost its bins:
    // 3-16 % more leaf pages on bench/buffer-footprint.ts's small corpora (up to 0.18 B/sample).
    let last = lo - 1;
    for (const c of chunks) last += c.n;
    const sizes = chunks.map((c) => leafCellBytes(chunkRecordBytes({ ...c, dataBytes: c.data.length }), last, this.pageSize));
    let seq = lo;
    let bytes = 0;
    for (const i of packingOrder(sizes, leafCapacity(this.pageSize))) {
      this.store.insert(seq, chunks[i]);
      seq += chunks[i].n;
      bytes += chunks[i].data.length;
    }
    return { bytes, newHi: seq - 1 };
  }
}

/**
 * Seals the rows of [lo, hi]: reads them (slices), encodes one variable's rows at a time into
 * chunks of up to MAX_CHUNK_SAMPLES (slices), then replaces the rows by the chunks in one
 * transaction (B2, B7).
 *
 * Memory: the rows are read into typed arrays kept for the next job (20 bytes a row, plus 4 for the
 * order by variable), not into per-variable JS arrays, which the young generation promoted into the
 * old one: ~5 MB of garbage per 100,000 rows (bench/memory.ts).
 */
class SealJob implements ChunkJob {
  readonly kind = 'seal' as const;
  readonly full = false;
  result: JobResult | null = null;
  discardedBecause: string | null = null;
  private phase: 'read' | 'encode' | 'commit' = 'read';
  private readUpto: number;
  private count = 0;
  private readonly index = new Map<number, number>();
  private readonly varIds: number[] = [];
  private readonly counts: number[] = [];
  private starts: number[] = [];
  private encodeVar = 0;
  private encodeAt = 0;
  private readonly out: EncodedChunk[] = [];
  private outBytes = 0;
  private readonly scratch: ReturnType<Sealer['rows']>;

  constructor(
    private readonly s: Sealer,
    readonly lo: number,
    readonly hi: number,
  ) {
    this.readUpto = lo - 1;
    this.scratch = s.rows(hi - lo + 1);
  }

  get commitWork(): number {
    return this.count * ROW_BYTES + this.outBytes;
  }

  get stage(): string {
    return this.phase === 'read' ? `read ${this.count} rows` : this.phase === 'encode' ? `encode variable ${this.encodeVar}/${this.varIds.length}` : `commit ${this.count} rows, ${this.out.length} chunks`;
  }

  step(deadline: number, canCommit: (workBytes: number) => boolean): StepOutcome {
    for (let first = true; performance.now() < deadline; first = false) {
      if (this.phase === 'read') this.read();
      else if (this.phase === 'encode') this.encodeOne();
      else {
        // A commit that would overrun this slice waits for the start of the next one.
        if (!first && !canCommit(this.commitWork)) return 'more';
        return this.commit();
      }
    }
    return 'more';
  }

  private read(): void {
    const rows = this.s.st.rowsPage.all(this.readUpto, this.hi, READ_ROWS) as Array<[number, number, number, number | Buffer]>;
    const sc = this.scratch;
    for (const [seq, v, t, value] of rows) {
      let k = this.index.get(v);
      if (k === undefined) {
        this.index.set(v, (k = this.varIds.length));
        this.varIds.push(v);
        this.counts.push(0);
      }
      this.counts[k]++;
      sc.var[this.count] = k;
      sc.ts[this.count] = t;
      sc.values[this.count] = fromRowValue(value);
      this.count++;
      this.readUpto = seq;
    }
    if (rows.length < READ_ROWS) {
      // Rows grouped by variable, each variable's in seq order (a stable counting sort).
      const next = new Array<number>(this.varIds.length);
      this.starts = new Array<number>(this.varIds.length);
      for (let k = 0, at = 0; k < this.varIds.length; k++) {
        next[k] = this.starts[k] = at;
        at += this.counts[k];
      }
      for (let i = 0; i < this.count; i++) sc.order[next[sc.var[i]]++] = i;
      this.phase = this.count === 0 ? 'commit' : 'encode';
    }
  }

  /** Encodes the next chunk of rows: a variable's rows in full chunks, then the rest, in their order. */
  private encodeOne(): void {
    const k = this.encodeVar;
    const n = this.counts[k];
    const from = this.starts[k];
    const sc = this.scratch;
    const i = this.encodeAt;
    const m = Math.min(n - i, MAX_CHUNK_SAMPLES);
    for (let j = 0; j < m; j++) {
      const r = sc.order[from + i + j];
      this.s.chunkTs[j] = sc.ts[r];
      this.s.chunkValues[j] = sc.values[r];
    }
    const c = this.s.store.encode(this.varIds[k], this.s.chunkTs.subarray(0, m), this.s.chunkValues.subarray(0, m));
    this.out.push(c);
    this.outBytes += c.data.length;
    this.encodeAt += m;
    if (this.encodeAt >= n) {
      this.encodeVar++;
      this.encodeAt = 0;
    }
    if (this.encodeVar >= this.varIds.length) this.phase = 'commit';
  }

  private commit(): StepOutcome {
    const s = this.s;
    if (s.holds.anyWithin(this.lo, this.hi)) return this.discard('a sender took part of the range while it was being sealed');
    const { lo, hi } = this;
    const result = s.commitTransaction(this, (): JobResult | string => {
        // Rows can only leave the range (acknowledged, dropped, set aside), never come back: the
        // same number means the same rows.
        const rowsNow = s.st.rowsIn.get(lo, hi) as number;
        if (rowsNow !== this.count) return `the range holds ${rowsNow} rows, ${this.count} were read`;
        const written = s.writePacked(lo, this.out);
        const deleted = s.st.deleteRows.run(lo, hi).changes;
        if (deleted !== this.count) throw new Error(`sealing ${lo}..${hi} encoded ${this.count} rows but would delete ${deleted}`);
        if (hi > s.sealedUpto()) s.st.setUpto.run(String(hi));
        return { samples: this.count, rows: this.count, chunksBefore: 0, chunksAfter: this.out.length, bytesBefore: 0, bytesAfter: written.bytes, newHi: hi };
    });
    if (typeof result === 'string') return this.discard(result);
    this.result = result;
    return 'done';
  }

  private discard(why: string): StepOutcome {
    this.discardedBecause = why;
    return 'discarded';
  }
}

/** A compaction carries a chunk over as it is when it holds at least this many samples and nothing of its variable is pending. */
const CARRY_SAMPLES = MAX_CHUNK_SAMPLES / 2;

/**
 * Whether a compaction carries a chunk of `n` samples over as it is (no decoding), `left` being
 * its variable's samples in the window from this chunk on and nothing of them pending: a chunk at
 * least half full, unless it and what follows it fit one chunk (a burst's merged chunk and the
 * short one its last sealing range left: two chunks where one holds both, for good); the last one
 * has nothing to join.
 */
function carriesOver(pending: number, n: number, left: number): boolean {
  return pending === 0 && n >= CARRY_SAMPLES && (left > MAX_CHUNK_SAMPLES || left === n);
}

/**
 * How many chunks a compaction turns one variable's chunks of `sizes` samples (in seq order) into:
 * the cuts of CompactJob.mergeOne, counted without decoding (the schedule's "worth it" test, which
 * must not expect a merge to save chunks that carrying over keeps).
 */
export function mergedChunkCount(sizes: readonly number[]): number {
  let left = 0;
  for (const n of sizes) left += n;
  let out = 0;
  let acc = 0;
  let target = 0;
  for (const n of sizes) {
    if (carriesOver(acc, n, left)) {
      out++;
      left -= n;
      continue;
    }
    for (let i = 0; i < n; ) {
      if (acc === 0) target = Math.ceil(left / Math.ceil(left / MAX_CHUNK_SAMPLES));
      const take = Math.min(n - i, target - acc);
      acc += take;
      i += take;
      if (acc === target) {
        out++;
        left -= acc;
        acc = 0;
      }
    }
  }
  return acc > 0 ? out + 1 : out;
}

/**
 * Merges the chunks of a window into per-variable chunks of up to MAX_CHUNK_SAMPLES: decodes and
 * re-encodes one variable at a time (slices), then replaces the window's chunks in one transaction
 * (B2, B7). Equal cuts: k chunks of ~left/k samples rather than full ones and a short remainder, so
 * a variable's chunks are alike in size and keep packing well in the order of their samples. A
 * chunk at least half full is carried over as it is (no decoding) when nothing of its variable is
 * pending, so compacted windows cost little to pass through again.
 */
class CompactJob implements ChunkJob {
  readonly kind = 'compact' as const;
  result: JobResult | null = null;
  discardedBecause: string | null = null;
  private readonly byVar: Array<[number, Array<{ seq_from: number; n: number }>]>;
  private readonly expect: { chunks: number; seqs: number; samples: number; bytes: number };
  /** Where the merge stands: the variable, its next chunk, the samples of its chunk being built. */
  private nextVar = 0;
  private nextChunk = 0;
  private left = 0;
  private acc = 0;
  private target = 0;
  private readonly out: EncodedChunk[] = [];
  private outBytes = 0;

  constructor(
    private readonly s: Sealer,
    readonly lo: number,
    readonly hi: number,
    chunks: readonly ChunkMeta[],
    readonly full: boolean,
  ) {
    const byVar = new Map<number, Array<{ seq_from: number; n: number }>>();
    const expect = { chunks: 0, seqs: 0, samples: 0, bytes: 0 };
    for (const m of chunks) {
      let list = byVar.get(m.var);
      if (!list) byVar.set(m.var, (list = []));
      list.push({ seq_from: m.seq_from, n: m.n });
      expect.chunks++;
      expect.seqs += m.seq_from;
      expect.samples += m.n;
      expect.bytes += m.bytes;
    }
    this.byVar = [...byVar.entries()];
    this.expect = expect;
  }

  get commitWork(): number {
    return this.expect.bytes + this.outBytes;
  }

  get stage(): string {
    return this.nextVar < this.byVar.length ? `merge variable ${this.nextVar}/${this.byVar.length}` : `commit ${this.expect.chunks} -> ${this.out.length} chunks, ${this.expect.bytes} bytes`;
  }

  step(deadline: number, canCommit: (workBytes: number) => boolean): StepOutcome {
    for (let first = true; performance.now() < deadline; first = false) {
      if (this.nextVar < this.byVar.length) {
        if (!this.mergeOne()) return this.discard('a chunk of the window changed while it was being merged');
        continue;
      }
      // A commit that would overrun this slice waits for the start of the next one.
      if (!first && !canCommit(this.commitWork)) return 'more';
      return this.commit();
    }
    return 'more';
  }

  /**
   * Takes the next chunk of the current variable into the chunk being built (one chunk of at most
   * MAX_CHUNK_SAMPLES samples per call, so a slice can end between any two).
   */
  private mergeOne(): boolean {
    const s = this.s;
    const [varId, list] = this.byVar[this.nextVar];
    if (this.nextChunk === 0) {
      this.left = 0;
      for (const c of list) this.left += c.n;
      this.acc = 0;
    }
    const { seq_from, n } = list[this.nextChunk++];
    if (carriesOver(this.acc, n, this.left)) {
      const row = s.st.chunkRow.get(seq_from) as EncodedChunk | undefined;
      if (!row || row.n !== n || row.var !== varId) return false;
      this.out.push(row);
      this.outBytes += row.data.length;
      this.left -= n;
    } else {
      const data = s.st.chunkData.get(seq_from) as Buffer | undefined;
      if (!data) return false;
      const d = decodeChunkInto(data, s.decoded);
      if (d.ts.length !== n) return false;
      let i = 0;
      while (i < n) {
        if (this.acc === 0) this.target = Math.ceil(this.left / Math.ceil(this.left / MAX_CHUNK_SAMPLES));
        const take = Math.min(n - i, this.target - this.acc);
        s.chunkTs.set(d.ts.subarray(i, i + take), this.acc);
        s.chunkValues.set(d.values.subarray(i, i + take), this.acc);
        this.acc += take;
        i += take;
        if (this.acc === this.target) this.emit(varId);
      }
    }
    if (this.nextChunk >= list.length) {
      if (this.acc > 0) this.emit(varId);
      this.nextVar++;
      this.nextChunk = 0;
    }
    return true;
  }

  private emit(varId: number): void {
    const s = this.s;
    const c = s.store.encode(varId, s.chunkTs.subarray(0, this.acc), s.chunkValues.subarray(0, this.acc));
    this.out.push(c);
    this.outBytes += c.data.length;
    this.left -= this.acc;
    this.acc = 0;
  }

  private commit(): StepOutcome {
    const s = this.s;
    const { lo, hi } = this;
    if (s.holds.anyWithin(lo, hi)) return this.discard('a sender took part of the window while it was being merged');
    const result = s.commitTransaction(this, (): JobResult | string => {
        const now = s.st.fingerprint.get(lo, hi) as { chunks: number; seqs: number; samples: number; bytes: number };
        const e = this.expect;
        if (now.chunks !== e.chunks || now.seqs !== e.seqs || now.samples !== e.samples || now.bytes !== e.bytes) return 'the window\'s chunks changed while they were being merged';
        if ((s.st.rowsIn.get(lo, hi) as number) > 0) return 'the window holds rows';
        let written = 0;
        for (const c of this.out) written += c.n;
        if (written !== e.samples) throw new Error(`compaction of ${lo}..${hi} built ${written} samples, read ${e.samples}`);
        s.st.deleteWindow.run(lo, hi);
        const w = s.writePacked(lo, this.out);
        return { samples: e.samples, rows: 0, chunksBefore: e.chunks, chunksAfter: this.out.length, bytesBefore: e.bytes, bytesAfter: w.bytes, newHi: w.newHi };
    });
    if (typeof result === 'string') return this.discard(result);
    this.result = result;
    return 'done';
  }

  private discard(why: string): StepOutcome {
    this.discardedBecause = why;
    return 'discarded';
  }
}
