import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { FileAccess } from '../../store/store.js';

/**
 * The WAL's backstop (B9 in src/buffer/README.md; the regular checkpoints and truncations run on
 * the maintenance schedule, capacity/disk.ts). A checkpoint copies pages back but cannot reset the
 * WAL while a reader (an operator's sqlite3 shell, `set-aside list`) holds an old snapshot, so the
 * file keeps growing. Once it is over the limit, a TRUNCATE checkpoint is tried at most every
 * second; when a reader blocks it for 5 s the operator is told once, and the WAL shrinks as soon as the
 * reader lets go.
 */
/**
 * A reader that blocks the TRUNCATE this long is one that holds its snapshot, worth telling the
 * operator; the import-file worker's reads (a statement of a few ms at a time) only ever meet a
 * single attempt.
 */
const BLOCKED_WARN_MS = 5_000;

export class WalBound {
  private lastCheck = 0;
  private blocked = false;
  /** Since when every TRUNCATE attempt found a reader (monotonic ms), or null. */
  private blockedSince: number | null = null;
  readonly walPath: string;

  constructor(
    private readonly db: FileAccess,
    private readonly o: {
      logger: Logger;
      clock: Clock;
      limitBytes: number;
      /** True while the checkpoint worker runs a checkpoint (capacity/checkpointer.ts): the TRUNCATE waits for it. */
      checkpointing?: () => boolean;
    },
  ) {
    this.walPath = `${db.name}-wal`;
  }

  /** Size of the WAL file in bytes (0 when there is none). */
  bytes(): number {
    try {
      return statSync(this.walPath).size;
    } catch {
      return 0;
    }
  }

  /** After a commit: a TRUNCATE checkpoint when the WAL is over its limit (at most once a second). */
  check(): void {
    const now = this.o.clock.monotonic();
    if (now - this.lastCheck < 1_000) return;
    // It would only meet the worker's checkpoint lock (busy, counted as a reader holding the WAL);
    // the commit after that checkpoint answered tries.
    if (this.o.checkpointing?.()) return;
    this.lastCheck = now;
    const size = this.bytes();
    if (size <= this.o.limitBytes) {
      this.blocked = false;
      this.blockedSince = null;
      return;
    }
    try {
      const r = this.truncate();
      if (r.busy === 0) {
        this.blockedSince = null;
        this.blocked = false;
      } else if (this.blockedSince === null) this.blockedSince = now;
      else if (!this.blocked && now - this.blockedSince >= BLOCKED_WARN_MS) {
        this.blocked = true;
        this.o.logger.warn({ wal_bytes: size, limit: this.o.limitBytes, blocked_s: Math.round((now - this.blockedSince) / 1000) }, 'another connection holds a read snapshot of the buffer; its WAL cannot shrink until that reader ends');
      }
    } catch (err) {
      this.o.logger.warn({ err: describeError(err) }, 'WAL checkpoint failed');
    }
  }

  /**
   * One TRUNCATE checkpoint that never waits: TRUNCATE waits for readers through the busy handler,
   * and ingest must never wait on a reader, so the attempt is made with no busy timeout (a blocked
   * one is simply tried again later).
   */
  truncate(): { busy: number; log: number; checkpointed: number } {
    const previous = this.db.pragma('busy_timeout', { simple: true }) as number;
    this.db.pragma('busy_timeout = 0');
    try {
      return (this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number; log: number; checkpointed: number }>)[0];
    } finally {
      this.db.pragma(`busy_timeout = ${previous}`);
    }
  }
}
