import BetterSqlite3, { type Database } from 'better-sqlite3';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, resolve } from 'node:path';
import { errorCode, GatewayError } from '../../core/errors.js';

/**
 * One gateway per buffer file. Two gateways on one file would both claim and send the same rows
 * (the in-memory claims of B4 are per process) and both manage the same import jobs. Keeps B6
 * (src/buffer/README.md).
 *
 * The lock is a small SQLite file beside the buffer (`<buffer.path>.lock`) held with
 * `locking_mode = EXCLUSIVE` after `BEGIN EXCLUSIVE`: SQLite then keeps its exclusive POSIX lock on
 * the file until the connection closes, without writing anything for it. The kernel drops that lock when the process ends in any way
 * (SIGKILL, power cut, OOM kill), so there is never a stale lock to clean up by hand, unlike a PID
 * file. It works across containers that share the volume on one host; it is not meant for network
 * file systems (neither is the buffer itself).
 *
 * A locked database cannot be read, so who holds the lock is written into the buffer's own `meta`
 * table (the store notes it at open, store.ts `noteHolder`) where a refused second gateway can read it for its error message.
 */

export interface BufferOwnerInfo {
  pid: number;
  host: string;
  started_at: string;
}

export interface BufferOwner {
  readonly lockPath: string;
  /** Gives the buffer file up (closing the connection drops the lock). Safe to call twice. */
  release(): void;
}

export function lockPathFor(bufferPath: string): string {
  return `${resolve(bufferPath)}.lock`;
}

/**
 * Takes ownership of the buffer at `bufferPath` or throws `BUFFER_IN_USE` naming the setting, the
 * file and, when known, the process that holds it. `waitMs` covers a predecessor that is still
 * shutting down (a restart by systemd or the container engine).
 */
export function acquireBufferOwner(bufferPath: string, options: { waitMs?: number } = {}): BufferOwner {
  const lockPath = lockPathFor(bufferPath);
  let db: Database;
  try {
    db = lockOnce(lockPath, options.waitMs ?? 2_000);
  } catch (err) {
    const code = errorCode(err, '');
    if (code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')) {
      // The lock file holds nothing of value; one that is not a database is replaced.
      for (const suffix of ['', '-journal']) rmSync(lockPath + suffix, { force: true });
      db = lockOnce(lockPath, options.waitMs ?? 2_000);
    } else if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
      throw inUseError(bufferPath, lockPath, err);
    } else {
      throw new GatewayError(errorCode(err, 'BUFFER_LOCK_FAILED'), `buffer.path: the lock file ${lockPath} cannot be created or locked (${err instanceof Error ? err.message : String(err)}); the gateway's user needs write access to the buffer's folder`, { cause: err });
    }
  }
  let held = true;
  return {
    lockPath,
    release() {
      if (!held) return;
      held = false;
      db.close();
    },
  };
}

function lockOnce(lockPath: string, waitMs: number): Database {
  mkdirSync(dirname(lockPath), { recursive: true });
  const db = new BetterSqlite3(lockPath, { timeout: waitMs });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // BEGIN EXCLUSIVE takes the exclusive lock at once, and in EXCLUSIVE locking mode it is kept
    // after COMMIT. Nothing is written for it: a start on a full disk (src/store/README.md S6)
    // must not fail here, where the lock file and its journal would need new space.
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
  } catch (err) {
    try {
      db.close();
    } catch {
      // nothing more to release
    }
    throw err;
  }
  noteHolder(db);
  return db;
}

/**
 * Notes who holds the lock in the lock file, when the disk has room for it. The lock is held
 * either way; a refused second gateway reads the holder from the buffer's `meta` (the store notes it there too).
 */
function noteHolder(db: Database): void {
  try {
    db.exec('BEGIN');
    db.exec('CREATE TABLE IF NOT EXISTS owner (pid INTEGER NOT NULL, host TEXT NOT NULL, started_at TEXT NOT NULL)');
    db.exec('DELETE FROM owner');
    db.prepare('INSERT INTO owner VALUES (?, ?, ?)').run(process.pid, hostname(), new Date().toISOString());
    db.exec('COMMIT');
  } catch {
    // A full disk: the lock is held all the same.
    if (db.inTransaction) db.exec('ROLLBACK');
  }
}

function inUseError(bufferPath: string, lockPath: string, cause: unknown): GatewayError {
  const owner = readBufferOwner(bufferPath);
  const who = owner ? `edge-gateway pid ${owner.pid} on ${owner.host}, running since ${owner.started_at}` : `another edge-gateway (see ${lockPath})`;
  return new GatewayError(
    'BUFFER_IN_USE',
    `buffer.path: ${resolve(bufferPath)} is in use by ${who}. Only one gateway may use a buffer file: stop the other one, or give this one its own buffer.path`,
    { cause, details: owner ? { ...owner } : undefined },
  );
}

/** The row the store writes into the buffer's `meta` at open: who holds the file. */
export const RECORD_OWNER_SQL = "INSERT INTO meta (key, value) VALUES ('owner', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value";

/** Who holds the file now, as the store notes it. */
export function ownerInfoNow(): BufferOwnerInfo {
  return { pid: process.pid, host: hostname(), started_at: new Date().toISOString() };
}

/** The owner last recorded in the buffer file, or null when unknown or unreadable. */
export function readBufferOwner(bufferPath: string): BufferOwnerInfo | null {
  const path = resolve(bufferPath);
  if (!existsSync(path)) return null;
  try {
    const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true, timeout: 500 });
    try {
      const raw = db.prepare("SELECT value FROM meta WHERE key = 'owner'").pluck().get() as string | undefined;
      if (!raw) return null;
      const v = JSON.parse(raw) as Partial<BufferOwnerInfo>;
      return typeof v.pid === 'number' && typeof v.host === 'string' && typeof v.started_at === 'string' ? { pid: v.pid, host: v.host, started_at: v.started_at } : null;
    } finally {
      db.close();
    }
  } catch {
    return null;
  }
}

/**
 * For tools that work on the buffer file directly and must not while a gateway runs on it: true
 * when a gateway holds the file. Takes the lock for an instant only when nobody holds it.
 */
export function bufferOwnedByRunningGateway(bufferPath: string): boolean {
  if (!existsSync(lockPathFor(bufferPath))) return false;
  try {
    acquireBufferOwner(bufferPath, { waitMs: 0 }).release();
    return false;
  } catch (err) {
    return errorCode(err, '') === 'BUFFER_IN_USE';
  }
}
