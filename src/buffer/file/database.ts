import BetterSqlite3, { type Database } from 'better-sqlite3';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { describeError, errorCode, GatewayError } from '../../core/errors.js';
import { migrate } from './migrations.js';

export interface OpenOptions {
  synchronous: 'full' | 'normal';
  logger: Logger;
  /** Run `PRAGMA integrity_check` at open (default true). */
  integrityCheck?: boolean;
  /** Called with the path a damaged database was moved to. */
  onRecovered?: (movedTo: string, reason: string) => void;
  /** WAL size above which a checkpoint truncates it (bytes). */
  walLimitBytes?: number;
}

export interface OpenedDatabase {
  db: Database;
  path: string;
  /** Set when the previous file failed its check and was moved aside. */
  recovered: { movedTo: string; reason: string } | null;
}

/**
 * Opens (creating if needed) the buffer database with the pragmas the invariants rely on, checks
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
  return { db, path, recovered };
}

function openAndCheck(path: string, options: OpenOptions): Database {
  const db = new BetterSqlite3(path, { timeout: 5_000 });
  try {
    // Fails with SQLITE_NOTADB on a file that is not a database.
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    // Truncate the WAL back to this size after a checkpoint so it cannot grow without bound.
    db.pragma(`journal_size_limit = ${options.walLimitBytes ?? 64 * 1024 * 1024}`);
    db.pragma('temp_store = MEMORY');
    // 8 MB page cache: the hot pages are the newest (ingest, live claims) and sequential old ones
    // (import files); more cache only adds RSS (bench/memory.ts).
    db.pragma('cache_size = -8000');
    if (options.integrityCheck !== false) {
      const rows = db.pragma('integrity_check') as Array<{ integrity_check: string }>;
      const problems = rows.map((r) => r.integrity_check).filter((s) => s !== 'ok');
      if (problems.length > 0) throw new IntegrityError(`integrity_check failed: ${problems.slice(0, 3).join('; ')}`);
    }
    migrate(db);
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
