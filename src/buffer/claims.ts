import type { Statement } from 'better-sqlite3';
import type { Logger } from 'pino';
import type { Clock } from '../core/clock.js';
import type { ChunkRow, ChunkStore } from './chunks/store.js';
import type { Holds } from './holds.js';
import type { Ingest } from './ingest.js';
import { fromRowValue } from './row-value.js';
import type { SetAsideInfo, SetAsideMove } from './set-aside.js';
import type { Tally } from './tally.js';
import type { BufferedRow } from './types.js';
import type { VariableDictionary } from './variables.js';
import type { StoreOwner } from '../store/store.js';

/**
 * The sync path's claims: which samples it sends next, and what happens to them after.
 *
 * Keeps:
 *  B4  A claimed row is in Holds until it is released, or acknowledged and its delete committed; a
 *      claim never takes a held sample (another claim or an import job's range).
 *  B5  Newest first (`claimNewest`: live data stays fresh); oldest first only for the age bound
 *      (`claimOldest`), by seq across rows and chunks.
 *  B3  The sync path claims rows only: a sealed sample it needs is first turned back into a row
 *      with the same seq (`unsealAll`, the chunks one claim needs in one transaction), outside
 *      every import-job range.
 *  B2c Setting samples aside records them and removes them, rows or sealed, in one transaction.
 */
/** Most chunks one unseal transaction takes (a claim is at most a batch of 200; chunks hold ≥ 1). */
const UNSEAL_BATCH = 256;

export class Claims {
  private readonly st: { newestSeqs: Statement; rowBySeq: Statement; oldestBetween: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly o: { logger: Logger; clock: Clock; holds: Holds; store: ChunkStore; tally: Tally; dict: VariableDictionary; ingest: Ingest; setAsideMove: SetAsideMove; changed: () => void },
  ) {
    this.st = {
      newestSeqs: db.prepare('SELECT seq FROM samples WHERE seq > ? AND seq < ? ORDER BY seq DESC LIMIT ?').pluck(true),
      rowBySeq: db.prepare('SELECT var, ts, value FROM samples WHERE seq = ?').raw(true),
      oldestBetween: db.prepare('SELECT seq, var, ts, value FROM samples WHERE seq > ? AND seq < ? ORDER BY seq ASC LIMIT ?').raw(true),
    };
  }

  /**
   * Claims up to `limit` of the newest samples no one holds (B4, B5), rows and sealed ones alike:
   * in each gap between import-job ranges, newest first, the rows above the newest chunk, then
   * that chunk (back to rows, B3) and the rows above the next one. Rows are not always newer than
   * chunks: a claim that unsealed a chunk and was released leaves its samples as rows.
   */
  claimNewest(limit: number): BufferedRow[] {
    const out: BufferedRow[] = [];
    if (limit <= 0) return out;
    for (const gap of this.o.holds.gapsDescending()) {
      let hi = gap.hi;
      while (out.length < limit) {
        const c = this.o.tally.sealed > 0 ? this.o.store.lastBefore(gap.lo, hi) : undefined;
        this.claimNewestRows(c ? c.seq_from + c.n - 1 : gap.lo, hi, limit, out);
        if (out.length >= limit || !c) break;
        this.unsealAll(this.chunksFrom(c, limit - out.length, (x) => this.o.store.lastBefore(gap.lo, x.seq_from)));
        // Its samples are rows now, with the same seqs: they and what lies below come next.
        hi = Math.min(hi, c.seq_from + c.n);
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  /**
   * Claims up to `limit` of the oldest samples no one holds, sealed ones included (issue 12 §5:
   * the sync path alternates to these while the oldest unsent sample is older than its bound).
   */
  claimOldest(limit: number): BufferedRow[] {
    const out: BufferedRow[] = [];
    if (limit <= 0) return out;
    const holds = this.o.holds;
    for (const gap of holds.gapsAscending()) {
      let lo = gap.lo;
      while (out.length < limit) {
        const c = this.o.store.firstAfter(lo, gap.hi);
        const rowsHi = c ? c.seq_from : gap.hi; // rows strictly between lo and rowsHi come first
        while (out.length < limit && rowsHi > lo + 1) {
          const rows = this.st.oldestBetween.all(lo, rowsHi, limit - out.length + holds.claimedCount) as Array<[number, number, number, number | Buffer]>;
          if (rows.length === 0) break;
          for (const [seq, varId, ts, value] of rows) {
            lo = seq;
            if (holds.isClaimed(seq)) continue;
            holds.claim(seq);
            out.push({ seq, variable: this.o.dict.nameOf(varId), ts, value: fromRowValue(value) });
            if (out.length >= limit) break;
          }
        }
        if (out.length >= limit || !c) break;
        // With the chunks after it in the gap, up to what this claim still needs: one transaction.
        this.unsealAll(this.chunksFrom(c, limit - out.length, (x) => this.o.store.firstAfter(x.seq_from + x.n - 1, gap.hi)));
        // Its samples are rows now, with the same seqs; never below the gap (a job's range).
        lo = Math.max(gap.lo, Math.min(lo, c.seq_from - 1));
      }
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Timestamp of the oldest sample (by seq) that no sender holds, or null (issue 12 §5). */
  oldestAvailableTs(): number | null {
    const store = this.o.store;
    for (const gap of this.o.holds.gapsAscending()) {
      const c = store.firstAfter(gap.lo, gap.hi);
      const rowsHi = c ? c.seq_from : gap.hi;
      let lo = gap.lo;
      for (;;) {
        const rows = this.st.oldestBetween.all(lo, rowsHi, 256) as Array<[number, number, number, number]>;
        if (rows.length === 0) break;
        for (const r of rows) if (!this.o.holds.isClaimed(r[0])) return r[2];
        lo = rows[rows.length - 1][0];
      }
      if (c) return Math.min(c.ts_min, store.earliestTsFrom(c.seq_from, gap.hi) ?? c.ts_min);
    }
    return null;
  }

  /** Gives claimed rows back (transient failure); they will be claimed again. */
  release(rows: readonly { seq: number }[]): void {
    for (const r of rows) this.o.holds.unclaim(r.seq);
    if (rows.length > 0) this.o.changed();
  }

  /** The service acknowledged these rows (2xx): deleted in the next group commit (Ingest). */
  ack(rows: readonly { seq: number }[]): void {
    this.o.ingest.queueAcks(rows);
  }

  /** Moves samples (claimed rows, or items of an import-job range) to set_aside in one transaction (B2c). */
  setAside(rows: readonly BufferedRow[], info: SetAsideInfo): void {
    this.setAsideGroups([{ rows, info }]);
  }

  /**
   * Several groups, each with its own reason, in one transaction (B2c): the sync path sets aside
   * the samples of many unknown variables at once, each with what the service said about it
   * (issue 24 §1), without a commit per variable.
   */
  setAsideGroups(groups: ReadonlyArray<{ rows: readonly BufferedRow[]; info: SetAsideInfo }>): void {
    const all = groups.filter((g) => g.rows.length > 0);
    if (all.length === 0) return;
    const now = this.o.clock.now();
    // Alone (not joined): the counts below change once this has committed (B8).
    const moved = this.db.write('setAside', () => {
      const sum = { fromRows: 0, fromChunks: 0 };
      for (const g of all) {
        const m = this.o.setAsideMove.move(g.rows, g.info, now);
        sum.fromRows += m.fromRows;
        sum.fromChunks += m.fromChunks;
      }
      return sum;
    });
    for (const g of all) for (const r of g.rows) this.o.holds.unclaim(r.seq);
    this.o.tally.rows -= moved.fromRows;
    if (moved.fromChunks > 0) this.o.tally.resync(this.o.store.totals());
  }

  /** `first` and the chunks `next` leads to, until they hold `want` samples (at most UNSEAL_BATCH chunks). */
  private chunksFrom(first: ChunkRow, want: number, next: (c: ChunkRow) => ChunkRow | undefined): ChunkRow[] {
    const out = [first];
    let n = first.n;
    for (let c = n < want ? next(first) : undefined; c && out.length < UNSEAL_BATCH; c = n < want ? next(c) : undefined) {
      out.push(c);
      n += c.n;
    }
    return out;
  }

  /**
   * Chunks back to rows in one transaction. One commit per chunk (an fsync each) made the sync
   * path's pace a few chunks per fsync once the backlog was sealed: with 30,000 variables a
   * chunk holds a few dozen samples, and draining fell to 700–1,000 samples/s (issue 25).
   */
  private unsealAll(chunks: readonly ChunkRow[]): void {
    const n = this.db.write('unseal', () => {
      let sum = 0;
      for (const c of chunks) sum += this.o.store.unseal(c);
      return sum;
    });
    this.o.logger.debug({ event: 'chunk_unsealed', chunks: chunks.length, seq_from: chunks[0].seq_from, samples: n }, 'sealed chunks went back to rows for the sync path');
    const t = this.o.tally;
    t.rows += n;
    t.sealed -= n;
    t.chunks -= chunks.length;
    for (const c of chunks) t.chunkBytes -= c.data.length;
  }

  /** Claims the newest unheld rows with seqs in (lo, hi), until `out` holds `limit`. */
  private claimNewestRows(lo: number, hi: number, limit: number, out: BufferedRow[]): void {
    // Seqs first (small integers), then whole rows only for the chosen ones: the newest rows are
    // mostly already claimed or acknowledged, and reading them whole only made garbage.
    const holds = this.o.holds;
    while (out.length < limit) {
      // Claimed seqs are skipped; the page is not sized to every claim (the oldest-first ones are
      // elsewhere): at 100,000 samples/s reading past all of them on every claim cost 3.6 % of
      // the gateway. A page that comes back full is followed by the next one below it.
      const want = limit - out.length + Math.min(holds.claimedCount, 2 * limit);
      const seqs = this.st.newestSeqs.all(lo, hi, want) as number[];
      if (seqs.length === 0) break;
      for (const seq of seqs) {
        if (holds.isClaimed(seq)) continue;
        const row = this.st.rowBySeq.get(seq) as [number, number, number | Buffer] | undefined;
        if (!row) continue;
        holds.claim(seq);
        out.push({ seq, variable: this.o.dict.nameOf(row[0]), ts: row[1], value: fromRowValue(row[2]) });
        if (out.length >= limit) break;
      }
      if (seqs.length < want) break;
      hi = seqs[seqs.length - 1];
    }
  }
}
