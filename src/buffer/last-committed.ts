import type { Database, Statement } from 'better-sqlite3';
import type { Sample } from '../core/sample.js';

/**
 * Per machine variable, the newest sample timestamp ever committed to the buffer (issue 14 §1):
 * where an OPC UA historical backfill starts after a gap. Kept in the buffer file (table
 * `last_committed`, migration 3) and written inside the group-commit transaction, so it is exactly
 * as durable as the samples themselves: after a power cut it names the newest sample that survived.
 *
 * INVARIANTS
 *  L1  `record` runs inside the transaction that inserts the samples; a rolled-back commit leaves
 *      no trace here either (no in-memory cache to undo).
 *  L2  The stored value only grows (`max`): a backfill of older values never moves it back, so a
 *      later gap starts where live data had already reached.
 *  L3  It survives the samples' delivery: acknowledged rows leave `samples`, this row stays.
 */
export class LastCommitted {
  private readonly upsert: Statement;
  private readonly getOne: Statement;
  private readonly all: Statement;
  /** Reused per commit: variable → newest ts in that commit. */
  private readonly newest = new Map<string, number>();

  constructor(db: Database) {
    this.upsert = db.prepare('INSERT INTO last_committed (variable, ts) VALUES (?, ?) ON CONFLICT(variable) DO UPDATE SET ts = max(ts, excluded.ts)');
    this.getOne = db.prepare('SELECT ts FROM last_committed WHERE variable = ?').pluck(true);
    this.all = db.prepare('SELECT variable, ts FROM last_committed').raw(true);
  }

  /** Call inside the commit transaction with the samples it inserts (L1). One upsert per variable. */
  record(batches: ReadonlyArray<{ samples: readonly Sample[] }>): void {
    const newest = this.newest;
    newest.clear();
    for (const b of batches) {
      for (const s of b.samples) {
        if (!Number.isFinite(s.ts) || !Number.isFinite(s.value)) continue;
        const prev = newest.get(s.variable);
        if (prev === undefined || s.ts > prev) newest.set(s.variable, s.ts);
      }
    }
    for (const [variable, ts] of newest) this.upsert.run(variable, Math.trunc(ts));
    newest.clear();
  }

  /** The newest committed timestamp of `variable`, or null when it never had a sample. */
  get(variable: string): number | null {
    return (this.getOne.get(variable) as number | undefined) ?? null;
  }

  /** Every variable's newest committed timestamp. */
  snapshot(): Map<string, number> {
    return new Map(this.all.all() as Array<[string, number]>);
  }
}
