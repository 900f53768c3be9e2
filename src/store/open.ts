import type { Database } from 'better-sqlite3';
import type { Logger } from 'pino';
import { describeError, errorCode } from '../core/errors.js';
import type { Metrics } from '../core/metrics.js';
import { DiskReserve } from './disk-reserve.js';
import { openBufferDatabase } from './file/database.js';
import { acquireBufferOwner, type BufferOwner } from './file/owner-lock.js';
import type { OwnerSchema } from './migrations.js';
import { Store } from './store.js';

export interface OpenStoreOptions {
  /** buffer.path: the file. */
  path: string;
  synchronous: 'full' | 'normal';
  schemas: readonly OwnerSchema[];
  /** Bound of each owner (bytes). */
  limits: Readonly<Record<string, number>>;
  /** store.disk_reserve (bytes; 0: none). */
  reserveBytes: number;
  logger: Logger;
  metrics: Metrics;
  /** How often the free space is looked at while the disk is full (tests). */
  diskCheckMs?: number;
}

export interface OpenedStore {
  store: Store;
  /** Set when the previous file failed its check and was moved aside. */
  recovered: { movedTo: string; reason: string } | null;
  /** Gives the file up: closes the store and drops the one-gateway lock. Safe to call twice. */
  close(): void;
}

/**
 * Opens the gateway's file for this process (README.md): the one-gateway lock first (so a second
 * gateway neither migrates nor moves aside a file another one uses), the disk reserve, the file
 * (moved aside when damaged), the migrations, who holds it. On a full disk (S6) none of this needs
 * new space: the lock writes nothing, the reserve is given back before the file is opened, and a
 * file that still cannot get its shared-memory index opens with the index in memory.
 */
export function openStore(o: OpenStoreOptions): OpenedStore {
  const lock = acquireBufferOwner(o.path);
  const reserve = new DiskReserve({ path: `${o.path}.reserve`, bytes: o.reserveBytes, logger: o.logger, metrics: o.metrics, checkMs: o.diskCheckMs });
  let store: Store | null = null;
  try {
    reserve.atOpen();
    const opened = openFile(o, reserve);
    try {
      store = new Store(opened.db, { schemas: o.schemas, limits: o.limits, logger: o.logger, metrics: o.metrics, reserve });
    } catch (err) {
      opened.db.close();
      throw err;
    }
    store.noteHolder();
    const s = store;
    return {
      store: s,
      recovered: opened.recovered,
      close() {
        try {
          s.close();
        } finally {
          lock.release();
        }
      },
    };
  } catch (err) {
    reserve.close();
    store?.close();
    lock.release();
    throw err;
  }
}

/** The file, with the reserve given back and, last, the WAL index in memory when the disk has no room. */
function openFile(o: OpenStoreOptions, reserve: DiskReserve): { db: Database; recovered: OpenedStore['recovered'] } {
  const options = { synchronous: o.synchronous, schemas: o.schemas, logger: o.logger, onRecovered: () => o.metrics.bufferRecoveredDatabases.inc() };
  try {
    return openBufferDatabase(o.path, options);
  } catch (err) {
    if (!lacksSpace(err)) throw err;
    reserve.diskFull(`the file could not be opened: ${codeOf(err)}`);
  }
  try {
    return openBufferDatabase(o.path, options);
  } catch (err) {
    if (!lacksSpace(err)) throw err;
    o.logger.warn({ err: describeError(err) }, 'the disk has no room for the buffer file\'s shared-memory index: the file is opened with the index in memory (one connection only: checkpoints and import files run on the main thread until a restart with room)');
    return openBufferDatabase(o.path, { ...options, exclusive: true });
  }
}

function codeOf(err: unknown): string {
  const cause = (err as { cause?: unknown }).cause;
  return errorCode(cause ?? err, errorCode(err, 'error'));
}

/** SQLite's answers when the disk has no room (the error or its cause). */
function lacksSpace(err: unknown): boolean {
  const code = codeOf(err);
  return code === 'SQLITE_FULL' || code === 'SQLITE_IOERR_SHMSIZE' || code === 'SQLITE_IOERR_SHMMAP' || code === 'SQLITE_IOERR_WRITE';
}
