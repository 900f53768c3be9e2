import type { Database } from 'better-sqlite3';
import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';

/**
 * The WAL's backstop (B9 in src/buffer/README.md; the regular checkpoints and truncations run on
 * the maintenance schedule, capacity/disk.ts). A checkpoint copies pages back but cannot reset the
 * WAL while a reader (an operator's sqlite3 shell, `set-aside list`) holds an old snapshot, so the
 * file keeps growing. Once it is over the limit, a TRUNCATE checkpoint is tried at most every
 * second; when a reader blocks it the operator is told once, and the WAL shrinks as soon as the
 * reader lets go.
 */
export class WalBound {
  private lastCheck = 0;
  private blocked = false;
  readonly walPath: string;

  constructor(
    private readonly db: Database,
    private readonly o: { logger: Logger; clock: Clock; limitBytes: number },
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
    this.lastCheck = now;
    const size = this.bytes();
    if (size <= this.o.limitBytes) {
      this.blocked = false;
      return;
    }
    try {
      const r = this.truncate();
      if (r.busy !== 0 && !this.blocked) {
        this.blocked = true;
        this.o.logger.warn({ wal_bytes: size, limit: this.o.limitBytes }, 'another connection holds a read snapshot of the buffer; its WAL cannot shrink until that reader ends');
      } else if (r.busy === 0) this.blocked = false;
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
