import type { Database } from 'better-sqlite3';

/**
 * Schema of the buffer file, as ordered migrations keyed by `PRAGMA user_version`. A migration is
 * never edited once released; a change is a new step at the end.
 */
const MIGRATIONS: Array<{ version: number; up: string }> = [
  {
    version: 1,
    up: `
      CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

      -- Dictionary of machine variable ids, so a sample row stores a small integer.
      CREATE TABLE variables (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);

      -- Unsent samples in arrival order. seq is assigned by the buffer from meta.next_seq and is
      -- never reused (see the invariants in sample-buffer.ts).
      CREATE TABLE samples (
        seq   INTEGER PRIMARY KEY,
        var   INTEGER NOT NULL,
        ts    INTEGER NOT NULL,
        value REAL    NOT NULL
      );

      -- Samples the service refused (400 on a lone item, or an import job's rejected item), kept
      -- for the operator with the service's message (CONTRACT.md error table, "invalid payload").
      CREATE TABLE set_aside (
        id         INTEGER PRIMARY KEY,
        variable   TEXT,
        ts         INTEGER,
        value      REAL,
        path       TEXT NOT NULL,       -- 'sync' or 'import'
        reason     TEXT NOT NULL,       -- the service's message
        detail     TEXT,                -- JSON as it came (import job error objects), or null
        job_id     TEXT,
        request_id TEXT,
        created_at INTEGER NOT NULL
      );

      -- Import-job ledger: one row per job, covering the seq range [seq_from, seq_to] of samples.
      CREATE TABLE import_jobs (
        id          INTEGER PRIMARY KEY,
        seq_from    INTEGER NOT NULL,
        seq_to      INTEGER NOT NULL,
        state       TEXT NOT NULL,      -- building | built | uploading | submitted
        item_count  INTEGER,
        file_path   TEXT,
        file_bytes  INTEGER,
        job_id      TEXT,
        attempts    INTEGER NOT NULL DEFAULT 0,
        last_error  TEXT,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
      );

      -- Ranges that failed as import jobs twice: only the sync path (with poison isolation) may
      -- send them.
      CREATE TABLE sync_only_ranges (seq_from INTEGER NOT NULL, seq_to INTEGER NOT NULL, PRIMARY KEY (seq_from)) WITHOUT ROWID;
    `,
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** Registers an extra migration from another component (the annotation outbox). */
export function migrationsFor(extra: Array<{ version: number; up: string }> = []): Array<{ version: number; up: string }> {
  return [...MIGRATIONS, ...extra].sort((a, b) => a.version - b.version);
}

export function migrate(db: Database, extra: Array<{ version: number; up: string }> = []): void {
  const current = db.pragma('user_version', { simple: true }) as number;
  for (const m of migrationsFor(extra)) {
    if (m.version <= current) continue;
    db.transaction(() => {
      db.exec(m.up);
      db.pragma(`user_version = ${m.version}`);
    })();
  }
}
