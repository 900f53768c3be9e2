import type { Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';
import type { Holds } from '../holds.js';
import type { MaintenanceTask } from '../maintenance.js';
import type { Tally } from '../tally.js';
import { CommitCost } from './commit-cost.js';
import { mergedChunkCount, ROW_BYTES, type ChunkJob, type ChunkMeta, type Sealer } from './sealer.js';
import type { ChunkStore } from './store.js';
import type { StoreOwner } from '../../store/store.js';

/**
 * The seal schedule: which rows to seal and which chunks to merge next, as jobs the maintenance
 * schedule (maintenance.ts) runs a slice at a time, never inside a commit (src/buffer/README.md B7).
 *
 * Keeps:
 *  B3  A job's range is chosen outside every hold (Holds.all: claims, reservations, sync-only and
 *      ledger ranges) and re-checked at its commit (sealer.ts).
 *  B7  A job's commit is sized to fit a slice: the duration of past commits is measured (a fixed
 *      term and a cost per byte written, per kind of job: commit-cost.ts), and a sealing range or
 *      compaction window is cut so that its commit is expected to take at most COMMIT_SHARE of a
 *      slice. One job at a time; `sealNow` and `compactNow` (tests,
 *      benchmarks) drop a job in progress and run whole ranges synchronously.
 *
 * When: rows committed at least seal_after ago are sealed once a full range of them is there, or
 * as a partial range when the oldest have waited twice seal_after or nothing was committed for
 * seal_after (an idle gateway seals its whole tail seal_after after its last sample). A variable's small chunks are merged (compaction) inside windows of up to
 * compact_samples samples: a window bounded by its size, a hold or a row when that saves a quarter
 * of its chunks (and then the cursor moves past it for good in this process); the newest one, while
 * it can still grow (rows waiting to be sealed are more than a quarter of it, or a full sealing
 * range waits), only when that cuts its chunks to a quarter, so it is not redone after every seal,
 * and once few rows wait when that saves a quarter. The cursor moves past the newest window only
 * once it could not take the rows that wait within the largest window: until then what is sealed
 * after it joins it in a later merge, so a burst's last sealing ranges do not stay one more small
 * chunk per variable beside the merged ones (bench/buffer-footprint.ts, burst + idle), while a
 * busy gateway starts a new window rather than rewriting a large one after every seal.
 * When sealing is due on every turn (a v1 backlog converted in place, heavy ingest), compaction
 * takes every other turn, or small chunks would pile up until the backlog is sealed.
 */

/** Share of a slice a job's commit is expected to take at most. */
const COMMIT_SHARE = 0.7;
/** Starting cost of a commit: a 5 ms sync plus 25 MB/s (a busy disk); measured after. */
const INITIAL_COST = { fixedMs: 5, msPerByte: 4e-5 };
/** Smallest sealing range the cost model may ask for (fewer rows make too many tiny chunks); seal_rows caps it. */
const MIN_SEAL_ROWS = 2_000;
/**
 * Least chunk bytes a compaction window may hold, whatever the cost model says: commits measured
 * on a busy disk (a sync of 2 to 66 ms for the same 60 kB) can fit a line that leaves windows of a
 * few kilobytes, and windows that small are passed for good as a few hundred samples per variable
 * (their headers and first values again). 64 kB is about 40,000 samples and a commit of a few ms
 * plus its sync, like the least sealing range (MIN_SEAL_ROWS rows, ~80 kB of rows).
 */
const MIN_COMPACT_BYTES = 64 * 1024;
/** After a look that found no job to start, the next look waits this long. */
const REST_MS = 1_000;
/** After a failed job (a full disk, a busy file), jobs wait this long. */
const RETRY_AFTER_MS = 5_000;
/**
 * A compaction pass goes over the windows it passed again (from the oldest chunk) at most this
 * often, once chunks behind it changed (an import range finished, a claim unsealed, set-aside)...
 */
const PASS_AFTER_CHANGE_MS = 60_000;
/** ...or once this long passed since the last pass began and chunks were sealed meanwhile. */
const PASS_EVERY_MS = 10 * 60_000;

export interface SealScheduleOptions {
  sealAfterMs: number;
  sealRows: number;
  compactSamples: number;
  sliceMs: number;
  logger: Logger;
  metrics: Metrics;
  clock: Clock;
  sealer: Sealer;
  store: ChunkStore;
  holds: Holds;
  tally: Tally;
  /** The last committed seq. */
  lastSeq: () => number;
  /** After a job changed the file (gauges, listeners). */
  changed: () => void;
  /** After a job's commit (a checkpoint becomes due). */
  wrote: () => void;
}

export class SealSchedule implements MaintenanceTask {
  readonly name = 'chunks';
  private sealedUpto: number;
  /** One mark per second of commits: the last seq committed then (for seal_after). */
  private marks: Array<{ seq: number; at: number }> = [];
  /** The last turn sealed: compaction goes first on the next one if it has work. */
  private compactTurn = false;
  /** Seqs up to here were looked at by compaction and need none; in memory only. */
  private compactCursor = 0;
  /** Whether compaction may have work (chunks were written since it last found none). */
  private compactPending: boolean;
  /** Where the next reseal looks for rows below sealed_upto, and when a claim last unsealed (the store's change mark). */
  private resealCursor = 0;
  private unsealSeen = { changes: 0, at: 0 };
  private resealMaybe = true;
  /** The current compaction pass: when it began (monotonic ms), the store's change mark then, whether a seal came since. */
  private pass = { startedAt: 0, changes: 0, sealedSince: false };
  private job: ChunkJob | null = null;
  private jobStarted = 0;
  private retryAt = 0;
  /** Until then (performance.now() ms) no job is looked for: the last look found none to start. */
  private restUntil = 0;
  /** Measured cost of the commits of seal jobs and of compaction jobs. */
  readonly cost = { seal: new CommitCost(INITIAL_COST), compact: new CommitCost(INITIAL_COST) };
  private readonly st: { firstRowAfter: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: SealScheduleOptions,
  ) {
    this.st = { firstRowAfter: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT 1').pluck(true) };
    this.sealedUpto = o.sealer.sealedUpto();
    this.compactPending = o.tally.chunks > 1;
    // Kill points of the crash harness (scripts/lib/crash-harness.ts): logged right before a job's
    // commit transaction; and the cost model, from each commit's duration.
    o.sealer.hooks = {
      before: (job) => o.logger.debug({ event: `buffer_${job.kind}_committing`, seq_from: job.lo, seq_to: job.hi }, job.kind === 'seal' ? 'committing sealed chunks' : 'committing merged chunks'),
      after: (job, ms) => {
        this.cost[job.kind].record(job.commitWork, ms);
        o.wrote();
      },
    };
    // Rows already in the file were committed before this start: old enough to seal (this is also
    // how a v1 file's backlog is converted in place, a range at a time).
    const last = o.lastSeq();
    if (last > this.sealedUpto) this.marks.push({ seq: last, at: o.clock.monotonic() - 2 * o.sealAfterMs - 1 });
  }

  /** After a commit that inserted rows: remembers when seqs up to the last one were committed. */
  committed(): void {
    const now = this.o.clock.monotonic();
    const last = this.marks[this.marks.length - 1];
    const seq = this.o.lastSeq();
    if (last && now - last.at < 1_000) last.seq = seq;
    else this.marks.push({ seq, at: now });
  }

  // ---------------------------------------------------------------- MaintenanceTask

  describe(): string {
    return this.job ? `${this.job.kind} ${this.job.lo}..${this.job.hi}: ${this.job.stage}` : 'no job';
  }

  due(): boolean {
    if (this.job) return true;
    if (this.o.clock.monotonic() < this.retryAt || performance.now() < this.restUntil) return false;
    return this.eligible(false) > this.sealedUpto || this.compactPending || this.newPassDue() || this.resealDue();
  }

  /** Rows may wait below sealed_upto (a claim unsealed, held rows were skipped, or a restart) and no claim unsealed for seal_after. */
  private resealDue(): boolean {
    const changes = this.o.store.changes;
    const now = this.o.clock.monotonic();
    if (changes !== this.unsealSeen.changes) {
      this.unsealSeen = { changes, at: now };
      this.resealMaybe = true;
    }
    if (!this.resealMaybe || this.o.tally.rows === 0) return false;
    return now - this.unsealSeen.at >= this.o.sealAfterMs;
  }

  /**
   * Whether compaction should go over the windows it passed again: the cursor only moves up, so
   * chunks that a finished import range or a claim cut behind it, and windows that a hold or a row
   * bounded when they were passed, would otherwise stay as they are until a restart. Read-only
   * (the metadata of the chunks; a window merges only when worth it), off the ack path (B7).
   */
  private newPassDue(): boolean {
    if (this.o.tally.chunks < 2) return false;
    const since = this.o.clock.monotonic() - this.pass.startedAt;
    return (this.o.store.changes !== this.pass.changes && since >= PASS_AFTER_CHANGE_MS) || (this.pass.sealedSince && since >= PASS_EVERY_MS);
  }

  private startPass(): void {
    this.compactCursor = 0;
    this.compactPending = true;
    this.pass = { startedAt: this.o.clock.monotonic(), changes: this.o.store.changes, sealedSince: false };
  }

  slice(deadline: number): boolean {
    if (!this.job && !this.startJob(deadline)) {
      // Rows are eligible but not yet worth a range (a partial one waits), or the window search
      // ran out of time: look again in a second rather than on every turn.
      if (performance.now() < deadline) this.restUntil = performance.now() + REST_MS;
      return this.due();
    }
    const job = this.job!;
    const canCommit = (work: number) => this.cost[job.kind].expectedMs(work) <= deadline - performance.now();
    let outcome;
    try {
      outcome = job.step(deadline, canCommit);
    } catch (err) {
      this.failed(job, err);
      return false;
    }
    if (outcome === 'more') return true;
    this.job = null;
    if (outcome === 'discarded') this.o.logger.debug({ event: `buffer_${job.kind}_discarded`, seq_from: job.lo, seq_to: job.hi, reason: job.discardedBecause }, 'a maintenance job was discarded: its range changed while it ran');
    else this.apply(job);
    return this.due();
  }

  // ---------------------------------------------------------------- choosing jobs

  /** The newest seq committed at least seal_after ago (or any, with `force`). */
  private eligible(force: boolean): number {
    const now = this.o.clock.monotonic();
    while (this.marks.length > 0 && this.marks[0].seq <= this.sealedUpto) this.marks.shift();
    let eligible = 0;
    for (const m of this.marks) if (force || m.at <= now - this.o.sealAfterMs) eligible = m.seq;
    return eligible;
  }

  /** Rows a sealing range may take so that its commit fits a slice. */
  private sealBudgetRows(): number {
    const bytes = this.cost.seal.budget(this.o.sliceMs * COMMIT_SHARE);
    return Math.min(this.o.sealRows, Math.max(MIN_SEAL_ROWS, Math.floor(bytes / (ROW_BYTES + 2))));
  }

  /**
   * Chunk bytes a compaction window may hold so that its commit (delete + write) fits a slice.
   * Before any compaction commit was measured, the seal's line stands in (measured by then: a
   * burst's rows are sealed first), not the starting guess: a seal costs more per byte than a
   * compaction (it deletes rows, a compaction puts whole overflow pages on the freelist), so it
   * errs on the small side, and the first windows of a small buffer, which are passed for good once
   * merged, are not cut to the guess (bench/buffer-footprint.ts, burst + idle).
   */
  private compactBudgetBytes(): number {
    const cost = this.cost.compact.measured > 0 ? this.cost.compact : this.cost.seal;
    return Math.max(MIN_COMPACT_BYTES, cost.budget(this.o.sliceMs * COMMIT_SHARE) / 2);
  }

  private startJob(deadline: number): boolean {
    if (this.compactTurn && this.startCompaction(this.compactBudgetBytes(), deadline)) {
      this.compactTurn = false;
      return true;
    }
    if (this.startSeal(false, this.sealBudgetRows()) || this.startReseal(this.sealBudgetRows())) {
      this.compactTurn = true;
      return true;
    }
    return this.startCompaction(this.compactBudgetBytes(), deadline);
  }

  /**
   * Rows below sealed_upto left by claims that unsealed a chunk and then let its rows go (the
   * claim took part of them, a call failed): 26 bytes a sample instead of ~1.5, for as long as the
   * sync path does not take them. Sealed again once no claim unsealed anything for seal_after (the
   * sync path is idle or far from them: no chase, sealer J1), a run of rows with no chunk and no
   * hold inside at a time, from the lowest.
   */
  private startReseal(maxRows: number): boolean {
    if (!this.resealDue()) return false;
    const holds = this.o.holds.all(this.resealCursor);
    let lo = this.resealCursor;
    for (let guard = 0; guard < 1_000; guard++) {
      const first = this.st.firstRowAfter.get(lo, this.sealedUpto + 1) as number | undefined;
      if (first === undefined || first === null) {
        // None left below sealed_upto: until a claim unseals again (or held rows are skipped).
        this.resealCursor = 0;
        this.resealMaybe = false;
        return false;
      }
      const held = holds.find((h) => h.from <= first && h.to >= first);
      if (held) {
        lo = held.to;
        continue;
      }
      let hi = Math.min(this.sealedUpto, first + maxRows - 1);
      const chunk = this.o.store.firstAfter(first, hi + 1);
      if (chunk) hi = Math.min(hi, chunk.seq_from - 1);
      const nextHold = holds.find((h) => h.from > first);
      if (nextHold) hi = Math.min(hi, nextHold.from - 1);
      this.resealCursor = hi;
      this.o.logger.debug({ event: 'buffer_seal_started', seq_from: first, seq_to: hi, reseal: true }, 'sealing rows left by a claim into chunks again');
      this.job = this.o.sealer.sealJob(first, hi);
      this.jobStarted = performance.now();
      return true;
    }
    return false;
  }

  /** Starts sealing the next range if one is due; false when none is. */
  private startSeal(force: boolean, maxRows: number): boolean {
    const eligible = this.eligible(force);
    if (eligible <= this.sealedUpto) return false;
    const now = this.o.clock.monotonic();
    // A partial range is sealed once its oldest rows waited twice seal_after, or once nothing was
    // committed for seal_after (all committed rows are eligible: waiting cannot grow the range).
    const newest = this.marks[this.marks.length - 1];
    const overdue = force || (this.marks.length > 0 && this.marks[0].at <= now - 2 * this.o.sealAfterMs) || (newest !== undefined && newest.at <= now - this.o.sealAfterMs);
    const range = this.nextSealRange(eligible, maxRows);
    if (!range) return false;
    if (!overdue && !range.cut && range.hi - range.lo + 1 < maxRows) return false;
    this.o.logger.debug({ event: 'buffer_seal_started', seq_from: range.lo, seq_to: range.hi }, 'sealing rows into chunks');
    this.job = this.o.sealer.sealJob(range.lo, range.hi);
    this.jobStarted = performance.now();
    return true;
  }

  /**
   * The next range to seal: from just above `sealed_upto`, at most `maxRows` seqs, up to
   * `eligible`, stopping before anything held (B3). Held rows at its start are skipped for good
   * (sealer J1: they stay rows). `cut` says a hold ended it early (seal it anyway: waiting cannot grow it).
   */
  private nextSealRange(eligible: number, maxRows: number): { lo: number; hi: number; cut: boolean } | null {
    const holds = this.o.holds.all(this.sealedUpto);
    let lo = this.sealedUpto + 1;
    for (const h of holds) if (h.from <= lo && h.to >= lo) lo = h.to + 1;
    if (lo > eligible) return null;
    if (lo - 1 > this.sealedUpto) {
      this.o.sealer.skipTo(lo - 1);
      this.sealedUpto = lo - 1;
      this.resealMaybe = true;
    }
    let hi = Math.min(eligible, lo + maxRows - 1);
    let cut = false;
    for (const h of holds) {
      if (h.from > lo && h.from <= hi) {
        hi = h.from - 1;
        cut = true;
        break;
      }
    }
    return { lo, hi, cut };
  }

  /**
   * Starts merging the next window worth it; false when there is none, or when looking for one
   * used up the slice (the cursor has moved past the windows not worth it: the next slice goes on).
   */
  private startCompaction(maxBytes: number, deadline = Infinity): boolean {
    if (this.newPassDue()) this.startPass();
    if (!this.compactPending || this.o.tally.chunks < 2) return false;
    for (let i = 0; i < 1_000 && performance.now() < deadline; i++) {
      const w = this.nextCompactWindow(maxBytes);
      if (!w) {
        this.compactPending = false;
        return false;
      }
      const worth = w.full ? w.after < w.chunks.length * 0.75 : w.after * 4 <= w.chunks.length;
      if (!worth) {
        // The newest window waits for more sealed chunks; a bounded one is passed for good.
        if (w.newest) {
          this.compactPending = false;
          return false;
        }
        this.compactCursor = w.hi;
        continue;
      }
      this.o.logger.debug({ event: 'buffer_compact_started', seq_from: w.lo, seq_to: w.hi, chunks: w.chunks.length }, 'merging small chunks');
      this.job = this.o.sealer.compactJob(w.lo, w.hi, w.chunks, w.settled);
      this.jobStarted = performance.now();
      return true;
    }
    return false;
  }

  /**
   * The next compaction window above `compactCursor`: whole chunks only, no rows, no hold, at
   * most `compactSamples` samples and `maxBytes` bytes. `full` says it will not grow much any more
   * (its size, a hold or a row bounds it, or it is the newest and few rows wait to be sealed);
   * `newest` that it reaches the newest sealed samples (nothing bounds it); `settled` that the
   * cursor moves past it once merged (bounded, or the newest with no room for the rows that wait).
   */
  private nextCompactWindow(maxBytes: number): { lo: number; hi: number; chunks: ChunkMeta[]; after: number; full: boolean; newest: boolean; settled: boolean } | null {
    const holds = this.o.holds.all(this.compactCursor);
    let from = this.compactCursor + 1;
    for (let guard = 0; guard < 1_000; guard++) {
      if (from > this.sealedUpto) return null;
      const h = holds.find((x) => x.from <= from && x.to >= from);
      if (h) {
        from = h.to + 1;
        continue;
      }
      // A chunk that starts below `from` and reaches into it is not ours to move (a job range ended inside it).
      const straddle = this.o.store.overlapping(from, from)[0];
      if (straddle && straddle.seq_from < from) {
        from = straddle.seq_from + straddle.n;
        continue;
      }
      let limit = this.sealedUpto;
      const nextHold = holds.find((x) => x.from > from);
      if (nextHold) limit = Math.min(limit, nextHold.from - 1);
      const firstRow = this.st.firstRowAfter.get(from - 1, limit + 1) as number | undefined;
      if (firstRow !== undefined && firstRow !== null) limit = firstRow - 1;
      const perVar = new Map<number, number[]>();
      const chunks: ChunkMeta[] = [];
      let samples = 0;
      let bytes = 0;
      let full = false;
      for (const m of this.o.sealer.iterateChunkMeta(from, limit)) {
        if (m.seq_from + m.n - 1 > limit) break;
        if ((samples + m.n > this.o.compactSamples || bytes + m.bytes > maxBytes) && chunks.length > 0) {
          full = true;
          break;
        }
        chunks.push(m);
        samples += m.n;
        bytes += m.bytes;
        const sizes = perVar.get(m.var);
        if (sizes) sizes.push(m.n);
        else perVar.set(m.var, [m.n]);
      }
      if (chunks.length === 0) {
        // Nothing sealed here: go on at the next chunk past the row or hold that ended it.
        if (limit >= this.sealedUpto) return null;
        const next = this.o.store.firstAfter(limit, this.sealedUpto + 1);
        if (!next) return null;
        from = Math.max(limit + 1, next.seq_from);
        continue;
      }
      let after = 0;
      for (const sizes of perVar.values()) after += mergedChunkCount(sizes);
      const last = chunks[chunks.length - 1];
      // The newest window can still grow while rows wait to be sealed (more than a quarter of it,
      // or a full sealing range is there: a burst's rows being sealed range after range); with
      // few left (an idle gateway, a trickle) it will not grow much, and counts as full. Once it
      // cannot take the rows that wait (at its own bytes per sample) within the largest window, it
      // is passed for good after its merge: a new window starts with them rather than this one
      // being rewritten after every seal. Until then it stays open, so what is sealed after it
      // (the tail of a burst, a trickle) joins it.
      const newest = !full && limit >= this.sealedUpto;
      const rows = this.o.tally.rows;
      const growing = newest && (rows * 4 > samples || this.eligible(false) - this.sealedUpto >= this.sealBudgetRows());
      const large = bytes + (rows * bytes) / samples >= maxBytes || samples + rows >= this.o.compactSamples;
      return { lo: chunks[0].seq_from, hi: last.seq_from + last.n - 1, chunks, after, full: !growing, newest, settled: !newest || large };
    }
    return null;
  }

  // ---------------------------------------------------------------- results

  private apply(job: ChunkJob): void {
    const r = job.result!;
    const t = this.o.tally;
    const ms = performance.now() - this.jobStarted;
    if (job.kind === 'seal') {
      this.sealedUpto = Math.max(this.sealedUpto, job.hi);
      t.rows -= r.rows;
      t.sealed += r.samples;
      t.chunks += r.chunksAfter;
      t.chunkBytes += r.bytesAfter;
      t.chunksSealedTotal += r.chunksAfter;
      this.o.metrics.bufferSealedChunks.inc(r.chunksAfter);
      this.compactPending = true;
      this.pass.sealedSince = true;
      this.restUntil = 0;
      this.o.logger.debug({ event: 'buffer_sealed', seq_from: job.lo, seq_to: job.hi, samples: r.samples, chunks: r.chunksAfter, bytes: r.bytesAfter, ms: Math.round(ms) }, 'sealed rows into chunks');
    } else {
      t.chunks += r.chunksAfter - r.chunksBefore;
      t.chunkBytes += r.bytesAfter - r.bytesBefore;
      // A settled window is passed for good; the newest one is looked at again once more chunks
      // were sealed after it (it reaches sealed_upto: there is nothing beyond it to merge now).
      if (job.full) this.compactCursor = r.newHi;
      else this.compactPending = false;
      this.o.logger.debug({ event: 'buffer_compacted', seq_from: job.lo, seq_to: r.newHi, samples: r.samples, chunks_before: r.chunksBefore, chunks_after: r.chunksAfter, bytes_before: r.bytesBefore, bytes_after: r.bytesAfter, ms: Math.round(ms) }, 'merged small chunks');
    }
    this.o.changed();
  }

  private failed(job: ChunkJob, err: unknown): void {
    this.job = null;
    this.retryAt = this.o.clock.monotonic() + RETRY_AFTER_MS;
    // A full disk or a busy file: the rows stay rows, the chunks stay as they are; tried again later.
    this.o.logger.warn({ err: describeError(err), job: job.kind, seq_from: job.lo, seq_to: job.hi }, job.kind === 'seal' ? 'sealing rows into chunks failed; they stay rows and sealing is retried' : 'merging small chunks failed; they stay as they are and merging is retried');
  }

  // ---------------------------------------------------------------- synchronous runs (tests, benchmarks, tools)

  /** Runs `job` to its end in this call. */
  private runToEnd(job: ChunkJob): void {
    this.job = job;
    this.jobStarted = performance.now();
    try {
      for (;;) {
        const outcome = job.step(Infinity, () => true);
        if (outcome === 'more') continue;
        if (outcome === 'done') this.apply(job);
        break;
      }
    } catch (err) {
      this.failed(job, err);
    } finally {
      this.job = null;
    }
  }

  /** Seals every row not held right now, regardless of age, in ranges of seal_rows. */
  sealNow(): void {
    this.job = null;
    this.marks = [{ seq: this.o.lastSeq(), at: this.o.clock.monotonic() }];
    for (let i = 0; i < 100_000; i++) {
      if (!this.startSeal(true, this.o.sealRows)) break;
      const before = this.sealedUpto;
      this.runToEnd(this.job!);
      if (this.sealedUpto === before) break;
    }
  }

  /** Compacts every window worth it now, in windows of compact_samples. */
  compactNow(): void {
    this.job = null;
    this.startPass();
    for (let i = 0; i < 100_000; i++) {
      if (!this.startCompaction(Infinity)) break;
      this.runToEnd(this.job!);
    }
  }

  /** Drops a job in progress (it has written nothing yet). */
  cancel(): void {
    this.job = null;
  }
}
