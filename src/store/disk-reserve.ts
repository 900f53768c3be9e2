import { closeSync, fsyncSync, openSync, rmSync, statfsSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { describeError } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';

/**
 * A full disk never strands the backlog (README.md S6).
 *
 * Delivering frees space only through writes: an acknowledgement deletes rows, which SQLite writes
 * to the WAL first, and opening the file needs its `-shm` (32 kB) and WAL. On a disk with no byte
 * free none of that works, so the gateway keeps a reserve: a file of `store.disk_reserve` bytes
 * beside the buffer (`<buffer.path>.reserve`), made while the disk has room. When a write meets a
 * full disk (SQLITE_FULL), or the gateway starts on one, the reserve is given back to the file
 * system at once and the store is in the disk-full state:
 *  - the sample buffer refuses new samples with that reason (they would take the pages delivery
 *    frees, and the oldest samples would never leave: import files cannot be written either);
 *  - acknowledgements' deletes, sealing and the rest go on in the reserve's room, and the WAL is
 *    not truncated (its file is room the next deletes reuse);
 *  - every CHECK_MS the free space is looked at; once the disk has the reserve and RESUME_BYTES more
 *    (the file gave pages back after the backlog drained, or somebody freed space), the reserve is
 *    made again and the state ends: intake resumes by itself.
 * The state is said once in the log when it starts and once when it ends.
 */

/** How often the free space is looked at while the disk is full. */
export const CHECK_MS = 2_000;
/** Room beyond the reserve the disk must have before intake resumes. */
export const RESUME_BYTES = 1_048_576;
/** At open, a disk with less free than this is full. */
const LOW_BYTES = 256 * 1024;
const CHUNK = 1_048_576;

export interface DiskReserveOptions {
  /** The reserve file. */
  path: string;
  /** store.disk_reserve (0: none). */
  bytes: number;
  logger: Logger;
  metrics: Metrics | null;
  /** Free bytes on the file system holding `path` (tests give their own). */
  freeBytes?: () => number;
  checkMs?: number;
}

export class DiskReserve {
  private fullSince: number | null = null;
  private fullReason = '';
  private timer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<(full: boolean) => void>();

  constructor(private readonly o: DiskReserveOptions) {}

  /** Whether the store is in the disk-full state. */
  get full(): boolean {
    return this.fullSince !== null;
  }

  /** Why, in words (the sample buffer's refusal says it), or null. */
  get reason(): string | null {
    return this.full ? this.fullReason : null;
  }

  get reserveBytes(): number {
    return this.o.bytes;
  }

  /** Bytes the reserve file holds now. */
  held(): number {
    try {
      return statSync(this.o.path).size;
    } catch {
      return 0;
    }
  }

  freeBytes(): number {
    if (this.o.freeBytes) return this.o.freeBytes();
    try {
      const s = statfsSync(dirname(this.o.path));
      return s.bavail * s.bsize;
    } catch {
      return Infinity;
    }
  }

  onChange(listener: (full: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Before the file is opened: a disk with (almost) no room is full now, and the reserve makes room to open and deliver. */
  atOpen(): void {
    if (this.freeBytes() < LOW_BYTES) this.enter('the disk was full at the start');
    else if (this.held() < this.o.bytes) this.make();
  }

  /** A write met a full disk (SQLITE_FULL), or the file could not be opened for lack of space. */
  diskFull(why: string): void {
    if (!this.full) this.enter(why);
  }

  private enter(why: string): void {
    const released = this.held();
    rmSync(this.o.path, { force: true });
    this.fullSince = Date.now();
    this.fullReason = `the disk holding ${dirname(this.o.path)} is full (${why})`;
    this.o.metrics?.storeDiskFull.set(1);
    this.o.logger.warn(
      { free_bytes: this.freeBytes(), reserve_released_bytes: released, resume_at_free_bytes: this.o.bytes + RESUME_BYTES },
      `disk full: ${this.fullReason}. The reserve (store.disk_reserve) was given back so that the backlog can still be delivered, which frees space; new samples are refused until the disk has room again`,
    );
    this.timer = setInterval(() => this.check(), this.o.checkMs ?? CHECK_MS);
    this.timer.unref();
    for (const l of this.listeners) l(true);
  }

  /** While full: once the disk has room for the reserve and RESUME_BYTES more, makes the reserve and ends the state. */
  check(): void {
    if (!this.full) return;
    const free = this.freeBytes();
    if (free < this.o.bytes + RESUME_BYTES) return;
    if (!this.make()) return;
    const seconds = Math.round((Date.now() - (this.fullSince ?? Date.now())) / 1000);
    this.fullSince = null;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.o.metrics?.storeDiskFull.set(0);
    this.o.logger.warn({ free_bytes: this.freeBytes(), full_s: seconds }, 'the disk has room again: the reserve is back and new samples are taken again');
    for (const l of this.listeners) l(false);
  }

  /** Writes the reserve file (zeros, synced); false when the disk has no room for it (nothing is left behind). */
  private make(): boolean {
    if (this.o.bytes <= 0) return true;
    let fd: number | null = null;
    try {
      fd = openSync(this.o.path, 'w');
      const zeros = Buffer.alloc(Math.min(CHUNK, this.o.bytes));
      for (let done = 0; done < this.o.bytes; ) {
        const n = writeSync(fd, zeros, 0, Math.min(zeros.length, this.o.bytes - done));
        done += n;
      }
      fsyncSync(fd);
      return true;
    } catch (err) {
      if (fd !== null) closeSync(fd);
      fd = null;
      rmSync(this.o.path, { force: true });
      if (!this.full) this.o.logger.warn({ err: describeError(err), bytes: this.o.bytes }, 'the disk reserve (store.disk_reserve) could not be made; a full disk may then keep the backlog from being delivered');
      return false;
    } finally {
      if (fd !== null) closeSync(fd);
    }
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
