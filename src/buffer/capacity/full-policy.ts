import type { Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import type { ChunkRow, ChunkStore } from '../chunks/store.js';
import type { Holds } from '../holds.js';
import type { Tally } from '../tally.js';
import type { VariableDictionary } from '../variables.js';
import type { Losses } from './losses.js';
import type { StoreOwner } from '../../store/store.js';

/**
 * The full-buffer policy (buffer.when_full): what happens at buffer.max_bytes. It counts and drops
 * samples only: max_bytes bounds the samples owner's space in the file (src/store/README.md S5);
 * the side tables (annotations, alarms, gaps, set-aside, trend) have bounds and policies of their
 * own and never make a sample leave.
 *
 * Keeps:
 *  B2d drop_oldest deletes only unheld samples, oldest (lowest seq) first across rows and chunks:
 *      unclaimed rows one by one, sealed chunks whole (counted by their `n`) when outside every
 *      import-job range, in one transaction. What a drop deletes is
 *      logged per variable before its transaction commits (`buffer_chunks_dropping`,
 *      `buffer_rows_dropping`: the crash harness checks every missing sample against them), and
 *      counted after (Losses).
 *  B9  refuse_new never deletes: the commit refuses new samples instead (Ingest); drop_oldest runs
 *      in the turn right after the commit that crossed the limit (once that commit's appends are
 *      acknowledged, B7), so the buffer is over max_bytes for one turn at most.
 */

/** What one drop deletes: rows as [seq, var, ts, value], chunks whole. */
interface DropPlan {
  rows: Array<[number, number, number, number]>;
  chunks: ChunkRow[];
}

export class FullPolicy {
  private readonly st: { deleteSeq: Statement; oldestBetween: Statement; deleteChunk: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: { maxBytes: number; logger: Logger; holds: Holds; store: ChunkStore; tally: Tally; dict: VariableDictionary; losses: Losses },
  ) {
    this.st = {
      deleteSeq: db.prepare('DELETE FROM samples WHERE seq = ?'),
      oldestBetween: db.prepare('SELECT seq, var, ts, value FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT ?').raw(true),
      deleteChunk: db.prepare('DELETE FROM chunks WHERE seq_from = ?'),
    };
  }

  /** Whether the samples' bytes (their owner's space in the file, side tables apart) are over buffer.max_bytes. */
  overLimit(): boolean {
    return this.db.bytes > this.o.maxBytes;
  }

  /**
   * Deletes the oldest samples no sender holds until the database is below the limit with some
   * headroom (so the policy does not run on every commit). With `pendingOnFullDisk` the limit is
   * not the trigger (the disk is full), so a slice is dropped to make room for that many samples.
   */
  dropOldest(pendingOnFullDisk: number | null = null): void {
    const used = this.db.bytes;
    const t = this.o.tally;
    const total = t.samples;
    const perRow = total > 0 ? Math.max(0.5, used / total) : 32;
    const headroom = this.o.maxBytes * 0.02;
    let target = pendingOnFullDisk !== null ? Math.max(1_000, Math.ceil((pendingOnFullDisk * perRow + headroom) / perRow)) : Math.ceil((used - this.o.maxBytes + headroom) / perRow);
    target = Math.min(target, total);
    if (target <= 0) return;
    const plan = this.oldestUnheld(target);
    if (plan.rows.length === 0 && plan.chunks.length === 0) return;
    try {
      this.db.write('drop_oldest', () => {
        for (const c of plan.chunks) this.st.deleteChunk.run(c.seq_from);
        for (const row of plan.rows) this.st.deleteSeq.run(row[0]);
        this.announce(plan);
      });
    } catch (err) {
      this.o.logger.error({ err: describeError(err) }, 'could not delete the oldest samples to make room');
      return;
    }
    t.rows -= plan.rows.length;
    if (plan.chunks.length > 0) {
      let sealed = 0;
      let bytes = 0;
      let min = Infinity;
      let max = -Infinity;
      for (const c of plan.chunks) {
        sealed += c.n;
        bytes += c.data.length;
        min = Math.min(min, c.ts_min);
        max = Math.max(max, c.ts_max);
      }
      t.sealed -= sealed;
      t.chunks -= plan.chunks.length;
      t.chunkBytes -= bytes;
      this.o.losses.recordDropCount('drop_oldest', sealed, min, max);
    }
    if (plan.rows.length > 0) this.o.losses.recordDrop('drop_oldest', plan.rows.map((r) => r[2]));
  }

  /**
   * Written inside the transaction, before its commit, so a reader of the log (the crash harness)
   * knows of every drop that may have committed, with its exact samples per variable: chunks as
   * [variable, n, ts_min, ts_max], rows as a count per variable.
   */
  private announce(plan: DropPlan): void {
    if (plan.chunks.length > 0) {
      const chunks = plan.chunks.map((c) => [this.o.dict.nameOf(c.var), c.n, c.ts_min, c.ts_max]);
      const samples = plan.chunks.reduce((a, c) => a + c.n, 0);
      this.o.logger.debug({ event: 'buffer_chunks_dropping', samples, chunks }, 'dropping the oldest sealed chunks (buffer.when_full = drop_oldest)');
    }
    if (plan.rows.length > 0) {
      const perVar = new Map<string, number>();
      for (const row of plan.rows) {
        const name = this.o.dict.nameOf(row[1]);
        perVar.set(name, (perVar.get(name) ?? 0) + 1);
      }
      this.o.logger.debug({ event: 'buffer_rows_dropping', samples: plan.rows.length, per_variable: Object.fromEntries(perVar) }, 'dropping the oldest rows (buffer.when_full = drop_oldest)');
    }
  }

  /**
   * The oldest samples no sender holds, by seq across rows and sealed chunks (B2d, B5: a claim that
   * unsealed a chunk and was released leaves its samples as rows older than later chunks), until
   * `target`: in each gap between import-job ranges, the rows below the next chunk, then that whole
   * chunk (one reaching into a job's range stays), and so on.
   */
  private oldestUnheld(target: number): DropPlan {
    const plan: DropPlan = { rows: [], chunks: [] };
    let n = 0;
    const holds = this.o.holds;
    for (const gap of holds.gapsAscending()) {
      let lo = gap.lo;
      while (n < target) {
        const c = this.o.tally.sealed > 0 ? this.o.store.firstAfter(lo, gap.hi) : undefined;
        n += this.oldestUnheldRows(lo, c ? c.seq_from : gap.hi, target - n, plan.rows);
        if (n >= target || !c) break;
        if (c.seq_from + c.n - 1 < gap.hi) {
          plan.chunks.push(c);
          n += c.n;
        }
        lo = c.seq_from + c.n - 1;
      }
      if (n >= target) break;
    }
    return plan;
  }

  /** Appends to `out` up to `limit` of the oldest rows with seqs in (lo, hi) that no claim holds; returns how many. */
  private oldestUnheldRows(lo: number, hi: number, limit: number, out: Array<[number, number, number, number]>): number {
    const holds = this.o.holds;
    let taken = 0;
    while (taken < limit && hi > lo + 1) {
      const rows = this.st.oldestBetween.all(lo, hi, Math.min(10_000, limit - taken + holds.claimedCount)) as Array<[number, number, number, number]>;
      if (rows.length === 0) break;
      for (const r of rows) {
        if (taken >= limit) break;
        if (holds.isClaimed(r[0])) continue;
        out.push(r);
        taken += 1;
      }
      lo = rows[rows.length - 1][0];
    }
    return taken;
  }
}
