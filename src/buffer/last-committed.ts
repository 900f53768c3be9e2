import type { Database, Statement } from 'better-sqlite3';
import type { Sample } from '../core/sample.js';
import { assertNotNested } from './file/transactions.js';
import type { MaintenanceTask } from './maintenance.js';

/**
 * Per machine variable, the newest sample timestamp ever committed to the buffer (issue 14 §1):
 * where an OPC UA historical backfill starts after a gap, and which sources had data before a
 * stop (runtime/gap-watch.ts). Kept in the buffer file (table `last_committed`, migration 3).
 *
 * Written on the maintenance schedule, not inside the group commit (issue 25): one upsert per
 * variable and commit was as many row writes as the samples themselves at 100,000 variables a
 * second (a b-tree keyed by name, every commit touching a slice of it). The commit records each
 * variable's newest timestamp in memory once its transaction has committed; a maintenance slice
 * writes what changed at most every FLUSH_MS, a bounded part per slice; a clean close writes the
 * rest.
 *
 * INVARIANTS
 *  L1  Never ahead of the samples: a timestamp is recorded only after the transaction holding its
 *      sample committed, and written in a later transaction, so on any file (after a power cut
 *      too: WAL frames are durable in order) the stored value names a sample that survived.
 *      It may lag: a power cut or SIGKILL loses at most the last FLUSH_MS (plus one flush) of
 *      updates, so a backfill after one re-reads up to that much history the buffer already has.
 *      Those are re-sends of the same (variable, timestamp, value), which the service replaces
 *      (CONTRACT.md, replace on same pair): harmless. While running, `get` is exact.
 *  L2  The stored value only grows (`max`): a backfill of older values never moves it back, so a
 *      later gap starts where live data had already reached.
 *  L3  It survives the samples' delivery: acknowledged rows leave `samples`, this row stays.
 */

/** Longest an update waits in memory before a maintenance slice writes it. */
export const FLUSH_MS = 5_000;
/** Upserts between two looks at the slice's deadline. */
const CHECK_EVERY = 256;

export class LastCommitted implements MaintenanceTask {
  readonly name = 'last_committed';
  private readonly upsert: Statement;
  private readonly getOne: Statement;
  private readonly all: Statement;
  /** Newest committed ts per variable not yet written to the table (L1: only committed samples). */
  private readonly pending = new Map<string, number>();
  /** performance.now() of the oldest update in `pending` (Infinity when none). */
  private oldestPendingAt = Infinity;
  /** Time one upsert took in the last write (ms), to size the next part to the slice. */
  private msPerEntry = 0.003;
  private readonly writePart: (entries: Array<[string, number]>) => void;

  constructor(
    private readonly db: Database,
    private readonly flushMs = FLUSH_MS,
  ) {
    this.upsert = db.prepare('INSERT INTO last_committed (variable, ts) VALUES (?, ?) ON CONFLICT(variable) DO UPDATE SET ts = max(ts, excluded.ts)');
    this.getOne = db.prepare('SELECT ts FROM last_committed WHERE variable = ?').pluck(true);
    this.all = db.prepare('SELECT variable, ts FROM last_committed').raw(true);
    this.writePart = db.transaction((entries: Array<[string, number]>) => {
      for (const [variable, ts] of entries) this.upsert.run(variable, ts);
    });
  }

  /**
   * Call after the transaction that inserted `batches` committed (L1): each variable's newest
   * timestamp, kept in memory until a slice writes it.
   */
  record(batches: ReadonlyArray<{ samples: readonly Sample[] }>): void {
    const pending = this.pending;
    const before = pending.size;
    for (const b of batches) {
      for (const s of b.samples) {
        if (!Number.isFinite(s.ts) || !Number.isFinite(s.value)) continue;
        const ts = Math.trunc(s.ts);
        const prev = pending.get(s.variable);
        if (prev === undefined || ts > prev) pending.set(s.variable, ts);
      }
    }
    if (before === 0 && pending.size > 0) this.oldestPendingAt = performance.now();
  }

  /** The newest committed timestamp of `variable`, or null when it never had a sample. */
  get(variable: string): number | null {
    const stored = (this.getOne.get(variable) as number | undefined) ?? null;
    const mem = this.pending.get(variable);
    if (mem === undefined) return stored;
    return stored === null ? mem : Math.max(stored, mem);
  }

  /** Every variable's newest committed timestamp. */
  snapshot(): Map<string, number> {
    const out = new Map(this.all.all() as Array<[string, number]>);
    for (const [variable, ts] of this.pending) {
      const stored = out.get(variable);
      if (stored === undefined || ts > stored) out.set(variable, ts);
    }
    return out;
  }

  /** Updates not yet in the table (status, tests). */
  get unwritten(): number {
    return this.pending.size;
  }

  // ---------------------------------------------------------------- MaintenanceTask

  due(): boolean {
    return this.pending.size > 0 && performance.now() - this.oldestPendingAt >= this.flushMs;
  }

  /** Writes pending updates, oldest first, in one transaction until `deadline`. */
  slice(deadline: number): boolean {
    this.writeUntil(deadline);
    return this.pending.size > 0 && this.due();
  }

  describe(): string {
    return `writing ${this.pending.size} variables' newest committed timestamps`;
  }

  /** Writes everything pending (a clean close; tests). Throws what the write threw; nothing is lost from memory then. */
  flush(): void {
    while (this.pending.size > 0) this.writeUntil(Infinity);
  }

  private writeUntil(deadline: number): void {
    if (this.pending.size === 0) return;
    assertNotNested(this.db, 'writing last_committed');
    // Entries are taken in the map's order (first recorded first) and dropped from it only after
    // their transaction committed, so a failed write (a full disk) keeps them for the next slice.
    const part: Array<[string, number]> = [];
    const started = performance.now();
    for (const e of this.pending) {
      part.push(e);
      // Collecting is cheap; the upserts are what the deadline is about.
      if (part.length % CHECK_EVERY === 0 && started + part.length * this.msPerEntry >= deadline) break;
    }
    const t0 = performance.now();
    this.writePart(part);
    if (part.length >= CHECK_EVERY) this.msPerEntry = (performance.now() - t0) / part.length;
    for (const [variable, ts] of part) if (this.pending.get(variable) === ts) this.pending.delete(variable);
    this.oldestPendingAt = this.pending.size > 0 ? performance.now() - this.flushMs : Infinity;
  }
}
