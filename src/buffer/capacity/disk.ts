import type { Statement } from 'better-sqlite3';
import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { describeError } from '../../core/errors.js';
import type { Metrics } from '../../core/metrics.js';
import type { MaintenanceTask } from '../maintenance.js';
import type { DiskUsage } from '../../store/usage.js';
import type { Checkpointer } from './checkpointer.js';
import type { WalBound } from './wal.js';
import type { FileAccess } from '../../store/store.js';

/**
 * Giving disk back (src/buffer/README.md B9). What the file uses is counted by the store
 * (src/store/usage.ts: pages in use and free; space.ts: per owner, the samples' bytes being what
 * buffer.max_bytes limits).
 *
 * Keeps B9:
 *  - Free pages that no write has reused for buffer.return_free_after (1 min) are returned to the file system by
 *    `PRAGMA incremental_vacuum` (the file is in auto_vacuum=INCREMENTAL mode: src/store/file/database.ts),
 *    a maintenance slice at a time (B7), down to buffer.keep_free. Pages that the next samples will
 *    take (drop_oldest's headroom at max_bytes, a sealing step's churn) stay: they are reused
 *    within the minute, so the file does not shrink and regrow on every cycle.
 *  - The WAL is truncated (a TRUNCATE checkpoint, never waiting for a reader) once no commit came
 *    for WAL_IDLE_MS, and every WAL_TRUNCATE_EVERY_MS while it is over WAL_SOFT_BYTES: a trickle
 *    of samples keeps it small. While samples pour in it stays at most the automatic checkpoint's
 *    interval (1,000 pages, ~4 MB) plus one transaction; journal_size_limit cuts it back to 4 MB
 *    after each checkpoint.
 *  - Checkpoints are asked for here too, not inside commits: SQLite's automatic checkpoint (which
 *    copies the WAL back into the file and syncs it, tens to hundreds of ms) ran inside whichever
 *    commit crossed 1,000 pages, so now and then a group commit and its acknowledgements waited
 *    for it. The buffer turns it off (sample-buffer.ts) and this task asks for a PASSIVE
 *    checkpoint every CHECKPOINT_EVERY_MS after writes; it runs on a worker thread with a
 *    connection of its own (checkpointer.ts; on the main thread it took 87–114 ms each second at
 *    100,000 variables/s in a CPU profile, issue 25), on the main thread only when that worker
 *    cannot run. A TRUNCATE here waits while that checkpoint runs. WalBound stays the backstop (a
 *    TRUNCATE checkpoint after a commit once the WAL is over 64 MB, e.g. when a reader held it
 *    back).
 *  - A vacuum step is one transaction: a power cut leaves the file before or after it. Its kill
 *    point for the crash harness is the `buffer_vacuum_step` log line right before it.
 * So once the free pages have been unused for a minute (and the steps have run: a few MB a second),
 * the file is at most the bytes in use + keep_free, and the WAL is empty when idle.
 */

/** Free pages must have stayed unused this long before they are returned (buffer.return_free_after). */
export const DEFAULT_RETURN_AFTER_MS = 60_000;
/** With no commit for this long, the WAL is truncated. */
export const WAL_IDLE_MS = 2_000;
/**
 * A WAL over this size is truncated every WAL_TRUNCATE_EVERY_MS even while commits go on. Its bytes
 * count in what the buffer takes: 256 kB left after a seal or a merge stayed all through a trickle
 * (0.6 B/sample on a 400k-sample buffer, bench/buffer-footprint.ts); a TRUNCATE every 10 s costs
 * a checkpoint of the few pages written since the last one.
 */
export const WAL_SOFT_BYTES = 32 * 1024;
export const WAL_TRUNCATE_EVERY_MS = 10_000;
/** Pages of the first vacuum step; later ones are sized to the slice from measured steps. */
const FIRST_STEP_PAGES = 256;
/** After writes, a checkpoint runs at most this often. */
export const CHECKPOINT_EVERY_MS = 1_000;
/** A WAL truncation blocked by a reader is tried again after this long. */
const WAL_RETRY_MS = 30_000;

export interface DiskReturnOptions {
  keepFreeBytes: number;
  returnAfterMs: number;
  logger: Logger;
  metrics: Metrics;
  usage: DiskUsage;
  wal: WalBound;
  /** performance.now() of the last commit (the WAL is truncated once it is idle). */
  lastCommitAt: () => number;
  /** After a step changed what the file takes (gauges). */
  changed: () => void;
  /** Runs the PASSIVE checkpoints (on its worker thread when it can). */
  checkpointer: Pick<Checkpointer, 'request' | 'running'>;
  /** While the disk is full (src/store/README.md S6) the WAL is not truncated: its file is the room the next deletes reuse. */
  diskFull?: () => boolean;
}

/** Gives free pages and the WAL back to the file system, as a maintenance task (B7, B9). */
export class DiskReturn implements MaintenanceTask {
  readonly name = 'disk';
  /** Whether the file is in auto_vacuum=INCREMENTAL mode (files of earlier versions until converted). */
  readonly incremental: boolean;
  /** Free-page counts seen over the last returnAfterMs, oldest first. */
  private seen: Array<{ at: number; free: number }> = [];
  private lastLook = -Infinity;
  private msPerPage = 0;
  private walRetryAt = 0;
  private walTruncatedAt = -Infinity;
  private wroteAt = -Infinity;
  private checkpointedAt = -Infinity;

  constructor(
    private readonly db: FileAccess,
    private readonly o: DiskReturnOptions,
  ) {
    this.incremental = (db.pragma('auto_vacuum', { simple: true }) as number) === 2;
  }

  /** Pages that stayed free for returnAfterMs, beyond keep_free. */
  returnable(): number {
    if (!this.incremental) return 0;
    const now = performance.now();
    if (now - this.lastLook >= Math.min(1_000, this.o.returnAfterMs / 10)) {
      this.lastLook = now;
      this.seen.push({ at: now, free: this.o.usage.freePages() });
      while (this.seen.length > 1 && this.seen[1].at <= now - this.o.returnAfterMs) this.seen.shift();
    }
    if (this.seen.length === 0 || this.seen[0].at > now - this.o.returnAfterMs) return 0;
    let low = Infinity;
    for (const s of this.seen) low = Math.min(low, s.free);
    const keep = Math.ceil(this.o.keepFreeBytes / this.o.usage.pageSize);
    return Math.max(0, Math.min(low, this.o.usage.freePages()) - keep);
  }

  /** Everything here runs on real time (performance.now()): it paces I/O, and "unused for a minute" is a minute of the machine's. */
  private walWanted(): boolean {
    const now = performance.now();
    if (now < this.walRetryAt) return false;
    if (this.o.diskFull?.()) return false;
    // The worker's checkpoint holds SQLite's checkpoint lock: a TRUNCATE now would only answer
    // busy and be put off for WAL_RETRY_MS as if a reader held the WAL. It runs once that answered.
    if (this.o.checkpointer.running) return false;
    const bytes = this.o.wal.bytes();
    if (bytes === 0) return false;
    return now - this.o.lastCommitAt() >= WAL_IDLE_MS || (bytes > WAL_SOFT_BYTES && now - this.walTruncatedAt >= WAL_TRUNCATE_EVERY_MS);
  }

  describe(): string {
    return this.walWanted() ? 'WAL truncation' : this.checkpointWanted() ? 'checkpoint' : `vacuum (${this.returnable()} pages returnable)`;
  }

  /** After any commit (group commit, a maintenance job): a checkpoint is due within CHECKPOINT_EVERY_MS. */
  wrote(): void {
    this.wroteAt = performance.now();
  }

  private checkpointWanted(): boolean {
    return this.wroteAt > this.checkpointedAt && performance.now() - this.checkpointedAt >= CHECKPOINT_EVERY_MS;
  }

  due(): boolean {
    return this.checkpointWanted() || this.returnable() > 0 || this.walWanted();
  }

  slice(deadline: number): boolean {
    if (this.walWanted()) this.truncateWal();
    else if (this.checkpointWanted()) this.checkpoint();
    else {
      const pages = this.returnable();
      if (pages > 0) this.vacuumStep(pages, deadline);
    }
    return this.due();
  }

  /**
   * A PASSIVE checkpoint: copies what it can back into the file, never waits for a reader. Asked of
   * the checkpointer's worker; when the previous one is still running this one is skipped (the
   * next falls due CHECKPOINT_EVERY_MS later). It changes nothing a commit made durable (B1, B9):
   * see checkpointer.ts.
   */
  private checkpoint(): void {
    this.checkpointedAt = performance.now();
    this.o.checkpointer.request();
  }

  /** One `incremental_vacuum` step, sized to the time left in the slice. */
  private vacuumStep(returnable: number, deadline: number): void {
    const budget = Math.max(1, deadline - performance.now());
    const n = Math.max(16, Math.min(returnable, this.msPerPage > 0 ? Math.floor((budget * 0.7) / this.msPerPage) : FIRST_STEP_PAGES));
    const before = this.o.usage.freePages();
    this.o.logger.debug({ event: 'buffer_vacuum_step', pages: n, free_pages: before }, 'returning free pages to the file system');
    const started = performance.now();
    this.wrote();
    try {
      // A pragma takes no bound parameter; n is an integer computed here.
      this.db.pragma(`incremental_vacuum(${Math.floor(n)})`);
    } catch (err) {
      this.o.logger.warn({ err: describeError(err) }, 'returning free pages to the file system failed; it is tried again later');
      this.seen = [];
      return;
    }
    const ms = performance.now() - started;
    const returned = Math.max(0, before - this.o.usage.freePages());
    if (returned > 0) {
      this.msPerPage = this.msPerPage > 0 ? 0.7 * this.msPerPage + (0.3 * ms) / returned : ms / returned;
      this.o.metrics.bufferDiskReturnedBytes.inc(returned * this.o.usage.pageSize);
      // Those pages are gone: the free counts seen before shrink by them.
      for (const s of this.seen) s.free = Math.max(0, s.free - returned);
    }
    this.o.changed();
  }

  private truncateWal(): void {
    try {
      const r = this.o.wal.truncate();
      this.walTruncatedAt = performance.now();
      if (r.busy === 0) this.checkpointedAt = this.walTruncatedAt;
      if (r.busy !== 0) this.walRetryAt = performance.now() + WAL_RETRY_MS;
      this.o.changed();
    } catch (err) {
      this.walRetryAt = performance.now() + WAL_RETRY_MS;
      this.o.logger.warn({ err: describeError(err) }, 'WAL checkpoint failed');
    }
  }
}
