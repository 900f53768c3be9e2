import type { Statement } from 'better-sqlite3';
import type { MaintenanceTask } from './maintenance.js';
import type { VariableDictionary } from './variables.js';
import type { StoreOwner } from '../store/store.js';

/**
 * Per machine variable, the newest sample timestamp ever committed to the buffer:
 * where an OPC UA historical backfill starts after a gap, and which sources had data before a
 * stop (runtime/gap-watch.ts). Kept in the buffer file (table `last_committed`, migration 3).
 *
 * Written on the maintenance schedule, not inside the group commit: one upsert per
 * variable and commit was as many row writes as the samples themselves at 100,000 variables a
 * second (a b-tree keyed by name, every commit touching a slice of it). The commit records each
 * variable's newest timestamp in memory (by dictionary id, in typed arrays: a Map by name cost 4 %
 * of the gateway at 100,000 MQTT values a second) once its transaction has committed; a
 * maintenance slice writes what changed FLUSH_MS after the oldest change, a bounded part per
 * slice; a clean close writes the rest.
 *
 * INVARIANTS
 *  L1  Never ahead of the samples: a timestamp is recorded only after the transaction holding its
 *      sample committed, and written in a later transaction, so on any file (after a power cut
 *      too: WAL frames are durable in order) the stored value names a sample that survived.
 *      It may lag: a power cut or SIGKILL loses at most the last FLUSH_MS (30 s, plus one flush)
 *      of updates, so a backfill after one re-reads up to that much history the buffer already has
 *      (a few seconds of work for a server; written every 5 s it still cost 8 % of the gateway at
 *      100,000 variables).
 *      Those are re-sends of the same (variable, timestamp, value), which the service replaces
 *      (CONTRACT.md, replace on same pair): harmless. While running, `get` is exact.
 *  L2  The stored value only grows (`max`): a backfill of older values never moves it back, so a
 *      later gap starts where live data had already reached.
 *  L3  It survives the samples' delivery: acknowledged rows leave `samples`, this row stays.
 */

/** Longest an update waits in memory before a maintenance slice writes it. */
export const FLUSH_MS = 30_000;
/** Fewest upserts a slice writes, and fewest that measure the pace. */
const MIN_PART = 256;

export class LastCommitted implements MaintenanceTask {
  readonly name = 'last_committed';
  private readonly upsert: Statement;
  private readonly getOne: Statement;
  private readonly all: Statement;
  /** Newest committed ts by variable id not yet in the table (NaN: none; L1: committed samples only). */
  private newest = new Float64Array(1024).fill(NaN);
  /** Ids with a value in `newest`, first changed first: queue[head..tail). */
  private queue = new Int32Array(1024);
  private head = 0;
  private tail = 0;
  /** performance.now() of the oldest update not yet written (Infinity when none). */
  private oldestPendingAt = Infinity;
  /** Time one upsert took in the last write (ms), to size the next part to the slice. */
  private msPerEntry = 0.004;
  private readonly writePart: (ids: Int32Array) => void;

  constructor(
    private readonly db: StoreOwner,
    private readonly dict: VariableDictionary,
    private readonly flushMs = FLUSH_MS,
  ) {
    this.upsert = db.prepare('INSERT INTO last_committed (variable, ts) VALUES (?, ?) ON CONFLICT(variable) DO UPDATE SET ts = max(ts, excluded.ts)');
    this.getOne = db.prepare('SELECT ts FROM last_committed WHERE variable = ?').pluck(true);
    this.all = db.prepare('SELECT variable, ts FROM last_committed').raw(true);
    this.writePart = (ids: Int32Array) =>
      db.write('writing last_committed', () => {
        for (const id of ids) this.upsert.run(this.dict.nameOf(id), this.newest[id]);
      });
  }

  /**
   * Call after the transaction that inserted these samples committed (L1): `ids[i]` (dictionary
   * ids) and `ts[i]` for i < n, kept in memory until a slice writes them.
   */
  record(ids: Int32Array, ts: Float64Array, n: number): void {
    if (n === 0) return;
    if (this.head === this.tail) this.oldestPendingAt = performance.now();
    for (let i = 0; i < n; i++) {
      const id = ids[i];
      if (id >= this.newest.length) this.growTo(id + 1);
      const prev = this.newest[id];
      if (prev !== prev) {
        // NaN: not pending yet
        if (this.tail === this.queue.length) this.growQueue();
        this.queue[this.tail++] = id;
        this.newest[id] = ts[i];
      } else if (ts[i] > prev) {
        this.newest[id] = ts[i];
      }
    }
  }

  /** The newest committed timestamp of `variable`, or null when it never had a sample. */
  get(variable: string): number | null {
    const stored = (this.getOne.get(variable) as number | undefined) ?? null;
    const id = this.dict.find(variable);
    const mem = id !== undefined && id < this.newest.length ? this.newest[id] : NaN;
    if (mem !== mem) return stored;
    return stored === null ? mem : Math.max(stored, mem);
  }

  /** Every variable's newest committed timestamp. */
  snapshot(): Map<string, number> {
    const out = new Map(this.all.all() as Array<[string, number]>);
    for (let i = this.head; i < this.tail; i++) {
      const id = this.queue[i];
      const name = this.dict.nameOf(id);
      const stored = out.get(name);
      if (stored === undefined || this.newest[id] > stored) out.set(name, this.newest[id]);
    }
    return out;
  }

  /** Variables whose newest timestamp is not yet in the table (status, tests). */
  get unwritten(): number {
    return this.tail - this.head;
  }

  // ---------------------------------------------------------------- MaintenanceTask

  due(): boolean {
    return this.tail > this.head && performance.now() - this.oldestPendingAt >= this.flushMs;
  }

  /** Writes pending updates, first changed first, in one transaction until `deadline`. */
  slice(deadline: number): boolean {
    this.writeUntil(deadline);
    return this.due();
  }

  describe(): string {
    return `writing ${this.unwritten} variables' newest committed timestamps`;
  }

  /** Writes everything pending (a clean close; tests). Throws what the write threw; nothing is lost from memory then. */
  flush(): void {
    while (this.tail > this.head) this.writeUntil(Infinity);
  }

  private writeUntil(deadline: number): void {
    if (this.tail === this.head) return;
    // As many as fit the slice at the last measured pace (at least MIN_PART); dropped from the
    // queue only after their transaction committed, so a failed write (a full disk) keeps them.
    const fit = Number.isFinite(deadline) ? Math.max(MIN_PART, Math.floor((deadline - performance.now()) / this.msPerEntry)) : Infinity;
    const end = Math.min(this.tail, this.head + fit);
    const ids = this.queue.subarray(this.head, end);
    const t0 = performance.now();
    this.writePart(ids);
    if (ids.length >= MIN_PART) {
      // Up at once, down slowly: the upserts' cost swings with the page cache (2–9 µs each at
      // 100,000 variables), and sizing a part by one quick write made the next overrun its slice
      // (up to 160 ms).
      const now = Math.max(0.0005, (performance.now() - t0) / ids.length);
      this.msPerEntry = now > this.msPerEntry ? now : 0.8 * this.msPerEntry + 0.2 * now;
    }
    for (const id of ids) this.newest[id] = NaN;
    this.head = end;
    if (this.head === this.tail) {
      this.head = this.tail = 0;
      this.oldestPendingAt = Infinity;
    } else {
      // The rest is due at once: it waited as long as what was just written.
      this.oldestPendingAt = performance.now() - this.flushMs;
    }
  }

  private growTo(size: number): void {
    let n = this.newest.length;
    while (n < size) n *= 2;
    const next = new Float64Array(n).fill(NaN);
    next.set(this.newest);
    this.newest = next;
  }

  private growQueue(): void {
    if (this.head > 0) {
      this.queue.copyWithin(0, this.head, this.tail);
      this.tail -= this.head;
      this.head = 0;
      if (this.tail < this.queue.length) return;
    }
    const next = new Int32Array(this.queue.length * 2);
    next.set(this.queue);
    this.queue = next;
  }
}
