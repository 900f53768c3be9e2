import BetterSqlite3, { type Database } from 'better-sqlite3';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { describeError, errorCode, GatewayError } from '../../core/errors.js';
import { migrate, type OwnerSchema } from '../migrations.js';

export interface OpenOptions {
  synchronous: 'full' | 'normal';
  /** The owners' schemas (migrations.ts): the file is brought to their version at open. */
  schemas: readonly OwnerSchema[];
  /**
   * Keep SQLite's locks for this connection alone (`locking_mode = EXCLUSIVE` before WAL): the
   * WAL index then lives in the process's memory instead of the `-shm` file, which a full disk
   * cannot create (src/store/README.md S6). Other connections to the file (the checkpoint worker,
   * the import-file reader) then cannot open it and their work stays on the main thread or waits.
   */
  exclusive?: boolean;
  logger: Logger;
  /** Run `PRAGMA integrity_check` at open (default true). */
  integrityCheck?: boolean;
  /** Called with the path a damaged database was moved to. */
  onRecovered?: (movedTo: string, reason: string) => void;
  /** WAL size a checkpoint cuts it back to (journal_size_limit, bytes; default 4 MB). */
  walLimitBytes?: number;
  /**
   * A file of an earlier version (auto_vacuum off) is converted at open when it holds at most this
   * many bytes in use (default CONVERT_AT_OPEN_MAX_BYTES); a larger one at a later start.
   */
  convertMaxBytes?: number;
  /** Page size of a NEW file (default NEW_FILE_PAGE_SIZE); an existing file keeps its own. */
  pageSize?: number;
}

/**
 * Page size of a file this version creates. A b-tree takes at least one page even when empty, and
 * the buffer's schema has about twenty (most of them empty most of the time: set_aside, the import
 * ledger, the annotation outbox...): with 4 KB pages they alone took ~0.25 bytes per sample of a
 * 400k-sample buffer, a tenth of the footprint budget of 2.5. Smaller pages also leave less empty
 * space at the end of the chunk table's leaf pages and of the live row tail. 2 KB rather than 1 KB:
 * a chunk (up to ~10 KB) then spans a handful of overflow pages, not ten, and the live rows' b-tree
 * stays as shallow (bench/buffer-footprint.ts, bench/commit-latency.ts). Files of earlier versions
 * keep their page size (SQLite fixes it at the first write; changing it needs a full rewrite).
 */
export const NEW_FILE_PAGE_SIZE = 2_048;

/**
 * Files of earlier versions have auto_vacuum off, so their free pages cannot be returned to the
 * file system in steps (capacity/disk.ts). Switching needs the whole file rewritten once; that is
 * done at open (before ingest starts) when the file holds at most this much: a few seconds.
 */
export const CONVERT_AT_OPEN_MAX_BYTES = 256 * 1024 * 1024;

export interface OpenedDatabase {
  db: Database;
  path: string;
  /** Set when the previous file failed its check and was moved aside. */
  recovered: { movedTo: string; reason: string } | null;
}

/**
 * Opens (creating if needed) the buffer database with the pragmas the invariants rely on (B1:
 * WAL and synchronous; B9: auto_vacuum=INCREMENTAL, converting a small file of an earlier version
 * once, and a WAL cut back to 4 MB after checkpoints), checks
 * its integrity, and migrates it. A file that cannot be opened or fails `PRAGMA integrity_check` is
 * moved aside with its WAL and SHM (never deleted: the operator may still recover rows from it with
 * the sqlite3 shell) and a fresh database is created so ingest resumes.
 */
export function openBufferDatabase(file: string, options: OpenOptions): OpenedDatabase {
  const path = resolve(file);
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (err) {
    throw new GatewayError(errorCode(err, 'BUFFER_OPEN_FAILED'), `buffer.path: the folder ${dirname(path)} cannot be created (${errorCode(err, 'error')}); the gateway's user needs write access there`, { cause: err });
  }
  let recovered: OpenedDatabase['recovered'] = null;
  let db: Database;
  try {
    db = openAndCheck(path, options);
  } catch (err) {
    if (!isDamage(err)) {
      // A healthy file that cannot be used right now (locked by another process, no permission, a
      // newer schema) must never be moved aside: stop and say why.
      throw new GatewayError(errorCode(err, 'BUFFER_OPEN_FAILED'), `buffer.path: ${path} cannot be opened: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const reason = describeError(err);
    const movedTo = moveAside(path);
    recovered = { movedTo, reason };
    options.logger.error({ path, moved_to: movedTo, reason }, 'buffer database is damaged: moved aside and started a fresh one; the old file is kept for inspection');
    options.onRecovered?.(movedTo, reason);
    db = openAndCheck(path, { ...options, integrityCheck: false });
  }
  if ((db.pragma('auto_vacuum', { simple: true }) as number) !== 2) db = convertForIncrementalVacuum(db, path, options);
  return { db, path, recovered };
}

function openAndCheck(path: string, options: OpenOptions): Database {
  // A conversion cut short by a crash or a power cut leaves its copy behind; the file itself is
  // whole (the copy replaces it only by an atomic rename).
  if (existsSync(`${path}.convert`)) rmSync(`${path}.convert`, { force: true });
  const db = new BetterSqlite3(path, { timeout: 5_000 });
  try {
    // Before the first read of the file: only then does SQLite keep the WAL index in memory.
    if (options.exclusive) db.pragma('locking_mode = EXCLUSIVE');
    // A new file (no page written yet) gets the page size of NEW_FILE_PAGE_SIZE: it must be set
    // before the first page is written (auto_vacuum and journal_mode below write page 1). On an
    // existing file the pragma would only take effect at a VACUUM, which the conversion below runs
    // (VACUUM INTO), so it is not issued there: an existing file keeps its page size.
    const fresh = (db.pragma('page_count', { simple: true }) as number) === 0;
    if (fresh) db.pragma(`page_size = ${options.pageSize ?? NEW_FILE_PAGE_SIZE}`);
    // A new file gives free pages back in steps (capacity/disk.ts): set before its first page is
    // written, which `journal_mode = WAL` does. An existing file keeps its mode (a file of an
    // earlier version is converted below); setting it there would write page 1, which a full disk
    // refuses (src/store/README.md S6). Reading it fails with SQLITE_NOTADB on a file that is not
    // a database.
    if (fresh) db.pragma('auto_vacuum = INCREMENTAL');
    else db.pragma('auto_vacuum', { simple: true });
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    // After a checkpoint the WAL is cut back to this size, so what it takes on disk stays near
    // what one checkpoint interval (1,000 pages) writes (B9).
    db.pragma(`journal_size_limit = ${options.walLimitBytes ?? 4 * 1024 * 1024}`);
    db.pragma('temp_store = MEMORY');
    // 8 MB page cache: the hot pages are the newest (ingest, live claims) and sequential old ones
    // (import files); more cache only adds RSS (bench/memory.ts).
    db.pragma('cache_size = -8000');
    if (options.integrityCheck !== false) {
      const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      const problems = rows.map((r) => r.integrity_check).filter((s) => s !== 'ok');
      if (problems.length > 0) throw new IntegrityError(`integrity_check failed: ${problems.slice(0, 3).join('; ')}`);
    }
    migrate(db, options.schemas);
    return db;
  } catch (err) {
    try {
      db.close();
    } catch {
      // already broken; the caller moves the file aside
    }
    throw err;
  }
}

/**
 * Rewrites a file of an earlier version with auto_vacuum=INCREMENTAL (B9), when it is small enough
 * and the disk has room for the copy: `VACUUM INTO` a copy beside it (it takes the pending
 * auto_vacuum setting), the copy's data and then its directory entry made durable (fsync), the old
 * connection closed (a checkpoint empties its WAL first, so no old WAL is left to replay onto the
 * copy), the copy renamed over the file (atomic), the directory made durable again, the file
 * reopened. A power cut before the rename leaves the old file and a copy that the next open deletes;
 * after it, the converted file. Returns the connection to use.
 */
function convertForIncrementalVacuum(db: Database, path: string, options: OpenOptions): Database {
  const limit = options.convertMaxBytes ?? CONVERT_AT_OPEN_MAX_BYTES;
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const used = ((db.pragma('page_count', { simple: true }) as number) - (db.pragma('freelist_count', { simple: true }) as number)) * pageSize;
  if (used > limit) {
    options.logger.warn(
      { path, used_bytes: used, convert_max_bytes: limit },
      `buffer.path: ${path} was created by an earlier version and cannot give free space back to the disk until it is converted once; that happens at a start when it holds at most ${limit} bytes (now ${used})`,
    );
    return db;
  }
  let free = Infinity;
  try {
    const fs = statfsSync(dirname(path));
    free = fs.bavail * fs.bsize;
  } catch {
    // unknown: try
  }
  if (free < used * 1.2 + 16 * 1024 * 1024) {
    options.logger.warn({ path, used_bytes: used, disk_free_bytes: free }, `buffer.path: not converting ${path} to give free space back: the disk has too little room for the one-time copy; tried again at the next start`);
    return db;
  }
  const copy = `${path}.convert`;
  const started = performance.now();
  try {
    db.pragma('auto_vacuum = INCREMENTAL');
    db.prepare('VACUUM INTO ?').run(copy);
    fsyncPath(copy);
    fsyncPath(dirname(path));
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    renameSync(copy, path);
    fsyncPath(dirname(path));
  } catch (err) {
    rmSync(copy, { force: true });
    options.logger.warn({ path, err: describeError(err) }, `buffer.path: converting ${path} to give free space back failed; the file is used as it is and the conversion is tried again at the next start`);
    return db.open ? db : openAndCheck(path, { ...options, integrityCheck: false });
  }
  const reopened = openAndCheck(path, { ...options, integrityCheck: false });
  options.logger.info({ path, used_bytes: used, ms: Math.round(performance.now() - started) }, 'buffer file converted once so that it can give free space back to the disk (auto_vacuum = incremental)');
  return reopened;
}

/** fsync of a file or a directory (a rename is durable once its directory is). */
function fsyncPath(p: string): void {
  const fd = openSync(p, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Errors that mean the file's content is broken (as opposed to the file being busy or unreadable). */
function isDamage(err: unknown): boolean {
  if (err instanceof IntegrityError) return true;
  const code = (err as { code?: unknown }).code;
  return code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB' || (typeof code === 'string' && code.startsWith('SQLITE_CORRUPT_'));
}

class IntegrityError extends Error {}

/** Renames `path` (and `-wal`, `-shm`) to `path.damaged-<timestamp>`; returns the new main path. */
function moveAside(path: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  let target = `${path}.damaged-${stamp}`;
  for (let i = 1; existsSync(target); i++) target = `${path}.damaged-${stamp}-${i}`;
  for (const suffix of ['', '-wal', '-shm']) {
    if (existsSync(path + suffix)) renameSync(path + suffix, target + suffix);
  }
  return target;
}
