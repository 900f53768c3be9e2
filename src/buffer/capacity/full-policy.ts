import type { Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import type { ChunkStore } from '../chunks/store.js';
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
 *  B2d drop_oldest deletes only unheld samples, oldest first: whole sealed chunks outside every
 *      import-job range first (counted by their `n`), then unclaimed rows. What a drop deletes is
 *      logged per variable before its transaction commits (`buffer_chunks_dropping`,
 *      `buffer_rows_dropping`: the crash harness checks every missing sample against them), and
 *      counted after (Losses).
 *  B9  refuse_new never deletes: the commit refuses new samples instead (Ingest); drop_oldest runs
 *      in the turn of the commit that crossed the limit, so the buffer is never over max_bytes for
 *      longer than that commit.
 */
export class FullPolicy {
  private readonly st: { deleteSeq: Statement; oldestBetween: Statement; pickChunks: Statement; deleteChunk: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: { maxBytes: number; logger: Logger; holds: Holds; store: ChunkStore; tally: Tally; dict: VariableDictionary; losses: Losses },
  ) {
    this.st = {
      deleteSeq: db.prepare('DELETE FROM samples WHERE seq = ?'),
      oldestBetween: db.prepare('SELECT seq, var, ts, value FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT ?').raw(true),
      pickChunks: db.prepare('SELECT seq_from, var, n, ts_min, ts_max, length(data) AS bytes FROM chunks WHERE seq_from > ? AND seq_from < ? ORDER BY seq_from LIMIT 256'),
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
    // Sealed chunks hold the oldest samples: whole unheld chunks go first, counted by their n.
    if (t.sealed > 0) {
      try {
        target -= this.dropOldestChunks(target);
      } catch (err) {
        this.o.logger.error({ err: describeError(err) }, 'could not delete the oldest chunks to make room');
      }
      if (target <= 0) return;
    }
    target = Math.min(target, t.rows);
    if (target <= 0) return;
    const victims = this.oldestUnheldRows(target);
    if (victims.length === 0) return;
    try {
      this.db.write('drop_oldest', () => {
        for (const row of victims) this.st.deleteSeq.run(row[0]);
        // Before the commit, as for chunks: per variable, how many rows may leave.
        const perVar = new Map<string, number>();
        for (const row of victims) {
          const name = this.o.dict.nameOf(row[1]);
          perVar.set(name, (perVar.get(name) ?? 0) + 1);
        }
        this.o.logger.debug({ event: 'buffer_rows_dropping', samples: victims.length, per_variable: Object.fromEntries(perVar) }, 'dropping the oldest rows (buffer.when_full = drop_oldest)');
      });
      t.rows -= victims.length;
      this.o.losses.recordDrop('drop_oldest', victims.map((r) => r[2]));
    } catch (err) {
      this.o.logger.error({ err: describeError(err) }, 'could not delete the oldest samples to make room');
    }
  }

  /** Deletes whole chunks outside every import-job range, oldest first, until `target` samples; returns how many. */
  private dropOldestChunks(target: number): number {
    const gone: Array<[string, number, number, number]> = [];
    let dropped = 0;
    let chunks = 0;
    let bytes = 0;
    let min = Infinity;
    let max = -Infinity;
    this.db.write('drop_oldest', () => {
      for (const gap of this.o.holds.gapsAscending()) {
        let lo = gap.lo;
        while (dropped < target) {
          const rows = this.st.pickChunks.all(lo, gap.hi) as Array<{ seq_from: number; var: number; n: number; ts_min: number; ts_max: number; bytes: number }>;
          if (rows.length === 0) break;
          for (const c of rows) {
            lo = c.seq_from;
            if (c.seq_from + c.n - 1 >= gap.hi || dropped >= target) continue; // reaches into a job's range
            this.st.deleteChunk.run(c.seq_from);
            gone.push([this.o.dict.nameOf(c.var), c.n, c.ts_min, c.ts_max]);
            dropped += c.n;
            chunks += 1;
            bytes += c.bytes;
            min = Math.min(min, c.ts_min);
            max = Math.max(max, c.ts_max);
          }
        }
        if (dropped >= target) break;
      }
      // Written before the commit, so a reader of the log (the crash harness) knows of every drop
      // that may have committed, with its exact samples per variable: [variable, n, ts_min, ts_max].
      if (gone.length > 0) this.o.logger.debug({ event: 'buffer_chunks_dropping', samples: dropped, chunks: gone }, 'dropping the oldest sealed chunks (buffer.when_full = drop_oldest)');
    });
    const t = this.o.tally;
    t.sealed -= dropped;
    t.chunks -= chunks;
    t.chunkBytes -= bytes;
    this.o.losses.recordDropCount('drop_oldest', dropped, min, max);
    return dropped;
  }

  /** The oldest rows that are neither claimed nor inside an import-job range: [seq, var, ts, value]. */
  private oldestUnheldRows(limit: number): Array<[number, number, number, number]> {
    const out: Array<[number, number, number, number]> = [];
    const holds = this.o.holds;
    for (const gap of holds.gapsAscending()) {
      let lo = gap.lo;
      while (out.length < limit) {
        const rows = this.st.oldestBetween.all(lo, gap.hi, Math.min(10_000, limit - out.length + holds.claimedCount)) as Array<[number, number, number, number]>;
        if (rows.length === 0) break;
        for (const r of rows) if (!holds.isClaimed(r[0]) && out.length < limit) out.push(r);
        lo = rows[rows.length - 1][0];
      }
      if (out.length >= limit) break;
    }
    return out;
  }
}
