import type { Statement } from 'better-sqlite3';
import type { Clock } from '../../core/clock.js';
import { MAX_CHUNK_SAMPLES, type ChunkStore } from '../chunks/store.js';
import type { Holds } from '../holds.js';
import type { SetAsideMove } from '../set-aside.js';
import type { Tally } from '../tally.js';
import type { TurnShare } from '../turn-share.js';
import type { SeqRange } from '../types.js';
import type { ImportLedger, LedgerEntry } from './ledger.js';
import type { SampleReader } from './reader.js';
import type { StoreOwner } from '../../store/store.js';

/**
 * Import-job ranges (the backfill, interface §4.7): which seq range the next job takes, holding it
 * while the job runs, and what a finished job removes.
 *
 * Keeps:
 *  B4  A job holds one seq range: recorded in the ledger by the backfill, reserved here with its
 *      sample count; `planJobRange` never offers a held sample.
 *  B5  Jobs take the oldest samples, below every sync claim, and leave the newest `keepNewest`
 *      available samples to the sync path.
 *  B2b A finished job's range leaves the queue (rows deleted, chunk samples removed, partial chunks
 *      re-encoded over their remaining seqs). Items the job rejected move to set_aside in the same
 *      transaction that records the job as `finishing` (`finishJob`), so a crash can never map
 *      the job's item indices onto a range that already lost samples.
 *  B8  Counts change after the commits, and `finishJob` is one method, not a transaction a caller
 *      wraps around several (a rollback of such a wrapper left the counts wrong).
 */
export class ImportRanges {
  private readonly st: { countBetween: Statement; firstAfter: Statement; maxBelow: Statement; maxSeqInRange: Statement; deleteBetween: Statement };
  /** The last range planJobRange chose and how many samples it holds, for reserveRange. */
  private planned: (SeqRange & { count: number; rows: number; sealed: number }) | null = null;

  constructor(
    private readonly db: StoreOwner,
    private readonly o: { clock: Clock; holds: Holds; store: ChunkStore; tally: Tally; ledger: ImportLedger; reader: SampleReader; setAsideMove: SetAsideMove; changed: () => void },
  ) {
    this.st = {
      countBetween: db.prepare('SELECT count(*) FROM samples WHERE seq BETWEEN ? AND ?').pluck(true),
      firstAfter: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT 1').pluck(true),
      maxBelow: db.prepare('SELECT max(seq) FROM samples WHERE seq >= ? AND seq < ?').pluck(true),
      maxSeqInRange: db.prepare('SELECT max(seq) FROM samples WHERE seq BETWEEN ? AND ?').pluck(true),
      deleteBetween: db.prepare('DELETE FROM samples WHERE seq >= ? AND seq <= ?'),
    };
  }

  /** Marks a seq range as held by an import job (the ledger row is the durable record). */
  reserveRange(range: SeqRange): void {
    // planJobRange counted the range while choosing it (in this same turn, nothing changed since):
    // counting 1.3 M rows again held the event loop ~50–100 ms at 100,000 variables.
    const planned = this.planned;
    this.planned = null;
    const count = planned && planned.from === range.from && planned.to === range.to && planned.rows === this.o.tally.rows && planned.sealed === this.o.tally.sealed ? planned.count : this.countIn(range.from, range.to);
    this.o.holds.reserve(range, count);
  }

  /**
   * Shrinks a reserved range to what the file actually holds (the rest returns to the queue).
   * `count`, when the caller knows it, is the number of samples in [from, newTo]: a file's item
   * count is (item i is the i-th sample of the range, B3), which saves counting them again.
   */
  shrinkRange(range: SeqRange, newTo: number, count?: number): void {
    if (this.o.holds.shrink(range, newTo, count ?? this.countIn(range.from, newTo))) this.o.changed();
  }

  /** Ends a reservation without deleting (a failed job returns its samples to the queue). */
  releaseRange(range: SeqRange): void {
    if (this.o.holds.release(range)) this.o.changed();
  }

  /**
   * A finished job: the items it rejected (`rejected`: item index → the service's error) move to
   * set_aside and the ledger entry becomes `finishing`, in one transaction (B2b). Returns how many
   * were set aside. The range's samples are deleted afterwards (`deleteRange`).
   */
  finishJob(entry: LedgerEntry, rejected: ReadonlyMap<number, unknown>): number {
    const refused: Array<{ row: import('../types.js').BufferedRow; error: unknown }> = [];
    if (rejected.size > 0) {
      let i = 0;
      for (const chunk of this.o.reader.readRange(entry.range)) {
        for (const row of chunk) {
          const e = rejected.get(i++);
          if (e !== undefined) refused.push({ row, error: e });
        }
      }
    }
    const now = this.o.clock.now();
    let fromRows = 0;
    let fromChunks = 0;
    // Alone: the counts below change once this has committed (B8).
    this.db.write('finishJob', () => {
      for (const { row, error } of refused) {
        const message = (error as { message?: unknown }).message;
        const moved = this.o.setAsideMove.move([row], { path: 'import', reason: typeof message === 'string' ? message : JSON.stringify(error), detail: error, jobId: entry.jobId ?? undefined }, now);
        fromRows += moved.fromRows;
        fromChunks += moved.fromChunks;
      }
      this.o.ledger.update(entry.id, { state: 'finishing' });
    });
    if (refused.length > 0) {
      this.o.tally.rows -= fromRows;
      if (fromChunks > 0) this.o.tally.resync(this.o.store.totals());
      // The reservation's count shrinks by what left it.
      this.o.holds.shrink(entry.range, entry.range.to, this.countIn(entry.range.from, entry.range.to));
    }
    return refused.length;
  }

  /**
   * Same as `deleteRange`, a transaction of about `sliceMs / 2` per event-loop turn (B7): a job's
   * range is up to 1.3 M rows, and deleting it in one turn held the loop for up to a second at
   * 100,000 samples/s (bench/plant-scale.ts, loop max 973 ms). The range stays reserved until the
   * end, so nothing else takes its samples meanwhile; a stop half-way leaves the ledger entry
   * `finishing`, and the next start deletes the rest. Rejects (deleting nothing more) once
   * `closed()` says the buffer closed.
   */
  async deleteRangeInSlices(range: SeqRange, share: TurnShare, closed: () => boolean): Promise<number> {
    const stopped = () => new Error("the buffer closed while a finished import job's rows were being deleted; the next start deletes the rest");
    let deleted = 0;
    /** Seqs per transaction, sized so that one takes about half a slice (rows may be sparse). */
    let rows = 5_000;
    for (let from = range.from; from <= range.to; ) {
      if (closed()) throw stopped();
      // What a commit or a maintenance slice left of this turn (turn-share.ts), or a later turn.
      const left = share.left();
      if (left < share.sliceMs / 4) {
        await new Promise<void>((resolve) => share.nextTurn(resolve));
        continue;
      }
      const part = Math.max(1_000, Math.round((rows * Math.min(left, share.sliceMs / 2)) / (share.sliceMs / 2)));
      const to = Math.min(range.to, from + part - 1);
      const t0 = performance.now();
      deleted += this.deleteRows(from, to);
      share.ran(t0);
      const ms = performance.now() - t0;
      rows = Math.max(1_000, Math.min(200_000, Math.round((part * share.sliceMs) / 2 / Math.max(ms, 0.1))));
      from = to + 1;
      if (from <= range.to) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (closed()) throw stopped();
    return deleted + this.endDeletion(range);
  }

  /** A finished import job accounted for the range: delete its samples (B2b) and end the reservation. */
  deleteRange(range: SeqRange): number {
    let deleted = 0;
    // In slices so one huge delete does not make one huge transaction.
    const slice = 50_000;
    for (let from = range.from; from <= range.to; from += slice) deleted += this.deleteRows(from, Math.min(range.to, from + slice - 1));
    return deleted + this.endDeletion(range);
  }

  /** Deletes the rows of seqs from..to in a transaction of its own; returns how many. */
  private deleteRows(from: number, to: number): number {
    const n = this.db.write('deleteRange', () => this.st.deleteBetween.run(from, to).changes);
    this.o.tally.rows -= n;
    return n;
  }

  /** After the rows: the range's chunk samples, then the reservation ends. Returns the chunk samples removed. */
  private endDeletion(range: SeqRange): number {
    let removed = 0;
    if (this.o.tally.sealed > 0) {
      removed = this.db.write('deleteRange', () => this.o.store.removeRange(range.from, range.to).removed);
      this.o.tally.resync(this.o.store.totals());
    }
    this.releaseRange(range);
    return removed;
  }

  /**
   * Chooses the seq range of the next import job (B4, B5): the oldest samples that no sender holds
   * and that are not sync-only, at most `maxItems` of them, leaving the newest `keepNewest`
   * available samples to the sync path. The range is contiguous and lies below every sync claim.
   * Null when there is nothing to take.
   */
  planJobRange(maxItems: number, keepNewest: number, available: number): SeqRange | null {
    const want = Math.min(maxItems, available - keepNewest);
    if (want <= 0) return null;
    const lowestClaim = this.o.holds.lowestClaimed();
    const sealed = this.o.tally.sealed > 0;
    for (const gap of this.o.holds.gapsForJobs()) {
      const firstRow = this.st.firstAfter.get(gap.lo, gap.hi) as number | undefined;
      const c = sealed ? this.o.store.firstAfter(gap.lo, gap.hi) : undefined;
      const first = Math.min(firstRow ?? Infinity, c ? Math.max(c.seq_from, gap.lo + 1) : Infinity);
      if (first === Infinity) continue;
      // The sync path is already sending samples this old: leave them to it.
      if (lowestClaim !== null && lowestClaim <= first) return null;
      const hi = lowestClaim === null ? gap.hi : Math.min(gap.hi, lowestClaim);
      const at = this.seqAtCount(first, hi, want);
      if (at === null) continue;
      this.planned = { from: first, to: at.to, count: at.count, rows: this.o.tally.rows, sealed: this.o.tally.sealed };
      return { from: first, to: at.to };
    }
    return null;
  }

  /**
   * The end of a job range starting at `first`, below `hi`, holding at most `want` samples (rows
   * and sealed) and how many it holds; null when there is none. Chosen by seq arithmetic: seqs are
   * unique, so [first, first + want − 1] holds at most `want`; it ends at the highest seq that
   * exists below `hi` (a seq no sample has yet would take in samples committed later, B3), and a
   * chunk is taken whole when the end falls inside it (one job per chunk, no re-encoding at the
   * end). Walking chunk by chunk to an exact count, one lookup each, held the event loop 100 s on
   * a restarted gateway whose 1.2 M-sample backlog was sealed into 100,000 small chunks (30,000
   * variables; the plant-scale kill check): now a few index lookups and two counts.
   */
  private seqAtCount(first: number, hi: number, want: number): { to: number; count: number } | null {
    const sealed = this.o.tally.sealed > 0;
    let highest = (this.st.maxBelow.get(first, hi) as number | null) ?? null;
    if (sealed) {
      const c = this.o.store.lastBefore(first - 1 - MAX_CHUNK_SAMPLES, hi);
      const end = c ? Math.min(c.seq_from + c.n - 1, hi - 1) : null;
      if (end !== null && end >= first && (highest === null || end > highest)) highest = end;
    }
    if (highest === null) return null;
    let to = Math.min(highest, first + want - 1);
    if (sealed) {
      const c = this.o.store.firstAfter(to - 1, hi);
      if (c && c.seq_from <= to) to = Math.min(c.seq_from + c.n - 1, hi - 1);
    }
    const count = this.countIn(first, to);
    return count > 0 ? { to, count } : null;
  }

  /** Marks a range as sync-only (it failed twice as an import job), durably. */
  markSyncOnly(range: SeqRange): void {
    this.o.holds.markSyncOnly(range);
  }

  /** Forgets sync-only ranges whose samples are all gone. */
  pruneSyncOnly(): void {
    const sealed = this.o.tally.sealed > 0;
    this.o.holds.forgetSyncOnly(this.o.holds.syncOnlyRanges.filter((r) => this.st.maxSeqInRange.get(r.from, r.to) === null && (!sealed || this.o.store.countIn(r.from, r.to) === 0)));
  }

  /** Samples (rows and sealed) with seqs in [from, to]. */
  countIn(from: number, to: number): number {
    const rows = this.st.countBetween.get(from, to) as number;
    return this.o.tally.sealed > 0 ? rows + this.o.store.countIn(from, to) : rows;
  }
}
