import type { Statement } from 'better-sqlite3';
import type { ImportLedger } from './imports/ledger.js';
import type { SeqRange } from './types.js';
import type { StoreOwner } from '../store/store.js';

/**
 * Who holds which samples (README.md B4): the sync path's claims, import-job ranges and sync-only
 * ranges. Every room that hands samples out or rewrites them asks here first.
 *
 * Keeps:
 *  B4  A sample is held by at most one sender. Claims are seqs in memory (acknowledged-but-not-yet-
 *      deleted ones stay claimed until the commit that deletes them); an import job holds a seq
 *      range, durably in the ledger (`import_jobs`) and in memory as a reservation with its sample
 *      count; a sync-only range (durable, `sync_only_ranges`) may be sent by the sync path only.
 *  B3  `all()` and `anyWithin()` are what sealing and compaction consult before they renumber: the
 *      ledger's ranges count as well as the in-memory reservations, so a job recorded but not yet
 *      reserved (or reserved by an earlier process) is never renumbered under it.
 */
export class Holds {
  /** Seqs claimed by the sync path (and acknowledged ones until their delete commits). */
  private readonly claimed = new Set<number>();
  /** Import-job ranges, sorted by `from`, with their sample counts. */
  private reserved: Array<SeqRange & { rows: number }> = [];
  private reservedCount = 0;
  /** Ranges that failed twice as import jobs: only the sync path may send them. */
  private syncOnly: SeqRange[];
  private readonly st: { insertSyncOnly: Statement; deleteSyncOnly: Statement };

  constructor(
    private readonly db: StoreOwner,
    private readonly ledger: ImportLedger,
  ) {
    this.syncOnly = db.prepare('SELECT seq_from AS "from", seq_to AS "to" FROM sync_only_ranges ORDER BY seq_from').all() as SeqRange[];
    this.st = {
      insertSyncOnly: db.prepare('INSERT OR REPLACE INTO sync_only_ranges (seq_from, seq_to) VALUES (?, ?)'),
      deleteSyncOnly: db.prepare('DELETE FROM sync_only_ranges WHERE seq_from = ?'),
    };
  }

  // ---------------------------------------------------------------- sync claims

  claim(seq: number): void {
    this.claimed.add(seq);
  }

  unclaim(seq: number): void {
    this.claimed.delete(seq);
  }

  isClaimed(seq: number): boolean {
    return this.claimed.has(seq);
  }

  get claimedCount(): number {
    return this.claimed.size;
  }

  /** Lowest claimed seq, or null. */
  lowestClaimed(): number | null {
    let min: number | null = null;
    for (const s of this.claimed) if (min === null || s < min) min = s;
    return min;
  }

  // ---------------------------------------------------------------- import-job reservations

  reserve(range: SeqRange, rows: number): void {
    this.reserved.push({ ...range, rows });
    this.reserved.sort((a, b) => a.from - b.from);
    this.reservedCount += rows;
  }

  /** Shrinks the reservation `range` to end at `newTo`, now holding `rows` samples; false when there is none. */
  shrink(range: SeqRange, newTo: number, rows: number): boolean {
    const r = this.reserved.find((x) => x.from === range.from && x.to === range.to);
    if (!r) return false;
    this.reservedCount += rows - r.rows;
    r.to = newTo;
    r.rows = rows;
    return true;
  }

  /** Ends the reservation `range`; false when there is none. */
  release(range: SeqRange): boolean {
    const i = this.reserved.findIndex((x) => x.from === range.from && x.to === range.to);
    if (i < 0) return false;
    this.reservedCount -= this.reserved[i].rows;
    this.reserved.splice(i, 1);
    return true;
  }

  /** Samples inside reservations. */
  get reservedSamples(): number {
    return this.reservedCount;
  }

  get reservedRanges(): readonly SeqRange[] {
    return this.reserved;
  }

  // ---------------------------------------------------------------- sync-only ranges

  get syncOnlyRanges(): readonly SeqRange[] {
    return this.syncOnly;
  }

  /** Records a sync-only range durably; the list in memory follows once it committed (B8). */
  markSyncOnly(range: SeqRange): void {
    this.db.write('mark a sync-only range', (tx) => {
      this.st.insertSyncOnly.run(range.from, range.to);
      tx.onCommit(() => {
        this.syncOnly = [...this.syncOnly.filter((r) => r.from !== range.from), range].sort((a, b) => a.from - b.from);
      });
    });
  }

  /** Forgets sync-only ranges (their samples are all gone), in one transaction (B8 as above). */
  forgetSyncOnly(ranges: readonly SeqRange[]): void {
    if (ranges.length === 0) return;
    this.db.write('forget sync-only ranges', (tx) => {
      for (const r of ranges) this.st.deleteSyncOnly.run(r.from);
      tx.onCommit(() => {
        this.syncOnly = this.syncOnly.filter((r) => !ranges.includes(r));
      });
    });
  }

  // ---------------------------------------------------------------- queries

  /** Open intervals (lo, hi) between the reservations, oldest first: where the sync path may claim. */
  gapsAscending(): Array<{ lo: number; hi: number }> {
    return gapsOf(this.reserved);
  }

  gapsDescending(): Array<{ lo: number; hi: number }> {
    return gapsOf(this.reserved).reverse();
  }

  /** Open intervals outside reservations and sync-only ranges: where a new import job may start. */
  gapsForJobs(): Array<{ lo: number; hi: number }> {
    return gapsOf([...this.reserved, ...this.syncOnly]);
  }

  /**
   * Every hold reaching above `after`, sorted by start: reservations, sync-only ranges, the
   * ledger's ranges and single claimed seqs (B3: what sealing and compaction must not renumber).
   */
  all(after = 0): SeqRange[] {
    const holds: SeqRange[] = [...this.reserved, ...this.syncOnly, ...this.ledger.ranges()].filter((h) => h.to > after);
    for (const seq of this.claimed) if (seq > after) holds.push({ from: seq, to: seq });
    return holds.sort((a, b) => a.from - b.from);
  }

  /** Whether anything holds a seq in [lo, hi]. */
  anyWithin(lo: number, hi: number): boolean {
    for (const seq of this.claimed) if (seq >= lo && seq <= hi) return true;
    for (const h of [...this.reserved, ...this.syncOnly, ...this.ledger.ranges()]) if (h.from <= hi && h.to >= lo) return true;
    return false;
  }
}

/** Open seq intervals (lo, hi) not covered by `ranges` (inclusive ranges), oldest first. */
export function gapsOf(ranges: readonly SeqRange[]): Array<{ lo: number; hi: number }> {
  const sorted = [...ranges].sort((a, b) => a.from - b.from);
  const gaps: Array<{ lo: number; hi: number }> = [];
  let lo = 0;
  for (const r of sorted) {
    if (r.from > lo + 1) gaps.push({ lo, hi: r.from });
    lo = Math.max(lo, r.to);
  }
  gaps.push({ lo, hi: Number.MAX_SAFE_INTEGER });
  return gaps;
}
